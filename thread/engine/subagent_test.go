package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/threadline/threadline/api/wire"
	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/stream"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/engine"
	"github.com/threadline/threadline/thread/threadtest"
	twait "github.com/threadline/threadline/thread/threadtest/wait"
)

// subModel answers by its prompt, so that one model serves a parent and
// its sub-agents: "fan:a,b,c" delegates a, b and c at once; "nest"
// delegates "nest" again, "deep" delegates "block"; "block" streams a word and waits for its
// cancel; "paced:x" sends 40 words 5ms apart, "burst:x" at once; "barrier:x" waits until barrier children have started (so
// children that run one after another never end); anything else answers
// "answer to <prompt>". A step after tool calls sums their results up.
type subModel struct {
	mu       sync.Mutex
	tools    map[string][]string // prompt -> the tools its first step was offered
	started  chan string         // each prompt as its first step starts
	barrier  int
	arrived  int
	allThere chan struct{}
}

func newSubModel(barrier int) *subModel {
	return &subModel{tools: map[string][]string{}, started: make(chan string, 64), barrier: barrier, allThere: make(chan struct{})}
}

func (m *subModel) Stream(ctx context.Context, req thread.ModelRequest, on func(thread.Delta) error) (thread.ModelResult, error) {
	last := req.Messages[len(req.Messages)-1]
	if last.Role == checkpoint.RoleAssistant {
		var b strings.Builder
		for _, p := range last.Parts {
			if p.Call != nil {
				fmt.Fprintf(&b, "[%s %v %s]", p.Call.Name, p.Call.IsError, p.Call.Result)
			}
		}
		return thread.ModelResult{StopReason: thread.StopDone}, on(text("summary " + b.String()))
	}
	prompt := last.Parts[0].Text
	m.mu.Lock()
	for _, sp := range req.Tools {
		m.tools[prompt] = append(m.tools[prompt], sp.Name)
	}
	m.mu.Unlock()
	m.started <- prompt
	var res thread.ModelResult
	switch {
	case strings.HasPrefix(prompt, "fan:"):
		for i, task := range strings.Split(strings.TrimPrefix(prompt, "fan:"), ",") {
			args, _ := json.Marshal(map[string]string{"task": task, "title": "T " + task})
			id := fmt.Sprintf("c%d", i+1)
			if err := on(call(id, "delegate", string(args))); err != nil {
				return res, err
			}
			res.ToolCalls = append(res.ToolCalls, thread.ToolCall{ID: id, Name: "delegate", ArgsText: string(args)})
		}
	case prompt == "nest", prompt == "deep":
		args := `{"task":"nest"}`
		if prompt == "deep" {
			args = `{"task":"block"}`
		}
		if err := on(call("n1", "delegate", args)); err != nil {
			return res, err
		}
		res.ToolCalls = []thread.ToolCall{{ID: "n1", Name: "delegate", ArgsText: args}}
	case prompt == "block":
		if err := on(text("waiting")); err != nil {
			return res, err
		}
		<-ctx.Done()
		return res, ctx.Err()
	case strings.HasPrefix(prompt, "barrier:"):
		m.mu.Lock()
		m.arrived++
		if m.arrived == m.barrier {
			close(m.allThere)
		}
		m.mu.Unlock()
		select {
		case <-m.allThere:
		case <-time.After(20 * time.Second):
			return res, fmt.Errorf("the other children never started: they do not run in parallel")
		}
		return thread.ModelResult{StopReason: thread.StopDone}, on(text("answer to " + prompt))
	case strings.HasPrefix(prompt, "paced:"), strings.HasPrefix(prompt, "burst:"):
		for i := range 40 {
			if strings.HasPrefix(prompt, "paced:") {
				time.Sleep(5 * time.Millisecond)
			}
			if err := on(text(fmt.Sprintf("w%d ", i))); err != nil {
				return res, err
			}
		}
		return thread.ModelResult{StopReason: thread.StopDone}, nil
	default:
		for _, w := range strings.SplitAfter("answer to "+prompt, " ") {
			if err := on(text(w)); err != nil {
				return res, err
			}
		}
	}
	if len(res.ToolCalls) > 0 {
		res.StopReason = thread.StopToolCalls
	}
	return res, nil
}

