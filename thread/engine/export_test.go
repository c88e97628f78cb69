package engine

import (
	"time"

	"github.com/google/uuid"
)

// TuneRawWriter sets w's flush interval, its bound on queued bytes and
// how many failed writes of a run it tries; call it before Start.
func TuneRawWriter(w *RawWriter, every time.Duration, max, misses int) {
	w.every, w.max, w.misses = every, max, misses
}

// PendingStarts is how many starts wait for the starts batcher's next write.
func PendingStarts(s *Service) int { return s.runner.PendingStarts() }

// PendingEnds is how many run ends wait for the ends batcher's next write.
func PendingEnds(s *Service) int { return s.runner.PendingEnds() }

// Forget drops the thread's cached tree, so the next read is cold.
func Forget(s *Service, id uuid.UUID) { s.trees.Forget(id) }

// RelayReaders is how many runs of other processes have a reader here.
func RelayReaders(s *Service) int { return s.relay.Readers() }

// StartWaiters is how many calls wait for the start of the caller's run
// on the thread to be settled (0 when the thread has no run here).
func StartWaiters(s *Service, caller string, threadID uuid.UUID) int {
	if ar := s.active.OnThread(caller, threadID); ar != nil {
		return int(ar.StartWaiters())
	}
	return 0
}

// StartWriters starts s's writers and relay but not its lease loop, for
// a test that calls Recover and RenewLeases by hand (the loop would
// recover at once); Shutdown stops them.
func StartWriters(s *Service) {
	s.runner.StartWriters()
	s.relay.Start()
}
