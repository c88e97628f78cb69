package thread

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// committer is the group commit of every run's event log: one goroutine
// takes what all runs produced since the last commit and writes it in one
// transaction, then publishes it. While one commit is in flight the next one
// gathers, so the cost per token falls as load rises, and no event is
// published before it is durable. A run's records join only once its start
// is committed: the store finds them in rows written after the start (see
// Store.RunEventsAppend).
type committer struct {
	s       *Service
	mu      sync.Mutex
	pending map[*logWriter]struct{}
	kick    chan struct{}
	// dirty says the store may hold log rows of ended runs to purge.
	dirty atomic.Bool
}

func newCommitter(s *Service) *committer {
	c := &committer{s: s, pending: make(map[*logWriter]struct{}), kick: make(chan struct{}, 1)}
	go c.loop()
	return c
}

// logWriter is one run's side of the committer. Its records are all, in
// sequence order; those from all[taken] on are pending: not yet taken by a
// commit. A commit takes a prefix of them and never copies it: appends only
// ever write past it. all[:durable] is committed, so a rejoin in this
// process reads it here instead of from the store.
type logWriter struct {
	c        *committer
	run      *Run
	mu       sync.Mutex
	all      []Record
	taken    int
	since    time.Time // when the oldest pending record was produced
	durable  int
	ended    bool // the run's final write committed: all is its whole log
	inflight bool
	stopped  bool
	failed   bool
	idle     *sync.Cond
	// start is where the writing of the run's start stands; records wait
	// in pending until it is committed (their rows need the run's row).
	start     startState
	startDone chan struct{} // closed when start leaves startCommitting
}

type startState int

const (
	startOpen       startState = iota // not written: the model runs in the linger
	startCommitting                   // the linger ran out: committing alone
	startCommitted
	startFailed
	startMerged // the run ended first: it is written whole
)

func (c *committer) writer(r *Run, first Record) *logWriter {
	// The first record is committed with the run's start.
	// Room for a short reply's records: growing from one by doubling
	// copied each run's log eight times.
	all := append(make([]Record, 0, 64), first)
	w := &logWriter{c: c, run: r, all: all, taken: 1, startDone: make(chan struct{})}
	w.idle = sync.NewCond(&w.mu)
	return w
}

// claimStart moves an unwritten start to next (startCommitting or
// startMerged) and reports whether it was still unwritten.
func (w *logWriter) claimStart(next startState) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.start != startOpen {
		return false
	}
	w.start = next
	return true
}

// started records the outcome of committing the start alone; on success
// the records that waited for it go to the group commit.
func (w *logWriter) started(ok bool) {
	w.mu.Lock()
	w.start = startFailed
	queue := false
	if ok {
		w.start = startCommitted
		w.durable = 1 // the first record went with the start
		queue = len(w.all) > w.taken && !w.stopped
	}
	close(w.startDone)
	w.mu.Unlock()
	if queue {
		w.c.queue(w)
	}
}

func (c *committer) queue(w *logWriter) {
	c.mu.Lock()
	c.pending[w] = struct{}{}
	c.mu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// add queues a record; it never blocks on the database.
func (w *logWriter) add(rec Record) {
	w.mu.Lock()
	if len(w.all) == w.taken {
		w.since = time.Now()
	}
	w.all = append(w.all, rec)
	queue := !w.inflight && !w.failed && w.start == startCommitted
	w.mu.Unlock()
	if queue {
		w.c.queue(w)
	}
}

// stop waits until the group commit has written every record added so far
// (or failed), then for the writer's commit in flight, and returns the
// records that are not durable yet; the run's final transaction writes
// them. Draining first sends a run's last tokens out with the other runs'
// next commit, on the log's own connection, instead of behind the run's
// final transaction, which waits for the shared pool.
func (w *logWriter) stop() []Record {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.start == startCommitted && !w.failed && (w.inflight || w.taken < len(w.all)) {
		w.idle.Wait() // pending records are queued: the commit broadcasts
	}
	w.stopped = true
	for w.inflight {
		w.idle.Wait()
	}
	return w.all[w.taken:]
}

// live reports whether the run's start is committed and its end is not.
func (w *logWriter) live() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.start == startCommitted && !w.ended
}

// end records that the run's final write committed all, its whole log.
func (w *logWriter) end(all []Record) {
	w.mu.Lock()
	w.all, w.durable, w.ended = all, len(all), true
	w.mu.Unlock()
}

// after returns the committed records with Seq > after (all[i] has Seq
// i+1), and whether they end the log.
func (w *logWriter) after(after int64) ([]Record, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if after < 0 {
		after = 0
	}
	if after >= int64(w.durable) {
		return nil, w.ended
	}
	// Records are never changed once added, and appends write past
	// durable: the caller may keep the slice without a copy.
	return w.all[after:w.durable:w.durable], w.ended
}

type takenRecs struct {
	w     *logWriter
	from  int // w.all index of recs[0]
	recs  []Record
	since time.Time
}

func (c *committer) loop() {
	for range c.kick {
		c.commit()
	}
}

// purge frees the log rows of ended runs if commits (or recoveries) may
// have left some; Service.Run calls it once a second.
func (c *committer) purge(ctx context.Context) {
	if !c.dirty.Swap(false) {
		return
	}
	more, err := c.s.store.RunLogPurge(ctx)
	if err != nil && ctx.Err() == nil {
		c.s.log.Error("purge run log", "err", err)
	}
	if more || err != nil {
		c.dirty.Store(true)
	}
}

// commit writes what every pending writer has, in one store write, and
// publishes it.
func (c *committer) commit() {
	c.mu.Lock()
	ws := c.pending
	c.pending = make(map[*logWriter]struct{}, len(ws))
	c.mu.Unlock()
	batch := make([]takenRecs, 0, len(ws))
	segs := make([]Segment, 0, len(ws))
	for w := range ws {
		w.mu.Lock()
		if !w.stopped && !w.failed && w.start == startCommitted && len(w.all) > w.taken {
			recs := w.all[w.taken:len(w.all):len(w.all)]
			batch = append(batch, takenRecs{w, w.taken, recs, w.since})
			segs = append(segs, Segment{RunID: w.run.ID, Records: recs})
			w.taken = len(w.all)
			w.inflight = true
		}
		w.mu.Unlock()
	}
	if len(segs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	err := c.s.store.RunEventsAppend(ctx, segs)
	cancel()
	if err != nil {
		c.s.log.Error("append run events", "runs", len(segs), "err", err)
	} else {
		c.dirty.Store(true)
	}
	for _, t := range batch {
		if err == nil {
			// Durable before published: a rejoin that subscribes and
			// then reads memory misses nothing.
			t.w.mu.Lock()
			t.w.durable = t.from + len(t.recs)
			t.w.mu.Unlock()
			c.s.publish(t.w.run, t.recs, t.since)
		}
		t.w.mu.Lock()
		t.w.inflight = false
		if err != nil {
			// Leave them to the run's final transaction, which retries.
			t.w.failed = true
			t.w.taken = t.from
		} else if len(t.w.all) > t.w.taken && !t.w.stopped {
			c.queue(t.w)
		}
		t.w.idle.Broadcast()
		t.w.mu.Unlock()
	}
}
