// Package follow is the following of runs: one client's reading of one
// run, from the durable log first, then live from the hub (this process's
// runs) or the relay (other processes' runs), and the log again after any
// gap. A Follower holds what every follow needs as fields; it holds no
// state of its own and never points back at the engine.
package follow

import (
	"context"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/stream"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/engine/internal/relay"
	"github.com/threadline/threadline/thread/engine/internal/runlog"
	"github.com/threadline/threadline/thread/engine/internal/trees"
)

// Store is what a follow reads the store with (thread.Store).
type Store interface {
	ThreadGet(ctx context.Context, caller string, id uuid.UUID) (*thread.Thread, error)
	RunGet(ctx context.Context, threadID, runID uuid.UUID) (*thread.Run, error)
	RunEventsAfter(ctx context.Context, runID uuid.UUID, after int64) ([]thread.Record, error)
	RunEventsPage(ctx context.Context, runID uuid.UUID, after int64, maxBytes int) ([]thread.Record, bool, error)
}

var _ Store = (thread.Store)(nil)

// Hub is where this process's runs publish their events (thread.Hub).
type Hub interface {
	Subscribe(runID uuid.UUID) stream.Subscription[thread.Event]
}

// Local is what a follow asks of the runs this process runs (the
// runner's registry).
type Local interface {
	// Runs reports whether this process runs the run.
	Runs(runID uuid.UUID) bool
	// Log returns the durable records after sequence after of a run this
	// process runs, and whether they are its whole log (ended); ok is
	// false when it runs no such run.
	Log(runID uuid.UUID, after int64) (recs []thread.Record, ended, ok bool)
	// First claims the subscription made before the run's first event,
	// for its starter's follow: nil when there is none or it was claimed.
	First(runID uuid.UUID) stream.Subscription[thread.Event]
}

// Follower follows runs. Its fields are set before the first Follow and
// not changed after.
type Follower struct {
	Store Store
	Hub   Hub
	// Relay carries other processes' runs to their followers here (used
	// only with Wakeups).
	Relay *relay.Relay[thread.Event]
	Trees *trees.Cache
	Local Local
	// Wakeups, when set, wakes followers of other processes' runs; nil:
	// they poll.
	Wakeups thread.Wakeups
	// RetryMin and RetryMax bound the wait between reads while the
	// database is away.
	RetryMin, RetryMax time.Duration
	// PageBytes is how much of a run's log one read takes from the store.
	PageBytes int
	// Drained closes once the service has ended every run of this
	// process: follows of other processes' runs then end.
	Drained <-chan struct{}
}

// NewRelay returns the relay of other processes' runs for a Follower
// with wakeups w (nil: the relay is never used): buffer is how many
// batches a follower may fall behind the run's reader here.
func NewRelay(buffer int, w thread.Wakeups, retryMin time.Duration, log *slog.Logger) *relay.Relay[thread.Event] {
	wake := func(id uuid.UUID) relay.Wake { return w.WakeRun(id) }
	return relay.NewRelay[thread.Event](buffer, wake, (&Follower{Wakeups: w}).PollEvery(), retryMin, log)
}

// follower is one client's reading of one run: the durable log first, then
// live events, and the log again after any gap in them.
type follower struct {
	s      *Follower
	ctx    context.Context
	caller string
	r      *thread.Run
	fn     func(thread.Event, bool) error
	last   int64            // the last sequence emitted
	tree   *checkpoint.Tree // the tree of the last snapshot emitted
	retry  time.Duration    // the wait before the next read while the database is away
	wake   thread.Wake      // the run's wake-ups, once the database was away
}

// pause waits f.retry (longer each time) before the follower reads the log
// again while the database is away, or less when a wake-up comes (the
// notifier's reconnect wakes every waiter); it returns ctx's error if ctx
// ends first, and runlog.ErrShuttingDown once the service has drained.
func (f *follower) pause() error {
	if f.wake == nil {
		f.wake = f.s.wakeRun(f.r.ID)
	}
	t := time.NewTimer(f.retry)
	defer t.Stop()
	f.retry = min(2*f.retry, f.s.RetryMax)
	select {
	case <-f.ctx.Done():
		return f.ctx.Err()
	case <-f.s.Drained:
		return runlog.ErrShuttingDown
	case <-t.C:
	case <-f.wake.C():
	}
	return nil
}

