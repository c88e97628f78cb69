package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/threadline/threadline/model/tool"
	"github.com/threadline/threadline/thread"
)

// Options configure Open.
type Options struct {
	// Getenv reads the service's environment for ${VAR} in env and headers
	// and for a stdio server's PATH, HOME, LANG and TMPDIR (os.Getenv when
	// nil).
	Getenv func(string) string
	// HTTPClient reaches streamable HTTP servers (a client of its own when
	// nil).
	HTTPClient *http.Client
	// Logger receives a line when a server's connection ends (slog's
	// default when nil).
	Logger *slog.Logger
	// Retry is the least time between two connection attempts to one
	// server (default 1s): a crashed server is started again on the next
	// call after it.
	Retry time.Duration
}

// Servers are the connected MCP servers of a config. It is safe for
// concurrent use.
type Servers struct {
	servers []*server
	tools   []tool.Tool
}

// Open connects to every server of cfg, all at once, and lists their
// tools; ctx bounds it. A server that cannot be reached or listed is left
// out and named in the returned error (errors.Join of one error per
// server, in the config's order); the Servers returned are usable either
// way, with the tools of the servers that answered. Close them when done.
func Open(ctx context.Context, cfg Config, opts Options) (*Servers, error) {
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Retry <= 0 {
		opts.Retry = time.Second
	}
	type opened struct {
		srv   *server
		tools []tool.Tool
		err   error
	}
	res := make([]opened, len(cfg.Servers))
	var wg sync.WaitGroup
	for i, sc := range cfg.Servers {
		srv := &server{cfg: sc, opts: opts, client: sdk.NewClient(&sdk.Implementation{Name: "threadline", Version: "1"}, nil)}
		wg.Add(1)
		go func() {
			defer wg.Done()
			tools, err := srv.list(ctx)
			res[i] = opened{srv: srv, tools: tools, err: err}
		}()
	}
	wg.Wait()
	s := &Servers{}
	var errs []error
	for i, r := range res {
		if r.err != nil {
			r.srv.close()
			errs = append(errs, fmt.Errorf("MCP server %s: %w", cfg.Servers[i].Name, r.err))
			continue
		}
		s.servers = append(s.servers, r.srv)
		s.tools = append(s.tools, r.tools...)
	}
	sort.Slice(s.tools, func(i, j int) bool { return s.tools[i].Spec().Name < s.tools[j].Spec().Name })
	return s, errors.Join(errs...)
}

// Tools returns the tools of every connected server, sorted by name.
func (s *Servers) Tools() []tool.Tool { return s.tools }

// Close ends every session; stdio servers are stopped.
func (s *Servers) Close() error {
	var errs []error
	for _, srv := range s.servers {
		if err := srv.close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// server is one MCP server and its current session, reconnected after the
// connection ends.
type server struct {
	cfg    ServerConfig
	opts   Options
	client *sdk.Client

	mu      sync.Mutex
	session *sdk.ClientSession
	dead    chan struct{} // closed when session's connection ended
	tried   time.Time     // the last connection attempt
	closed  bool
}

func (s *server) timeout() time.Duration {
	if s.cfg.Timeout > 0 {
		return time.Duration(s.cfg.Timeout)
	}
	return DefaultTimeout
}

// transport builds the SDK transport of the server.
func (s *server) transport() sdk.Transport {
	expand := func(v string) string { return os.Expand(v, s.opts.Getenv) }
	if s.cfg.URL != "" {
		hc := s.opts.HTTPClient
		if len(s.cfg.Headers) > 0 {
			h := http.Header{}
			for k, v := range s.cfg.Headers {
				h.Set(k, expand(v))
			}
			base := hc.Transport
			if base == nil {
				base = http.DefaultTransport
			}
			c := *hc
			c.Transport = headerTransport{base: base, header: h}
			hc = &c
		}
		return &sdk.StreamableClientTransport{Endpoint: s.cfg.URL, HTTPClient: hc, MaxRetries: -1, DisableStandaloneSSE: true}
	}
	cmd := exec.Command(s.cfg.Command, s.cfg.Args...)
	cmd.Env = []string{}
	for _, k := range []string{"PATH", "HOME", "LANG", "TMPDIR"} {
		if v := s.opts.Getenv(k); v != "" {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	keys := make([]string, 0, len(s.cfg.Env))
	for k := range s.cfg.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		cmd.Env = append(cmd.Env, k+"="+expand(s.cfg.Env[k]))
	}
	return &sdk.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}
}

type headerTransport struct {
	base   http.RoundTripper
	header http.Header
}

func (t headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, v := range t.header {
		req.Header[k] = v
	}
	return t.base.RoundTrip(req)
}

// ConnectTimeout is the least time a connection (starting a stdio server,
// the MCP handshake) may take; a server's longer call timeout raises it.
const ConnectTimeout = 20 * time.Second

// errRetryLater is returned while a crashed server waits to be started
// again.
var errRetryLater = errors.New("unavailable; it will be started again shortly")

// sessionFor returns the live session, connecting when there is none (at
// most once per opts.Retry).
func (s *server) sessionFor(ctx context.Context) (*sdk.ClientSession, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("closed")
	}
	if s.session != nil {
		select {
		case <-s.dead:
			s.session.Close()
			s.session = nil
		default:
			return s.session, nil
		}
	}
	if !s.tried.IsZero() && time.Since(s.tried) < s.opts.Retry {
		return nil, errRetryLater
	}
	s.tried = time.Now()
	cctx, cancel := context.WithTimeout(ctx, max(s.timeout(), ConnectTimeout))
	defer cancel()
	cs, err := s.client.Connect(cctx, s.transport(), nil)
	if err != nil {
		return nil, fmt.Errorf("cannot connect: %w", err)
	}
	dead := make(chan struct{})
	go func() {
		// Owned by the session: returns when its connection ends.
		err := cs.Wait()
		close(dead)
		s.mu.Lock()
		closed := s.closed
		s.mu.Unlock()
		if !closed {
			s.opts.Logger.Warn("MCP server connection ended", "server", s.cfg.Name, "error", err)
		}
	}()
	s.session, s.dead = cs, dead
	return cs, nil
}

// drop forgets cs after a failed call if its connection has ended, so the
// next call starts the server again.
func (s *server) drop(cs *sdk.ClientSession, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.session != cs {
		return
	}
	ended := errors.Is(err, sdk.ErrConnectionClosed)
	select {
	case <-s.dead:
		ended = true
	default:
	}
	if ended {
		cs.Close()
		s.session = nil
	}
}

func (s *server) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.session == nil {
		return nil
	}
	err := s.session.Close()
	s.session = nil
	return err
}

