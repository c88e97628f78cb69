// Package load is `threadline-bench load`: K concurrent runs over real
// HTTP on loopback, with NDJSON clients that read like a browser, a share of
// which drop the connection mid-run and rejoin with ?after=N. See loadUsage.
package load

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/threadline/threadline/cmd/threadline-bench/internal/bench"
	"github.com/threadline/threadline/model"
	"github.com/threadline/threadline/store"
)

const loadUsage = `usage: threadline-bench load [flags]

Starts K concurrent runs over real HTTP on 127.0.0.1 (one new thread per run,
the built-in model at a fixed token rate, on_disconnect "continue"), reads
every NDJSON stream as a browser would, and lets a share of the clients drop
the connection mid-run and rejoin with ?after=<last sequence read>. Each
client holds a keep-alive connection opened before the measurement, as a
browser with the app loaded does, and sends its POST on it (--preconnect).
For each
K it prints one JSON object on stdout; the last line is a summary holding all
of them. Progress goes to stderr.

By default every K gets its own service (the threadline binary beside this
one, or on $PATH, run as "threadline serve"; --server-bin names another) as a
child process on a free loopback port and its own fresh database, created on the
Postgres of --database-url ($THREADLINE_DATABASE_URL, else the project's own
cluster via deploy/pg.sh start) and dropped afterwards, so the server's CPU
and memory are measured apart from the client's. --url targets a running
service instead (loopback only).

Flags:
`

// Bounds: the command refuses sizes beyond these.
const (
	loadMaxK      = 5000
	loadMaxTokens = 100000
)

type loadOpts struct {
	ks          []int
	tokens      int
	rate        float64
	rejoinShare float64
	rejoinPause time.Duration
	timeout     time.Duration
	ramp        time.Duration
	url         string
	serverPID   int
	dbURL       string
	dbMaxConns  int
	serverBin   string
	apiKey      string
	seed        uint64
	warmup      bool
	preconnect  bool
	cpuProfile  string
	selfProfile string
	floor       bool
}

func parseLoadOpts(args []string, getenv func(string) string, stderr io.Writer) (loadOpts, error) {
	fs := flag.NewFlagSet("threadline-bench load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, loadUsage)
		fs.PrintDefaults()
	}
	var o loadOpts
	var ks string
	var seed int64
	fs.StringVar(&ks, "k", "100,500,1000", "comma-separated numbers of concurrent runs, one measurement each (at most 5000)")
	fs.IntVar(&o.tokens, "tokens", 200, "tokens per reply of the built-in model")
	fs.Float64Var(&o.rate, "rate", 50, "tokens per second of each run (the built-in model's delay is 1s/rate)")
	fs.Float64Var(&o.rejoinShare, "rejoin-share", 0.2, "share of clients that drop their connection mid-run and rejoin with ?after=<last sequence read>")
	fs.DurationVar(&o.rejoinPause, "rejoin-pause", 250*time.Millisecond, "a dropping client waits a random time up to this before it rejoins")
	fs.DurationVar(&o.timeout, "timeout", 15*time.Minute, "bound on the whole command; each K is also bounded by ramp + 3 x (tokens/rate) + 60s")
	fs.DurationVar(&o.ramp, "ramp", time.Second, "start the K runs evenly spread over this time (0: all at once)")
	fs.StringVar(&o.url, "url", "", "base URL of a running service on loopback (e.g. http://127.0.0.1:8080); empty: start one per K")
	fs.IntVar(&o.serverPID, "server-pid", 0, "with --url: the service's process id, to read its CPU and memory from /proc")
	dbDef := getenv("THREADLINE_DATABASE_URL")
	fs.StringVar(&o.dbURL, "database-url", dbDef, "Postgres URL: where fresh databases are created (child mode) or the service's database (--url mode, for the growth figure) ($THREADLINE_DATABASE_URL; empty: deploy/pg.sh start)")
	fs.StringVar(&o.selfProfile, "cpuprofile", "", "write a CPU profile of the load generator (the clients) to this file (go tool pprof)")
	fs.StringVar(&o.cpuProfile, "server-cpu-profile", "", "child mode: each K's service writes a CPU profile to this path with .k<K> appended (go tool pprof)")
	fs.IntVar(&o.dbMaxConns, "db-max-conns", 32, "database pool size of the child service ($THREADLINE_DB_MAX_CONNS of serve)")
	fs.StringVar(&o.serverBin, "server-bin", "", "binary to run as the service with 'serve' (default: threadline beside this executable, else on $PATH); with --floor, the binary to run with 'floor' (default: this executable)")
	fs.StringVar(&o.apiKey, "api-key", getenv("THREADLINE_BENCH_API_KEY"), "bearer key for a --url service with authentication ($THREADLINE_BENCH_API_KEY)")
	fs.BoolVar(&o.warmup, "warmup", true, "before measuring, open the service's database pool with a burst of light concurrent requests (a fresh service starts with one connection)")
	fs.BoolVar(&o.preconnect, "preconnect", true, "before measuring, open one keep-alive connection per client, as a browser that has loaded the app holds one, so that each run's POST reuses it (rejoins still dial a new one); false: every POST dials")
	fs.BoolVar(&o.floor, "floor", false, "measure the floor instead of Threadline: each K's child is 'threadline-bench floor', the same stream endpoints kept in memory (no database, no durable log); what HTTP streaming alone costs here")
	fs.Int64Var(&seed, "seed", 1, "seed of the clients' random choices (who drops, when, how long)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("bench load: unexpected argument %q", fs.Arg(0))
	}
	o.seed = uint64(seed)
	for _, s := range strings.Split(ks, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		k, err := strconv.Atoi(s)
		if err != nil || k < 1 || k > loadMaxK {
			return o, fmt.Errorf("--k: %q is not a number of runs between 1 and %d", s, loadMaxK)
		}
		o.ks = append(o.ks, k)
	}
	switch {
	case len(o.ks) == 0:
		return o, errors.New("--k: give at least one number of runs")
	case o.tokens < 1 || o.tokens > loadMaxTokens:
		return o, fmt.Errorf("--tokens must be between 1 and %d", loadMaxTokens)
	case !(o.rate > 0) || o.rate > 100000:
		return o, errors.New("--rate must be above 0 and at most 100000 tokens/s")
	case o.rejoinShare < 0 || o.rejoinShare > 1:
		return o, errors.New("--rejoin-share must be between 0 and 1")
	case o.timeout <= 0:
		return o, errors.New("--timeout must be positive")
	case o.ramp < 0 || o.rejoinPause < 0:
		return o, errors.New("--ramp and --rejoin-pause must not be negative")
	case o.dbMaxConns < 1:
		return o, errors.New("--db-max-conns must be at least 1")
	case o.tokens < 3 && o.rejoinShare > 0:
		return o, errors.New("--rejoin-share needs --tokens of at least 3 (clients drop after some tokens, before the last)")
	}
	if o.url != "" {
		u, err := url.Parse(o.url)
		if err != nil || (u.Scheme != "http") || u.Host == "" {
			return o, fmt.Errorf("--url %q: want http://127.0.0.1:PORT", o.url)
		}
		if !loadLoopback(u.Hostname()) {
			return o, fmt.Errorf("--url %q: the load benchmark runs on loopback only", o.url)
		}
		o.url = strings.TrimRight(u.Scheme+"://"+u.Host+u.Path, "/")
	} else if o.serverPID != 0 {
		return o, errors.New("--server-pid goes with --url")
	}
	if o.floor && o.url != "" {
		return o, errors.New("--floor starts its own child; it does not go with --url")
	}
	return o, nil
}

func loadLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Percentiles of one distribution, in milliseconds.
type loadDist struct {
	P50     float64 `json:"p50"`
	P99     float64 `json:"p99"`
	Max     float64 `json:"max"`
	Samples int     `json:"samples"`
}

