package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/thread"
)

const threadCols = `id, caller, title, metadata, coalesce(head_id, '00000000-0000-0000-0000-000000000000'), last_seq, created_at, updated_at,
	parent_thread_id, parent_run_id, parent_message_id, parent_tool_call_id, depth`

func scanThread(row pgx.Row) (*thread.Thread, error) {
	var t thread.Thread
	var pt, pr, pm *uuid.UUID
	var pc *string
	if err := row.Scan(&t.ID, &t.Caller, &t.Title, &t.Metadata, &t.HeadID, &t.LastSeq, &t.CreatedAt, &t.UpdatedAt,
		&pt, &pr, &pm, &pc, &t.Depth); err != nil {
		return nil, err
	}
	if pt != nil {
		t.Parent = &thread.ThreadParent{ThreadID: *pt}
		if pr != nil {
			t.Parent.RunID = *pr
		}
		if pm != nil {
			t.Parent.MessageID = *pm
		}
		if pc != nil {
			t.Parent.ToolCallID = *pc
		}
	}
	return &t, nil
}

// parentCols returns t's parent columns' values (nils for a top-level
// thread).
func parentCols(t *thread.Thread) (pt, pr, pm *uuid.UUID, pc *string) {
	if p := t.Parent; p != nil {
		return &p.ThreadID, &p.RunID, &p.MessageID, &p.ToolCallID
	}
	return nil, nil, nil, nil
}

func notFoundThread(id uuid.UUID) error {
	return errcode.New(errcode.NotFound, "thread %s not found", id)
}

// ThreadCreate inserts t; see thread.Store.
func (s *Store) ThreadCreate(ctx context.Context, t *thread.Thread) (*thread.Thread, bool, error) {
	md := t.Metadata
	if len(md) == 0 {
		md = json.RawMessage(`{}`)
	}
	pt, pr, pm, pc := parentCols(t)
	row := s.pool.QueryRow(ctx, sqlThreadInsert, t.ID, t.Caller, t.Title, md, t.CreatedAt, pt, pr, pm, pc, t.Depth)
	nt, err := scanThread(row)
	if err == nil {
		return nt, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, false, fmt.Errorf("create thread: %w", interpretError(err))
	}
	owner, err := s.ThreadOwner(ctx, t.ID)
	if err != nil {
		return nil, false, fmt.Errorf("create thread: %w", err)
	}
	if owner != t.Caller {
		return nil, false, errcode.New(errcode.Conflict, "thread id %s is taken", t.ID)
	}
	existing, err := s.ThreadGet(ctx, t.Caller, t.ID)
	if err != nil {
		return nil, false, fmt.Errorf("create thread: %w", err)
	}
	return existing, false, nil
}

// ThreadOwner returns the caller that owns the thread; see thread.Store.
func (s *Store) ThreadOwner(ctx context.Context, id uuid.UUID) (string, error) {
	var owner string
	err := s.pool.QueryRow(ctx, `SELECT caller FROM threads WHERE id = $1`, id).Scan(&owner)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", notFoundThread(id)
	}
	if err != nil {
		return "", fmt.Errorf("thread owner: %w", interpretError(err))
	}
	return owner, nil
}

// ThreadGet returns the caller's thread: not_found for an unknown id or
// another caller's thread, whatever the caller ("" included).
func (s *Store) ThreadGet(ctx context.Context, caller string, id uuid.UUID) (*thread.Thread, error) {
	t, err := scanThread(s.pool.QueryRow(ctx, sqlThreadGet, id, caller))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFoundThread(id)
	}
	if err != nil {
		return nil, fmt.Errorf("get thread: %w", interpretError(err))
	}
	return t, nil
}

// ThreadList returns a page of the caller's top-level threads; see thread.Store.
func (s *Store) ThreadList(ctx context.Context, caller string, limit int, after *thread.ThreadCursor) ([]*thread.Thread, error) {
	var rows pgx.Rows
	var err error
	if after == nil {
		rows, err = s.pool.Query(ctx, `SELECT `+threadCols+` FROM threads WHERE caller = $1 AND parent_thread_id IS NULL
			ORDER BY updated_at DESC, id DESC LIMIT $2`, caller, limit)
	} else {
		rows, err = s.pool.Query(ctx, `SELECT `+threadCols+` FROM threads WHERE caller = $1 AND parent_thread_id IS NULL
			AND (updated_at, id) < ($2, $3) ORDER BY updated_at DESC, id DESC LIMIT $4`, caller, after.UpdatedAt, after.ID, limit)
	}
	if err != nil {
		return nil, fmt.Errorf("list threads: %w", interpretError(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*thread.Thread, error) { return scanThread(r) })
	if err != nil {
		return nil, fmt.Errorf("list threads: %w", interpretError(err))
	}
	return out, nil
}

// ThreadUpdate applies a PATCH; see thread.Store.
func (s *Store) ThreadUpdate(ctx context.Context, caller string, id uuid.UUID, u thread.ThreadUpdate) (*thread.Thread, error) {
	var md []byte
	if len(u.Metadata) > 0 {
		md = u.Metadata
	}
	t, err := scanThread(s.pool.QueryRow(ctx, `UPDATE threads SET
			title = CASE WHEN $3::boolean THEN $4 ELSE title END,
			metadata = coalesce($5::jsonb, metadata),
			updated_at = $6
		WHERE id = $1 AND caller = $2 RETURNING `+threadCols,
		id, caller, u.Title != nil, u.Title, md, s.clock()))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFoundThread(id)
	}
	if err != nil {
		return nil, fmt.Errorf("update thread: %w", interpretError(err))
	}
	return t, nil
}