// drain ends the follower once Shutdown has ended this process's runs: a
// last read of the log delivers whatever ended meanwhile, up to the final
// snapshot; a run that goes on in another process is left to the client,
// which rejoins elsewhere after the last sequence it read
// (runlog.ErrShuttingDown). Holding such a stream open would hold the shutdown.
func (f *follower) drain() (bool, error) {
	done, err := f.catchUp()
	if err != nil || done {
		return done, err
	}
	return false, runlog.ErrShuttingDown
}

func (f *follower) closeWake() {
	if f.wake != nil {
		f.wake.Close()
	}
}

// unavailable reports whether err is the store's word for a database it
// cannot reach (errcode.Unavailable).
func unavailable(err error) bool {
	e, ok := errcode.As(err)
	return ok && e.Code == errcode.Unavailable
}

// Follow calls fn with every event of run r after sequence after, as
// caller (whose access was checked), first from the durable log, then
// live, until the run's final snapshot or ctx ends; see engine.Follow.
// A run whose thread is deleted meanwhile ends with an error event
// not_found and no error; runlog.ErrShuttingDown once the service has
// drained and the run goes on elsewhere; else ctx's, the store's or fn's
// error.
func (s *Follower) Follow(ctx context.Context, caller string, r *thread.Run, after int64, fn func(thread.Event, bool) error) error {
	f := &follower{s: s, ctx: ctx, caller: caller, r: r, fn: fn, last: after, retry: s.RetryMin}
	defer f.closeWake()
	err := f.run()
	if errcode.Of(err) == errcode.NotFound && ctx.Err() == nil {
		// The run was there when the follow began: its thread was deleted
		// meanwhile, here or in another process, with its log.
		return f.gone()
	}
	return err
}

// goneMessage is the text of the event that ends the stream of a run
// whose thread was deleted.
const goneMessage = "the thread was deleted: this run and its events are gone"

// gone ends the stream of a run whose thread was deleted with an error
// event (not_found) after the last event emitted. It is not in the log,
// which went with the thread: a rejoin is answered not_found.
func (f *follower) gone() error {
	f.last++
	return f.fn(thread.Event{Type: thread.KindError, RunID: f.r.ID, Sequence: f.last, Code: errcode.NotFound, Text: goneMessage}, false)
}

// run follows the run until its final event, an error (not_found: the run
// or its thread is gone) or ctx's end.
func (f *follower) run() error {
	s, ctx, r, caller := f.s, f.ctx, f.r, f.caller
	for {
		var sub stream.Subscription[thread.Event]
		if f.last == 0 {
			sub = s.Local.First(r.ID)
		}
		poll := s.PollEvery()
		if sub == nil {
			// Subscribe before reading the log: whatever is published
			// after the read is then in the subscription.
			var rs *relay.RelaySub[thread.Event]
			sub, rs = s.subscribe(r, caller)
			done, err := f.catchUp()
			if err != nil && unavailable(err) && ctx.Err() == nil {
				// The database is away for a while: the stream waits for
				// it rather than ending without its final snapshot.
				sub.Close()
				if err := f.pause(); err != nil {
					return err
				}
				continue
			}
			if err != nil || done {
				sub.Close()
				return err
			}
			f.retry = s.RetryMin
			if rs != nil {
				// The run's reader in this process wakes on its commits and
				// polls: this follower need not.
				rs.Seed(f.last)
				poll = 0
			}
		}
		done, err := f.live(sub, poll)
		sub.Close()
		if err != nil || done {
			return err
		}
	}
}

// subscribe returns a live subscription to the run's events: the hub's
// while this process runs the run (or without wake-ups), else that of the
// run's reader in this process (then also returned as rs).
func (s *Follower) subscribe(r *thread.Run, caller string) (sub stream.Subscription[thread.Event], rs *relay.RelaySub[thread.Event]) {
	if s.Wakeups != nil && !s.Local.Runs(r.ID) {
		if rs := s.Relay.Subscribe(r.ID, s.relayRead(r, caller)); rs != nil {
			return rs, rs
		}
	}
	return s.Hub.Subscribe(r.ID), nil
}

