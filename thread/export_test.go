package thread

import "github.com/google/uuid"

// PendingStarts is how many starts wait for the starts batcher's next write.
func PendingStarts(s *Service) int { return s.starts.Waiting() }

// PendingEnds is how many run ends wait for the ends batcher's next write.
func PendingEnds(s *Service) int { return s.ends.Waiting() }

// Forget drops the thread's cached tree, so the next read is cold.
func Forget(s *Service, id uuid.UUID) { s.forget(id) }

// RelayReaders is how many runs of other processes have a reader here.
func RelayReaders(s *Service) int { return s.relay.Readers() }
