package store_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/thread"
)

// importThread is a chain of n messages under a new thread id.
func importThread(n int) *thread.ImportThread {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	it := &thread.ImportThread{Thread: thread.Thread{ID: uuid.New(), CreatedAt: now, UpdatedAt: now, LastSeq: int64(n)}}
	parent := uuid.Nil
	for i := range n {
		role := checkpoint.RoleUser
		if i%2 == 1 {
			role = checkpoint.RoleAssistant
		}
		nd := checkpoint.Node{ID: uuid.New(), ParentID: parent, Seq: int64(i + 1), Role: role, Content: text("m"), CreatedAt: now}
		it.Nodes = append(it.Nodes, nd)
		parent = nd.ID
	}
	it.Head = parent
	return it
}

// feed yields the threads, then err (io.EOF: the end).
func feed(its []*thread.ImportThread, err error) func() (*thread.ImportThread, error) {
	i := 0
	return func() (*thread.ImportThread, error) {
		if i == len(its) {
			return nil, err
		}
		i++
		return its[i-1], nil
	}
}

// TestThreadImportAllOrNothing: a failure after several COPY batches
// (the reader's error, or a row the database refuses) leaves nothing.
func TestThreadImportAllOrNothing(t *testing.T) {
	t.Parallel()
	s, pool := setup(t)
	ctx := context.Background()
	var its []*thread.ImportThread
	for range 30 {
		its = append(its, importThread(400)) // more than one batch
	}
	bad := errors.New("the file ends in the middle")
	if _, err := s.ThreadImport(ctx, "alice", feed(its, bad)); !errors.Is(err, bad) {
		t.Fatalf("got %v, want the reader's error", err)
	}
	// A parent the tree does not hold, in the last thread.
	broken := importThread(3)
	broken.Nodes[2].ParentID = uuid.New()
	if _, err := s.ThreadImport(ctx, "alice", feed(append(its[:29:29], broken), io.EOF)); errcode.Of(err) != errcode.InvalidFork {
		t.Fatalf("got %v, want invalid_fork", err)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM threads) + (SELECT count(*) FROM checkpoints)`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("refused imports left %d rows (%v)", n, err)
	}
	res, err := s.ThreadImport(ctx, "alice", feed(its, io.EOF))
	if err != nil || len(res) != 30 || res[29].Messages != 400 {
		t.Fatalf("import: %d threads, %v", len(res), err)
	}
	x, err := s.ThreadExport(ctx, "alice", its[7].Thread.ID)
	if err != nil || len(x.Nodes) != 400 || x.Thread.HeadID != its[7].Head {
		t.Fatalf("export of an imported thread: %v", err)
	}
	if _, err := s.ThreadExport(ctx, "bob", its[7].Thread.ID); errcode.Of(err) != errcode.NotFound {
		t.Errorf("another caller's export: %v, want not_found", err)
	}
}

// TestThreadImportTakenIDs: a thread id taken by another caller, or twice
// in one file, is imported under new ids; the existing thread is untouched.
func TestThreadImportTakenIDs(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	ctx := context.Background()
	bobs := newThread(t, s, "bob")
	it := importThread(2)
	it.Thread.ID = bobs.ID
	twin := importThread(2)
	twin.Thread.ID = bobs.ID
	res, err := s.ThreadImport(ctx, "alice", feed([]*thread.ImportThread{it, twin}, io.EOF))
	if err != nil || len(res) != 2 {
		t.Fatalf("import: %v", err)
	}
	if res[0].ThreadID == bobs.ID || res[1].ThreadID == bobs.ID || res[0].ThreadID == res[1].ThreadID {
		t.Fatalf("taken ids kept: %v", res)
	}
	if got, err := s.ThreadGet(ctx, "bob", bobs.ID); err != nil || got.LastSeq != 0 {
		t.Errorf("bob's thread changed: %+v %v", got, err)
	}
	x, err := s.ThreadExport(ctx, "alice", res[0].ThreadID)
	if err != nil || len(x.Nodes) != 2 || x.Nodes[1].ParentID != x.Nodes[0].ID || x.Thread.HeadID != x.Nodes[1].ID {
		t.Fatalf("renewed thread's tree: %v", err)
	}
}