func loadPercentiles(v []float64) loadDist {
	if len(v) == 0 {
		return loadDist{}
	}
	slices.Sort(v)
	q := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(v)))) - 1
		return bench.Round(v[max(0, min(i, len(v)-1))], 3)
	}
	return loadDist{P50: q(0.50), P99: q(0.99), Max: bench.Round(v[len(v)-1], 3), Samples: len(v)}
}

// loadSecond is added_delay_ms for the tokens read in one second of the
// run, counted from the first POST: it shows whether the tail comes from
// the start burst, the steady stream or the burst of run ends.
type loadSecond struct {
	Second int `json:"second"`
	loadDist
}

// loadServerDelay is the service's own histogram of token publication delay.
type loadServerDelay struct {
	Metric   string   `json:"metric"`
	P50LeMS  *float64 `json:"p50_le_ms"` // upper bound of the bucket holding the median
	P99LeMS  *float64 `json:"p99_le_ms"`
	MeanMS   *float64 `json:"mean_ms"`
	Batches  int64    `json:"batches"`
	Tokens   int64    `json:"tokens"`
	Measures string   `json:"measures"`
}

// loadPool is the service's database pool over the load window (/metrics).
type loadPool struct {
	MaxConns  float64 `json:"max_conns"`
	Acquires  float64 `json:"acquires"`
	WaitS     float64 `json:"acquire_wait_s"`
	MeanWaitM float64 `json:"mean_acquire_wait_ms"`
	ConnsFrom float64 `json:"open_conns_before"`
	ConnsTo   float64 `json:"open_conns_after"`
}

// Result is one K's measurement (one JSON line).
type Result struct {
	Bench            string           `json:"bench"`
	K                int              `json:"k"`
	TokensPerRun     int              `json:"tokens_per_run"`
	RateTokensPerS   float64          `json:"rate_tokens_per_s"`
	Ramp             string           `json:"ramp"`
	Warmup           bool             `json:"warmup"`
	Preconnected     int              `json:"preconnected_conns"`
	RejoinShare      float64          `json:"rejoin_share"`
	RunsStarted      int              `json:"runs_started"`
	RunsCompleted    int              `json:"runs_completed"`
	RunsFailed       int              `json:"runs_failed"`
	TokensExpected   int64            `json:"tokens_expected"`
	TokensDelivered  int64            `json:"tokens_delivered"`
	ExactlyOnce      bool             `json:"exactly_once"`
	Mismatches       int              `json:"mismatches"`
	Rejoined         int              `json:"rejoined"`
	UnplannedRejoins int              `json:"unplanned_rejoins"`
	AddedDelayMS     loadDist         `json:"added_delay_ms"`
	AddedDelayUpper  loadDist         `json:"added_delay_upper_bound_ms"`
	SlipFreeMS       loadDist         `json:"added_delay_slip_free_ms"`
	AllStreamingMS   loadDist         `json:"added_delay_all_streaming_ms"`
	BySecond         []loadSecond     `json:"added_delay_by_second"`
	BeforeFirstMS    loadDist         `json:"added_delay_before_first_event_ms"`
	AfterFirstMS     loadDist         `json:"added_delay_after_first_event_ms"`
	ModelSlipMS      loadDist         `json:"model_slip_ms"`
	AnchorGapMS      loadDist         `json:"anchor_gap_ms"`
	ServerDelay      *loadServerDelay `json:"server_publish_delay"`
	ServerPool       *loadPool        `json:"server_db_pool"`
	ServerSched      *loadSched       `json:"server_sched_latency"`
	DelayMethod      string           `json:"delay_method"`
	FirstEventMS     loadDist         `json:"first_event_ms"`
	RunSpanMS        loadDist         `json:"run_span_ms"`
	ServerCPUS       *float64         `json:"server_cpu_s"`
	ServerCPUUtil    *float64         `json:"server_cpu_util"`
	ServerRSSPeakMB  *float64         `json:"server_rss_peak_mb"`
	ServerRSSEndMB   *float64         `json:"server_rss_end_mb"`
	ServerStats      string           `json:"server_stats_source"`
	ClientCPUS       float64          `json:"client_cpu_s"`
	DBBackendCPUS    *float64         `json:"db_backend_cpu_s"`
	MachineCPUUtil   *float64         `json:"machine_cpu_util"`
	DBGrowthBytes    *int64           `json:"db_growth_bytes"`
	DBGrowthPerRun   *float64         `json:"db_growth_per_run_bytes"`
	DBMaxConns       *int             `json:"server_db_max_conns"`
	ServerLogErrors  int              `json:"server_log_errors"`
	ServerLogWarns   int              `json:"server_log_warnings"`
	WallS            float64          `json:"wall_s"`
	IdealS           float64          `json:"ideal_s"`
	Errors           []string         `json:"errors"`
	MeetsGoal        bool             `json:"meets_goal"`
	MeetsStretch     bool             `json:"meets_stretch"`
	Target           string           `json:"target"`
	Machine          bench.Machine    `json:"machine"`
	Postgres         string           `json:"postgres"`
	GoVersion        string           `json:"go_version"`
	Commit           string           `json:"commit"`
}

// Goal of the issue: p99 added delay under 50 ms (stretch 5 ms), every token
// exactly once, nothing failed.
const (
	loadGoalP99MS    = 50
	loadStretchP99MS = 5
)

const loadDelayMethod = "Client side, per token, on one clock (client and service share the machine): " +
	"delay = time the client had read the token's line - time the built-in model produced it. " +
	"The built-in model emits token i (sequence i+1) at start + i/rate (one pacer goroutine for every stream; a late pacer sends the overdue tokens at once), so production time = start + i/rate; " +
	"start is not on the wire, so it is bracketed per run. " +
	"added_delay_ms takes start = the latest the client's observations allow, min(first snapshot read, min over tokens of (read time - i/rate)): " +
	"it leaves out the run's smallest delay (about one durable log commit; see server_publish_delay) and is off by at most anchor_gap_ms; " +
	"if the model itself falls behind its schedule (model_slip_ms: a starved pacer; it catches up, so a stall is counted once per token it delayed, not for the rest of the run), that lateness is counted as delay. " +
	"added_delay_slip_free_ms takes, per token, the latest start consistent with that token and every later one, so model slip is not counted " +
	"(a lower bound; the last tokens of a run tend to 0). " +
	"added_delay_upper_bound_ms takes start = the run's created_at (GET .../runs/{id}; set before the run's first database write, so before the model starts): " +
	"an upper bound that adds the run's creation time and any slip. " +
	"added_delay_by_second splits added_delay_ms by the second (since the first POST) in which the client read the token. " +
	"added_delay_before_first_event_ms is added_delay_ms for the tokens the model produced (on the anchored schedule) before the client read the run's first snapshot: they wait for the run's start to be committed; added_delay_after_first_event_ms is every other token. " +
	"added_delay_all_streaming_ms is added_delay_ms for the tokens read while all K runs stream: after the last run's POST + 0.5 s and before any run's last token " +
	"(no start or end of a run in the window; empty when the runs do not overlap that long). " +
	"Tokens produced while their client was away (replayed on rejoin) count for exactly-once, not for delay. " +
	"server_publish_delay is the service's own histogram threadline_token_publish_delay_seconds over the same window " +
	"(model produced the oldest token of a log batch -> batch published after its durable commit; excludes the HTTP write). " +
	"meets_goal uses added_delay_ms."

