package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/model/builtin"
	"github.com/threadline/threadline/model/tool"
	"github.com/threadline/threadline/stream"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/engine"
	"github.com/threadline/threadline/thread/threadtest"
)

var _ thread.Tools = (*tool.Registry)(nil)

// agentScript is a model that plays one list of deltas per step (the
// last list again for every later step) and records each step's request.
type agentScript struct {
	steps [][]thread.Delta
	// usage, when set, is each step's prompt and completion tokens (one
	// each otherwise).
	usage [][2]int
	mu    sync.Mutex
	reqs  []thread.ModelRequest
}

func (m *agentScript) Stream(ctx context.Context, req thread.ModelRequest, on func(thread.Delta) error) (thread.ModelResult, error) {
	m.mu.Lock()
	i := len(m.reqs)
	m.reqs = append(m.reqs, req)
	m.mu.Unlock()
	res := thread.ModelResult{StopReason: thread.StopDone, PromptTokens: 1, CompletionTokens: 1}
	if i < len(m.usage) {
		res.PromptTokens, res.CompletionTokens = m.usage[i][0], m.usage[i][1]
	}
	for _, d := range m.steps[min(i, len(m.steps)-1)] {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		if err := on(d); err != nil {
			return res, err
		}
		if d.Kind == thread.DeltaToolCallArgs {
			res.StopReason = thread.StopToolCalls
		}
	}
	return res, nil
}

func (m *agentScript) requests() []thread.ModelRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]thread.ModelRequest(nil), m.reqs...)
}

func text(s string) thread.Delta { return thread.Delta{Kind: thread.DeltaText, Text: s} }

func call(id, name, args string) thread.Delta {
	return thread.Delta{Kind: thread.DeltaToolCallArgs, ToolCallID: id, ToolName: name, ArgsText: args}
}

// funcTool is a server tool whose call is fn.
type funcTool struct {
	name string
	fn   func(ctx context.Context, args json.RawMessage) (thread.ToolOutput, error)
}

func (f funcTool) Spec() thread.ToolSpec {
	return thread.ToolSpec{Name: f.name, Description: f.name, Parameters: json.RawMessage(`{"type":"object"}`)}
}

func (f funcTool) Call(ctx context.Context, args json.RawMessage) (thread.ToolOutput, error) {
	return f.fn(ctx, args)
}

func registry(t *testing.T, tools ...tool.Tool) *tool.Registry {
	t.Helper()
	r := tool.NewRegistry(10 * time.Second)
	if err := r.Add(tools...); err != nil {
		t.Fatal(err)
	}
	return r
}

// runAgent starts a run of text and follows it to its end.
func runAgent(t *testing.T, svc *engine.Service, text string, cfg thread.RunConfig) (uuid.UUID, *thread.Run, []thread.Event) {
	t.Helper()
	tid := uuid.New()
	r, _, err := svc.StartRun(context.Background(), "local", tid, thread.RunRequest{Message: msg(text), Config: cfg})
	if err != nil {
		t.Fatalf("StartRun: %v", err)
	}
	evs, done := live(svc, r)
	return tid, r, rest(t, evs, done)
}

// reply is the run's assistant message in the final snapshot.
func reply(t *testing.T, evs []thread.Event, r *thread.Run) *checkpoint.Node {
	t.Helper()
	last := evs[len(evs)-1]
	if !last.Final() {
		t.Fatalf("last event: got %+v, want the final snapshot", last)
	}
	n := last.Snapshot.Tree.Get(r.MessageID)
	if n == nil {
		t.Fatal("the final snapshot has no reply")
	}
	return n
}

// sameAgentEvents is sameEvents that also compares the agent fields and
// the content of every snapshot's reply.
func sameAgentEvents(t *testing.T, what string, got, want []thread.Event, msgID uuid.UUID) {
	t.Helper()
	sameEvents(t, what, got, want)
	for i := range got {
		g, w := got[i], want[i]
		if g.CallID != w.CallID || g.Name != w.Name || string(g.Data) != string(w.Data) || g.IsError != w.IsError || g.MessageID != w.MessageID {
			t.Fatalf("%s: event %d: got %+v, want %+v", what, i, g, w)
		}
		if g.Type == thread.KindSnapshot {
			gj, _ := json.Marshal(g)
			wj, _ := json.Marshal(w)
			if string(gj) != string(wj) {
				t.Fatalf("%s: snapshot %d:\n got %s\nwant %s", what, g.Sequence, gj, wj)
			}
		}
	}
}

