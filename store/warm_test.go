package store_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/threadline/threadline/store"
	"github.com/threadline/threadline/store/pgtest"
)

// TestWarm: the warm-up runs every statement of a turn on the current
// schema and leaves nothing behind; on a schema without Threadline's
// tables it fails and the connection stays usable.
func TestWarm(t *testing.T) {
	t.Parallel()
	conn := acquire(t)
	ctx := context.Background()
	if err := store.Warm(ctx, conn.Conn()); err != nil {
		t.Fatalf("Warm: %v, want nil", err)
	}
	for _, table := range []string{"threads", "checkpoints", "runs", "run_events"} {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM `+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("%s has %d rows after the warm-up, want 0", table, n)
		}
	}

	if _, err := conn.Exec(ctx, `CREATE SCHEMA empty; SET search_path = empty`); err != nil {
		t.Fatal(err)
	}
	if err := store.Warm(ctx, conn.Conn()); err == nil {
		t.Errorf("Warm without the schema: nil error, want one")
	}
	var one int
	if err := conn.QueryRow(ctx, `SELECT 1`).Scan(&one); err != nil || one != 1 {
		t.Errorf("after a failed warm-up: SELECT 1 = %d, %v; want 1, nil", one, err)
	}
	if _, err := conn.Exec(ctx, `RESET search_path`); err != nil {
		t.Fatal(err)
	}
}

// TestWarmLog: the group commit's connection warms its log append alone.
// A whole turn's warm-up there would leave one more turn's dead rows in
// the turn tables of every fresh database (each 8 KiB page of them shows
// in bench peer's bytes_per_turn).
func TestWarmLog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// A fresh database on a connection of its own, which nothing has
	// warmed: nothing has written to its tables yet.
	conn, err := pgx.Connect(ctx, pgtest.New(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	store.Ready(ctx, conn)
	tables := []string{"threads", "checkpoints", "runs", "run_events"}
	size := func(table string) int64 {
		var n int64
		if err := conn.QueryRow(ctx, `SELECT pg_total_relation_size($1::regclass)`, table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := map[string]int64{}
	for _, table := range tables {
		before[table] = size(table)
	}
	if err := store.WarmLog(ctx, conn); err != nil {
		t.Fatalf("WarmLog: %v, want nil", err)
	}
	for _, table := range tables {
		if got := size(table); got != before[table] {
			t.Errorf("%s after the log's warm-up: %d bytes, want %d (untouched)", table, got, before[table])
		}
	}
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM run_log`).Scan(&n); err != nil || n != 0 {
		t.Errorf("run_log after the log's warm-up: %d rows (%v), want 0", n, err)
	}
	// The same measure sees a whole turn's warm-up.
	if err := store.Warm(ctx, conn); err != nil {
		t.Fatal(err)
	}
	if got := size("runs"); got <= before["runs"] {
		t.Errorf("runs after a turn's warm-up: %d bytes, want more than %d", got, before["runs"])
	}
}

// TestOpenWarmsConnections: Open returns with openConns connections of the
// pool (all of a smaller pool) and the log's open, so the first requests
// after a start neither dial nor warm one; the pool keeps that many.
func TestOpenWarmsConnections(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		maxConns int32
		want     int32
	}{
		{16, 4},
		{2, 2},
	}
	for _, tc := range tests {
		s, err := store.Open(ctx, pgtest.New(t), tc.maxConns)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer s.Close()
		st := s.Pool().Stat()
		if st.TotalConns() != tc.want || st.IdleConns() != tc.want {
			t.Errorf("pool of %d after Open: %d connections, %d idle; want %d open and idle", tc.maxConns, st.TotalConns(), st.IdleConns(), tc.want)
		}
		var backends, prepared int32
		err = s.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend'),
			(SELECT count(*) FROM pg_prepared_statements)`).Scan(&backends, &prepared)
		if err != nil {
			t.Fatal(err)
		}
		if backends != tc.want+1 || prepared == 0 {
			t.Errorf("pool of %d after Open: %d backends, %d prepared statements on one; want %d (the pool's and the log's) and the hot statements", tc.maxConns, backends, prepared, tc.want+1)
		}
	}
	if _, err := store.Open(ctx, "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2", 4); err == nil {
		t.Fatal("Open of an unreachable database: got nil, want an error")
	}
}
