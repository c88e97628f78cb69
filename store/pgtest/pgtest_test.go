package pgtest

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestDatabasesAreIsolated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := New(t), New(t)
	if a == b {
		t.Fatalf("New returned the same database twice: %s", a)
	}
	ca, err := pgx.Connect(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Close(ctx)
	cb, err := pgx.Connect(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close(ctx)
	if _, err := ca.Exec(ctx, `CREATE TABLE only_in_a (x int)`); err != nil {
		t.Fatal(err)
	}
	var inA, inB bool
	const q = `SELECT to_regclass('only_in_a') IS NOT NULL`
	if err := ca.QueryRow(ctx, q).Scan(&inA); err != nil {
		t.Fatal(err)
	}
	if err := cb.QueryRow(ctx, q).Scan(&inB); err != nil {
		t.Fatal(err)
	}
	if !inA || inB {
		t.Fatalf("table only_in_a: in a %v, in b %v; want true, false", inA, inB)
	}
}

// Every clone starts migrated: the template ran store.MigrateUp.
func TestCloneIsMigrated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := Pool(t)
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("clone has no tables in schema public; want the migrated schema")
	}
}

// Many parallel clones of the one template, while the clones are in use.
func TestManyParallelClones(t *testing.T) {
	t.Parallel()
	for i := range 8 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool := Pool(t)
			if _, err := pool.Exec(ctx, `CREATE TABLE t (x int); INSERT INTO t VALUES (1)`); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestCleanupDropsDatabase(t *testing.T) {
	t.Parallel()
	var name string
	t.Run("inner", func(t *testing.T) {
		cfg, err := pgx.ParseConfig(New(t))
		if err != nil {
			t.Fatal(err)
		}
		name = cfg.Database
	})
	ctx := context.Background()
	c, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var exists bool
	if err := c.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Fatalf("database %s still exists after its test ended", name)
	}
}

func TestStale(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	today, old := "20261122", "20261120"
	me := os.Getpid()
	dead := 1 << 30 // above pid_max: no such process
	for _, tc := range []struct {
		name string
		want bool
	}{
		{fmt.Sprintf("tl_tmpl_%s_%s_%d_1", today, host, me), false},
		{fmt.Sprintf("tl_%s_%s_%d_12345678", today, host, me), false},
		{fmt.Sprintf("tl_%s_%s_%d_1", today, host, 1), false}, // pid 1 lives
		{fmt.Sprintf("tl_%s_%s_%d_1", today, host, dead), true},
		{fmt.Sprintf("tl_tmpl_%s_%s_%d_1", today, host, dead), true},
		{fmt.Sprintf("tl_%s_%s_%d_1", today, "000000", dead), host == "000000"}, // other host: not judged by pid
		{fmt.Sprintf("tl_%s_%s_%d_1", old, "abcdef", me), true},                 // over a day old
		{fmt.Sprintf("tl_%s_%s_%d_1", "20261121", "abcdef", 1), false},
		{"tl_something_else", false},
		{"threadline", false},
	} {
		if got := stale(tc.name, now); got != tc.want {
			t.Errorf("stale(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
}