// loadClient is one run's client.
type loadClient struct {
	idx      int
	threadID uuid.UUID
	prompt   string
	dropAt   int // tokens to read on the first connection before dropping; 0: never
	pause    time.Duration
	start    time.Duration // offset in the ramp

	sent      time.Time // the POST was sent
	firstAt   time.Time // the first snapshot was read
	runID     string
	msgID     string
	lastSeq   int64
	text      strings.Builder
	tokens    int64 // token events read, repeats included
	arrivals  []time.Time
	conns     []int8      // connection index of each token, by sequence
	connSent  []time.Time // when each connection's request was sent
	final     string      // final run_status
	finalTxt  string
	finalSet  bool
	rejoined  bool
	unplanned int
	errs      []string
	mismatch  []string
	created   time.Time // the run's created_at
}

func (c *loadClient) fail(format string, a ...any) {
	c.errs = append(c.errs, fmt.Sprintf("run %d: "+format, append([]any{c.idx}, a...)...))
}

func (c *loadClient) mis(format string, a ...any) {
	c.mismatch = append(c.mismatch, fmt.Sprintf("run %d: "+format, append([]any{c.idx}, a...)...))
}

type loadEvent struct {
	Type              string        `json:"type"`
	RunID             string        `json:"run_id"`
	Sequence          int64         `json:"sequence"`
	MessageID         string        `json:"message_id"`
	Text              string        `json:"text"`
	RunStatus         string        `json:"run_status"`
	Error             string        `json:"error"`
	Code              string        `json:"code"`
	Messages          []loadMessage `json:"messages"`
	MessageRepository *struct {
		HeadID   string `json:"headId"`
		Messages []struct {
			Message loadMessage `json:"message"`
		} `json:"messages"`
	} `json:"messageRepository"`
}

type loadMessage struct {
	ID      string `json:"id"`
	Role    string `json:"role"`
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
}

