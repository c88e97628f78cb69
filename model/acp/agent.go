package acp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/thread"
)

var _ thread.Model = (*Agent)(nil)

// Agent is the model "acp:<name>": each run spawns the agent process,
// initializes it, opens a new session (session/new, with the service's
// stdio MCP servers) and sends the whole branch as one prompt (the
// conversation so far as text, then the message answered): the agent's
// own memory of earlier turns is not used (session/load is not), so a
// regenerate or an edit replays exactly the branch it answers.
//
// A session/request_permission ends the step with Result.Waiting: the
// run ends requires_action, and the process stays, blocked in the request,
// for up to permission_timeout. The continuation's step
// (Request.Approvals) finds it by the key of its permission part and
// answers with the option the person chose; then the turn goes on in the
// continuation run. A process whose permission is not answered in time,
// or any process when the Agent is closed, is killed.
type Agent struct {
	name   string
	cfg    AgentConfig
	getenv func(string) string
	mcp    []sdk.McpServer
	log    *slog.Logger

	mu     sync.Mutex
	parked map[string]*session // by permission key
	closed bool
}

// New returns the agent name of cfg. mcp are the MCP servers handed to
// each session (nil: none); getenv expands the agent's env (os.Getenv in
// the service).
func New(name string, cfg AgentConfig, getenv func(string) string, mcp []sdk.McpServer) *Agent {
	return &Agent{name: name, cfg: cfg.withDefaults(), getenv: getenv, mcp: mcp,
		log: slog.New(slog.NewTextHandler(io.Discard, nil)), parked: map[string]*session{}}
}

// Close kills the processes that wait for a permission; later
// continuations of them fail.
func (a *Agent) Close() {
	a.mu.Lock()
	ps := a.parked
	a.parked, a.closed = map[string]*session{}, true
	a.mu.Unlock()
	for _, s := range ps {
		s.close()
	}
}

// Stream implements thread.Model: the whole agent turn, or its part
// up to a permission (then Result.Waiting). Errors: model_error for a
// process that cannot start, exits, writes what is not JSON-RPC or a line
// over max_message_bytes, or answers with an error; model_timeout when it
// stays silent for timeout; ctx's error when the run is cancelled (the
// agent is sent session/cancel first). The process is killed and reaped
// whenever the step does not end waiting.
func (a *Agent) Stream(ctx context.Context, req thread.ModelRequest, onDelta func(thread.Delta) error) (thread.ModelResult, error) {
	var s *session
	var err error
	if len(req.Approvals) > 0 {
		s, err = a.unpark(req.Approvals)
	} else {
		s, err = a.start(ctx, req)
	}
	if err != nil {
		return thread.ModelResult{Model: a.name}, err
	}
	s.setRaw(req.OnRaw, req.OnRawSent)
	res, err := s.pump(ctx, onDelta, req.Approvals)
	s.setRaw(nil, nil)
	res.Model = a.name
	if err == nil && res.Waiting && a.park(s) {
		return res, nil
	}
	s.close()
	if err == nil && res.Waiting {
		err = a.fail("the service is stopping")
	}
	return res, err
}

func (a *Agent) fail(format string, args ...any) error {
	return &errcode.Error{Code: errcode.ModelError, Message: fmt.Sprintf("acp agent %s: ", a.name) + fmt.Sprintf(format, args...)}
}

// start spawns the process and opens the session; the prompt is sent
// and its answer awaited in the background.
func (a *Agent) start(ctx context.Context, req thread.ModelRequest) (*session, error) {
	s := newSession(a)
	s.setRaw(req.OnRaw, req.OnRawSent)
	p, err := spawn(a.cfg, a.getenv, s.rawLine)
	if err != nil {
		return nil, a.fail("%v", err)
	}
	s.proc = p
	s.conn = sdk.NewClientSideConnection(s, p, p.fromUs)
	s.conn.SetLogger(a.log)
	hctx, cancel := context.WithTimeout(ctx, time.Duration(a.cfg.Timeout))
	defer cancel()
	if err := s.handshake(hctx); err != nil {
		why := s.why(err) // before close: the kill is not the cause
		s.close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if hctx.Err() != nil {
			return nil, &errcode.Error{Code: errcode.ModelTimeout, Message: fmt.Sprintf("acp agent %s: no answer to %s within %s", a.name, s.phase, time.Duration(a.cfg.Timeout))}
		}
		return nil, a.fail("%s: %s", s.phase, why)
	}
	prompt := promptBlocks(req.Messages)
	go func() {
		resp, err := s.conn.Prompt(s.life, sdk.PromptRequest{SessionId: s.id, Prompt: prompt})
		s.promptDone <- promptResult{resp, err}
	}()
	return s, nil
}

