package engine_test

import (
	"context"
	"testing"

	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/stream"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/engine"
)

// TestDeleteEndsStreams: a thread deleted while its run streams, in the
// process that runs it or in another one, ends every stream of the run,
// the owner's and another process's followers alike, with an error event
// not_found one past the last event the stream delivered, and nothing
// after it (no final snapshot: it went with the thread). A follow that
// begins after the delete is answered not_found. (A stream used to end
// without any event, like a broken connection.)
func TestDeleteEndsStreams(t *testing.T) {
	t.Parallel()
	for _, where := range []string{"owner", "other"} {
		t.Run(where, func(t *testing.T) {
			t.Parallel()
			m := newStepper()
			svc, st, _ := fakeSetup(t, m, engine.Config{})
			other := engine.New(st, stream.New[thread.Event](16), models{m: &recorder{}}, nil, engine.Config{})
			other.Start()
			shutdownAtCleanup(t, other)
			tid, r := startOn(t, svc)
			own, ownDone := live(svc, r)
			next(t, own)
			followed, followDone := followOn(context.Background(), other, tid, r.ID, nil)
			next(t, followed)
			m.toks <- "before"
			next(t, own)
			next(t, followed)
			deleter := svc
			if where == "other" {
				deleter = other
			}
			if err := deleter.DeleteThread(context.Background(), "local", tid); err != nil {
				t.Fatalf("delete on the %s: %v", where, err)
			}
			if where == "other" {
				// The owner hears of a delete elsewhere through its
				// wake-ups; without them, when its next commit is refused.
				// The tokens go after the delete: sent before it, they
				// could all be committed and leave the owner waiting.
				go func() {
					for range 3 {
						select {
						case m.toks <- "after":
						case <-m.stopped:
							return
						}
					}
				}()
			}
			for _, s := range []struct {
				who  string
				evs  <-chan thread.Event
				done <-chan error
			}{{"the owner's client", own, ownDone}, {"the other process's follower", followed, followDone}} {
				got := rest(t, s.evs, s.done)
				if len(got) == 0 {
					t.Fatalf("%s: the stream ended without an event", s.who)
				}
				last := got[len(got)-1]
				if last.Type != thread.KindError || last.Code != errcode.NotFound || last.Text == "" || last.Sequence != 3 {
					t.Fatalf("%s: last event %+v, want an error not_found at sequence 3", s.who, last)
				}
				for _, ev := range got[:len(got)-1] {
					if ev.Type == thread.KindToken || ev.Final() {
						t.Fatalf("%s: got %+v after the delete", s.who, ev)
					}
				}
			}
			err := other.Follow(context.Background(), "local", tid, r.ID, 0, func(thread.Event, bool) error { return nil })
			if errcode.Of(err) != errcode.NotFound {
				t.Fatalf("a follow after the delete: got %v, want not_found", err)
			}
		})
	}
}