func (m loadMessage) text() string {
	var b strings.Builder
	for _, p := range m.Content {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// loadTarget is the service under load.
type loadTarget struct {
	base  string
	pid   int
	dbURL string // the service's database, "" if unknown
	child *loadChild
	key   string
}

// stats counters shown in progress lines.
type loadProgress struct {
	started, streaming, done, failed, rejoins atomic.Int64
	tokens                                    atomic.Int64
}

// Run runs `threadline-bench load` with args; one JSON line per K goes to
// stdout, then the summary, and progress to stderr. It fails on bad flags,
// when no Postgres or service can be had, or when --timeout cuts it short.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	o, err := parseLoadOpts(args, getenv, stderr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	loadRaiseNofile(stderr)
	stopProfile, err := bench.StartProfile(o.selfProfile)
	if err != nil {
		return fmt.Errorf("bench load: %w", err)
	}
	defer stopProfile()

	if (o.url == "" && !o.floor) || o.dbURL != "" {
		if o.dbURL == "" {
			fmt.Fprintln(stderr, "bench load: no --database-url / $THREADLINE_DATABASE_URL; starting the project's own Postgres")
			if o.dbURL, err = bench.OwnCluster(ctx, stderr); err != nil {
				return err
			}
		}
	}
	if o.url == "" && o.serverBin == "" {
		if o.serverBin, err = defaultServerBin(o.floor); err != nil {
			return err
		}
	}
	pgver := "unknown"
	if o.dbURL != "" {
		conn, err := pgx.Connect(ctx, o.dbURL)
		if err != nil {
			return fmt.Errorf("connect to %s: %w", bench.RedactURL(o.dbURL), err)
		}
		pgver = bench.PGVersion(ctx, conn)
		if o.url == "" && !o.floor {
			loadDropStale(ctx, conn, stderr)
		}
		conn.Close(ctx)
	}
	machine, commit := bench.MachineInfo(), bench.GitCommit()
	var results []Result
	enc := json.NewEncoder(stdout)
	for _, k := range o.ks {
		if ctx.Err() != nil {
			break
		}
		res, err := loadOne(ctx, o, k, stderr)
		if err != nil {
			return fmt.Errorf("k=%d: %w", k, err)
		}
		res.Machine, res.Commit, res.Postgres, res.GoVersion = machine, commit, pgver, runtime.Version()
		results = append(results, res)
		if err := enc.Encode(res); err != nil {
			return err
		}
	}
	sum := loadSummarize(results, o)
	sum.Machine, sum.Commit, sum.Postgres, sum.GoVersion = machine, commit, pgver, runtime.Version()
	if err := enc.Encode(sum); err != nil {
		return err
	}
	if ctx.Err() != nil && len(results) < len(o.ks) {
		return fmt.Errorf("bench load: --timeout %s reached after %d of %d sizes", o.timeout, len(results), len(o.ks))
	}
	return nil
}

// Summary is the last line of stdout.
type Summary struct {
	Bench     string        `json:"bench"`
	Summary   bool          `json:"summary"`
	Ks        []int         `json:"ks"`
	AllGood   bool          `json:"all_meet_goal"`
	BreaksAt  *int          `json:"breaks_at_k"`
	BreakWhy  string        `json:"break_reason"`
	Goal      string        `json:"goal"`
	Results   []Result      `json:"results"`
	Machine   bench.Machine `json:"machine"`
	Postgres  string        `json:"postgres"`
	GoVersion string        `json:"go_version"`
	Commit    string        `json:"commit"`
}

func loadSummarize(rs []Result, o loadOpts) Summary {
	s := Summary{Bench: "load", Summary: true, Ks: o.ks, AllGood: len(rs) == len(o.ks), Results: rs,
		Goal: fmt.Sprintf("every run completes, every token delivered exactly once, p99 added delay < %d ms (stretch %d ms)", loadGoalP99MS, loadStretchP99MS)}
	if s.Results == nil {
		s.Results = []Result{}
	}
	for _, r := range rs {
		if r.MeetsGoal {
			continue
		}
		s.AllGood = false
		if s.BreaksAt == nil {
			k := r.K
			s.BreaksAt = &k
			var why []string
			if r.RunsFailed > 0 {
				why = append(why, fmt.Sprintf("%d runs failed", r.RunsFailed))
			}
			if !r.ExactlyOnce {
				why = append(why, fmt.Sprintf("exactly-once violated (%d mismatches, %d of %d tokens delivered)", r.Mismatches, r.TokensDelivered, r.TokensExpected))
			}
			if r.AddedDelayMS.P99 >= loadGoalP99MS {
				why = append(why, fmt.Sprintf("p99 added delay %.1f ms", r.AddedDelayMS.P99))
			}
			s.BreakWhy = strings.Join(why, "; ")
		}
	}
	if len(rs) < len(o.ks) {
		s.BreakWhy = strings.TrimPrefix(s.BreakWhy+"; timeout before every size ran", "; ")
	}
	return s
}

// loadOne measures one K.
func loadOne(ctx context.Context, o loadOpts, k int, stderr io.Writer) (Result, error) {
	interval := time.Duration(float64(time.Second) / o.rate)
	res := Result{Bench: "load", K: k, TokensPerRun: o.tokens, RateTokensPerS: o.rate, RejoinShare: o.rejoinShare,
		DelayMethod: loadDelayMethod, Errors: []string{}, Warmup: o.warmup}
	if o.ramp > 0 {
		res.Ramp = fmt.Sprintf("spread: run i starts at i/K x %s", o.ramp)
	} else {
		res.Ramp = "all at once"
	}
	// The last run starts at (K-1)/K of the ramp and takes tokens/rate.
	ideal := time.Duration(float64(o.ramp)*float64(k-1)/float64(k)) + time.Duration(o.tokens)*interval
	res.IdealS = bench.Round(ideal.Seconds(), 3)
	budget := o.ramp + 3*time.Duration(o.tokens)*interval + 60*time.Second
	kctx, kcancel := context.WithTimeout(ctx, budget)
	defer kcancel()

	// The service.
	var tgt loadTarget
	if o.floor {
		child, err := loadStartChild(ctx, o, k, "", interval, stderr)
		if err != nil {
			return res, err
		}
		defer child.stop(stderr)
		tgt = loadTarget{base: "http://" + child.addr, pid: child.cmd.Process.Pid, child: child}
		res.Target = "child: " + o.serverBin + " floor on " + child.addr + " (the floor: in memory, no database, no durability)"
	} else if o.url == "" {
		dbName, err := loadCreateDB(ctx, o.dbURL, k)
		if err != nil {
			return res, err
		}
		defer loadDropDB(o.dbURL, dbName, stderr)
		child, err := loadStartChild(ctx, o, k, store.WithDatabase(o.dbURL, dbName), interval, stderr)
		if err != nil {
			return res, err
		}
		defer child.stop(stderr)
		tgt = loadTarget{base: "http://" + child.addr, pid: child.cmd.Process.Pid, dbURL: store.WithDatabase(o.dbURL, dbName), child: child}
		res.Target = "child: " + o.serverBin + " serve on " + child.addr + ", fresh database " + dbName
		n := o.dbMaxConns
		res.DBMaxConns = &n
	} else {
		tgt = loadTarget{base: o.url, pid: o.serverPID, dbURL: o.dbURL, key: o.apiKey}
		res.Target = "running service at " + o.url
	}

	var dials atomic.Int64
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return dialer.DialContext(ctx, network, addr)
		},
		MaxIdleConns:          0,
		MaxIdleConnsPerHost:   k + 64,
		MaxConnsPerHost:       0,
		IdleConnTimeout:       30 * time.Second,
		DisableCompression:    true,
		ResponseHeaderTimeout: 2 * time.Minute,
		ReadBufferSize:        16 << 10,
	}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}

	if o.warmup {
		loadWarmup(kctx, hc, tgt, o.dbMaxConns)
	}
	if o.preconnect {
		res.Preconnected = loadPreconnect(kctx, hc, tgt, k, &dials)
	}
	// Before.
	metricsBefore, _ := loadScrape(kctx, hc, tgt)
	dbBefore, dbErr := loadDBSize(kctx, tgt.dbURL)
	backendsBefore := loadBackendCPU(kctx, tgt.dbURL)
	cpuBefore, cpuOK := loadProcCPU(tgt.pid)
	machBefore, machOK := loadMachineCPU()
	clientBefore := loadSelfCPU()

	// The clients.
	rng := rand.New(rand.NewPCG(o.seed, uint64(k)))
	clients := make([]*loadClient, k)
	drops := int(math.Round(o.rejoinShare * float64(k)))
	dropSet := rng.Perm(k)[:drops]
	for i := range clients {
		clients[i] = &loadClient{idx: i, threadID: uuid.New(), prompt: fmt.Sprintf("bench load %d of %d, seed %d", i+1, k, o.seed),
			start: time.Duration(float64(o.ramp) * float64(i) / float64(k))}
	}
	for _, i := range dropSet {
		c := clients[i]
		lo, hi := max(1, o.tokens/5), max(2, o.tokens*3/5) // drop after 20-60% of the tokens
		c.dropAt = lo + rng.IntN(max(1, hi-lo))
		c.dropAt = min(c.dropAt, o.tokens-1)
		c.pause = time.Duration(rng.Int64N(int64(o.rejoinPause) + 1))
	}
	fmt.Fprintf(stderr, "bench load: k=%d tokens=%d rate=%g/s ramp=%s rejoin=%d target=%s\n", k, o.tokens, o.rate, o.ramp, drops, tgt.base)
	var prog loadProgress
	t0 := time.Now()
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			loadRunClient(kctx, hc, tgt, c, o, &prog, t0)
		}()
	}
	doneCh := make(chan struct{})
	go func() { wg.Wait(); close(doneCh) }()
	tick := time.NewTicker(2 * time.Second)
	for waiting := true; waiting; {
		select {
		case <-doneCh:
			waiting = false
		case <-tick.C:
			fmt.Fprintf(stderr, "bench load: k=%d t=%.0fs started=%d streaming=%d done=%d failed=%d rejoins=%d tokens=%d/%d\n",
				k, time.Since(t0).Seconds(), prog.started.Load(), prog.streaming.Load(), prog.done.Load(), prog.failed.Load(),
				prog.rejoins.Load(), prog.tokens.Load(), int64(k)*int64(o.tokens))
		}
	}
	tick.Stop()
	wall := time.Since(t0)
	res.WallS = bench.Round(wall.Seconds(), 3)

	// After: the process figures first, before anything else loads the server.
	clientAfter := loadSelfCPU()
	res.ClientCPUS = bench.Round(clientAfter-clientBefore, 3)
	if machOK {
		if after, ok := loadMachineCPU(); ok {
			u := bench.Round(after.busyCores(machBefore), 3)
			res.MachineCPUUtil = &u
		}
	}
	if cpuOK {
		if after, ok := loadProcCPU(tgt.pid); ok {
			s := bench.Round(after-cpuBefore, 3)
			u := bench.Round(s/wall.Seconds(), 3)
			res.ServerCPUS, res.ServerCPUUtil = &s, &u
		}
		if peak, end, ok := loadProcRSS(tgt.pid); ok {
			res.ServerRSSPeakMB, res.ServerRSSEndMB = &peak, &end
		}
		res.ServerStats = fmt.Sprintf("/proc/%d (utime+stime over the load window; VmHWM since the process started; VmRSS at the end)", tgt.pid)
	}
	if backendsBefore != nil {
		if after := loadBackendCPU(ctx, tgt.dbURL); after != nil {
			var s float64
			for pid, v := range after {
				s += v - backendsBefore[pid] // new backends count from 0
			}
			s = bench.Round(s, 3)
			res.DBBackendCPUS = &s
		}
	}
	metricsAfter, merr := loadScrape(ctx, hc, tgt)
	if merr == nil && metricsBefore != nil {
		res.ServerDelay = loadHistogram(metricsBefore, metricsAfter, "threadline_token_publish_delay_seconds", "threadline_tokens_published_total")
		res.ServerSched = loadSchedLatency(metricsBefore, metricsAfter)
		if m, ok := metricsAfter["threadline_db_pool_max_conns"]; ok {
			p := &loadPool{MaxConns: m, ConnsFrom: metricsBefore["threadline_db_pool_total_conns"], ConnsTo: metricsAfter["threadline_db_pool_total_conns"],
				Acquires: metricsAfter["threadline_db_pool_acquire_total"] - metricsBefore["threadline_db_pool_acquire_total"],
				WaitS:    bench.Round(metricsAfter["threadline_db_pool_acquire_seconds_total"]-metricsBefore["threadline_db_pool_acquire_seconds_total"], 3)}
			if p.Acquires > 0 {
				p.MeanWaitM = bench.Round(p.WaitS/p.Acquires*1000, 3)
			}
			res.ServerPool = p
		}
		if !cpuOK {
			if a, ok := metricsAfter["process_cpu_seconds_total"]; ok {
				s := bench.Round(a-metricsBefore["process_cpu_seconds_total"], 3)
				u := bench.Round(s/wall.Seconds(), 3)
				res.ServerCPUS, res.ServerCPUUtil = &s, &u
				if rss, ok := metricsAfter["process_resident_memory_bytes"]; ok {
					e := bench.Round(rss/(1<<20), 1)
					res.ServerRSSEndMB = &e
				}
				res.ServerStats = "/metrics process_cpu_seconds_total and process_resident_memory_bytes (no --server-pid: peak RSS unknown)"
			}
		}
	}
	if res.ServerStats == "" {
		res.ServerStats = "unknown (give --server-pid)"
	}
	if dbErr == nil {
		if after, err := loadDBSize(ctx, tgt.dbURL); err == nil {
			g := after - dbBefore
			per := bench.Round(float64(g)/float64(k), 1)
			res.DBGrowthBytes, res.DBGrowthPerRun = &g, &per
		}
	}
	// created_at of every run, for the upper bound of the delay.
	loadFetchCreated(ctx, hc, tgt, clients)
	if tgt.child != nil {
		res.ServerLogErrors, res.ServerLogWarns = tgt.child.levels()
		for _, l := range tgt.child.firstProblems(5) {
			res.Errors = append(res.Errors, "server log: "+l)
		}
	}

	loadCheck(&res, clients, o, interval)
	res.MeetsGoal = res.RunsFailed == 0 && res.ExactlyOnce && res.AddedDelayMS.Samples > 0 && res.AddedDelayMS.P99 < loadGoalP99MS
	res.MeetsStretch = res.MeetsGoal && res.AddedDelayMS.P99 < loadStretchP99MS
	fmt.Fprintf(stderr, "bench load: k=%d done in %.1fs: completed=%d failed=%d tokens=%d/%d exactly_once=%v delay p50/p99/max=%.2f/%.2f/%.2f ms (upper bound p99 %.2f)\n",
		k, wall.Seconds(), res.RunsCompleted, res.RunsFailed, res.TokensDelivered, res.TokensExpected, res.ExactlyOnce,
		res.AddedDelayMS.P50, res.AddedDelayMS.P99, res.AddedDelayMS.Max, res.AddedDelayUpper.P99)
	return res, nil
}

