package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/threadline/threadline/store"
	"github.com/threadline/threadline/store/pgtest"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/threadtest/wait"
)

// TestDeadIdleConnsAfterRestart kills every session of a store's warm
// pools while they sit idle, by a Postgres restart (fast stop, then start)
// or by terminating the sessions (pg_terminate_backend, the server staying
// up): each pooled connection then holds the server's FATAL and its end.
// Once the server answers again, every store call, reads and writes, on
// the shared pool and on the group commit's own connection, one after
// another and then all at once, succeeds: none meets a dead connection
// (pgx pings only connections idle for longer than a second, and a quick
// restart leaves younger ones).
func TestDeadIdleConnsAfterRestart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		kill func(t *testing.T, pg *pgtest.Private, s *store.Store)
	}{
		{"restarted", func(t *testing.T, pg *pgtest.Private, _ *store.Store) {
			t.Logf("Postgres down and back within %v", pg.Restart())
		}},
		{"sessions terminated", func(t *testing.T, pg *pgtest.Private, _ *store.Store) { terminateSessions(t, pg.URL) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pg := pgtest.NewPrivate(t)
			ctx := context.Background()
			if err := store.MigrateUp(ctx, pg.URL); err != nil {
				t.Fatal(err)
			}
			const conns = 6
			s, err := store.Open(ctx, pg.URL, conns)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(s.Close)
			th := newThread(t, s, "alice")
			in, fin := benchTurn(th, uuid.Nil)
			if _, err := s.RunCreate(ctx, in, fin.Records[0]); err != nil {
				t.Fatal(err)
			}
			for round, concurrent := range []bool{false, true} {
				warmPool(t, s.Pool(), conns)
				opened := s.Pool().Stat().NewConnsCount()
				tc.kill(t, pg, s)
				cs := restartCalls(s, th, &in.Run, 2+int64(round)*appendLen)
				errs := make([]error, len(cs))
				if concurrent {
					var wg sync.WaitGroup
					for i, c := range cs {
						wg.Go(func() { errs[i] = c.fn(ctx) })
					}
					wg.Wait()
				} else {
					for i, c := range cs {
						errs[i] = c.fn(ctx)
					}
				}
				for i, c := range cs {
					if errs[i] != nil {
						t.Errorf("round %d (concurrent %v): %s after the sessions died: got %v, want success", round, concurrent, c.name, errs[i])
					}
				}
				// The calls ran on new connections: the old ones had died.
				if got := s.Pool().Stat().NewConnsCount(); got <= opened {
					t.Errorf("round %d: the pool opened %d connections since the sessions died, want some", round, got-opened)
				}
			}
		})
	}
}

// storeCall is one store call of TestDeadIdleConnsAfterRestart.
type storeCall struct {
	name string
	fn   func(ctx context.Context) error
}

// appendLen is how many tokens restartCalls appends to the run's log.
const appendLen = 3

// restartCalls are reads and writes of the shared pool and a log append
// of the group commit's connection, on thread th and its running run r
// (whose log holds records up to seq-1).
func restartCalls(s *store.Store, th *thread.Thread, r *thread.Run, seq int64) []storeCall {
	return []storeCall{
		{"ThreadGet", func(ctx context.Context) error { _, err := s.ThreadGet(ctx, th.Caller, th.ID); return err }},
		{"RunEventsAppend", func(ctx context.Context) error {
			return s.RunEventsAppend(ctx, []thread.Segment{{RunID: r.ID, Claim: r.Claim, Records: tokens(seq, appendLen)}})
		}},
		{"ThreadCreate", func(ctx context.Context) error {
			now := time.Now().UTC().Truncate(time.Microsecond)
			_, created, err := s.ThreadCreate(ctx, &thread.Thread{ID: uuid.New(), Caller: th.Caller, CreatedAt: now, UpdatedAt: now})
			if err == nil && !created {
				err = errors.New("not created")
			}
			return err
		}},
		{"RunGet", func(ctx context.Context) error { _, err := s.RunGet(ctx, th.ID, r.ID); return err }},
		{"RunLeaseRenew", func(ctx context.Context) error {
			_, lost, err := s.RunLeaseRenew(ctx, []thread.RunClaim{{RunID: r.ID, Claim: r.Claim}}, time.Now().Add(time.Hour))
			if err == nil && len(lost) > 0 {
				err = fmt.Errorf("claim lost: %v", lost)
			}
			return err
		}},
		{"ThreadList", func(ctx context.Context) error { _, err := s.ThreadList(ctx, th.Caller, 10, nil); return err }},
		{"CheckpointsAfter", func(ctx context.Context) error { _, err := s.CheckpointsAfter(ctx, th.ID, 0); return err }},
		{"RunEventsAfter", func(ctx context.Context) error { _, err := s.RunEventsAfter(ctx, r.ID, 1); return err }},
		{"ThreadSetHead", func(ctx context.Context) error { return s.ThreadSetHead(ctx, th.Caller, th.ID, r.UserMessageID) }},
		{"Ping", s.Ping},
	}
}

// warmPool opens n connections in pool (holding n at once) and leaves
// them idle; it fails the test unless n are idle then.
func warmPool(t *testing.T, pool *pgxpool.Pool, n int) {
	t.Helper()
	var held []*pgxpool.Conn
	for range n {
		c, err := pool.Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	for _, c := range held {
		c.Release()
	}
	if got := pool.Stat().IdleConns(); got != int32(n) {
		t.Fatalf("warm pool: got %d idle connections, want %d", got, n)
	}
}

// terminateSessions ends every other client session on the server at url
// (pg_terminate_backend: each gets FATAL 57P01) and waits until they are
// gone.
func terminateSessions(t *testing.T, url string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	const others = `FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'`
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) `+others).Scan(&n); err != nil || n == 0 {
		t.Fatalf("terminate sessions: got %d (%v), want some", n, err)
	}
	wait.Eventually(t, 30*time.Second, func() bool {
		if err := conn.QueryRow(ctx, `SELECT count(*) `+others).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 0
	}, "terminate sessions: %v still there after 30 s, want none", func() any { return n })
}
