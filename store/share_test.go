package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/thread"
)

// TestShareStore: a share lives until it expires, by the store's clock, or
// is revoked by its owner; it needs the owner's thread and checkpoint.
func TestShareStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := setup(t)
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	s.SetClock(func() time.Time { return now })
	th := newThread(t, s, "alice")
	nodes := chain(t, s, th.ID, uuid.Nil, 2)
	exp := now.Add(time.Hour)
	sh := &thread.Share{ID: uuid.New(), ThreadID: th.ID, MessageID: nodes[1].ID, CheckpointID: nodes[1].ID, Caller: "alice", ExpiresAt: &exp}
	if err := s.ShareCreate(ctx, sh); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []*thread.Share{
		{ID: uuid.New(), ThreadID: th.ID, MessageID: nodes[1].ID, CheckpointID: nodes[1].ID, Caller: "bob"},
		{ID: uuid.New(), ThreadID: th.ID, MessageID: nodes[1].ID, CheckpointID: uuid.New(), Caller: "alice"},
		{ID: uuid.New(), ThreadID: uuid.New(), MessageID: nodes[1].ID, CheckpointID: nodes[1].ID, Caller: "alice"},
	} {
		if err := s.ShareCreate(ctx, bad); errcode.Of(err) != errcode.NotFound {
			t.Errorf("ShareCreate %+v: got %v, want not_found", bad, err)
		}
	}
	got, err := s.ShareGet(ctx, sh.ID)
	if err != nil || got.CheckpointID != nodes[1].ID || got.Caller != "alice" || !got.ExpiresAt.Equal(exp) || !got.CreatedAt.Equal(now) {
		t.Fatalf("ShareGet: got %+v, %v", got, err)
	}
	now = exp // expired at its expiry
	if _, err := s.ShareGet(ctx, sh.ID); errcode.Of(err) != errcode.NotFound {
		t.Fatalf("ShareGet after expiry: got %v, want not_found", err)
	}
	list, err := s.ShareList(ctx, "alice", th.ID)
	if err != nil || len(list) != 1 {
		t.Fatalf("ShareList keeps expired shares: got %d, %v", len(list), err)
	}
	if err := s.ShareDelete(ctx, "bob", sh.ID); errcode.Of(err) != errcode.NotFound {
		t.Fatalf("ShareDelete by another caller: got %v, want not_found", err)
	}
	if err := s.ShareDelete(ctx, "alice", sh.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.ShareDelete(ctx, "alice", sh.ID); errcode.Of(err) != errcode.NotFound {
		t.Fatalf("ShareDelete twice: got %v, want not_found", err)
	}
}