// loadRunClient runs one client: the run's stream, maybe a drop and a
// rejoin, and rejoins after a stream that ends early (as the web app does).
func loadRunClient(ctx context.Context, hc *http.Client, tgt loadTarget, c *loadClient, o loadOpts, prog *loadProgress, t0 time.Time) {
	c.arrivals = make([]time.Time, o.tokens+2)
	c.conns = make([]int8, o.tokens+2)
	defer func() {
		if len(c.errs) > 0 || !c.finalSet {
			prog.failed.Add(1)
		} else {
			prog.done.Add(1)
		}
	}()
	if d := time.Until(t0.Add(c.start)); d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			c.fail("not started: %v", ctx.Err())
			return
		}
	}
	prog.started.Add(1)
	body := fmt.Sprintf(`{"message":{"content":%q},"on_disconnect":"continue"}`, c.prompt)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, tgt.base+"/api/v1/threads/"+c.threadID.String()+"/runs/stream", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/x-ndjson")
	if tgt.key != "" {
		req.Header.Set("Authorization", "Bearer "+tgt.key)
	}
	conn := 0
	dropAt := c.dropAt
	for {
		sent := time.Now()
		c.connSent = append(c.connSent, sent)
		if conn == 0 {
			c.sent = sent
		}
		resp, err := hc.Do(req)
		if err != nil {
			c.fail("connection %d: %v", conn, err)
			return
		}
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			resp.Body.Close()
			c.fail("connection %d: status %d: %s", conn, resp.StatusCode, bytes.TrimSpace(b))
			return
		}
		prog.streaming.Add(1)
		dropped, err := loadRead(resp.Body, c, conn, dropAt, prog)
		resp.Body.Close()
		prog.streaming.Add(-1)
		if c.finalSet {
			return
		}
		if ctx.Err() != nil {
			c.fail("stream cut by the time bound at sequence %d", c.lastSeq)
			return
		}
		if c.runID == "" {
			c.fail("connection %d ended before the first event: %v", conn, err)
			return
		}
		pause := c.pause
		if dropped {
			c.rejoined = true
		} else {
			// Not planned: the stream ended early or broke.
			c.unplanned++
			if c.unplanned > 3 {
				c.fail("stream ended early %d times; last at sequence %d: %v", c.unplanned, c.lastSeq, err)
				return
			}
			pause = 100 * time.Millisecond
		}
		prog.rejoins.Add(1)
		dropAt = 0
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			c.fail("not rejoined: %v", ctx.Err())
			return
		}
		conn++
		u := fmt.Sprintf("%s/api/v1/threads/%s/runs/%s/stream?after=%d", tgt.base, c.threadID, c.runID, c.lastSeq)
		req, _ = http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		req.Header.Set("Accept", "application/x-ndjson")
		if tgt.key != "" {
			req.Header.Set("Authorization", "Bearer "+tgt.key)
		}
	}
}

// loadRead reads one connection's NDJSON lines, each stamped when its line
// is complete. It returns dropped=true when the client hung up on purpose.
func loadRead(body io.Reader, c *loadClient, conn, dropAt int, prog *loadProgress) (dropped bool, err error) {
	br := bufio.NewReaderSize(body, 32<<10)
	read := 0
	var long []byte
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long, line...)
			continue
		}
		now := time.Now()
		if long != nil {
			line = append(long, line...)
			long = nil
		}
		if len(bytes.TrimSpace(line)) == 0 {
			if err != nil {
				if err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return false, err
			}
			continue
		}
		if err != nil {
			// A last line without its newline: the stream was cut.
			return false, fmt.Errorf("partial line: %w", err)
		}
		var ev loadEvent
		if err := loadDecode(line, &ev); err != nil {
			c.mis("connection %d: bad line %.80q: %v", conn, line, err)
			return false, err
		}
		if ev.Sequence != c.lastSeq+1 {
			c.mis("connection %d: sequence %d after %d (gap or repeat)", conn, ev.Sequence, c.lastSeq)
		}
		if ev.Sequence > c.lastSeq {
			c.lastSeq = ev.Sequence
		}
		switch ev.Type {
		case "snapshot":
			if c.runID == "" {
				c.runID, c.firstAt = ev.RunID, now
				if ev.MessageRepository != nil {
					c.msgID = ev.MessageRepository.HeadID
				}
			}
			if ev.RunStatus != "running" && ev.RunStatus != "" {
				c.final, c.finalSet = ev.RunStatus, true
				for _, m := range ev.Messages {
					if m.ID == c.msgID {
						c.finalTxt = m.text()
					}
				}
				return false, nil
			}
		case "token":
			c.tokens++
			prog.tokens.Add(1)
			if ev.MessageID != c.msgID {
				c.mis("token %d names message %s, want %s", ev.Sequence, ev.MessageID, c.msgID)
			}
			if s := ev.Sequence; s >= 0 && s < int64(len(c.arrivals)) && c.arrivals[s].IsZero() {
				c.arrivals[s], c.conns[s] = now, int8(min(conn, 127))
				c.text.WriteString(ev.Text)
			} else {
				c.mis("token sequence %d repeated or out of range", s)
			}
			read++
			if dropAt > 0 && read >= dropAt {
				return true, nil
			}
		case "error":
			c.fail("error event %s: %s", ev.Code, ev.Error)
		}
		if ev.RunID != c.runID {
			c.mis("event %d names run %s, want %s", ev.Sequence, ev.RunID, c.runID)
		}
	}
}

// loadDecode decodes one NDJSON line as encoding/json would. Token lines
// in the exact layout the service writes, with a text that needs no
// unescaping, take a direct path: they are nearly every line, and
// encoding/json's reflection was a quarter of the load generator's CPU,
// taken from the same two cores as the service it measures.
func loadDecode(line []byte, ev *loadEvent) error {
	if loadFastToken(line, ev) {
		return nil
	}
	*ev = loadEvent{}
	return json.Unmarshal(line, ev)
}

