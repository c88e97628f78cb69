package engine_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/stream"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/engine"
	"github.com/threadline/threadline/thread/threadtest"
	twait "github.com/threadline/threadline/thread/threadtest/wait"
)

// The run engine on the in-memory store (threadtest), for `go test -race`
// without Postgres: the same behaviours as fault_test.go's, whose writes
// reach a real database.

// fakeFaults makes the named writes of a fake store fail: n more times
// (negative: always) for each op set with fail.
type fakeFaults struct {
	appends, ends atomic.Int64
	endFailed     chan struct{}
	// also, when set, fails first (set while the service runs: its loops
	// read the store).
	also atomic.Pointer[func(op string) error]
}

func fakeSetup(t *testing.T, m thread.Model, cfg engine.Config) (*engine.Service, *threadtest.Store, *fakeFaults) {
	t.Helper()
	st := threadtest.New()
	ff := &fakeFaults{endFailed: make(chan struct{}, 64)}
	st.Fail = func(op string) error {
		if also := ff.also.Load(); also != nil {
			if err := (*also)(op); err != nil {
				return err
			}
		}
		switch op {
		case "RunEventsAppend":
			if fail(&ff.appends, nil) {
				return errInjected
			}
		case "RunFinish", "RunFinishAll":
			if fail(&ff.ends, ff.endFailed) {
				return errInjected
			}
		}
		return nil
	}
	cfg.StartLinger = -1
	if cfg.RetryMin == 0 {
		cfg.RetryMin, cfg.RetryMax = time.Millisecond, 10*time.Millisecond
	}
	svc := engine.New(st, stream.New[thread.Event](256), models{m: m}, nil, cfg)
	svc.Start()
	shutdownAtCleanup(t, svc)
	return svc, st, ff
}

// shutdownAtCleanup shuts svc down once the test (and its assertions)
// ended, within a bound: a test may have left it on a broken store.
func shutdownAtCleanup(t testing.TB, svc *engine.Service) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		svc.Shutdown(ctx)
	})
}

// recoverer is another process on the same store whose clock is past
// every lease.
func recoverer(t *testing.T, st thread.Store) *engine.Service {
	svc := engine.New(st, stream.New[thread.Event](16), models{m: &recorder{}}, nil,
		engine.Config{Now: func() time.Time { return time.Now().Add(time.Hour) }})
	engine.StartWriters(svc) // this test drives recovery by hand
	shutdownAtCleanup(t, svc)
	return svc
}

func replay(t *testing.T, st thread.Store, tid, runID uuid.UUID) []thread.Event {
	t.Helper()
	other := engine.New(st, stream.New[thread.Event](16), models{m: &recorder{}}, nil, engine.Config{})
	other.Start()
	shutdownAtCleanup(t, other)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []thread.Event
	if err := other.Follow(ctx, "local", tid, runID, 0, func(ev thread.Event, _ bool) error {
		out = append(out, ev)
		return nil
	}); err != nil {
		t.Fatalf("replay: %v", err)
	}
	return out
}

func startOn(t *testing.T, svc *engine.Service) (uuid.UUID, *thread.Run) {
	t.Helper()
	tid := uuid.New()
	r, _, err := svc.StartRun(context.Background(), "local", tid, thread.RunRequest{Message: msg("q")})
	if err != nil {
		t.Fatalf("StartRun: %v", err)
	}
	return tid, r
}

// TestEngineAppendRetried: failed group commits are retried and each
// token is published once one commits it, while the run runs.
func TestEngineAppendRetried(t *testing.T) {
	t.Parallel()
	m := newStepper()
	svc, st, ff := fakeSetup(t, m, engine.Config{})
	tid, r := startOn(t, svc)
	evs, done := live(svc, r)
	seen := []thread.Event{next(t, evs)}
	for i, tok := range []string{"a", "b", "c"} {
		ff.appends.Store(2)
		m.toks <- tok
		ev := next(t, evs)
		if ev.Text != tok || ev.Sequence != int64(i+2) {
			t.Fatalf("token %d after failed appends: got %+v, want %q", i, ev, tok)
		}
		seen = append(seen, ev)
	}
	close(m.toks)
	seen = append(seen, rest(t, evs, done)...)
	if last := seen[len(seen)-1]; !last.Final() || last.Snapshot.RunStatus != thread.RunSucceeded || finalText(last, r.MessageID) != "abc" {
		t.Fatalf("end: got %+v, want succeeded with %q", last, "abc")
	}
	sameEvents(t, "replay", replay(t, st, tid, r.ID), seen)
}

