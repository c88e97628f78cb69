// Package peer is `threadline-bench peer`: the workload of PEER_WORKLOAD.md against
// Threadline, on a fresh database it creates, migrates and drops.
//
// What is measured, and how:
//   - turn_ms: in-process through thread.Service: StartRun (append the user
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
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/threadline/threadline/api"
	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/cmd/threadline-bench/internal/bench"
	"github.com/threadline/threadline/model"
	"github.com/threadline/threadline/store"
	"github.com/threadline/threadline/stream"
	"github.com/threadline/threadline/thread"
)

// The workload's constants (PEER_WORKLOAD.md).
const (
	peerReplyTokens = 200 // T: tokens per reply, 5 bytes each
	peerUserBytes   = 64  // bytes of ASCII per user message
	peerCaller      = "local"
	bigModelName    = "builtin-tokens-run"
)

// peerFigures are the peer's figures from PEER_WORKLOAD.md (LangGraph JS
// 1.7.3 with @langchain/langgraph-checkpoint-postgres 1.0.5; 2 cores,
// PostgreSQL 15, one run, 2026-11-22).
var peerFigures = struct {
	TurnMS       float64
	BytesPerTurn float64
	TokensPerS   float64
	ByN          map[int]map[string]any
}{
	TurnMS: 12.2, BytesPerTurn: 40550, TokensPerS: 37900,
	ByN: map[int]map[string]any{
		10: {"get_state_ms": 7.2, "history_ms": 46.0, "fork_ms": 7.1, "edit_ms": 7.6, "turn_end_ms": 12.3,
			"bytes_per_turn_end": 21e3, "fork_persisted_ok": false, "edit_persisted_ok": false},
		100: {"get_state_ms": 25.5, "history_ms": 3376.0, "fork_ms": 27.3, "edit_ms": 27.5, "turn_end_ms": 48.8,
			"bytes_per_turn_end": 302e3, "fork_persisted_ok": false, "edit_persisted_ok": false},
		500: {"get_state_ms": 141.0, "fork_ms": 136.0, "edit_ms": 130.0, "turn_end_ms": 199.0,
			"bytes_per_turn_end": 1.5e6, "thread_stored_bytes": 374e6, "fork_persisted_ok": false, "edit_persisted_ok": false},
	},
}

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

// benchModels is the model registry of the bench: the built-in model with
// T tokens per reply, and the long run's model.
type benchModels struct {
	reply, big *model.Builtin
}

func (m benchModels) Resolve(name string) (thread.Model, string, error) {
	switch name {
	case "", model.BuiltinName:
		return m.reply, model.BuiltinName, nil
	case bigModelName:
		return m.big, bigModelName, nil
	}
	return nil, "", checkpoint.Errorf(checkpoint.EInvalid, "unknown model %q", name)
}

func (m benchModels) List() []thread.ModelInfo {
	return []thread.ModelInfo{
		{Name: model.BuiltinName, Provider: "builtin", Model: model.BuiltinName, Configured: true, Default: true},
		{Name: bigModelName, Provider: "builtin", Model: model.BuiltinName, Configured: true},
	}
}

func (benchModels) ContextBudget(string) int { return 0 }

// peerBench is one run of the bench.
type peerBench struct {
	opt     peerOptions
	stderr  io.Writer
	st      *store.Store
	timed   *timedStore
	models  benchModels
	log     *slog.Logger
	svc     *thread.Service
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
	admin := opt.databaseURL
	if admin == "" {
		progress("no --database-url or $THREADLINE_DATABASE_URL: starting the project's own cluster (deploy/pg.sh start)")
		admin, err = bench.OwnCluster(ctx, stderr)
		if err != nil {
			return fmt.Errorf("bench peer: %w; set THREADLINE_DATABASE_URL (or --database-url) to a Postgres URL whose user may CREATE DATABASE", err)
		}
	}
	aconn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return fmt.Errorf("bench peer: connect to %s: %w (set THREADLINE_DATABASE_URL or --database-url)", bench.RedactURL(admin), err)
	}
	defer aconn.Close(context.WithoutCancel(ctx))
	res := &Result{ByN: map[string]*NResult{}, Machine: bench.MachineInfo(), Postgres: bench.PGVersion(ctx, aconn),
		GoVersion: runtime.Version(), Commit: bench.GitCommit(), StartedAt: started.UTC().Format(time.RFC3339)}
	name := fmt.Sprintf("tl_bench_%d_%08d", os.Getpid(), rand.IntN(1e8))
	res.Database = name
	if _, err := aconn.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("bench peer: create database %s: %w", name, err)
	}
	progress("database %s created on %s", name, bench.RedactURL(admin))
	dbURL := store.WithDatabase(admin, name)
	b := &peerBench{opt: opt, stderr: stderr}
	defer func() {
		b.close()
		if opt.keepDB {
			progress("database %s kept (--keep-database): %s", name, bench.RedactURL(dbURL))
			return
		}
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if _, derr := aconn.Exec(dctx, `DROP DATABASE IF EXISTS `+pgx.Identifier{name}.Sanitize()+` WITH (FORCE)`); derr != nil {
			progress("could not drop database %s: %v (drop it by hand)", name, derr)
		} else {
			progress("database %s dropped", name)
		}
	}()
	if err := b.open(ctx, dbURL); err != nil {
		return fmt.Errorf("bench peer: %w", err)
	}
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

// open migrates the database and starts the service and two HTTP servers.
func (b *peerBench) open(ctx context.Context, dbURL string) error {
	if err := store.MigrateUp(ctx, dbURL); err != nil {
		return err
	}
	st, err := store.Open(ctx, dbURL, 16)
	if err != nil {
		return err
	}
	b.st = st
	b.timed = &timedStore{Store: st, ops: map[string]*opStat{}}
	if b.pgStats, err = pgx.Connect(ctx, dbURL); err != nil {
		return err
	}
	// The commit probe's table lives outside the public schema, so the
	// size figures (sizeSQL) do not count it.
	if _, err := b.pgStats.Exec(ctx, `CREATE SCHEMA bench_probe; CREATE TABLE bench_probe.commits (x int)`); err != nil {
		return fmt.Errorf("commit probe table: %w", err)
	}
	if err := b.settle(ctx); err != nil {
		return err
	}
	b.log = slog.New(slog.NewTextHandler(b.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	b.models = benchModels{reply: model.NewBuiltin(peerReplyTokens, 0), big: model.NewBuiltin(b.opt.bigTokens, 0)}
	b.svc = b.newService()
	// Leases and the log's purge, stopped (closers) before the store
	// closes: a purge on a closed pool would log an error.
	runCtx, stopRun := context.WithCancel(context.Background())
	runDone := make(chan struct{})
	go func() { defer close(runDone); b.svc.Run(runCtx) }()
	b.closers = append(b.closers, func() { stopRun(); <-runDone })
	warm := api.New(b.svc, api.Config{Logger: b.log, Attachments: st, Ready: st.Ping})
	b.coldH.Store(b.newColdServer())
	cold := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { b.coldH.Load().ServeHTTP(w, r) })
	for _, h := range []struct {
		h    http.Handler
		base *string
	}{{warm, &b.warm}, {cold, &b.cold}} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return fmt.Errorf("listen: %w", err)
		}
		srv := &http.Server{Handler: h.h, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		*h.base = "http://" + ln.Addr().String()
		b.closers = append(b.closers, func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
		})
	}
	b.client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true}}
	return nil
}