func loadFastToken(line []byte, ev *loadEvent) bool {
	b, ok := bytes.CutPrefix(bytes.TrimRight(line, "\n"), []byte(`{"type":"token","run_id":"`))
	if !ok || len(b) < 36 || !loadPlainUUID(b[:36]) {
		return false
	}
	runID := b[:36]
	if b, ok = bytes.CutPrefix(b[36:], []byte(`","sequence":`)); !ok {
		return false
	}
	n := 0
	for n < len(b) && n < 18 && b[n] >= '0' && b[n] <= '9' {
		n++
	}
	if n == 0 || n > 1 && b[0] == '0' {
		return false
	}
	seq, err := strconv.ParseInt(string(b[:n]), 10, 64)
	if err != nil {
		return false
	}
	if b, ok = bytes.CutPrefix(b[n:], []byte(`,"message_id":"`)); !ok || len(b) < 36 || !loadPlainUUID(b[:36]) {
		return false
	}
	msgID := b[:36]
	if b, ok = bytes.CutPrefix(b[36:], []byte(`","text":"`)); !ok {
		return false
	}
	text, ok := bytes.CutSuffix(b, []byte(`"}`))
	if !ok || !utf8.Valid(text) {
		return false
	}
	for _, c := range text {
		if c < 0x20 || c == '"' || c == '\\' {
			return false // escapes and quotes: encoding/json decides
		}
	}
	*ev = loadEvent{Type: "token", RunID: string(runID), Sequence: seq, MessageID: string(msgID), Text: string(text)}
	return true
}

// loadPlainUUID reports whether b is 36 bytes of hex digits and dashes:
// nothing a JSON string would escape.
func loadPlainUUID(b []byte) bool {
	for _, c := range b {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' || c == '-') {
			return false
		}
	}
	return true
}

// loadWarmup sends rounds of concurrent light requests that each take a
// database connection (thread list, an unknown thread, readiness), so the
// measured window does not pay for opening the pool's connections.
// loadPreconnect leaves n keep-alive connections idle in the client's
// transport: n concurrent light requests that each keep their response
// unread (so their connection busy) until all n have one, which makes the
// transport dial a connection for each, then release them together. It
// returns how many connections the transport dialed in all.
func loadPreconnect(ctx context.Context, hc *http.Client, tgt loadTarget, n int, dials *atomic.Int64) int {
	var got, done sync.WaitGroup
	release := make(chan struct{})
	for range n {
		got.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, tgt.base+"/healthz", nil)
			resp, err := hc.Do(req)
			got.Done()
			if err != nil {
				return
			}
			select {
			case <-release:
			case <-ctx.Done():
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}()
	}
	got.Wait()
	close(release)
	done.Wait()
	return int(dials.Load())
}

func loadWarmup(ctx context.Context, hc *http.Client, tgt loadTarget, conns int) {
	paths := []string{"/api/v1/threads?limit=1", "/api/v1/threads/" + uuid.NewString() + "/messages", "/readyz"}
	for round := 0; round < 3; round++ {
		var wg sync.WaitGroup
		for i := 0; i < 2*max(conns, 8); i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, tgt.base+paths[i%len(paths)], nil)
				if tgt.key != "" {
					req.Header.Set("Authorization", "Bearer "+tgt.key)
				}
				if resp, err := hc.Do(req); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}()
		}
		wg.Wait()
	}
}

// loadFetchCreated reads each run's created_at.
func loadFetchCreated(ctx context.Context, hc *http.Client, tgt loadTarget, clients []*loadClient) {
	ch := make(chan *loadClient)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range ch {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, tgt.base+"/api/v1/threads/"+c.threadID.String()+"/runs/"+c.runID, nil)
				if tgt.key != "" {
					req.Header.Set("Authorization", "Bearer "+tgt.key)
				}
				resp, err := hc.Do(req)
				if err != nil {
					continue
				}
				var r struct {
					CreatedAt time.Time `json:"created_at"`
				}
				if resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&r) == nil {
					c.created = r.CreatedAt
				}
				resp.Body.Close()
			}
		}()
	}
	for _, c := range clients {
		if c.runID != "" {
			ch <- c
		}
	}
	close(ch)
	wg.Wait()
}

