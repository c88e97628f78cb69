package runner

import (
	"context"

	"github.com/threadline/threadline/thread"
)

// Apply applies what another process did (see the engine's watchLoop):
// a cancel stops the local run, a deleted thread stops its local run and
// leaves the tree cache, a dead process's runs are recovered now, and a
// reset resyncs.
func (s *Runner) Apply(ctx context.Context, c thread.Change) {
	switch c.Kind {
	case thread.ChangeCancel:
		s.active.CancelLocal(c.ID, thread.RunCancelled)
	case thread.ChangeThreadGone:
		for _, ar := range s.active.All() {
			if ar.run.ThreadID == c.ID {
				ar.Lose() // its claim went with the thread
			}
		}
		s.trees.Forget(c.ID)
	case thread.ChangeOwnerDead:
		s.Recover(ctx)
	case thread.ChangeReset:
		s.Resync(ctx)
	}
}

// Resync catches up with what wake-ups that may have been lost said: it
// empties the tree cache, reads the cancel requests and claims of this
// process's runs (a cancel or a delete requested meanwhile stops its run
// now, not at the next lease renewal) and recovers runs whose owner died.
func (s *Runner) Resync(ctx context.Context) {
	s.trees.Clear()
	s.RenewLeases(ctx)
	s.Recover(ctx)
}
