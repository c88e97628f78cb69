// Package commit is the group commit of runs' durable logs: GroupCommit
// writes every run's pending records in one transaction per commit and
// publishes them once durable, one LogWriter per run. It knows no run: the
// engine gives it the store write and the publish.
package commit

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/threadline/threadline/thread/engine/internal/lifecycle"
)

// GroupCommit is the group commit of every run's event log: one goroutine
// takes what all runs produced since the last commit and writes it in one
// transaction, then publishes it. While one commit is in flight the next one
// gathers, so the cost per token falls as load rises, and no event is
// published before it is durable. A run's records join only once its start
// is committed: the store finds them in rows written after the start (see
// thread's Store.RunEventsAppend). R is a log record, K what the user of a
// LogWriter keys it with (thread: its run's writer).
//
// A commit that fails is retried with backoff, with whatever gathered
// meanwhile; its records are published once a retry commits them. A run
// whose claim the store refuses (recovery took it over elsewhere) is
// dropped from the commit, its records are never published, and its
// writer's lost callback stops it; the other runs' records are written
// again at once.
type GroupCommit[R, K any] struct {
	write   WriteFunc[R, K]
	publish func(w *LogWriter[R, K], recs []R, since time.Time)
	purgeFn func(ctx context.Context) (more bool, err error)
	log     *slog.Logger
	mu      sync.Mutex
	pending map[*LogWriter[R, K]]struct{}
	kick    chan struct{}
	// dirty says the store may hold log rows of ended runs to purge.
	dirty atomic.Bool
	life  lifecycle.Lifecycle
	// backoff is the wait before the next attempt after a failed commit
	// (0 after a success); retryMin and retryMax bound it.
	backoff            time.Duration
	retryMin, retryMax time.Duration
	// co is how commits gather work while busy (SetCoalesce); held are
	// the writers whose records wait for the hold, with the time each is
	// due (guarded by mu); streaming counts the runs started and not
	// stopped, which busy compares with co.From.
	co        Coalesce
	held      map[*LogWriter[R, K]]time.Time
	streaming atomic.Int64
	// armed is when the goroutine next looks at held by itself (zero:
	// only when woken): a writer due earlier wakes it.
	armed time.Time
}

// Segment is one run's records in a commit: the records of the run of the
// LogWriter keyed Key, in sequence order.
type Segment[R, K any] struct {
	Key     K
	Records []R
}

// WriteFunc writes segments, each of another run, in one store write. A
// write that names runs whose claim the store refused (lost) wrote
// nothing: those runs are dropped and the rest written again. Any other
// error is retried with backoff.
type WriteFunc[R, K any] func(ctx context.Context, segs []Segment[R, K]) (lost []uuid.UUID, err error)

// NewGroupCommit returns a stopped group commit that writes with write,
// hands what it committed to publish (durable before published), purges
// ended runs' log rows with purge (Purge) and logs failures to log.
func NewGroupCommit[R, K any](write WriteFunc[R, K], publish func(w *LogWriter[R, K], recs []R, since time.Time),
	purge func(ctx context.Context) (more bool, err error), log *slog.Logger) *GroupCommit[R, K] {
	return &GroupCommit[R, K]{write: write, publish: publish, purgeFn: purge, log: log,
		pending: make(map[*LogWriter[R, K]]struct{}), kick: make(chan struct{}, 1),
		retryMin: 10 * time.Millisecond, retryMax: time.Second}
}

// Coalesce is how the group commit trades a little wait for less work
// per record while busy: while at least From runs stream (started, not
// stopped). With fewer the machine has the time to send each record at
// once. The zero value never waits.
type Coalesce struct {
	// Hold is how long a record added with AddSoon may wait for the run's
	// next one (see queueAfter), so that one commit, one publish and one
	// write to each of the run's streams carry two.
	Hold time.Duration
	// Pace is the least time from the start of one commit to the start of
	// the next: each commit, with its transaction and its round trips,
	// then carries more runs' segments.
	Pace time.Duration
	// From is how many runs must stream for Hold and Pace to apply.
	From int
}

// SetCoalesce sets how commits gather work while busy. Call it before
// Start.
func (c *GroupCommit[R, K]) SetCoalesce(co Coalesce) { c.co = co }

// busy reports whether enough runs stream for Coalesce to apply.
func (c *GroupCommit[R, K]) busy() bool { return c.streaming.Load() >= int64(c.co.From) }

// Start starts the commit goroutine; Stop stops it, after the commit in
// flight. Records still pending then are left to their runs' final writes.
func (c *GroupCommit[R, K]) Start() { c.life.Start(c.loop) }

// Stop stops the goroutine and waits for it.
func (c *GroupCommit[R, K]) Stop() { c.life.Stop() }

