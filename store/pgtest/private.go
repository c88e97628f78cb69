package pgtest

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Private is a Postgres cluster of one test's own: deploy/pg.sh in a
// temporary folder on a free loopback port, never installing anything. The
// test may stop and start it (the shared cluster of New must never be
// stopped). It is stopped and removed when the test ends.
type Private struct {
	t    testing.TB
	env  []string
	root string
	dir  string
	// URL is the cluster's maintenance database (postgres), as superuser.
	URL string
}

// privateSlots bounds how many private clusters one test binary runs at
// once: each is a whole server, and the machines that run the tests are
// small.
var privateSlots = make(chan struct{}, 3)

// NewPrivate creates and starts a private cluster; it fails the test when
// PostgreSQL is not installed or the cluster does not start. It waits while
// as many private clusters as privateSlots allows run for other tests.
func NewPrivate(t testing.TB) *Private {
	t.Helper()
	privateSlots <- struct{}{}
	t.Cleanup(func() { <-privateSlots })
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	// A short folder: the unix socket path must stay under 108 bytes.
	dir, err := os.MkdirTemp("", "tlpg")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	c := &Private{t: t, root: root, dir: dir, env: append(os.Environ(), "THREADLINE_PG_INSTALL=0",
		"THREADLINE_PGDATA="+dir, "THREADLINE_PGPORT="+strconv.Itoa(port))}
	t.Cleanup(func() {
		c.run("stop")
		_ = os.RemoveAll(dir)
	})
	c.URL = c.run("start")
	return c
}

// Stop stops the cluster (pg_ctl stop -m fast: every session is ended).
func (c *Private) Stop() { c.t.Helper(); c.run("stop") }

// Start starts the stopped cluster again on the same port and waits until
// it accepts connections.
func (c *Private) Start() { c.t.Helper(); c.run("start") }

// Crash stops the cluster as a crash would: SIGQUIT to the postmaster,
// Postgres's immediate shutdown (every session ends at once, no
// checkpoint; the next Start runs crash recovery). It waits until the
// server is gone.
func (c *Private) Crash() {
	c.t.Helper()
	b, err := os.ReadFile(filepath.Join(c.dir, "data", "postmaster.pid"))
	if err != nil {
		c.t.Fatalf("crash: %v", err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		c.t.Fatalf("crash: postmaster.pid: %v", err)
	}
	if err := syscall.Kill(pid, syscall.SIGQUIT); err != nil {
		c.t.Fatalf("crash: signal the postmaster (%d): %v", pid, err)
	}
	for deadline := time.Now().Add(time.Minute); syscall.Kill(pid, 0) == nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			c.t.Fatalf("crash: the postmaster (%d) still runs a minute after SIGQUIT", pid)
		}
	}
}

// Restart stops the cluster and starts it again at once, in one script
// run, and returns how long the server was down (from the stop's start to
// the restarted server accepting connections).
func (c *Private) Restart() time.Duration {
	c.t.Helper()
	script := filepath.Join(c.root, "deploy", "pg.sh")
	begin := time.Now()
	c.exec("bash", "-c", `"$1" stop && "$1" start`, "pg-restart", script)
	return time.Since(begin)
}

// run runs deploy/pg.sh arg and returns the last line it printed.
func (c *Private) run(arg string) string {
	c.t.Helper()
	return c.exec(filepath.Join(c.root, "deploy", "pg.sh"), arg)
}

func (c *Private) exec(name string, args ...string) string {
	c.t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = c.env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	// A server started by the script must not keep the command waiting
	// on a pipe it inherited.
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.Output()
	if err != nil {
		c.t.Fatalf("deploy/pg.sh %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
