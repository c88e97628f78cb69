package peer

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/threadline/threadline/cmd/threadline-bench/internal/bench"
)

// sizeSQL sums pg_total_relation_size over every table of the public schema.
const sizeSQL = `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c
	JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')`

// tableSizes returns pg_total_relation_size of every table of the public schema.
func (b *peerBench) tableSizes(ctx context.Context) (map[string]int64, error) {
	rows, err := b.pgStats.Query(ctx, `SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')`)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for rows.Next() {
		var name string
		var size int64
		if err := rows.Scan(&name, &size); err != nil {
			rows.Close()
			return nil, err
		}
		out[name] = size
	}
	return out, rows.Err()
}

// probeCommit times a one-row insert and its durable commit, alone, on
// the bench's own connection: what one commit costs on this machine now.
func (b *peerBench) probeCommit(ctx context.Context) (float64, error) {
	t0 := time.Now()
	if _, err := b.pgStats.Exec(ctx, `INSERT INTO bench_probe.commits VALUES (1)`); err != nil {
		return 0, fmt.Errorf("commit probe: %w", err)
	}
	return ms(time.Since(t0)), nil
}

// settle vacuums every table of the public schema, so that the workload
// starts on tables as small as a fresh database's. store.Open warms its
// connections concurrently, each with a turn it rolls back; on the empty
// tables those inserts can contend for the extension lock, and Postgres
// then adds up to 20 pages per waiter at once. Without this, 1 run in 11
// started with 48 such pages, its 20 fresh turns fitted in them and
// bytes_per_turn read 0. VACUUM removes the rolled-back rows and truncates
// the empty pages.
func (b *peerBench) settle(ctx context.Context) error {
	rows, err := b.pgStats.Query(ctx, `SELECT quote_ident(c.relname) FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind = 'r' ORDER BY 1`)
	if err != nil {
		return fmt.Errorf("settle: %w", err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("settle: %w", err)
	}
	if len(tables) == 0 {
		return nil
	}
	if _, err := b.pgStats.Exec(ctx, "VACUUM "+strings.Join(tables, ", ")); err != nil {
		return fmt.Errorf("settle: %w", err)
	}
	return nil
}

func (b *peerBench) totalSize(ctx context.Context) (int64, error) {
	var n int64
	err := b.pgStats.QueryRow(ctx, sizeSQL).Scan(&n)
	return n, err
}

// rowBytes sums pg_column_size of a thread's live rows (see
// bench.ThreadRowBytes).
func (b *peerBench) rowBytes(ctx context.Context, threadID uuid.UUID) (int64, error) {
	return bench.ThreadRowBytes(ctx, b.pgStats, threadID)
}
