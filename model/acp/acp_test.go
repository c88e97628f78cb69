package acp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/model"
	"github.com/threadline/threadline/model/acp"
	"github.com/threadline/threadline/stream"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/engine"
	"github.com/threadline/threadline/thread/threadtest"
	"github.com/threadline/threadline/thread/threadtest/wait"
)

// rawSink keeps the raw records runs hand the engine's sink.
type rawSink struct {
	mu   sync.Mutex
	recs map[uuid.UUID][]rawRec
}

type rawRec struct {
	kind string
	line string
}

func (s *rawSink) Append(runID uuid.UUID, _ int64, kind string, payload json.RawMessage) {
	var line string
	_ = json.Unmarshal(payload, &line)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recs[runID] = append(s.recs[runID], rawRec{kind, line})
}

func (s *rawSink) of(id uuid.UUID) []rawRec {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]rawRec(nil), s.recs[id]...)
}

// fixture is a service whose models include the test agents.
type fixture struct {
	svc  *engine.Service
	raw  *rawSink
	dir  string
	reg  *model.Registry
	pids map[string]string // agent -> its pid file
}

// setup configures one agent per mode, each the test binary itself
// (TestMain), and a service running them.
func setup(t *testing.T, modes ...string) *fixture {
	t.Helper()
	f := &fixture{raw: &rawSink{recs: map[uuid.UUID][]rawRec{}}, dir: t.TempDir(), pids: map[string]string{}}
	agents := map[string]acp.AgentConfig{}
	for _, m := range modes {
		f.pids[m] = filepath.Join(f.dir, m+".pid")
		agents[m] = acp.AgentConfig{Command: os.Args[0], Cwd: f.dir, Timeout: acp.Duration(2 * time.Second), MaxMessageBytes: 1 << 20,
			Env: map[string]string{"ACPTEST_MODE": m, "ACPTEST_PIDFILE": f.pids[m], "ACPTEST_MARK": filepath.Join(f.dir, m+".mark")}}
	}
	f.reg = newRegistry(t, agents, nil)
	f.svc = engine.New(threadtest.New(), stream.New[thread.Event](256), f.reg, nil, engine.Config{StartLinger: -1, Raw: f.raw})
	f.svc.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		f.svc.Shutdown(ctx)
		f.reg.Stop()
	})
	return f
}

// newRegistry is a model registry with agents, and env over the
// service's environment.
func newRegistry(t *testing.T, agents map[string]acp.AgentConfig, env map[string]string) *model.Registry {
	t.Helper()
	b, err := json.Marshal(acp.Config{Agents: agents})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "agents.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	reg, err := model.NewRegistry(func(k string) string {
		if k == acp.EnvConfig {
			return path
		}
		if v, ok := env[k]; ok {
			return v
		}
		return os.Getenv(k)
	})
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// run starts a run and follows it to its end.
func (f *fixture) run(t *testing.T, tid uuid.UUID, req thread.RunRequest) (*thread.Run, []thread.Event) {
	t.Helper()
	r, _, err := f.svc.StartRun(context.Background(), "local", tid, req)
	if err != nil {
		t.Fatalf("StartRun: %v", err)
	}
	return r, f.follow(t, r)
}

func (f *fixture) follow(t *testing.T, r *thread.Run) []thread.Event {
	t.Helper()
	var evs []thread.Event
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := f.svc.FollowRun(ctx, "local", r, 0, func(ev thread.Event, _ bool) error {
		evs = append(evs, ev)
		return nil
	})
	if err != nil {
		t.Fatalf("follow: %v", err)
	}
	return evs
}

func ask(agent, text string) thread.RunRequest {
	return thread.RunRequest{Message: &thread.UserMessage{Content: []checkpoint.Part{{Type: "text", Text: text}}},
		Config: thread.RunConfig{Model: "acp:" + agent}}
}

// final returns the last event's status and the reply in it.
func final(t *testing.T, evs []thread.Event, r *thread.Run) (thread.RunStatus, *checkpoint.Node) {
	t.Helper()
	last := evs[len(evs)-1]
	if !last.Final() {
		t.Fatalf("last event %+v is not the final snapshot", last)
	}
	return last.Snapshot.RunStatus, last.Snapshot.Tree.Get(r.MessageID)
}

func errorEvent(evs []thread.Event) *thread.Event {
	for i := range evs {
		if evs[i].Type == thread.KindError {
			return &evs[i]
		}
	}
	return nil
}