// emit passes ev on unless it was emitted already; it reports whether ev
// is the run's final event.
func (f *follower) emit(ev thread.Event, more bool) (bool, error) {
	if ev.Sequence <= f.last {
		return false, nil
	}
	f.last = ev.Sequence
	final := ev.Final()
	return final, f.fn(ev, more && !final)
}

// catchUp replays the log after last; it reports whether the run ended.
// The store's log is read a page at a time (Limits.LogPageBytes) and
// turned into events a chunk at a time, so a follower whose client reads
// slowly holds about a page, whatever the log's length.
func (f *follower) catchUp() (bool, error) {
	for {
		recs, src, more, err := f.s.loggedPage(f.ctx, f.r.ID, f.last)
		if err != nil {
			return false, err
		}
		if len(recs) == 0 && src != logStored {
			return src == logEnded, nil
		}
		if len(recs) == 0 {
			var ended bool
			recs, ended, more, err = f.s.storedTail(f.ctx, f.r, f.last)
			if err != nil || len(recs) == 0 {
				return ended, err
			}
		}
		for len(recs) > 0 {
			chunk := recs[:min(len(recs), eventChunk)]
			recs = recs[len(chunk):]
			evs, tree, err := f.s.events(f.ctx, f.caller, f.r, chunk, f.tree)
			if err != nil {
				return false, err
			}
			f.tree = tree
			for i, ev := range evs {
				done, err := f.emit(ev, i < len(evs)-1 || len(recs) > 0 || more)
				if err != nil || done {
					return done, err
				}
			}
		}
		if !more {
			return false, nil
		}
	}
}

// eventChunk is how many records catchUp turns into events at once.
const eventChunk = 256

// live emits the subscription's events until the run's final one (done),
// an error, or a reason to read the log again: a gap, a subscription that
// closed (dropped for falling behind, or its run ended), or quiet for poll
// (0: never).
func (f *follower) live(sub stream.Subscription[thread.Event], poll time.Duration) (bool, error) {
	// A batch only marks the stream active: stopping and resetting the
	// timer on every token cost two timer-heap updates per token.
	var idle <-chan time.Time
	var t *time.Timer
	if poll > 0 {
		t = time.NewTimer(poll)
		defer t.Stop()
		idle = t.C
	}
	active := false
	for {
		select {
		case <-f.ctx.Done():
			return false, f.ctx.Err()
		case <-f.s.Drained:
			return f.drain()
		case batch, ok := <-sub.C():
			if !ok {
				return false, nil // lagged or ended: the log has the rest
			}
			active = true
			done, gap, err := f.batch(sub, batch)
			if err != nil || done || gap {
				return done, err
			}
		case <-idle:
			if !active {
				// Quiet for a while: the run may be owned by another
				// process or recovered; read the log.
				return false, nil
			}
			active = false
			t.Reset(poll)
		}
	}
}

// batch emits one published batch; gap says it does not follow on from
// the last event emitted.
func (f *follower) batch(sub stream.Subscription[thread.Event], batch []thread.Event) (done, gap bool, err error) {
	for i, ev := range batch {
		if ev.Sequence > f.last+1 {
			return false, true, nil
		}
		done, err := f.emit(ev, i < len(batch)-1 || len(sub.C()) > 0)
		if err != nil || done {
			return done, false, err
		}
	}
	return false, false, nil
}

// storedTail is what the store holds of the run after last when a read
// found nothing there: either the run goes on (nothing, not ended), or it
// ended at or after last (a rejoin after the final event, or an end that
// committed since). The final event and the run's status commit together,
// so it reads the status first and the log again, a page of it: more says
// the store holds more after recs, and ended is then false. Errors are
// the store's (not_found for a run that is gone).
func (s *Follower) storedTail(ctx context.Context, r *thread.Run, last int64) (recs []thread.Record, ended, more bool, err error) {
	cur, err := s.Store.RunGet(ctx, r.ThreadID, r.ID)
	if err != nil || !cur.Status.Done() {
		return nil, false, false, err
	}
	recs, more, err = s.Store.RunEventsPage(ctx, r.ID, last, s.PageBytes)
	return recs, err == nil && !more, more, err
}

