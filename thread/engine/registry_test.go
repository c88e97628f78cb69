package engine

import (
	"errors"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/thread"
)

func newActive(caller string, threadID uuid.UUID) *activeRun {
	return &activeRun{run: &thread.Run{ID: uuid.New(), ThreadID: threadID}, thread: &thread.Thread{ID: threadID, Caller: caller}}
}

// TestRegistry: one run a thread, a second start on it is refused with
// the run that holds it; leave frees the thread only of its own run;
// close refuses every later run with ErrShuttingDown; count and all see
// what is registered.
func TestRegistry(t *testing.T) {
	t.Parallel()
	g := newRegistry()
	th1, th2 := uuid.New(), uuid.New()
	a, b, c := newActive("alice", th1), newActive("alice", th1), newActive("bob", th2)
	if err := g.add(a); err != nil {
		t.Fatalf("add a: got %v, want nil", err)
	}
	var busy *threadBusy
	if err := g.add(b); !errors.As(err, &busy) || busy.ar != a {
		t.Fatalf("add b on a's thread: got %v, want *threadBusy naming a", err)
	}
	if err := g.add(c); err != nil {
		t.Fatalf("add c: got %v, want nil", err)
	}
	if total, alices := g.count("alice"); total != 2 || alices != 1 {
		t.Fatalf("count: got %d runs, %d of alice's; want 2, 1", total, alices)
	}
	if got := g.onThread("alice", th1); got != a {
		t.Fatalf("onThread(alice, th1): got %p, want a %p", got, a)
	}
	if got := g.onThread("bob", th1); got != nil {
		t.Fatalf("onThread(bob, alice's thread): got %p, want nil", got)
	}
	g.leave(b.run) // not the thread's run: nothing changes
	if got := g.onThread("alice", th1); got != a {
		t.Fatalf("after leave of another run: got %p, want a %p", got, a)
	}
	g.leave(a.run)
	if got := g.onThread("alice", th1); got != nil {
		t.Fatalf("after leave: got %p, want nil", got)
	}
	if got := g.get(a.run.ID); got != a {
		t.Fatal("a left its thread but must stay registered until remove")
	}
	g.remove(a.run.ID)
	g.done.Done()
	if got := g.get(a.run.ID); got != nil {
		t.Fatal("a still registered after remove")
	}
	if n := len(g.all()); n != 1 {
		t.Fatalf("all: got %d runs, want 1", n)
	}
	g.close()
	if !g.closed() {
		t.Fatal("closed: got false after close")
	}
	if err := g.add(newActive("carol", uuid.New())); err != ErrShuttingDown {
		t.Fatalf("add after close: got %v, want ErrShuttingDown", err)
	}
	g.remove(c.run.ID)
	g.done.Done()
	g.done.Wait() // every added run marked done: returns
}

// TestRegistryConcurrentStarts: of many starts racing on one thread,
// exactly one is registered and every other is told which.
func TestRegistryConcurrentStarts(t *testing.T) {
	t.Parallel()
	g := newRegistry()
	th := uuid.New()
	const n = 32
	errs := make([]error, n)
	runs := make([]*activeRun, n)
	var wg sync.WaitGroup
	for i := range n {
		runs[i] = newActive("alice", th)
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = g.add(runs[i]) }()
	}
	wg.Wait()
	var won *activeRun
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
		var busy *threadBusy
		if err != nil && (!errors.As(err, &busy) || busy.ar != won) {
			t.Fatalf("start %d: got %v, want *threadBusy naming the registered run", i, err)
		}
	}
}

func treeOf(t *testing.T, threadID uuid.UUID, n int) *checkpoint.Tree {
	t.Helper()
	nodes := make([]checkpoint.Node, n)
	parent := uuid.Nil
	for i := range nodes {
		nodes[i] = checkpoint.Node{ID: uuid.New(), ThreadID: threadID, ParentID: parent, Seq: int64(i + 1), Role: checkpoint.RoleUser}
		parent = nodes[i].ID
	}
	tree, err := checkpoint.NewTree(nodes)
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

// TestTreeCache: a tree is the caller's the store named, a shorter tree
// never replaces a longer one, the cache holds at most its bound, and
// forget and clear drop trees.
func TestTreeCache(t *testing.T) {
	t.Parallel()
	c := newTreeCache(2)
	id := uuid.New()
	long, short := treeOf(t, id, 3), treeOf(t, id, 2)
	c.put(id, long)
	if got := c.get("alice", id); got != nil {
		t.Fatal("get before own: got a tree, want nil (no caller known)")
	}
	c.own(id, "alice")
	if got := c.get("alice", id); got != long {
		t.Fatalf("get(alice): got %v, want the cached tree", got)
	}
	if got := c.get("bob", id); got != nil {
		t.Fatal("get(bob) of alice's thread: got a tree, want nil")
	}
	c.put(id, short)
	if got := c.peek(id); got != long {
		t.Fatalf("after put of a shorter tree: got %d checkpoints, want 3", got.Len())
	}
	c.own(uuid.New(), "alice") // no tree cached: no owner kept
	for range 5 {
		other := uuid.New()
		c.put(other, treeOf(t, other, 1))
	}
	if n := len(c.trees); n > 2 {
		t.Fatalf("cache holds %d trees, want at most 2", n)
	}
	if len(c.owners) > len(c.trees) {
		t.Fatalf("cache holds %d owners for %d trees", len(c.owners), len(c.trees))
	}
	c.put(id, long)
	c.own(id, "alice")
	c.forget(id)
	if c.peek(id) != nil || c.get("alice", id) != nil {
		t.Fatal("forget left the tree")
	}
	c.put(id, long)
	c.clear()
	if len(c.trees) != 0 || len(c.owners) != 0 {
		t.Fatalf("clear left %d trees, %d owners", len(c.trees), len(c.owners))
	}
}
