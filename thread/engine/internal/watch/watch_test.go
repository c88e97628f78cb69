package watch

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/threadline/threadline/thread"
)

// testChanges is a subscription whose channel the test feeds and closes.
type testChanges struct {
	ch     chan thread.Change
	closed chan struct{}
}

func (c *testChanges) C() <-chan thread.Change { return c.ch }
func (c *testChanges) Close()                  { close(c.closed) }

// TestWatch: every change is applied in order; a subscription whose
// channel closes is closed, resync runs, and Watch subscribes again; it
// returns, closing the subscription, once ctx ends.
func TestWatch(t *testing.T) {
	t.Parallel()
	newSub := func() *testChanges { return &testChanges{ch: make(chan thread.Change, 4), closed: make(chan struct{})} }
	first, second := newSub(), newSub()
	subs := make(chan *testChanges, 2) // what Watch subscribes to, in turn
	subs <- first
	subs <- second
	subscribe := func() thread.Changes { return <-subs }
	applied := make(chan thread.Change, 10)
	apply := func(_ context.Context, c thread.Change) { applied <- c }
	resynced := make(chan struct{}, 10)
	resync := func(context.Context) { resynced <- struct{}{} }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Watch(ctx, subscribe, apply, resync)
	}()
	wait := func(ch <-chan struct{}, what string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s never happened", what)
		}
	}
	id := uuid.New()
	first.ch <- thread.Change{Kind: thread.ChangeCancel, ID: id}
	first.ch <- thread.Change{Kind: thread.ChangeOwnerDead}
	close(first.ch)
	wait(first.closed, "the first subscription's close")
	wait(resynced, "a resync after the subscription closed")
	second.ch <- thread.Change{Kind: thread.ChangeThreadGone, ID: id}
	want := []thread.Change{{Kind: thread.ChangeCancel, ID: id}, {Kind: thread.ChangeOwnerDead}, {Kind: thread.ChangeThreadGone, ID: id}}
	for i, w := range want {
		select {
		case got := <-applied:
			if got != w {
				t.Fatalf("change %d: got %+v, want %+v", i, got, w)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("change %d never applied", i)
		}
	}
	cancel()
	wait(done, "Watch's return after ctx ended")
	wait(second.closed, "the second subscription's close")
	if n := len(resynced); n != 0 {
		t.Errorf("resyncs after ctx ended: got %d, want 0", n)
	}
}
