// Command threadline is the Threadline service: `serve` runs the HTTP API
// and `migrate` manages the schema. It wires the store, the stream hub, the
// models and the API together; configuration comes from flags, each
// defaulting to an environment variable. The benchmarks are a command of
// their own, cmd/threadline-bench.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/threadline/threadline/api"
	"github.com/threadline/threadline/cmd/threadline/internal/chat"
	"github.com/threadline/threadline/model"
	"github.com/threadline/threadline/model/mcp"
	"github.com/threadline/threadline/model/tool"
	"github.com/threadline/threadline/store"
	"github.com/threadline/threadline/stream"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/engine"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "chat" {
		// chat takes Ctrl-C itself: it cancels the reply, not the process.
		if err := chat.Main(context.Background(), os.Args[2:], os.Getenv, os.Stdin, os.Stdout, os.Stderr); err != nil && !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "threadline:", err)
			os.Exit(1)
		}
		return
	}
	if os.Getenv("GOGC") == "" {
		// The service's live heap is small and churns with every token:
		// collecting it a quarter as often costs little memory and saves
		// CPU a token (GOGC, when set, decides instead).
		debug.SetGCPercent(400)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := Main(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0) // the usage went out already
		}
		fmt.Fprintln(os.Stderr, "threadline:", err)
		os.Exit(1)
	}
}

const usage = `threadline: conversation trees of immutable checkpoints in Postgres.

Usage:
  threadline serve [flags]            run the HTTP API (migrates on start)
  threadline migrate up|down|version  manage the schema
  threadline chat [flags]             chat with a service in the terminal
  threadline export --out DIR [flags] write threads as JSON or Markdown files
  threadline import [flags] FILE      import a file of threads (Threadline, ChatGPT, Open WebUI)
Run a subcommand with --help to list its settings.
`

// Main runs one subcommand until ctx ends.
func Main(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return flag.ErrHelp
	}
	switch args[0] {
	case "serve":
		cfg, err := parseConfig("serve", args[1:], getenv, stderr)
		if err != nil {
			return err
		}
		p, err := Start(ctx, cfg, stderr)
		if err != nil {
			return err
		}
		<-ctx.Done()
		return p.Close()
	case "migrate":
		return migrateCmd(ctx, args[1:], getenv, stdout, stderr)
	case "chat":
		return chat.Main(ctx, args[1:], getenv, os.Stdin, stdout, stderr)
	case "export":
		return exportCmd(ctx, args[1:], getenv, stdout, stderr)
	case "import":
		return importCmd(ctx, args[1:], getenv, stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown subcommand %q", args[0])
}

// Config is every setting of `serve`.
type Config struct {
	Addr            string
	DatabaseURL     string
	DBMaxConns      int
	APIKeys         map[string]string
	MaxBody         int64
	MaxMessage      int
	MaxAttachment   int64
	MaxImport       int64
	AttachmentTypes []string
	RateLimit       float64
	RunLease        time.Duration
	ShutdownGrace   time.Duration
	LogLevel        string
	TitleModel      string
	// DiscoverTimeout bounds asking the configured providers for their
	// models at start (0: not asked).
	DiscoverTimeout time.Duration
	StartLinger     time.Duration
	TokenHold       time.Duration
	CommitPace      time.Duration
	BusyRuns        int
	// ToolApproval names built-in tools whose every call needs a person's
	// approval (MCP servers say it in their own config).
	ToolApproval []string
	// MCPConfig names the MCP servers' config file (empty: built-in tools
	// only); MCPConnectTimeout bounds connecting to them at start.
	MCPConfig         string
	MCPConnectTimeout time.Duration
	// RawMaxBytes caps one run's raw records (0: none are kept).
	RawMaxBytes int64
	CPUProfile  string
	Getenv      func(string) string
	// HTTP server limits: see parseConfig for what each bounds.
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
	StallTimeout      time.Duration
	MaxConns          int
	// Limits (0: off).
	MaxAttachments    int
	MaxPage           int
	StreamsPerCaller  int
	RejoinsPerRun     int
	RunsPerCaller     int
	RunsPerProcess    int
	StreamsPerProcess int
	MessagesPerThread int
	LogPageBytes      int
	MaxInlineBytes    int64
	AddrRateLimit     float64
	AuthFailures      int
	AuthFailRate      float64
	TrustedProxies    []*net.IPNet

	// SubagentMaxDepth and SubagentMaxChildren bound the delegate tool's
	// sub-agents: how deep they nest, how many one run starts.
	SubagentMaxDepth, SubagentMaxChildren int
}

// importMessages maps the thread message limit onto api.Config, where 0
// is the default and a negative limit is off.
func importMessages(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

// startLinger maps the setting onto engine.Config, where 0 is the default
// and a negative linger commits at once.
func startLinger(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}

// envFlags defines flags whose defaults come from the environment.
type envFlags struct {
	fs     *flag.FlagSet
	getenv func(string) string
	errs   []error
}

func (e *envFlags) str(p *string, name, env, def, help string) {
	if v := e.getenv(env); v != "" {
		def = v
	}
	e.fs.StringVar(p, name, def, help+" ($"+env+")")
}

func (e *envFlags) dur(p *time.Duration, name, env string, def time.Duration, help string) {
	if v := e.getenv(env); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			e.errs = append(e.errs, fmt.Errorf("$%s: %q is not a duration like 30s or 20ms", env, v))
		}
		def = d
	}
	e.fs.DurationVar(p, name, def, help+" ($"+env+")")
}

