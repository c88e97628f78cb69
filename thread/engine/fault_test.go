package engine_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/store"
	"github.com/threadline/threadline/store/pgtest"
	"github.com/threadline/threadline/stream"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/engine"
	twait "github.com/threadline/threadline/thread/threadtest/wait"
)

// faultStore is the real store with writes that fail on demand: while
// failAppends or failEnds is above zero, that many more log appends or
// end writes fail (a negative count: every one) as if the database were
// away.
type faultStore struct {
	*store.Store
	failAppends, failEnds atomic.Int64
	appendFailed          chan struct{} // gets a value each time an append fails
	endFailed             chan struct{} // gets a value each time an end write fails
}

func newFaultStore(t *testing.T) *faultStore {
	return &faultStore{Store: store.New(pgtest.Pool(t)), appendFailed: make(chan struct{}, 64), endFailed: make(chan struct{}, 64)}
}

// fail consumes one injected failure of n, if any.
func fail(n *atomic.Int64, signal chan struct{}) bool {
	for {
		v := n.Load()
		if v == 0 {
			return false
		}
		if v < 0 || n.CompareAndSwap(v, v-1) {
			select {
			case signal <- struct{}{}:
			default:
			}
			return true
		}
	}
}

func (f *faultStore) RunEventsAppend(ctx context.Context, segs []thread.Segment) error {
	if fail(&f.failAppends, f.appendFailed) {
		return errInjected
	}
	return f.Store.RunEventsAppend(ctx, segs)
}

func (f *faultStore) RunFinish(ctx context.Context, in thread.RunFinish) error {
	if fail(&f.failEnds, f.endFailed) {
		return errInjected
	}
	return f.Store.RunFinish(ctx, in)
}

func (f *faultStore) RunFinishAll(ctx context.Context, ins []thread.RunFinish) error {
	if fail(&f.failEnds, f.endFailed) {
		return errInjected
	}
	return f.Store.RunFinishAll(ctx, ins)
}

// stepper is a model that sends each text it receives on toks as a token
// and ends when toks is closed; stopped is closed when its context ends
// first. One stepper may serve several calls (a run and its title call),
// so stopped is closed once.
type stepper struct {
	toks    chan string
	stopped chan struct{}
	stop    sync.Once
	err     error // returned when toks closes, if set
}

func newStepper() *stepper { return &stepper{toks: make(chan string), stopped: make(chan struct{})} }

func (m *stepper) Stream(ctx context.Context, _ thread.ModelRequest, onDelta func(thread.Delta) error) (thread.ModelResult, error) {
	on := textSink(onDelta)
	for {
		select {
		case tok, ok := <-m.toks:
			if !ok {
				return thread.ModelResult{StopReason: "stop"}, m.err
			}
			if err := on(tok); err != nil {
				m.stop.Do(func() { close(m.stopped) })
				return thread.ModelResult{}, err
			}
		case <-ctx.Done():
			m.stop.Do(func() { close(m.stopped) })
			return thread.ModelResult{}, ctx.Err()
		}
	}
}

// faultSetup is a service on a faultStore whose runs write their start
// first, so tokens go through the group commit.
func faultSetup(t *testing.T, fs *faultStore, m thread.Model, cfg engine.Config) *engine.Service {
	t.Helper()
	cfg.StartLinger = -1
	if cfg.RetryMin == 0 {
		cfg.RetryMin, cfg.RetryMax = time.Millisecond, 20*time.Millisecond
	}
	svc := engine.New(fs, stream.New[thread.Event](256), models{m: m}, fs.Store, cfg)
	svc.Start()
	shutdownAtCleanup(t, svc)
	return svc
}

// live follows a run in the background; its events arrive on the
// returned channel, which closes when the stream ends, and its error on
// done.
func live(svc *engine.Service, r *thread.Run) (<-chan thread.Event, <-chan error) {
	evs := make(chan thread.Event, 1024)
	done := make(chan error, 1)
	go func() {
		defer close(evs)
		done <- svc.FollowRun(context.Background(), "local", r, 0, func(ev thread.Event, _ bool) error {
			evs <- ev
			return nil
		})
	}()
	return evs, done
}