// ThreadDelete removes the thread and, by cascade, everything in it.
func (s *Store) ThreadDelete(ctx context.Context, caller string, id uuid.UUID) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM threads WHERE id = $1 AND caller = $2`, id, caller)
	if err != nil {
		return fmt.Errorf("delete thread: %w", interpretError(err))
	}
	if tag.RowsAffected() == 0 {
		return notFoundThread(id)
	}
	return nil
}

// ThreadSetHead stores the client's branch. It does not touch updated_at:
// switching branches is view state, not a change of the thread.
func (s *Store) ThreadSetHead(ctx context.Context, caller string, id, head uuid.UUID) error {
	tag, err := s.pool.Exec(ctx, `UPDATE threads SET head_id = $3 WHERE id = $1 AND caller = $2`, id, caller, head)
	if err != nil {
		return fmt.Errorf("set head: %w", interpretError(err))
	}
	if tag.RowsAffected() == 0 {
		return notFoundThread(id)
	}
	return nil
}

// ThreadRead reads the caller's thread, its checkpoints with seq > after
// and its running run (nil if none) in one round trip; see thread.Store.
// The three queries are one batch in one implicit transaction; each takes
// its own snapshot, as separate reads would.
func (s *Store) ThreadRead(ctx context.Context, caller string, id uuid.UUID, after int64) (*thread.Thread, []checkpoint.Node, *thread.Run, error) {
	b := &pgx.Batch{}
	b.Queue(sqlThreadGet, id, caller)
	b.Queue(sqlCheckpointsAfterOwned, id, after, caller)
	b.Queue(sqlRunActiveOwned, id, caller)
	br := s.pool.SendBatch(ctx, b)
	th, nodes, run, err := readThread(br, id)
	if cerr := br.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("read thread: %w", interpretError(cerr))
	}
	if err != nil {
		return nil, nil, nil, err
	}
	return th, nodes, run, nil
}

func readThread(br pgx.BatchResults, id uuid.UUID) (*thread.Thread, []checkpoint.Node, *thread.Run, error) {
	th, err := scanThread(br.QueryRow())
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, nil, notFoundThread(id)
	}
	if err != nil {
		return nil, nil, nil, fmt.Errorf("read thread: %w", interpretError(err))
	}
	rows, err := br.Query()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("read checkpoints: %w", interpretError(err))
	}
	nodes, err := pgx.CollectRows(rows, scanCheckpoint)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("read checkpoints: %w", interpretError(err))
	}
	run, err := scanRun(br.QueryRow())
	if errors.Is(err, pgx.ErrNoRows) {
		return th, nodes, nil, nil
	}
	if err != nil {
		return nil, nil, nil, fmt.Errorf("active run: %w", interpretError(err))
	}
	return th, nodes, run, nil
}

var (
	sqlThreadInsert = hot(`INSERT INTO threads (id, caller, title, metadata, created_at, updated_at,
			parent_thread_id, parent_run_id, parent_message_id, parent_tool_call_id, depth)
		VALUES ($1, $2, $3, $4, $5, $5, $6, $7, $8, $9, $10) ON CONFLICT (id) DO NOTHING RETURNING ` + threadCols)
	sqlThreadGet = hot(`SELECT ` + threadCols + ` FROM threads WHERE id = $1 AND caller = $2`)
	// The caller's checks are in each query of ThreadRead's batch, so
	// nothing of another caller's thread is read, even to be dropped.
	sqlCheckpointsAfterOwned = hot(`SELECT ` + checkpointCols + ` FROM checkpoints
		WHERE thread_id = $1 AND seq > $2 AND EXISTS (SELECT 1 FROM threads WHERE id = $1 AND caller = $3) ORDER BY seq`)
	sqlRunActiveOwned = hot(`SELECT ` + runCols + ` FROM runs
		WHERE thread_id = $1 AND status = 'running' AND EXISTS (SELECT 1 FROM threads WHERE id = $1 AND caller = $2)`)
)
