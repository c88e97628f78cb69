package store

// Checkpoint rows: the immutable messages of a thread's tree, their
// encoding, and the reads and writes of them.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/threadline/threadline/checkpoint"
)

const checkpointCols = `thread_id, id, coalesce(parent_id, '00000000-0000-0000-0000-000000000000'), seq, role, content, status, attachments,
	coalesce(run_id, '00000000-0000-0000-0000-000000000000'), created_at`

// CheckpointsAfter returns the thread's checkpoints with seq > after: one
// index range scan, so reading a whole tree is one query.
func (s *Store) CheckpointsAfter(ctx context.Context, threadID uuid.UUID, after int64) ([]checkpoint.Node, error) {
	rows, err := s.pool.Query(ctx, sqlCheckpointsAfter, threadID, after)
	if err != nil {
		return nil, fmt.Errorf("read checkpoints: %w", interpretError(err))
	}
	out, err := pgx.CollectRows(rows, scanCheckpoint)
	if err != nil {
		return nil, fmt.Errorf("read checkpoints: %w", interpretError(err))
	}
	return out, nil
}

func scanCheckpoint(r pgx.CollectableRow) (checkpoint.Node, error) {
	var n checkpoint.Node
	var content, status, atts []byte
	var err error
	if err = r.Scan(&n.ThreadID, &n.ID, &n.ParentID, &n.Seq, &n.Role, &content, &status, &atts, &n.RunID, &n.CreatedAt); err != nil {
		return n, err
	}
	n.CreatedAt = n.CreatedAt.UTC()
	if n.Content, err = decodeParts(content); err != nil {
		return n, fmt.Errorf("checkpoint %s content: %w", n.ID, err)
	}
	// jsonb prints JSON values with spaces: back to how they were written.
	n.Content = checkpoint.Compacted(n.Content)
	if status != nil {
		if n.Status, err = unmarshalStatus(status); err != nil {
			return n, fmt.Errorf("checkpoint %s status: %w", n.ID, err)
		}
	}
	if atts != nil {
		if n.Attachments, err = unmarshalAttachments(atts); err != nil {
			return n, fmt.Errorf("checkpoint %s attachments: %w", n.ID, err)
		}
	}
	return n, nil
}

// decodeParts decodes a checkpoint's stored content. The common case, one
// text part as jsonb prints it with nothing escaped, is read without
// encoding/json, which dominated reading a long thread from Postgres.
func decodeParts(b []byte) ([]checkpoint.Part, error) {
	const pre, suf = `[{"text": "`, `", "type": "text"}]`
	if len(b) >= len(pre)+len(suf) && string(b[:len(pre)]) == pre && string(b[len(b)-len(suf):]) == suf {
		s := b[len(pre) : len(b)-len(suf)]
		if bytes.IndexByte(s, '"') < 0 && bytes.IndexByte(s, '\\') < 0 && utf8.Valid(s) {
			return []checkpoint.Part{{Type: "text", Text: string(s)}}, nil
		}
	}
	return unmarshalParts(b)
}

// insertCheckpoint appends one checkpoint row; the caller has bumped the
// thread's last_seq to n.Seq under the row lock.
func insertCheckpoint(ctx context.Context, tx pgx.Tx, n *checkpoint.Node) error {
	args, err := checkpointArgs(n)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, checkpointInsert, args...); err != nil {
		return fmt.Errorf("append checkpoint: %w", interpretError(err))
	}
	return nil
}

// queueCheckpoint queues insertCheckpoint's statement on a batch.
func queueCheckpoint(b *pgx.Batch, n *checkpoint.Node) error {
	args, err := checkpointArgs(n)
	if err != nil {
		return err
	}
	b.Queue(checkpointInsert, args...)
	return nil
}

// The checkpoint statements, prepared on every new connection (see hot).
var (
	checkpointInsert = hot(`INSERT INTO checkpoints (thread_id, id, parent_id, seq, role, content, status, attachments, run_id, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`)
	sqlCheckpointsAfter = hot(`SELECT ` + checkpointCols + ` FROM checkpoints WHERE thread_id = $1 AND seq > $2 ORDER BY seq`)
)

// checkpointArgs is a checkpoint row's insert arguments.
func checkpointArgs(n *checkpoint.Node) ([]any, error) {
	var parent, run *uuid.UUID
	if n.ParentID != uuid.Nil {
		parent = &n.ParentID
	}
	if n.RunID != uuid.Nil {
		run = &n.RunID
	}
	var status, atts []byte
	if n.Status != nil {
		status = marshalStatus(n.Status)
	}
	if len(n.Attachments) > 0 {
		atts = marshalAttachments(n.Attachments)
	}
	return []any{n.ThreadID, n.ID, parent, n.Seq, n.Role, marshalParts(n.Content), status, atts, run, n.CreatedAt}, nil
}

// CheckpointAppend appends nodes to a thread in one transaction, assigning
// their Seq. It exists for tests and tools that build trees without runs;
// not_found for an unknown thread, invalid_fork for a parent elsewhere.
func (s *Store) CheckpointAppend(ctx context.Context, threadID uuid.UUID, nodes ...*checkpoint.Node) error {
	return withTx(ctx, s.pool, func(tx pgx.Tx) error {
		var last int64
		err := tx.QueryRow(ctx, `UPDATE threads SET last_seq = last_seq + $2, updated_at = $3 WHERE id = $1 RETURNING last_seq`,
			threadID, len(nodes), s.clock()).Scan(&last)
		if errors.Is(err, pgx.ErrNoRows) {
			return notFoundThread(threadID)
		}
		if err != nil {
			return fmt.Errorf("append checkpoint: %w", interpretError(err))
		}
		for i, n := range nodes {
			n.ThreadID = threadID
			n.Seq = last - int64(len(nodes)) + int64(i) + 1
			if n.CreatedAt.IsZero() {
				n.CreatedAt = s.clock()
			}
			if err := insertCheckpoint(ctx, tx, n); err != nil {
				return err
			}
		}
		return nil
	})
}