// gone checks the agent process of pid file has been reaped.
func gone(t *testing.T, pidFile string) {
	t.Helper()
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("the agent wrote no pid: %v", err)
	}
	pid, _ := strconv.Atoi(string(b))
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("agent process %d: kill -0 got %v, want ESRCH (killed and reaped)", pid, err)
	}
}

func part(n *checkpoint.Node, typ, key string) *checkpoint.Part {
	for i := range n.Content {
		p := &n.Content[i]
		if p.Type == typ && (p.ToolCallID == key || p.Name == key || key == "") {
			return p
		}
	}
	return nil
}

// TestUpdatesMap: every kind of session update reaches the reply as its
// part, the events carry them, and the raw records hold every JSON-RPC
// line both ways.
func TestUpdatesMap(t *testing.T) {
	t.Parallel()
	f := setup(t, "all")
	r, evs := f.run(t, uuid.New(), ask("all", "hi"))
	status, n := final(t, evs, r)
	if status != thread.RunSucceeded || n.Status == nil || n.Status.Type != "complete" {
		t.Fatalf("status: got %s %+v, want succeeded complete; error %+v", status, n.Status, errorEvent(evs))
	}
	if p := part(n, checkpoint.PartReasoning, ""); p == nil || p.Text != "Thinking it over." {
		t.Errorf("reasoning: got %+v", p)
	}
	if p := part(n, checkpoint.PartText, ""); p == nil || p.Text != "Hello there." {
		t.Errorf("text: got %+v, want Hello there.", p)
	}
	var plan struct {
		ID    string `json:"id"`
		Tasks []struct{ ID, Title, Status string }
	}
	if p := part(n, checkpoint.PartData, "plan"); p == nil || json.Unmarshal(p.Data, &plan) != nil || len(plan.Tasks) != 2 ||
		plan.Tasks[0].Status != "done" || plan.Tasks[1].Status != "pending" || plan.ID != "plan_sess_test" {
		t.Errorf("plan: got %+v", plan)
	}
	t1 := part(n, checkpoint.PartToolCall, "t1")
	if t1 == nil || t1.ToolName != "Read file" || t1.ArgsText != `{"path":"/a.txt"}` || t1.IsError || !strings.Contains(string(t1.Result), "file body") {
		t.Errorf("t1: got %+v", t1)
	}
	t2 := part(n, checkpoint.PartToolCall, "t2")
	if t2 == nil || !t2.IsError || !strings.Contains(string(t2.Result), `"failed"`) || !strings.Contains(string(t2.Result), `"exit":1`) {
		t.Errorf("t2: got %+v", t2)
	}
	t3 := part(n, checkpoint.PartToolCall, "t3")
	if t3 == nil || !t3.IsError || !strings.Contains(string(t3.Result), "no outcome") {
		t.Errorf("t3 (left open): got %+v", t3)
	}
	if p := part(n, checkpoint.PartData, "image"); p == nil || !strings.Contains(string(p.Data), "image/png") {
		t.Errorf("image: got %+v", p)
	}
	kinds := map[string]int{}
	for _, ev := range evs {
		kinds[ev.Type]++
	}
	for _, k := range []string{thread.KindToken, thread.KindReasoning, thread.KindToolCall, thread.KindToolResult, thread.KindData} {
		if kinds[k] == 0 {
			t.Errorf("no %s event in %v", k, kinds)
		}
	}
	var sent, got []string
	for _, rec := range f.raw.of(r.ID) {
		if rec.kind == thread.RawProviderSent {
			sent = append(sent, rec.line)
		} else {
			got = append(got, rec.line)
		}
	}
	for _, want := range []string{`"method":"initialize"`, `"method":"session/new"`, `"method":"session/prompt"`} {
		if !contains(sent, want) {
			t.Errorf("raw sent lines have no %s: %v", want, sent)
		}
	}
	for _, want := range []string{`"sessionUpdate":"plan"`, `"stopReason":"end_turn"`, `"sessionId":"sess_test"`} {
		if !contains(got, want) {
			t.Errorf("raw received lines have no %s", want)
		}
	}
	gone(t, f.pids["all"])
}

