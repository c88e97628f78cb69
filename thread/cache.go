package thread

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/threadline/threadline/checkpoint"
)

// cached returns the caller's thread as the tree cache knows it (ID, Caller
// and LastSeq only), or a nil tree.
func (s *Service) cached(caller string, id uuid.UUID) (*Thread, *checkpoint.Tree) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.trees[id]
	if t == nil || s.owners[id] != caller {
		return nil, nil
	}
	return &Thread{ID: id, Caller: caller, LastSeq: t.LastSeq()}, t
}

func (s *Service) forget(id uuid.UUID) {
	s.mu.Lock()
	delete(s.trees, id)
	delete(s.owners, id)
	s.mu.Unlock()
}

// tree returns the thread's checkpoint tree, reading from the store only the
// checkpoints the cache does not have yet.
func (s *Service) tree(ctx context.Context, th *Thread) (*checkpoint.Tree, error) {
	return s.treeRead(ctx, th, -1, nil)
}

// cachedSeq is where the cached tree of the thread ends (0: none cached):
// the checkpoints after it are the ones to read with the thread.
func (s *Service) cachedSeq(id uuid.UUID) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.trees[id]; t != nil {
		return t.LastSeq()
	}
	return 0
}

// read reads the caller's thread, its tree and its running run in one
// round trip (Store.ThreadRead), with the checkpoints the cache lacks.
func (s *Service) read(ctx context.Context, caller string, id uuid.UUID) (*Thread, *checkpoint.Tree, *Run, error) {
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
func (s *Service) treeRead(ctx context.Context, th *Thread, from int64, nodes []checkpoint.Node) (*checkpoint.Tree, error) {
	s.mu.Lock()
	t := s.trees[th.ID]
	s.mu.Unlock()
	if t != nil && (t.Len() > 0 && t.Nodes()[0].ThreadID != th.ID || t.LastSeq() > th.LastSeq) {
		t = nil // a deleted and recreated thread
	}
	if t == nil {
		t = &checkpoint.Tree{}
		if th.LastSeq == 0 {
			// An empty thread: cached too, so its first run's successor
			// reads no thread row.
			s.remember(th.ID, t)
			s.own(th)
			return t, nil
		}
	}
	if t.LastSeq() == th.LastSeq && t.Len() == int(th.LastSeq) {
		s.own(th)
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
	s.remember(th.ID, nt)
	s.own(th)
	return nt, nil
}

// own records the caller of a cached tree's thread, as read from the store.
func (s *Service) own(th *Thread) {
	s.mu.Lock()
	if s.trees[th.ID] != nil {
		s.owners[th.ID] = th.Caller
	}
	s.mu.Unlock()
}

func (s *Service) remember(id uuid.UUID, t *checkpoint.Tree) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.trees[id]; old != nil && old.LastSeq() > t.LastSeq() {
		return
	}
	if _, ok := s.trees[id]; !ok && len(s.trees) >= s.cfg.TreeCache {
		for k := range s.trees { // evict an arbitrary entry
			delete(s.trees, k)
			delete(s.owners, k)
			break
		}
	}
	s.trees[id] = t
}
