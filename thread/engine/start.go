package engine

import (
	"context"

	"github.com/google/uuid"
	"github.com/threadline/threadline/thread"
)

// StartRun resolves the fork, starts the model in the background and
// returns once the run's start (the user message, the run, its first
// snapshot) is durable: written alone when the start linger ends, or with
// the whole run if the model ended first. The caller streams it with
// FollowRun from sequence 0.
//
// Errors: invalid_request for a bad request or unknown model; not_found for a
// foreign thread or unknown attachment; invalid_fork for every fork rule;
// run_in_progress naming the active run; conflict for a message id reused
// with other content; unavailable when the run could not be saved. A retry
// with the same message id and content returns the run that message
// started, with existing true.
func (s *Service) StartRun(ctx context.Context, caller string, threadID uuid.UUID, req thread.RunRequest) (run *thread.Run, existing bool, err error) {
	return s.starter.Start(ctx, caller, threadID, req)
}
