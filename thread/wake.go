package thread

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/thread/engine"
)

// Wakeups is how this process hears, within milliseconds of their commit,
// of the writes of the other processes that share the database: a run's
// log grew or ended, a cancel was requested, a thread was deleted, a
// process died. A wake-up only says "read again": the store stays the
// source of truth, and without wake-ups (Config.Wakeups nil) followers of
// other processes' runs poll and cancels wait for the lease renewal.
type Wakeups interface {
	// WakeRun returns a subscription woken whenever the run's log grows,
	// the run ends or is deleted, in any process, and whenever wake-ups
	// may have been lost (a reconnect). Wake-ups coalesce.
	WakeRun(runID uuid.UUID) Wake
	// Changes returns a subscription to cancels, deleted threads, dead
	// processes and resets. Its channel closes when the subscriber fell
	// behind (it then resubscribes and treats it as a reset) or the
	// Wakeups stopped.
	Changes() Changes
}

// Wake is a subscription to one run's wake-ups (the engine's relay
// readers take them too).
type Wake = engine.Wake

// Changes is a subscription to the changes other processes made.
type Changes = engine.Changes

// ChangeKind says what changed.
type ChangeKind = engine.ChangeKind

// The kinds of change (see engine.ChangeKind).
const (
	ChangeCancel     = engine.ChangeCancel
	ChangeThreadGone = engine.ChangeThreadGone
	ChangeOwnerDead  = engine.ChangeOwnerDead
	ChangeReset      = engine.ChangeReset
)

// Change is one change another process made.
type Change = engine.Change

// pollEvery is how long a follower of a run (or, with wake-ups, the run's
// reader in this process, relay.go) waits, quiet, before it reads the log
// again: with wake-ups only a safety net.
func (s *Service) pollEvery() time.Duration {
	if s.cfg.Wakeups != nil {
		return 2 * time.Second
	}
	return time.Second
}

// nopWake never fires.
type nopWake struct{}

func (nopWake) C() <-chan struct{} { return nil }
func (nopWake) Close()             {}

// wakeRun subscribes a follower to a run's wake-ups, unless the run is
// this process's own (its events come through the hub) or there are no
// wake-ups.
func (s *Service) wakeRun(runID uuid.UUID) Wake {
	if s.cfg.Wakeups == nil || s.local(runID) != nil {
		return nopWake{}
	}
	return s.cfg.Wakeups.WakeRun(runID)
}

// Watch applies what other processes did until ctx ends: a cancel
// requested anywhere stops the local run at once, a deleted thread stops
// its local run and leaves the tree cache, a dead process's runs are
// recovered now, and a reset (wake-ups may have been lost) empties the
// tree cache and reads again what they would have said (resync). Without
// Wakeups it returns at once.
func (s *Service) Watch(ctx context.Context) {
	if s.cfg.Wakeups == nil {
		return
	}
	engine.Watch(ctx, s.cfg.Wakeups.Changes, s.apply, s.resync)
}

func (s *Service) apply(ctx context.Context, c Change) {
	switch c.Kind {
	case ChangeCancel:
		s.cancelLocal(c.ID, RunCancelled)
	case ChangeThreadGone:
		s.mu.Lock()
		for _, ar := range s.runs {
			if ar.run.ThreadID == c.ID {
				ar.cancel(RunCancelled)
			}
		}
		s.mu.Unlock()
		s.forget(c.ID)
	case ChangeOwnerDead:
		s.Recover(ctx)
	case ChangeReset:
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
	s.mu.Lock()
	clear(s.trees)
	clear(s.owners)
	s.mu.Unlock()
}
