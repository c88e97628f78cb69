package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestRunStartBesideKeyShare: a run starts on a thread while another
// transaction holds the thread's key (FOR KEY SHARE, as the search
// indexer's foreign key check does until its batch commits).
func TestRunStartBesideKeyShare(t *testing.T) {
	t.Parallel()
	s, pool := setup(t)
	ctx := context.Background()
	th := newThread(t, s, "alice")
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM threads WHERE id = $1 FOR KEY SHARE`, th.ID); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := startRun(t, s, th, uuid.Nil)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("start beside a key-share lock: %v", err)
		}
	case <-time.After(30 * time.Second):
		tx.Rollback(ctx) // let the start go, then fail
		<-done
		t.Fatal("the run's start waited for a transaction that only holds the thread's key")
	}
}
