package engine

import (
	"context"
	"fmt"
	"sync"

	"github.com/google/uuid"
	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/thread"
)

// cached returns the caller's thread as the tree cache knows it (ID, Caller
// and LastSeq only), or a nil tree.
func (s *Service) cached(caller string, id uuid.UUID) (*thread.Thread, *checkpoint.Tree) {
	t := s.trees.get(caller, id)
	if t == nil {
		return nil, nil
	}
	return &thread.Thread{ID: id, Caller: caller, LastSeq: t.LastSeq()}, t
}

func (s *Service) forget(id uuid.UUID) { s.trees.forget(id) }

// tree returns the thread's checkpoint tree, reading from the store only the
// checkpoints the cache does not have yet.
func (s *Service) tree(ctx context.Context, th *thread.Thread) (*checkpoint.Tree, error) {
	return s.treeRead(ctx, th, -1, nil)
}

// cachedSeq is where the cached tree of the thread ends (0: none cached):
// the checkpoints after it are the ones to read with the thread.
func (s *Service) cachedSeq(id uuid.UUID) int64 {
	if t := s.trees.peek(id); t != nil {
		return t.LastSeq()
	}
	return 0
}

// read reads the caller's thread, its tree and its running run in one
// round trip (Store.ThreadRead), with the checkpoints the cache lacks.
func (s *Service) read(ctx context.Context, caller string, id uuid.UUID) (*thread.Thread, *checkpoint.Tree, *thread.Run, error) {
	from := s.cachedSeq(id)
	th, nodes, run, err := s.store.ThreadRead(ctx, caller, id, from)
	if err != nil {
		return nil, nil, nil, err
	}
	t, err := s.treeRead(ctx, th, from, nodes)
	if err != nil {
		return nil, nil, nil, err
	}
	return th, t, run, nil
}

// treeRead is tree with the checkpoints after seq from already read
// (from < 0: none). If the cache no longer ends at from (it moved, or it
// is stale), they are read again.
func (s *Service) treeRead(ctx context.Context, th *thread.Thread, from int64, nodes []checkpoint.Node) (*checkpoint.Tree, error) {
	t := s.trees.peek(th.ID)
	if t != nil && (t.Len() > 0 && t.Nodes()[0].ThreadID != th.ID || t.LastSeq() > th.LastSeq) {
		t = nil // a deleted and recreated thread
	}
	if t == nil {
		t = &checkpoint.Tree{}
		if th.LastSeq == 0 {
			// An empty thread: cached too, so its first run's successor
			// reads no thread row.
			s.trees.put(th.ID, t)
			s.trees.own(th.ID, th.Caller)
			return t, nil
		}
	}
	if t.LastSeq() == th.LastSeq && t.Len() == int(th.LastSeq) {
		s.trees.own(th.ID, th.Caller)
		return t, nil
	}
	if from != t.LastSeq() {
		var err error
		if nodes, err = s.store.CheckpointsAfter(ctx, th.ID, t.LastSeq()); err != nil {
			return nil, fmt.Errorf("load checkpoints: %w", err)
		}
	}
	nt, err := t.Append(nodes...)
	if err != nil {
		return nil, fmt.Errorf("load checkpoints: %w", err)
	}
	s.trees.put(th.ID, nt)
	s.trees.own(th.ID, th.Caller)
	return nt, nil
}

// treeCache keeps the checkpoint trees of recently read threads, each
// with the caller the store named for its thread, under a lock of its
// own. Trees are immutable values: a reader keeps the one it got.
type treeCache struct {
	mu     sync.Mutex
	max    int
	trees  map[uuid.UUID]*checkpoint.Tree
	owners map[uuid.UUID]string // caller of each cached tree's thread, as the store said
}

func newTreeCache(max int) *treeCache {
	return &treeCache{max: max, trees: make(map[uuid.UUID]*checkpoint.Tree), owners: make(map[uuid.UUID]string)}
}

// get returns the thread's tree if the cache has it as the caller's, else
// nil.
func (c *treeCache) get(caller string, id uuid.UUID) *checkpoint.Tree {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.owners[id] != caller {
		return nil
	}
	return c.trees[id]
}

// peek returns the thread's tree whoever's it is (the caller was checked
// before), or nil.
func (c *treeCache) peek(id uuid.UUID) *checkpoint.Tree {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.trees[id]
}

// own records the caller of a cached tree's thread, as read from the store.
func (c *treeCache) own(id uuid.UUID, caller string) {
	c.mu.Lock()
	if c.trees[id] != nil {
		c.owners[id] = caller
	}
	c.mu.Unlock()
}

// put caches t as the thread's tree unless a longer one is cached,
// evicting an arbitrary entry when the cache is full.
func (c *treeCache) put(id uuid.UUID, t *checkpoint.Tree) {
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

// forget drops the thread's tree.
func (c *treeCache) forget(id uuid.UUID) {
	c.mu.Lock()
	delete(c.trees, id)
	delete(c.owners, id)
	c.mu.Unlock()
}

// clear drops every tree.
func (c *treeCache) clear() {
	c.mu.Lock()
	clear(c.trees)
	clear(c.owners)
	c.mu.Unlock()
}
