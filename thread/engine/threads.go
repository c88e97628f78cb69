package engine

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/engine/internal/runlog"
	"github.com/threadline/threadline/thread/engine/internal/runner"
)

// CreateThread creates a thread for caller; id uuid.Nil picks one. It
// returns the existing thread and false when the id is the caller's already,
// not_found when it is someone else's (as every other use of a foreign id
// answers: a caller learns nothing of others' threads).
func (s *Service) CreateThread(ctx context.Context, caller string, id uuid.UUID, metadata json.RawMessage) (*thread.Thread, bool, error) {
	if id == uuid.Nil {
		id = uuid.New()
	}
	now := s.now()
	t := &thread.Thread{ID: id, Caller: caller, Metadata: metadata, CreatedAt: now, UpdatedAt: now}
	th, created, err := s.store.ThreadCreate(ctx, t)
	if errcode.Of(err) == errcode.Conflict {
		return nil, false, errcode.New(errcode.NotFound, "thread %s not found", id)
	}
	return th, created, err
}

// GetThread returns not_found for unknown or foreign threads.
func (s *Service) GetThread(ctx context.Context, caller string, id uuid.UUID) (*thread.Thread, error) {
	return s.store.ThreadGet(ctx, caller, id)
}

// ListThreads returns a page of threads, most recently updated first, and
// the cursor of the next page ("" at the end). A malformed cursor is
// invalid_request.
func (s *Service) ListThreads(ctx context.Context, caller string, limit int, cursor string) ([]*thread.Thread, string, error) {
	if limit <= 0 {
		limit = 20
	}
	if limit > 100 {
		return nil, "", errcode.New(errcode.Invalid, "limit must be between 1 and 100, got %d", limit)
	}
	var after *thread.ThreadCursor
	if cursor != "" {
		c, err := decodeCursor(cursor)
		if err != nil {
			return nil, "", err
		}
		after = c
	}
	ts, err := s.store.ThreadList(ctx, caller, limit+1, after)
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(ts) > limit {
		ts = ts[:limit]
		last := ts[len(ts)-1]
		next = encodeCursor(thread.ThreadCursor{UpdatedAt: last.UpdatedAt, ID: last.ID})
	}
	return ts, next, nil
}

func encodeCursor(c thread.ThreadCursor) string {
	return base64.RawURLEncoding.EncodeToString([]byte(c.UpdatedAt.UTC().Format(time.RFC3339Nano) + "|" + c.ID.String()))
}

func decodeCursor(s string) (*thread.ThreadCursor, error) {
	bad := errcode.New(errcode.Invalid, "cursor %q is not a cursor this service returned", s)
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, bad
	}
	ts, id, ok := strings.Cut(string(b), "|")
	if !ok {
		return nil, bad
	}
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return nil, bad
	}
	u, err := uuid.Parse(id)
	if err != nil {
		return nil, bad
	}
	return &thread.ThreadCursor{UpdatedAt: t, ID: u}, nil
}

// UpdateThread applies a PATCH; not_found for unknown or foreign threads.
func (s *Service) UpdateThread(ctx context.Context, caller string, id uuid.UUID, u thread.ThreadUpdate) (*thread.Thread, error) {
	return s.store.ThreadUpdate(ctx, caller, id, u)
}

// DeleteThread deletes the thread and everything in it, then stops its
// run here, if any, and waits for it: as when the thread is deleted in
// another process, the run writes and publishes nothing more, and every
// stream of it ends with a not_found error event (internal/follow). not_found
// for unknown or foreign threads.
func (s *Service) DeleteThread(ctx context.Context, caller string, id uuid.UUID) error {
	if _, err := s.store.ThreadGet(ctx, caller, id); err != nil {
		return err
	}
	// The runs before the delete: not one a client starts on the id
	// afterwards, which makes a new thread.
	var waits []*runner.Active
	for _, ar := range s.active.All() {
		if ar.Run().ThreadID == id {
			waits = append(waits, ar)
		}
	}
	if err := s.store.ThreadDelete(ctx, caller, id); err != nil {
		return err
	}
	s.trees.Forget(id)
	for _, ar := range waits {
		ar.Lose() // its claim went with the thread
	}
	for _, ar := range waits {
		select {
		case <-ar.Done():
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Checkpoints returns the thread's whole checkpoint tree; not_found for
// unknown or foreign threads.
func (s *Service) Checkpoints(ctx context.Context, caller string, id uuid.UUID) (*checkpoint.Tree, error) {
	_, t, _, err := s.trees.Read(ctx, caller, id)
	return t, err
}

// SetHead remembers the branch the client shows. The message must be in the
// thread (or be its running reply): not_found otherwise.
func (s *Service) SetHead(ctx context.Context, caller string, id, messageID uuid.UUID) error {
	_, t, r, err := s.trees.Read(ctx, caller, id)
	if err != nil {
		return err
	}
	if t.Get(messageID) == nil && (r == nil || r.MessageID != messageID) {
		return errcode.New(errcode.NotFound, "message %s not found in thread %s", messageID, id)
	}
	return s.store.ThreadSetHead(ctx, caller, id, messageID)
}

// Snapshot returns the thread as the client shows it: the whole tree, the
// path to the head and the active run with the text it has durably streamed.
// not_found for unknown or foreign threads.
func (s *Service) Snapshot(ctx context.Context, caller string, id uuid.UUID) (*thread.ThreadSnapshot, error) {
	for attempt := 0; ; attempt++ {
		th, t, r, err := s.trees.Read(ctx, caller, id)
		if err != nil {
			return nil, err
		}
		snap := &thread.ThreadSnapshot{Snapshot: thread.Snapshot{ThreadID: id, Tree: t, Head: th.HeadID}}
		if r == nil {
			return snap, nil
		}
		recs, _, err := s.followers.Logged(ctx, r.ID, 0)
		if err != nil {
			return nil, err
		}
		if n := len(recs); n > 0 && recs[n-1].Kind == thread.KindSnapshot && recs[n-1].Status.Done() {
			if attempt < 3 {
				continue // it ended between the reads; read again
			}
		}
		fold := runlog.Seeded(r, t)
		var last int64
		for i := range recs {
			fold.Add(&recs[i])
			last = recs[i].Seq
		}
		snap.Running = runlog.RunningNode(r, t, fold.Content())
		snap.ActiveRun = &thread.ActiveRun{RunID: r.ID, MessageID: r.MessageID, Sequence: last}
		return snap, nil
	}
}
