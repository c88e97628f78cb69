package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestReadyzWhileDraining: /readyz answers 503 "draining" once shutdown
// began, while new runs are refused.
func TestReadyzWhileDraining(t *testing.T) {
	t.Parallel()
	e := setup(t)
	resp, b := e.do("GET", "/readyz", nil)
	wantStatus(t, resp, b, http.StatusOK, "")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	e.svc.Shutdown(ctx)
	resp, b = e.do("GET", "/readyz", nil)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), `"draining"`) {
		t.Fatalf("/readyz while draining: got %d %s, want 503 draining", resp.StatusCode, b)
	}
}
