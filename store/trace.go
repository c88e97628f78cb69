package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/threadline/threadline/checkpoint"
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
	names, err := s.replyToolNames(ctx, r)
	if err != nil {
		return thread.TraceSource{}, err
	}
	return thread.TraceSource{Run: r, Records: recs, Marks: marks, ToolNames: names}, nil
}

// replyToolNames returns the names of the tool calls in the run's reply
// by their ids (a continuation answers calls its own log does not name);
// none while the run has no reply yet.
func (s *Store) replyToolNames(ctx context.Context, r *thread.Run) (map[string]string, error) {
	var content []byte
	err := s.pool.QueryRow(ctx, `SELECT c.content FROM checkpoints c WHERE c.thread_id = $1 AND c.id IN ($2, $3) AND c.run_id = $3`,
		r.ThreadID, r.MessageID, r.ID).Scan(&content)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("trace of run %s: %w", r.ID, interpretError(err))
	}
	var parts []checkpoint.Part
	if err := json.Unmarshal(content, &parts); err != nil {
		return nil, fmt.Errorf("trace of run %s: %w", r.ID, err)
	}
	names := map[string]string{}
	for _, p := range parts {
		if p.Type == checkpoint.PartToolCall && p.ToolCallID != "" {
			names[p.ToolCallID] = p.ToolName
		}
	}
	return names, nil
}
