package engine

import (
	"context"

	"github.com/google/uuid"

	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/engine/internal/relay"
)

// The runs that other processes own come to this process's followers
// through the engine's relay (relay.Relay): one reader per run, woken by
// Config.Wakeups, reads the run's new records once and publishes their
// events to every local follower of the run. relayRead is what such a
// reader reads with.

// newRelay returns the service's relay (started by New).
func newRelay(s *Service) *relay.Relay[thread.Event] {
	wake := func(id uuid.UUID) relay.Wake { return s.cfg.Wakeups.WakeRun(id) }
	return relay.NewRelay[thread.Event](s.cfg.RelayBuffer, wake, s.pollEvery(), s.cfg.RetryMin, s.log)
}

// relayRead reads run r's log for its reader, as caller (its first
// follower, whose access was checked): the records after a sequence, or
// when there are none the stored tail (did the run end?), made events
// against the reader's own copy of the thread's tree. Errors are the
// store's (not_found: the run or its thread is gone).
func (s *Service) relayRead(r *thread.Run, caller string) relay.RelayRead[thread.Event] {
	var tree *checkpoint.Tree
	return func(ctx context.Context, after int64) ([]thread.Event, int64, bool, error) {
		recs, _, err := s.logged(ctx, r.ID, after)
		if err != nil {
			return nil, after, false, err
		}
		ended := false
		if len(recs) == 0 {
			// A wake-up for nothing new, or a quiet spell: did the run end?
			if recs, ended, _, err = s.storedTail(ctx, r, after); err != nil || len(recs) == 0 {
				return nil, after, ended, err
			}
		}
		evs, t, err := s.events(ctx, caller, r, recs, tree)
		if err != nil {
			return nil, after, false, err
		}
		tree = t
		return evs, recs[len(recs)-1].Seq, ended || evs[len(evs)-1].Final(), nil
	}
}
