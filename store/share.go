package store

// Share rows: read-only links to one message's branch (migration 0015).

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/thread"
)

// notFoundShare is the one answer for a share that never existed, was
// revoked or has expired, so ids cannot be probed.
func notFoundShare(id uuid.UUID) error {
	return errcode.New(errcode.NotFound, "share %s not found", id)
}

const shareCols = `s.id, s.thread_id, s.message_id, s.checkpoint_id, s.caller, s.created_at, s.expires_at, t.title`

func scanShare(row pgx.Row) (*thread.Share, error) {
	var sh thread.Share
	if err := row.Scan(&sh.ID, &sh.ThreadID, &sh.MessageID, &sh.CheckpointID, &sh.Caller, &sh.CreatedAt, &sh.ExpiresAt, &sh.Title); err != nil {
		return nil, err
	}
	sh.CreatedAt = sh.CreatedAt.UTC()
	if sh.ExpiresAt != nil {
		e := sh.ExpiresAt.UTC()
		sh.ExpiresAt = &e
	}
	return &sh, nil
}

// ShareCreate stores sh, setting its CreatedAt and Title. The thread must
// be sh.Caller's and hold sh.CheckpointID: not_found otherwise; conflict
// for a reused id.
func (s *Store) ShareCreate(ctx context.Context, sh *thread.Share) error {
	sh.CreatedAt = s.clock()
	err := s.pool.QueryRow(ctx, `INSERT INTO shares (id, thread_id, message_id, checkpoint_id, caller, created_at, expires_at)
		SELECT $1, t.id, $3, c.id, t.caller, $6, $7 FROM threads t JOIN checkpoints c ON c.thread_id = t.id
		WHERE t.id = $2 AND t.caller = $5 AND c.id = $4
		RETURNING (SELECT title FROM threads WHERE id = $2)`,
		sh.ID, sh.ThreadID, sh.MessageID, sh.CheckpointID, sh.Caller, sh.CreatedAt, sh.ExpiresAt).Scan(&sh.Title)
	if errors.Is(err, pgx.ErrNoRows) {
		return errcode.New(errcode.NotFound, "message %s not found in thread %s", sh.MessageID, sh.ThreadID)
	}
	if err != nil {
		return fmt.Errorf("create share: %w", interpretError(err))
	}
	return nil
}

// ShareGet returns a share that has not expired, whoever asks (the id is
// the secret); not_found for an unknown, revoked or expired one.
func (s *Store) ShareGet(ctx context.Context, id uuid.UUID) (*thread.Share, error) {
	sh, err := scanShare(s.pool.QueryRow(ctx, `SELECT `+shareCols+` FROM shares s JOIN threads t ON t.id = s.thread_id
		WHERE s.id = $1 AND (s.expires_at IS NULL OR s.expires_at > $2)`, id, s.clock()))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFoundShare(id)
	}
	if err != nil {
		return nil, fmt.Errorf("get share: %w", interpretError(err))
	}
	return sh, nil
}

// ShareList returns the caller's shares of a thread, oldest first, expired
// ones included; not_found for an unknown or foreign thread.
func (s *Store) ShareList(ctx context.Context, caller string, threadID uuid.UUID) ([]*thread.Share, error) {
	if _, err := s.ThreadGet(ctx, caller, threadID); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT `+shareCols+` FROM shares s JOIN threads t ON t.id = s.thread_id
		WHERE s.thread_id = $1 AND s.caller = $2 ORDER BY s.created_at, s.id`, threadID, caller)
	if err != nil {
		return nil, fmt.Errorf("list shares: %w", interpretError(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*thread.Share, error) { return scanShare(r) })
	if err != nil {
		return nil, fmt.Errorf("list shares: %w", interpretError(err))
	}
	return out, nil
}

// ShareDelete revokes the caller's share; not_found for an unknown share or
// another caller's.
func (s *Store) ShareDelete(ctx context.Context, caller string, id uuid.UUID) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM shares WHERE id = $1 AND caller = $2`, id, caller)
	if err != nil {
		return fmt.Errorf("delete share: %w", interpretError(err))
	}
	if tag.RowsAffected() == 0 {
		return notFoundShare(id)
	}
	return nil
}

// ShareFork writes a continued share in one transaction: the new thread
// (its head the last node), copies of the attachments the nodes name, and
// the nodes, numbered from 1. conflict for a reused thread id.
func (s *Store) ShareFork(ctx context.Context, f thread.ShareFork) error {
	now := s.clock()
	th := f.Thread
	th.CreatedAt, th.UpdatedAt, th.LastSeq = now, now, int64(len(f.Nodes))
	if n := len(f.Nodes); n > 0 {
		th.HeadID = f.Nodes[n-1].ID
	}
	md := th.Metadata
	if len(md) == 0 {
		md = []byte(`{}`)
	}
	return withTx(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO threads (id, caller, title, metadata, head_id, last_seq, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $7)`, th.ID, th.Caller, th.Title, md, nilUUID(th.HeadID), th.LastSeq, now); err != nil {
			return fmt.Errorf("fork share: %w", interpretError(err))
		}
		for old, nid := range f.Attachments {
			if _, err := tx.Exec(ctx, `INSERT INTO attachments (id, caller, name, content_type, size, data, created_at)
				SELECT $1, $2, name, content_type, size, data, $4 FROM attachments WHERE id = $3 AND caller = $5`,
				nid, th.Caller, old, now, f.Owner); err != nil {
				return fmt.Errorf("fork share attachment: %w", interpretError(err))
			}
		}
		for i := range f.Nodes {
			n := &f.Nodes[i]
			n.ThreadID = th.ID
			if err := insertCheckpoint(ctx, tx, n); err != nil {
				return fmt.Errorf("fork share: %w", err)
			}
		}
		return nil
	})
}