func (b *peerBench) close() {
	for i := len(b.closers) - 1; i >= 0; i-- {
		b.closers[i]()
	}
	b.closers = nil
	if b.svc != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		b.svc.Shutdown(ctx)
		cancel()
	}
	if b.client != nil {
		b.client.CloseIdleConnections()
	}
	if b.pgStats != nil {
		_ = b.pgStats.Close(context.Background())
	}
	if b.st != nil {
		b.st.Close()
	}
}

// newService returns a Service with an empty tree cache on the bench's store.
func (b *peerBench) newService() *thread.Service {
	return thread.New(b.timed, stream.New[thread.Event](1024), b.models, b.st, thread.Config{Logger: b.log})
}

func (b *peerBench) newColdServer() *api.Server {
	return api.New(b.newService(), api.Config{Logger: b.log, Attachments: b.st, Registry: prometheus.NewRegistry()})
}

// userText returns the next user message: exactly 64 bytes of ASCII.
func (b *peerBench) userText(kind string) string {
	b.msgSeq++
	s := fmt.Sprintf("%s %06d:", kind, b.msgSeq)
	r := rand.New(rand.NewPCG(uint64(b.msgSeq), 7))
	var sb strings.Builder
	sb.WriteString(s)
	for sb.Len() < peerUserBytes {
		if r.IntN(6) == 0 {
			sb.WriteByte(' ')
		} else {
			sb.WriteByte(byte('a' + r.IntN(26)))
		}
	}
	return sb.String()
}

// runResult is what one in-process run streamed.
type runResult struct {
	run     *thread.Run
	elapsed time.Duration
	text    string // the token texts, concatenated
	tokens  int
	first   *thread.Snapshot
	final   *thread.Snapshot
	badIDs  int // token events naming another message
}

// runInProc starts a run and follows it to its final snapshot.
func (b *peerBench) runInProc(ctx context.Context, threadID uuid.UUID, req thread.RunRequest) (runResult, error) {
	var res runResult
	var sb strings.Builder
	var errText string
	start := time.Now()
	r, _, err := b.svc.StartRun(ctx, peerCaller, threadID, req)
	if err != nil {
		return res, fmt.Errorf("start run: %w", err)
	}
	err = b.svc.FollowRun(ctx, peerCaller, r, 0, func(ev thread.Event, _ bool) error {
		switch ev.Type {
		case thread.KindToken:
			res.tokens++
			sb.WriteString(ev.Text)
			if ev.MessageID != r.MessageID {
				res.badIDs++
			}
		case thread.KindSnapshot:
			if ev.Final() {
				res.final = ev.Snapshot
			} else if res.first == nil {
				res.first = ev.Snapshot
			}
		case thread.KindError:
			errText = ev.Code + ": " + ev.Text
		}
		return nil
	})
	res.elapsed = time.Since(start)
	res.run, res.text = r, sb.String()
	if err != nil {
		return res, fmt.Errorf("follow run %s: %w", r.ID, err)
	}
	if res.final == nil {
		return res, fmt.Errorf("run %s: the stream ended without a final snapshot", r.ID)
	}
	if res.final.RunStatus != thread.RunSucceeded {
		return res, fmt.Errorf("run %s ended %s %s", r.ID, res.final.RunStatus, errText)
	}
	return res, nil
}

// turn appends a user message under parent and runs the model.
func (b *peerBench) turn(ctx context.Context, threadID, parent uuid.UUID) (runResult, error) {
	return b.runInProc(ctx, threadID, thread.RunRequest{
		Message:  &thread.UserMessage{Content: []checkpoint.Part{{Type: "text", Text: b.userText("turn")}}},
		ParentID: parent,
	})
}

// wireEvent is an NDJSON event as a client decodes it.
type wireEvent struct {
	Type              string `json:"type"`
	RunID             string `json:"run_id"`
	Sequence          int64  `json:"sequence"`
	MessageID         string `json:"message_id"`
	Text              string `json:"text"`
	Error             string `json:"error"`
	Code              string `json:"code"`
	RunStatus         string `json:"run_status"`
	MessageRepository *struct {
		HeadID   *string           `json:"headId"`
		Messages []json.RawMessage `json:"messages"`
	} `json:"messageRepository"`
}

type httpRunResult struct {
	elapsed  time.Duration
	tokens   int
	headID   uuid.UUID
	finalOK  bool
	lastSeq  int64
	gapFound bool
}

// runHTTP posts a run and reads its NDJSON stream to the end.
func (b *peerBench) runHTTP(ctx context.Context, threadID uuid.UUID, body map[string]any) (httpRunResult, error) {
	var res httpRunResult
	data, err := json.Marshal(body)
	if err != nil {
		return res, err
	}
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.warm+"/api/v1/threads/"+threadID.String()+"/runs/stream", bytes.NewReader(data))
	if err != nil {
		return res, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := b.client.Do(req)
	if err != nil {
		return res, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return res, fmt.Errorf("POST runs/stream: %s: %s", resp.Status, msg)
	}
	dec := json.NewDecoder(resp.Body)
	for {
		var ev wireEvent
		if err := dec.Decode(&ev); err == io.EOF {
			break
		} else if err != nil {
			return res, fmt.Errorf("read stream: %w", err)
		}
		if ev.Sequence != res.lastSeq+1 {
			res.gapFound = true
		}
		res.lastSeq = ev.Sequence
		switch ev.Type {
		case thread.KindToken:
			res.tokens++
		case thread.KindSnapshot:
			if res.headID == uuid.Nil && ev.MessageRepository != nil && ev.MessageRepository.HeadID != nil {
				res.headID, _ = uuid.Parse(*ev.MessageRepository.HeadID)
			}
			if ev.RunStatus != string(thread.RunRunning) {
				if ev.RunStatus != string(thread.RunSucceeded) {
					return res, fmt.Errorf("run ended %s", ev.RunStatus)
				}
				res.finalOK = true
			}
		case thread.KindError:
			return res, fmt.Errorf("run failed: %s: %s", ev.Code, ev.Error)
		}
	}
	res.elapsed = time.Since(start)
	if !res.finalOK {
		return res, errors.New("the stream ended without a final snapshot")
	}
	if res.gapFound {
		return res, errors.New("the stream's sequences have a gap or repeat")
	}
	return res, nil
}