// next returns the next event, failing the test if none comes within a
// bound that only a frozen stream exceeds.
func next(t *testing.T, evs <-chan thread.Event) thread.Event {
	t.Helper()
	select {
	case ev, ok := <-evs:
		if !ok {
			t.Fatal("stream ended early")
		}
		return ev
	case <-time.After(30 * time.Second):
		t.Fatal("no event within 30 s: the stream is frozen")
	}
	return thread.Event{}
}

// rest drains a stream to its end.
func rest(t *testing.T, evs <-chan thread.Event, done <-chan error) []thread.Event {
	t.Helper()
	var out []thread.Event
	for ev := range evs {
		out = append(out, ev)
	}
	if err := <-done; err != nil {
		t.Fatalf("follow: got %v, want nil", err)
	}
	return out
}

// stored replays a run from the store, as another process would.
func stored(t *testing.T, fs *faultStore, tid, runID uuid.UUID) []thread.Event {
	t.Helper()
	other := engine.New(fs.Store, stream.New[thread.Event](16), models{m: &recorder{}}, fs.Store, engine.Config{})
	other.Start()
	shutdownAtCleanup(t, other)
	var out []thread.Event
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := other.Follow(ctx, "local", tid, runID, 0, func(ev thread.Event, _ bool) error {
		out = append(out, ev)
		return nil
	}); err != nil {
		t.Fatalf("replay from the store: %v", err)
	}
	return out
}

// sameEvents fails unless got and want are the same events (sequence,
// type, text, code, final status).
func sameEvents(t *testing.T, what string, got, want []thread.Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d events, want %d", what, len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Sequence != w.Sequence || g.Type != w.Type || g.Text != w.Text || g.Code != w.Code || g.Final() != w.Final() ||
			g.Final() && g.Snapshot.RunStatus != w.Snapshot.RunStatus {
			t.Fatalf("%s: event %d: got %+v, want %+v", what, i, g, w)
		}
	}
}

func finalText(ev thread.Event, msgID uuid.UUID) string {
	if n := ev.Snapshot.Tree.Get(msgID); n != nil {
		return n.Text()
	}
	return ""
}

// TestNULIsStoredAsReplacement: a model's reply and error holding U+0000
// (which no text or jsonb column holds) end the run as any failure does,
// with U+FFFD in their place, live and in the store alike.
func TestNULIsStoredAsReplacement(t *testing.T) {
	t.Parallel()
	fs := newFaultStore(t)
	m := newStepper()
	m.err = &errcode.Error{Code: errcode.ModelError, Message: "provider said \x00 no"}
	svc := faultSetup(t, fs, m, engine.Config{})
	tid := uuid.New()
	r, _, err := svc.StartRun(context.Background(), "local", tid, thread.RunRequest{Message: msg("q\x00?")})
	if err != nil {
		t.Fatalf("StartRun with a NUL in the message: %v", err)
	}
	evs, done := live(svc, r)
	first := next(t, evs)
	m.toks <- "a\x00b"
	tok := next(t, evs)
	if tok.Text != "a\uFFFDb" {
		t.Fatalf("token: got %q, want %q", tok.Text, "a\uFFFDb")
	}
	m.toks <- "\xffc"
	close(m.toks)
	got := rest(t, evs, done)
	last := got[len(got)-1]
	if !last.Final() || last.Snapshot.RunStatus != thread.RunFailed {
		t.Fatalf("last event: got %+v, want the final failed snapshot", last)
	}
	if e := got[len(got)-2]; e.Type != thread.KindError || e.Text != "provider said \uFFFD no" {
		t.Fatalf("error event: got %+v, want the message with U+FFFD", e)
	}
	if txt := finalText(last, r.MessageID); txt != "a\uFFFDb\uFFFDc" {
		t.Fatalf("final reply: got %q, want %q", txt, "a\uFFFDb\uFFFDc")
	}
	if u := last.Snapshot.Tree.Get(r.UserMessageID); u == nil || u.Text() != "q\uFFFD?" {
		t.Fatalf("user message: got %v, want %q", u, "q\uFFFD?")
	}
	sameEvents(t, "replay", stored(t, fs, tid, r.ID), append([]thread.Event{first, tok}, got...))
}