// loadCheck folds the clients into res: completion, exactly-once, delays.
func loadCheck(res *Result, clients []*loadClient, o loadOpts, interval time.Duration) {
	res.RunsStarted = len(clients)
	res.TokensExpected = int64(len(clients)) * int64(o.tokens)
	res.ExactlyOnce = true
	var lower, upper, slipFree, slips, gaps, first, span, all, before, after []float64
	var bySecond [][]float64
	var mism []string
	iv := interval.Seconds() * 1000
	var t0 time.Time // the first POST
	for _, c := range clients {
		if t0.IsZero() || (!c.sent.IsZero() && c.sent.Before(t0)) {
			t0 = c.sent
		}
	}
	// The window in which every run streams: after the last POST (and the
	// start burst it ends) and before the first run's last token.
	var allFrom, allTo time.Time
	for _, c := range clients {
		allFrom = later(allFrom, c.sent)
		if n := len(c.arrivals); n > 0 && !c.arrivals[n-1].IsZero() && (allTo.IsZero() || c.arrivals[n-1].Before(allTo)) {
			allTo = c.arrivals[n-1]
		}
	}
	allFrom = allFrom.Add(500 * time.Millisecond)
	for _, c := range clients {
		res.TokensDelivered += c.tokens
		if c.rejoined {
			res.Rejoined++
		}
		res.UnplannedRejoins += c.unplanned
		ok := len(c.errs) == 0 && c.finalSet && c.final == "succeeded"
		if c.finalSet && c.final != "succeeded" {
			c.fail("final run_status %q", c.final)
		}
		if !c.finalSet && len(c.errs) == 0 {
			c.fail("no final snapshot")
		}
		// Exactly once: every token sequence 2..tokens+1 once, the text the
		// final snapshot holds, and the text the built-in model makes.
		if c.finalSet {
			want := model.BuiltinText(c.prompt, 1, o.tokens)
			if c.tokens != int64(o.tokens) {
				c.mis("%d token events, want %d", c.tokens, o.tokens)
			}
			for s := 2; s < o.tokens+2; s++ {
				if c.arrivals[s].IsZero() {
					c.mis("token sequence %d never read", s)
					break
				}
			}
			if got := c.text.String(); got != c.finalTxt {
				c.mis("streamed text (%d bytes) differs from the final snapshot's (%d bytes)", len(got), len(c.finalTxt))
			} else if got != want {
				c.mis("streamed text (%d bytes) differs from the built-in model's (%d bytes)", len(got), len(want))
			}
			if c.lastSeq != int64(o.tokens)+2 {
				c.mis("last sequence %d, want %d", c.lastSeq, o.tokens+2)
			}
		} else if c.tokens > 0 {
			c.mis("%d tokens read but the run never ended for the client", c.tokens)
		}
		if len(c.mismatch) > 0 {
			res.ExactlyOnce = false
			res.Mismatches += len(c.mismatch)
			mism = append(mism, c.mismatch...)
		}
		if ok && len(c.errs) == 0 {
			res.RunsCompleted++
		} else {
			res.RunsFailed++
			res.Errors = append(res.Errors, c.errs...)
		}
		if !c.finalSet || c.firstAt.IsZero() {
			continue
		}
		first = append(first, c.firstAt.Sub(c.sent).Seconds()*1000)
		// o[s] is when token s was read minus its place on the model's
		// schedule (token with sequence s is tick s-1), in ms after the POST.
		ms := func(t time.Time) float64 { return t.Sub(c.sent).Seconds() * 1000 }
		n := len(c.arrivals)
		o := make([]float64, n)
		anchor := ms(c.firstAt) // the latest start the observations allow
		var last float64
		for s := 2; s < n; s++ {
			o[s] = math.NaN()
			if a := c.arrivals[s]; !a.IsZero() {
				o[s] = ms(a) - float64(s-1)*iv
				anchor = min(anchor, o[s])
				last = max(last, ms(a))
			}
		}
		// suffix[s] = min o over tokens s.. : the latest start consistent
		// with the later tokens if the model may only fall behind.
		suffix := make([]float64, n+1)
		suffix[n] = math.Inf(1)
		for s := n - 1; s >= 2; s-- {
			suffix[s] = suffix[s+1]
			if !math.IsNaN(o[s]) {
				suffix[s] = min(suffix[s], o[s])
			}
		}
		// The model's slip: how far the schedule's floor rose from the
		// first tenth of the run to the last.
		tenth := max(1, (n-2)/10)
		head, tail := math.Inf(1), math.Inf(1)
		for s := 2; s < n; s++ {
			if math.IsNaN(o[s]) {
				continue
			}
			if s < 2+tenth {
				head = min(head, o[s])
			}
			if s >= n-tenth {
				tail = min(tail, o[s])
			}
		}
		if !math.IsInf(head, 1) && !math.IsInf(tail, 1) {
			slips = append(slips, max(0, tail-head))
		}
		span = append(span, last)
		up := 0.0 // the POST
		if !c.created.IsZero() && c.created.After(c.sent) {
			up = ms(c.created)
		}
		gaps = append(gaps, anchor-up)
		for s := 2; s < n; s++ {
			if math.IsNaN(o[s]) {
				continue
			}
			if cn := int(c.conns[s]); cn > 0 && anchor+float64(s-1)*iv < ms(c.connSent[cn]) {
				continue // produced before the client asked again: not a live token
			}
			lower = append(lower, o[s]-anchor)
			if anchor+float64(s-1)*iv < ms(c.firstAt) {
				before = append(before, o[s]-anchor)
			} else {
				after = append(after, o[s]-anchor)
			}
			if sec := int(c.arrivals[s].Sub(t0) / time.Second); sec >= 0 {
				for len(bySecond) <= sec {
					bySecond = append(bySecond, nil)
				}
				bySecond[sec] = append(bySecond[sec], o[s]-anchor)
			}
			if a := c.arrivals[s]; a.After(allFrom) && a.Before(allTo) {
				all = append(all, o[s]-anchor)
			}
			slipFree = append(slipFree, o[s]-suffix[s])
			upper = append(upper, o[s]-up)
		}
	}
	res.SlipFreeMS = loadPercentiles(slipFree)
	res.AllStreamingMS = loadPercentiles(all)
	res.BeforeFirstMS = loadPercentiles(before)
	res.AfterFirstMS = loadPercentiles(after)
	res.BySecond = []loadSecond{}
	for sec, v := range bySecond {
		if len(v) > 0 {
			res.BySecond = append(res.BySecond, loadSecond{sec, loadPercentiles(v)})
		}
	}
	res.ModelSlipMS = loadPercentiles(slips)
	res.AddedDelayMS = loadPercentiles(lower)
	res.AddedDelayUpper = loadPercentiles(upper)
	res.AnchorGapMS = loadPercentiles(gaps)
	res.FirstEventMS = loadPercentiles(first)
	res.RunSpanMS = loadPercentiles(span)
	if len(res.Errors) > 20 {
		res.Errors = append(res.Errors[:20], fmt.Sprintf("… and %d more", len(res.Errors)-20))
	}
	if len(mism) > 10 {
		mism = append(mism[:10], fmt.Sprintf("… and %d more", len(mism)-10))
	}
	for _, m := range mism {
		res.Errors = append(res.Errors, "mismatch: "+m)
	}
	if res.TokensDelivered != res.TokensExpected {
		res.ExactlyOnce = false
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// ---- the child service ----

type loadChild struct {
	cmd  *exec.Cmd
	addr string
	mu   sync.Mutex
	errN int
	warn int
	prob []string
	done chan struct{}
}

func loadStartChild(ctx context.Context, o loadOpts, k int, dbURL string, interval time.Duration, stderr io.Writer) (*loadChild, error) {
	port, err := loadFreePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	cmd := exec.Command(o.serverBin, "serve")
	if o.floor {
		cmd = exec.Command(o.serverBin, "floor")
	}
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "THREADLINE_") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env,
		"THREADLINE_ADDR="+addr,
		"THREADLINE_DATABASE_URL="+dbURL,
		"THREADLINE_BUILTIN_DELAY="+interval.String(),
		"THREADLINE_BUILTIN_TOKENS="+strconv.Itoa(o.tokens),
		"THREADLINE_DEFAULT_MODEL=builtin",
		"THREADLINE_LOG_LEVEL=warn",
		"THREADLINE_DB_MAX_CONNS="+strconv.Itoa(o.dbMaxConns),
		"THREADLINE_RATE_LIMIT=0",
	)
	if o.cpuProfile != "" {
		cmd.Env = append(cmd.Env, "THREADLINE_CPU_PROFILE="+o.cpuProfile+".k"+strconv.Itoa(k))
	}
	pipe, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", strings.Join(cmd.Args, " "), err)
	}
	c := &loadChild{cmd: cmd, addr: addr, done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(pipe)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			c.note(sc.Text())
		}
		_ = cmd.Wait()
		close(c.done)
	}()
	// Ready when /readyz answers 200.
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-c.done:
			return nil, fmt.Errorf("the service exited during start: %s", strings.Join(c.firstProblems(5), " | "))
		default:
		}
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		req, _ := http.NewRequestWithContext(rctx, http.MethodGet, "http://"+addr+"/readyz", nil)
		resp, err := http.DefaultClient.Do(req)
		cancel()
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return c, nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			c.stop(stderr)
			return nil, fmt.Errorf("the service on %s was not ready within 60s: %s", addr, strings.Join(c.firstProblems(5), " | "))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *loadChild) note(line string) {
	var rec struct {
		Level string `json:"level"`
		Msg   string `json:"msg"`
		Err   string `json:"err"`
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if json.Unmarshal([]byte(line), &rec) != nil {
		rec.Level, rec.Msg = "ERROR", line // not JSON: a panic or the like
	}
	switch rec.Level {
	case "ERROR":
		c.errN++
	case "WARN":
		c.warn++
	default:
		return
	}
	if len(c.prob) < 20 {
		c.prob = append(c.prob, strings.TrimSpace(rec.Level+" "+rec.Msg+" "+rec.Err))
	}
}

func (c *loadChild) levels() (errs, warns int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.errN, c.warn
}

func (c *loadChild) firstProblems(n int) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.prob[:min(n, len(c.prob))])
}

// stop sends SIGTERM, then SIGKILL after 20s.
func (c *loadChild) stop(stderr io.Writer) {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(20 * time.Second):
		fmt.Fprintln(stderr, "bench load: the service did not stop within 20s of SIGTERM; killing it")
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// defaultServerBin is the binary a child runs when --server-bin is not
// given: with floor, this executable (`threadline-bench floor`); else the
// service, threadline, beside this executable (bin/threadline next to
// bin/threadline-bench) or on $PATH.
func defaultServerBin(floor bool) (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find this executable: %w", err)
	}
	if floor {
		return exe, nil
	}
	if r, err := filepath.EvalSymlinks(exe); err == nil {
		exe = r
	}
	if p := filepath.Join(filepath.Dir(exe), "threadline"); isExecutable(p) {
		return p, nil
	}
	if p, err := exec.LookPath("threadline"); err == nil {
		return p, nil
	}
	return "", errors.New("bench load: no threadline binary beside this one or on $PATH; build it (go build -o bin/threadline ./cmd/threadline) or give --server-bin")
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

func loadFreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// ---- databases ----

const loadDBPrefix = "tl_bench_load_"

// loadCreateDB creates a fresh, empty database; the service migrates it.
func loadCreateDB(ctx context.Context, admin string, k int) (string, error) {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", fmt.Errorf("connect to %s: %w", bench.RedactURL(admin), err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	name := fmt.Sprintf("%s%s_%d_k%d_%06d", loadDBPrefix, time.Now().UTC().Format("20060102"), os.Getpid(), k, rand.IntN(1e6))
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE template0"); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	return name, nil
}

func loadDropDB(admin, name string, stderr io.Writer) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err == nil {
		_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
		conn.Close(ctx)
	}
	if err != nil {
		fmt.Fprintf(stderr, "bench load: drop database %s: %v\n", name, err)
	}
}

