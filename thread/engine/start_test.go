package engine_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/store"
	"github.com/threadline/threadline/store/pgtest"
	"github.com/threadline/threadline/stream"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/engine"
	twait "github.com/threadline/threadline/thread/threadtest/wait"
)

// countingStore counts how a run's start and end reach the database, and
// can make a start's commit or merged finish fail.
type countingStore struct {
	*store.Store
	mu                               sync.Mutex
	commits, finishes, plainFinishes int
	appends, threadGets, creates     int
	logReads, threadReads, cpReads   int
	runGets                          int
	failCommit, failFinish           bool
}

func (c *countingStore) RunEventsAfter(ctx context.Context, runID uuid.UUID, after int64) ([]thread.Record, error) {
	c.count(&c.logReads)
	return c.Store.RunEventsAfter(ctx, runID, after)
}

func (c *countingStore) RunEventsPage(ctx context.Context, runID uuid.UUID, after int64, maxBytes int) ([]thread.Record, bool, error) {
	c.count(&c.logReads)
	return c.Store.RunEventsPage(ctx, runID, after, maxBytes)
}

func (c *countingStore) ThreadCreate(ctx context.Context, t *thread.Thread) (*thread.Thread, bool, error) {
	c.count(&c.creates)
	return c.Store.ThreadCreate(ctx, t)
}

func (c *countingStore) ThreadRead(ctx context.Context, caller string, id uuid.UUID, after int64) (*thread.Thread, []checkpoint.Node, *thread.Run, error) {
	c.count(&c.threadReads)
	return c.Store.ThreadRead(ctx, caller, id, after)
}

func (c *countingStore) CheckpointsAfter(ctx context.Context, threadID uuid.UUID, after int64) ([]checkpoint.Node, error) {
	c.count(&c.cpReads)
	return c.Store.CheckpointsAfter(ctx, threadID, after)
}

func (c *countingStore) RunGet(ctx context.Context, threadID, runID uuid.UUID) (*thread.Run, error) {
	c.count(&c.runGets)
	return c.Store.RunGet(ctx, threadID, runID)
}

func (c *countingStore) ThreadGet(ctx context.Context, caller string, id uuid.UUID) (*thread.Thread, error) {
	c.count(&c.threadGets)
	return c.Store.ThreadGet(ctx, caller, id)
}

func (c *countingStore) count(n *int) {
	c.mu.Lock()
	*n++
	c.mu.Unlock()
}

func (c *countingStore) counts() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprintf("start commits %d, merged finishes %d, separate finishes %d, group commits %d",
		c.commits, c.finishes, c.plainFinishes, c.appends)
}

var errInjected = errors.New("injected: the database went away")

func (c *countingStore) RunCreate(ctx context.Context, in thread.RunCreate, first thread.Record) (*thread.Run, error) {
	c.count(&c.commits)
	if c.failCommit {
		return nil, errInjected
	}
	return c.Store.RunCreate(ctx, in, first)
}

func (c *countingStore) RunComplete(ctx context.Context, in thread.RunCreate, fin thread.RunFinish) error {
	c.count(&c.finishes)
	if c.failFinish {
		return errInjected
	}
	return c.Store.RunComplete(ctx, in, fin)
}

func (c *countingStore) RunFinish(ctx context.Context, in thread.RunFinish) error {
	c.count(&c.plainFinishes)
	return c.Store.RunFinish(ctx, in)
}

func (c *countingStore) RunEventsAppend(ctx context.Context, segs []thread.Segment) error {
	c.count(&c.appends)
	return c.Store.RunEventsAppend(ctx, segs)
}

// gated emits its first token, then waits for release before the rest.
type gated struct {
	release chan struct{}
	started chan struct{}
	once    sync.Once
}

func newGated() *gated { return &gated{release: make(chan struct{}), started: make(chan struct{})} }

func (g *gated) Stream(ctx context.Context, _ thread.ModelRequest, onDelta func(thread.Delta) error) (thread.ModelResult, error) {
	on := textSink(onDelta)
	if err := on("first"); err != nil {
		return thread.ModelResult{}, err
	}
	g.once.Do(func() { close(g.started) })
	select {
	case <-g.release:
	case <-ctx.Done():
		return thread.ModelResult{}, ctx.Err()
	}
	if err := on(" second"); err != nil {
		return thread.ModelResult{}, err
	}
	return thread.ModelResult{StopReason: "stop"}, nil
}

func startSetup(t *testing.T, m thread.Model, linger time.Duration) (*engine.Service, *countingStore) {
	t.Helper()
	cs := &countingStore{Store: store.New(pgtest.Pool(t))}
	svc := engine.New(cs, stream.New[thread.Event](64), models{m: m}, cs.Store, engine.Config{StartLinger: linger})
	svc.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		svc.Shutdown(ctx)
	})
	return svc, cs
}

// follow drains a run and returns its events.
func follow(t *testing.T, svc *engine.Service, r *thread.Run) ([]thread.Event, error) {
	t.Helper()
	var evs []thread.Event
	err := svc.FollowRun(context.Background(), "local", r, 0, func(ev thread.Event, _ bool) error {
		evs = append(evs, ev)
		return nil
	})
	return evs, err
}

