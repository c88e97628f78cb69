package engine

import (
	"context"

	"github.com/google/uuid"
	"github.com/threadline/threadline/thread"
)

// Follow calls fn with every event of the run after sequence after, first
// from the durable log, then live, until the run's final snapshot or ctx
// ends. It works for finished runs too. A subscriber that falls behind
// catches up from the log. more tells fn that another event is ready at
// once, so a writer can batch its flushes. A run whose thread is deleted
// meanwhile (here or in another process) ends with an error event
// not_found after the last event fn got, and no error. not_found for
// unknown runs or foreign threads.
func (s *Service) Follow(ctx context.Context, caller string, threadID, runID uuid.UUID, after int64, fn func(ev thread.Event, more bool) error) error {
	r, err := s.FindRun(ctx, caller, threadID, runID)
	if err != nil {
		return err
	}
	return s.followers.Follow(ctx, caller, r, after, fn)
}

// FollowRun is Follow for a run the caller already holds (from StartRun or
// GetRun), saving the look-ups.
func (s *Service) FollowRun(ctx context.Context, caller string, r *thread.Run, after int64, fn func(ev thread.Event, more bool) error) error {
	return s.followers.Follow(ctx, caller, r, after, fn)
}
