package engine

import (
	"context"

	"github.com/threadline/threadline/thread/engine/internal/lifecycle"
)

// Start starts everything the service runs in the background: the run
// writers (the group commit, the starts and ends batchers), the lease
// loop (renewal, recovery of runs whose owner died, the purge of the
// group commit's log), the relay of other processes' runs and the watch
// of their changes (see watchLoop). New starts nothing; call Start
// before the first run and Shutdown to stop. Starting a started service
// does nothing.
func (s *Service) Start() {
	s.runner.Start()
	s.relay.Start()
	s.watcher.Start(func(stop <-chan struct{}) {
		ctx, cancel := lifecycle.Context(stop)
		defer cancel()
		s.watchLoop(ctx)
	})
}

// Stop stops the lease loop and the watch of other processes' changes
// and waits for them; runs go on, but their leases are no longer renewed.
// Shutdown calls it once the runs have ended, and stops the rest.
func (s *Service) Stop() {
	s.watcher.Stop()
	s.runner.StopLeases()
}

// RenewLeases extends the lease of every run this process runs under its
// claim (see runner.RenewLeases); the lease loop calls it.
func (s *Service) RenewLeases(ctx context.Context) { s.runner.RenewLeases(ctx) }

// Recover ends every run whose lease expired (see runner.Recover) and
// returns how many it recovered; the lease loop calls it.
func (s *Service) Recover(ctx context.Context) int { return s.runner.Recover(ctx) }
