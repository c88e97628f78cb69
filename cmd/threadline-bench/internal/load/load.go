// Package load is `threadline-bench load`: K concurrent runs over real
// HTTP on loopback, with NDJSON clients that read like a browser, a share of
// which drop the connection mid-run and rejoin with ?after=N. See loadUsage.
package load

import (
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
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/threadline/threadline/cmd/threadline-bench/internal/bench"
	"github.com/threadline/threadline/store/pgtest"
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
service instead (loopback only). Beside the delays each K reports the CPU
microseconds one delivered token cost the service and Postgres (its backends
of the K's database). --with-floor measures the floor at each K right after
Threadline, and the summary names the first K whose p99 added delay reached
50 ms for each.

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
	withFloor   bool
	floorBin    string
	serverEnv   []string // KEY=VALUE added to the child service's environment
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
	fs.BoolVar(&o.floor, "floor", false, "measure the floor instead of Threadline: each K's child is 'threadline-bench floor', the same stream endpoints kept in memory (no database, no durable log); what HTTP streaming alone costs here. --server-env THREADLINE_FLOOR_PAIRS=true makes it publish tokens two at a time, the service's writes a token while busy")
	fs.StringVar(&o.floorBin, "floor-bin", "", "with --with-floor: the binary to run with 'floor' (default: this executable)")
	fs.BoolVar(&o.withFloor, "with-floor", false, "after each K's Threadline measurement, measure the floor at the same K in the same run (see --floor); the summary names the K where each one's p99 added delay first reaches the goal's bound")
	fs.Func("server-env", "child mode: KEY=VALUE added to each K's service's environment, after the bench's own settings (repeatable), e.g. THREADLINE_TOKEN_HOLD=20ms", func(kv string) error {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return fmt.Errorf("%q is not KEY=VALUE", kv)
		}
		o.serverEnv = append(o.serverEnv, kv)
		return nil
	})
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
	err := o.check() // normalises o.url: before o is returned
	return o, err
}

// check refuses settings out of bounds or that do not go together, and
// normalises --url.
func (o *loadOpts) check() error {
	switch {
	case len(o.ks) == 0:
		return errors.New("--k: give at least one number of runs")
	case o.tokens < 1 || o.tokens > loadMaxTokens:
		return fmt.Errorf("--tokens must be between 1 and %d", loadMaxTokens)
	case !(o.rate > 0) || o.rate > 100000:
		return errors.New("--rate must be above 0 and at most 100000 tokens/s")
	case o.rejoinShare < 0 || o.rejoinShare > 1:
		return errors.New("--rejoin-share must be between 0 and 1")
	case o.timeout <= 0:
		return errors.New("--timeout must be positive")
	case o.ramp < 0 || o.rejoinPause < 0:
		return errors.New("--ramp and --rejoin-pause must not be negative")
	case o.dbMaxConns < 1:
		return errors.New("--db-max-conns must be at least 1")
	case o.tokens < 3 && o.rejoinShare > 0:
		return errors.New("--rejoin-share needs --tokens of at least 3 (clients drop after some tokens, before the last)")
	}
	return o.checkTarget()
}

// checkTarget checks (and normalises) the flags that choose what is
// measured: --url, --server-pid, --floor and --with-floor.
func (o *loadOpts) checkTarget() error {
	if o.url != "" {
		u, err := url.Parse(o.url)
		if err != nil || (u.Scheme != "http") || u.Host == "" {
			return fmt.Errorf("--url %q: want http://127.0.0.1:PORT", o.url)
		}
		if !loadLoopback(u.Hostname()) {
			return fmt.Errorf("--url %q: the load benchmark runs on loopback only", o.url)
		}
		o.url = strings.TrimRight(u.Scheme+"://"+u.Host+u.Path, "/")
	} else if o.serverPID != 0 {
		return errors.New("--server-pid goes with --url")
	}
	if (o.floor || o.withFloor) && o.url != "" {
		return errors.New("--floor and --with-floor start their own child; they do not go with --url")
	}
	if o.floor && o.withFloor {
		return errors.New("--with-floor measures the floor beside Threadline; it does not go with --floor")
	}
	return nil
}

func loadLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// loadPrepare finds what Run needs before the first K: a Postgres (the
// project's own when none is given), the binaries the children run, and
// Postgres's version; it drops stale databases of earlier runs.
func loadPrepare(ctx context.Context, o *loadOpts, stderr io.Writer) (string, error) {
	var err error
	if (o.url == "" && !o.floor) || o.dbURL != "" {
		if o.dbURL == "" {
			fmt.Fprintln(stderr, "bench load: no --database-url / $THREADLINE_DATABASE_URL; starting the project's own Postgres")
			if o.dbURL, err = bench.OwnCluster(ctx, stderr); err != nil {
				return "", err
			}
		}
	}
	if o.url == "" && o.serverBin == "" {
		if o.serverBin, err = defaultServerBin(o.floor); err != nil {
			return "", err
		}
	}
	if o.withFloor && o.floorBin == "" {
		if o.floorBin, err = defaultServerBin(true); err != nil {
			return "", err
		}
	}
	pgver := "unknown"
	if o.dbURL != "" {
		conn, err := pgx.Connect(ctx, o.dbURL)
		if err != nil {
			return "", fmt.Errorf("connect to %s: %w", bench.RedactURL(o.dbURL), err)
		}
		pgver = bench.PGVersion(ctx, conn)
		if o.url == "" && !o.floor {
			loadDropStale(ctx, conn, stderr)
		}
		conn.Close(ctx)
	}
	return pgver, nil
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

	pgver, err := loadPrepare(ctx, &o, stderr)
	if err != nil {
		return err
	}
	machine, commit := bench.MachineInfo(), bench.GitCommit()
	var results, floors []Result
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
		if !o.withFloor || ctx.Err() != nil {
			continue
		}
		fres, err := loadFloorOne(ctx, o, k, stderr)
		if err != nil {
			return err
		}
		fres.Machine, fres.Commit, fres.Postgres, fres.GoVersion = machine, commit, pgver, runtime.Version()
		floors = append(floors, fres)
		if err := enc.Encode(fres); err != nil {
			return err
		}
	}
	sum := loadSummarize(results, o)
	sum.floor(floors)
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
	Bench    string `json:"bench"`
	Summary  bool   `json:"summary"`
	Ks       []int  `json:"ks"`
	AllGood  bool   `json:"all_meet_goal"`
	BreaksAt *int   `json:"breaks_at_k"`
	BreakWhy string `json:"break_reason"`
	// P99PassesAt is the first K (in the order run) whose p99 added delay
	// reached the goal's bound; FloorP99PassesAt the same for the floor
	// measured in the same run (--with-floor). null: none did (or no floor).
	P99PassesAt      *int          `json:"p99_passes_goal_at_k"`
	FloorP99PassesAt *int          `json:"floor_p99_passes_goal_at_k"`
	FloorResults     []Result      `json:"floor_results,omitempty"`
	Goal             string        `json:"goal"`
	Results          []Result      `json:"results"`
	Machine          bench.Machine `json:"machine"`
	Postgres         string        `json:"postgres"`
	GoVersion        string        `json:"go_version"`
	Commit           string        `json:"commit"`
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
	s.P99PassesAt = loadP99PassesAt(rs)
	return s
}

// floor adds the floor's results of a --with-floor run.
func (s *Summary) floor(rs []Result) {
	if len(rs) == 0 {
		return
	}
	s.FloorResults = rs
	s.FloorP99PassesAt = loadP99PassesAt(rs)
}

// loadP99PassesAt is the first K whose p99 added delay reached the goal's
// bound (nil: none).
func loadP99PassesAt(rs []Result) *int {
	for _, r := range rs {
		if r.AddedDelayMS.Samples > 0 && r.AddedDelayMS.P99 >= loadGoalP99MS {
			k := r.K
			return &k
		}
	}
	return nil
}

// loadFloorOne measures the floor at K, for --with-floor.
func loadFloorOne(ctx context.Context, o loadOpts, k int, stderr io.Writer) (Result, error) {
	o.floor, o.withFloor, o.serverBin = true, false, o.floorBin
	res, err := loadOne(ctx, o, k, stderr)
	if err != nil {
		return res, fmt.Errorf("k=%d, the floor: %w", k, err)
	}
	return res, nil
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

	tgt, stop, err := loadStartTarget(ctx, o, k, interval, &res, stderr)
	if err != nil {
		return res, err
	}
	defer stop()
	hc, dials := loadHTTPClient(k)
	defer hc.Transport.(*http.Transport).CloseIdleConnections()
	if o.warmup {
		loadWarmup(kctx, hc, tgt, o.dbMaxConns)
	}
	if o.preconnect {
		res.Preconnected = loadPreconnect(kctx, hc, tgt, k, dials)
	}
	before := loadMeasureBefore(kctx, hc, tgt)
	clients, drops := loadNewClients(o, k)
	fmt.Fprintf(stderr, "bench load: k=%d tokens=%d rate=%g/s ramp=%s rejoin=%d target=%s\n", k, o.tokens, o.rate, o.ramp, drops, tgt.base)
	wall := loadRunClients(kctx, hc, tgt, clients, o, stderr)
	res.WallS = bench.Round(wall.Seconds(), 3)
	before.after(ctx, hc, tgt, wall, k, &res)
	// created_at of every run, for the upper bound of the delay.
	loadFetchCreated(ctx, hc, tgt, clients)
	if tgt.child != nil {
		res.ServerLogErrors, res.ServerLogWarns = tgt.child.levels()
		for _, l := range tgt.child.firstProblems(5) {
			res.Errors = append(res.Errors, "server log: "+l)
		}
	}

	loadCheck(&res, clients, o, interval)
	res.perToken()
	res.MeetsGoal = res.RunsFailed == 0 && res.ExactlyOnce && res.AddedDelayMS.Samples > 0 && res.AddedDelayMS.P99 < loadGoalP99MS
	res.MeetsStretch = res.MeetsGoal && res.AddedDelayMS.P99 < loadStretchP99MS
	fmt.Fprintf(stderr, "bench load: k=%d done in %.1fs: completed=%d failed=%d tokens=%d/%d exactly_once=%v delay p50/p99/max=%.2f/%.2f/%.2f ms (upper bound p99 %.2f) cpu us/token service %s postgres %s\n",
		k, wall.Seconds(), res.RunsCompleted, res.RunsFailed, res.TokensDelivered, res.TokensExpected, res.ExactlyOnce,
		res.AddedDelayMS.P50, res.AddedDelayMS.P99, res.AddedDelayMS.Max, res.AddedDelayUpper.P99, loadFig(res.ServerCPUPerToken), loadFig(res.DBCPUPerToken))
	return res, nil
}