func (b *peerBench) httpTurn(ctx context.Context, threadID, parent uuid.UUID) (httpRunResult, error) {
	body := map[string]any{"message": map[string]any{"content": b.userText("http")}, "parent_message_id": nil}
	if parent != uuid.Nil {
		body["parent_message_id"] = parent.String()
	}
	return b.runHTTP(ctx, threadID, body)
}

// getJSON fetches a URL and decodes its JSON body into v.
func (b *peerBench) getJSON(ctx context.Context, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := b.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("GET %s: %s: %s", u, resp.Status, msg)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	return nil
}

// sizeSQL sums pg_total_relation_size over every table of the public schema.
const sizeSQL = `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c
	JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')`

// tableSizes returns pg_total_relation_size of every table of the public schema.
func (b *peerBench) tableSizes(ctx context.Context) (map[string]int64, error) {
	rows, err := b.pgStats.Query(ctx, `SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')`)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for rows.Next() {
		var name string
		var size int64
		if err := rows.Scan(&name, &size); err != nil {
			rows.Close()
			return nil, err
		}
		out[name] = size
	}
	return out, rows.Err()
}

// probeCommit times a one-row insert and its durable commit, alone, on
// the bench's own connection: what one commit costs on this machine now.
func (b *peerBench) probeCommit(ctx context.Context) (float64, error) {
	t0 := time.Now()
	if _, err := b.pgStats.Exec(ctx, `INSERT INTO bench_probe.commits VALUES (1)`); err != nil {
		return 0, fmt.Errorf("commit probe: %w", err)
	}
	return ms(time.Since(t0)), nil
}