func checkSequence(t *testing.T, evs []thread.Event, want int) {
	t.Helper()
	if len(evs) != want {
		t.Fatalf("events: got %d, want %d", len(evs), want)
	}
	for i, ev := range evs {
		if ev.Sequence != int64(i+1) {
			t.Fatalf("event %d: got sequence %d, want %d", i, ev.Sequence, i+1)
		}
	}
	if evs[0].Type != thread.KindSnapshot || evs[0].Snapshot.RunStatus != thread.RunRunning {
		t.Fatalf("first event: got %s %v, want a running snapshot", evs[0].Type, evs[0].Snapshot)
	}
	if last := evs[len(evs)-1]; !last.Final() || last.Snapshot.RunStatus != thread.RunSucceeded {
		t.Fatalf("last event: got %s, want the final succeeded snapshot", last.Type)
	}
}

// TestFastRunCommitsOnce: a run that ends within the linger writes its
// start and its end in one transaction, with no separate log commits, and
// every event still arrives in order after it is durable.
func TestFastRunCommitsOnce(t *testing.T) {
	t.Parallel()
	svc, cs := startSetup(t, &recorder{}, time.Hour)
	ctx := context.Background()
	tid := uuid.New()
	r, _, err := svc.StartRun(ctx, "local", tid, thread.RunRequest{Message: msg("hello there")})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := follow(t, svc, r)
	if err != nil {
		t.Fatal(err)
	}
	checkSequence(t, evs, 5) // snapshot, 3 tokens, final
	if got, want := cs.counts(), "start commits 0, merged finishes 1, separate finishes 0, group commits 0"; got != want {
		t.Fatalf("commits: got %s, want %s", got, want)
	}
	snap, err := svc.Snapshot(ctx, "local", tid)
	if err != nil {
		t.Fatal(err)
	}
	if got := leaf(&snap.Snapshot).Text(); got != "reply 1" {
		t.Fatalf("stored reply: got %q, want %q", got, "reply 1")
	}
	th, err := svc.GetThread(ctx, "local", tid)
	if err != nil || th.Title == nil || *th.Title != "hello there" {
		t.Fatalf("title after the first exchange: got %v (%v), want %q", th, err, "hello there")
	}
	// The first run cached the tree with its owner: later turns read no
	// thread row.
	parent := leaf(&snap.Snapshot).ID
	for range 2 {
		cs.mu.Lock()
		cs.threadGets = 0
		cs.mu.Unlock()
		s := run(t, svc, tid, thread.RunRequest{Message: msg("more"), ParentID: parent})
		parent = leaf(s).ID
		cs.mu.Lock()
		gets := cs.threadGets
		cs.mu.Unlock()
		if gets != 0 {
			t.Fatalf("turn on a cached thread: got %d thread reads, want 0", gets)
		}
	}
}

// startGated starts a run of a gated model on a new thread, with a 1 ms
// start linger: its start is committed alone while the model waits.
func startGated(t *testing.T) (*gated, *engine.Service, *countingStore, uuid.UUID, *thread.Run) {
	t.Helper()
	g := newGated()
	svc, cs := startSetup(t, g, time.Millisecond)
	tid := uuid.New()
	r, _, err := svc.StartRun(context.Background(), "local", tid, thread.RunRequest{Message: msg("q")})
	if err != nil {
		t.Fatal(err)
	}
	return g, svc, cs, tid, r
}

