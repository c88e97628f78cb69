package store_test

import (
	"context"
	"testing"

	"github.com/threadline/threadline/store"
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
