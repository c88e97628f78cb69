// Package agent is `threadline-bench agent`: what a tool step costs. It runs
// agent runs in-process on the real store (a fresh Postgres database) with
// an instant scripted model and an instant tool, so that what it measures
// is the service: the time between a tool's result and the next model
// call, the tokens per second of a multi-step run against a one-step run of
// the same tokens, and the bytes a tool step adds to the database.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/cmd/threadline-bench/internal/bench"
	"github.com/threadline/threadline/store"
	"github.com/threadline/threadline/stream"
	"github.com/threadline/threadline/thread"
)

const caller = "bench-agent"

type options struct {
	databaseURL         string
	runs, steps, tokens int
	warmup              int
}

// Result is the bench's one line of JSON.
type Result struct {
	Runs              int           `json:"runs"`
	Steps             int           `json:"tool_steps_per_run"`
	TokensPerStep     int           `json:"tokens_per_step"`
	StepOverheadP50MS float64       `json:"step_overhead_p50_ms"`
	StepOverheadP99MS float64       `json:"step_overhead_p99_ms"`
	AgentTokensPerS   float64       `json:"agent_tokens_per_s"`
	PlainTokensPerS   float64       `json:"plain_tokens_per_s"`
	TokensPerSRatio   float64       `json:"agent_to_plain_tokens_per_s"`
	AgentRunMS        float64       `json:"agent_run_ms_median"`
	PlainRunMS        float64       `json:"plain_run_ms_median"`
	BytesPerToolStep  float64       `json:"bytes_per_tool_step"`
	AgentBytesPerRun  float64       `json:"agent_bytes_per_run"`
	PlainBytesPerRun  float64       `json:"plain_bytes_per_run"`
	Machine           bench.Machine `json:"machine"`
	Postgres          string        `json:"postgres"`
	GoVersion         string        `json:"go_version"`
	Commit            string        `json:"commit"`
}

func parseFlags(args []string, getenv func(string) string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.databaseURL, "database-url", getenv("THREADLINE_DATABASE_URL"), "Postgres URL whose user may CREATE DATABASE ($THREADLINE_DATABASE_URL; empty: the project's own cluster)")
	fs.IntVar(&o.runs, "runs", 40, "measured runs of each kind")
	fs.IntVar(&o.warmup, "warmup", 5, "runs of each kind before measuring")
	fs.IntVar(&o.steps, "steps", 4, "tool steps per agent run (the run makes steps+1 model calls)")
	fs.IntVar(&o.tokens, "tokens", 50, "tokens per model call")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.runs < 1 || o.steps < 1 || o.tokens < 1 || o.warmup < 0 {
		return o, errors.New("--runs, --steps and --tokens must be at least 1, --warmup at least 0")
	}
	return o, nil
}

// Run runs `threadline-bench agent` with args on a fresh database it drops
// at the end and prints one JSON line to stdout. --help prints the settings
// and returns nil. It fails on bad flags, when no database can be had, and
// when a run does not succeed or ctx ends.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("bench agent: %w", err)
	}
	progress := func(format string, a ...any) { fmt.Fprintf(stderr, "bench agent: "+format+"\n", a...) }
	admin := o.databaseURL
	if admin == "" {
		progress("no --database-url or $THREADLINE_DATABASE_URL: starting the project's own cluster (deploy/pg.sh start)")
		if admin, err = bench.OwnCluster(ctx, stderr); err != nil {
			return fmt.Errorf("bench agent: %w", err)
		}
	}
	db, err := bench.TempDatabase(ctx, admin, "tl_bench_agent", progress)
	if err != nil {
		return fmt.Errorf("bench agent: %w", err)
	}
	defer db.Drop()
	res, err := measure(ctx, db.URL, o, progress)
	if err != nil {
		return fmt.Errorf("bench agent: %w", err)
	}
	out, err := json.Marshal(res)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s\n", out)
	return err
}

// rig is the service under measure and what reads its database.
type rig struct {
	svc   *thread.Service
	st    *store.Store
	stats *pgx.Conn
	marks *marks
}

func open(ctx context.Context, dbURL string, o options) (*rig, func(), error) {
	if err := store.MigrateUp(ctx, dbURL); err != nil {
		return nil, nil, err
	}
	st, err := store.Open(ctx, dbURL, 8)
	if err != nil {
		return nil, nil, err
	}
	stats, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	mk := newMarks()
	ms := models{agent: &script{agent: true, steps: o.steps, tokens: o.tokens, marks: mk}, plain: &script{steps: o.steps, tokens: o.tokens, marks: mk}}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc := thread.New(st, stream.New[thread.Event](1024), ms, st, thread.Config{Logger: log, Tools: timedTools{marks: mk}})
	closeAll := func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		svc.Shutdown(sctx)
		_ = stats.Close(sctx)
		st.Close()
	}
	return &rig{svc: svc, st: st, stats: stats, marks: mk}, closeAll, nil
}

// sample is one run: its key, how long it took, its tokens and stored bytes.
type sample struct {
	key     string
	elapsed time.Duration
	tokens  int
	bytes   int64
}