func (m *subModel) offered(prompt string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.tools[prompt]
}

func subSetup(t *testing.T, m *subModel, cfg engine.Config) (*engine.Service, thread.Store) {
	t.Helper()
	cfg.Tools = registry(t)
	svc, st, _ := fakeSetup(t, m, cfg)
	return svc, st
}

// lines is the wire's NDJSON of evs.
func lines(evs []thread.Event) []string {
	out := make([]string, len(evs))
	for i := range evs {
		out[i] = string(wire.AppendEvent(nil, &evs[i]))
	}
	return out
}

// TestSubagentsFanOut: three delegate calls in one step run three child
// runs at once (each waits for the others to start); each call answers
// with its child's reply text and names its child on its part; the
// parent's stream carries every child event as a subagent event, the
// first of each call the child's first snapshot and the last its final
// one; a replay from the store by another engine is the same bytes; the
// children name their parent and are not listed; a child takes a new run.
func TestSubagentsFanOut(t *testing.T) {
	t.Parallel()
	m := newSubModel(3)
	svc, st := subSetup(t, m, engine.Config{})
	tid, r, evs := runAgent(t, svc, "fan:barrier:a,barrier:b,barrier:c", thread.RunConfig{})
	n := reply(t, evs, r)
	if n.Status.Type != "complete" {
		t.Fatalf("parent: got %+v, want complete", n.Status)
	}
	children := map[string]uuid.UUID{}
	for _, p := range n.Content {
		if p.Type != checkpoint.PartToolCall {
			continue
		}
		var task struct{ Task string }
		_ = json.Unmarshal([]byte(p.ArgsText), &task)
		if want := `"answer to ` + task.Task + `"`; string(p.Result) != want || p.IsError || p.Subagent == nil {
			t.Fatalf("call %s: got %s isError %v subagent %v, want %s and its child", p.ToolCallID, p.Result, p.IsError, p.Subagent, want)
		}
		children[p.ToolCallID] = p.Subagent.ThreadID
	}
	if len(children) != 3 {
		t.Fatalf("calls: got %d, want 3", len(children))
	}
	perCall := map[string][]thread.Event{}
	for _, ev := range evs {
		if ev.Type == thread.KindSubagent {
			if ev.Sub.ThreadID != children[ev.CallID] || ev.MessageID != r.MessageID {
				t.Fatalf("subagent event %d: thread %s message %s, want call %s's child %s and message %s",
					ev.Sequence, ev.Sub.ThreadID, ev.MessageID, ev.CallID, children[ev.CallID], r.MessageID)
			}
			perCall[ev.CallID] = append(perCall[ev.CallID], ev.Sub.Event)
		}
	}
	if len(perCall) != 3 {
		t.Fatalf("subagent events: got them for %d calls, want 3", len(perCall))
	}
	for id, cevs := range perCall {
		if len(cevs) < 3 {
			t.Fatalf("call %s: got %d child events, want the snapshot, tokens and the final snapshot", id, len(cevs))
		}
		first, last := cevs[0], cevs[len(cevs)-1]
		if first.Type != thread.KindSnapshot || first.Sequence != 1 || first.Snapshot == nil || !last.Final() ||
			last.Snapshot.RunStatus != thread.RunSucceeded {
			t.Fatalf("call %s: child events from %+v to %+v, want its first snapshot to its final one", id, first, last)
		}
		for i, ev := range cevs {
			if ev.Sequence != int64(i+1) {
				t.Fatalf("call %s: child event %d has sequence %d", id, i, ev.Sequence)
			}
		}
	}
	if got, want := lines(replay(t, st, tid, r.ID)), lines(evs); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("replay differs from the live stream:\n got %s\nwant %s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	ctx := context.Background()
	for id, child := range children {
		th, err := svc.GetThread(ctx, "local", child)
		if err != nil || th.Parent == nil || th.Parent.ThreadID != tid || th.Parent.RunID != r.ID || th.Parent.MessageID != r.MessageID ||
			th.Parent.ToolCallID != id || th.Depth != 1 {
			t.Fatalf("child of %s: got %+v (%v), want its parent named", id, th, err)
		}
	}
	list, _, err := svc.ListThreads(ctx, "local", 100, "")
	if err != nil || len(list) != 1 || list[0].ID != tid {
		t.Fatalf("list: got %d threads (%v), want the parent alone", len(list), err)
	}
	cr, _, err := svc.StartRun(ctx, "local", children["c1"], thread.RunRequest{Message: msg("again")})
	if err != nil {
		t.Fatalf("a new run on a child: %v", err)
	}
	cl, done := live(svc, cr)
	if got := reply(t, rest(t, cl, done), cr); got.Text() != "answer to again" {
		t.Fatalf("a new run on a child: got %q", got.Text())
	}
}

// TestSubagentBounds: over THREADLINE_SUBAGENT_MAX_CHILDREN a call
// answers is_error naming the bound and starts no child; a thread at
// THREADLINE_SUBAGENT_MAX_DEPTH is not offered delegate, and a call made
// anyway answers is_error naming that bound.
func TestSubagentBounds(t *testing.T) {
	t.Parallel()
	t.Run("children", func(t *testing.T) {
		t.Parallel()
		m := newSubModel(0)
		svc, _ := subSetup(t, m, engine.Config{SubagentMaxChildren: 2})
		_, r, evs := runAgent(t, svc, "fan:a,b,c", thread.RunConfig{})
		var errs, ok int
		for _, p := range reply(t, evs, r).Content {
			switch {
			case p.Type != checkpoint.PartToolCall:
			case p.IsError && strings.Contains(string(p.Result), "THREADLINE_SUBAGENT_MAX_CHILDREN") && p.Subagent == nil:
				errs++
			case !p.IsError && p.Subagent != nil:
				ok++
			}
		}
		if errs != 1 || ok != 2 {
			t.Fatalf("calls: got %d refused and %d run, want 1 and 2", errs, ok)
		}
	})
	t.Run("depth", func(t *testing.T) {
		t.Parallel()
		m := newSubModel(0)
		svc, _ := subSetup(t, m, engine.Config{SubagentMaxDepth: 1})
		_, r, evs := runAgent(t, svc, "nest", thread.RunConfig{})
		p := reply(t, evs, r).Content[0]
		// The child (depth 1) was not offered delegate, called it all
		// the same, was refused, and summed that up.
		if p.IsError || p.Subagent == nil || !strings.Contains(string(p.Result), "THREADLINE_SUBAGENT_MAX_DEPTH") {
			t.Fatalf("the parent's call: got %s isError %v, want the child's summary of its refusal", p.Result, p.IsError)
		}
		if got := m.offered("nest"); len(got) != 1 || got[0] != "delegate" {
			t.Fatalf("the parent's tools: got %v, want delegate", got)
		}
	})
}

// TestSubagentCancelCascade: cancelling the parent cancels its children
// and their children: every run ends cancelled with its final snapshot,
// and the parent's calls answer is_error.
func TestSubagentCancelCascade(t *testing.T) {
	t.Parallel()
	m := newSubModel(0)
	svc, st := subSetup(t, m, engine.Config{})
	ctx := context.Background()
	tid := uuid.New()
	r, _, err := svc.StartRun(ctx, "local", tid, thread.RunRequest{Message: msg("fan:block,deep")})
	if err != nil {
		t.Fatal(err)
	}
	evs, done := live(svc, r)
	// The parent, "block", "deep" and its child "block".
	for range 4 {
		<-m.started
	}
	if err := svc.CancelRun(ctx, "local", tid, r.ID); err != nil {
		t.Fatal(err)
	}
	all := rest(t, evs, done)
	if st := all[len(all)-1].Snapshot.RunStatus; st != thread.RunCancelled {
		t.Fatalf("parent: got %s, want cancelled", st)
	}
	// Every run's final snapshot, the grandchild's within the child's
	// subagent events, in the parent's stream.
	finals := map[uuid.UUID]thread.RunStatus{}
	threads := map[uuid.UUID]uuid.UUID{}
	for _, ev := range all {
		for e := &ev; e.Sub != nil; e = &e.Sub.Event {
			threads[e.Sub.RunID] = e.Sub.ThreadID
			if e.Sub.Event.Final() {
				finals[e.Sub.RunID] = e.Sub.Event.Snapshot.RunStatus
			}
		}
	}
	if len(threads) != 3 || len(finals) != 3 {
		t.Fatalf("runs in the parent's stream: got %d, %d with a final snapshot; want 3 (two children, a grandchild)", len(threads), len(finals))
	}
	for run, st := range finals {
		cr, err := svc.GetRun(ctx, "local", threads[run], run)
		if st != thread.RunCancelled || err != nil || cr.Status != thread.RunCancelled {
			t.Fatalf("run %s: final snapshot %s, stored %+v (%v); want cancelled", run, st, cr, err)
		}
	}
	for _, p := range reply(t, all, r).Content {
		if p.Type == checkpoint.PartToolCall && (!p.IsError || p.Subagent == nil) {
			t.Fatalf("call %s: got %s isError %v, want an error", p.ToolCallID, p.Result, p.IsError)
		}
	}
	if got, want := lines(replay(t, st, tid, r.ID)), lines(all); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("replay (a grandchild's events within) differs from the live stream:\n got %s\nwant %s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestSubagentSpans: a child run's invoke_agent span is a child of its
// parent's execute_tool delegate span, in the same trace.
func TestSubagentSpans(t *testing.T) {
	t.Parallel()
	m := newSubModel(0)
	svc, exp := traceSetup(t, m, engine.Config{Tools: registry(t)})
	go func() {
		for range m.started {
		}
	}()
	runAgent(t, svc, "fan:a,b", thread.RunConfig{})
	var spans tracetest.SpanStubs
	twait.Eventually(t, 30*time.Second, func() bool {
		spans = exp.GetSpans()
		return len(named(spans, "invoke_agent threadline")) == 3
	}, "not three invoke_agent spans within 30 s; got %v spans", func() any { return len(spans) })
	delegates := named(spans, "execute_tool delegate")
	if len(delegates) != 2 {
		t.Fatalf("execute_tool delegate spans: got %d, want 2", len(delegates))
	}
	parents := map[string]bool{}
	for _, d := range delegates {
		parents[d.SpanContext.SpanID().String()] = true
	}
	children := 0
	for _, s := range named(spans, "invoke_agent threadline") {
		if parents[s.Parent.SpanID().String()] {
			children++
			if s.SpanContext.TraceID() != delegates[0].SpanContext.TraceID() {
				t.Fatalf("a child's span is in trace %s, want the parent's %s", s.SpanContext.TraceID(), delegates[0].SpanContext.TraceID())
			}
		}
	}
	if children != 2 {
		t.Fatalf("invoke_agent spans under a delegate span: got %d, want 2", children)
	}
}

// TestSubagentCommitsParentFirst: a parent whose first step ends within
// its start linger (its start not written yet) commits its start before
// its delegate calls create children that name it.
func TestSubagentCommitsParentFirst(t *testing.T) {
	t.Parallel()
	m := newSubModel(0)
	go func() {
		for range m.started {
		}
	}()
	st := threadtest.New()
	svc := engine.New(st, stream.New[thread.Event](256), models{m: m}, nil,
		engine.Config{Tools: registry(t), StartLinger: time.Minute})
	svc.Start()
	shutdownAtCleanup(t, svc)
	_, r, evs := runAgent(t, svc, "fan:a,b", thread.RunConfig{})
	for _, p := range reply(t, evs, r).Content {
		if p.Type == checkpoint.PartToolCall && (p.IsError || p.Subagent == nil) {
			t.Fatalf("call %s: got %s isError %v, want its child's answer", p.ToolCallID, p.Result, p.IsError)
		}
	}
}