// LogWriter is one run's side of the group commit. Its records are all, in
// sequence order; those from all[taken] on are pending: not yet taken by a
// commit. A commit takes a prefix of them and never copies it: appends only
// ever write past it. all[:durable] is committed, so a rejoin in this
// process reads it here instead of from the store.
type LogWriter[R, K any] struct {
	// Key is what the writer was made with (GroupCommit.Writer).
	Key      K
	c        *GroupCommit[R, K]
	id       uuid.UUID
	mu       sync.Mutex
	all      []R
	taken    int
	since    time.Time // when the oldest pending record was produced
	durable  int
	ended    bool // the run's final write committed: all is its whole log
	inflight bool
	stopped  bool
	// counted says the run counts as streaming (GroupCommit.streaming):
	// its start committed and it has not stopped.
	counted bool
	// retrying says its last commit failed: stop then takes its pending
	// records into the run's final write instead of waiting for a retry.
	retrying bool
	// lost says the store refused the run's claim: nothing more of it is
	// written or published, and lostFn (if set) was called once.
	lost   bool
	lostFn func()
	idle   *sync.Cond
	// lastTake is when a commit last took the run's records; urgent says
	// a pending record was added with Add (or the run stops): the run's
	// next commit is not held.
	lastTake time.Time
	urgent   bool
	// start is where the writing of the run's start stands; records wait
	// in pending until it is committed (their rows need the run's row).
	start     StartState
	startDone chan struct{} // closed when start leaves StartCommitting
}

// StartState is where the writing of a run's start stands.
type StartState int

// A run's start is StartOpen until the linger runs out (StartCommitting)
// or the run ends first (StartMerged); a start committed alone is then
// StartCommitted or StartFailed.
const (
	StartOpen       StartState = iota // not written: the model runs in the linger
	StartCommitting                   // the linger ran out: committing alone
	StartCommitted
	StartFailed
	StartMerged // the run ended first: it is written whole
)

// Writer returns the writer of run id's log, keyed key, whose first record
// (first) is committed with the run's start; lost (if not nil) is called
// once if the store refuses the run's claim.
func (c *GroupCommit[R, K]) Writer(id uuid.UUID, key K, first R, lost func()) *LogWriter[R, K] {
	// The first record is committed with the run's start.
	// Room for a short reply's records: growing from one by doubling
	// copied each run's log eight times.
	all := append(make([]R, 0, 64), first)
	w := &LogWriter[R, K]{Key: key, c: c, id: id, all: all, taken: 1, lostFn: lost, startDone: make(chan struct{})}
	w.idle = sync.NewCond(&w.mu)
	return w
}

// ClaimStart moves an unwritten start to next (StartCommitting or
// StartMerged) and reports whether it was still unwritten.
func (w *LogWriter[R, K]) ClaimStart(next StartState) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.start != StartOpen {
		return false
	}
	w.start = next
	return true
}

// Started records the outcome of committing the start alone; on success
// the records that waited for it go to the group commit.
func (w *LogWriter[R, K]) Started(ok bool) {
	w.mu.Lock()
	w.start = StartFailed
	queue := false
	if ok {
		w.start = StartCommitted
		w.counted = true
		w.c.streaming.Add(1)
		w.durable = 1 // the first record went with the start
		queue = len(w.all) > w.taken && !w.stopped
	}
	close(w.startDone)
	w.mu.Unlock()
	if queue {
		w.c.queue(w, true)
	}
}

// StartDone is closed when the start leaves StartCommitting.
func (w *LogWriter[R, K]) StartDone() <-chan struct{} { return w.startDone }

// queue adds w to the next commit, and wakes the commit goroutine if kick.
func (c *GroupCommit[R, K]) queue(w *LogWriter[R, K], kick bool) {
	c.mu.Lock()
	delete(c.held, w)
	c.pending[w] = struct{}{}
	c.mu.Unlock()
	if kick {
		c.wake()
	}
}

// wake wakes the commit goroutine.
func (c *GroupCommit[R, K]) wake() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// queueAfter queues w, whose pending records were all added with AddSoon,
// for a commit: at once if the hold is off or too few runs stream, if a
// commit last took the run's records (taken) a hold or more ago, so a slow
// run never waits, or if two or more records pend, which is the pair the
// hold waited for; else the oldest pending record (produced at since)
// waits for the next one, at most until since plus the hold, when the
// goroutine queues it (releaseHeld). A steady stream faster than one
// record a hold thus goes out two records a commit, publish and write,
// none waiting longer than the gap to the next one.
func (c *GroupCommit[R, K]) queueAfter(w *LogWriter[R, K], taken, since time.Time, pending int) {
	hold := c.co.Hold
	// One record pends, so add read the clock for it (since) just now: a
	// clock read a token less.
	if hold <= 0 || pending >= 2 || !c.busy() || since.Sub(taken) >= hold {
		c.queue(w, true)
		return
	}
	due := since.Add(hold)
	c.mu.Lock()
	_, isPending := c.pending[w]
	_, held := c.held[w]
	wake := false
	if !isPending && !held {
		if c.held == nil {
			c.held = make(map[*LogWriter[R, K]]time.Time)
		}
		c.held[w] = due
		wake = c.armed.IsZero() || due.Before(c.armed)
	}
	c.mu.Unlock()
	if wake {
		c.wake() // the goroutine sets its timer for the earliest due
	}
}

