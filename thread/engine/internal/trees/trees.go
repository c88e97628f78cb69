// Package trees keeps the engine's checkpoint trees of recently read
// threads, read from the store only for the checkpoints it lacks.
package trees

import (
	"context"
	"fmt"
	"sync"

	"github.com/google/uuid"
	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/thread"
)

// Store is what the cache reads threads' checkpoints with (thread.Store).
type Store interface {
	CheckpointsAfter(ctx context.Context, threadID uuid.UUID, after int64) ([]checkpoint.Node, error)
	ThreadRead(ctx context.Context, caller string, id uuid.UUID, after int64) (*thread.Thread, []checkpoint.Node, *thread.Run, error)
}

var _ Store = (thread.Store)(nil)

// Cache keeps the checkpoint trees of recently read threads, each with
// the caller the store named for its thread, under a lock of its own.
// Trees are immutable values: a reader keeps the one it got.
type Cache struct {
	store  Store
	mu     sync.Mutex
	max    int
	trees  map[uuid.UUID]*checkpoint.Tree
	owners map[uuid.UUID]owner // each cached tree's thread's caller and depth, as the store said
}

// owner is a cached tree's thread's caller and its depth (thread.Thread.Depth).
type owner struct {
	caller string
	depth  int
}

// New returns a cache of up to max trees read from st.
func New(st Store, max int) *Cache {
	return &Cache{store: st, max: max, trees: make(map[uuid.UUID]*checkpoint.Tree), owners: make(map[uuid.UUID]owner)}
}

// Cached returns the caller's thread as the cache knows it (ID, Caller,
// Depth and LastSeq only), or a nil tree.
func (c *Cache) Cached(caller string, id uuid.UUID) (*thread.Thread, *checkpoint.Tree) {
	c.mu.Lock()
	o, ok := c.owners[id]
	t := c.trees[id]
	c.mu.Unlock()
	if !ok || o.caller != caller || t == nil {
		return nil, nil
	}
	return &thread.Thread{ID: id, Caller: caller, Depth: o.depth, LastSeq: t.LastSeq()}, t
}

// Tree returns the thread's checkpoint tree, reading from the store only
// the checkpoints the cache does not have yet. Errors are the store's.
func (c *Cache) Tree(ctx context.Context, th *thread.Thread) (*checkpoint.Tree, error) {
	return c.treeRead(ctx, th, -1, nil)
}

// cachedSeq is where the cached tree of the thread ends (0: none cached):
// the checkpoints after it are the ones to read with the thread.
func (c *Cache) cachedSeq(id uuid.UUID) int64 {
	if t := c.Peek(id); t != nil {
		return t.LastSeq()
	}
	return 0
}

// Read reads the caller's thread, its tree and its running run in one
// round trip (Store.ThreadRead), with the checkpoints the cache lacks.
// Errors are the store's (not_found for a foreign or unknown thread).
func (c *Cache) Read(ctx context.Context, caller string, id uuid.UUID) (*thread.Thread, *checkpoint.Tree, *thread.Run, error) {
	from := c.cachedSeq(id)
	th, nodes, run, err := c.store.ThreadRead(ctx, caller, id, from)
	if err != nil {
		return nil, nil, nil, err
	}
	t, err := c.treeRead(ctx, th, from, nodes)
	if err != nil {
		return nil, nil, nil, err
	}
	return th, t, run, nil
}

// treeRead is Tree with the checkpoints after seq from already read
// (from < 0: none). If the cache no longer ends at from (it moved, or it
// is stale), they are read again.
func (c *Cache) treeRead(ctx context.Context, th *thread.Thread, from int64, nodes []checkpoint.Node) (*checkpoint.Tree, error) {
	t := c.Peek(th.ID)
	if t != nil && (t.Len() > 0 && t.Nodes()[0].ThreadID != th.ID || t.LastSeq() > th.LastSeq) {
		t = nil // a deleted and recreated thread
	}
	if t == nil {
		t = &checkpoint.Tree{}
		if th.LastSeq == 0 {
			// An empty thread: cached too, so its first run's successor
			// reads no thread row.
			c.Put(th.ID, t)
			c.Own(th)
			return t, nil
		}
	}
	if t.LastSeq() == th.LastSeq && t.Len() == int(th.LastSeq) {
		c.Own(th)
		return t, nil
	}
	if from != t.LastSeq() {
		var err error
		if nodes, err = c.store.CheckpointsAfter(ctx, th.ID, t.LastSeq()); err != nil {
			return nil, fmt.Errorf("load checkpoints: %w", err)
		}
	}
	nt, err := t.Append(nodes...)
	if err != nil {
		return nil, fmt.Errorf("load checkpoints: %w", err)
	}
	c.Put(th.ID, nt)
	c.Own(th)
	return nt, nil
}

// Get returns the thread's tree if the cache has it as the caller's, else
// nil.
func (c *Cache) Get(caller string, id uuid.UUID) *checkpoint.Tree {
	c.mu.Lock()
	defer c.mu.Unlock()
	if o, ok := c.owners[id]; !ok || o.caller != caller {
		return nil
	}
	return c.trees[id]
}

// Peek returns the thread's tree whoever's it is (the caller was checked
// before), or nil.
func (c *Cache) Peek(id uuid.UUID) *checkpoint.Tree {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.trees[id]
}

// Own records the caller and depth of a cached tree's thread, as read
// from the store (or written by this process).
func (c *Cache) Own(th *thread.Thread) {
	c.mu.Lock()
	if c.trees[th.ID] != nil {
		c.owners[th.ID] = owner{caller: th.Caller, depth: th.Depth}
	}
	c.mu.Unlock()
}

// Put caches t as the thread's tree unless a longer one is cached,
// evicting an arbitrary entry when the cache is full.
func (c *Cache) Put(id uuid.UUID, t *checkpoint.Tree) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.trees[id]; old != nil && old.LastSeq() > t.LastSeq() {
		return
	}
	if _, ok := c.trees[id]; !ok && len(c.trees) >= c.max {
		for k := range c.trees {
			delete(c.trees, k)
			delete(c.owners, k)
			break
		}
	}
	c.trees[id] = t
}

// Forget drops the thread's tree.
func (c *Cache) Forget(id uuid.UUID) {
	c.mu.Lock()
	delete(c.trees, id)
	delete(c.owners, id)
	c.mu.Unlock()
}

// Clear drops every tree.
func (c *Cache) Clear() {
	c.mu.Lock()
	clear(c.trees)
	clear(c.owners)
	c.mu.Unlock()
}
