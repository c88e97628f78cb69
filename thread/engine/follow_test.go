package engine_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/stream"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/engine"
)

// TestFollowerWaitsOutOutage: a follower in another process whose reads
// of the run fail because the database is unavailable keeps its stream
// open and reads again until the database is back; it then gets every
// event, ending with the final snapshot, exactly as stored. (It used to
// end the stream at the first failed read, with no final snapshot.)
func TestFollowerWaitsOutOutage(t *testing.T) {
	t.Parallel()
	m := newStepper()
	svc, st, ff := fakeSetup(t, m, engine.Config{})
	tid, r := startOn(t, svc)
	own, ownDone := live(svc, r)
	next(t, own)
	var down atomic.Bool
	failed := make(chan struct{}, 1024)
	also := func(op string) error {
		if down.Load() && (op == "RunEventsAfter" || op == "RunGet") {
			failed <- struct{}{}
			return errcode.New(errcode.Unavailable, "injected: the database is unavailable")
		}
		return nil
	}
	ff.also.Store(&also)
	other := engine.New(st, stream.New[thread.Event](16), models{m: &recorder{}}, nil,
		engine.Config{RetryMin: time.Millisecond, RetryMax: 5 * time.Millisecond})
	other.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		other.Shutdown(ctx)
	})
	followed, followDone := followOn(context.Background(), other, tid, r.ID, nil)
	first := next(t, followed)
	if first.Sequence != 1 {
		t.Fatalf("the follower's first event: got %+v, want sequence 1", first)
	}
	down.Store(true)
	for range 3 {
		select {
		case <-failed:
		case err := <-followDone:
			t.Fatalf("the follower's stream ended at a failed read (%v), want it kept open", err)
		case <-time.After(30 * time.Second):
			t.Fatal("the follower did not read the log within 30 s")
		}
	}
	m.toks <- "during"
	next(t, own)
	select {
	case ev, ok := <-followed:
		t.Fatalf("the follower got %+v (open %v) while its reads fail, want nothing yet", ev, ok)
	default:
	}
	down.Store(false)
	m.toks <- "after"
	close(m.toks)
	rest(t, own, ownDone)
	got := rest(t, followed, followDone)
	got = append([]thread.Event{first}, got...)
	if last := got[len(got)-1]; !last.Final() || last.Snapshot.RunStatus != thread.RunSucceeded || finalText(last, r.MessageID) != "duringafter" {
		t.Fatalf("the follower's last event: got %+v, want succeeded with %q", last, "duringafter")
	}
	sameEvents(t, "the follower against the stored log", got, replay(t, st, tid, r.ID))
}

// lostWakeups is a Wakeups whose changes the test sends by hand: the
// cancel it never sends stands for a wake-up lost while the process's
// listening connection was down.
type lostWakeups struct{ ch chan thread.Change }

func (w *lostWakeups) WakeRun(uuid.UUID) thread.Wake { return quietWake{} }
func (w *lostWakeups) Changes() thread.Changes       { return lostChanges{w.ch} }

type quietWake struct{}

func (quietWake) C() <-chan struct{} { return nil }
func (quietWake) Close()             {}

type lostChanges struct{ ch chan thread.Change }

func (c lostChanges) C() <-chan thread.Change { return c.ch }
func (lostChanges) Close()                    {}

// TestResetReadsLostCancel: a cancel requested, or the thread deleted, by
// another process while this one's wake-ups were down (its wake-up lost)
// stops the run as soon as the wake-ups report the reset that follows a
// reconnect, not at the next lease renewal. (A reset used to only empty
// the tree cache: after a Postgres restart such a run went on to succeed.)
func TestResetReadsLostCancel(t *testing.T) {
	t.Parallel()
	for _, what := range []string{"cancel", "delete"} {
		t.Run(what, func(t *testing.T) {
			t.Parallel()
			m := newStepper()
			wk := &lostWakeups{ch: make(chan thread.Change, 1)}
			svc, st, _ := fakeSetup(t, m, engine.Config{Wakeups: wk})
			svc.Start()
			t.Cleanup(svc.Stop)
			tid, r := startOn(t, svc)
			evs, done := live(svc, r)
			next(t, evs)
			m.toks <- "before"
			next(t, evs)
			other := engine.New(st, stream.New[thread.Event](16), models{m: &recorder{}}, nil, engine.Config{})
			other.Start()
			shutdownAtCleanup(t, other)
			var err error
			if what == "cancel" {
				err = other.CancelRun(context.Background(), "local", tid, r.ID)
			} else {
				err = other.DeleteThread(context.Background(), "local", tid)
			}
			if err != nil {
				t.Fatalf("%s from another process: %v", what, err)
			}
			wk.ch <- thread.Change{Kind: thread.ChangeReset}
			select {
			case <-m.stopped:
			case <-time.After(30 * time.Second):
				t.Fatalf("the run still runs 30 s after the reset: the lost %s was not read", what)
			}
			if what == "delete" {
				// The run is gone with its thread: the stream ends with
				// not_found, and nothing after the deletion was published.
				var last thread.Event
				for ev := range evs {
					if ev.Type == thread.KindToken {
						t.Fatalf("the run of the deleted thread published %+v", ev)
					}
					last = ev
				}
				<-done
				if last.Type != thread.KindError || last.Code != errcode.NotFound {
					t.Fatalf("the stream of the deleted thread ended with %+v, want an error not_found", last)
				}
				return
			}
			got := rest(t, evs, done)
			if last := got[len(got)-1]; !last.Final() || last.Snapshot.RunStatus != thread.RunCancelled || finalText(last, r.MessageID) != "before" {
				t.Fatalf("end: got %+v, want cancelled with %q", last, "before")
			}
		})
	}
}

// TestShutdownEndsForeignFollowers: once Shutdown has ended this
// process's runs, a follower of another process's run that goes on ends
// with ErrShuttingDown (the client rejoins elsewhere) instead of holding
// the shutdown; what it got is the stored log's beginning.
func TestShutdownEndsForeignFollowers(t *testing.T) {
	t.Parallel()
	m := newStepper()
	svc, st, _ := fakeSetup(t, m, engine.Config{})
	tid, r := startOn(t, svc)
	own, ownDone := live(svc, r)
	next(t, own)
	other := engine.New(st, stream.New[thread.Event](16), models{m: &recorder{}}, nil, engine.Config{})
	other.Start()
	followed, followDone := followOn(context.Background(), other, tid, r.ID, nil)
	first := next(t, followed)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	other.Shutdown(ctx)
	select {
	case err := <-followDone:
		if !errors.Is(err, engine.ErrShuttingDown) {
			t.Fatalf("the follower after Shutdown: got %v, want ErrShuttingDown", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the follower of another process's run is still open 30 s after Shutdown")
	}
	got := []thread.Event{first}
	for ev := range followed {
		got = append(got, ev)
	}
	close(m.toks)
	rest(t, own, ownDone)
	sameEvents(t, "the ended follower against the stored log", got, replay(t, st, tid, r.ID)[:len(got)])
}