// TestFailedAppendIsRetried: group commits that fail are retried, and the
// stream goes on: each token is published once a retry commits it, while
// the run still runs.
func TestFailedAppendIsRetried(t *testing.T) {
	t.Parallel()
	fs := newFaultStore(t)
	m := newStepper()
	svc := faultSetup(t, fs, m, engine.Config{})
	tid := uuid.New()
	r, _, err := svc.StartRun(context.Background(), "local", tid, thread.RunRequest{Message: msg("q")})
	if err != nil {
		t.Fatal(err)
	}
	evs, done := live(svc, r)
	next(t, evs)
	var want strings.Builder
	for i, tok := range []string{"one", " two", " three"} {
		fs.failAppends.Store(3)
		m.toks <- tok
		want.WriteString(tok)
		if ev := next(t, evs); ev.Type != thread.KindToken || ev.Text != tok || ev.Sequence != int64(i+2) {
			t.Fatalf("token %d after 3 failed appends: got %+v, want %q at sequence %d", i, ev, tok, i+2)
		}
		if n := fs.failAppends.Load(); n != 0 {
			t.Fatalf("failed appends left: got %d, want 0 (each was retried)", n)
		}
	}
	close(m.toks)
	got := rest(t, evs, done)
	if len(got) != 1 || got[0].Snapshot.RunStatus != thread.RunSucceeded || finalText(got[0], r.MessageID) != want.String() {
		t.Fatalf("end: got %+v, want the final succeeded snapshot with %q", got, want.String())
	}
}

// TestFailedEndIsRetried: a run whose end write fails a few times is
// written by a retry, whole, and the thread takes the next run.
func TestFailedEndIsRetried(t *testing.T) {
	t.Parallel()
	fs := newFaultStore(t)
	m := newStepper()
	svc := faultSetup(t, fs, m, engine.Config{})
	tid, r := startOn(t, svc)
	evs, done := live(svc, r)
	next(t, evs)
	m.toks <- "kept"
	next(t, evs)
	fs.failEnds.Store(4)
	close(m.toks)
	got := rest(t, evs, done)
	if len(got) != 1 || got[0].Snapshot.RunStatus != thread.RunSucceeded || finalText(got[0], r.MessageID) != "kept" {
		t.Fatalf("end after 4 failed writes: got %+v, want the final succeeded snapshot with %q", got, "kept")
	}
	if n := fs.failEnds.Load(); n != 0 {
		t.Fatalf("failed end writes left: got %d, want 0", n)
	}
	run(t, svc, tid, thread.RunRequest{Message: msg("again"), ParentID: r.MessageID})
}

// TestUnwritableEndIsReleased: a run whose end cannot be written within a
// lease is released: its owner stops renewing its lease (and only its),
// its stream ends through the store with the recovery's error and
// interrupted snapshot, keeping every token streamed, and the thread takes
// new runs.
func TestUnwritableEndIsReleased(t *testing.T) {
	t.Parallel()
	fs := newFaultStore(t)
	m := newStepper()
	const lease = time.Second
	svc := faultSetup(t, fs, m, engine.Config{Lease: lease})
	ctx := context.Background()
	tid, r := startOn(t, svc)
	evs, done := live(svc, r)
	next(t, evs)
	m.toks <- "streamed"
	next(t, evs)
	fs.failEnds.Store(-1)
	close(m.toks)
	<-fs.endFailed
	// The owner renews the lease while it retries the end ...
	before := leaseOf(t, fs, tid, r.ID)
	svc.RenewLeases(ctx)
	if after := leaseOf(t, fs, tid, r.ID); !after.After(before) {
		t.Fatalf("lease while the end is retried: got %v, want renewed past %v", after, before)
	}
	// ... and stops once it gives up.
	twait.Eventually(t, 30*time.Second, func() bool { return svc.ActiveRuns() == 0 }, "the run was not released within 30 s")
	before = leaseOf(t, fs, tid, r.ID)
	svc.RenewLeases(ctx)
	if after := leaseOf(t, fs, tid, r.ID); !after.Equal(before) {
		t.Fatalf("lease after release: got %v, want %v (not renewed)", after, before)
	}
	if st := statusOf(t, fs, tid, r.ID); st != thread.RunRunning {
		t.Fatalf("status before recovery: got %s, want running", st)
	}
	// Recovery (here, a process whose clock is past the lease) ends it.
	rec := engine.New(fs.Store, stream.New[thread.Event](16), models{m: &recorder{}}, fs.Store,
		engine.Config{Now: func() time.Time { return time.Now().Add(time.Hour) }})
	engine.StartWriters(rec) // this test drives recovery by hand
	shutdownAtCleanup(t, rec)
	if n := rec.Recover(ctx); n != 1 {
		t.Fatalf("Recover: got %d runs, want 1", n)
	}
	got := rest(t, evs, done)
	if len(got) != 2 || got[0].Type != thread.KindError || got[0].Code != errcode.RunInterrupted ||
		!got[1].Final() || got[1].Snapshot.RunStatus != thread.RunInterrupted || finalText(got[1], r.MessageID) != "streamed" {
		t.Fatalf("end of the stream: got %+v, want the run_interrupted error and the interrupted snapshot with %q", got, "streamed")
	}
	fs.failEnds.Store(0)
	run(t, svc, tid, thread.RunRequest{Message: msg("again"), ParentID: r.MessageID})
}