// list connects and returns the server's tools as server tools.
func (s *server) list(ctx context.Context) ([]tool.Tool, error) {
	cs, err := s.sessionFor(ctx)
	if err != nil {
		return nil, err
	}
	lctx, cancel := context.WithTimeout(ctx, max(s.timeout(), ConnectTimeout))
	defer cancel()
	allow := map[string]bool{}
	for _, n := range s.cfg.Tools {
		allow[n] = true
	}
	var out []tool.Tool
	var bad []string
	for t, err := range cs.Tools(lctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("listing tools: %w", err)
		}
		if len(allow) > 0 && !allow[t.Name] {
			continue
		}
		name, ok := ToolName(s.cfg.Name, t.Name)
		if !ok {
			bad = append(bad, t.Name)
			continue
		}
		params, err := json.Marshal(t.InputSchema)
		if err != nil || !isObject(params) {
			params = json.RawMessage(`{"type":"object"}`)
		}
		desc := t.Description
		if desc == "" {
			desc = t.Title
		}
		out = append(out, &mcpTool{srv: s, remote: t.Name,
			spec: thread.ToolSpec{Name: name, Description: desc, Parameters: params, Approval: s.cfg.Approval.needs(t.Name)}})
	}
	if len(bad) > 0 {
		return out, fmt.Errorf("tool names too long or empty: %s", strings.Join(bad, ", "))
	}
	return out, nil
}

func isObject(b []byte) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(b, &m) == nil && m != nil
}

// mcpTool is one tool of an MCP server.
type mcpTool struct {
	srv    *server
	remote string // the server's name for it
	spec   thread.ToolSpec
}

var _ tool.Timeouter = (*mcpTool)(nil)

func (t *mcpTool) Spec() thread.ToolSpec { return t.spec }

// Timeout implements tool.Timeouter: the server's timeout.
func (t *mcpTool) Timeout() time.Duration { return t.srv.timeout() }

// Call implements tool.Tool. The server's IsError results are IsError
// results; a server that cannot be reached, crashed or broke the protocol
// is an error naming the server (the registry hands it to the model as an
// IsError result), and a crashed stdio server is started again on a later
// call. ctx's end cancels the call on the server.
func (t *mcpTool) Call(ctx context.Context, args json.RawMessage) (thread.ToolOutput, error) {
	cs, err := t.srv.sessionFor(ctx)
	if err != nil {
		return thread.ToolOutput{}, fmt.Errorf("MCP server %s: %w", t.srv.cfg.Name, err)
	}
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: t.remote, Arguments: args})
	if err != nil {
		if ctx.Err() != nil {
			return thread.ToolOutput{}, ctx.Err()
		}
		t.srv.drop(cs, err)
		return thread.ToolOutput{}, fmt.Errorf("MCP server %s: %w", t.srv.cfg.Name, err)
	}
	return convert(res), nil
}

// convert turns a call's result into a tool result: its structured content
// when there is one, else its text (one text content as a string), else
// its content list as JSON.
func convert(res *sdk.CallToolResult) thread.ToolOutput {
	if res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			return thread.ToolOutput{Value: b, IsError: res.IsError}
		}
	}
	var texts []string
	for _, c := range res.Content {
		tc, ok := c.(*sdk.TextContent)
		if !ok {
			texts = nil
			break
		}
		texts = append(texts, tc.Text)
	}
	var v any = strings.Join(texts, "\n")
	if texts == nil && len(res.Content) > 0 {
		v = res.Content
	}
	r := tool.ValueResult(v)
	r.IsError = r.IsError || res.IsError
	return r
}
