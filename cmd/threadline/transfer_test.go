package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/threadline/threadline/store/pgtest"
)

// TestExportImportCommands: threadline import writes a ChatGPT file for a
// caller, threadline export writes one file per thread, and a bad file
// imports nothing.
func TestExportImportCommands(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	env := func(k string) string {
		if k == "THREADLINE_DATABASE_URL" {
			return db
		}
		return ""
	}
	ctx := context.Background()
	run := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		err := Main(ctx, args, env, &out, &errOut)
		if errOut.Len() > 0 && err == nil && strings.Contains(errOut.String(), "\r") {
			t.Errorf("progress written to a stderr that is not a terminal: %q", errOut.String())
		}
		return out.String(), err
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte(`[{"title":"x","mapping":{"a":{"parent":"gone","message":null}}}]`), 0o644)
	if _, err := run("import", "--caller", "alice", bad); err == nil || !strings.Contains(err.Error(), `parent "gone" not found`) {
		t.Fatalf("bad file: %v", err)
	}
	out, err := run("import", "--caller", "alice", "../../thread/export/testdata/chatgpt/conversations.json")
	if err != nil || !strings.Contains(out, "imported 2 threads (10 messages)") {
		t.Fatalf("import: %q %v", out, err)
	}
	dir := t.TempDir()
	if out, err = run("export", "--caller", "alice", "--out", dir); err != nil || !strings.Contains(out, "exported 2 threads") {
		t.Fatalf("export: %q %v", out, err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	if len(files) != 2 {
		t.Fatalf("export wrote %v", files)
	}
	if _, err = run("export", "--all-callers", "--format", "markdown", "--out", dir); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "alice", "cccccccc-0000-4000-8000-000000000001.md"))
	if err != nil || !bytes.Contains(md, []byte("**Tool call `python`**")) {
		t.Fatalf("markdown of the imported conversation: %v\n%s", err, md)
	}
	// The exported JSON imports back (under new ids: these are taken).
	if out, err = run("import", "--caller", "bob", files[0]); err != nil || !strings.Contains(out, "imported 1 threads") {
		t.Fatalf("import of an export: %q %v", out, err)
	}
}
