// Package peer is `threadline-bench peer`: the workload of PEER_WORKLOAD.md against
// Threadline, on a fresh database it creates, migrates and drops.
//
// What is measured, and how:
//   - turn_ms: in-process through engine.Service: StartRun (append the user
//     message under the current leaf, start the built-in model), then
//     FollowRun until the final snapshot, which the service publishes only
//     after the transaction writing the reply, the compacted event log and
//     the run's end has committed. Median over the fresh turns.
//   - http_turn_ms: POST /runs/stream on an in-process HTTP server on
//     127.0.0.1, reading and decoding every NDJSON line to the end of the
//     stream.
//   - bytes_per_turn: growth of the sum of pg_total_relation_size (heap,
//     TOAST, indexes, free space and visibility maps) over every table of the
//     bench database's public schema, during the fresh turns, divided by
//     them. File sizes grow when a page is added, not at a checkpoint, so no
//     CHECKPOINT is needed; dead row versions (the run row's update, the
//     thread row's updates, the live event log replaced by the compact one)
//     are counted as they occupy space until a VACUUM reuses it. The
//     tables are vacuumed once before the workload (see settle).
//   - get_state_ms: Service.Snapshot plus building the path to the head and
//     the repository (what GET /messages serialises), on a new Service with
//     an empty tree cache, so every checkpoint is read from Postgres.
//   - history_ms: GET /threads/{id}/checkpoints over HTTP, decoded, on a
//     server whose Service has an empty tree cache.
//   - fork_ms / edit_ms: in-process like turn_ms; after all repetitions of
//     an N, each one is read back from a snapshot of a new Service and
//     compared with what the run streamed.
package peer

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/threadline/threadline/api"
	"github.com/threadline/threadline/cmd/threadline-bench/internal/bench"
	"github.com/threadline/threadline/store"
	"github.com/threadline/threadline/thread/engine"
)

// The workload's constants (PEER_WORKLOAD.md).
const (
	peerReplyTokens = 200 // T: tokens per reply, 5 bytes each
	peerUserBytes   = 64  // bytes of ASCII per user message
	peerCaller      = "local"
	bigModelName    = "builtin-tokens-run"
)

const benchPeerUsage = `usage: threadline-bench peer [flags]

Runs the workload of PEER_WORKLOAD.md against Threadline: turns, forks,
edits, snapshots, history, bytes per turn and tokens/s, in-process and over
HTTP. It creates a fresh database (tl_bench_<pid>_<random>) on the Postgres
server of --database-url, migrates it, and drops it at the end, also on an
error or Ctrl-C. Without --database-url or $THREADLINE_DATABASE_URL it starts
(or reuses) the project's own cluster with deploy/pg.sh start.

Progress goes to stderr; the last line of stdout is one JSON object.

Flags:
`

type peerOptions struct {
	databaseURL string
	ns          []int
	reps        int
	freshTurns  int
	warmupTurns int
	bigTokens   int
	endTurns    int
	cpuProfile  string
	keepDB      bool
}

func parsePeerFlags(args []string, getenv func(string) string, stdout, stderr io.Writer) (peerOptions, error) {
	fs := flag.NewFlagSet("threadline-bench peer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o peerOptions
	var ns string
	var reps, fresh, warm, big, end int64
	fs.StringVar(&o.databaseURL, "database-url", getenv("THREADLINE_DATABASE_URL"),
		"Postgres URL of a database on the server to use (a maintenance database such as postgres); the user must be allowed to CREATE DATABASE. Empty: the project's own cluster (deploy/pg.sh start) ($THREADLINE_DATABASE_URL)")
	fs.StringVar(&ns, "n", "10,100,500", "comma-separated thread lengths N (turns) for the per-N figures")
	fs.Int64Var(&reps, "reps", 5, "repetitions per timing (the median is reported), 1..1000")
	fs.Int64Var(&fresh, "fresh-turns", 20, "turns on the fresh thread (turn_ms, bytes_per_turn)")
	fs.Int64Var(&warm, "warmup-turns", 3, "warm-up turns on another thread before the fresh turns (each of in-process and HTTP)")
	fs.Int64Var(&big, "tokens-per-s-run", 10000, "tokens of the one long run that measures tokens/s")
	fs.Int64Var(&end, "end-turns", 20, "turns appended at the end of each N thread (turn_end_ms, bytes_per_turn_end)")
	fs.BoolVar(&o.keepDB, "keep-database", false, "do not drop the bench's database at the end (for EXPLAIN and psql); drop it by hand")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole bench to this file (go tool pprof)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), benchPeerUsage)
		fs.PrintDefaults()
	}
	for _, a := range args {
		if a == "-h" || a == "-help" || a == "--help" {
			fs.SetOutput(stdout)
			fs.Usage()
			return o, flag.ErrHelp
		}
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("bench peer takes no arguments, got %q (see --help)", fs.Args())
	}
	for _, part := range strings.Split(ns, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		n, err := strconv.Atoi(part)
		if err != nil || n < 1 || n > 100000 {
			return o, fmt.Errorf("--n: %q is not a thread length between 1 and 100000", part)
		}
		if !slices.Contains(o.ns, n) {
			o.ns = append(o.ns, n)
		}
	}
	if len(o.ns) == 0 {
		return o, errors.New("--n needs at least one thread length, e.g. --n 10,100,500")
	}
	check := func(name string, v, lo, hi int64) error {
		if v < lo || v > hi {
			return fmt.Errorf("--%s must be between %d and %d, got %d", name, lo, hi, v)
		}
		return nil
	}
	if err := errors.Join(check("reps", reps, 1, 1000), check("fresh-turns", fresh, 1, 100000),
		check("warmup-turns", warm, 0, 100000), check("tokens-per-s-run", big, 1, 10000000),
		check("end-turns", end, 1, 100000)); err != nil {
		return o, err
	}
	o.reps, o.freshTurns, o.warmupTurns, o.bigTokens, o.endTurns = int(reps), int(fresh), int(warm), int(big), int(end)
	return o, nil
}