// loadDropStale drops databases of earlier bench load processes that died
// (their names carry the process id), best effort.
func loadDropStale(ctx context.Context, conn *pgx.Conn, stderr io.Writer) {
	rows, err := conn.Query(ctx, "SELECT datname FROM pg_database WHERE datname LIKE $1", loadDBPrefix+"%")
	if err != nil {
		return
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return
	}
	for _, n := range names {
		parts := strings.Split(strings.TrimPrefix(n, loadDBPrefix), "_")
		if len(parts) < 2 {
			continue
		}
		pid, err := strconv.Atoi(parts[1])
		if err != nil || pid == os.Getpid() || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue
		}
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{n}.Sanitize()+" WITH (FORCE)"); err == nil {
			fmt.Fprintf(stderr, "bench load: dropped %s, left by an earlier run\n", n)
		}
	}
}

func loadDBSize(ctx context.Context, dbURL string) (int64, error) {
	if dbURL == "" {
		return 0, errors.New("no database URL")
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var n int64
	err = conn.QueryRow(ctx, "SELECT pg_database_size(current_database())").Scan(&n)
	return n, err
}

// loadBackendCPU returns the CPU seconds of every Postgres backend serving
// the database, by pid, when Postgres runs on this machine (nil otherwise).
func loadBackendCPU(ctx context.Context, dbURL string) map[int]float64 {
	if dbURL == "" {
		return nil
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")
	if err != nil {
		return nil
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil
	}
	out := map[int]float64{}
	for _, p := range pids {
		if s, ok := loadProcCPU(int(p)); ok {
			out[int(p)] = s
		}
	}
	if len(pids) > 0 && len(out) == 0 {
		return nil // not on this machine
	}
	return out
}

// ---- /proc ----

// clock ticks per second of /proc/<pid>/stat; 100 on every Linux
// configuration Go supports.
const loadClkTck = 100

func loadProcCPU(pid int) (float64, bool) {
	if pid <= 0 {
		return 0, false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// The command name may hold spaces; fields follow the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	ut, err1 := strconv.ParseFloat(f[11], 64) // field 14
	st, err2 := strconv.ParseFloat(f[12], 64) // field 15
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return (ut + st) / loadClkTck, true
}

func loadProcRSS(pid int) (peakMB, endMB float64, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, false
	}
	var n int
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "VmHWM:":
			peakMB, n = bench.Round(kb/1024, 1), n+1
		case "VmRSS:":
			endMB, n = bench.Round(kb/1024, 1), n+1
		}
	}
	return peakMB, endMB, n == 2
}

func loadSelfCPU() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

type loadCPUStat struct{ busy, total float64 }

func loadMachineCPU() (loadCPUStat, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return loadCPUStat{}, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return loadCPUStat{}, false
	}
	var s loadCPUStat
	for i, v := range f[1:] {
		if i >= 8 { // guest time is inside user already
			break
		}
		x, _ := strconv.ParseFloat(v, 64)
		s.total += x
		if i != 3 && i != 4 { // idle, iowait
			s.busy += x
		}
	}
	return s, true
}

// busyCores is how many cores were busy on average between before and s.
func (s loadCPUStat) busyCores(before loadCPUStat) float64 {
	dt := s.total - before.total
	if dt <= 0 {
		return 0
	}
	return (s.busy - before.busy) / dt * float64(runtime.NumCPU())
}

// loadRaiseNofile lifts the soft open-file limit to the hard one, for the
// client's connections (and, inherited, the child service's).
func loadRaiseNofile(stderr io.Writer) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return
	}
	if r.Cur < r.Max {
		r.Cur = r.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
			fmt.Fprintf(stderr, "bench load: raise the open-file limit: %v\n", err)
		}
	}
	if r.Cur < 4096 {
		fmt.Fprintf(stderr, "bench load: the open-file limit is %d; large K may run out of descriptors\n", r.Cur)
	}
}

// ---- /metrics ----

// loadScrape reads the service's Prometheus text as name{labels} -> value.
func loadScrape(ctx context.Context, hc *http.Client, tgt loadTarget) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, tgt.base+"/metrics", nil)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/metrics: status %d", resp.StatusCode)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out, sc.Err()
}

// loadHistogram turns the difference of two scrapes of the service's
// token publication histogram into bucket-bound quantiles.
func loadHistogram(before, after map[string]float64, name, tokens string) *loadServerDelay {
	qs, count, sum, ok := loadQuantiles(before, after, name, 0.5, 0.99)
	if !ok {
		return nil
	}
	d := &loadServerDelay{Metric: name, Batches: int64(count), Tokens: int64(after[tokens] - before[tokens]),
		Measures: "service side: model produced the oldest token of a log batch -> batch published to subscribers after its durable commit; one observation per batch; quantiles are bucket upper bounds"}
	if count <= 0 {
		return d
	}
	mean := bench.Round(sum/count*1000, 3)
	d.MeanMS = &mean
	d.P50LeMS, d.P99LeMS = qs[0], qs[1]
	return d
}

// loadSched is the Go scheduler's latency in the service over the load
// window: how long goroutines that were ready to run waited for a thread.
type loadSched struct {
	Metric   string   `json:"metric"`
	P50LeMS  *float64 `json:"p50_le_ms"`
	P90LeMS  *float64 `json:"p90_le_ms"`
	P99LeMS  *float64 `json:"p99_le_ms"`
	Samples  int64    `json:"samples"`
	Measures string   `json:"measures"`
}

func loadSchedLatency(before, after map[string]float64) *loadSched {
	const name = "threadline_go_sched_latency_seconds"
	qs, count, _, ok := loadQuantiles(before, after, name, 0.5, 0.9, 0.99)
	if !ok {
		return nil
	}
	return &loadSched{Metric: name, P50LeMS: qs[0], P90LeMS: qs[1], P99LeMS: qs[2], Samples: int64(count),
		Measures: "service side, from the Go runtime (/sched/latencies:seconds): time a goroutine spent ready to run before it ran; every hop of a token (log commit, publish, the stream's write) waits this once; quantiles are bucket upper bounds"}
}

// loadQuantiles returns bucket-upper-bound quantiles (in ms; nil past the
// last finite bucket), the count and the sum of a histogram between two
// scrapes; ok is false when the histogram is not there.
func loadQuantiles(before, after map[string]float64, name string, ps ...float64) (qs []*float64, count, sum float64, ok bool) {
	type bucket struct{ le, n float64 }
	var bs []bucket
	prefix := name + `_bucket{le="`
	for key, v := range after {
		if !strings.HasPrefix(key, prefix) {
			continue
		}
		le, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimPrefix(key, prefix), `"}`), 64)
		if err != nil {
			continue
		}
		bs = append(bs, bucket{le, v - before[key]})
	}
	if len(bs) == 0 {
		return nil, 0, 0, false
	}
	slices.SortFunc(bs, func(a, b bucket) int {
		switch {
		case a.le < b.le:
			return -1
		case a.le > b.le:
			return 1
		}
		return 0
	})
	count = after[name+"_count"] - before[name+"_count"]
	sum = after[name+"_sum"] - before[name+"_sum"]
	qs = make([]*float64, len(ps))
	for i, p := range ps {
		for _, b := range bs {
			if count > 0 && b.n >= p*count {
				if v := b.le * 1000; !math.IsInf(v, 1) {
					v = bench.Round(v, 3)
					qs[i] = &v
				}
				break
			}
		}
	}
	return qs, count, sum, true
}
