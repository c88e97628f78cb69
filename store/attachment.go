package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/thread"
)

var _ thread.Attachments = (*Store)(nil)

// AttachmentCreate stores an upload.
func (s *Store) AttachmentCreate(ctx context.Context, f *thread.File) error {
	f.CreatedAt = s.clock()
	_, err := s.pool.Exec(ctx, `INSERT INTO attachments (id, caller, name, content_type, size, data, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, f.ID, f.Caller, f.Name, f.ContentType, f.Size, f.Data, f.CreatedAt)
	if err != nil {
		return fmt.Errorf("store attachment: %w", interpretError(err))
	}
	return nil
}

// AttachmentGet returns the caller's attachment; not_found otherwise.
func (s *Store) AttachmentGet(ctx context.Context, caller string, id uuid.UUID) (*thread.File, error) {
	var f thread.File
	err := s.pool.QueryRow(ctx, `SELECT id, caller, name, content_type, size, data, created_at FROM attachments
		WHERE id = $1 AND caller = $2`, id, caller).Scan(&f.ID, &f.Caller, &f.Name, &f.ContentType, &f.Size, &f.Data, &f.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errcode.New(errcode.NotFound, "attachment %s not found", id)
	}
	if err != nil {
		return nil, fmt.Errorf("get attachment: %w", interpretError(err))
	}
	return &f, nil
}

// AttachmentData returns the attachment as a message carries it, with its bytes.
func (s *Store) AttachmentData(ctx context.Context, caller string, id uuid.UUID) (*checkpoint.Attachment, []byte, error) {
	f, err := s.AttachmentGet(ctx, caller, id)
	if err != nil {
		return nil, nil, err
	}
	a := f.Wire()
	return &a, f.Data, nil
}
