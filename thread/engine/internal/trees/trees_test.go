package trees

import (
	"testing"

	"github.com/google/uuid"

	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/thread"
)

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

// TestCache: a tree is the caller's the store named, a shorter tree
// never replaces a longer one, the cache holds at most its bound, and
// Forget and Clear drop trees.
func TestCache(t *testing.T) {
	t.Parallel()
	c := New(nil, 2)
	id := uuid.New()
	long, short := treeOf(t, id, 3), treeOf(t, id, 2)
	c.Put(id, long)
	if got := c.Get("alice", id); got != nil {
		t.Fatal("get before own: got a tree, want nil (no caller known)")
	}
	c.Own(&thread.Thread{ID: id, Caller: "alice"})
	if got := c.Get("alice", id); got != long {
		t.Fatalf("get(alice): got %v, want the cached tree", got)
	}
	if got := c.Get("bob", id); got != nil {
		t.Fatal("get(bob) of alice's thread: got a tree, want nil")
	}
	c.Put(id, short)
	if got := c.Peek(id); got != long {
		t.Fatalf("after put of a shorter tree: got %d checkpoints, want 3", got.Len())
	}
	c.Own(&thread.Thread{ID: uuid.New(), Caller: "alice"}) // no tree cached: no owner kept
	for range 5 {
		other := uuid.New()
		c.Put(other, treeOf(t, other, 1))
	}
	if n := len(c.trees); n > 2 {
		t.Fatalf("cache holds %d trees, want at most 2", n)
	}
	if len(c.owners) > len(c.trees) {
		t.Fatalf("cache holds %d owners for %d trees", len(c.owners), len(c.trees))
	}
	c.Put(id, long)
	c.Own(&thread.Thread{ID: id, Caller: "alice"})
	c.Forget(id)
	if c.Peek(id) != nil || c.Get("alice", id) != nil {
		t.Fatal("forget left the tree")
	}
	c.Put(id, long)
	c.Clear()
	if len(c.trees) != 0 || len(c.owners) != 0 {
		t.Fatalf("clear left %d trees, %d owners", len(c.trees), len(c.owners))
	}
}
