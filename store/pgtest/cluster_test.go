package pgtest

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// noPostgres is an environment for deploy/pg.sh in which PostgreSQL is not
// installed (an empty THREADLINE_PG_LIBDIR), the cluster folder is the
// test's own, and apt-get and sudo are stand-ins that only leave a mark:
// it returns the environment and the mark's path.
func noPostgres(t *testing.T) (env []string, mark string) {
	t.Helper()
	dir := t.TempDir()
	bin, lib := filepath.Join(dir, "bin"), filepath.Join(dir, "lib")
	mark = filepath.Join(dir, "installed")
	for _, d := range []string{bin, lib} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	stub := "#!/bin/sh\necho \"$0 $*\" >> '" + mark + "'\nexit 0\n"
	for _, name := range []string{"apt-get", "sudo"} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(stub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return []string{
		"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"),
		"THREADLINE_PG_LIBDIR=" + lib,
		"THREADLINE_PGDATA=" + filepath.Join(dir, "pg"),
		"THREADLINE_PGPORT=1",
	}, mark
}

// TestNoInstallWithoutPostgres: where PostgreSQL is not installed, the
// cluster start a test run uses refuses to install it, by flag or by
// THREADLINE_PG_INSTALL=0, and pgtest says what to do instead.
func TestNoInstallWithoutPostgres(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		install bool
		env     string
	}{
		{"start --no-install", false, ""},
		{"THREADLINE_PG_INSTALL=0", true, "THREADLINE_PG_INSTALL=0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env, mark := noPostgres(t)
			if tt.env != "" {
				env = append(env, tt.env)
			}
			var stderr bytes.Buffer
			u, err := startCluster(context.Background(), &stderr, tt.install, env)
			if !errors.Is(err, ErrNoPostgres) {
				t.Fatalf("start: got %q, %v; want ErrNoPostgres (stderr: %s)", u, err, stderr.Bytes())
			}
			if b, err := os.ReadFile(mark); err == nil {
				t.Errorf("start ran the installer: %s", b)
			}
			if !strings.Contains(stderr.String(), "not installed") {
				t.Errorf("stderr: got %q, want it to say PostgreSQL is not installed", stderr.String())
			}
		})
	}
	t.Run("pgtest's message", func(t *testing.T) {
		t.Parallel()
		env, mark := noPostgres(t)
		_, err := adminURL(context.Background(), "", env)
		if err == nil || !strings.Contains(err.Error(), "make test") || !strings.Contains(err.Error(), "THREADLINE_TEST_DATABASE_URL") {
			t.Errorf("adminURL: got %v, want an error naming make test and THREADLINE_TEST_DATABASE_URL", err)
		}
		if b, err := os.ReadFile(mark); err == nil {
			t.Errorf("adminURL ran the installer: %s", b)
		}
	})
}

// TestInstallStandInsCatchInstalls is the control of
// TestNoInstallWithoutPostgres: with installing allowed, the same
// environment does reach the apt-get (or sudo) stand-in, so its absence
// above means something.
func TestInstallStandInsCatchInstalls(t *testing.T) {
	t.Parallel()
	if os.Geteuid() == 0 {
		// As root the script writes /etc/postgresql-common/createcluster.conf
		// itself when it is missing: only run where that writes nothing.
		if _, err := os.Stat("/etc/postgresql-common/createcluster.conf"); err != nil {
			t.Skip("as root without /etc/postgresql-common/createcluster.conf the install would write it")
		}
	}
	env, mark := noPostgres(t)
	var stderr bytes.Buffer
	if u, err := startCluster(context.Background(), &stderr, true, env); err == nil || errors.Is(err, ErrNoPostgres) {
		t.Fatalf("start with install: got %q, %v; want the script's failure after a stand-in install (stderr: %s)", u, err, stderr.Bytes())
	}
	b, err := os.ReadFile(mark)
	if err != nil || !strings.Contains(string(b), "apt-get") {
		t.Errorf("installer stand-ins: got %q (%v), want an apt-get call (stderr: %s)", b, err, stderr.Bytes())
	}
}
