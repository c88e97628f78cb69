package runner

import (
	"errors"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/threadline/threadline/stream"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/engine/internal/runlog"
)

func newActive(caller string, threadID uuid.UUID) *Active {
	return &Active{run: &thread.Run{ID: uuid.New(), ThreadID: threadID}, thread: &thread.Thread{ID: threadID, Caller: caller}}
}

// TestRegistry: one run a thread, a second start on it is refused with
// the run that holds it; leave frees the thread only of its own run;
// close refuses every later run with runlog.ErrShuttingDown; count and all see
// what is registered.
func TestRegistry(t *testing.T) {
	t.Parallel()
	g := NewRegistry()
	th1, th2 := uuid.New(), uuid.New()
	a, b, c := newActive("alice", th1), newActive("alice", th1), newActive("bob", th2)
	if err := g.add(a); err != nil {
		t.Fatalf("add a: got %v, want nil", err)
	}
	var busy *ThreadBusy
	if err := g.add(b); !errors.As(err, &busy) || busy.Active != a {
		t.Fatalf("add b on a's thread: got %v, want *ThreadBusy naming a", err)
	}
	if err := g.add(c); err != nil {
		t.Fatalf("add c: got %v, want nil", err)
	}
	if total, alices := g.Count("alice"); total != 2 || alices != 1 {
		t.Fatalf("count: got %d runs, %d of alice's; want 2, 1", total, alices)
	}
	if got := g.OnThread("alice", th1); got != a {
		t.Fatalf("onThread(alice, th1): got %p, want a %p", got, a)
	}
	if got := g.OnThread("bob", th1); got != nil {
		t.Fatalf("onThread(bob, alice's thread): got %p, want nil", got)
	}
	g.leave(b.run) // not the thread's run: nothing changes
	if got := g.OnThread("alice", th1); got != a {
		t.Fatalf("after leave of another run: got %p, want a %p", got, a)
	}
	g.leave(a.run)
	if got := g.OnThread("alice", th1); got != nil {
		t.Fatalf("after leave: got %p, want nil", got)
	}
	if got := g.Get(a.run.ID); got != a {
		t.Fatal("a left its thread but must stay registered until remove")
	}
	g.remove(a.run.ID)
	g.done.Done()
	if got := g.Get(a.run.ID); got != nil {
		t.Fatal("a still registered after remove")
	}
	if n := len(g.All()); n != 1 {
		t.Fatalf("all: got %d runs, want 1", n)
	}
	g.Close()
	if !g.Closed() {
		t.Fatal("closed: got false after close")
	}
	if err := g.add(newActive("carol", uuid.New())); err != runlog.ErrShuttingDown {
		t.Fatalf("add after close: got %v, want runlog.ErrShuttingDown", err)
	}
	g.remove(c.run.ID)
	g.done.Done()
	g.done.Wait() // every added run marked done: returns
}

// TestRegistryConcurrentStarts: of many starts racing on one thread,
// exactly one is registered and every other is told which.
func TestRegistryConcurrentStarts(t *testing.T) {
	t.Parallel()
	g := NewRegistry()
	th := uuid.New()
	const n = 32
	errs := make([]error, n)
	runs := make([]*Active, n)
	var wg sync.WaitGroup
	for i := range n {
		runs[i] = newActive("alice", th)
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = g.add(runs[i]) }()
	}
	wg.Wait()
	var won *Active
	for i, err := range errs {
		if err == nil {
			if won != nil {
				t.Fatal("two starts on one thread were both registered")
			}
			won = runs[i]
		}
	}
	if won == nil {
		t.Fatal("no start was registered")
	}
	for i, err := range errs {
		var busy *ThreadBusy
		if err != nil && (!errors.As(err, &busy) || busy.Active != won) {
			t.Fatalf("start %d: got %v, want *ThreadBusy naming the registered run", i, err)
		}
	}
}

// TestFirsts: a run's first subscription is claimed once, by whoever
// asks first; a dropped one is closed; unclaimed ones of ended runs go
// once they outnumber the runs.
func TestFirsts(t *testing.T) {
	t.Parallel()
	g := NewRegistry()
	hub := stream.New[thread.Event](4)
	id := uuid.New()
	sub := hub.Subscribe(id)
	g.KeepFirst(id, sub)
	if got := g.First(id); got != sub {
		t.Fatalf("First: got %v, want the kept subscription", got)
	}
	if got := g.First(id); got != nil {
		t.Fatal("a second First: got a subscription, want nil")
	}
	dropped := uuid.New()
	g.KeepFirst(dropped, hub.Subscribe(dropped))
	g.DropFirst(dropped)
	if n := hub.Subscribers(dropped); n != 0 {
		t.Fatalf("after DropFirst: %d subscribers, want 0", n)
	}
	for range 200 {
		other := uuid.New()
		g.KeepFirst(other, hub.Subscribe(other))
	}
	g.mu.Lock()
	n := len(g.firsts)
	g.mu.Unlock()
	if n > 2*0+64+1 {
		t.Fatalf("%d unclaimed subscriptions of runs not here are kept, want at most 65", n)
	}
}
