package engine

import (
	"context"

	"github.com/threadline/threadline/thread"
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
	watch.Watch(ctx, s.cfg.Wakeups.Changes, s.apply, s.resync)
}

func (s *Service) apply(ctx context.Context, c thread.Change) {
	switch c.Kind {
	case thread.ChangeCancel:
		s.active.CancelLocal(c.ID, thread.RunCancelled)
	case thread.ChangeThreadGone:
		for _, ar := range s.active.All() {
			if ar.Run().ThreadID == c.ID {
				ar.Lose() // its claim went with the thread
			}
		}
		s.trees.Forget(c.ID)
	case thread.ChangeOwnerDead:
		s.Recover(ctx)
	case thread.ChangeReset:
		s.resync(ctx)
	}
}

// resync catches up with what wake-ups that may have been lost said: it
// empties the tree cache, reads the cancel requests and claims of this
// process's runs (a cancel or a delete requested meanwhile stops its run
// now, not at the next lease renewal) and recovers runs whose owner died.
func (s *Service) resync(ctx context.Context) {
	s.forgetAll()
	s.RenewLeases(ctx)
	s.Recover(ctx)
}

// forgetAll empties the tree cache.
func (s *Service) forgetAll() {
	s.trees.Clear()
}
