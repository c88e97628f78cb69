package main

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
)

// TestToolApproval: THREADLINE_TOOL_APPROVAL marks the built-in tools it
// names, and only those; a name that is no built-in tool stops the start.
func TestToolApproval(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg, _, err := openTools(context.Background(), Config{ToolApproval: []string{"clock"}}, log)
	if err != nil {
		t.Fatalf("openTools: %v", err)
	}
	got := map[string]bool{}
	for _, s := range reg.Specs() {
		got[s.Name] = s.Approval
	}
	if !got["clock"] || got["calculator"] || got["wait"] {
		t.Errorf("approval by tool: got %v, want clock only", got)
	}
	_, _, err = openTools(context.Background(), Config{ToolApproval: []string{"rm"}}, log)
	if err == nil || !strings.Contains(err.Error(), "THREADLINE_TOOL_APPROVAL") {
		t.Errorf("unknown tool: got %v, want an error naming THREADLINE_TOOL_APPROVAL", err)
	}
}
