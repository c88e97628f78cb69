package store

// The search indexer: moves the checkpoints a commit queued (migration
// 0017's trigger) into checkpoint_search, after the commit, in batches.

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// sqlSearchIndex takes up to $1 queued checkpoints (SKIP LOCKED: another
// indexer's batch is left to it) and indexes them in the same
// transaction, so an entry leaves the queue only with its row written. A
// checkpoint whose thread was deleted meanwhile leaves the queue unindexed;
// one already indexed is not indexed again. It answers the entries taken
// and the rows written. OFFSET 0 keeps the planner from inlining doc into
// both of its uses, which extracted each message's text twice.
const sqlSearchIndex = `WITH batch AS (
	DELETE FROM checkpoint_search_pending WHERE ctid = ANY (ARRAY(
		SELECT ctid FROM checkpoint_search_pending LIMIT $1 FOR UPDATE SKIP LOCKED))
	RETURNING thread_id, checkpoint_id
), ins AS (
	INSERT INTO checkpoint_search (thread_id, seq, checkpoint_id, caller, role, created_at, tsv, code)
	SELECT c.thread_id, c.seq, c.id, t.caller, c.role, c.created_at, to_tsvector('english'::regconfig, d.doc), search_code_text(d.doc)
	FROM batch b JOIN checkpoints c ON c.thread_id = b.thread_id AND c.id = b.checkpoint_id
		JOIN threads t ON t.id = c.thread_id,
		LATERAL (SELECT checkpoint_search_text(c.content) AS doc OFFSET 0) d
	ON CONFLICT DO NOTHING
	RETURNING 1
)
SELECT (SELECT count(*) FROM batch), (SELECT count(*) FROM ins)`

// SearchIndexBatch indexes up to limit queued checkpoints in one
// transaction and returns how many queue entries it took and how many
// rows it wrote; fewer taken than limit means the queue was drained (of
// what no other indexer holds). Several may run at once, in any
// processes: each entry is taken by one. Errors are the database's.
func (s *Store) SearchIndexBatch(ctx context.Context, limit int) (taken, indexed int, err error) {
	if err := s.pool.QueryRow(ctx, sqlSearchIndex, limit).Scan(&taken, &indexed); err != nil {
		return 0, 0, fmt.Errorf("search index: %w", interpretError(err))
	}
	return taken, indexed, nil
}

// SearchIndexPending indexes every checkpoint queued when it is called
// (and any queued meanwhile), a batch at a time, and returns the rows it
// wrote: after it returns, every checkpoint committed before the call is
// searchable unless another indexer still holds it. Errors are the
// database's.
func (s *Store) SearchIndexPending(ctx context.Context) (int, error) {
	total := 0
	for {
		taken, n, err := s.SearchIndexBatch(ctx, defaultIndexBatch)
		total += n
		if err != nil || taken < defaultIndexBatch {
			return total, err
		}
	}
}

// Defaults of SearchIndexerConfig.
const (
	defaultIndexPoll  = 200 * time.Millisecond
	defaultIndexBatch = 500
)

// SearchIndexerConfig tunes a SearchIndexer. Zero values take the
// defaults in parentheses.
type SearchIndexerConfig struct {
	// Poll is how long the indexer waits after finding the queue empty
	// (200ms): a message is searchable about this long after its commit.
	Poll time.Duration
	// Batch is the most checkpoints one transaction indexes (500).
	Batch int
	// Logger receives the batches that fail (slog.Default).
	Logger *slog.Logger
	// OnBatch, if set, is called after each batch that took queue
	// entries, with the rows it wrote, on the indexer's goroutine.
	OnBatch func(indexed int)
}

// SearchIndexer is the goroutine that keeps checkpoint_search up to date:
// it drains the queue in batches and, once it is empty, polls it. Each
// replica may run one; they share the work. Start it after the store
// opens, Stop it before the store closes.
type SearchIndexer struct {
	st  *Store
	cfg SearchIndexerConfig
	log *slog.Logger

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
	wake   chan struct{}
}

// NewSearchIndexer returns a stopped indexer of the store's queue.
func (s *Store) NewSearchIndexer(cfg SearchIndexerConfig) *SearchIndexer {
	if cfg.Poll <= 0 {
		cfg.Poll = defaultIndexPoll
	}
	if cfg.Batch <= 0 {
		cfg.Batch = defaultIndexBatch
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &SearchIndexer{st: s, cfg: cfg, log: log, wake: make(chan struct{}, 1)}
}

// Start starts the indexer's goroutine; a second Start does nothing.
func (x *SearchIndexer) Start() {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.done != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	x.cancel, x.done = cancel, make(chan struct{})
	go x.run(ctx, x.done)
}

// Stop stops the goroutine and waits for it: a batch under way is rolled
// back, and its entries stay queued for the next indexer.
func (x *SearchIndexer) Stop() {
	x.mu.Lock()
	cancel, done := x.cancel, x.done
	x.cancel, x.done = nil, nil
	x.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// Wake makes the indexer look at the queue now rather than at its next
// poll. It never blocks.
func (x *SearchIndexer) Wake() {
	select {
	case x.wake <- struct{}{}:
	default:
	}
}

func (x *SearchIndexer) run(ctx context.Context, done chan struct{}) {
	defer close(done)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-x.wake:
		}
		wait := x.cfg.Poll
		if full := x.drain(ctx); full {
			wait = 0 // more queued: the next batch at once, after a look at ctx
		}
		t.Reset(wait)
	}
}

// drain runs one batch and says whether it was full.
func (x *SearchIndexer) drain(ctx context.Context) bool {
	taken, n, err := x.st.SearchIndexBatch(ctx, x.cfg.Batch)
	if err != nil {
		if ctx.Err() == nil {
			x.log.Warn("search index batch failed; retried at the next poll", "err", err)
		}
		return false
	}
	if taken > 0 && x.cfg.OnBatch != nil {
		x.cfg.OnBatch(n)
	}
	return taken == x.cfg.Batch
}