// settle vacuums every table of the public schema, so that the workload
// starts on tables as small as a fresh database's. store.Open warms its
// connections concurrently, each with a turn it rolls back; on the empty
// tables those inserts can contend for the extension lock, and Postgres
// then adds up to 20 pages per waiter at once. Without this, 1 run in 11
// started with 48 such pages, its 20 fresh turns fitted in them and
// bytes_per_turn read 0. VACUUM removes the rolled-back rows and truncates
// the empty pages.
func (b *peerBench) settle(ctx context.Context) error {
	rows, err := b.pgStats.Query(ctx, `SELECT quote_ident(c.relname) FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind = 'r' ORDER BY 1`)
	if err != nil {
		return fmt.Errorf("settle: %w", err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("settle: %w", err)
	}
	if len(tables) == 0 {
		return nil
	}
	if _, err := b.pgStats.Exec(ctx, "VACUUM "+strings.Join(tables, ", ")); err != nil {
		return fmt.Errorf("settle: %w", err)
	}
	return nil
}

func (b *peerBench) totalSize(ctx context.Context) (int64, error) {
	var n int64
	err := b.pgStats.QueryRow(ctx, sizeSQL).Scan(&n)
	return n, err
}

// rowBytes sums pg_column_size of the live rows that belong to a thread:
// its row, checkpoints, runs and run event log (no indexes, page overhead
// or dead row versions).
func (b *peerBench) rowBytes(ctx context.Context, threadID uuid.UUID) (int64, error) {
	var n int64
	err := b.pgStats.QueryRow(ctx, `SELECT
		(SELECT coalesce(sum(pg_column_size(t.*)), 0) FROM threads t WHERE t.id = $1) +
		(SELECT coalesce(sum(pg_column_size(c.*)), 0) FROM checkpoints c WHERE c.thread_id = $1) +
		(SELECT coalesce(sum(pg_column_size(r.*)), 0) FROM runs r WHERE r.thread_id = $1) +
		(SELECT coalesce(sum(pg_column_size(e.*)), 0) FROM run_events e JOIN runs r ON r.id = e.run_id WHERE r.thread_id = $1)`,
		threadID).Scan(&n)
	return n, err
}

func (b *peerBench) run(ctx context.Context, res *Result, progress func(string, ...any)) error {
	o := b.opt
	res.Settings = map[string]any{
		"reply_tokens": peerReplyTokens, "token_bytes": 5, "user_message_bytes": peerUserBytes, "model_delay": "0",
		"fresh_turns": o.freshTurns, "warmup_turns": o.warmupTurns, "reps": o.reps, "tokens_per_s_run": o.bigTokens,
		"end_turns": o.endTurns, "n": o.ns, "caller": peerCaller,
	}
	res.Measured = map[string]string{
		"turn_ms":             "in-process thread.Service: StartRun (user message under the current leaf) + FollowRun to the final snapshot, which is published after the reply, the compacted event log and the run's end are committed; median of the fresh turns",
		"http_turn_ms":        "POST /api/v1/threads/{id}/runs/stream on an in-process server on 127.0.0.1, every NDJSON line decoded, to the end of the stream; median of the fresh turns",
		"bytes_per_turn":      "growth of sum(pg_total_relation_size) over every table of the bench database (threads, checkpoints, runs, run_events, attachments, schema_migrations: heap, TOAST, indexes, FSM/VM) during the fresh turns, divided by them; the tables are vacuumed once before the workload, as the store's connection warm-ups leave rolled-back rows and, when they contend, pages added at once; dead row versions of updated rows and of the replaced live event log count until autovacuum (left at the server's settings) makes their space reusable; sizes move in 8 KiB pages, so a short window is coarse and can even shrink when autovacuum truncates a table (file sizes change when pages are added, so no CHECKPOINT is needed)",
		"row_bytes_per_turn":  "sum of pg_column_size of the fresh thread's live rows (thread, checkpoints, runs, run_events) divided by the turns: the data itself, without indexes, page overhead or dead versions",
		"tokens_per_s":        "one run of tokens_per_s_run tokens in-process, token events counted at the FollowRun consumer, from StartRun to the end of the stream; median of reps runs",
		"http_tokens_per_s":   "the same over HTTP, every NDJSON line decoded by the client; median of reps runs",
		"get_state_ms":        "in-process Service.Snapshot + Export (path to the head and the whole repository, what GET /messages serialises) on a new Service with an empty tree cache, so every checkpoint is read from Postgres; median of reps",
		"get_state_warm_ms":   "the same on the bench's long-lived Service (tree cache warm: two small queries)",
		"http_get_state_ms":   "GET /messages over HTTP, decoded, on a server with an empty tree cache",
		"history_ms":          "GET /checkpoints over HTTP (the complete checkpoint tree), decoded, on a server with an empty tree cache; median of reps",
		"history_warm_ms":     "the same on the server with the warm tree cache",
		"fork_ms":             "in-process regenerate of assistant reply mid = ceil(N/2) (parent = the user message above it, source = the reply) to the final snapshot; median of reps (each adds a sibling)",
		"edit_ms":             "in-process edit of user message mid (parent = its parent, source = it), the model answers, to the final snapshot; median of reps",
		"commit_ms":           "this machine's durable commit at the time: a one-row INSERT and its commit on an idle connection (its own table, outside the sizes), right after each fork and each edit; median (per N in by_n, over all N at the top). Every turn, fork and edit includes one such commit: the peer's figures did too, on a machine whose commit time PEER_WORKLOAD.md does not give",
		"persisted_ok":        "each fork/edit is read back, after all repetitions of its N (untimed), from a snapshot of a new Service (from Postgres) and compared with the stream: reply id, text (also equal to the built-in model's text for that prompt), parent ids, role, status, run id, the edited user message's text and parent, and the head path ending at the new reply, with the head the thread stored right after that run",
		"thread_stored_bytes": "growth of sum(pg_total_relation_size) while the N thread was built (N turns); thread_row_bytes: its live rows as row_bytes_per_turn",
		"turn_end_ms":         "in-process turn appended under the N thread's main leaf (after the forks and edits); median of end_turns turns; bytes_per_turn_end: size growth over those turns divided by them",
	}

	// Warm-up: in-process turns on one thread.
	warmID := uuid.New()
	leaf := uuid.Nil
	var warmMS []float64
	for i := 0; i < o.warmupTurns; i++ {
		r, err := b.turn(ctx, warmID, leaf)
		if err != nil {
			return fmt.Errorf("warm-up turn: %w", err)
		}
		leaf = r.run.MessageID
		warmMS = append(warmMS, ms(r.elapsed))
	}
	progress("warm-up: %d in-process turns on another thread (%s ms)", o.warmupTurns, fmtList(warmMS))

	// Fresh thread: turn_ms and bytes_per_turn.
	freshID := uuid.New()
	before, err := b.totalSize(ctx)
	if err != nil {
		return err
	}
	tablesBefore, err := b.tableSizes(ctx)
	if err != nil {
		return err
	}
	leaf = uuid.Nil
	var turnMS []float64
	b.timed.reset()
	connsBefore := b.st.Pool().Stat().NewConnsCount()
	for i := 0; i < o.freshTurns; i++ {
		r, err := b.turn(ctx, freshID, leaf)
		if err != nil {
			return fmt.Errorf("fresh turn %d: %w", i+1, err)
		}
		if r.tokens != peerReplyTokens || len(r.text) != peerReplyTokens*5 {
			return fmt.Errorf("fresh turn %d streamed %d tokens (%d bytes), want %d tokens of 5 bytes", i+1, r.tokens, len(r.text), peerReplyTokens)
		}
		leaf = r.run.MessageID
		turnMS = append(turnMS, ms(r.elapsed))
	}
	res.TurnBreakdown = b.timed.perTurn(o.freshTurns, sum(turnMS))
	res.TurnBreakdown["new_db_conns"] = float64(b.st.Pool().Stat().NewConnsCount() - connsBefore)
	after, err := b.totalSize(ctx)
	if err != nil {
		return err
	}
	rows, err := b.rowBytes(ctx, freshID)
	if err != nil {
		return err
	}
	tablesAfter, err := b.tableSizes(ctx)
	if err != nil {
		return err
	}
	res.BytesPerTurnTables = map[string]float64{}
	for name, size := range tablesAfter {
		if d := size - tablesBefore[name]; d != 0 {
			res.BytesPerTurnTables[name] = bench.Round(float64(d)/float64(o.freshTurns), 1)
		}
	}
	res.TurnMS = bench.Round(median(turnMS), 3)
	res.BytesPerTurn = bench.Round(float64(after-before)/float64(o.freshTurns), 1)
	res.RowBytesPerTurn = bench.Round(float64(rows)/float64(o.freshTurns), 1)
	progress("fresh thread, in-process: %d turns, turn_ms median %.3f (%s ms); bytes_per_turn %.0f (total size %d -> %d); row_bytes_per_turn %.0f",
		o.freshTurns, res.TurnMS, fmtList(turnMS), res.BytesPerTurn, before, after, res.RowBytesPerTurn)
	progress("fresh thread, in-process: bytes_per_turn by table (heap, TOAST and indexes): %v", res.BytesPerTurnTables)
	progress("fresh thread, in-process: store calls per turn (count, ms): %s", fmtBreakdown(res.TurnBreakdown))

	// Fresh thread over HTTP, after warm-up turns over HTTP on another thread.
	hwarm := uuid.New()
	leaf = uuid.Nil
	for i := 0; i < o.warmupTurns; i++ {
		r, err := b.httpTurn(ctx, hwarm, leaf)
		if err != nil {
			return fmt.Errorf("HTTP warm-up turn: %w", err)
		}
		leaf = r.headID
	}
	hfresh := uuid.New()
	leaf = uuid.Nil
	var httpMS []float64
	for i := 0; i < o.freshTurns; i++ {
		r, err := b.httpTurn(ctx, hfresh, leaf)
		if err != nil {
			return fmt.Errorf("HTTP fresh turn %d: %w", i+1, err)
		}
		if r.tokens != peerReplyTokens {
			return fmt.Errorf("HTTP fresh turn %d streamed %d tokens, want %d", i+1, r.tokens, peerReplyTokens)
		}
		leaf = r.headID
		httpMS = append(httpMS, ms(r.elapsed))
	}
	res.HTTPTurnMS = bench.Round(median(httpMS), 3)
	progress("fresh thread, HTTP: %d turns, http_turn_ms median %.3f (min %.3f, max %.3f)", o.freshTurns, res.HTTPTurnMS, slices.Min(httpMS), slices.Max(httpMS))

	// tokens/s: one long run, in-process and over HTTP.
	var tps, htps []float64
	for i := 0; i < o.reps; i++ {
		r, err := b.runInProc(ctx, uuid.New(), thread.RunRequest{
			Message: &thread.UserMessage{Content: []checkpoint.Part{{Type: "text", Text: b.userText("long")}}},
			Config:  thread.RunConfig{Model: bigModelName},
		})
		if err != nil {
			return fmt.Errorf("tokens/s run: %w", err)
		}
		if r.tokens != o.bigTokens || r.badIDs > 0 {
			return fmt.Errorf("tokens/s run: %d tokens (%d naming another message), want %d", r.tokens, r.badIDs, o.bigTokens)
		}
		tps = append(tps, float64(r.tokens)/r.elapsed.Seconds())
		h, err := b.runHTTP(ctx, uuid.New(), map[string]any{
			"message": map[string]any{"content": b.userText("long")}, "run_config": map[string]any{"model": bigModelName}})
		if err != nil {
			return fmt.Errorf("HTTP tokens/s run: %w", err)
		}
		if h.tokens != o.bigTokens {
			return fmt.Errorf("HTTP tokens/s run: %d tokens, want %d", h.tokens, o.bigTokens)
		}
		htps = append(htps, float64(h.tokens)/h.elapsed.Seconds())
	}
	res.TokensPerS = bench.Round(median(tps), 0)
	res.HTTPTokensPerS = bench.Round(median(htps), 0)
	progress("tokens/s: runs of %d tokens: in-process median %.0f (%s), HTTP median %.0f (%s)",
		o.bigTokens, res.TokensPerS, fmtList(tps), res.HTTPTokensPerS, fmtList(htps))

	for _, n := range o.ns {
		nr, err := b.perN(ctx, n, progress)
		if err != nil {
			return fmt.Errorf("thread length N=%d: %w", n, err)
		}
		res.ByN[strconv.Itoa(n)] = nr
	}
	res.CommitMS = bench.Round(median(b.commits), 3)
	res.Peer, res.Targets = comparePeer(res, o.ns)
	return nil
}

// perN builds a thread of n turns and measures on it.
func (b *peerBench) perN(ctx context.Context, n int, progress func(string, ...any)) (*NResult, error) {
	o := b.opt
	nr := &NResult{}
	threadID := uuid.New()
	before, err := b.totalSize(ctx)
	if err != nil {
		return nil, err
	}
	users := make([]uuid.UUID, 0, n)
	replies := make([]uuid.UUID, 0, n)
	userTexts := make([]string, 0, n)
	leaf := uuid.Nil
	var buildMS []float64
	for i := 0; i < n; i++ {
		text := b.userText("turn")
		r, err := b.runInProc(ctx, threadID, thread.RunRequest{
			Message:  &thread.UserMessage{Content: []checkpoint.Part{{Type: "text", Text: text}}},
			ParentID: leaf,
		})
		if err != nil {
			return nil, fmt.Errorf("build turn %d: %w", i+1, err)
		}
		users = append(users, r.run.UserMessageID)
		replies = append(replies, r.run.MessageID)
		userTexts = append(userTexts, text)
		leaf = r.run.MessageID
		buildMS = append(buildMS, ms(r.elapsed))
	}
	after, err := b.totalSize(ctx)
	if err != nil {
		return nil, err
	}
	nr.ThreadStoredBytes = after - before
	if nr.ThreadRowBytes, err = b.rowBytes(ctx, threadID); err != nil {
		return nil, err
	}
	nr.BuildTurnMS = bench.Round(median(buildMS), 3)
	progress("N=%d: built with %d turns (median %.3f ms, last %.3f ms); thread_stored_bytes %d (live rows %d)",
		n, n, nr.BuildTurnMS, buildMS[len(buildMS)-1], nr.ThreadStoredBytes, nr.ThreadRowBytes)
	want := 2 * n

	// get_state: cold (new Service), warm, and over HTTP (cold).
	var cold, warm, httpCold []float64
	for i := 0; i < o.reps; i++ {
		svc := b.newService()
		t0 := time.Now()
		snap, err := svc.Snapshot(ctx, peerCaller, threadID)
		if err != nil {
			return nil, fmt.Errorf("snapshot: %w", err)
		}
		_, path, repo := snap.Export()
		cold = append(cold, ms(time.Since(t0)))
		if len(path) != want || len(repo.Messages) != want {
			return nil, fmt.Errorf("snapshot: path of %d and repository of %d messages, want %d", len(path), len(repo.Messages), want)
		}
		t0 = time.Now()
		snap, err = b.svc.Snapshot(ctx, peerCaller, threadID)
		if err != nil {
			return nil, fmt.Errorf("snapshot: %w", err)
		}
		_, path, _ = snap.Export()
		warm = append(warm, ms(time.Since(t0)))
		if len(path) != want {
			return nil, fmt.Errorf("warm snapshot: path of %d messages, want %d", len(path), want)
		}
		b.coldH.Store(b.newColdServer())
		var msgs struct {
			Messages          []json.RawMessage `json:"messages"`
			MessageRepository struct {
				HeadID   *string `json:"headId"`
				Messages []struct {
					Message  json.RawMessage `json:"message"`
					ParentID *string         `json:"parentId"`
				} `json:"messages"`
			} `json:"messageRepository"`
		}
		t0 = time.Now()
		if err := b.getJSON(ctx, b.cold+"/api/v1/threads/"+threadID.String()+"/messages", &msgs); err != nil {
			return nil, err
		}
		httpCold = append(httpCold, ms(time.Since(t0)))
		if len(msgs.Messages) != want || len(msgs.MessageRepository.Messages) != want {
			return nil, fmt.Errorf("GET /messages: %d messages, %d in the repository, want %d", len(msgs.Messages), len(msgs.MessageRepository.Messages), want)
		}
	}
	nr.GetStateMS, nr.GetStateWarmMS, nr.HTTPGetStateMS = bench.Round(median(cold), 3), bench.Round(median(warm), 3), bench.Round(median(httpCold), 3)

	// history: GET /checkpoints, cold and warm.
	var hist, histWarm []float64
	for i := 0; i < o.reps; i++ {
		for _, coldRead := range []bool{true, false} {
			base := b.warm
			if coldRead {
				b.coldH.Store(b.newColdServer())
				base = b.cold
			}
			var cps struct {
				Checkpoints []struct {
					CheckpointID       string          `json:"checkpoint_id"`
					ParentCheckpointID *string         `json:"parent_checkpoint_id"`
					Role               string          `json:"role"`
					Content            json.RawMessage `json:"content"`
				} `json:"checkpoints"`
			}
			t0 := time.Now()
			if err := b.getJSON(ctx, base+"/api/v1/threads/"+threadID.String()+"/checkpoints", &cps); err != nil {
				return nil, err
			}
			d := ms(time.Since(t0))
			if len(cps.Checkpoints) != want {
				return nil, fmt.Errorf("GET /checkpoints: %d checkpoints, want %d", len(cps.Checkpoints), want)
			}
			if coldRead {
				hist = append(hist, d)
			} else {
				histWarm = append(histWarm, d)
			}
		}
	}
	nr.HistoryMS, nr.HistoryWarmMS = bench.Round(median(hist), 3), bench.Round(median(histWarm), 3)
	nr.Checkpoints = want
	progress("N=%d: get_state_ms %.3f cold in-process (%s), %.3f warm, %.3f over HTTP; history_ms %.3f cold over HTTP (%s), %.3f warm",
		n, nr.GetStateMS, fmtList(cold), nr.GetStateWarmMS, nr.HTTPGetStateMS, nr.HistoryMS, fmtList(hist), nr.HistoryWarmMS)

	mid := (n + 1) / 2
	userMid, replyMid := users[mid-1], replies[mid-1]
	userParent := uuid.Nil
	if mid > 1 {
		userParent = replies[mid-2]
	}

	// fork (regenerate reply mid) and edit (user message mid), in turns, so
	// that neither always runs first after the reads above.
	var forkMS, editMS, commitMS []float64
	probe := func() error {
		d, err := b.probeCommit(ctx)
		commitMS = append(commitMS, d)
		return err
	}
	// Each is read back and checked after all of them ran: at N = 500
	// a read-back is a 5 ms snapshot of 1,000 messages against 0.3 ms at
	// N = 10, and a timed write right after it (or after any pause) is
	// slower on this VM, which would make the flat-in-N line measure the
	// bench's own check rather than the fork.
	type written struct {
		r          runResult
		parent     uuid.UUID
		prompt     string
		userParent *uuid.UUID
		what       string
		head       uuid.UUID // the thread's stored head right after the run
	}
	var done []written
	// head reads the thread's row alone (one small read at every N): the
	// branch a reloaded client would show, checked in verify.
	head := func() (uuid.UUID, error) {
		th, err := b.st.ThreadGet(ctx, peerCaller, threadID)
		if err != nil {
			return uuid.Nil, fmt.Errorf("read head: %w", err)
		}
		return th.HeadID, nil
	}
	b.timed.reset()
	for i := 0; i < o.reps; i++ {
		r, err := b.runInProc(ctx, threadID, thread.RunRequest{ParentID: userMid, SourceID: replyMid})
		if err != nil {
			return nil, fmt.Errorf("fork: %w", err)
		}
		forkMS = append(forkMS, ms(r.elapsed))
		if err := probe(); err != nil {
			return nil, err
		}
		h, err := head()
		if err != nil {
			return nil, err
		}
		done = append(done, written{r: r, parent: userMid, prompt: userTexts[mid-1], what: "fork", head: h})
		text := b.userText("edit")
		r, err = b.runInProc(ctx, threadID, thread.RunRequest{
			Message:  &thread.UserMessage{Content: []checkpoint.Part{{Type: "text", Text: text}}},
			ParentID: userParent, SourceID: userMid,
		})
		if err != nil {
			return nil, fmt.Errorf("edit: %w", err)
		}
		editMS = append(editMS, ms(r.elapsed))
		if err := probe(); err != nil {
			return nil, err
		}
		if h, err = head(); err != nil {
			return nil, err
		}
		done = append(done, written{r: r, parent: r.run.UserMessageID, prompt: text, userParent: &userParent, what: "edit", head: h})
	}
	nr.ForkPersistedOK, nr.EditPersistedOK = true, true
	for _, w := range done {
		if problem := b.verify(ctx, threadID, w.r, w.parent, w.prompt, w.userParent, w.head); problem != "" {
			if w.what == "fork" {
				nr.ForkPersistedOK = false
			} else {
				nr.EditPersistedOK = false
			}
			nr.PersistProblems = append(nr.PersistProblems, w.what+": "+problem)
		}
	}
	nr.ForkMS, nr.EditMS, nr.CommitMS = bench.Round(median(forkMS), 3), bench.Round(median(editMS), 3), bench.Round(median(commitMS), 3)
	b.commits = append(b.commits, commitMS...)
	nr.ForkEditBreakdown = b.timed.perTurn(len(forkMS)+len(editMS), sum(forkMS)+sum(editMS))
	progress("N=%d: mid %d: fork_ms %.3f (%s) persisted %v; edit_ms %.3f (%s) persisted %v; store calls per fork or edit (count, ms): %s; a bare commit after each: %.3f ms",
		n, mid, nr.ForkMS, fmtList(forkMS), nr.ForkPersistedOK, nr.EditMS, fmtList(editMS), nr.EditPersistedOK, fmtBreakdown(nr.ForkEditBreakdown), nr.CommitMS)
	for _, p := range nr.PersistProblems {
		progress("N=%d: NOT PERSISTED AS STREAMED: %s", n, p)
	}

	// Turns at the end of the thread.
	leaf = replies[n-1]
	before, err = b.totalSize(ctx)
	if err != nil {
		return nil, err
	}
	var endMS []float64
	for i := 0; i < o.endTurns; i++ {
		r, err := b.turn(ctx, threadID, leaf)
		if err != nil {
			return nil, fmt.Errorf("end turn: %w", err)
		}
		leaf = r.run.MessageID
		endMS = append(endMS, ms(r.elapsed))
	}
	after, err = b.totalSize(ctx)
	if err != nil {
		return nil, err
	}
	nr.TurnEndMS = bench.Round(median(endMS), 3)
	nr.BytesPerTurnEnd = bench.Round(float64(after-before)/float64(o.endTurns), 1)
	progress("N=%d: turn_end_ms %.3f (%s); bytes_per_turn_end %.0f", n, nr.TurnEndMS, fmtList(endMS), nr.BytesPerTurnEnd)
	return nr, nil
}

// verify reads the thread back through a new Service (from Postgres) and
// compares the run's reply with what it streamed. wantParent is the user
// message the reply must answer; prompt is that message's text. For an edit,
// userParent is where the new user message must hang. head is the thread's
// stored head right after the run (later runs move it): a client reloaded
// then must have shown the new reply. It returns "" when everything
// matches, else what does not.
func (b *peerBench) verify(ctx context.Context, threadID uuid.UUID, r runResult, wantParent uuid.UUID, prompt string, userParent *uuid.UUID, head uuid.UUID) string {
	var problems []string
	bad := func(format string, a ...any) { problems = append(problems, fmt.Sprintf(format, a...)) }
	id := r.run.MessageID
	if r.badIDs > 0 {
		bad("%d token events named another message than %s", r.badIDs, id)
	}
	if r.first == nil || r.first.Running == nil || r.first.Running.ID != id {
		bad("the first snapshot does not hold the running reply %s", id)
	}
	if want := model.BuiltinText(prompt, r.run.TreeSeq, peerReplyTokens); r.text != want {
		bad("streamed text (%d bytes) is not the built-in model's reply to the prompt (%d bytes)", len(r.text), len(want))
	}
	streamed := r.final.Tree.Get(id)
	if streamed == nil {
		bad("the final snapshot has no message %s", id)
	} else if streamed.Text() != r.text || streamed.ParentID != wantParent {
		bad("the final snapshot's message %s differs from the tokens or parent", id)
	}
	// Untimed, so that the store breakdown holds the runs only.
	snap, err := thread.New(b.st, stream.New[thread.Event](16), b.models, b.st, thread.Config{Logger: b.log}).Snapshot(ctx, peerCaller, threadID)
	if err != nil {
		return "read back: " + err.Error()
	}
	if snap.ActiveRun != nil {
		bad("a run is still active after the final snapshot")
	}
	got := snap.Tree.Get(id)
	switch {
	case got == nil:
		bad("reply %s is not in the persisted tree", id)
	default:
		if got.Text() != r.text {
			bad("persisted reply text (%d bytes) differs from the streamed text (%d bytes)", len(got.Text()), len(r.text))
		}
		if got.ParentID != wantParent {
			bad("persisted reply's parent is %s, want %s", got.ParentID, wantParent)
		}
		if got.Role != checkpoint.RoleAssistant || got.Status == nil || got.Status.Type != "complete" || got.RunID != r.run.ID || got.Running {
			bad("persisted reply is not a complete assistant message of run %s", r.run.ID)
		}
		if streamed != nil && (got.Seq != streamed.Seq || !got.CreatedAt.Equal(streamed.CreatedAt)) {
			bad("persisted reply's seq/created_at differ from the final snapshot's")
		}
	}
	if userParent != nil {
		u := snap.Tree.Get(wantParent)
		switch {
		case u == nil:
			bad("edited user message %s is not in the persisted tree", wantParent)
		case u.Role != checkpoint.RoleUser || u.Text() != prompt:
			bad("persisted user message %s is not the edit that was sent", wantParent)
		case u.ParentID != *userParent:
			bad("persisted edit's parent is %s, want %s", u.ParentID, *userParent)
		}
	}
	path, repo := snap.Tree.Export(head)
	if head != id || repo.HeadID == nil || *repo.HeadID != id || len(path) < 2 || path[len(path)-1].ID != id || path[len(path)-2].ID != wantParent {
		bad("a reloaded client would not show the new reply at the head of its branch")
	}
	return strings.Join(problems, "; ")
}

// comparePeer returns the peer's figures with ratios and the targets.
func comparePeer(res *Result, ns []int) (map[string]any, map[string]bool) {
	p := peerFigures
	// Targets compare exact ratios; the JSON shows them rounded (9.96x is
	// shown as 10 and does not meet 10x).
	raw := func(a, b float64) float64 {
		if b <= 0 {
			return 0
		}
		return a / b
	}
	div := func(a, b float64) float64 { return bench.Round(raw(a, b), 1) }
	ratio := map[string]any{
		"turn_ms":           div(p.TurnMS, res.TurnMS),
		"http_turn_ms":      div(p.TurnMS, res.HTTPTurnMS),
		"bytes_per_turn":    div(p.BytesPerTurn, res.BytesPerTurn),
		"tokens_per_s":      div(res.TokensPerS, p.TokensPerS),
		"http_tokens_per_s": div(res.HTTPTokensPerS, p.TokensPerS),
	}
	targets := map[string]bool{
		"turn_ms_10x":        raw(p.TurnMS, res.TurnMS) >= 10,
		"bytes_per_turn_10x": raw(p.BytesPerTurn, res.BytesPerTurn) >= 10,
		"tokens_per_s_10x":   raw(res.TokensPerS, p.TokensPerS) >= 10,
	}
	byN := map[string]any{}
	rbyN := map[string]any{}
	for _, n := range ns {
		pf, ok := p.ByN[n]
		if !ok {
			continue
		}
		key := strconv.Itoa(n)
		byN[key] = pf
		nr := res.ByN[key]
		r, exact := map[string]float64{}, map[string]float64{}
		for k, v := range pf {
			pv, ok := v.(float64)
			if !ok {
				continue
			}
			var mine float64
			switch k {
			case "get_state_ms":
				mine = nr.GetStateMS
			case "history_ms":
				mine = nr.HistoryMS
			case "fork_ms":
				mine = nr.ForkMS
			case "edit_ms":
				mine = nr.EditMS
			case "turn_end_ms":
				mine = nr.TurnEndMS
			case "bytes_per_turn_end":
				mine = nr.BytesPerTurnEnd
			case "thread_stored_bytes":
				mine = float64(nr.ThreadStoredBytes)
			}
			r[k], exact[k] = div(pv, mine), raw(pv, mine)
		}
		rbyN[key] = r
		for _, k := range []string{"get_state_ms", "fork_ms", "edit_ms", "turn_end_ms"} {
			targets[k+"_10x_n"+key] = exact[k] >= 10
		}
		// bytes_per_turn_end has no 10x target: the issue asks for 10x on a
		// fresh thread and flat in N (below); its ratio is in ratio.by_n.
		if v, ok := exact["history_ms"]; ok && n == 100 {
			targets["history_ms_100x_n100"] = v >= 100
		}
		targets["fork_persisted_ok_n"+key] = nr.ForkPersistedOK
		targets["edit_persisted_ok_n"+key] = nr.EditPersistedOK
	}
	// Flat in N: fork and edit at the largest N within 2x of the smallest.
	if len(ns) > 1 {
		lo, hi := slices.Min(ns), slices.Max(ns)
		a, z := res.ByN[strconv.Itoa(lo)], res.ByN[strconv.Itoa(hi)]
		targets[fmt.Sprintf("fork_ms_n%d_within_2x_of_n%d", hi, lo)] = z.ForkMS <= 2*a.ForkMS
		targets[fmt.Sprintf("edit_ms_n%d_within_2x_of_n%d", hi, lo)] = z.EditMS <= 2*a.EditMS
		targets[fmt.Sprintf("bytes_per_turn_end_n%d_within_2x_of_fresh", hi)] = z.BytesPerTurnEnd <= 2*math.Max(res.BytesPerTurn, 1)
	}
	ratio["by_n"] = rbyN
	peer := map[string]any{
		"system":         "LangGraph JS 1.7.3 + @langchain/langgraph-checkpoint-postgres 1.0.5 (PostgresSaver), one-node StateGraph(MessagesAnnotation)",
		"source":         "PEER_WORKLOAD.md: 2 cores, PostgreSQL 15, one run, 2026-11-22",
		"turn_ms":        p.TurnMS,
		"bytes_per_turn": p.BytesPerTurn,
		"tokens_per_s":   p.TokensPerS,
		"by_n":           byN,
		"ratio_note":     "ratio = peer/threadline for times and bytes, threadline/peer for tokens/s: above 1 means Threadline is better by that factor",
		"ratio":          ratio,
	}
	return peer, targets
}

// timedStore counts and times the store calls a Service makes.
type timedStore struct {
	*store.Store
	mu  sync.Mutex
	ops map[string]*opStat
}

type opStat struct {
	n int
	d time.Duration
}

func (t *timedStore) since(op string, start time.Time) {
	d := time.Since(start)
	t.mu.Lock()
	s := t.ops[op]
	if s == nil {
		s = &opStat{}
		t.ops[op] = s
	}
	s.n++
	s.d += d
	t.mu.Unlock()
}

func (t *timedStore) reset() {
	t.mu.Lock()
	t.ops = map[string]*opStat{}
	t.mu.Unlock()
}

// perTurn returns each call's count and milliseconds per turn, and the
// rest of the turn's time (the service, the model and the hub).
func (t *timedStore) perTurn(turns int, totalMS float64) map[string]any {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]any{}
	var storeMS float64
	for op, s := range t.ops {
		out[op] = map[string]float64{"calls": bench.Round(float64(s.n)/float64(turns), 2), "ms": bench.Round(ms(s.d)/float64(turns), 3)}
		storeMS += ms(s.d)
	}
	out["store_ms"] = bench.Round(storeMS/float64(turns), 3)
	out["turn_mean_ms"] = bench.Round(totalMS/float64(turns), 3)
	return out
}