// releaseHeld queues the held writers that are due and returns when the
// next one is (zero: none is held), which the goroutine is armed for.
func (c *GroupCommit[R, K]) releaseHeld() (next time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	defer func() { c.armed = next }()
	if len(c.held) == 0 {
		return time.Time{}
	}
	now := time.Now()
	for w, due := range c.held {
		if !due.After(now) {
			delete(c.held, w)
			c.pending[w] = struct{}{}
		} else if next.IsZero() || due.Before(next) {
			next = due
		}
	}
	return next
}

// hasPending reports whether a writer waits for the next commit.
func (c *GroupCommit[R, K]) hasPending() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending) > 0
}

// growDoubleFrom is the log length from which Add doubles a writer's
// array instead of letting append grow it.
const growDoubleFrom = 256

// Add queues a record for the next commit; it never blocks on the
// database.
func (w *LogWriter[R, K]) Add(rec R) { w.add(rec, false) }

// AddSoon queues a record that may wait for the hold (SetHold) after the
// run's last commit, to be written and published with the ones that
// follow it meanwhile (a token); a record added with Add, or Stop, sends
// it at once.
func (w *LogWriter[R, K]) AddSoon(rec R) { w.add(rec, true) }

func (w *LogWriter[R, K]) add(rec R, soon bool) {
	w.mu.Lock()
	if !soon {
		w.urgent = true
	}
	if len(w.all) == w.taken {
		w.since = time.Now()
	}
	if n := cap(w.all); len(w.all) == n && n >= growDoubleFrom {
		// A long run's log: double it rather than let append grow it by a
		// quarter, which copies and clears the whole log several times
		// more. Views of the old array stay valid: records never change.
		grown := make([]R, len(w.all), 2*n)
		copy(grown, w.all)
		w.all = grown
	}
	w.all = append(w.all, rec)
	queue := !w.inflight && !w.lost && w.start == StartCommitted
	urgent, taken, since, pending := w.urgent, w.lastTake, w.since, len(w.all)-w.taken
	w.mu.Unlock()
	switch {
	case !queue:
	case urgent:
		w.c.queue(w, true)
	default:
		w.c.queueAfter(w, taken, since, pending)
	}
}

// Stop waits until the group commit has written every record added so far
// (or its last attempt failed, or the run's claim was lost), then for the
// writer's commit in flight, and returns the
// records that are not durable yet; the run's final transaction writes
// them. Draining first sends a run's last tokens out with the other runs'
// next commit, on the log's own connection, instead of behind the run's
// final transaction, which waits for the shared pool.
func (w *LogWriter[R, K]) Stop() []R {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.urgent = true // nothing of a stopping run is held
	if w.counted {
		w.counted = false
		w.c.streaming.Add(-1)
		w.c.wake() // a paced commit may not wait any more
	}
	if !w.inflight && !w.lost && w.start == StartCommitted && w.taken < len(w.all) {
		w.c.queue(w, true) // it may be held
	}
	for w.start == StartCommitted && !w.retrying && !w.lost && (w.inflight || w.taken < len(w.all)) {
		w.idle.Wait() // pending records are queued: the commit broadcasts
	}
	w.stopped = true
	for w.inflight {
		w.idle.Wait()
	}
	return w.all[w.taken:]
}

// All returns every record added, in order (after Stop: the run's log).
func (w *LogWriter[R, K]) All() []R {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.all
}

// Failed reports whether the start, committed alone, failed.
func (w *LogWriter[R, K]) Failed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.start == StartFailed
}

// Live reports whether the run's start is committed and its end is not.
func (w *LogWriter[R, K]) Live() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.start == StartCommitted && !w.ended
}

// End records that the run's final write committed all, its whole log.
func (w *LogWriter[R, K]) End(all []R) {
	w.mu.Lock()
	w.all, w.durable, w.ended = all, len(all), true
	w.mu.Unlock()
}