// TestCancelWaitsForPendingEnd: a cancel of a run whose model is done and
// whose end is being retried answers once the end is written (or, if the
// caller gives up first, unavailable), never 202 with nothing to follow.
func TestCancelWaitsForPendingEnd(t *testing.T) {
	t.Parallel()
	fs := newFaultStore(t)
	m := newStepper()
	svc := faultSetup(t, fs, m, engine.Config{})
	ctx := context.Background()
	tid, r := startOn(t, svc)
	evs, done := live(svc, r)
	next(t, evs)
	fs.failEnds.Store(-1)
	close(m.toks)
	<-fs.endFailed
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := svc.CancelRun(short, "local", tid, r.ID); errcode.Of(err) != errcode.Unavailable {
		t.Fatalf("cancel while the end is retried: got %v, want unavailable", err)
	}
	answered := make(chan error, 1)
	go func() { answered <- svc.CancelRun(ctx, "local", tid, r.ID) }()
	fs.failEnds.Store(0)
	if err := <-answered; err != nil {
		t.Fatalf("cancel once the end is written: got %v, want nil", err)
	}
	if st := statusOf(t, fs, tid, r.ID); st != thread.RunSucceeded {
		t.Fatalf("status after the cancel answered: got %s, want succeeded", st)
	}
	if got := rest(t, evs, done); len(got) != 1 || !got[0].Final() {
		t.Fatalf("end of the stream: got %+v, want the final snapshot", got)
	}
}

func leaseOf(t *testing.T, fs *faultStore, tid, runID uuid.UUID) time.Time {
	t.Helper()
	r, err := fs.Store.RunGet(context.Background(), tid, runID)
	if err != nil {
		t.Fatal(err)
	}
	return r.LeaseUntil
}

func statusOf(t *testing.T, fs *faultStore, tid, runID uuid.UUID) thread.RunStatus {
	t.Helper()
	r, err := fs.Store.RunGet(context.Background(), tid, runID)
	if err != nil {
		t.Fatal(err)
	}
	return r.Status
}