// TestAgentDemoCalculator: the built-in demo as an agent: it calls
// calculator on 12*7, reads 84 in its next step and answers with it, in one
// assistant message; the stream has the tool_call pieces, the tool_result
// and an interim snapshot, and a replay from the store is the same.
func TestAgentDemoCalculator(t *testing.T) {
	t.Parallel()
	// A token hold (here longer than any test) holds the tokens only: the
	// tool step and the run end send them, and the events are the same.
	for _, hold := range []time.Duration{0, time.Hour} {
		t.Run(fmt.Sprint("hold=", hold), func(t *testing.T) {
			t.Parallel()
			agentDemoCalculator(t, hold)
		})
	}
}

func agentDemoCalculator(t *testing.T, hold time.Duration) {
	svc, st, _ := fakeSetup(t, builtin.NewDemo(0), engine.Config{Tools: registry(t, tool.Builtins(nil)...), TokenHold: hold})
	tid, r, evs := runAgent(t, svc, "what is 12*7?", thread.RunConfig{})
	args, result, interim := calcEvents(t, evs, r)
	if args != `{"expression":"12*7"}` || result == nil || string(result.Data) != "84" || result.IsError {
		t.Fatalf("tool call: args %q, result %+v; want {\"expression\":\"12*7\"} answered 84", args, result)
	}
	if interim != 1 {
		t.Fatalf("interim snapshots: got %d, want 1 (after the tool step)", interim)
	}
	n := reply(t, evs, r)
	c := n.Content
	if len(c) != 3 || c[0].Type != "text" || c[1].Type != "tool-call" || c[2].Type != "text" {
		t.Fatalf("reply parts: got %+v, want text, tool-call, text", c)
	}
	if string(c[1].Args) != `{"expression":"12*7"}` || string(c[1].Result) != "84" || c[1].IsError || !strings.Contains(c[2].Text, "84") {
		t.Fatalf("reply: got %+v, want the call answered 84 and a text with 84", c)
	}
	if n.Status.Type != "complete" || evs[len(evs)-1].Snapshot.RunStatus != thread.RunSucceeded {
		t.Fatalf("status: got %+v / %s, want complete / succeeded", n.Status, evs[len(evs)-1].Snapshot.RunStatus)
	}
	sameAgentEvents(t, "replay", replay(t, st, tid, r.ID), evs, r.MessageID)
}

// calcEvents returns the calculator call's arguments as streamed, its
// result event and the number of interim snapshots, checking sequences.
func calcEvents(t *testing.T, evs []thread.Event, r *thread.Run) (string, *thread.Event, int) {
	t.Helper()
	var args strings.Builder
	var result *thread.Event
	interim := 0
	for i, ev := range evs {
		if ev.Sequence != int64(i+1) {
			t.Fatalf("event %d has sequence %d", i, ev.Sequence)
		}
		switch ev.Type {
		case thread.KindToolCall:
			if ev.Name != "calculator" || ev.MessageID != r.MessageID {
				t.Fatalf("tool_call: got %+v, want calculator on the reply", ev)
			}
			args.WriteString(ev.Text)
		case thread.KindToolResult:
			result = &evs[i]
		case thread.KindSnapshot:
			if !ev.Final() && i > 0 {
				interim++
			}
		}
	}
	return args.String(), result, interim
}