func (e *envFlags) num(p *int64, name, env string, def int64, help string) {
	if v := e.getenv(env); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			e.errs = append(e.errs, fmt.Errorf("$%s: %q is not a whole number", env, v))
		}
		def = n
	}
	e.fs.Int64Var(p, name, def, help+" ($"+env+")")
}

func (e *envFlags) float(p *float64, name, env string, def float64, help string) {
	if v := e.getenv(env); v != "" {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			e.errs = append(e.errs, fmt.Errorf("$%s: %q is not a number", env, v))
		}
		def = n
	}
	e.fs.Float64Var(p, name, def, help+" ($"+env+")")
}

func parseConfig(name string, args []string, getenv func(string) string, stderr io.Writer) (Config, error) {
	fs := flag.NewFlagSet("threadline "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	e := &envFlags{fs: fs, getenv: getenv}
	var cfg Config
	var keys, keysFile string
	var conns, maxBody, maxMsg, maxAtt int64
	e.str(&cfg.Addr, "addr", "THREADLINE_ADDR", "127.0.0.1:8080", "listen address")
	e.str(&cfg.DatabaseURL, "database-url", "THREADLINE_DATABASE_URL", "", "Postgres URL (required; make run supplies the project's own cluster)")
	e.num(&conns, "db-max-conns", "THREADLINE_DB_MAX_CONNS", 32, "database pool size")
	e.str(&keys, "api-keys", "THREADLINE_API_KEYS", "", "key1:caller1,key2:caller2; empty turns authentication off")
	e.str(&keysFile, "api-keys-file", "THREADLINE_API_KEYS_FILE", "", "file with one key:caller per line")
	e.num(&maxBody, "max-body", "THREADLINE_MAX_BODY", api.DefaultMaxBody, "JSON body limit in bytes")
	e.num(&maxMsg, "max-message", "THREADLINE_MAX_MESSAGE", api.DefaultMaxMessage, "message text limit in bytes")
	e.num(&maxAtt, "max-attachment", "THREADLINE_MAX_ATTACHMENT", api.DefaultMaxAttachment, "attachment size limit in bytes")
	e.num(&cfg.MaxImport, "max-import", "THREADLINE_MAX_IMPORT", api.DefaultMaxImport, "body limit of POST /threads/import in bytes (a file of threads: JSON or ZIP)")
	var attTypes string
	e.str(&attTypes, "attachment-types", "THREADLINE_ATTACHMENT_TYPES", strings.Join(api.DefaultAttachmentTypes, ","), "accepted attachment content types, comma separated")
	e.float(&cfg.RateLimit, "rate-limit", "THREADLINE_RATE_LIMIT", 0, "requests per second per caller (0: off)")
	e.dur(&cfg.RunLease, "run-lease", "THREADLINE_RUN_LEASE", 15*time.Second, "how long a run stays owned without renewal; a dead owner's runs are recovered after it")
	e.dur(&cfg.ShutdownGrace, "shutdown-grace", "THREADLINE_SHUTDOWN_GRACE", 10*time.Second, "on SIGTERM, how long running streams may finish before they are cancelled")
	e.dur(&cfg.StartLinger, "start-linger", "THREADLINE_START_LINGER", 2*time.Millisecond, "how long a run's start may wait to be committed with its end (0: commit it at once)")
	e.dur(&cfg.TokenHold, "token-hold", "THREADLINE_TOKEN_HOLD", 25*time.Millisecond, "while --busy-runs runs stream here, how long a run's token may wait for its next one, to be committed, published and streamed two at a time (0: at once); other events go at once")
	e.dur(&cfg.CommitPace, "commit-pace", "THREADLINE_COMMIT_PACE", 4*time.Millisecond, "while --busy-runs runs stream here, the least time between the starts of two commits of the runs' logs, so that each carries more (0: none)")
	var busyRuns int64
	e.num(&busyRuns, "busy-runs", "THREADLINE_BUSY_RUNS", 100, "how many runs must be streaming in this process for --token-hold and --commit-pace to apply (0: however many)")
	e.str(&cfg.CPUProfile, "cpu-profile", "THREADLINE_CPU_PROFILE", "", "write a CPU profile of the whole serve to this file, for go tool pprof (empty: off)")
	var maxConns int64
	e.dur(&cfg.ReadHeaderTimeout, "read-header-timeout", "THREADLINE_READ_HEADER_TIMEOUT", 10*time.Second, "how long a client may take to send a request's headers (a new connection that sends nothing is closed after it)")
	e.dur(&cfg.ReadTimeout, "read-timeout", "THREADLINE_READ_TIMEOUT", time.Minute, "how long a client may take to send a whole request, body included (a slow upload is cut after it)")
	e.dur(&cfg.WriteTimeout, "write-timeout", "THREADLINE_WRITE_TIMEOUT", time.Minute, "how long a response may take to write, except NDJSON streams (see --stall-timeout)")
	e.dur(&cfg.IdleTimeout, "idle-timeout", "THREADLINE_IDLE_TIMEOUT", time.Minute, "how long an idle keep-alive connection stays open")
	e.dur(&cfg.StallTimeout, "stall-timeout", "THREADLINE_STALL_TIMEOUT", api.DefaultStallTimeout, "a stream whose client reads nothing for this long is ended; the client rejoins from its last sequence")
	e.num(&maxConns, "max-conns", "THREADLINE_MAX_CONNS", 8192, "connections open at once; more are answered 503 with Retry-After and closed (0: no cap)")
	var maxAtts, maxPage, streamsPC, rejoinsPR, runsPC, msgsPT, maxRuns, maxStreams, logPage int64
	e.num(&maxAtts, "max-attachments", "THREADLINE_MAX_ATTACHMENTS", api.DefaultMaxAttachments, "attachments one message may name (413 over it)")
	e.num(&maxPage, "max-page", "THREADLINE_MAX_PAGE", api.DefaultMaxPage, "threads one page of GET /threads may hold, at most 100 (400 over it)")
	e.num(&streamsPC, "streams-per-caller", "THREADLINE_STREAMS_PER_CALLER", api.DefaultStreamsPerCaller, "NDJSON streams one caller may have open (429 over it; 0: off)")
	e.num(&rejoinsPR, "rejoins-per-run", "THREADLINE_REJOINS_PER_RUN", api.DefaultRejoinsPerRun, "rejoined streams one run may have open (429 over it; 0: off)")
	e.num(&runsPC, "runs-per-caller", "THREADLINE_RUNS_PER_CALLER", 64, "runs one caller may have in progress in this process (429 over it; 0: off)")
	e.num(&maxRuns, "max-runs", "THREADLINE_MAX_RUNS", 4096, "runs this process may have in progress, of all callers (503 with Retry-After over it; 0: off)")
	e.num(&logPage, "log-page-bytes", "THREADLINE_LOG_PAGE_BYTES", 1<<20, "how much of a run's log one stream reads from the database at once, so a stalled reader holds about that much, not the whole log")
	e.num(&maxStreams, "max-streams", "THREADLINE_MAX_STREAMS", api.DefaultStreamsPerProcess, "NDJSON streams this process may have open, of all callers (503 with Retry-After over it; 0: off)")
	e.num(&msgsPT, "max-thread-messages", "THREADLINE_MAX_THREAD_MESSAGES", 10000, "messages one thread may hold (413 over it; 0: off)")
	e.num(&cfg.MaxInlineBytes, "max-inline-bytes", "THREADLINE_MAX_INLINE_BYTES", 20<<20, "attachment bytes one model call may carry, newest first; the rest are named, not read (0: off)")
	var authFails int64
	var proxies string
	e.float(&cfg.AddrRateLimit, "addr-rate-limit", "THREADLINE_ADDR_RATE_LIMIT", 0, "requests per second per client address, before authentication, burst twice that (0: off)")
	e.num(&authFails, "auth-failures", "THREADLINE_AUTH_FAILURES", 10, "failed authentications an address may make in a burst before all its requests are refused with 429 (0: no limit)")
	e.float(&cfg.AuthFailRate, "auth-fail-rate", "THREADLINE_AUTH_FAIL_RATE", 0.2, "failed authentications per second an address regains after the burst")
	e.str(&proxies, "trusted-proxies", "THREADLINE_TRUSTED_PROXIES", "", "CIDRs of proxies whose X-Forwarded-For names the client address for the limits (empty: the connection's address)")
	e.str(&cfg.LogLevel, "log-level", "THREADLINE_LOG_LEVEL", "info", "debug, info, warn or error")
	var tokens int64
	var delay time.Duration
	var defModel, modelsFile string
	e.num(&tokens, "builtin-tokens", "THREADLINE_BUILTIN_TOKENS", 200, "tokens per reply of the built-in model")
	e.dur(&delay, "builtin-delay", "THREADLINE_BUILTIN_DELAY", 0, "delay per token of the built-in model")
	var builtinMode string
	e.str(&builtinMode, "builtin-mode", "THREADLINE_BUILTIN_MODE", "words", "what the built-in model answers: words (the benchmarks' workload) or demo")
	e.str(&defModel, "default-model", "THREADLINE_DEFAULT_MODEL", "builtin", "model used when run_config.model is empty")
	e.str(&modelsFile, "models-file", "THREADLINE_MODELS_FILE", "", "JSON file of named models")
	var acpConfig string
	e.str(&acpConfig, "acp-config", "THREADLINE_ACP_CONFIG", "", "JSON file of external agents run over ACP, as models acp:<name> (empty: none)")
	var approval string
	e.str(&approval, "tool-approval", "THREADLINE_TOOL_APPROVAL", "", "built-in tools whose every call waits for a person's approval, comma separated (e.g. clock,wait)")
	e.str(&cfg.MCPConfig, "mcp-config", "THREADLINE_MCP_CONFIG", "", "JSON file naming MCP servers whose tools runs may call (empty: built-in tools only)")
	e.dur(&cfg.MCPConnectTimeout, "mcp-connect-timeout", "THREADLINE_MCP_CONNECT_TIMEOUT", 20*time.Second, "how long the start may wait for the MCP servers; one not connected by then is left out")
	e.num(&cfg.RawMaxBytes, "raw-max-bytes", "THREADLINE_RAW_MAX_BYTES", store.DefaultRawMaxBytes, "bytes of raw records (provider chunks, tool input and output) kept per run, for GET …/runs/{run_id}/raw (0: none kept)")
	e.dur(&cfg.DiscoverTimeout, "model-discovery-timeout", "THREADLINE_MODEL_DISCOVERY_TIMEOUT", 5*time.Second, "how long the start may ask each provider whose key is set for its models, to offer them (0: not asked)")
	var subDepth, subChildren int64
	e.num(&subDepth, "subagent-max-depth", "THREADLINE_SUBAGENT_MAX_DEPTH", 2, "how deep the delegate tool's sub-agents may nest (a child thread is 1 deep, its own child 2)")
	e.num(&subChildren, "subagent-max-children", "THREADLINE_SUBAGENT_MAX_CHILDREN", 10, "delegate calls (sub-agents) one run may make")
	e.str(&cfg.TitleModel, "title-model", "THREADLINE_TITLE_MODEL", "", "model that titles new threads (empty: the first words of the first message)")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if len(e.errs) > 0 {
		return cfg, errors.Join(e.errs...)
	}
	cfg.AttachmentTypes, cfg.ToolApproval = splitList(attTypes), splitList(approval)
	cfg.DBMaxConns, cfg.MaxBody, cfg.MaxMessage, cfg.MaxAttachment = int(conns), maxBody, int(maxMsg), maxAtt
	cfg.MaxConns = int(maxConns)
	cfg.MaxAttachments, cfg.MaxPage, cfg.StreamsPerCaller, cfg.RejoinsPerRun = int(maxAtts), int(maxPage), int(streamsPC), int(rejoinsPR)
	cfg.RunsPerCaller, cfg.MessagesPerThread, cfg.BusyRuns = int(runsPC), int(msgsPT), int(busyRuns)
	cfg.SubagentMaxDepth, cfg.SubagentMaxChildren = int(subDepth), int(subChildren)
	cfg.RunsPerProcess, cfg.StreamsPerProcess, cfg.LogPageBytes = int(maxRuns), int(maxStreams), int(logPage)
	cfg.AuthFailures = int(authFails)
	for _, p := range splitList(proxies) {
		_, n, err := net.ParseCIDR(p)
		if err != nil {
			return cfg, fmt.Errorf("THREADLINE_TRUSTED_PROXIES: %q is not a CIDR like 10.0.0.0/8", p)
		}
		cfg.TrustedProxies = append(cfg.TrustedProxies, n)
	}
	// Flags override the environment for the model registry too.
	over := map[string]string{
		"THREADLINE_BUILTIN_TOKENS": strconv.FormatInt(tokens, 10),
		"THREADLINE_BUILTIN_DELAY":  delay.String(),
		"THREADLINE_BUILTIN_MODE":   builtinMode,
		"THREADLINE_DEFAULT_MODEL":  defModel,
		"THREADLINE_MODELS_FILE":    modelsFile,
		"THREADLINE_ACP_CONFIG":     acpConfig,
	}
	cfg.Getenv = func(k string) string {
		if v, ok := over[k]; ok {
			return v
		}
		return getenv(k)
	}
	if cfg.DatabaseURL == "" {
		return cfg, errors.New("set THREADLINE_DATABASE_URL (or --database-url); `make run` starts the project's own Postgres and sets it")
	}
	var err error
	if cfg.APIKeys, err = parseKeys(keys, keysFile); err != nil {
		return cfg, err
	}
	return cfg, nil
}

func parseKeys(list, file string) (map[string]string, error) {
	out := map[string]string{}
	add := func(src, s string) error {
		for _, item := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == '\n' }) {
			item = strings.TrimSpace(item)
			if item == "" || strings.HasPrefix(item, "#") {
				continue
			}
			k, who, ok := strings.Cut(item, ":")
			if !ok || k == "" || who == "" {
				return fmt.Errorf("%s: entries must look like key:caller", src)
			}
			out[k] = who
		}
		return nil
	}
	if err := add("THREADLINE_API_KEYS", list); err != nil {
		return nil, err
	}
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("read API keys file: %w", err)
		}
		if err := add(file, string(b)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Program is a running `serve`.
type Program struct {
	cfg     Config
	log     *slog.Logger
	store   *store.Store
	svc     *engine.Service
	models  *model.Registry
	tools   *tool.Registry
	mcp     *mcp.Servers      // nil without an MCP config
	raw     *engine.RawWriter // nil when no raw records are kept
	http    *http.Server
	ln      net.Listener
	serveCh chan error
	profile *os.File
	traces  *tracing
	// notifier is the process's LISTEN and presence connection.
	notifier *store.Notifier
	// indexer moves committed messages into the search index.
	indexer *store.SearchIndexer
}

// The tool registry is what agent runs call.
var _ thread.Tools = (*tool.Registry)(nil)

// Start migrates, connects and starts serving; Addr tells where.
func Start(ctx context.Context, cfg Config, logOut io.Writer) (*Program, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		return nil, fmt.Errorf("log level: %w", err)
	}
	log := slog.New(slog.NewJSONHandler(logOut, &slog.HandlerOptions{Level: lvl}))
	if err := store.MigrateUp(ctx, cfg.DatabaseURL); err != nil {
		return nil, err
	}
	st, err := store.Open(ctx, cfg.DatabaseURL, int32(cfg.DBMaxConns))
	if err != nil {
		return nil, err
	}
	// Raw records go through a writer of their own, off the model loop;
	// Close stops it after the runs.
	var raw thread.RawSink // nil: no raw records kept
	var rawW *engine.RawWriter
	if cfg.RawMaxBytes > 0 {
		st.SetRawMaxBytes(cfg.RawMaxBytes)
		rawW = engine.NewRawWriter(st, log)
		raw = rawW
	}
	models, err := model.NewRegistry(cfg.Getenv)
	if err != nil {
		st.Close()
		return nil, err
	}
	discoverModels(ctx, models, cfg.DiscoverTimeout, log)
	if cfg.TitleModel != "" {
		if _, _, err := models.Resolve(cfg.TitleModel); err != nil {
			st.Close()
			return nil, fmt.Errorf("THREADLINE_TITLE_MODEL: %w", err)
		}
	}
	tools, servers, err := openTools(ctx, cfg, log)
	if err != nil {
		st.Close()
		return nil, err
	}
	// One dedicated connection per process: wake-ups from the other
	// replicas and this process's presence (store.Notifier).
	owner := uuid.NewString()
	notifier, err := st.NewNotifier(cfg.DatabaseURL, store.NotifierConfig{Owner: owner, Logger: log})
	if err == nil {
		err = notifier.Start(ctx)
	}
	if err != nil {
		closeMCP(servers)
		st.Close()
		return nil, err
	}
	reg := prometheus.NewRegistry()
	api.RegisterPoolStats(reg, func() api.PoolStats { return st.Pool().Stat() })
	hub := stream.New[thread.Event](1024)
	traces, err := newTracing(ctx, cfg.Getenv)
	if err != nil {
		notifier.Stop()
		closeMCP(servers)
		st.Close()
		return nil, err
	}
	var srv *api.Server
	svc := engine.New(st, hub, models, st, engine.Config{
		Owner:       owner,
		Wakeups:     notifier,
		Raw:         raw,
		Lease:       cfg.RunLease,
		Logger:      log,
		TitleModel:  cfg.TitleModel,
		StartLinger: startLinger(cfg.StartLinger),
		TokenHold:   cfg.TokenHold,
		CommitPace:  cfg.CommitPace,
		BusyRuns:    cfg.BusyRuns,
		Tools:       tools,
		Tracer:      traces.tracer(),
		Limits: engine.Limits{RunsPerCaller: offIfZero(cfg.RunsPerCaller), RunsPerProcess: offIfZero(cfg.RunsPerProcess), MessagesPerThread: offIfZero(cfg.MessagesPerThread),
			LogPageBytes: cfg.LogPageBytes,
			InlineBytes:  int64(offIfZero(int(cfg.MaxInlineBytes)))},
		SubagentMaxDepth: cfg.SubagentMaxDepth, SubagentMaxChildren: cfg.SubagentMaxChildren,
		OnPublish: func(d time.Duration, n int) {
			if srv != nil {
				f, _ := srv.Metrics()
				f(d, n)
			}
		},
		OnRunEnd: func(s thread.RunStatus) {
			if srv != nil {
				_, f := srv.Metrics()
				f(s)
			}
		},
	})
	srv = api.New(svc, api.Config{
		APIKeys: cfg.APIKeys, MaxBody: cfg.MaxBody, MaxMessage: cfg.MaxMessage, RateLimit: cfg.RateLimit,
		Logger: log, Registry: reg, Ready: st.Ping, Attachments: st, MaxAttachment: cfg.MaxAttachment, AttachmentTypes: cfg.AttachmentTypes,
		StallTimeout: stallTimeout(cfg.StallTimeout), MaxAttachments: cfg.MaxAttachments, MaxPage: cfg.MaxPage,
		StreamsPerCaller: offIfZero(cfg.StreamsPerCaller), RejoinsPerRun: offIfZero(cfg.RejoinsPerRun), StreamsPerProcess: offIfZero(cfg.StreamsPerProcess),
		AddrRateLimit: cfg.AddrRateLimit, AuthFailures: offIfZero(cfg.AuthFailures), AuthFailRate: cfg.AuthFailRate, TrustedProxies: cfg.TrustedProxies,
		Tools: listedTools{tools}, Raw: st, Trace: st, Shares: st, Search: st,
		Transfer: st, MaxImport: cfg.MaxImport, MaxThreadMessages: importMessages(cfg.MessagesPerThread),
	})
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		_ = traces.shutdown(ctx)
		notifier.Stop()
		closeMCP(servers)
		st.Close()
		return nil, fmt.Errorf("listen: %w", err)
	}
	ln = api.LimitListener(ln, cfg.MaxConns)
	p := &Program{cfg: cfg, log: log, store: st, svc: svc, models: models, tools: tools, mcp: servers, ln: ln, serveCh: make(chan error, 1),
		http: httpServer(cfg, srv, log), traces: traces}
	if cfg.CPUProfile != "" {
		if p.profile, err = os.Create(cfg.CPUProfile); err == nil {
			err = pprof.StartCPUProfile(p.profile)
		}
		if err != nil {
			ln.Close()
			_ = traces.shutdown(ctx)
			notifier.Stop()
			closeMCP(servers)
			st.Close()
			return nil, fmt.Errorf("cpu profile: %w", err)
		}
	}
	if rawW != nil {
		rawW.Start() // before the first run: nothing appends earlier
		p.raw = rawW
	}
	p.notifier = notifier
	p.indexer = st.NewSearchIndexer(store.SearchIndexerConfig{Logger: log})
	p.indexer.Start()
	svc.Start() // leases, recovery, other processes' changes; Shutdown stops them
	go func() { p.serveCh <- p.http.Serve(ln) }()
	log.Info("listening", "addr", "http://"+ln.Addr().String(), "auth", len(cfg.APIKeys) > 0, "lease", cfg.RunLease.String())
	return p, nil
}