// park keeps s waiting for its permission's answer, for up to the
// permission timeout; false when the agent is closed.
func (a *Agent) park(s *session) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return false
	}
	a.parked[s.key] = s
	key := s.key
	time.AfterFunc(time.Duration(a.cfg.PermissionTimeout), func() {
		if s := a.take(key); s != nil {
			s.close()
		}
	})
	return true
}

func (a *Agent) take(key string) *session {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.parked[key]
	delete(a.parked, key)
	return s
}

// unpark finds the process the approvals answer.
func (a *Agent) unpark(approvals []thread.ModelApproval) (*session, error) {
	var perm struct {
		Key string `json:"key"`
	}
	_ = json.Unmarshal(approvals[0].Permission, &perm)
	if s := a.take(perm.Key); s != nil {
		return s, nil
	}
	return nil, a.fail("the process that asked for this permission is gone (it waited longer than its permission_timeout of %s, or the service restarted); regenerate the reply", time.Duration(a.cfg.PermissionTimeout))
}

// session is one agent process with its ACP session, across the runs of
// one turn. It is the SDK's Client: the SDK's goroutines hand updates and
// permission requests to events, which the step in progress (pump) reads.
type session struct {
	a    *Agent
	proc *proc
	conn *sdk.ClientSideConnection
	id   sdk.SessionId
	key  string // names the session in its permission parts
	// phase is the handshake's request in progress, for errors.
	phase string

	life       context.Context // ends at close
	stop       context.CancelFunc
	events     chan event
	promptDone chan promptResult
	handled    *chanCounter // session/update notifications handed to events

	rawMu sync.Mutex // orders raw callbacks with the deltas of the step
	onRaw func([]byte)
	onTx  func([]byte)

	calls   map[string]*callState // every tool call of the turn
	order   []string
	pending map[string]*permWait // permissions asked, by tool call id
	closed  sync.Once
}

type event struct {
	update *sdk.SessionNotification
	perm   *permWait
}

type permWait struct {
	req   sdk.RequestPermissionRequest
	reply chan sdk.RequestPermissionOutcome
}

type promptResult struct {
	resp sdk.PromptResponse
	err  error
}

type callState struct {
	done     bool
	rejected bool
}

func newSession(a *Agent) *session {
	var b [12]byte
	_, _ = rand.Read(b[:])
	life, stop := context.WithCancel(context.Background())
	return &session{a: a, key: hex.EncodeToString(b[:]), life: life, stop: stop,
		events: make(chan event), promptDone: make(chan promptResult, 1), handled: newChanCounter(),
		calls: map[string]*callState{}, pending: map[string]*permWait{}}
}

// handshake initializes the agent and opens a session.
func (s *session) handshake(ctx context.Context) error {
	s.phase = "initialize"
	ini, err := s.conn.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: sdk.ProtocolVersionNumber,
		ClientInfo: &sdk.Implementation{Name: "threadline", Version: "1"}})
	if err != nil {
		return err
	}
	if ini.ProtocolVersion != sdk.ProtocolVersionNumber {
		return fmt.Errorf("the agent speaks ACP version %d, not %d", ini.ProtocolVersion, sdk.ProtocolVersionNumber)
	}
	s.phase = "session/new"
	mcp := s.a.mcp
	if mcp == nil {
		mcp = []sdk.McpServer{}
	}
	cwd := s.a.cfg.Cwd
	if cwd == "" {
		cwd, _ = os.Getwd() // the process's too
	}
	ns, err := s.conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: cwd, McpServers: mcp})
	if err != nil {
		return err
	}
	s.id = ns.SessionId
	s.phase = "session/prompt"
	return nil
}

// why explains an SDK error: the process's own failure when it has one.
func (s *session) why(err error) string {
	select {
	case <-s.proc.failed:
		return s.proc.reason()
	case <-s.proc.exited:
		return s.proc.reason()
	default:
	}
	var re *sdk.RequestError
	if errors.As(err, &re) {
		msg := re.Message
		if re.Data != nil {
			b, _ := json.Marshal(re.Data)
			msg += " " + clip(b, 300)
		}
		if strings.Contains(msg, "peer disconnected") {
			return s.proc.reason()
		}
		return fmt.Sprintf("the agent answered an error (%d): %s", re.Code, msg)
	}
	return err.Error()
}

// setRaw sets the raw callbacks (nil: none) once no callback runs.
func (s *session) setRaw(recv, sent func([]byte)) {
	s.rawMu.Lock()
	s.onRaw, s.onTx = recv, sent
	s.rawMu.Unlock()
}

