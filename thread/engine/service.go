package engine

import (
	"log/slog"
	"sync"
	"time"

	"github.com/threadline/threadline/thread/engine/internal/starter"

	"github.com/threadline/threadline/thread/engine/internal/runner"

	"github.com/google/uuid"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/engine/internal/follow"
	"github.com/threadline/threadline/thread/engine/internal/lifecycle"
	"github.com/threadline/threadline/thread/engine/internal/relay"
	"github.com/threadline/threadline/thread/engine/internal/trees"
	"go.opentelemetry.io/otel/trace"
)

// Config tunes a Service. Zero values take the defaults in parentheses.
type Config struct {
	// Owner names this process in run leases (a random id).
	Owner string
	// Lease is how long a run stays owned without renewal (15s).
	Lease time.Duration
	// TreeCache is how many thread trees stay in memory (1024).
	TreeCache int
	// Now is the clock (time.Now), truncated to microseconds as Postgres stores it.
	Now func() time.Time
	// Logger receives run lifecycle logs (slog.Default).
	Logger *slog.Logger
	// OnPublish, when set, is told how long each published batch of tokens
	// waited between the model producing its first token and its publication.
	OnPublish func(oldest time.Duration, tokens int)
	// OnRunEnd, when set, is told the final status of every run.
	OnRunEnd func(status thread.RunStatus)
	// TitleModel names the model that titles a thread after its first
	// exchange ("": the first words of the first user message).
	TitleModel string
	// StartLinger is how long the model runs before anything of its run is
	// written (2ms; negative: the start is written first). A run that ends
	// within it is written whole, with one commit; a longer one commits its
	// start when the linger ends, and its client's first event waits that
	// long. Nothing is published before it is durable either way; the
	// price is that a start the database refuses (another process changed
	// the thread) has cost up to a linger of the model's time.
	StartLinger time.Duration
	// TokenHold is how long a run's token (or reasoning) may wait for the
	// run's next one, to be committed, published and written to its
	// streams with it (0: at once). Every commit, publish and stream
	// write has a cost of its own, several times a token's; a run that
	// streams faster than one token a hold sends them two at a time, each
	// waiting at most the gap to the next, while a slower run (its last
	// commit a hold ago) sends each at once. Every other record (a tool
	// call, a snapshot, the end) goes at once and takes a waiting token
	// with it.
	TokenHold time.Duration
	// CommitPace is the least time between the starts of two group
	// commits of the runs' logs (0: none): each commit's transaction and
	// round trips then carry more runs' records, for a wait of up to the
	// pace.
	CommitPace time.Duration
	// BusyRuns is how many runs must be streaming in this process for
	// TokenHold and CommitPace to apply (0: however many): with fewer the
	// machine has the time to send every record at once.
	BusyRuns int
	// RetryMin and RetryMax bound the backoff between attempts at a run's
	// end write (50ms, 2s); the attempts stop after a lease.
	RetryMin, RetryMax time.Duration
	// Limits bound callers, threads and model calls (limits.go).
	Limits Limits
	// Tools, when set, are the server tools agent runs may call.
	Tools thread.Tools
	// Raw, when set, keeps what runs' providers and tools exchanged.
	Raw thread.RawSink
	// Wakeups, when set, brings other processes' writes here within
	// milliseconds (see Watch); nil: followers poll.
	Wakeups thread.Wakeups
	// RelayBuffer is how many batches a follower of another process's run
	// may fall behind that run's reader in this process before it is
	// dropped and reads the log itself (1024; see internal/follow).
	RelayBuffer int
	// Tracer, when set, records every run as OpenTelemetry spans (internal/runner);
	// nil: the noop tracer, which records nothing.
	Tracer trace.Tracer
	// SubagentMaxDepth bounds how deep the delegate tool's sub-agents
	// nest: a thread SubagentMaxDepth deep is not offered delegate (2).
	// SubagentMaxChildren bounds a run's delegate calls (10).
	SubagentMaxDepth    int
	SubagentMaxChildren int
}