func fmtBreakdown(m map[string]any) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		switch v := m[k].(type) {
		case map[string]float64:
			parts = append(parts, fmt.Sprintf("%s %.2g× %.3f", k, v["calls"], v["ms"]))
		case float64:
			parts = append(parts, fmt.Sprintf("%s %.3f", k, v))
		}
	}
	return strings.Join(parts, ", ")
}

func (t *timedStore) ThreadGet(ctx context.Context, caller string, id uuid.UUID) (*thread.Thread, error) {
	defer t.since("ThreadGet", time.Now())
	return t.Store.ThreadGet(ctx, caller, id)
}

func (t *timedStore) ThreadUpdate(ctx context.Context, caller string, id uuid.UUID, u thread.ThreadUpdate) (*thread.Thread, error) {
	defer t.since("ThreadUpdate", time.Now())
	return t.Store.ThreadUpdate(ctx, caller, id, u)
}

func (t *timedStore) CheckpointsAfter(ctx context.Context, threadID uuid.UUID, after int64) ([]checkpoint.Node, error) {
	defer t.since("CheckpointsAfter", time.Now())
	return t.Store.CheckpointsAfter(ctx, threadID, after)
}

func (t *timedStore) RunCreate(ctx context.Context, in thread.RunCreate, first thread.Record) (*thread.Run, error) {
	defer t.since("RunCreate", time.Now())
	return t.Store.RunCreate(ctx, in, first)
}

