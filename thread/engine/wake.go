package engine

import (
	"context"

	"github.com/threadline/threadline/thread/engine/internal/watch"
)

// watchLoop applies what other processes did until ctx ends: a cancel
// requested anywhere stops the local run at once, a deleted thread stops
// its local run and leaves the tree cache, a dead process's runs are
// recovered now, and a reset (wake-ups may have been lost) empties the
// tree cache and reads again what they would have said (resync). Without
// Wakeups it returns at once.
func (s *Service) watchLoop(ctx context.Context) {
	if s.cfg.Wakeups == nil {
		return
	}
	watch.Watch(ctx, s.cfg.Wakeups.Changes, s.runner.Apply, s.runner.Resync)
}