func measure(ctx context.Context, dbURL string, o options, progress func(string, ...any)) (*Result, error) {
	r, closeAll, err := open(ctx, dbURL, o)
	if err != nil {
		return nil, err
	}
	defer closeAll()
	var agent, plain []sample
	for i := range o.warmup + o.runs {
		// Interleaved, so that both kinds see the same machine.
		a, err := r.run(ctx, agentModel, fmt.Sprintf("agent-%d-%s", i, uuid.NewString()))
		if err != nil {
			return nil, err
		}
		p, err := r.run(ctx, plainModel, fmt.Sprintf("plain-%d-%s", i, uuid.NewString()))
		if err != nil {
			return nil, err
		}
		if i >= o.warmup {
			agent, plain = append(agent, a), append(plain, p)
		}
	}
	progress("%d agent runs of %d tool steps and %d plain runs measured", len(agent), o.steps, len(plain))
	return r.result(ctx, o, agent, plain), nil
}

// run starts one run of model on a new thread, follows it to its end and
// reads the bytes its thread holds.
func (r *rig) run(ctx context.Context, modelName, key string) (sample, error) {
	s := sample{key: key}
	tid := uuid.New()
	req := thread.RunRequest{
		Message: &thread.UserMessage{Content: []checkpoint.Part{{Type: "text", Text: key}}},
		Config:  thread.RunConfig{Model: modelName},
	}
	start := time.Now()
	run, _, err := r.svc.StartRun(ctx, caller, tid, req)
	if err != nil {
		return s, fmt.Errorf("start run: %w", err)
	}
	var final *thread.Snapshot
	err = r.svc.FollowRun(ctx, caller, run, 0, func(ev thread.Event, _ bool) error {
		switch {
		case ev.Type == thread.KindToken:
			s.tokens++
		case ev.Final():
			final = ev.Snapshot
		}
		return nil
	})
	s.elapsed = time.Since(start)
	if err != nil {
		return s, fmt.Errorf("follow run %s: %w", run.ID, err)
	}
	if final == nil || final.RunStatus != thread.RunSucceeded {
		return s, fmt.Errorf("run %s did not succeed (%v)", run.ID, final)
	}
	s.bytes, err = r.rowBytes(ctx, tid)
	return s, err
}

// rowBytes sums pg_column_size of a thread's live rows (see
// bench.ThreadRowBytes).
func (r *rig) rowBytes(ctx context.Context, threadID uuid.UUID) (int64, error) {
	return bench.ThreadRowBytes(ctx, r.stats, threadID)
}

func (r *rig) result(ctx context.Context, o options, agent, plain []sample) *Result {
	var gaps []float64
	for _, s := range agent {
		for _, g := range r.marks.gaps(s.key) {
			gaps = append(gaps, ms(g))
		}
	}
	slices.Sort(gaps)
	res := &Result{
		Runs: len(agent), Steps: o.steps, TokensPerStep: o.tokens,
		StepOverheadP50MS: bench.Round(quantile(gaps, 0.5), 3),
		StepOverheadP99MS: bench.Round(quantile(gaps, 0.99), 3),
		AgentTokensPerS:   bench.Round(rate(agent), 0),
		PlainTokensPerS:   bench.Round(rate(plain), 0),
		AgentRunMS:        bench.Round(medianMS(agent), 2),
		PlainRunMS:        bench.Round(medianMS(plain), 2),
		BytesPerToolStep:  bench.Round((meanBytes(agent)-meanBytes(plain))/float64(o.steps), 0),
		AgentBytesPerRun:  bench.Round(meanBytes(agent), 0),
		PlainBytesPerRun:  bench.Round(meanBytes(plain), 0),
		Machine:           bench.MachineInfo(),
		Postgres:          bench.PGVersion(ctx, r.stats),
		GoVersion:         runtime.Version(),
		Commit:            bench.GitCommit(),
	}
	if res.PlainTokensPerS > 0 {
		res.TokensPerSRatio = bench.Round(res.AgentTokensPerS/res.PlainTokensPerS, 2)
	}
	return res
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

// quantile of sorted xs (nearest rank); 0 when empty.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	i := int(q*float64(len(xs))+0.5) - 1
	return xs[min(max(i, 0), len(xs)-1)]
}

// rate is the tokens per second over all samples.
func rate(ss []sample) float64 {
	var tokens int
	var d time.Duration
	for _, s := range ss {
		tokens += s.tokens
		d += s.elapsed
	}
	if d <= 0 {
		return 0
	}
	return float64(tokens) / d.Seconds()
}

func medianMS(ss []sample) float64 {
	xs := make([]float64, len(ss))
	for i, s := range ss {
		xs[i] = ms(s.elapsed)
	}
	slices.Sort(xs)
	return quantile(xs, 0.5)
}

func meanBytes(ss []sample) float64 {
	var n int64
	for _, s := range ss {
		n += s.bytes
	}
	return float64(n) / float64(max(len(ss), 1))
}