// rawLine is the process's tap callback.
func (s *session) rawLine(sent bool, line []byte) {
	s.rawMu.Lock()
	defer s.rawMu.Unlock()
	f := s.onRaw
	if sent {
		f = s.onTx
	}
	if f != nil {
		f(line)
	}
}

// close stops the session: pending permissions are refused, the process
// killed and reaped, the SDK's goroutines ended.
func (s *session) close() {
	s.closed.Do(func() {
		s.stop()
		if s.proc != nil {
			s.proc.close()
		}
		if s.conn != nil {
			<-s.conn.Done()
		}
	})
}

// SessionUpdate implements sdk.Client: the update goes to the step.
func (s *session) SessionUpdate(ctx context.Context, n sdk.SessionNotification) error {
	defer s.handled.add()
	select {
	case s.events <- event{update: &n}:
	case <-s.life.Done():
	}
	return nil
}

// RequestPermission implements sdk.Client: once the updates sent before
// it are handed on (the SDK runs requests apart from notifications), the
// request goes to the step, and the answer is the person's.
func (s *session) RequestPermission(ctx context.Context, req sdk.RequestPermissionRequest) (sdk.RequestPermissionResponse, error) {
	s.handled.waitFor(s.life, s.proc.lines.Load())
	w := &permWait{req: req, reply: make(chan sdk.RequestPermissionOutcome, 1)}
	select {
	case s.events <- event{perm: w}:
	case <-s.life.Done():
		return sdk.RequestPermissionResponse{Outcome: sdk.NewRequestPermissionOutcomeCancelled()}, nil
	}
	select {
	case o := <-w.reply:
		return sdk.RequestPermissionResponse{Outcome: o}, nil
	case <-s.life.Done():
		return sdk.RequestPermissionResponse{Outcome: sdk.NewRequestPermissionOutcomeCancelled()}, nil
	}
}

// The service offers the agent no file system and no terminal: it runs
// its own tools.

func (s *session) ReadTextFile(context.Context, sdk.ReadTextFileRequest) (sdk.ReadTextFileResponse, error) {
	return sdk.ReadTextFileResponse{}, sdk.NewMethodNotFound(sdk.ClientMethodFsReadTextFile)
}

func (s *session) WriteTextFile(context.Context, sdk.WriteTextFileRequest) (sdk.WriteTextFileResponse, error) {
	return sdk.WriteTextFileResponse{}, sdk.NewMethodNotFound(sdk.ClientMethodFsWriteTextFile)
}

func (s *session) CreateTerminal(context.Context, sdk.CreateTerminalRequest) (sdk.CreateTerminalResponse, error) {
	return sdk.CreateTerminalResponse{}, sdk.NewMethodNotFound(sdk.ClientMethodTerminalCreate)
}

func (s *session) KillTerminal(context.Context, sdk.KillTerminalRequest) (sdk.KillTerminalResponse, error) {
	return sdk.KillTerminalResponse{}, sdk.NewMethodNotFound(sdk.ClientMethodTerminalKill)
}

func (s *session) TerminalOutput(context.Context, sdk.TerminalOutputRequest) (sdk.TerminalOutputResponse, error) {
	return sdk.TerminalOutputResponse{}, sdk.NewMethodNotFound(sdk.ClientMethodTerminalOutput)
}

func (s *session) ReleaseTerminal(context.Context, sdk.ReleaseTerminalRequest) (sdk.ReleaseTerminalResponse, error) {
	return sdk.ReleaseTerminalResponse{}, sdk.NewMethodNotFound(sdk.ClientMethodTerminalRelease)
}

func (s *session) WaitForTerminalExit(context.Context, sdk.WaitForTerminalExitRequest) (sdk.WaitForTerminalExitResponse, error) {
	return sdk.WaitForTerminalExitResponse{}, sdk.NewMethodNotFound(sdk.ClientMethodTerminalWaitForExit)
}

// chanCounter counts and lets a goroutine wait for a count.
type chanCounter struct {
	mu sync.Mutex
	n  int64
	ch chan struct{} // closed and replaced at each add
}

func newChanCounter() *chanCounter { return &chanCounter{ch: make(chan struct{})} }

func (c *chanCounter) add() {
	c.mu.Lock()
	c.n++
	close(c.ch)
	c.ch = make(chan struct{})
	c.mu.Unlock()
}

// waitFor returns once the count reaches n or ctx ends.
func (c *chanCounter) waitFor(ctx context.Context, n int64) {
	for {
		c.mu.Lock()
		got, ch := c.n, c.ch
		c.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return
		}
	}
}