func (t *timedStore) RunComplete(ctx context.Context, in thread.RunCreate, fin thread.RunFinish) error {
	defer t.since("RunComplete", time.Now())
	return t.Store.RunComplete(ctx, in, fin)
}

func (t *timedStore) RunGet(ctx context.Context, threadID, runID uuid.UUID) (*thread.Run, error) {
	defer t.since("RunGet", time.Now())
	return t.Store.RunGet(ctx, threadID, runID)
}

func (t *timedStore) RunActive(ctx context.Context, threadID uuid.UUID) (*thread.Run, error) {
	defer t.since("RunActive", time.Now())
	return t.Store.RunActive(ctx, threadID)
}

func (t *timedStore) RunEventsAppend(ctx context.Context, segs []thread.Segment) error {
	defer t.since("RunEventsAppend", time.Now())
	return t.Store.RunEventsAppend(ctx, segs)
}

func (t *timedStore) RunEventsAfter(ctx context.Context, runID uuid.UUID, after int64) ([]thread.Record, error) {
	defer t.since("RunEventsAfter", time.Now())
	return t.Store.RunEventsAfter(ctx, runID, after)
}

func (t *timedStore) RunFinish(ctx context.Context, in thread.RunFinish) error {
	defer t.since("RunFinish", time.Now())
	return t.Store.RunFinish(ctx, in)
}

func (t *timedStore) ThreadRead(ctx context.Context, caller string, id uuid.UUID, after int64) (*thread.Thread, []checkpoint.Node, *thread.Run, error) {
	defer t.since("ThreadRead", time.Now())
	return t.Store.ThreadRead(ctx, caller, id, after)
}

func (t *timedStore) RunFinishAll(ctx context.Context, ins []thread.RunFinish) error {
	defer t.since("RunFinishAll", time.Now())
	return t.Store.RunFinishAll(ctx, ins)
}

func sum(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func fmtList(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		if x >= 1000 {
			parts[i] = strconv.FormatFloat(x, 'f', 0, 64)
		} else {
			parts[i] = strconv.FormatFloat(x, 'f', 2, 64)
		}
	}
	if len(parts) > 12 {
		parts = append(parts[:6], append([]string{"…"}, parts[len(parts)-5:]...)...)
	}
	return strings.Join(parts, " ")
}
