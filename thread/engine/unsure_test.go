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
)

// committedThenLost is the in-memory store with a start write that
// commits and then reports a failure, as when the connection dies while
// Postgres commits: the caller cannot tell whether it was written.
type committedThenLost struct {
	*threadtest.Store
	lose atomic.Bool
}

func (s *committedThenLost) RunCreate(ctx context.Context, in thread.RunCreate, first thread.Record) (*thread.Run, error) {
	r, err := s.Store.RunCreate(ctx, in, first)
	if err == nil && s.lose.CompareAndSwap(true, false) {
		return nil, errInjected
	}
	return r, err
}

func (s *committedThenLost) RunCreateAll(ctx context.Context, ins []thread.RunCreate, firsts []thread.Record) error {
	err := s.Store.RunCreateAll(ctx, ins, firsts)
	if err == nil && s.lose.CompareAndSwap(true, false) {
		return errInjected
	}
	return err
}

// TestUnsureStartIsRecovered: a run whose start write committed although
// the write reported a failure (StartRun answered unavailable, and nothing
// here runs it) does not stay running until its lease lapses: it is
// recovered at once, so the client's retry with the same message id gets
// that run and sees it end (interrupted, after run_interrupted), and the
// thread takes new runs. (It used to stay running for a whole lease,
// freezing the retry and refusing new runs on the thread with 409.)
func TestUnsureStartIsRecovered(t *testing.T) {
	t.Parallel()
	st := &committedThenLost{Store: threadtest.New()}
	m := newStepper()
	svc := engine.New(st, stream.New[thread.Event](64), models{m: m}, nil, engine.Config{
		StartLinger: -1, Lease: time.Hour, RetryMin: time.Millisecond, RetryMax: 10 * time.Millisecond})
	svc.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		svc.Shutdown(ctx)
	})
	ctx := context.Background()
	tid := uuid.New()
	um := msg("lost answer")
	um.ID = uuid.New()
	st.lose.Store(true)
	if _, _, err := svc.StartRun(ctx, "local", tid, thread.RunRequest{Message: um}); errcode.Of(err) != errcode.Unavailable {
		t.Fatalf("start whose answer was lost: got %v, want unavailable", err)
	}
	r, existing, err := svc.StartRun(ctx, "local", tid, thread.RunRequest{Message: um})
	if err != nil || !existing {
		t.Fatalf("retry with the same message id: got existing %v, err %v; want the run written", existing, err)
	}
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var got []thread.Event
	if err := svc.FollowRun(fctx, "local", r, 0, func(ev thread.Event, _ bool) error {
		got = append(got, ev)
		return nil
	}); err != nil {
		t.Fatalf("follow the retried run: %v after %d events (it never ends)", err, len(got))
	}
	n := len(got)
	if n < 2 || !got[n-1].Final() || got[n-1].Snapshot.RunStatus != thread.RunInterrupted || got[n-2].Code != errcode.RunInterrupted {
		t.Fatalf("the retried run's events: got %+v, want run_interrupted and an interrupted snapshot", got)
	}
	close(m.toks)
	next, _, err := svc.StartRun(ctx, "local", tid, thread.RunRequest{Message: msg("next"), ParentID: got[n-1].Snapshot.Head})
	if err != nil {
		t.Fatalf("a new run on the thread: %v", err)
	}
	evs, done := live(svc, next)
	if last := rest(t, evs, done); len(last) == 0 || !last[len(last)-1].Final() {
		t.Fatalf("the new run: got %+v, want it to end", last)
	}
}
