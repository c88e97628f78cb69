package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/threadline/threadline/store"
	"github.com/threadline/threadline/store/pgtest"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/threadtest/wait"
)

// process is a store and its notifier, as one serve process has them.
func process(t *testing.T, url, owner string) (*store.Store, *store.Notifier) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, url, 4)
	if err != nil {
		t.Fatal(err)
	}
	n, err := st.NewNotifier(url, store.NotifierConfig{Owner: owner, Check: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Stop(); st.Close() })
	return st, n
}

// nextChange waits (bounded) for a change of kind; it fails the test if
// none comes.
func nextChange(t *testing.T, sub thread.Changes, kind thread.ChangeKind) thread.Change {
	t.Helper()
	bound := time.After(30 * time.Second)
	for {
		select {
		case c, ok := <-sub.C():
			if !ok {
				t.Fatalf("changes closed while waiting for kind %d", kind)
			}
			if c.Kind == kind {
				return c
			}
		case <-bound:
			t.Fatalf("no change of kind %d", kind)
		}
	}
}

// TestNotifierWakesOtherProcess: one process's group commit, cancel and
// thread delete reach another process's waiters through NOTIFY.
func TestNotifierWakesOtherProcess(t *testing.T) {
	t.Parallel()
	url := pgtest.New(t)
	_, na := process(t, url, "a")
	b, _ := process(t, url, "b")
	th := newThread(t, b, "alice")
	r, err := startRun(t, b, th, uuid.Nil)
	if err != nil {
		t.Fatal(err)
	}
	w := na.WakeRun(r.ID)
	defer w.Close()
	changes := na.Changes()
	defer changes.Close()
	// b sends wake-ups once its notifier has seen a live peer: append
	// until one arrives (bounded: about the 198 appends of a tenth of a
	// second each this loop had).
	seq := int64(1)
	wait.Eventually(t, 20*time.Second, func() bool {
		seq++
		seg := thread.Segment{RunID: r.ID, Records: []thread.Record{{Seq: seq, Kind: thread.KindToken, Text: "x"}}}
		if err := b.RunEventsAppend(context.Background(), []thread.Segment{seg}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-w.C():
			return true
		case <-time.After(100 * time.Millisecond):
			return false
		}
	}, "the other process's group commit never woke the run's waiter")
	if err := b.RunRequestCancel(context.Background(), r.ID); err != nil {
		t.Fatal(err)
	}
	if c := nextChange(t, changes, thread.ChangeCancel); c.ID != r.ID {
		t.Fatalf("cancel change names %s, want run %s", c.ID, r.ID)
	}
	if err := b.ThreadDelete(context.Background(), "alice", th.ID); err != nil {
		t.Fatal(err)
	}
	if c := nextChange(t, changes, thread.ChangeThreadGone); c.ID != th.ID {
		t.Fatalf("thread change names %s, want thread %s", c.ID, th.ID)
	}
	select {
	case <-w.C(): // the run's row went with its thread
	case <-time.After(30 * time.Second):
		t.Fatal("the deleted run's waiter was not woken")
	}
}

// TestNotifierFindsDeadOwner: a process whose presence lock is released
// (its connection died) is reported dead and its running runs' leases
// expire at once, not before.
func TestNotifierFindsDeadOwner(t *testing.T) {
	t.Parallel()
	url := pgtest.New(t)
	a, na := process(t, url, "a")
	changes := na.Changes()
	defer changes.Close()
	ctx := context.Background()
	// The process "test" (startRun's owner), by hand: its row and its lock
	// on a connection of its own.
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(hashtextextended('threadline owner test', 0))`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO run_owners (owner, lock_key) VALUES ('test', hashtextextended('threadline owner test', 0))`); err != nil {
		t.Fatal(err)
	}
	r, err := startRun(t, a, newThread(t, a, "alice"), uuid.Nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if got, err := a.RunClaimExpired(ctx, "a", now, now.Add(time.Minute), 10); err != nil || len(got) != 0 {
		t.Fatalf("claim while the owner lives: got %d runs (%v), want none", len(got), err)
	}
	conn.Close(ctx) // the owner dies
	nextChange(t, changes, thread.ChangeOwnerDead)
	now = time.Now()
	got, err := a.RunClaimExpired(ctx, "a", now, now.Add(time.Minute), 10)
	if err != nil || len(got) != 1 || got[0].ID != r.ID {
		t.Fatalf("claim after the owner died: got %d runs (%v), want run %s", len(got), err, r.ID)
	}
}
