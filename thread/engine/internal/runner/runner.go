// Package runner runs runs: a run's start and its linger, the turn and
// the agent loop, the log writer side of the group commit, the end and
// its retries, lease renewal and the recovery of runs whose owner died.
// A Runner holds its dependencies as fields (the store, the hub, the
// models, the tree cache, the registry of this process's runs) and never
// points back at the engine that drives it.
package runner

import (
	"context"
	"log/slog"
	"time"

	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/engine/internal/batch"
	"github.com/threadline/threadline/thread/engine/internal/commit"
	"github.com/threadline/threadline/thread/engine/internal/lifecycle"
	"github.com/threadline/threadline/thread/engine/internal/trees"
	"go.opentelemetry.io/otel/trace"
)

// Config tunes a Runner; the engine's Config sets it, defaults applied.
type Config struct {
	Owner       string
	Lease       time.Duration
	Now         func() time.Time
	OnPublish   func(oldest time.Duration, tokens int)
	OnRunEnd    func(status thread.RunStatus)
	TitleModel  string
	StartLinger time.Duration
	TokenHold   time.Duration // see engine.Config.TokenHold
	CommitPace  time.Duration // see engine.Config.CommitPace
	BusyRuns    int           // see engine.Config.BusyRuns
	RetryMin    time.Duration
	RetryMax    time.Duration
	Tools       thread.Tools
	Raw         thread.RawSink
	Tracer      trace.Tracer
	// Subagents, when set, runs the delegate tool's sub-agents; a
	// sub-agent's thread is at most SubagentMaxDepth deep and a run
	// starts at most SubagentMaxChildren.
	Subagents           Delegator
	SubagentMaxDepth    int
	SubagentMaxChildren int
}

// Runner runs this process's runs.
type Runner struct {
	store   thread.Store
	hub     thread.Hub
	models  thread.Models
	trees   *trees.Cache
	active  *Registry
	cfg     Config
	log     *slog.Logger
	commits *committer
	starts  *batch.Batcher[startReq]
	ends    *batch.Batcher[thread.RunFinish]

	// abandonCtx ends when Abandon is called (the shutdown's grace is
	// over): title calls stop and failed end writes are no longer retried.
	abandonCtx context.Context
	abandonNow context.CancelFunc

	leases lifecycle.Lifecycle // renewal, recovery and the log's purge (leaseLoop)

	subs subagents
}

// New returns a Runner of the runs in active; it starts nothing (Start).
func New(store thread.Store, hub thread.Hub, models thread.Models, tc *trees.Cache, active *Registry, log *slog.Logger, cfg Config) *Runner {
	s := &Runner{store: store, hub: hub, models: models, trees: tc, active: active, cfg: cfg, log: log}
	s.abandonCtx, s.abandonNow = context.WithCancel(context.Background())
	s.commits = newCommitter(s)
	s.commits.SetCoalesce(commit.Coalesce{Hold: cfg.TokenHold, Pace: cfg.CommitPace, From: cfg.BusyRuns})
	s.starts = newStarts(store)
	s.ends = newEnds(store)
	return s
}

// Start starts the writers (the group commit, the starts and ends
// batchers) and the lease loop: renewal, recovery of runs whose owner
// died and the purge of the group commit's log. Starting a started
// Runner does nothing.
func (s *Runner) Start() {
	s.StartWriters()
	s.leases.Start(func(stop <-chan struct{}) {
		ctx, cancel := lifecycle.Context(stop)
		defer cancel()
		s.leaseLoop(ctx)
	})
}

// StartWriters starts the writers alone, without the lease loop: for a
// caller that drives renewal and recovery by hand (tests).
func (s *Runner) StartWriters() {
	s.commits.Start()
	s.starts.Start()
	s.ends.Start()
}

// StopLeases stops the lease loop and waits for it: runs go on, but their
// leases are no longer renewed.
func (s *Runner) StopLeases() { s.leases.Stop() }

// Drain refuses new runs, lets running ones finish until ctx ends, then
// cancels the rest (and any title call) and waits for their final
// writes, which are no longer retried then.
func (s *Runner) Drain(ctx context.Context) {
	s.active.Close()
	done := make(chan struct{})
	go func() { s.active.done.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		s.abandonNow()
		for _, ar := range s.active.All() {
			ar.Cancel(thread.RunCancelled)
		}
		<-done
	}
}

// Stop stops the lease loop and the writers; call it once the runs have
// ended (Drain).
func (s *Runner) Stop() {
	s.leases.Stop()
	s.commits.Stop()
	s.starts.Stop()
	s.ends.Stop()
}

// PendingStarts is how many starts wait for the starts batcher's next write.
func (s *Runner) PendingStarts() int { return s.starts.Waiting() }

// PendingEnds is how many run ends wait for the ends batcher's next write.
func (s *Runner) PendingEnds() int { return s.ends.Waiting() }

func (s *Runner) now() time.Time { return s.cfg.Now().UTC().Truncate(time.Microsecond) }