func contains(lines []string, s string) bool {
	for _, l := range lines {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

// TestRegenerateReplaysHistory: a second turn and a regenerate of it send
// the branch's earlier messages in the prompt.
func TestRegenerateReplaysHistory(t *testing.T) {
	t.Parallel()
	f := setup(t, "all")
	tid := uuid.New()
	r1, evs := f.run(t, tid, ask("all", "first question"))
	if st, _ := final(t, evs, r1); st != thread.RunSucceeded {
		t.Fatalf("first run: %s", st)
	}
	req := ask("all", "second question")
	req.ParentID = r1.MessageID
	r2, evs := f.run(t, tid, req)
	_, n := final(t, evs, r2)
	text := n.Text()
	for _, want := range []string{"The conversation so far", "first question", "Hello there.", "Read file", "second question"} {
		if !strings.Contains(text, want) {
			t.Errorf("second turn's echoed prompt has no %q: %s", want, text)
		}
	}
	regen := thread.RunRequest{ParentID: r2.UserMessageID, Config: thread.RunConfig{Model: "acp:all"}}
	r3, evs := f.run(t, tid, regen)
	st, n3 := final(t, evs, r3)
	if st != thread.RunSucceeded || !strings.Contains(n3.Text(), "first question") || !strings.Contains(n3.Text(), "second question") {
		t.Errorf("regenerate: got %s %q", st, n3.Text())
	}
}

// TestPermission: a permission request ends the run requires_action with
// the call waiting and a permission part; the approval or rejection goes
// back to the waiting process as its option (the first allow or reject
// one, or the one the person chose by its id), and the turn ends.
func TestPermission(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		approve bool
		option  string
		want    string
		errs    bool
	}{
		{"approve", true, "", "Done: allowed.", false},
		{"reject", false, "", "Skipped: selected no.", true},
		{"allow always", true, "always", "Done: allowed always.", false},
		{"deny by id", false, "no", "Skipped: selected no.", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, "perm")
			tid := uuid.New()
			r, evs := f.run(t, tid, ask("perm", "go"))
			st, n := final(t, evs, r)
			if st != thread.RunRequiresAction {
				t.Fatalf("status: got %s, want requires_action; error %+v", st, errorEvent(evs))
			}
			call := part(n, checkpoint.PartToolCall, "p1")
			perm := part(n, checkpoint.PartData, "permission")
			if call == nil || call.Result != nil || perm == nil || !strings.Contains(string(perm.Data), `"optionId":"yes"`) {
				t.Fatalf("waiting call %+v, permission %+v", call, perm)
			}
			req := thread.RunRequest{ParentID: r.MessageID, Approvals: []thread.Approval{{CallID: "p1", Approved: c.approve, OptionID: c.option}}}
			r2, evs := f.run(t, tid, req)
			st, _ = final(t, evs, r2)
			n = evs[len(evs)-1].Snapshot.Tree.Get(r2.ID) // the continuation's checkpoint: the whole turn
			if st != thread.RunSucceeded {
				t.Fatalf("continuation: got %s; error %+v", st, errorEvent(evs))
			}
			if !strings.Contains(n.Text(), c.want) {
				t.Errorf("continuation text: got %q, want %q", n.Text(), c.want)
			}
			call = part(n, checkpoint.PartToolCall, "p1")
			if call == nil || call.Result == nil || call.IsError != c.errs {
				t.Errorf("p1 after the answer: got %+v, want answered, isError %v", call, c.errs)
			}
			gone(t, f.pids["perm"])
		})
	}
}

// TestPermissionBadOption: an option_id the agent did not offer, or one
// whose kind says the opposite of approved, is invalid_request and
// starts nothing: the process still waits, and a right answer goes on.
func TestPermissionBadOption(t *testing.T) {
	t.Parallel()
	f := setup(t, "perm")
	tid := uuid.New()
	r, evs := f.run(t, tid, ask("perm", "go"))
	if st, _ := final(t, evs, r); st != thread.RunRequiresAction {
		t.Fatalf("status: got %s, want requires_action", st)
	}
	for _, a := range []thread.Approval{
		{CallID: "p1", Approved: true, OptionID: "maybe"},
		{CallID: "p1", Approved: false, OptionID: "always"},
		{CallID: "p1", Approved: true, OptionID: "no"},
	} {
		_, _, err := f.svc.StartRun(context.Background(), "local", tid, thread.RunRequest{ParentID: r.MessageID, Approvals: []thread.Approval{a}})
		if e, ok := errcode.As(err); !ok || e.Code != errcode.Invalid {
			t.Errorf("approval %+v: got %v, want invalid_request", a, err)
		}
	}
	r2, evs := f.run(t, tid, thread.RunRequest{ParentID: r.MessageID, Approvals: []thread.Approval{{CallID: "p1", Approved: true, OptionID: "always"}}})
	st, _ := final(t, evs, r2)
	if n := evs[len(evs)-1].Snapshot.Tree.Get(r2.ID); st != thread.RunSucceeded || n == nil || !strings.Contains(n.Text(), "Done: allowed always.") {
		t.Fatalf("continuation after the refusals: got %s %+v; error %+v", st, n, errorEvent(evs))
	}
}