// TestAgentParallelTools: the calls of one step run in parallel (each
// waits for the other to start), a failing tool and an unknown tool
// answer isError and the run goes on, and the next step sees every call
// with its result.
func TestAgentParallelTools(t *testing.T) {
	t.Parallel()
	aStarted, bStarted := make(chan struct{}), make(chan struct{})
	pair := func(name string, mine, other chan struct{}) tool.Tool {
		return funcTool{name, func(ctx context.Context, _ json.RawMessage) (thread.ToolOutput, error) {
			close(mine)
			select {
			case <-other:
				return tool.ValueResult(name + " ok"), nil
			case <-ctx.Done():
				return thread.ToolOutput{}, ctx.Err()
			}
		}}
	}
	boom := funcTool{"boom", func(context.Context, json.RawMessage) (thread.ToolOutput, error) {
		return thread.ToolOutput{}, errors.New("it broke")
	}}
	m := &agentScript{steps: [][]thread.Delta{
		{text("Calling."), call("c1", "a", `{}`), call("c2", "b", `{"x":`), call("c3", "boom", `{}`), call("c2", "b", `1}`), call("c4", "nope", `{}`)},
		{text("Done.")},
	}}
	svc, _, _ := fakeSetup(t, m, engine.Config{Tools: registry(t, pair("a", aStarted, bStarted), pair("b", bStarted, aStarted), boom)})
	_, r, evs := runAgent(t, svc, "go", thread.RunConfig{})
	c := reply(t, evs, r).Content
	want := []struct {
		id, result string
		isError    bool
	}{{"c1", `"a ok"`, false}, {"c2", `"b ok"`, false}, {"c3", `"it broke"`, true}, {"c4", `"there is no tool \"nope\""`, true}}
	if len(c) != 6 {
		t.Fatalf("reply parts: got %+v, want text, 4 calls, text", c)
	}
	for i, w := range want {
		p := c[i+1]
		if p.ToolCallID != w.id || string(p.Result) != w.result || p.IsError != w.isError {
			t.Errorf("call %d: got %s %s isError %v, want %s %s isError %v", i, p.ToolCallID, p.Result, p.IsError, w.id, w.result, w.isError)
		}
	}
	if string(c[2].Args) != `{"x":1}` {
		t.Errorf("call c2 args: got %s, want {\"x\":1} from its two pieces", c[2].Args)
	}
	reqs := m.requests()
	if len(reqs) != 2 || len(reqs[0].Tools) != 4 || reqs[0].Tools[3].Name != "delegate" {
		t.Fatalf("steps: got %d, first with %d tools; want 2 steps, 3 tools and delegate", len(reqs), len(reqs[0].Tools))
	}
	last := reqs[1].Messages[len(reqs[1].Messages)-1]
	if last.Role != checkpoint.RoleAssistant || len(last.Parts) != 5 || last.Parts[3].Call == nil || !last.Parts[3].Call.IsError ||
		string(last.Parts[1].Call.Result) != `"a ok"` {
		t.Fatalf("the second step's turn: got %+v, want the text and the four answered calls", last)
	}
}

// TestAgentMaxSteps: a model that calls a tool at every step is stopped
// after max_steps: the reply is incomplete/length, the last step's call is
// answered as not run, and a call id a provider reuses across steps is
// made unique.
func TestAgentMaxSteps(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	count := funcTool{"count", func(context.Context, json.RawMessage) (thread.ToolOutput, error) {
		return tool.ValueResult(calls.Add(1)), nil
	}}
	m := &agentScript{steps: [][]thread.Delta{{call("c", "count", `{}`)}}}
	svc, _, _ := fakeSetup(t, m, engine.Config{Tools: registry(t, count)})
	_, r, evs := runAgent(t, svc, "loop", thread.RunConfig{MaxSteps: 3})
	n := reply(t, evs, r)
	if n.Status.Type != "incomplete" || n.Status.Reason != "length" {
		t.Fatalf("status: got %+v, want incomplete/length", n.Status)
	}
	if got := len(m.requests()); got != 3 || calls.Load() != 2 {
		t.Fatalf("steps %d, tool calls run %d; want 3 steps, 2 calls run", got, calls.Load())
	}
	ids := map[string]bool{}
	for _, p := range n.Content {
		ids[p.ToolCallID] = true
	}
	if len(n.Content) != 3 || len(ids) != 3 || !n.Content[2].IsError || !strings.Contains(string(n.Content[2].Result), "max_steps") {
		t.Fatalf("reply: got %+v, want three calls with distinct ids, the last not run", n.Content)
	}
}

// TestAgentCancelStopsTool: cancelling a run stops its running tool (its
// context ends), the call is answered cancelled and the run ends
// cancelled.
func TestAgentCancelStopsTool(t *testing.T) {
	t.Parallel()
	started, stopped := make(chan struct{}), make(chan struct{})
	block := funcTool{"block", func(ctx context.Context, _ json.RawMessage) (thread.ToolOutput, error) {
		close(started)
		<-ctx.Done()
		close(stopped)
		return thread.ToolOutput{}, ctx.Err()
	}}
	m := &agentScript{steps: [][]thread.Delta{{call("c1", "block", `{}`)}, {text("never")}}}
	svc, _, _ := fakeSetup(t, m, engine.Config{Tools: registry(t, block)})
	tid := uuid.New()
	r, _, err := svc.StartRun(context.Background(), "local", tid, thread.RunRequest{Message: msg("block")})
	if err != nil {
		t.Fatal(err)
	}
	evs, done := live(svc, r)
	<-started
	if err := svc.CancelRun(context.Background(), "local", tid, r.ID); err != nil {
		t.Fatal(err)
	}
	<-stopped
	all := rest(t, evs, done)
	n := reply(t, all, r)
	if all[len(all)-1].Snapshot.RunStatus != thread.RunCancelled || n.Status.Reason != "cancelled" {
		t.Fatalf("end: got %s / %+v, want cancelled", all[len(all)-1].Snapshot.RunStatus, n.Status)
	}
	if len(n.Content) != 1 || !n.Content[0].IsError || string(n.Content[0].Result) != `"cancelled"` || len(m.requests()) != 1 {
		t.Fatalf("reply: got %+v after %d steps, want the call answered cancelled and no second step", n.Content, len(m.requests()))
	}
}

