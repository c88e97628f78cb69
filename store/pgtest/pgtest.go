// Package pgtest gives each test its own real Postgres database: one
// template database, migrated once per test binary, cloned per test with
// CREATE DATABASE … TEMPLATE and dropped when the test ends.
//
// It connects with THREADLINE_TEST_DATABASE_URL, the URL of a maintenance
// database as a user that may create databases (`make test` sets it). When
// that is unset it starts the project's own cluster with `deploy/pg.sh start
// --no-install` and uses the URL it prints, so a plain `go test ./...` works
// too where PostgreSQL is installed. A test run never installs anything:
// without PostgreSQL the tests fail saying to run `make test` (which
// installs it) or to set THREADLINE_TEST_DATABASE_URL.
//
// Test binaries run in parallel under `go test ./...`, so every database name
// carries its creator: tl_tmpl_<day>_<host>_<pid>_<random> for templates and
// tl_<day>_<host>_<pid>_<random> for clones. Nothing runs at process exit;
// instead, creating a template drops (best effort) the databases of dead
// processes on this host and any older than a day.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/threadline/threadline/store"
)

var (
	once     sync.Once
	admin    string // URL of the maintenance database
	template string // name of the migrated template
	initErr  error
	createMu sync.Mutex // one CREATE DATABASE … TEMPLATE at a time per process
	host     = hostID()
)

// hostID names this host and PID namespace in 6 hex digits, so that process
// ids in database names are only compared with processes that can be seen.
func hostID() string {
	h := fnv.New32a()
	name, _ := os.Hostname()
	ns, _ := os.Readlink("/proc/self/ns/pid")
	h.Write([]byte(name + "\x00" + ns))
	return fmt.Sprintf("%06x", h.Sum32()&0xffffff)
}

func ident(name string) string { return pgx.Identifier{name}.Sanitize() }

func dbName(prefix string) string {
	return fmt.Sprintf("%s%s_%s_%d_%08d", prefix, time.Now().UTC().Format("20060102"), host, os.Getpid(), rand.IntN(1e8))
}

func setup() {
	admin, initErr = adminURL(context.Background(), os.Getenv("THREADLINE_TEST_DATABASE_URL"), nil)
	if initErr != nil {
		return
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
	template = dbName("tl_tmpl_")
	if _, err := conn.Exec(ctx, `CREATE DATABASE `+ident(template)); err != nil {
		initErr = fmt.Errorf("create template: %w", err)
		return
	}
	err = store.MigrateUp(ctx, WithDatabase(admin, template))
	if err == nil {
		// A template nobody can connect to: CREATE DATABASE … TEMPLATE fails
		// while anyone is connected to its source.
		_, err = conn.Exec(ctx, `ALTER DATABASE `+ident(template)+` WITH IS_TEMPLATE true ALLOW_CONNECTIONS false`)
	}
	if err != nil {
		initErr = fmt.Errorf("migrate template %s: %w", template, err)
		_, _ = conn.Exec(ctx, `DROP DATABASE IF EXISTS `+ident(template)+` WITH (FORCE)`)
		return
	}
	// Connections that MigrateUp closed may still be on their way out.
	_, _ = conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1`, template)
}

// adminURL is the maintenance database's URL: url when set, else the
// project's own cluster's, started without installing anything (env is
// added to the script's environment).
func adminURL(ctx context.Context, url string, env []string) (string, error) {
	if url != "" {
		return url, nil
	}
	u, err := startCluster(ctx, os.Stderr, false, env)
	if errors.Is(err, ErrNoPostgres) {
		return "", errors.New("PostgreSQL is not installed, and go test never installs it: " +
			"run `make test` (which installs and starts the project's cluster), " +
			"or set THREADLINE_TEST_DATABASE_URL to a Postgres URL whose user may create databases")
	}
	if err != nil {
		return "", fmt.Errorf("%w (or set THREADLINE_TEST_DATABASE_URL)", err)
	}
	return u, nil
}

// New returns the URL of a fresh database cloned from the migrated template,
// dropped when the test ends.
func New(t testing.TB) string {
	t.Helper()
	once.Do(setup)
	if initErr != nil {
		t.Fatalf("pgtest: %v", initErr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("pgtest: connect: %v", err)
	}
	defer conn.Close(ctx)
	name := dbName("tl_")
	createMu.Lock()
	for attempt := 0; ; attempt++ {
		_, err = conn.Exec(ctx, `CREATE DATABASE `+ident(name)+` TEMPLATE `+ident(template))
		var pgErr *pgconn.PgError
		// 55006: "source database is being accessed by other users".
		if err == nil || attempt == 30 || !errors.As(err, &pgErr) || pgErr.Code != "55006" {
			break
		}
		time.Sleep(time.Duration(20*(attempt+1)) * time.Millisecond)
	}
	createMu.Unlock()
	if err != nil {
		t.Fatalf("pgtest: create database from template %s: %v", template, err)
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
		if _, err := c.Exec(ctx, `DROP DATABASE IF EXISTS `+ident(name)+` WITH (FORCE)`); err != nil {
			t.Errorf("pgtest: drop %s: %v", name, err)
		}
	})
	return WithDatabase(admin, name)
}

// Pool opens a pool to a fresh database (see New), closed when the test ends.
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(New(t))
	if err != nil {
		t.Fatalf("pgtest: pool: %v", err)
	}
	store.Configure(cfg) // the connections the service uses
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("pgtest: pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

var nameRE = regexp.MustCompile(`^tl_(?:tmpl_)?([0-9]{8})_([0-9a-f]{6})_([0-9]+)_[0-9]+$`)

// stale reports whether a database this package named belongs to a process
// that has exited, or is older than a day.
func stale(name string, now time.Time) bool {
	m := nameRE.FindStringSubmatch(name)
	if m == nil {
		return false
	}
	day, err := time.Parse("20060102", m[1])
	if err != nil {
		return false
	}
	if now.Sub(day) > 48*time.Hour { // the day began more than 48h ago: over a day old
		return true
	}
	if m[2] != host {
		return false // its process cannot be seen from here
	}
	pid, err := strconv.Atoi(m[3])
	if err != nil || pid == os.Getpid() {
		return false
	}
	err = syscall.Kill(pid, 0)
	return errors.Is(err, syscall.ESRCH)
}

// dropStale drops, best effort, databases left by test binaries that have
// exited or are older than a day. It uses its own connection (a failed ALTER
// of a database another process is dropping ends the connection) and runs in
// one process at a time.
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
	// datconnlimit -2 marks a database a DROP left half done (Postgres ≥ 15.4).
	rows, err := conn.Query(ctx, `SELECT datname FROM pg_database WHERE datname LIKE 'tl\_%' AND datconnlimit <> -2`)
	if err != nil {
		return
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return
	}
	now := time.Now().UTC()
	for _, n := range names {
		if !stale(n, now) {
			continue
		}
		if _, err := conn.Exec(ctx, `ALTER DATABASE `+ident(n)+` WITH IS_TEMPLATE false`); err != nil {
			if conn.IsClosed() {
				return
			}
			continue
		}
		_, _ = conn.Exec(ctx, `DROP DATABASE IF EXISTS `+ident(n)+` WITH (FORCE)`)
	}
}