// TestSlowRunCommitsStartAlone: a run still going when the linger ends
// commits its start alone; its client sees the snapshot and the first
// token while the model still runs, and the run is visible to others.
func TestSlowRunCommitsStartAlone(t *testing.T) {
	t.Parallel()
	g, svc, cs, tid, r := startGated(t)
	ctx := context.Background()
	var evs []thread.Event
	err := svc.FollowRun(ctx, "local", r, 0, func(ev thread.Event, _ bool) error {
		evs = append(evs, ev)
		if ev.Type == thread.KindToken && ev.Text == "first" {
			// Durable and published while the model is held.
			got, err := svc.GetRun(ctx, "local", tid, r.ID)
			if err != nil || got.Status != thread.RunRunning || got.LastSequence < 2 {
				t.Errorf("run while the model waits: got %+v (%v), want running with sequence >= 2 logged", got, err)
			}
			// In the store itself, not only in the service's memory.
			recs, err := cs.Store.RunEventsAfter(ctx, r.ID, 1)
			if err != nil || len(recs) == 0 || recs[0].Text != "first" {
				t.Errorf("store log after 1 while the model waits: got %+v (%v), want the token \"first\"", recs, err)
			}
			close(g.release)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	checkSequence(t, evs, 4)
	cs.mu.Lock()
	commits, finishes, plain := cs.commits, cs.finishes, cs.plainFinishes
	cs.mu.Unlock()
	if commits != 1 || finishes != 0 || plain != 1 {
		t.Fatalf("commits: got %s, want the start and the end committed separately", cs.counts())
	}
}

// TestSecondRunWaitsForOpenStart: a second run on a thread whose first
// run's start is not written yet (its model runs during the linger) waits
// until that start is settled, then is refused with run_in_progress
// naming the first run, which by then exists: the first's start might
// have failed, and a 409 must never name a run that never started.
func TestSecondRunWaitsForOpenStart(t *testing.T) {
	t.Parallel()
	g := newGated()
	svc, cs := startSetup(t, g, time.Hour)
	ctx := context.Background()
	tid := uuid.New()
	type result struct {
		r   *thread.Run
		err error
	}
	first := make(chan result, 1)
	go func() {
		r, _, err := svc.StartRun(ctx, "local", tid, thread.RunRequest{Message: msg("q")})
		first <- result{r, err}
	}()
	<-g.started // the first model runs; nothing of its run is written
	if th, err := cs.Store.ThreadGet(ctx, "local", tid); errcode.Of(err) != errcode.NotFound {
		t.Fatalf("thread while the first run lingers: got %+v (%v), want not_found (its run's write creates it)", th, err)
	}
	type refusal struct {
		err    error
		stored error // RunGet of the run it names, as it returned
	}
	second := make(chan refusal, 1)
	go func() {
		_, _, err := svc.StartRun(ctx, "local", tid, thread.RunRequest{Message: msg("again")})
		var e *errcode.Error
		if !errors.As(err, &e) || e.Code != errcode.RunInProgress {
			second <- refusal{err: err}
			return
		}
		_, stored := cs.Store.RunGet(ctx, tid, e.RunID)
		second <- refusal{err: err, stored: stored}
	}()
	// Release the first run only once the second waits for its start:
	// released earlier, the first can end before the second is called.
	twait.Eventually(t, 10*time.Second, func() bool { return engine.StartWaiters(svc, "local", tid) == 1 }, "the second StartRun never waited for the first's start")
	close(g.release)
	res := <-first
	if res.err != nil {
		t.Fatal(res.err)
	}
	ref := <-second
	var e *errcode.Error
	if !errors.As(ref.err, &e) || e.Code != errcode.RunInProgress {
		t.Fatalf("second StartRun: got %v, want run_in_progress", ref.err)
	}
	if e.RunID != res.r.ID || ref.stored != nil {
		t.Fatalf("second StartRun named run %v (stored when named: %v), want %s, stored", e.RunID, ref.stored, res.r.ID)
	}
	if evs, err := follow(t, svc, res.r); err != nil {
		t.Fatal(err)
	} else {
		checkSequence(t, evs, 4)
	}
}

// TestUnsavedStartIsAnError: when the start cannot be committed, alone or
// with the run's end, StartRun says unavailable, and nothing of the run is
// stored.
func TestUnsavedStartIsAnError(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		model  func() thread.Model
		linger time.Duration
		fail   func(*countingStore)
	}{
		{"commit alone", func() thread.Model { return newGated() }, time.Millisecond, func(c *countingStore) { c.failCommit = true }},
		{"with the end", func() thread.Model { return &recorder{} }, time.Hour, func(c *countingStore) { c.failFinish = true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := tc.model()
			svc, cs := startSetup(t, m, tc.linger)
			tc.fail(cs)
			ctx := context.Background()
			tid := uuid.New()
			if _, _, err := svc.CreateThread(ctx, "local", tid, nil); err != nil {
				t.Fatal(err)
			}
			_, _, err := svc.StartRun(ctx, "local", tid, thread.RunRequest{Message: msg("q")})
			if errcode.Of(err) != errcode.Unavailable {
				t.Fatalf("StartRun: got %v, want unavailable", err)
			}
			if th, err := cs.Store.ThreadGet(ctx, "local", tid); err != nil || th.LastSeq != 0 {
				t.Fatalf("thread after an unsaved run: got %+v (%v), want it empty", th, err)
			}
			nodes, err := cs.Store.CheckpointsAfter(ctx, tid, 0)
			if err != nil || len(nodes) != 0 {
				t.Fatalf("checkpoints: got %d (%v), want none", len(nodes), err)
			}
			// Nothing is left locked: the next run on the thread works.
			cs.mu.Lock()
			cs.failCommit, cs.failFinish = false, false
			cs.mu.Unlock()
			if g, ok := m.(*gated); ok {
				close(g.release)
			}
			r, _, err := svc.StartRun(ctx, "local", tid, thread.RunRequest{Message: msg("q")})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := follow(t, svc, r); err != nil {
				t.Fatal(err)
			}
			if nodes, err := cs.Store.CheckpointsAfter(ctx, tid, 0); err != nil || len(nodes) != 2 {
				t.Fatalf("checkpoints after the next run: got %d (%v), want 2", len(nodes), err)
			}
		})
	}
}

// TestStaleCacheIsRetried: a process whose cached tree is stale (another
// process appended to the thread, or deleted it) still starts runs right,
// and another caller cannot use the cache to reach the thread.
func TestStaleCacheIsRetried(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	st := store.New(pool)
	a := engine.New(st, stream.New[thread.Event](64), models{m: &recorder{}}, st, engine.Config{})
	a.Start()
	b := engine.New(st, stream.New[thread.Event](64), models{m: &recorder{}}, st, engine.Config{})
	b.Start()
	shutdownAtCleanup(t, a)
	shutdownAtCleanup(t, b)
	ctx := context.Background()
	tid := uuid.New()
	s1 := run(t, a, tid, thread.RunRequest{Message: msg("one")})
	s2 := run(t, a, tid, thread.RunRequest{Message: msg("two"), ParentID: leaf(s1).ID}) // a caches the tree
	s3 := run(t, b, tid, thread.RunRequest{Message: msg("three"), ParentID: leaf(s2).ID})
	// a's tree lacks b's reply: the parent looks unknown, then is found.
	s4 := run(t, a, tid, thread.RunRequest{Message: msg("four"), ParentID: leaf(s3).ID})
	if got := len(s4.View().Path(s4.Head)); got != 8 {
		t.Fatalf("path after a stale-cache run: got %d messages, want 8", got)
	}
	// b's tree is stale too, under a parent it knows: the guard refuses the
	// stale start, and the retry appends a branch beside "three".
	s5 := run(t, b, tid, thread.RunRequest{Message: msg("five"), ParentID: leaf(s2).ID})
	if got := len(s5.View().Children(leaf(s2).ID)); got != 2 {
		t.Fatalf("branches under the second reply: got %d, want 2", got)
	}
	if _, _, err := a.StartRun(ctx, "mallory", tid, thread.RunRequest{Message: msg("x"), ParentID: leaf(s5).ID}); errcode.Of(err) != errcode.NotFound {
		t.Fatalf("another caller's run on a cached thread: got %v, want not_found (the thread is not theirs)", err)
	}
	// Deleted and recreated elsewhere: a's cache is wrong about every node.
	if err := b.DeleteThread(ctx, "local", tid); err != nil {
		t.Fatal(err)
	}
	s6 := run(t, b, tid, thread.RunRequest{Message: msg("fresh")})
	s7 := run(t, a, tid, thread.RunRequest{Message: msg("again"), ParentID: leaf(s6).ID})
	if got := len(s7.View().Path(s7.Head)); got != 4 {
		t.Fatalf("path on the recreated thread: got %d messages, want 4", got)
	}
}

// TestNewThreadIsCreatedByItsFirstRun: a run on a thread id that does not
// exist creates the thread in the run's own write (no commit of its own),
// whether the run is written whole or its start first; a run that cannot
// be saved leaves no thread; another caller cannot use the id.
func TestNewThreadIsCreatedByItsFirstRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name                 string
		linger               time.Duration
		failCommit, failFin  bool
		wantCommits, wantFin int
	}{
		{name: "written whole", linger: time.Hour, wantFin: 1},
		{name: "start first", linger: -1, wantCommits: 1},
		{name: "not saved", linger: time.Hour, failFin: true, wantFin: 1},
		{name: "start not saved", linger: -1, failCommit: true, wantCommits: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			svc, cs := startSetup(t, &recorder{}, tc.linger)
			cs.failCommit, cs.failFinish = tc.failCommit, tc.failFin
			tid := uuid.New()
			r, _, err := svc.StartRun(ctx, "local", tid, thread.RunRequest{Message: msg("hello there")})
			saved := !tc.failCommit && !tc.failFin
			if saved != (err == nil) {
				t.Fatalf("StartRun: got %v, want an error %v", err, !saved)
			}
			if saved {
				if evs, err := follow(t, svc, r); err != nil || !evs[len(evs)-1].Final() {
					t.Fatalf("follow: %v", err)
				}
			}
			th, err := cs.Store.ThreadGet(ctx, "local", tid)
			switch {
			case saved && (err != nil || th.LastSeq != 2 || th.Title == nil || *th.Title != "hello there"):
				t.Fatalf("thread after its first run: got %+v (%v), want 2 messages, titled %q", th, err, "hello there")
			case !saved && errcode.Of(err) != errcode.NotFound:
				t.Fatalf("thread after an unsaved first run: got %+v (%v), want not_found", th, err)
			}
			cs.mu.Lock()
			creates, commits, fins := cs.creates, cs.commits, cs.finishes
			cs.mu.Unlock()
			if creates != 0 || commits != tc.wantCommits || fins != tc.wantFin {
				t.Fatalf("writes: %d thread creations, %s; want no creation, %d start commits and %d merged finishes",
					creates, cs.counts(), tc.wantCommits, tc.wantFin)
			}
			if cs.mu.Lock(); cs.threadGets != 0 {
				t.Errorf("thread reads before a new thread's first run: got %d, want 0", cs.threadGets)
			}
			cs.mu.Unlock()
			if !saved {
				return
			}
			_, _, err = svc.StartRun(ctx, "mallory", tid, thread.RunRequest{Message: msg("mine")})
			if errcode.Of(err) != errcode.NotFound {
				t.Fatalf("another caller's run on the id: got %v, want not_found", err)
			}
		})
	}
}

