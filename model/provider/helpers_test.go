package provider_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/threadline/threadline/model/internal/modeltest"

	"github.com/threadline/threadline/model"
)

// The helpers every model test shares (model/internal/modeltest).
var (
	userReq    = modeltest.UserReq
	streamText = modeltest.StreamText
	textOf     = modeltest.TextOf
	collect    = modeltest.Collect
)

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