// After returns the committed records with sequence > after (all[i] has
// sequence i+1), and whether they end the log.
func (w *LogWriter[R, K]) After(after int64) ([]R, bool) {
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

type takenRecs[R, K any] struct {
	w     *LogWriter[R, K]
	from  int // w.all index of recs[0]
	recs  []R
	since time.Time
}

func (c *GroupCommit[R, K]) loop(stop <-chan struct{}) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	var lastStart time.Time
	for {
		if next := c.releaseHeld(); !c.hasPending() {
			var due <-chan time.Time
			if !next.IsZero() {
				timer.Reset(time.Until(next))
				due = timer.C
			}
			select {
			case <-stop:
				return
			case <-c.kick:
			case <-due:
			}
			continue
		}
		if !c.pace(stop, lastStart) {
			return
		}
		c.releaseHeld() // those due while paced go too
		lastStart = time.Now()
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

// pace waits, while busy, until a Pace has passed since the last commit
// began (last); a wake-up looks again, as the load may have fallen. It
// reports false if stop closed meanwhile.
func (c *GroupCommit[R, K]) pace(stop <-chan struct{}, last time.Time) bool {
	for {
		d := time.Until(last.Add(c.co.Pace))
		if c.co.Pace <= 0 || d <= 0 || !c.busy() {
			return true
		}
		t := time.NewTimer(d)
		select {
		case <-stop:
			t.Stop()
			return false
		case <-c.kick:
			t.Stop()
		case <-t.C:
		}
	}
}

// MarkDirty says the store may hold log rows of ended runs to purge.
func (c *GroupCommit[R, K]) MarkDirty() { c.dirty.Store(true) }

// Purge frees the log rows of ended runs if commits (or recoveries) may
// have left some; the engine's lease loop (Service.Start) calls it once a second.
func (c *GroupCommit[R, K]) Purge(ctx context.Context) {
	if !c.dirty.Swap(false) {
		return
	}
	more, err := c.purgeFn(ctx)
	if err != nil && ctx.Err() == nil {
		c.log.Error("purge run log", "err", err)
	}
	if more || err != nil {
		c.dirty.Store(true)
	}
}

// commit writes what every pending writer has, in one store write, and
// publishes it. It reports whether the write failed and is to be retried.
func (c *GroupCommit[R, K]) commit() (retry bool) {
	c.mu.Lock()
	ws := c.pending
	c.pending = make(map[*LogWriter[R, K]]struct{}, len(ws))
	c.mu.Unlock()
	batch := make([]takenRecs[R, K], 0, len(ws))
	now := time.Now()
	for w := range ws {
		w.mu.Lock()
		if !w.stopped && !w.lost && w.start == StartCommitted && len(w.all) > w.taken {
			recs := w.all[w.taken:len(w.all):len(w.all)]
			batch = append(batch, takenRecs[R, K]{w, w.taken, recs, w.since})
			w.taken = len(w.all)
			w.inflight = true
			w.lastTake, w.urgent = now, false
		}
		w.mu.Unlock()
	}
	for len(batch) > 0 {
		segs := make([]Segment[R, K], len(batch))
		for i, t := range batch {
			segs[i] = Segment[R, K]{Key: t.w.Key, Records: t.recs}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		lost, err := c.write(ctx, segs)
		cancel()
		if len(lost) > 0 {
			// Nothing was written: drop the lost runs, write the rest.
			batch = c.drop(batch, lost)
			continue
		}
		if err != nil {
			c.log.Error("append run events; retrying", "runs", len(segs), "err", err)
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
func (c *GroupCommit[R, K]) drop(batch []takenRecs[R, K], runs []uuid.UUID) []takenRecs[R, K] {
	keep := batch[:0]
	for _, t := range batch {
		if !slices.Contains(runs, t.w.id) {
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
func (c *GroupCommit[R, K]) settle(batch []takenRecs[R, K], ok bool) {
	for _, t := range batch {
		if ok {
			// Durable before published: a rejoin that subscribes and
			// then reads memory misses nothing.
			t.w.mu.Lock()
			t.w.durable = t.from + len(t.recs)
			t.w.mu.Unlock()
			c.publish(t.w, t.recs, t.since)
		}
		t.w.mu.Lock()
		t.w.inflight, t.w.retrying = false, !ok
		if !ok {
			t.w.taken = t.from
		}
		requeue := len(t.w.all) > t.w.taken && !t.w.stopped && !t.w.lost
		urgent, taken, since, pending := t.w.urgent || !ok, t.w.lastTake, t.w.since, len(t.w.all)-t.w.taken
		t.w.idle.Broadcast()
		t.w.mu.Unlock()
		switch {
		case !requeue:
		case urgent:
			c.queue(t.w, ok)
		default:
			c.queueAfter(t.w, taken, since, pending) // tokens added during the commit
		}
	}
}

// Committed reports whether the run's start is committed.
func (w *LogWriter[R, K]) Committed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.start == StartCommitted
}

// Lose marks the run's claim lost (by a lease renewal): nothing more of it
// is committed or published, and stop does not wait for its records.
func (w *LogWriter[R, K]) Lose() {
	w.mu.Lock()
	w.lost = true
	w.idle.Broadcast()
	w.mu.Unlock()
}