// events rebuilds the stream events of records read from the run's log.
// tree is the thread's tree as an earlier call returned it (nil: none
// yet); the one the snapshots among recs need is returned. Errors are the
// store's.
func (s *Follower) events(ctx context.Context, caller string, r *thread.Run, recs []thread.Record, tree *checkpoint.Tree) ([]thread.Event, *checkpoint.Tree, error) {
	// fold is the running message before each record, from the first
	// running snapshot (the first event, and one after each agent step)
	// on: see foldBefore.
	var fold *thread.Turn
	evs := make([]thread.Event, 0, len(recs))
	for i, rec := range recs {
		var running []checkpoint.Part
		if rec.Kind == thread.KindSnapshot {
			var err error
			if tree, err = s.treeAt(ctx, caller, r, tree, rec.TreeSeq); err != nil {
				return nil, nil, err
			}
			if !rec.Status.Done() && fold == nil {
				if fold, err = s.foldBefore(ctx, r, tree, recs, i); err != nil {
					return nil, nil, err
				}
			}
			if !rec.Status.Done() {
				running = fold.Content()
			}
		}
		ev := runlog.Event(r, rec, tree, running)
		if err := s.fillSub(ctx, caller, rec.Sub, &ev); err != nil {
			return nil, nil, err
		}
		evs = append(evs, ev)
		if fold != nil {
			fold.Add(&recs[i])
		}
	}
	return evs, tree, nil
}

// treeAt returns a tree of the run's thread that reaches sequence seq:
// tree if it does, else the cached one, else the store's. The tree is
// append-only, so one that reaches seq is exact (the caller was checked
// before); only a miss costs a round trip.
func (s *Follower) treeAt(ctx context.Context, caller string, r *thread.Run, tree *checkpoint.Tree, seq int64) (*checkpoint.Tree, error) {
	if tree != nil && tree.LastSeq() >= seq {
		return tree, nil
	}
	cached := s.Trees.Peek(r.ThreadID)
	if cached != nil && cached.LastSeq() >= seq {
		return cached, nil
	}
	th, err := s.Store.ThreadGet(ctx, caller, r.ThreadID)
	if err != nil {
		return nil, err
	}
	return s.Trees.Tree(ctx, th)
}

// foldBefore returns the run's running message before recs[i]: the turn
// it continues, if any, then its records from sequence 1.
func (s *Follower) foldBefore(ctx context.Context, r *thread.Run, tree *checkpoint.Tree, recs []thread.Record, i int) (*thread.Turn, error) {
	fold := runlog.Seeded(r, tree)
	if recs[0].Seq > 1 {
		prior, _, err := s.Logged(ctx, r.ID, 0)
		if err != nil {
			return nil, err
		}
		for j := range prior[:min(int(recs[0].Seq-1), len(prior))] {
			fold.Add(&prior[j])
		}
	}
	for j := range recs[:i] {
		fold.Add(&recs[j])
	}
	return &fold, nil
}

// PollEvery is how long a follower of a run (or, with wake-ups, the run's
// reader in this process, see the relay) waits, quiet, before it reads the log
// again: with wake-ups only a safety net.
func (s *Follower) PollEvery() time.Duration {
	if s.Wakeups != nil {
		return 2 * time.Second
	}
	return time.Second
}

// nopWake never fires.
type nopWake struct{}

func (nopWake) C() <-chan struct{} { return nil }

func (nopWake) Close() {}

// wakeRun subscribes a follower to a run's wake-ups, unless the run is
// this process's own (its events come through the hub) or there are no
// wake-ups.
func (s *Follower) wakeRun(runID uuid.UUID) thread.Wake {
	if s.Wakeups == nil || s.Local.Runs(runID) {
		return nopWake{}
	}
	return s.Wakeups.WakeRun(runID)
}

// relayRead reads run r's log for its reader, as caller (its first
// follower, whose access was checked): the records after a sequence, or
// when there are none the stored tail (did the run end?), made events
// against the reader's own copy of the thread's tree. Errors are the
// store's (not_found: the run or its thread is gone).
func (s *Follower) relayRead(r *thread.Run, caller string) relay.RelayRead[thread.Event] {
	var tree *checkpoint.Tree
	return func(ctx context.Context, after int64) ([]thread.Event, int64, bool, error) {
		recs, _, err := s.Logged(ctx, r.ID, after)
		if err != nil {
			return nil, after, false, err
		}
		ended := false
		if len(recs) == 0 {
			// A wake-up for nothing new, or a quiet spell: did the run end?
			if recs, ended, _, err = s.storedTail(ctx, r, after); err != nil || len(recs) == 0 {
				return nil, after, ended, err
			}
		}
		evs, t, err := s.events(ctx, caller, r, recs, tree)
		if err != nil {
			return nil, after, false, err
		}
		tree = t
		return evs, recs[len(recs)-1].Seq, ended || evs[len(evs)-1].Final(), nil
	}
}

