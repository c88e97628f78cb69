package thread

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/thread/engine"
)

// committer is the group commit of every run's event log: one goroutine
// takes what all runs produced since the last commit and writes it in one
// transaction, then publishes it. While one commit is in flight the next one
// gathers, so the cost per token falls as load rises, and no event is
// published before it is durable. A run's records join only once its start
// is committed: the store finds them in rows written after the start (see
// Store.RunEventsAppend).
//
// A commit that fails is retried with backoff, with whatever gathered
// meanwhile; its records are published once a retry commits them. A run
// whose claim the store refuses (recovery took it over elsewhere) is
// dropped from the commit, its records are never published, and its
// writer's lost callback stops it; the other runs' records are written
// again at once.
type committer struct {
	s       *Service
	mu      sync.Mutex
	pending map[*logWriter]struct{}
	kick    chan struct{}
	// dirty says the store may hold log rows of ended runs to purge.
	dirty atomic.Bool
	life  engine.Lifecycle
	// backoff is the wait before the next attempt after a failed commit
	// (0 after a success); retryMin and retryMax bound it.
	backoff            time.Duration
	retryMin, retryMax time.Duration
}

func newCommitter(s *Service) *committer {
	return &committer{s: s, pending: make(map[*logWriter]struct{}), kick: make(chan struct{}, 1),
		retryMin: 10 * time.Millisecond, retryMax: time.Second}
}

// Start starts the commit goroutine; Stop stops it, after the commit in
// flight. Records still pending then are left to their runs' final writes.
func (c *committer) Start() { c.life.Start(c.loop) }

// Stop stops the goroutine and waits for it.
func (c *committer) Stop() { c.life.Stop() }

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
	// retrying says its last commit failed: stop then takes its pending
	// records into the run's final write instead of waiting for a retry.
	retrying bool
	// lost says the store refused the run's claim: nothing more of it is
	// written or published, and lostFn (if set) was called once.
	lost   bool
	lostFn func()
	idle   *sync.Cond
	// start is where the writing of the run's start stands; records wait
	// in pending until it is committed (their rows need the run's row).
	start     startState
	startDone chan struct{} // closed when start leaves startCommitting
	// snaps are the running snapshots of interim snapshot records by
	// sequence, for publishing them.
	snaps map[int64]*Snapshot
}

// setSnapshot records the snapshot an interim snapshot record of seq shows.
func (w *logWriter) setSnapshot(seq int64, snap *Snapshot) {
	w.mu.Lock()
	if w.snaps == nil {
		w.snaps = map[int64]*Snapshot{}
	}
	w.snaps[seq] = snap
	w.mu.Unlock()
}

// snapshot returns the snapshot of the interim snapshot record of seq.
func (w *logWriter) snapshot(seq int64) *Snapshot {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.snaps[seq]
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
		w.c.queue(w, true)
	}
}

// queue adds w to the next commit, and wakes the commit goroutine if kick.
func (c *committer) queue(w *logWriter, kick bool) {
	c.mu.Lock()
	c.pending[w] = struct{}{}
	c.mu.Unlock()
	if !kick {
		return // a failed commit's retry takes it
	}
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
	queue := !w.inflight && !w.lost && w.start == startCommitted
	w.mu.Unlock()
	if queue {
		w.c.queue(w, true)
	}
}

// stop waits until the group commit has written every record added so far
// (or its last attempt failed, or the run's claim was lost), then for the
// writer's commit in flight, and returns the
// records that are not durable yet; the run's final transaction writes
// them. Draining first sends a run's last tokens out with the other runs'
// next commit, on the log's own connection, instead of behind the run's
// final transaction, which waits for the shared pool.
func (w *logWriter) stop() []Record {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.start == startCommitted && !w.retrying && !w.lost && (w.inflight || w.taken < len(w.all)) {
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

func (c *committer) loop(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-c.kick:
		}
		for c.commit() {
			// Failed: wait, then try again with what gathered meanwhile.
			c.backoff = min(max(2*c.backoff, c.retryMin), c.retryMax)
			t := time.NewTimer(c.backoff)
			select {
			case <-stop:
				t.Stop()
				return
			case <-t.C:
			}
		}
		c.backoff = 0
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
// publishes it. It reports whether the write failed and is to be retried.
func (c *committer) commit() (retry bool) {
	c.mu.Lock()
	ws := c.pending
	c.pending = make(map[*logWriter]struct{}, len(ws))
	c.mu.Unlock()
	batch := make([]takenRecs, 0, len(ws))
	for w := range ws {
		w.mu.Lock()
		if !w.stopped && !w.lost && w.start == startCommitted && len(w.all) > w.taken {
			recs := w.all[w.taken:len(w.all):len(w.all)]
			batch = append(batch, takenRecs{w, w.taken, recs, w.since})
			w.taken = len(w.all)
			w.inflight = true
		}
		w.mu.Unlock()
	}
	for len(batch) > 0 {
		segs := make([]Segment, len(batch))
		for i, t := range batch {
			segs[i] = Segment{RunID: t.w.run.ID, Claim: t.w.run.Claim, Records: t.recs}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := c.s.store.RunEventsAppend(ctx, segs)
		cancel()
		var lost *ClaimLostError
		if errors.As(err, &lost) && len(lost.Runs) > 0 {
			// Nothing was written: drop the lost runs, write the rest.
			batch = c.drop(batch, lost.Runs)
			continue
		}
		if err != nil {
			c.s.log.Error("append run events; retrying", "runs", len(segs), "err", err)
			c.settle(batch, false)
			return true
		}
		c.dirty.Store(true)
		c.settle(batch, true)
		return false
	}
	return false
}

// drop takes the runs whose claim was lost out of batch: their writers
// publish and write nothing more, and their runs are told.
func (c *committer) drop(batch []takenRecs, runs []uuid.UUID) []takenRecs {
	keep := batch[:0]
	for _, t := range batch {
		if !slices.Contains(runs, t.w.run.ID) {
			keep = append(keep, t)
			continue
		}
		t.w.mu.Lock()
		t.w.inflight, t.w.lost, t.w.taken = false, true, t.from
		fn := t.w.lostFn
		t.w.idle.Broadcast()
		t.w.mu.Unlock()
		if fn != nil {
			fn()
		}
	}
	return keep
}

// settle records the outcome of a commit of batch: committed records are
// published; failed ones go back to pending, for the retry or the run's
// final write.
func (c *committer) settle(batch []takenRecs, ok bool) {
	for _, t := range batch {
		if ok {
			// Durable before published: a rejoin that subscribes and
			// then reads memory misses nothing.
			t.w.mu.Lock()
			t.w.durable = t.from + len(t.recs)
			t.w.mu.Unlock()
			c.s.publish(t.w, t.recs, t.since)
		}
		t.w.mu.Lock()
		t.w.inflight, t.w.retrying = false, !ok
		if !ok {
			t.w.taken = t.from
		}
		requeue := len(t.w.all) > t.w.taken && !t.w.stopped && !t.w.lost
		t.w.idle.Broadcast()
		t.w.mu.Unlock()
		if requeue {
			c.queue(t.w, ok)
		}
	}
}

// committed reports whether the run's start is committed.
func (w *logWriter) committed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.start == startCommitted
}

// lose marks the run's claim lost (by a lease renewal): nothing more of it
// is committed or published, and stop does not wait for its records.
func (w *logWriter) lose() {
	w.mu.Lock()
	w.lost = true
	w.idle.Broadcast()
	w.mu.Unlock()
}