// loadStartTarget starts K's service (or the floor) as a child, on a fresh
// database it creates, or names the running service of --url; it sets
// res.Target (and the pool size of a child service). stop stops the child
// and drops its database.
func loadStartTarget(ctx context.Context, o loadOpts, k int, interval time.Duration, res *Result, stderr io.Writer) (tgt loadTarget, stop func(), err error) {
	switch {
	case o.floor:
		child, err := loadStartChild(ctx, o, k, "", interval, stderr)
		if err != nil {
			return tgt, nil, err
		}
		res.Target = "child: " + o.serverBin + " floor on " + child.addr + " (the floor: in memory, no database, no durability)"
		return loadTarget{base: "http://" + child.addr, pid: child.cmd.Process.Pid, child: child}, func() { child.stop(stderr) }, nil
	case o.url == "":
		dbName, err := loadCreateDB(ctx, o.dbURL, k)
		if err != nil {
			return tgt, nil, err
		}
		dbURL := pgtest.WithDatabase(o.dbURL, dbName)
		child, err := loadStartChild(ctx, o, k, dbURL, interval, stderr)
		if err != nil {
			loadDropDB(o.dbURL, dbName, stderr)
			return tgt, nil, err
		}
		res.Target = "child: " + o.serverBin + " serve on " + child.addr + ", fresh database " + dbName
		if len(o.serverEnv) > 0 {
			res.Target += ", with " + strings.Join(o.serverEnv, " ")
		}
		n := o.dbMaxConns
		res.DBMaxConns = &n
		stop = func() {
			child.stop(stderr)
			loadDropDB(o.dbURL, dbName, stderr)
		}
		return loadTarget{base: "http://" + child.addr, pid: child.cmd.Process.Pid, dbURL: dbURL, child: child}, stop, nil
	}
	res.Target = "running service at " + o.url
	return loadTarget{base: o.url, pid: o.serverPID, dbURL: o.dbURL, key: o.apiKey}, func() {}, nil
}

// loadHTTPClient is the clients' HTTP client: keep-alive connections for K
// clients and more, counted as they are dialed.
func loadHTTPClient(k int) (*http.Client, *atomic.Int64) {
	dials := new(atomic.Int64)
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
	return &http.Client{Transport: tr}, dials
}

// loadNewClients makes K clients spread over the ramp, drops of them
// chosen by the seed to drop and rejoin.
func loadNewClients(o loadOpts, k int) (clients []*loadClient, drops int) {
	rng := rand.New(rand.NewPCG(o.seed, uint64(k)))
	clients = make([]*loadClient, k)
	drops = int(math.Round(o.rejoinShare * float64(k)))
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
	return clients, drops
}

// loadRunClients runs every client to its end, with a progress line every
// two seconds, and returns how long they took.
func loadRunClients(ctx context.Context, hc *http.Client, tgt loadTarget, clients []*loadClient, o loadOpts, stderr io.Writer) time.Duration {
	var prog loadProgress
	t0 := time.Now()
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			loadRunClient(ctx, hc, tgt, c, o, &prog, t0)
		}()
	}
	doneCh := make(chan struct{})
	go func() { wg.Wait(); close(doneCh) }()
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-doneCh:
			return time.Since(t0)
		case <-tick.C:
			fmt.Fprintf(stderr, "bench load: k=%d t=%.0fs started=%d streaming=%d done=%d failed=%d rejoins=%d tokens=%d/%d\n",
				len(clients), time.Since(t0).Seconds(), prog.started.Load(), prog.streaming.Load(), prog.done.Load(), prog.failed.Load(),
				prog.rejoins.Load(), prog.tokens.Load(), int64(len(clients))*int64(o.tokens))
		}
	}
}

// loadFig is an optional figure for the progress line.
func loadFig(v *float64) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatFloat(*v, 'f', 2, 64)
}
