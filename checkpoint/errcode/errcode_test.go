package errcode_test

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/google/uuid"
	"github.com/threadline/threadline/checkpoint/errcode"
)

func TestOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want errcode.Code
	}{
		{"nil", nil, ""},
		{"uncoded", io.EOF, errcode.Internal},
		{"coded", errcode.New(errcode.NotFound, "thread %d not found", 7), errcode.NotFound},
		{"wrapped", fmt.Errorf("run create: %w", errcode.New(errcode.RunInProgress, "busy")), errcode.RunInProgress},
		{"joined behind an uncoded error", errors.Join(io.EOF, errcode.New(errcode.Conflict, "taken")), errcode.Conflict},
		{"first coded in the chain", fmt.Errorf("%w: %w", errcode.New(errcode.Unavailable, "a"), errcode.New(errcode.Invalid, "b")), errcode.Unavailable},
		{"typed nil", (*errcode.Error)(nil), errcode.Internal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := errcode.Of(tt.err); got != tt.want {
				t.Errorf("Of(%v): got %q, want %q", tt.err, got, tt.want)
			}
		})
	}
}

func TestMessage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"coded", errcode.New(errcode.TooLarge, "body is %d bytes", 9), "body is 9 bytes"},
		{"wrapped keeps the caller-safe message", fmt.Errorf("store: %w", errcode.New(errcode.NotFound, "run x not found")), "run x not found"},
		{"uncoded hides its text", errors.New("dial tcp 10.0.0.1: secret"), "internal error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := errcode.Message(tt.err); got != tt.want {
				t.Errorf("Message(%v): got %q, want %q", tt.err, got, tt.want)
			}
		})
	}
}

func TestIsByIdentity(t *testing.T) {
	t.Parallel()
	a := errcode.New(errcode.Unavailable, "shutting down")
	b := errcode.New(errcode.Unavailable, "shutting down")
	wrapped := fmt.Errorf("start: %w", a)
	tests := []struct {
		name   string
		err    error
		target error
		want   bool
	}{
		{"same error", a, a, true},
		{"wrapped same error", wrapped, a, true},
		{"same code and message, other error", a, b, false},
		{"wrapped, other error of the code", wrapped, b, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := errors.Is(tt.err, tt.target); got != tt.want {
				t.Errorf("errors.Is(%v, %v): got %v, want %v", tt.err, tt.target, got, tt.want)
			}
		})
	}
}

func TestError(t *testing.T) {
	t.Parallel()
	run, msg := uuid.New(), uuid.New()
	e := &errcode.Error{Code: errcode.RunInProgress, Message: "busy", RunID: run, MessageID: msg}
	if got, want := e.Error(), "run_in_progress: busy"; got != want {
		t.Errorf("Error(): got %q, want %q", got, want)
	}
	got, ok := errcode.As(fmt.Errorf("ctx: %w", e))
	if !ok || got.RunID != run || got.MessageID != msg {
		t.Errorf("As: got %+v, %v; want the error naming run %s and message %s", got, ok, run, msg)
	}
	if _, ok := errcode.As(io.EOF); ok {
		t.Errorf("As(io.EOF): got ok, want none")
	}
}

func TestCodes(t *testing.T) {
	t.Parallel()
	seen := map[errcode.Code]bool{}
	for _, c := range errcode.Codes() {
		if c == "" || seen[c] {
			t.Errorf("Codes(): %q is empty or repeated", c)
		}
		seen[c] = true
	}
	// The contract's strings, spelled out once more so a renamed constant
	// fails here rather than on the wire.
	for _, want := range []string{"invalid_request", "unauthenticated", "not_found", "conflict",
		"run_in_progress", "too_large", "unsupported_media_type", "invalid_fork", "rate_limited",
		"method_not_allowed", "unavailable", "internal",
		"model_not_configured", "model_auth", "model_timeout", "model_error", "run_interrupted"} {
		if !seen[errcode.Code(want)] {
			t.Errorf("Codes(): lacks %q", want)
		}
	}
	if len(seen) != 17 {
		t.Errorf("Codes(): got %d codes, want 17", len(seen))
	}
}

func TestIsModel(t *testing.T) {
	t.Parallel()
	for _, c := range errcode.Codes() {
		want := c == errcode.ModelNotConfigured || c == errcode.ModelAuth || c == errcode.ModelTimeout || c == errcode.ModelError
		if got := c.IsModel(); got != want {
			t.Errorf("%q.IsModel(): got %v, want %v", c, got, want)
		}
	}
}
