package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/threadline/threadline/store/pgtest"
)

func TestUsage(t *testing.T) {
	t.Parallel()
	env := func(string) string { return "" }
	for _, tc := range []struct {
		args    []string
		wantErr string // "" for none
	}{
		{nil, "needs peer, load or floor"},
		{[]string{"--help"}, ""},
		{[]string{"bogus"}, `unknown subcommand "bogus"`},
		{[]string{"floor", "extra"}, "takes no arguments"},
	} {
		var stdout, stderr bytes.Buffer
		err := Main(context.Background(), tc.args, env, &stdout, &stderr)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("Main(%q): got %v, want no error", tc.args, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("Main(%q): got %v, want an error with %q", tc.args, err, tc.wantErr)
		}
		if len(tc.args) < 2 && !strings.Contains(stdout.String()+stderr.String(), "usage: threadline-bench peer|load|floor") {
			t.Errorf("Main(%q): got output %q, want the usage", tc.args, stdout.String()+stderr.String())
		}
	}
}

// TestBuiltCommandsTogether builds threadline and threadline-bench into one
// directory, as bin/ holds them, and runs `threadline-bench load` with no
// --server-bin on a small size: it must find the service beside itself.
func TestBuiltCommandsTogether(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds both commands and starts a service")
	}
	db := pgtest.New(t) // the bench creates (and drops) its own database beside it
	dir := t.TempDir()
	for _, name := range []string{"threadline", "threadline-bench"} {
		out, err := exec.Command("go", "build", "-o", filepath.Join(dir, name), "github.com/threadline/threadline/cmd/"+name).CombinedOutput()
		if err != nil {
			t.Fatalf("go build %s: %v\n%s", name, err, out)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "threadline-bench"), "load", "--k", "2", "--tokens", "5", "--rate", "500",
		"--rejoin-share", "0", "--ramp", "0", "--timeout", "1m", "--database-url", db)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("threadline-bench load: %v\nstderr:\n%s", err, stderr.String())
	}
	var r struct {
		Target        string `json:"target"`
		RunsCompleted int    `json:"runs_completed"`
		ExactlyOnce   bool   `json:"exactly_once"`
	}
	first, _, _ := strings.Cut(stdout.String(), "\n")
	if err := json.Unmarshal([]byte(first), &r); err != nil {
		t.Fatalf("first line: %v\n%s", err, first)
	}
	if want := fmt.Sprintf("child: %s serve", filepath.Join(dir, "threadline")); !strings.HasPrefix(r.Target, want) {
		t.Errorf("target = %q, want it to start with %q", r.Target, want)
	}
	if r.RunsCompleted != 2 || !r.ExactlyOnce {
		t.Errorf("runs_completed, exactly_once = %d, %v; want 2, true", r.RunsCompleted, r.ExactlyOnce)
	}
}