// peerBench is one run of the bench.
type peerBench struct {
	opt     peerOptions
	stderr  io.Writer
	st      *store.Store
	timed   *timedStore
	models  benchModels
	log     *slog.Logger
	svc     *engine.Service
	warm    string // base URL of the server of svc
	cold    string // base URL of the server whose Service is replaced before each cold read
	coldH   atomic.Pointer[api.Server]
	client  *http.Client
	msgSeq  int
	pgStats *pgx.Conn
	commits []float64 // every commit probe, ms
	closers []func()
}

// NResult is the per-N part of the result.
type NResult struct {
	GetStateMS      float64 `json:"get_state_ms"`
	GetStateWarmMS  float64 `json:"get_state_warm_ms"`
	HTTPGetStateMS  float64 `json:"http_get_state_ms"`
	HistoryMS       float64 `json:"history_ms"`
	HistoryWarmMS   float64 `json:"history_warm_ms"`
	ForkMS          float64 `json:"fork_ms"`
	EditMS          float64 `json:"edit_ms"`
	ForkPersistedOK bool    `json:"fork_persisted_ok"`
	// ForkEditBreakdown is the store calls of the forks and edits, per
	// fork or edit (count, ms), and their mean time.
	ForkEditBreakdown map[string]any `json:"fork_edit_breakdown"`
	EditPersistedOK   bool           `json:"edit_persisted_ok"`
	// CommitMS is this machine's durable commit at the time: a one-row
	// insert and commit right after each fork and each edit; median.
	CommitMS          float64  `json:"commit_ms"`
	ThreadStoredBytes int64    `json:"thread_stored_bytes"`
	ThreadRowBytes    int64    `json:"thread_row_bytes"`
	BuildTurnMS       float64  `json:"build_turn_ms"`
	TurnEndMS         float64  `json:"turn_end_ms"`
	BytesPerTurnEnd   float64  `json:"bytes_per_turn_end"`
	Checkpoints       int      `json:"checkpoints"`
	PersistProblems   []string `json:"persist_problems,omitempty"`
}

// Result is the JSON object the bench prints last.
type Result struct {
	TurnMS             float64            `json:"turn_ms"`
	HTTPTurnMS         float64            `json:"http_turn_ms"`
	BytesPerTurn       float64            `json:"bytes_per_turn"`
	RowBytesPerTurn    float64            `json:"row_bytes_per_turn"`
	BytesPerTurnTables map[string]float64 `json:"bytes_per_turn_tables"`
	TurnBreakdown      map[string]any     `json:"turn_breakdown"`
	TokensPerS         float64            `json:"tokens_per_s"`
	HTTPTokensPerS     float64            `json:"http_tokens_per_s"`
	// CommitMS is the median of every commit probe (NResult.CommitMS):
	// the share of turn, fork and edit times that is the disk's.
	CommitMS  float64             `json:"commit_ms"`
	ByN       map[string]*NResult `json:"by_n"`
	Peer      map[string]any      `json:"peer"`
	Targets   map[string]bool     `json:"targets"`
	Settings  map[string]any      `json:"settings"`
	Measured  map[string]string   `json:"measured"`
	Machine   bench.Machine       `json:"machine"`
	Postgres  string              `json:"postgres"`
	GoVersion string              `json:"go_version"`
	Commit    string              `json:"commit"`
	Database  string              `json:"database"`
	StartedAt string              `json:"started_at"`
	DurationS float64             `json:"duration_s"`
}

// Run runs `threadline-bench peer` with args: the peer workload on a fresh
// database it drops at the end; the result goes to stdout as one JSON line,
// progress to stderr. --help prints the settings and returns nil. It fails
// on bad flags, when no Postgres can be had or a database not created, and
// when a step of the workload fails or ctx ends.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	opt, err := parsePeerFlags(args, getenv, stdout, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("bench peer: %w", err)
	}
	stopProfile, err := bench.StartProfile(opt.cpuProfile)
	if err != nil {
		return fmt.Errorf("bench peer: %w", err)
	}
	defer stopProfile()
	started := time.Now()
	progress := func(format string, a ...any) {
		fmt.Fprintf(stderr, "bench peer: "+format+"\n", a...)
	}
	db, err := bench.ScratchDatabase(ctx, opt.databaseURL, "tl_bench", stderr, progress)
	if err != nil {
		return fmt.Errorf("bench peer: %w", err)
	}
	res := &Result{ByN: map[string]*NResult{}, Machine: bench.MachineInfo(), Database: db.Name,
		GoVersion: runtime.Version(), Commit: bench.GitCommit(), StartedAt: started.UTC().Format(time.RFC3339)}
	dbURL := db.URL
	b := &peerBench{opt: opt, stderr: stderr}
	defer func() {
		b.close()
		if opt.keepDB {
			progress("database %s kept (--keep-database): %s", db.Name, bench.RedactURL(dbURL))
			return
		}
		db.Drop()
	}()
	if err := b.open(ctx, dbURL); err != nil {
		return fmt.Errorf("bench peer: %w", err)
	}
	res.Postgres = bench.PGVersion(ctx, b.pgStats)
	if err := b.run(ctx, res, progress); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("bench peer: interrupted: %w", ctx.Err())
		}
		return fmt.Errorf("bench peer: %w", err)
	}
	res.DurationS = bench.Round(time.Since(started).Seconds(), 1)
	out, err := json.Marshal(res)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s\n", out)
	return err
}
