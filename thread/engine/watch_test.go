package engine

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
)

// testChanges is a subscription whose channel the test feeds and closes.
type testChanges struct {
	ch     chan Change
	closed chan struct{}
}

func (c *testChanges) C() <-chan Change { return c.ch }
func (c *testChanges) Close()           { close(c.closed) }

// TestWatch: every change is applied in order; a subscription whose
// channel closes is closed, resync runs, and Watch subscribes again; it
// returns, closing the subscription, once ctx ends.
func TestWatch(t *testing.T) {
	t.Parallel()
	newSub := func() *testChanges { return &testChanges{ch: make(chan Change, 4), closed: make(chan struct{})} }
	first, second := newSub(), newSub()
	subs := make(chan *testChanges, 2) // what Watch subscribes to, in turn
	subs <- first
	subs <- second
	subscribe := func() Changes { return <-subs }
	applied := make(chan Change, 10)
	apply := func(_ context.Context, c Change) { applied <- c }
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
	first.ch <- Change{Kind: ChangeCancel, ID: id}
	first.ch <- Change{Kind: ChangeOwnerDead}
	close(first.ch)
	wait(first.closed, "the first subscription's close")
	wait(resynced, "a resync after the subscription closed")
	second.ch <- Change{Kind: ChangeThreadGone, ID: id}
	want := []Change{{ChangeCancel, id}, {ChangeOwnerDead, uuid.Nil}, {ChangeThreadGone, id}}
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