// TestEngineEndRetried: an end write that fails a few times is retried
// until it is written, whole.
func TestEngineEndRetried(t *testing.T) {
	t.Parallel()
	m := newStepper()
	svc, _, ff := fakeSetup(t, m, engine.Config{})
	_, r := startOn(t, svc)
	evs, done := live(svc, r)
	next(t, evs)
	m.toks <- "kept"
	next(t, evs)
	ff.ends.Store(5)
	close(m.toks)
	got := rest(t, evs, done)
	if len(got) != 1 || got[0].Snapshot.RunStatus != thread.RunSucceeded || finalText(got[0], r.MessageID) != "kept" {
		t.Fatalf("end after 5 failed writes: got %+v, want succeeded with %q", got, "kept")
	}
}

// TestEngineEndReleased: an end that cannot be written within a lease is
// released: its lease is renewed while the write is retried, not after;
// recovery then ends the run, and the owner's client gets the
// run_interrupted error and the interrupted snapshot with what it saw.
func TestEngineEndReleased(t *testing.T) {
	t.Parallel()
	m := newStepper()
	svc, st, ff := fakeSetup(t, m, engine.Config{Lease: 200 * time.Millisecond})
	tid, r := startOn(t, svc)
	evs, done := live(svc, r)
	next(t, evs)
	m.toks <- "seen"
	next(t, evs)
	ff.ends.Store(-1)
	close(m.toks)
	<-ff.endFailed
	ctx := context.Background()
	before, _ := st.Lease(r.ID)
	svc.RenewLeases(ctx)
	if after, _ := st.Lease(r.ID); !after.After(before) {
		t.Fatalf("lease while the end is retried: got %v, want renewed past %v", after, before)
	}
	twait.Eventually(t, 30*time.Second, func() bool { return svc.ActiveRuns() == 0 }, "not released within 30 s")
	before, status := st.Lease(r.ID)
	svc.RenewLeases(ctx)
	if after, _ := st.Lease(r.ID); !after.Equal(before) || status != thread.RunRunning {
		t.Fatalf("after release: lease %v -> %v, status %s; want not renewed, running", before, after, status)
	}
	ff.ends.Store(0)
	if n := recoverer(t, st).Recover(ctx); n != 1 {
		t.Fatalf("Recover: got %d, want 1", n)
	}
	got := rest(t, evs, done)
	if len(got) != 2 || got[0].Code != errcode.RunInterrupted || got[1].Snapshot.RunStatus != thread.RunInterrupted ||
		finalText(got[1], r.MessageID) != "seen" {
		t.Fatalf("end of the stream: got %+v, want run_interrupted and interrupted with %q", got, "seen")
	}
	if _, status := st.Lease(r.ID); status != thread.RunInterrupted {
		t.Fatalf("stored status: got %s, want interrupted", status)
	}
	sameEvents(t, "replay", replay(t, st, tid, r.ID)[2:], got)
}

// TestEngineFence: a run taken over by recovery stops at its owner's next
// write, and the owner's client saw exactly the stored log.
func TestEngineFence(t *testing.T) {
	t.Parallel()
	m := newStepper()
	svc, st, _ := fakeSetup(t, m, engine.Config{})
	tid, r := startOn(t, svc)
	evs, done := live(svc, r)
	seen := []thread.Event{next(t, evs)}
	m.toks <- "before"
	seen = append(seen, next(t, evs))
	if n := recoverer(t, st).Recover(context.Background()); n != 1 {
		t.Fatalf("Recover: got %d, want 1", n)
	}
	m.toks <- "after"
	<-m.stopped
	seen = append(seen, rest(t, evs, done)...)
	sameEvents(t, "the owner's client against the stored log", seen, replay(t, st, tid, r.ID))
	for _, ev := range seen {
		if ev.Text == "after" {
			t.Fatal("the fenced owner published a token written after it lost its claim")
		}
	}
}

// textSink adapts a model's delta callback to a test model that streams
// text: each piece is sent as a text delta.
func textSink(on func(thread.Delta) error) func(string) error {
	return func(s string) error { return on(thread.Delta{Kind: thread.DeltaText, Text: s}) }
}