// TestFencedOwnerStops: once recovery elsewhere took a run over (its owner
// stalled past its lease), the owner's next write is refused: it stops the
// run at once, publishes nothing more, and its clients end up with
// exactly the stored log. Both ways an owner learns it: a log append, and
// a lease renewal.
func TestFencedOwnerStops(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"append", "renewal"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			fs := newFaultStore(t)
			m := newStepper()
			svc := faultSetup(t, fs, m, engine.Config{})
			ctx := context.Background()
			tid, r := startOn(t, svc)
			evs, done := live(svc, r)
			next(t, evs)
			m.toks <- "before"
			next(t, evs)
			rec := engine.New(fs.Store, stream.New[thread.Event](16), models{m: &recorder{}}, fs.Store,
				engine.Config{Now: func() time.Time { return time.Now().Add(time.Hour) }})
			engine.StartWriters(rec) // this test drives recovery by hand
			shutdownAtCleanup(t, rec)
			if n := rec.Recover(ctx); n != 1 {
				t.Fatalf("Recover: got %d runs, want 1", n)
			}
			if how == "append" {
				m.toks <- "after" // its append is refused
			} else {
				svc.RenewLeases(ctx)
			}
			select {
			case <-m.stopped:
			case <-time.After(30 * time.Second):
				t.Fatal("the fenced run's model was not stopped")
			}
			got := append([]thread.Event{}, rest(t, evs, done)...)
			want := stored(t, fs, tid, r.ID)
			sameEvents(t, "what the owner's client saw after token 2", got, want[2:])
			if last := want[len(want)-1]; last.Snapshot.RunStatus != thread.RunInterrupted || finalText(last, r.MessageID) != "before" {
				t.Fatalf("stored end: got %+v, want interrupted with %q", last, "before")
			}
			twait.Eventually(t, 30*time.Second, func() bool { return svc.ActiveRuns() == 0 }, "the fenced run still runs after 30 s")
		})
	}
}

// TestShutdownRefusesLateRuns: a run either starts before Shutdown counts
// the runs, and Shutdown waits for its end, or is refused: no run still
// runs when Shutdown returns.
func TestShutdownRefusesLateRuns(t *testing.T) {
	t.Parallel()
	fs := newFaultStore(t)
	for i := range 8 {
		m := newStepper() // runs until cancelled
		svc := engine.New(fs, stream.New[thread.Event](64), models{m: m}, fs.Store, engine.Config{StartLinger: -1})
		svc.Start()
		var wg sync.WaitGroup
		var started atomic.Int64
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _, err := svc.StartRun(context.Background(), "local", uuid.New(), thread.RunRequest{Message: msg("q")})
				switch {
				case err == nil:
					started.Add(1)
				case !errors.Is(err, engine.ErrShuttingDown) && errcode.Of(err) != errcode.Unavailable:
					t.Errorf("StartRun during shutdown: got %v, want nil or shutting down", err)
				}
			}()
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // no grace: cancel whatever runs
		svc.Shutdown(ctx)
		wg.Wait()
		if n := svc.ActiveRuns(); n != 0 {
			t.Fatalf("round %d: %d runs still run after Shutdown returned (%d started)", i, n, started.Load())
		}
	}
}

// titleBlocker is a title model that answers only when its context ends.
type titleBlocker struct{ called, cancelled chan struct{} }

func (b *titleBlocker) Stream(ctx context.Context, _ thread.ModelRequest, _ func(thread.Delta) error) (thread.ModelResult, error) {
	close(b.called)
	<-ctx.Done()
	close(b.cancelled)
	return thread.ModelResult{}, ctx.Err()
}

type titleModels struct {
	models
	title thread.Model
}

func (m titleModels) Resolve(name string) (thread.Model, string, error) {
	if name == "title" {
		return m.title, "title", nil
	}
	return m.models.Resolve(name)
}

// TestShutdownCancelsTitleAtGrace: a title call still running when
// Shutdown's grace ends is cancelled then, and Shutdown returns.
func TestShutdownCancelsTitleAtGrace(t *testing.T) {
	t.Parallel()
	fs := newFaultStore(t)
	tb := &titleBlocker{called: make(chan struct{}), cancelled: make(chan struct{})}
	svc := engine.New(fs, stream.New[thread.Event](64), titleModels{models{m: &recorder{}}, tb}, fs.Store,
		engine.Config{TitleModel: "title", StartLinger: -1})
	svc.Start()
	run(t, svc, uuid.New(), thread.RunRequest{Message: msg("q")})
	<-tb.called
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	returned := make(chan struct{})
	go func() { svc.Shutdown(ctx); close(returned) }()
	select {
	case <-tb.cancelled:
	case <-time.After(20 * time.Second):
		t.Fatal("the title call was not cancelled at the end of the grace")
	}
	select {
	case <-returned:
	case <-time.After(20 * time.Second):
		t.Fatal("Shutdown did not return after the title call was cancelled")
	}
	if !svc.Draining() {
		t.Fatal("Draining after Shutdown: got false, want true")
	}
}
