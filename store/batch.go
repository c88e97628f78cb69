package store

// Batches: several statements sent at once and run as one implicit
// transaction.

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// sendBatch runs a batch as one implicit transaction and returns its first
// error, interpreted.
func (s *Store) sendBatch(ctx context.Context, b *pgx.Batch, what string) error {
	return execBatch(s.pool.SendBatch(ctx, b), b.Len(), what)
}

func execBatch(br pgx.BatchResults, n int, what string) error {
	for range n {
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			return fmt.Errorf("%s: %w", what, interpretError(err))
		}
	}
	if err := br.Close(); err != nil {
		return fmt.Errorf("%s: %w", what, interpretError(err))
	}
	return nil
}

func nilUUID(id uuid.UUID) *uuid.UUID {
	if id == uuid.Nil {
		return nil
	}
	return &id
}

// nilString is s, or NULL for an empty s.
func nilString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