// heldStore holds the first single write of a run's start (or, with
// ends, of a run's end) until released, so that the starts (ends) that
// come meanwhile queue behind it; it records the writes of several and
// can refuse them.
type heldStore struct {
	*store.Store
	ends    bool
	hold    chan struct{}
	once    sync.Once
	entered chan struct{}
	mu      sync.Mutex
	singles int
	alls    []int // the size of each write of several
	failAll bool
}

func (h *heldStore) single(held bool) {
	if !held {
		return
	}
	h.mu.Lock()
	h.singles++
	h.mu.Unlock()
	h.once.Do(func() {
		close(h.entered)
		<-h.hold
	})
}

func (h *heldStore) several(held bool, n int) error {
	if !held {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.alls = append(h.alls, n)
	if h.failAll {
		return errInjected
	}
	return nil
}

func (h *heldStore) RunCreate(ctx context.Context, in thread.RunCreate, first thread.Record) (*thread.Run, error) {
	h.single(!h.ends)
	return h.Store.RunCreate(ctx, in, first)
}

func (h *heldStore) RunCreateAll(ctx context.Context, ins []thread.RunCreate, firsts []thread.Record) error {
	if err := h.several(!h.ends, len(ins)); err != nil {
		return err
	}
	return h.Store.RunCreateAll(ctx, ins, firsts)
}

func (h *heldStore) RunFinish(ctx context.Context, in thread.RunFinish) error {
	h.single(h.ends)
	return h.Store.RunFinish(ctx, in)
}

func (h *heldStore) RunFinishAll(ctx context.Context, ins []thread.RunFinish) error {
	if err := h.several(h.ends, len(ins)); err != nil {
		return err
	}
	return h.Store.RunFinishAll(ctx, ins)
}

// firstApart serves its first run with first and every later one with
// rest.
type firstApart struct {
	first, rest thread.Model
	calls       atomic.Int32
}

func (f *firstApart) Stream(ctx context.Context, req thread.ModelRequest, on func(thread.Delta) error) (thread.ModelResult, error) {
	if f.calls.Add(1) == 1 {
		return f.first.Stream(ctx, req, on)
	}
	return f.rest.Stream(ctx, req, on)
}

// TestWritesShareAWrite: starts whose linger runs out, or ends of runs,
// that come while another one is being written go to the database
// together, in one write; when that write is refused, each is written
// alone. Every run starts and ends either way.
func TestWritesShareAWrite(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		ends, failAll bool
	}{{false, false}, {false, true}, {true, false}, {true, true}} {
		t.Run(fmt.Sprintf("ends=%v/refused=%v", c.ends, c.failAll), func(t *testing.T) {
			t.Parallel()
			// With ends, the first run has a gate of its own, so that its
			// end is written alone (and held) before the others end.
			g, first := newGated(), newGated()
			var m thread.Model = g
			if c.ends {
				m = &firstApart{first: first, rest: g}
			}
			hs := &heldStore{Store: store.New(pgtest.Pool(t)), ends: c.ends, hold: make(chan struct{}), entered: make(chan struct{}), failAll: c.failAll}
			svc := engine.New(hs, stream.New[thread.Event](64), models{m: m}, hs.Store, engine.Config{StartLinger: time.Millisecond})
			svc.Start()
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				svc.Shutdown(ctx)
			})
			ctx := context.Background()
			const n = 5
			type result struct {
				r   *thread.Run
				err error
			}
			results := make(chan result, n)
			startOne := func() {
				r, _, err := svc.StartRun(ctx, "local", uuid.New(), thread.RunRequest{Message: msg("q")})
				results <- result{r, err}
			}
			pending := engine.PendingStarts
			var runs []*thread.Run
			collect := func() {
				for range n {
					res := <-results
					if res.err != nil {
						t.Fatalf("StartRun: %v", res.err)
					}
					runs = append(runs, res.r)
				}
			}
			if c.ends {
				// All runs start. The first one's end is written alone
				// and held; then the others end and queue behind it.
				pending = engine.PendingEnds
				startOne()
				for range n - 1 {
					go startOne()
				}
				collect()
				close(first.release)
				<-hs.entered
				close(g.release)
			} else {
				go startOne()
				<-hs.entered
				for range n - 1 {
					go startOne()
				}
			}
			// On a failure, the held write is let go before the shutdown
			// (cleanups run last first).
			release := sync.OnceFunc(func() { close(hs.hold) })
			t.Cleanup(release)
			twait.Eventually(t, 10*time.Second, func() bool { return pending(svc) >= n-1 },
				"%v writes pending after 10 s, want %d", func() any { return pending(svc) }, n-1)
			release()
			if !c.ends {
				collect()
				close(g.release)
			}
			for _, r := range runs {
				evs, err := follow(t, svc, r)
				if err != nil {
					t.Fatal(err)
				}
				checkSequence(t, evs, 4)
				if got, err := hs.Store.RunGet(ctx, r.ThreadID, r.ID); err != nil || got.Status != thread.RunSucceeded {
					t.Fatalf("run after its stream: %+v (%v), want succeeded", got, err)
				}
			}
			hs.mu.Lock()
			singles, alls := hs.singles, append([]int(nil), hs.alls...)
			hs.mu.Unlock()
			wantSingles := 1
			if c.failAll {
				wantSingles = n
			}
			if len(alls) != 1 || alls[0] != n-1 || singles != wantSingles {
				t.Fatalf("writes: %d single and batches of %v; want %d single and one batch of %d", singles, alls, wantSingles, n-1)
			}
		})
	}
}