// TestAgentRecoveryNeverRerunsTools: a run whose process dies during a
// tool call is recovered with the call answered "interrupted"; the tool
// ran once, and the log replays the same.
func TestAgentRecoveryNeverRerunsTools(t *testing.T) {
	t.Parallel()
	block, runs, started, release := blockingTool()
	m := &agentScript{steps: [][]thread.Delta{{text("Working."), call("c1", "block", `{}`)}, {text("after")}}}
	svc, st, _ := fakeSetup(t, m, engine.Config{Tools: registry(t, block)})
	tid := uuid.New()
	r, _, err := svc.StartRun(context.Background(), "local", tid, thread.RunRequest{Message: msg("block")})
	if err != nil {
		t.Fatal(err)
	}
	evs, done := live(svc, r)
	for ev := next(t, evs); ev.Type != thread.KindToolCall; ev = next(t, evs) {
	}
	<-started
	if n := recoverer(t, st).Recover(context.Background()); n != 1 {
		t.Fatalf("Recover: got %d, want 1", n)
	}
	close(release)
	for range evs {
	}
	<-done
	got := replay(t, st, tid, r.ID)
	n := reply(t, got, r)
	if got[len(got)-1].Snapshot.RunStatus != thread.RunInterrupted || len(n.Content) != 2 ||
		string(n.Content[1].Result) != `"interrupted"` || !n.Content[1].IsError {
		t.Fatalf("recovered reply: got %s %+v, want interrupted with the call answered \"interrupted\"", got[len(got)-1].Snapshot.RunStatus, n.Content)
	}
	if code := got[len(got)-2].Code; code != errcode.RunInterrupted {
		t.Fatalf("the event before the last: got code %q, want run_interrupted", code)
	}
	if runs.Load() != 1 {
		t.Fatalf("the tool ran %d times, want once", runs.Load())
	}
}

// TestAgentTurnCountsInBudget: an earlier agent turn's tool calls and
// results count against the model's context budget, so a turn with a big
// result is trimmed from a later request.
func TestAgentTurnCountsInBudget(t *testing.T) {
	t.Parallel()
	big := funcTool{"big", func(context.Context, json.RawMessage) (thread.ToolOutput, error) {
		return tool.ValueResult(strings.Repeat("x", 4000)), nil
	}}
	m := &agentScript{steps: [][]thread.Delta{{call("c1", "big", `{}`)}, {text("ok")}}}
	st := threadtest.New()
	svc := engine.New(st, stream.New[thread.Event](64), models{m: m, budget: 1000}, nil,
		engine.Config{StartLinger: -1, Tools: registry(t, big)})
	svc.Start()
	t.Cleanup(func() { svc.Shutdown(context.Background()) })
	tid, r1, _ := runAgent(t, svc, "first", thread.RunConfig{})
	r2, _, err := svc.StartRun(context.Background(), "local", tid, thread.RunRequest{Message: msg("second"), ParentID: r1.MessageID})
	if err != nil {
		t.Fatal(err)
	}
	evs, done := live(svc, r2)
	rest(t, evs, done)
	reqs := m.requests()
	last := reqs[len(reqs)-1].Messages
	if len(last) != 1 || last[0].Parts[0].Text != "second" {
		t.Fatalf("the later request: got %d messages, want only the new question (the big turn trimmed)", len(last))
	}
}

// blockingTool is the tool "block": a call counts itself in runs, closes
// started and waits for release to be closed, then answers "late".
func blockingTool() (block funcTool, runs *atomic.Int64, started, release chan struct{}) {
	runs = new(atomic.Int64)
	started, release = make(chan struct{}), make(chan struct{})
	block = funcTool{"block", func(context.Context, json.RawMessage) (thread.ToolOutput, error) {
		runs.Add(1)
		close(started)
		<-release
		return tool.ValueResult("late"), nil
	}}
	return block, runs, started, release
}