// httpServer bounds every phase of a connection. The read and write
// timeouts cover ordinary requests: a stream lifts both once it starts and
// is bounded by the stall timeout instead (api.Config.StallTimeout).
func httpServer(cfg Config, h http.Handler, log *slog.Logger) *http.Server {
	idle := cfg.IdleTimeout
	if idle <= 0 {
		idle = -1 // zero would fall back to ReadTimeout
	}
	return &http.Server{Handler: h, ReadHeaderTimeout: cfg.ReadHeaderTimeout, ReadTimeout: cfg.ReadTimeout,
		WriteTimeout: cfg.WriteTimeout, IdleTimeout: idle, MaxHeaderBytes: 64 << 10,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
}

// offIfZero maps a limit setting, where 0 is off, onto the packages'
// configs, where 0 is the default and a negative limit is off.
func offIfZero(n int) int {
	if n <= 0 {
		return -1
	}
	return n
}

// stallTimeout maps the setting onto api.Config, where 0 is the default
// and a negative timeout never ends a stream.
func stallTimeout(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}

// closeMCP ends the MCP sessions of servers (nil: none), stopping stdio
// servers.
// discoverModels lists the models of the providers whose keys are set;
// one that cannot be listed is logged, and its models stay usable by name.
func discoverModels(ctx context.Context, models *model.Registry, timeout time.Duration, log *slog.Logger) {
	if timeout <= 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, err := range models.Discover(ctx) {
		log.Warn("a provider's models could not be listed; name them in THREADLINE_MODELS", "err", err)
	}
}

func closeMCP(servers *mcp.Servers) {
	if servers != nil {
		_ = servers.Close() // a session that fails to close has nothing left to say
	}
}

// Tools is the server's tool registry: the built-in tools and those of the
// connected MCP servers.
func (p *Program) Tools() *tool.Registry { return p.tools }

// Addr is the address the server listens on.
func (p *Program) Addr() string { return p.ln.Addr().String() }

// Close shuts down gracefully: no new requests or runs, running streams may
// finish within the grace period, then the rest are cancelled and written.
func (p *Program) Close() error {
	p.log.Info("shutting down", "grace", p.cfg.ShutdownGrace.String(), "active_runs", p.svc.ActiveRuns())
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.ShutdownGrace)
	defer cancel()
	p.svc.Shutdown(ctx) // runs finish or are cancelled; their streams end
	p.models.Stop()     // no run paces tokens any more
	closeMCP(p.mcp)     // no run calls a tool any more; stdio servers stop
	if p.raw != nil {
		p.raw.Stop() // the runs' last raw records are written
	}
	hctx, hcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer hcancel()
	err := errors.Join(p.traces.shutdown(hctx), p.http.Shutdown(hctx)) // the runs' spans have ended
	p.notifier.Stop()
	p.indexer.Stop()
	p.store.Close()
	if p.profile != nil {
		pprof.StopCPUProfile()
		err = errors.Join(err, p.profile.Close())
	}
	if serr := <-p.serveCh; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	p.log.Info("stopped")
	return err
}

func migrateCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("threadline migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	e := &envFlags{fs: fs, getenv: getenv}
	var url string
	e.str(&url, "database-url", "THREADLINE_DATABASE_URL", "", "Postgres URL")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: threadline migrate [--database-url URL] up|down|version")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if url == "" {
		return errors.New("set THREADLINE_DATABASE_URL (or --database-url)")
	}
	switch fs.Arg(0) {
	case "up":
		if err := store.MigrateUp(ctx, url); err != nil {
			return err
		}
	case "down":
		if err := store.MigrateDown(ctx, url); err != nil {
			return err
		}
	case "version":
	default:
		fs.Usage()
		return fmt.Errorf("migrate needs up, down or version")
	}
	v, dirty, err := store.MigrateVersion(ctx, url)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "version %d dirty %v\n", v, dirty)
	return nil
}

// splitList returns the non-empty, trimmed items of a comma-separated list.
func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
