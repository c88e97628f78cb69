package store_test

import (
	"context"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/store"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/threadtest/wait"
)

// found is what alice's search for q finds now, without indexing first.
func found(t *testing.T, s *store.Store, q string) []uuid.UUID {
	t.Helper()
	hits, err := s.MessageSearch(context.Background(), "alice", thread.SearchQuery{Text: q, Limit: 50})
	if err != nil {
		t.Fatalf("search %q: %v", q, err)
	}
	var ids []uuid.UUID
	for _, h := range hits {
		ids = append(ids, h.MessageID)
	}
	return ids
}

// appendText appends one user message of text to a new thread of alice.
func appendText(t *testing.T, s *store.Store, txt string) uuid.UUID {
	t.Helper()
	th := newThread(t, s, "alice")
	n := &checkpoint.Node{ID: uuid.New(), Role: checkpoint.RoleUser, Content: text(txt), CreatedAt: t0}
	if err := s.CheckpointAppend(context.Background(), th.ID, n); err != nil {
		t.Fatal(err)
	}
	return n.ID
}

// TestSearchIndexer: a committed message is not searchable until the
// indexer ran, and becomes so once it has, with no call but its commit.
func TestSearchIndexer(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	id := appendText(t, s, "the pangolin sleeps")
	if got := found(t, s, "pangolin"); len(got) != 0 {
		t.Fatalf("found %v before any indexer ran", got)
	}
	batches := make(chan int, 16)
	ix := s.NewSearchIndexer(store.SearchIndexerConfig{Poll: 10 * time.Millisecond, OnBatch: func(n int) { batches <- n }})
	ix.Start()
	defer ix.Stop()
	if n := <-batches; n != 1 {
		t.Errorf("the first batch indexed %d, want 1", n)
	}
	if got := found(t, s, "pangolin"); !slices.Equal(got, []uuid.UUID{id}) {
		t.Errorf("after the batch: found %v, want [%s]", got, id)
	}
	// A message committed while the indexer runs: found within its poll.
	id2 := appendText(t, s, "a pangolin again")
	wait.Eventually(t, 10*time.Second, func() bool { return len(found(t, s, "pangolin")) == 2 },
		"the second message %s was never indexed", id2)
}

// TestSearchIndexSurvivesCrash: an indexer that dies inside its batch
// (its connection gone before the commit) or is stopped before it ran
// leaves the queue as it was; the next indexer indexes the message.
func TestSearchIndexSurvivesCrash(t *testing.T) {
	t.Parallel()
	s, pool := setup(t)
	ctx := context.Background()
	id := appendText(t, s, "the okapi grazes")

	ix := s.NewSearchIndexer(store.SearchIndexerConfig{Poll: time.Hour})
	ix.Stop() // never started: nothing happens
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// What a batch does first: take the queue. Then the process dies.
	if _, err := tx.Exec(ctx, `DELETE FROM checkpoint_search_pending`); err != nil {
		t.Fatal(err)
	}
	if err := conn.Conn().Close(ctx); err != nil {
		t.Fatal(err)
	}
	conn.Release()
	if got := found(t, s, "okapi"); len(got) != 0 {
		t.Fatalf("found %v after the crash", got)
	}
	n, err := s.SearchIndexPending(ctx)
	if err != nil || n != 1 {
		t.Fatalf("the next indexer indexed %d, %v; want 1", n, err)
	}
	if got := found(t, s, "okapi"); !slices.Equal(got, []uuid.UUID{id}) {
		t.Errorf("found %v, want [%s]", got, id)
	}
}

// TestSearchIndexersShareTheQueue: two indexers draining at once, in
// small batches, index every message once between them.
func TestSearchIndexersShareTheQueue(t *testing.T) {
	t.Parallel()
	s, pool := setup(t)
	ctx := context.Background()
	const threads, per = 12, 10
	for range threads {
		th := newThread(t, s, "alice")
		chain(t, s, th.ID, uuid.Nil, per)
	}
	var wg sync.WaitGroup
	counts := make([]int, 2)
	for i := range counts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				taken, n, err := s.SearchIndexBatch(ctx, 7)
				if err != nil {
					t.Error(err)
					return
				}
				counts[i] += n
				if taken == 0 {
					return
				}
			}
		}()
	}
	wg.Wait()
	if got, want := counts[0]+counts[1], threads*per; got != want {
		t.Errorf("indexed %v, %d in all, want %d", counts, got, want)
	}
	var rows, distinct, pending int
	if err := pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT (thread_id, checkpoint_id)), (SELECT count(*) FROM checkpoint_search_pending)
		FROM checkpoint_search`).Scan(&rows, &distinct, &pending); err != nil {
		t.Fatal(err)
	}
	if rows != threads*per || distinct != rows || pending != 0 {
		t.Errorf("checkpoint_search %d rows (%d distinct), %d pending; want %d, all distinct, 0", rows, distinct, pending, threads*per)
	}
}

// TestSearchIndexImport: imported threads are queued like appended ones
// (their COPY fires the queue's trigger) and found once indexed.
func TestSearchIndexImport(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	ctx := context.Background()
	it := importThread(3)
	it.Nodes[1].Content = text("the axolotl regrows")
	if _, err := s.ThreadImport(ctx, "alice", feed([]*thread.ImportThread{it}, io.EOF)); err != nil {
		t.Fatal(err)
	}
	if n, err := s.SearchIndexPending(ctx); err != nil || n != 3 {
		t.Fatalf("indexed %d, %v; want 3", n, err)
	}
	if got := found(t, s, "axolotl"); !slices.Equal(got, []uuid.UUID{it.Nodes[1].ID}) {
		t.Errorf("found %v, want [%s]", got, it.Nodes[1].ID)
	}
}
