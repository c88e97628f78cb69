package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/threadline/threadline/thread"
)

// RunTraceSource returns what the run's trace is built from (see
// thread.BuildTrace): the run, its event log and its marks. It answers
// not_found for an unknown run, a run of another thread, or another
// caller's.
func (s *Store) RunTraceSource(ctx context.Context, caller string, threadID, runID uuid.UUID) (thread.TraceSource, error) {
	r, err := scanRun(s.pool.QueryRow(ctx, `SELECT `+runCols+` FROM runs WHERE id = $1 AND thread_id = $2
		AND EXISTS (SELECT 1 FROM threads t WHERE t.id = $2 AND t.caller = $3)`, runID, threadID, caller))
	if errors.Is(err, pgx.ErrNoRows) {
		return thread.TraceSource{}, notFoundRun(runID)
	}
	if err != nil {
		return thread.TraceSource{}, fmt.Errorf("trace of run %s: %w", runID, interpretError(err))
	}
	recs, err := s.RunEventsAfter(ctx, runID, 0)
	if err != nil {
		return thread.TraceSource{}, err
	}
	rows, err := s.pool.Query(ctx, `SELECT seq, created_at FROM run_marks WHERE run_id = $1 ORDER BY seq`, runID)
	if err != nil {
		return thread.TraceSource{}, fmt.Errorf("trace of run %s: %w", runID, interpretError(err))
	}
	var marks []thread.Mark
	var m thread.Mark
	if _, err := pgx.ForEachRow(rows, []any{&m.Seq, &m.At}, func() error {
		m.At = m.At.UTC()
		marks = append(marks, m)
		return nil
	}); err != nil {
		return thread.TraceSource{}, fmt.Errorf("trace of run %s: %w", runID, interpretError(err))
	}
	return thread.TraceSource{Run: r, Records: recs, Marks: marks}, nil
}
