package api

import (
	"net/http"
	"testing"

	"github.com/threadline/threadline/checkpoint/errcode"
)

// TestStatusesCoverEveryCode keeps the one code-to-status table whole: a
// code added to errcode without a status here fails.
func TestStatusesCoverEveryCode(t *testing.T) {
	t.Parallel()
	for _, c := range errcode.Codes() {
		t.Run(string(c), func(t *testing.T) {
			t.Parallel()
			st, ok := statuses[c]
			if !ok {
				t.Fatalf("statuses[%q]: missing, want an HTTP status", c)
			}
			if st < 400 || st > 599 || http.StatusText(st) == "" {
				t.Errorf("statuses[%q]: got %d, want a 4xx or 5xx status", c, st)
			}
		})
	}
	if len(statuses) != len(errcode.Codes()) {
		t.Errorf("statuses: got %d entries, want one per code (%d)", len(statuses), len(errcode.Codes()))
	}
}

func TestStatus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		code errcode.Code
		want int
	}{
		{errcode.Invalid, http.StatusBadRequest},
		{errcode.Unauthenticated, http.StatusUnauthorized},
		{errcode.NotFound, http.StatusNotFound},
		{errcode.RunInProgress, http.StatusConflict},
		{errcode.Conflict, http.StatusConflict},
		{errcode.TooLarge, http.StatusRequestEntityTooLarge},
		{errcode.UnsupportedMediaType, http.StatusUnsupportedMediaType},
		{errcode.InvalidFork, http.StatusUnprocessableEntity},
		{errcode.RateLimited, http.StatusTooManyRequests},
		{errcode.MethodNotAllowed, http.StatusMethodNotAllowed},
		{errcode.Unavailable, http.StatusServiceUnavailable},
		{errcode.Internal, http.StatusInternalServerError},
		{errcode.Code("no_such_code"), http.StatusInternalServerError},
	}
	for _, tt := range tests {
		if got := status(tt.code); got != tt.want {
			t.Errorf("status(%q): got %d, want %d", tt.code, got, tt.want)
		}
	}
}
