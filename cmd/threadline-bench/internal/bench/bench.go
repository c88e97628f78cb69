// Package bench holds what the benchmarks of threadline-bench share: the
// machine, the Postgres version and the commit they ran on, the project's
// own Postgres cluster when none is given, a CPU profile, and rounding.
package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/threadline/threadline/store/pgtest"
)

// Machine describes the machine a benchmark ran on.
type Machine struct {
	CPU      string `json:"cpu"`
	Cores    int    `json:"cores"`
	MemoryMB int64  `json:"memory_mb"`
	OS       string `json:"os"`
	Arch     string `json:"arch"`
}

// MachineInfo reads the CPU model and memory from /proc where it exists.
func MachineInfo() Machine {
	m := Machine{CPU: "unknown", Cores: runtime.NumCPU(), OS: runtime.GOOS, Arch: runtime.GOARCH}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), ":")
			if ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) >= 2 && fields[0] == "MemTotal:" {
				if kb, err := strconv.ParseInt(fields[1], 10, 64); err == nil {
					m.MemoryMB = kb / 1024
				}
				break
			}
		}
		f.Close()
	}
	return m
}

// PGVersion returns the server's version string (SELECT version()), or
// "unknown".
func PGVersion(ctx context.Context, conn *pgx.Conn) string {
	var v string
	if err := conn.QueryRow(ctx, `SELECT version()`).Scan(&v); err != nil {
		return "unknown"
	}
	return v
}

// ThreadRowBytes sums pg_column_size of the live rows that belong to a
// thread: its row, checkpoints, runs and run event log (no indexes, page
// overhead or dead row versions). It returns the query's error.
func ThreadRowBytes(ctx context.Context, conn *pgx.Conn, threadID uuid.UUID) (int64, error) {
	var n int64
	err := conn.QueryRow(ctx, `SELECT
		(SELECT coalesce(sum(pg_column_size(t.*)), 0) FROM threads t WHERE t.id = $1) +
		(SELECT coalesce(sum(pg_column_size(c.*)), 0) FROM checkpoints c WHERE c.thread_id = $1) +
		(SELECT coalesce(sum(pg_column_size(r.*)), 0) FROM runs r WHERE r.thread_id = $1) +
		(SELECT coalesce(sum(pg_column_size(e.*)), 0) FROM run_events e JOIN runs r ON r.id = e.run_id WHERE r.thread_id = $1)`,
		threadID).Scan(&n)
	return n, err
}

// GitCommit returns `git rev-parse HEAD` of the checkout around the binary
// or, failing that, the working directory, or "unknown".
func GitCommit() string {
	var dirs []string
	if exe, err := os.Executable(); err == nil {
		if r, err := filepath.EvalSymlinks(exe); err == nil {
			exe = r
		}
		dirs = append(dirs, filepath.Dir(exe))
	}
	if wd, err := os.Getwd(); err == nil {
		dirs = append(dirs, wd)
	}
	for _, dir := range dirs {
		out, err := exec.Command("git", "-C", dir, "rev-parse", "HEAD").Output()
		if s := strings.TrimSpace(string(out)); err == nil && len(s) == 40 {
			return s
		}
	}
	return "unknown"
}

// OwnCluster starts (or reuses) the project's own Postgres cluster with
// deploy/pg.sh start and returns its URL; the script's progress goes to
// stderr. It fails outside a Threadline checkout.
func OwnCluster(ctx context.Context, stderr io.Writer) (string, error) {
	return pgtest.StartOwnCluster(ctx, stderr, true)
}

// ScratchDatabase is TempDatabase on the server of admin or, when admin
// is "", on the project's own cluster (OwnCluster). The benches that build
// a database of their own (peer, search) start with it.
func ScratchDatabase(ctx context.Context, admin, prefix string, stderr io.Writer, progress func(string, ...any)) (TempDB, error) {
	if admin == "" {
		progress("no --database-url or $THREADLINE_DATABASE_URL: starting the project's own cluster (deploy/pg.sh start)")
		var err error
		if admin, err = OwnCluster(ctx, stderr); err != nil {
			return TempDB{}, fmt.Errorf("%w; set THREADLINE_DATABASE_URL (or --database-url) to a Postgres URL whose user may CREATE DATABASE", err)
		}
	}
	return TempDatabase(ctx, admin, prefix, progress)
}

// RedactURL is a Postgres URL with its password hidden, for logs.
func RedactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// Round rounds x to digits decimal places, for readable JSON.
func Round(x float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(x*p) / p
}

// StartProfile starts a CPU profile of this process into path
// (--cpuprofile), or nothing when path is empty; stop ends it. The error
// says why the file could not be written.
func StartProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// TempDB is a database a benchmark made for itself.
type TempDB struct {
	Name string
	URL  string
	// Drop removes it (WITH (FORCE)), reporting through the progress
	// TempDatabase was given; it never fails.
	Drop func()
}

// TempDatabase creates a database named prefix_<pid>_<random> on the
// cluster of admin (a URL whose user may CREATE DATABASE). Errors: the
// connection or the CREATE failed.
func TempDatabase(ctx context.Context, admin, prefix string, progress func(string, ...any)) (TempDB, error) {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return TempDB{}, fmt.Errorf("connect to %s: %w (set THREADLINE_DATABASE_URL or --database-url)", RedactURL(admin), err)
	}
	name := fmt.Sprintf("%s_%d_%08d", prefix, os.Getpid(), rand.IntN(1e8))
	if _, err := conn.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{name}.Sanitize()); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return TempDB{}, fmt.Errorf("create database %s: %w", name, err)
	}
	progress("database %s created on %s", name, RedactURL(admin))
	drop := func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		defer conn.Close(dctx)
		if _, err := conn.Exec(dctx, `DROP DATABASE IF EXISTS `+pgx.Identifier{name}.Sanitize()+` WITH (FORCE)`); err != nil {
			progress("could not drop database %s: %v (drop it by hand)", name, err)
			return
		}
		progress("database %s dropped", name)
	}
	return TempDB{Name: name, URL: pgtest.WithDatabase(admin, name), Drop: drop}, nil
}
