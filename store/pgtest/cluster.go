package pgtest

// The project's own Postgres cluster (deploy/pg.sh), for tests, benchmarks
// and tools that need a server when none is configured. It lives here, not
// in the store, because only tests and tools start a cluster.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// candidateRoots lists the directories a repository root is looked for
// from: the binary's directory and the working directory.
func candidateRoots() []string {
	var out []string
	if exe, err := os.Executable(); err == nil {
		if r, err := filepath.EvalSymlinks(exe); err == nil {
			exe = r
		}
		out = append(out, filepath.Dir(exe))
	}
	if wd, err := os.Getwd(); err == nil {
		out = append(out, wd)
	}
	return out
}

// RepoRoot finds the Threadline checkout (the directory holding
// deploy/pg.sh and go.mod) above the binary or the working directory.
func RepoRoot() (string, error) {
	for _, start := range candidateRoots() {
		for dir := start; ; dir = filepath.Dir(dir) {
			if fileExists(filepath.Join(dir, "deploy", "pg.sh")) && fileExists(filepath.Join(dir, "go.mod")) {
				return dir, nil
			}
			if filepath.Dir(dir) == dir {
				break
			}
		}
	}
	return "", errors.New("no Threadline checkout (deploy/pg.sh) above the binary or the working directory")
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// ErrNoPostgres is StartOwnCluster's error when PostgreSQL is not installed
// and installing it was not allowed.
var ErrNoPostgres = errors.New("PostgreSQL is not installed")

// StartOwnCluster runs deploy/pg.sh start (which starts the project's own
// cluster or reuses the running one) and returns the URL it prints. Its
// progress goes to stderr. With install false the script never installs
// PostgreSQL (start --no-install): without it, the error is ErrNoPostgres.
func StartOwnCluster(ctx context.Context, stderr io.Writer, install bool) (string, error) {
	return startCluster(ctx, stderr, install, nil)
}

// startCluster is StartOwnCluster with env added to the script's
// environment.
func startCluster(ctx context.Context, stderr io.Writer, install bool, env []string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	args := []string{"start"}
	if !install {
		args = append(args, "--no-install")
	}
	cmd := exec.CommandContext(ctx, filepath.Join(root, "deploy", "pg.sh"), args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = stderr
	// A server started by the script must not keep the command waiting on
	// a pipe it inherited.
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 4 {
		return "", fmt.Errorf("deploy/pg.sh start --no-install: %w", ErrNoPostgres)
	}
	if err != nil {
		return "", fmt.Errorf("deploy/pg.sh %s: %w", strings.Join(args, " "), err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	u := strings.TrimSpace(lines[len(lines)-1])
	if u == "" {
		return "", errors.New("deploy/pg.sh start printed no URL")
	}
	return u, nil
}

// WithDatabase is base with its database name replaced by name.
func WithDatabase(base, name string) string {
	u, err := url.Parse(base)
	if err != nil {
		return base
	}
	u.Path = "/" + name
	u.RawPath = ""
	return u.String()
}