// TestCancel: cancelling the run sends session/cancel, the agent answers
// cancelled, and the run ends cancelled with the process gone.
func TestCancel(t *testing.T) {
	t.Parallel()
	f := setup(t, "cancel")
	tid := uuid.New()
	r, _, err := f.svc.StartRun(context.Background(), "local", tid, ask("cancel", "work"))
	if err != nil {
		t.Fatal(err)
	}
	var evs []thread.Event
	ctx, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	cancelled := false
	err = f.svc.FollowRun(ctx, "local", r, 0, func(ev thread.Event, _ bool) error {
		evs = append(evs, ev)
		if ev.Type == thread.KindToken && !cancelled {
			cancelled = true
			go func() { _ = f.svc.CancelRun(context.Background(), "local", tid, r.ID) }()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	st, n := final(t, evs, r)
	if st != thread.RunCancelled || n.Status == nil || n.Status.Reason != "cancelled" {
		t.Fatalf("got %s %+v, want cancelled", st, n.Status)
	}
	if b, _ := os.ReadFile(filepath.Join(f.dir, "cancel.mark")); string(b) != "got session/cancel" {
		t.Errorf("the agent's mark: got %q, want it to have got session/cancel", b)
	}
	if !contains(lines(f.raw.of(r.ID), thread.RawProviderSent), `"method":"session/cancel"`) {
		t.Error("no session/cancel in the raw sent lines")
	}
	gone(t, f.pids["cancel"])
}

func lines(recs []rawRec, kind string) []string {
	var out []string
	for _, r := range recs {
		if r.kind == kind {
			out = append(out, r.line)
		}
	}
	return out
}

// TestMisbehaving: a crash, garbage, a huge line and silence each end
// the run failed with an error that says so, and the process is reaped.
func TestMisbehaving(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		mode string
		code errcode.Code
		want string
	}{
		{"crash", errcode.ModelError, "boom: the agent crashed"},
		{"garbage", errcode.ModelError, "not JSON-RPC"},
		{"huge", errcode.ModelError, "over 1048576 bytes"},
		{"hang", errcode.ModelTimeout, "nothing from the agent for 2s"},
		{"initerr", errcode.ModelError, "initialize: the agent answered an error (-32000): not logged in"},
	} {
		t.Run(c.mode, func(t *testing.T) {
			t.Parallel()
			f := setup(t, c.mode)
			r, evs := f.run(t, uuid.New(), ask(c.mode, "go"))
			st, _ := final(t, evs, r)
			e := errorEvent(evs)
			if st != thread.RunFailed || e == nil || e.Code != c.code || !strings.Contains(e.Text, c.want) {
				t.Fatalf("got %s, error %+v; want failed, %s saying %q", st, e, c.code, c.want)
			}
			gone(t, f.pids[c.mode])
		})
	}
}

// TestRefusal: a refusal ends the reply incomplete / content-filter.
func TestRefusal(t *testing.T) {
	t.Parallel()
	f := setup(t, "refusal")
	r, evs := f.run(t, uuid.New(), ask("refusal", "go"))
	st, n := final(t, evs, r)
	if st != thread.RunSucceeded || n.Status == nil || n.Status.Reason != "content-filter" {
		t.Fatalf("got %s %+v, want incomplete/content-filter", st, n.Status)
	}
}

// TestSDKExampleAgent drives the SDK's own example agent, built from the
// module cache: its scripted turn (text, a tool call read and completed,
// a permission for an edit, with its options' names) ends
// requires_action; the person's choice of its "allow" option goes back
// and the turn ends with its closing text.
func TestSDKExampleAgent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "example-agent")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/coder/acp-go-sdk/example/agent")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the SDK's example agent: %v\n%s", err, out)
	}
	reg := newRegistry(t, map[string]acp.AgentConfig{"example": {Command: bin, Cwd: dir, Timeout: acp.Duration(10 * time.Second)}}, nil)
	raw := &rawSink{recs: map[uuid.UUID][]rawRec{}}
	svc := engine.New(threadtest.New(), stream.New[thread.Event](256), reg, nil, engine.Config{StartLinger: -1, Raw: raw})
	svc.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		svc.Shutdown(ctx)
		reg.Stop()
	})
	f := &fixture{svc: svc, raw: raw}
	tid := uuid.New()
	r, evs := f.run(t, tid, ask("example", "improve the project"))
	st, n := final(t, evs, r)
	if st != thread.RunRequiresAction {
		t.Fatalf("status: got %s, want requires_action; error %+v", st, errorEvent(evs))
	}
	if !strings.Contains(n.Text(), "I'll help you with that.") {
		t.Errorf("text: got %q", n.Text())
	}
	read := part(n, checkpoint.PartToolCall, "call_1")
	if read == nil || read.ToolName != "Reading project files" || read.IsError || !strings.Contains(string(read.Result), "My Project") {
		t.Errorf("call_1: got %+v", read)
	}
	edit := part(n, checkpoint.PartToolCall, "call_2")
	perm := part(n, checkpoint.PartData, "permission")
	if edit == nil || edit.Result != nil || perm == nil || !strings.Contains(string(perm.Data), `"optionId":"allow"`) {
		t.Fatalf("call_2 %+v, permission %+v: want call_2 waiting and its options", edit, perm)
	}
	if id, opts, _ := thread.ReadPermission(perm.Data); id != "call_2" ||
		fmt.Sprint(opts) != "[{allow Allow this change allow_once} {reject Skip this change reject_once}]" {
		t.Errorf("permission of %q offers %v, want the example agent's two options by name", id, opts)
	}
	// The person chose the agent's own option by its id ("Allow this change").
	r2, evs := f.run(t, tid, thread.RunRequest{ParentID: r.MessageID, Approvals: []thread.Approval{{CallID: "call_2", Approved: true, OptionID: "allow"}}})
	st, _ = final(t, evs, r2)
	n = evs[len(evs)-1].Snapshot.Tree.Get(r2.ID)
	if st != thread.RunSucceeded || n == nil || !strings.Contains(n.Text(), "successfully updated the configuration") {
		t.Fatalf("continuation: got %s %+v; error %+v", st, n, errorEvent(evs))
	}
	if edit = part(n, checkpoint.PartToolCall, "call_2"); edit == nil || edit.IsError || !strings.Contains(string(edit.Result), "Configuration updated") {
		t.Errorf("call_2 after approval: got %+v", edit)
	}
	if !contains(lines(raw.of(r2.ID), thread.RawProviderSent), `"optionId":"allow"`) {
		t.Error("the continuation's raw sent lines hold no answer with option allow")
	}
}