// tailStore records how far the group commit had written a run's log when
// the run's final write began.
type tailStore struct {
	*store.Store
	mu              sync.Mutex
	appended        int64 // the highest sequence the group commit wrote
	atFinish        int64 // appended when RunFinish began
	finishedRecords int
}

func (s *tailStore) RunEventsAppend(ctx context.Context, segs []thread.Segment) error {
	err := s.Store.RunEventsAppend(ctx, segs)
	s.mu.Lock()
	for _, sg := range segs {
		if n := len(sg.Records); n > 0 && err == nil {
			s.appended = max(s.appended, sg.Records[n-1].Seq)
		}
	}
	s.mu.Unlock()
	return err
}

func (s *tailStore) RunFinish(ctx context.Context, in thread.RunFinish) error {
	s.mu.Lock()
	s.atFinish, s.finishedRecords = s.appended, len(in.Records)
	s.mu.Unlock()
	return s.Store.RunFinish(ctx, in)
}

// TestLastTokensGoWithTheGroupCommit: a run whose start was written alone
// ends only after the group commit has written all its tokens, so its last
// tokens are published with the other runs' commit rather than after the
// run's own final write; that write still holds the whole log.
func TestLastTokensGoWithTheGroupCommit(t *testing.T) {
	t.Parallel()
	g := newGated()
	ts := &tailStore{Store: store.New(pgtest.Pool(t))}
	svc := engine.New(ts, stream.New[thread.Event](64), models{m: g}, ts.Store, engine.Config{StartLinger: -1})
	svc.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		svc.Shutdown(ctx)
	})
	r, _, err := svc.StartRun(context.Background(), "local", uuid.New(), thread.RunRequest{Message: msg("q")})
	if err != nil {
		t.Fatal(err)
	}
	close(g.release)
	evs, err := follow(t, svc, r)
	if err != nil {
		t.Fatal(err)
	}
	checkSequence(t, evs, 4) // snapshot, "first", " second", final snapshot
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.atFinish != 3 || ts.finishedRecords != 4 {
		t.Fatalf("at the run's final write the group commit had written up to sequence %d and the write held %d records; want 3 (both tokens) and 4",
			ts.atFinish, ts.finishedRecords)
	}
}

