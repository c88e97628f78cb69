package provider_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/model"
	"github.com/threadline/threadline/thread"
)

// Helpers shared by this package's tests (copies of model/builtin's).

func userReq(text string, call int64) thread.ModelRequest {
	return thread.ModelRequest{Call: call, Messages: []thread.ModelMessage{
		{Role: checkpoint.RoleSystem, Parts: []thread.ModelPart{{Type: "text", Text: "be brief"}}},
		{Role: checkpoint.RoleUser, Parts: []thread.ModelPart{{Type: "text", Text: "an earlier question"}}},
		{Role: checkpoint.RoleAssistant, Parts: []thread.ModelPart{{Type: "text", Text: "an earlier answer"}}},
		{Role: checkpoint.RoleUser, Parts: []thread.ModelPart{{Type: "text", Text: text}}},
	}}
}

// streamText calls m as a chat call does: the text deltas reach on, other
// deltas are dropped.
func streamText(m thread.Model, ctx context.Context, req thread.ModelRequest, on func(string) error) (thread.ModelResult, error) {
	return m.Stream(ctx, req, textOf(on))
}

// textOf passes the text deltas of a reply to on.
func textOf(on func(string) error) func(thread.Delta) error {
	return func(d thread.Delta) error {
		if d.Kind != thread.DeltaText || d.Text == "" {
			return nil
		}
		return on(d.Text)
	}
}

func envFunc(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "models.json")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func newRegistry(t *testing.T, vars map[string]string) *model.Registry {
	t.Helper()
	r, err := model.NewRegistry(envFunc(vars))
	if err != nil {
		t.Fatalf("NewRegistry: got %v, want nil", err)
	}
	return r
}

// streamErr runs a model on a small request and returns its error.

func collect(t *testing.T, m thread.Model, ctx context.Context, req thread.ModelRequest) ([]string, thread.ModelResult, error) {
	t.Helper()
	var toks []string
	res, err := streamText(m, ctx, req, func(s string) error {
		toks = append(toks, s)
		return nil
	})
	return toks, res, err
}
