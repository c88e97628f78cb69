package engine

import (
	"context"

	"github.com/threadline/threadline/thread/engine/internal/runlog"
)

// ErrShuttingDown is returned by StartRun while the service drains, and
// by Follow for a run of another process once the service has drained.
var ErrShuttingDown = runlog.ErrShuttingDown

// Shutdown stops new runs, lets running ones finish until ctx ends, then
// cancels the rest (and any title call) and waits for their final writes,
// which are no longer retried then, ends the followers of other
// processes' runs (their streams end with ErrShuttingDown, to be rejoined
// elsewhere), and stops the engine's goroutines (Stop's among them).
func (s *Service) Shutdown(ctx context.Context) {
	s.runner.Drain(ctx)
	s.drainOnce.Do(func() { close(s.drained) })
	s.Stop()
	s.runner.Stop()
	s.relay.Stop()
}

// Draining reports whether Shutdown was called: new runs are refused.
func (s *Service) Draining() bool {
	return s.active.Closed()
}

// ActiveRuns returns how many runs this process owns.
func (s *Service) ActiveRuns() int {
	n, _ := s.active.Count("")
	return n
}
