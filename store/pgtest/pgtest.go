// Package pgtest gives each test its own real Postgres database: one
// template database, migrated once per test binary, cloned per test with
// CREATE DATABASE … TEMPLATE. It starts the project's own cluster through
// deploy/pg.sh when THREADLINE_TEST_DATABASE_URL is not set.
package pgtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/threadline/threadline/store"
)

var (
	once     sync.Once
	admin    string // URL of the maintenance database
	template string // name of the migrated template
	initErr  error
	createMu sync.Mutex
)

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

func withDB(base, name string) string {
	u, err := url.Parse(base)
	if err != nil {
		return base
	}
	u.Path = "/" + name
	return u.String()
}

func setup() {
	admin = os.Getenv("THREADLINE_TEST_DATABASE_URL")
	if admin == "" {
		root, err := repoRoot()
		if err != nil {
			initErr = err
			return
		}
		cmd := exec.Command(filepath.Join(root, "deploy", "pg.sh"), "start")
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			initErr = fmt.Errorf("deploy/pg.sh start: %w", err)
			return
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		admin = strings.TrimSpace(lines[len(lines)-1])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		initErr = fmt.Errorf("connect to %s: %w", admin, err)
		return
	}
	defer conn.Close(ctx)
	dropStale(ctx)
	template = fmt.Sprintf("tl_tmpl_%s_%d_%06d", time.Now().UTC().Format("20060102"), os.Getpid(), rand.IntN(1e6))
	if _, err := conn.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{template}.Sanitize()); err != nil {
		initErr = fmt.Errorf("create template: %w", err)
		return
	}
	if err := store.MigrateUp(ctx, withDB(admin, template)); err != nil {
		initErr = fmt.Errorf("migrate template: %w", err)
		return
	}
	// Mark it a template so nobody keeps a connection to it by accident.
	if _, err := conn.Exec(ctx, `ALTER DATABASE `+pgx.Identifier{template}.Sanitize()+` WITH IS_TEMPLATE true`); err != nil {
		initErr = fmt.Errorf("mark template: %w", err)
	}
}

// New returns the URL of a fresh migrated database, dropped when the test ends.
func New(t testing.TB) string {
	t.Helper()
	once.Do(setup)
	if initErr != nil {
		t.Fatalf("pgtest: %v", initErr)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("pgtest: connect: %v", err)
	}
	defer conn.Close(ctx)
	name := fmt.Sprintf("tl_%d_%08d", os.Getpid(), rand.IntN(1e8))
	createMu.Lock()
	for attempt := 0; ; attempt++ {
		_, err = conn.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{name}.Sanitize()+` TEMPLATE `+pgx.Identifier{template}.Sanitize())
		if err == nil || attempt == 20 || !strings.Contains(err.Error(), "being accessed by other users") {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	createMu.Unlock()
	if err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Errorf("pgtest: drop %s: %v", name, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, `DROP DATABASE IF EXISTS `+pgx.Identifier{name}.Sanitize()+` WITH (FORCE)`); err != nil {
			t.Errorf("pgtest: drop %s: %v", name, err)
		}
	})
	return withDB(admin, name)
}

// Pool opens a pool to a fresh database, closed when the test ends.
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), New(t))
	if err != nil {
		t.Fatalf("pgtest: pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// dropStale drops, best effort, databases left by test binaries that have
// exited. It uses its own connection (a failed ALTER of a database another
// process is dropping ends the connection) and one process at a time.
func dropStale(ctx context.Context) {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	var locked bool
	if conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(727274)`).Scan(&locked) != nil || !locked {
		return
	}
	rows, err := conn.Query(ctx, `SELECT datname FROM pg_database WHERE datname ~ '^tl_(tmpl_[0-9]+_)?[0-9]+_' AND datconnlimit <> -2`)
	if err == nil {
		names, _ := pgx.CollectRows(rows, pgx.RowTo[string])
		for _, n := range names {
			parts := strings.Split(strings.TrimPrefix(n, "tl_tmpl_"), "_")
			pidField := parts[0]
			if strings.HasPrefix(n, "tl_tmpl_") && len(parts) > 1 {
				pidField = parts[1]
			} else if !strings.HasPrefix(n, "tl_tmpl_") {
				pidField = strings.Split(strings.TrimPrefix(n, "tl_"), "_")[0]
			}
			pid, err := strconv.Atoi(pidField)
			if err != nil || pid == os.Getpid() || syscall.Kill(pid, 0) == nil {
				continue
			}
			id := pgx.Identifier{n}.Sanitize()
			_, _ = conn.Exec(ctx, `ALTER DATABASE `+id+` WITH IS_TEMPLATE false`)
			_, _ = conn.Exec(ctx, `DROP DATABASE IF EXISTS `+id+` WITH (FORCE)`)
		}
	}
}