// Service is the thread and run API over a Store, a Hub and Models: a
// façade over the starter (starting runs, internal/starter), the runner
// (running them, internal/runner) and the follower (following them,
// internal/follow), which share the tree cache and the registry of this
// process's runs.
type Service struct {
	store  thread.Store
	hub    thread.Hub
	models thread.Models
	atts   thread.Attachments
	cfg    Config
	log    *slog.Logger

	trees  *trees.Cache     // the threads' checkpoint trees
	active *runner.Registry // the runs this process owns
	runner *runner.Runner   // runs them
	// starter starts runs on the runner.
	starter *starter.Starter
	relay   *relay.Relay[thread.Event]
	// followers follows runs, this process's and others'.
	followers *follow.Follower

	// drained closes once Shutdown has ended every run of this process:
	// followers still open then follow other processes' runs, and end.
	drained   chan struct{}
	drainOnce sync.Once

	watcher lifecycle.Lifecycle // other processes' changes (watchLoop)
}

// New returns a Service; it starts nothing. Call Start before the first
// run (it starts the writers, lease renewal and recovery, the relay and
// the watch of other processes' changes) and Shutdown to stop.
func New(store thread.Store, hub thread.Hub, models thread.Models, atts thread.Attachments, cfg Config) *Service {
	cfg.defaults()
	s := &Service{store: store, hub: hub, models: models, atts: atts, cfg: cfg, log: cfg.Logger,
		trees: trees.New(store, cfg.TreeCache), active: runner.NewRegistry(), drained: make(chan struct{})}
	s.runner = runner.New(store, hub, models, s.trees, s.active, s.log, runner.Config{
		Owner: cfg.Owner, Lease: cfg.Lease, Now: cfg.Now, OnPublish: cfg.OnPublish, OnRunEnd: cfg.OnRunEnd,
		TitleModel: cfg.TitleModel, StartLinger: cfg.StartLinger, TokenHold: cfg.TokenHold, CommitPace: cfg.CommitPace, BusyRuns: cfg.BusyRuns, RetryMin: cfg.RetryMin, RetryMax: cfg.RetryMax,
		Tools: cfg.Tools, Raw: cfg.Raw, Tracer: cfg.Tracer,
		Subagents: delegator{s}, SubagentMaxDepth: cfg.SubagentMaxDepth, SubagentMaxChildren: cfg.SubagentMaxChildren})
	s.starter = starter.New(store, hub, models, atts, s.trees, s.active, s.runner, starter.Config{
		Owner: cfg.Owner, Lease: cfg.Lease, Now: cfg.Now, Limits: starter.Limits{
			RunsPerCaller: cfg.Limits.RunsPerCaller, RunsPerProcess: cfg.Limits.RunsPerProcess,
			MessagesPerThread: cfg.Limits.MessagesPerThread, InlineBytes: cfg.Limits.InlineBytes}})
	s.relay = follow.NewRelay(cfg.RelayBuffer, cfg.Wakeups, cfg.RetryMin, s.log)
	s.followers = &follow.Follower{Store: store, Hub: hub, Relay: s.relay, Trees: s.trees, Local: s.active, Wakeups: cfg.Wakeups,
		RetryMin: cfg.RetryMin, RetryMax: cfg.RetryMax, PageBytes: cfg.Limits.LogPageBytes, Drained: s.drained}
	return s
}

// defaults sets the zero values of c to their defaults.
func (c *Config) defaults() {
	if c.Owner == "" {
		c.Owner = uuid.NewString()
	}
	if c.Lease <= 0 {
		c.Lease = 15 * time.Second
	}
	if c.TreeCache <= 0 {
		c.TreeCache = 1024
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.StartLinger == 0 {
		c.StartLinger = 2 * time.Millisecond
	}
	if c.RetryMin <= 0 {
		c.RetryMin = 50 * time.Millisecond
	}
	if c.RetryMax < c.RetryMin {
		c.RetryMax = max(2*time.Second, c.RetryMin)
	}
	if c.RelayBuffer <= 0 {
		c.RelayBuffer = 1024
	}
	if c.SubagentMaxDepth <= 0 {
		c.SubagentMaxDepth = 2
	}
	if c.SubagentMaxChildren <= 0 {
		c.SubagentMaxChildren = 10
	}
	c.Limits.defaults()
}

// Models returns the model registry.
func (s *Service) Models() thread.Models { return s.models }

func (s *Service) now() time.Time { return s.cfg.Now().UTC().Truncate(time.Microsecond) }