// TestMCPServersHandedOver: the stdio servers of THREADLINE_MCP_CONFIG
// reach session/new; HTTP ones do not.
func TestMCPServersHandedOver(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mcpFile := filepath.Join(dir, "mcp.json")
	cfg := `{"servers":[{"name":"files","command":"mcp-files","args":["/srv"]},{"name":"web","url":"http://127.0.0.1:9/mcp"}]}`
	if err := os.WriteFile(mcpFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	pid := filepath.Join(dir, "pid")
	reg := newRegistry(t, map[string]acp.AgentConfig{"all": {Command: os.Args[0], Cwd: dir,
		Env: map[string]string{"ACPTEST_MODE": "all", "ACPTEST_PIDFILE": pid}}}, map[string]string{"THREADLINE_MCP_CONFIG": mcpFile})
	svc := engine.New(threadtest.New(), stream.New[thread.Event](64), reg, nil, engine.Config{StartLinger: -1})
	svc.Start()
	t.Cleanup(func() { svc.Shutdown(context.Background()); reg.Stop() })
	f := &fixture{svc: svc}
	r, evs := f.run(t, uuid.New(), ask("all", "hi"))
	if _, n := final(t, evs, r); !strings.Contains(n.Text(), "MCP<files=mcp-files>") {
		t.Errorf("the agent's session/new named: got %q, want files only", n.Text())
	}
	gone(t, pid)
}

// TestConfig: the registry lists each agent as acp:<name>; a bad file
// stops it with an error naming the variable and what is wrong.
func TestConfig(t *testing.T) {
	t.Parallel()
	reg := newRegistry(t, map[string]acp.AgentConfig{"coder": {Command: "/bin/true"}}, nil)
	var found bool
	for _, m := range reg.List() {
		if m.Name == "acp:coder" && m.Provider == model.ProviderACP && m.Configured {
			found = true
		}
	}
	if !found {
		t.Errorf("List: got %+v, want acp:coder", reg.List())
	}
	for _, c := range []struct{ file, want string }{
		{`{"agents":{"x":{}}}`, "no command"},
		{`{"agents":{"x":{"command":"a","cwd":"rel"}}}`, "absolute path"},
		{`{"agents":{"x":{"command":"a","timeout":-1}}}`, "negative"},
		{`{"agents":{"bad name":{"command":"a"}}}`, "a name is"},
		{`{"agents":{"x":{"command":"a","extra":1}}}`, "unknown field"},
	} {
		path := filepath.Join(t.TempDir(), "agents.json")
		if err := os.WriteFile(path, []byte(c.file), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := model.NewRegistry(func(k string) string {
			if k == acp.EnvConfig {
				return path
			}
			return ""
		})
		if err == nil || !strings.Contains(err.Error(), acp.EnvConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error naming %s saying %q", c.file, err, acp.EnvConfig, c.want)
		}
	}
}

// registryAt is a model registry with the agents file at path.
func registryAt(tb testing.TB, path string) *model.Registry {
	tb.Helper()
	reg, err := model.NewRegistry(func(k string) string {
		if k == acp.EnvConfig {
			return path
		}
		return os.Getenv(k)
	})
	if err != nil {
		tb.Fatal(err)
	}
	return reg
}

// TestChatStream: a call without tools (a chat call: the title model's)
// is the one Stream method; the reply's text comes as text deltas and the
// process is gone after it; the agent's next run can still wait for a
// permission.
func TestChatStream(t *testing.T) {
	t.Parallel()
	f := setup(t, "all", "perm")
	m, _, err := f.reg.Resolve("acp:all")
	if err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	req := thread.ModelRequest{Messages: []thread.ModelMessage{{Role: checkpoint.RoleUser, Parts: []thread.ModelPart{{Type: "text", Text: "hi"}}}}}
	res, err := m.Stream(context.Background(), req, func(d thread.Delta) error {
		if d.Kind == thread.DeltaText {
			got.WriteString(d.Text)
		}
		return nil
	})
	if err != nil || res.Model == "" || !strings.HasPrefix(got.String(), "Hello there.") {
		t.Fatalf("Stream: got %q, %+v, %v", got.String(), res, err)
	}
	gone(t, f.pids["all"])
	r, evs := f.run(t, uuid.New(), ask("perm", "go"))
	if st, _ := final(t, evs, r); st != thread.RunRequiresAction {
		t.Errorf("a run after the chat call: got %s, want requires_action", st)
	}
}

// TestPermissionTimeout: a process whose permission is not answered
// within permission_timeout is killed, and the continuation then fails
// saying so.
func TestPermissionTimeout(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pid := filepath.Join(dir, "pid")
	reg := newRegistry(t, map[string]acp.AgentConfig{"perm": {Command: os.Args[0], Cwd: dir, PermissionTimeout: acp.Duration(300 * time.Millisecond),
		Env: map[string]string{"ACPTEST_MODE": "perm", "ACPTEST_PIDFILE": pid}}}, nil)
	svc := engine.New(threadtest.New(), stream.New[thread.Event](64), reg, nil, engine.Config{StartLinger: -1})
	svc.Start()
	t.Cleanup(func() { svc.Shutdown(context.Background()); reg.Stop() })
	f := &fixture{svc: svc}
	tid := uuid.New()
	r, evs := f.run(t, tid, ask("perm", "go"))
	if st, _ := final(t, evs, r); st != thread.RunRequiresAction {
		t.Fatalf("got %s, want requires_action", st)
	}
	b, _ := os.ReadFile(pid)
	n, _ := strconv.Atoi(string(b))
	wait.Eventually(t, 10*time.Second, func() bool { return syscall.Kill(n, 0) != nil },
		"the waiting process was not killed after its permission_timeout")
	r2, evs := f.run(t, tid, thread.RunRequest{ParentID: r.MessageID, Approvals: []thread.Approval{{CallID: "p1", Approved: true}}})
	st, _ := final(t, evs, r2)
	if e := errorEvent(evs); st != thread.RunFailed || e == nil || !strings.Contains(e.Text, "is gone") {
		t.Errorf("continuation: got %s %+v, want failed saying the process is gone", st, e)
	}
}