// Where logged found a run's records.
type logSource int

const (
	logStored logSource = iota // the store: the run is not running here
	logLive                    // this process's memory: the run goes on
	logEnded                   // this process's memory: the whole log
)

// Logged returns the run's durable records after sequence after: from
// memory while this process runs it (a rejoin then reads nothing from the
// database), else from the store.
func (s *Follower) Logged(ctx context.Context, runID uuid.UUID, after int64) ([]thread.Record, logSource, error) {
	if recs, src, ok := s.localLog(runID, after); ok {
		return recs, src, nil
	}
	recs, err := s.Store.RunEventsAfter(ctx, runID, after)
	return recs, logStored, err
}

// localLog returns the records after sequence after of a run this process
// runs (ok false when it runs no such run).
func (s *Follower) localLog(runID uuid.UUID, after int64) (recs []thread.Record, src logSource, ok bool) {
	recs, ended, ok := s.Local.Log(runID, after)
	if !ok {
		return nil, logStored, false
	}
	if ended {
		return recs, logEnded, true
	}
	return recs, logLive, true
}

// loggedPage is logged with the store's answer cut to a page of
// PageBytes; more says the store holds more after it.
func (s *Follower) loggedPage(ctx context.Context, runID uuid.UUID, after int64) (recs []thread.Record, src logSource, more bool, err error) {
	if recs, src, ok := s.localLog(runID, after); ok {
		return recs, src, false, nil // this process's memory: nothing is copied
	}
	recs, more, err = s.Store.RunEventsPage(ctx, runID, after, s.PageBytes)
	return recs, logStored, more, err
}

// fillSub rebuilds the snapshot a subagent event ev (of record sub) wraps,
// at whatever depth: a child's, or a grandchild's within the child's
// subagent event. Errors are subSnapshot's.
func (s *Follower) fillSub(ctx context.Context, caller string, sub *thread.SubRecord, ev *thread.Event) error {
	for ; sub != nil && ev.Sub != nil; sub, ev = sub.Record.Sub, &ev.Sub.Event {
		if sub.Record.Kind == thread.KindSnapshot {
			return s.subSnapshot(ctx, caller, sub, &ev.Sub.Event)
		}
	}
	return nil
}

// subSnapshot rebuilds a subagent record's child snapshot event as the
// child's follower got it: the child thread's tree at the record and, for
// a running snapshot, the child's message folded from its own log. A
// child that is gone (its thread deleted on its own) shows an empty tree.
// Other errors are the store's.
func (s *Follower) subSnapshot(ctx context.Context, caller string, sub *thread.SubRecord, ev *thread.Event) error {
	child, err := s.Store.RunGet(ctx, sub.ThreadID, sub.RunID)
	var tree *checkpoint.Tree
	if err == nil {
		tree, err = s.treeAt(ctx, caller, child, nil, sub.Record.TreeSeq)
	}
	if errcode.Of(err) == errcode.NotFound {
		*ev = thread.Event{Type: thread.KindSnapshot, RunID: sub.RunID, Sequence: sub.Record.Seq, Snapshot: &thread.Snapshot{
			ThreadID: sub.ThreadID, RunStatus: sub.Record.Status, Tree: &checkpoint.Tree{}, Head: sub.MessageID}}
		return nil
	}
	if err != nil {
		return err
	}
	var running []checkpoint.Part
	if !sub.Record.Status.Done() {
		fold := runlog.Seeded(child, tree)
		if sub.Record.Seq > 1 {
			prior, _, err := s.Logged(ctx, child.ID, 0)
			if err != nil {
				return err
			}
			for i := range prior {
				if prior[i].Seq >= sub.Record.Seq {
					break
				}
				fold.Add(&prior[i])
			}
		}
		running = fold.Content()
	}
	*ev = runlog.Event(child, sub.Record, tree, running)
	return nil
}