// TestRejoinReadsMemory: while a run goes on in this process, a rejoin is
// served from the service's memory (no log read), gets exactly what it
// missed, and that is what the store holds; once the run has ended, a
// rejoin reads the store's compacted log and gets the same events.
func TestRejoinReadsMemory(t *testing.T) {
	t.Parallel()
	g, svc, cs, tid, r := startGated(t)
	ctx := context.Background()
	errLeave := errors.New("leave")
	err := svc.FollowRun(ctx, "local", r, 0, func(ev thread.Event, _ bool) error {
		if ev.Type == thread.KindToken {
			return errLeave // "first" is durable: drop the connection
		}
		return nil
	})
	if !errors.Is(err, errLeave) {
		t.Fatalf("first follow: got %v, want to leave at the first token", err)
	}
	stored, err := cs.Store.RunEventsAfter(ctx, r.ID, 0)
	if err != nil || len(stored) != 2 || stored[1].Text != "first" {
		t.Fatalf("store while running: got %+v (%v), want the snapshot and \"first\"", stored, err)
	}
	reads := func() int { cs.mu.Lock(); defer cs.mu.Unlock(); return cs.logReads }
	before := reads()
	var seen []string
	var evs []thread.Event
	err = svc.Follow(ctx, "local", tid, r.ID, 0, func(ev thread.Event, _ bool) error {
		evs = append(evs, ev)
		seen = append(seen, fmt.Sprintf("%d %s %q", ev.Sequence, ev.Type, ev.Text))
		if ev.Type == thread.KindToken && ev.Text == "first" {
			if n := reads() - before; n != 0 {
				t.Errorf("rejoin of a local run: got %d log reads, want 0", n)
			}
			close(g.release)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	checkSequence(t, evs, 4)
	if want := `[1 snapshot "" 2 token "first" 3 token " second" 4 snapshot ""]`; fmt.Sprint(seen) != want {
		t.Fatalf("rejoin: got %v, want %s", seen, want)
	}
	// Ended: after the run leaves this process, the store answers.
	twait.Eventually(t, 5*time.Second, func() bool { return svc.ActiveRuns() == 0 }, "the ended run is still this process's after 5 s")
	var again []string
	err = svc.Follow(ctx, "local", tid, r.ID, 1, func(ev thread.Event, _ bool) error {
		again = append(again, fmt.Sprintf("%d %s %q", ev.Sequence, ev.Type, ev.Text))
		return nil
	})
	if err != nil || fmt.Sprint(again) != fmt.Sprint(seen[1:]) || reads() == before {
		t.Fatalf("rejoin after the end: got %v (%v, %d log reads), want %v from the store", again, err, reads()-before, seen[1:])
	}
}

// TestRunPurgesLog: once the service is started, the group commit's shared
// log rows are freed once the runs in them have ended; nothing else
// deletes them, so without the purge they would stay.
func TestRunPurgesLog(t *testing.T) {
	t.Parallel()
	g, svc, cs, _, r := startGated(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	svc.Start()
	defer svc.Stop()
	pool := cs.Store.Pool()
	logRows := func() int {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM run_log`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	err := svc.FollowRun(ctx, "local", r, 0, func(ev thread.Event, _ bool) error {
		if ev.Type == thread.KindToken && ev.Text == "first" {
			if n := logRows(); n == 0 {
				t.Errorf("while the run streams: got 0 shared log rows, want its group commit's")
			}
			close(g.release)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rows := 0
	twait.Eventually(t, 20*time.Second, func() bool { rows = logRows(); return rows == 0 },
		"20 s after the run ended: %v shared log rows left, want 0", func() any { return rows })
	recs, err := cs.Store.RunEventsAfter(ctx, r.ID, 0)
	if err != nil || len(recs) != 4 {
		t.Fatalf("the ended run's log after the purge: got %d records (%v), want 4", len(recs), err)
	}
}

// twoServices is two processes' services on one database, through one
// counting store: b has cached nothing that a writes.
func twoServices(t *testing.T) (cs *countingStore, a, b *engine.Service) {
	t.Helper()
	cs = &countingStore{Store: store.New(pgtest.Pool(t))}
	newSvc := func() *engine.Service {
		svc := engine.New(cs, stream.New[thread.Event](64), models{m: &recorder{}}, cs.Store, engine.Config{})
		svc.Start()
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			svc.Shutdown(ctx)
		})
		return svc
	}
	return cs, newSvc(), newSvc()
}

// TestRootMessageOnUncachedThread: a message at the root is written as a
// new thread's first message without reading the thread; on a thread that
// another process filled, that write is refused and the message goes the
// long way, appended beside the existing root. On a thread that exists
// empty it goes through at once.
func TestRootMessageOnUncachedThread(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cs, a, b := twoServices(t)
	reads := func() int {
		cs.mu.Lock()
		defer cs.mu.Unlock()
		n := cs.threadGets
		cs.threadGets = 0
		return n
	}

	// Filled by a: b has not seen it.
	full := uuid.New()
	r, _, err := a.StartRun(ctx, "local", full, thread.RunRequest{Message: msg("first")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := follow(t, a, r); err != nil {
		t.Fatal(err)
	}
	reads()
	r, _, err = b.StartRun(ctx, "local", full, thread.RunRequest{Message: msg("second root")})
	if err != nil {
		t.Fatalf("root message on a thread another process filled: %v", err)
	}
	if _, err := follow(t, b, r); err != nil {
		t.Fatal(err)
	}
	if n := reads(); n != 1 {
		t.Errorf("thread reads: got %d, want 1 (after the refused first write)", n)
	}
	snap, err := b.Snapshot(ctx, "local", full)
	if err != nil {
		t.Fatal(err)
	}
	var roots []string
	for _, n := range snap.Tree.Nodes() {
		if n.ParentID == uuid.Nil {
			roots = append(roots, n.Text())
		}
	}
	if snap.Tree.Len() != 4 || len(roots) != 2 || roots[1] != "second root" {
		t.Fatalf("thread after the second root: %d messages, roots %q; want 4 messages, roots [first, second root]", snap.Tree.Len(), roots)
	}

	// Created empty by a.
	empty, _, err := a.CreateThread(ctx, "local", uuid.Nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	reads()
	r, _, err = b.StartRun(ctx, "local", empty.ID, thread.RunRequest{Message: msg("hello")})
	if err != nil {
		t.Fatalf("root message on an empty thread: %v", err)
	}
	if _, err := follow(t, b, r); err != nil {
		t.Fatal(err)
	}
	if n := reads(); n != 0 {
		t.Errorf("thread reads for an empty thread's first message: got %d, want 0", n)
	}
	th, err := cs.Store.ThreadGet(ctx, "local", empty.ID)
	if err != nil || th.LastSeq != 2 || !th.CreatedAt.Equal(empty.CreatedAt) {
		t.Fatalf("empty thread after its first run: %+v (%v), want 2 messages and its own creation time %v", th, err, empty.CreatedAt)
	}
}

// TestSnapshotIsOneRead: a snapshot of a thread this process has not
// cached, and again once cached, is one read of the store (the thread,
// the checkpoints the cache lacks and the running run together).
func TestSnapshotIsOneRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cs, a, b := twoServices(t)
	tid := uuid.New()
	var parent uuid.UUID
	for _, text := range []string{"one", "two"} {
		r, _, err := a.StartRun(ctx, "local", tid, thread.RunRequest{Message: msg(text), ParentID: parent})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := follow(t, a, r); err != nil {
			t.Fatal(err)
		}
		parent = r.MessageID
	}
	reads := func() string {
		cs.mu.Lock()
		defer cs.mu.Unlock()
		got := fmt.Sprintf("%d thread reads, %d thread gets, %d checkpoint reads", cs.threadReads, cs.threadGets, cs.cpReads)
		cs.threadReads, cs.threadGets, cs.cpReads = 0, 0, 0
		return got
	}
	reads()
	for _, state := range []string{"cold", "cached"} {
		snap, err := b.Snapshot(ctx, "local", tid)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := reads(), "1 thread reads, 0 thread gets, 0 checkpoint reads"; got != want {
			t.Errorf("%s snapshot: got %s, want %s", state, got, want)
		}
		if snap.Tree.Len() != 4 || snap.Tree.Get(parent) == nil || snap.ActiveRun != nil {
			t.Fatalf("%s snapshot: %d messages, last reply there %v, active run %v; want 4, true, none", state, snap.Tree.Len(), snap.Tree.Get(parent) != nil, snap.ActiveRun)
		}
	}
	if _, err := b.Snapshot(ctx, "mallory", tid); errcode.Of(err) != errcode.NotFound {
		t.Fatalf("another caller's snapshot: got %v, want not_found", err)
	}
}

// TestLocalRunFoundInMemory: while this process runs a run whose start is
// durable, finding it (a rejoin, a cancel, GET run) reads nothing from the
// store, and only its caller finds it; once its end is durable, the store
// answers, with the final status.
func TestLocalRunFoundInMemory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g, svc, cs, tid, r := startGated(t)
	<-g.started
	reads := func() (int, int) {
		cs.mu.Lock()
		defer cs.mu.Unlock()
		a, b := cs.threadGets, cs.runGets
		cs.threadGets, cs.runGets = 0, 0
		return a, b
	}
	reads()
	got, err := svc.GetRun(ctx, "local", tid, r.ID)
	if err != nil || got.Status != thread.RunRunning || got.ID != r.ID {
		t.Fatalf("GetRun while running: %+v (%v), want the run, running", got, err)
	}
	if tg, rg := reads(); tg != 0 || rg != 0 {
		t.Errorf("GetRun of a local running run: %d thread reads and %d run reads, want none", tg, rg)
	}
	if _, err := svc.FindRun(ctx, "mallory", tid, r.ID); errcode.Of(err) != errcode.NotFound {
		t.Fatalf("FindRun by another caller: got %v, want not_found", err)
	}
	if _, err := svc.FindRun(ctx, "local", uuid.New(), r.ID); errcode.Of(err) != errcode.NotFound {
		t.Fatalf("FindRun under another thread: got %v, want not_found", err)
	}
	reads()
	// A rejoin after the first token, in the background; then the model
	// finishes.
	type result struct {
		evs []thread.Event
		err error
	}
	rejoined := make(chan result, 1)
	go func() {
		var evs []thread.Event
		err := svc.Follow(ctx, "local", tid, r.ID, 2, func(ev thread.Event, _ bool) error {
			evs = append(evs, ev)
			return nil
		})
		rejoined <- result{evs, err}
	}()
	close(g.release)
	res := <-rejoined
	if res.err != nil || len(res.evs) != 2 || res.evs[0].Sequence != 3 || !res.evs[1].Final() {
		t.Fatalf("rejoin after sequence 2: %d events (%v), want sequences 3 and the final snapshot", len(res.evs), res.err)
	}
	got, err = svc.GetRun(ctx, "local", tid, r.ID)
	if err != nil || got.Status != thread.RunSucceeded || got.LastSequence != 4 {
		t.Fatalf("GetRun after the end: %+v (%v), want succeeded at sequence 4", got, err)
	}
	if _, rg := reads(); rg == 0 {
		t.Errorf("GetRun after the end: no run read; want the store's answer")
	}
}

// TestSetHeadOnRunningReply: the head may be the running run's reply,
// which is not a checkpoint yet; any other unknown message is not_found,
// and so is another caller's thread.
func TestSetHeadOnRunningReply(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g, svc, cs, tid, r := startGated(t)
	<-g.started
	for _, head := range []uuid.UUID{r.UserMessageID, r.MessageID} {
		if err := svc.SetHead(ctx, "local", tid, head); err != nil {
			t.Fatalf("head at %s: %v", head, err)
		}
		if th, err := cs.Store.ThreadGet(ctx, "local", tid); err != nil || th.HeadID != head {
			t.Fatalf("thread head: %+v (%v), want %s", th, err, head)
		}
	}
	for _, c := range []struct {
		caller string
		msg    uuid.UUID
	}{{"local", uuid.New()}, {"mallory", r.MessageID}} {
		if err := svc.SetHead(ctx, c.caller, tid, c.msg); errcode.Of(err) != errcode.NotFound {
			t.Errorf("head %s by %s: got %v, want not_found", c.msg, c.caller, err)
		}
	}
	close(g.release)
	if _, err := follow(t, svc, r); err != nil {
		t.Fatal(err)
	}
}

// TestFollowRunOfAnotherProcess: a run that another process executes
// publishes nothing here, so a follower here reads the log: what is
// durable when it joins, then the rest after a quiet second, every event
// once and in order.
func TestFollowRunOfAnotherProcess(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGated()
	cs := &countingStore{Store: store.New(pgtest.Pool(t))}
	newSvc := func(m thread.Model) *engine.Service {
		svc := engine.New(cs, stream.New[thread.Event](64), models{m: m}, cs.Store, engine.Config{StartLinger: time.Millisecond})
		svc.Start()
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			svc.Shutdown(ctx)
		})
		return svc
	}
	a, b := newSvc(g), newSvc(&recorder{})
	tid := uuid.New()
	ra, _, err := a.StartRun(ctx, "local", tid, thread.RunRequest{Message: msg("q")})
	if err != nil {
		t.Fatal(err)
	}
	<-g.started
	var r *thread.Run
	twait.Eventually(t, 10*time.Second, func() bool {
		r, err = b.GetRun(ctx, "local", tid, ra.ID)
		return err == nil && r.LastSequence >= 2
	}, "the first token never became durable: %v, %v", func() any { return r }, func() any { return err })
	evs := make(chan thread.Event, 16)
	done := make(chan error, 1)
	go func() {
		done <- b.FollowRun(ctx, "local", r, 0, func(ev thread.Event, _ bool) error {
			evs <- ev
			return nil
		})
		close(evs)
	}()
	for want := int64(1); want <= 2; want++ {
		if ev := <-evs; ev.Sequence != want {
			t.Fatalf("event before the release: got sequence %d, want %d", ev.Sequence, want)
		}
	}
	close(g.release)
	var got []thread.Event
	for ev := range evs {
		got = append(got, ev)
	}
	if err := <-done; err != nil {
		t.Fatalf("follow: got %v, want nil", err)
	}
	if len(got) != 2 || got[0].Sequence != 3 || got[0].Text != " second" || !got[1].Final() || got[1].Sequence != 4 {
		t.Fatalf("events after the release: got %+v, want token 3 %q and the final snapshot 4", got, " second")
	}
}
