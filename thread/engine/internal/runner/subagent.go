package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/google/uuid"
	"github.com/threadline/threadline/model/tool"
	"github.com/threadline/threadline/thread"
	"go.opentelemetry.io/otel/trace"
)

// DelegateTool is the built-in tool that starts a sub-agent: a child
// thread whose run does the task; its final answer is the call's result.
const DelegateTool = "delegate"

// DelegateSpec is the delegate tool as models are told it.
var DelegateSpec = thread.ToolSpec{
	Name: DelegateTool,
	Description: "Hand a self-contained task to a sub-agent, which works on it in a conversation of its own and answers " +
		"with its final text. Several delegate calls in one step run in parallel.",
	Parameters: json.RawMessage(`{"type":"object","properties":{"task":{"type":"string","description":"the sub-agent's instructions: everything it needs to know"},` +
		`"title":{"type":"string","description":"a short label for the sub-agent's conversation"}},"required":["task"]}`),
}

// Delegator runs sub-agents: the engine, which starts and follows runs.
type Delegator interface {
	// Delegate creates the child thread of d, starts its run and waits for
	// the run's end, calling emit with each of the child run's events in
	// order (as a follower of the child gets them). It cancels the child
	// when ctx ends, and still waits for its end. The result is the
	// child's final answer text, or an IsError result saying why there is
	// none.
	Delegate(ctx context.Context, d Delegation, emit func(thread.Event)) thread.ToolOutput
}

// Delegation is one delegate call's sub-agent.
type Delegation struct {
	Caller string
	// Parent is the run that called delegate; CallID its call.
	Parent *thread.Run
	CallID string
	// ThreadID is the child thread's id; Depth its depth.
	ThreadID uuid.UUID
	Depth    int
	Task     string
	Title    string
	// Config is the child run's run_config.
	Config thread.RunConfig
}

// subagents is a Runner's state of the sub-agents its runs start: the
// span each child thread's run is to be a child of.
type subagents struct {
	spans sync.Map // child thread id -> trace.SpanContext
}

// spanParent returns the context a run on thread th starts its span
// under: the delegate call's span for a sub-agent's first run started
// here, else none.
func (s *Runner) spanParent(th uuid.UUID) context.Context {
	if sc, ok := s.subs.spans.Load(th); ok {
		return trace.ContextWithSpanContext(context.Background(), sc.(trace.SpanContext))
	}
	return context.Background()
}

// canDelegate reports whether the run (its thread at depth) is offered
// delegate: the service has server tools (a chat model without tools is
// offered none), the engine runs sub-agents, the run's tools allow it,
// and a child would not be deeper than the bound.
func (s *Runner) canDelegate(cfg thread.RunConfig, depth int) bool {
	return s.cfg.Tools != nil && s.cfg.Subagents != nil && cfg.Allows(DelegateTool) && depth < s.cfg.SubagentMaxDepth
}

// delegate runs one delegate call: checks its arguments and the bounds,
// then has the Delegator run the sub-agent, logging each of its events
// in the parent's log as a subagent record.
func (t *turnRun) delegate(ctx context.Context, cfg thread.RunConfig, c pendingCall) thread.ToolOutput {
	s := t.s
	if s.cfg.Tools == nil || !cfg.Allows(DelegateTool) {
		return tool.ErrorResult(fmt.Sprintf("there is no tool %q in this run", c.name))
	}
	var args struct {
		Task  string `json:"task"`
		Title string `json:"title"`
	}
	if err := json.Unmarshal(c.args, &args); err != nil || strings.TrimSpace(args.Task) == "" {
		return tool.ErrorResult(`not run: delegate needs {"task": "<the sub-agent's instructions>"}`)
	}
	depth := t.ar.thread.Depth + 1
	if depth > s.cfg.SubagentMaxDepth {
		return tool.ErrorResult(fmt.Sprintf("not run: sub-agents may nest at most %d deep (THREADLINE_SUBAGENT_MAX_DEPTH), and this one would be %d deep",
			s.cfg.SubagentMaxDepth, depth))
	}
	if n := t.children.Add(1); int(n) > s.cfg.SubagentMaxChildren {
		return tool.ErrorResult(fmt.Sprintf("not run: a run may start at most %d sub-agents (THREADLINE_SUBAGENT_MAX_CHILDREN)", s.cfg.SubagentMaxChildren))
	}
	if res, ok := t.durableStart(ctx); !ok {
		return res
	}
	d := Delegation{Caller: t.ar.thread.Caller, Parent: t.ar.run, CallID: c.id, ThreadID: uuid.New(), Depth: depth,
		Task: args.Task, Title: strings.TrimSpace(args.Title), Config: childConfig(cfg)}
	s.subs.spans.Store(d.ThreadID, trace.SpanContextFromContext(ctx))
	defer s.subs.spans.Delete(d.ThreadID)
	return s.cfg.Subagents.Delegate(ctx, d, func(ev thread.Event) { t.addSub(c.id, d.ThreadID, ev) })
}

// durableStart commits the run's start, if its linger has not yet, and
// waits for it: a child thread names its parent's thread and run, which
// must exist first. It answers the call's error when the start could not
// be written or ctx ended first.
func (t *turnRun) durableStart(ctx context.Context) (thread.ToolOutput, bool) {
	if t.commitStart != nil {
		t.commitStart()
	}
	select {
	case <-t.w.StartDone():
	case <-ctx.Done():
		return tool.ErrorResult("cancelled"), false
	}
	if t.w.Failed() {
		return tool.ErrorResult("not run: the run's start could not be written"), false
	}
	return thread.ToolOutput{}, true
}

// childConfig is a sub-agent's run_config: its parent's, without the
// client tools (nobody is there to answer them).
func childConfig(cfg thread.RunConfig) thread.RunConfig {
	if cfg.Tools == nil {
		return cfg
	}
	tools := make([]thread.RunTool, 0, len(cfg.Tools))
	for _, rt := range cfg.Tools {
		if !rt.Client {
			tools = append(tools, rt)
		}
	}
	cfg.Tools = tools
	return cfg
}

// addSub logs one event of the child run of call callID as a subagent
// record; an event holding a snapshot (the child's, or a grandchild's
// within it) is kept whole for publishing it.
func (t *turnRun) addSub(callID string, childThread uuid.UUID, ev thread.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	sub := t.subRecord(childThread, &ev)
	if hasSnapshot(&ev) {
		t.w.setSub(t.seq+1, ev)
	}
	t.addLocked(thread.Record{Kind: thread.KindSubagent, CallID: callID, Sub: sub})
}

// subRecord is the record of a child run's event ev (on thread th),
// with a grandchild's within it.
func (t *turnRun) subRecord(th uuid.UUID, ev *thread.Event) *thread.SubRecord {
	rec := thread.Record{Seq: ev.Sequence, Kind: ev.Type, Text: ev.Text, Code: ev.Code, CallID: ev.CallID, Name: ev.Name,
		Data: ev.Data, IsError: ev.IsError}
	msg := ev.MessageID
	if ev.Snapshot != nil {
		rec.Status, rec.TreeSeq = ev.Snapshot.RunStatus, ev.Snapshot.Tree.LastSeq()
		th, msg = ev.Snapshot.ThreadID, ev.Snapshot.Head
	}
	if ev.Sub != nil {
		rec.Sub = t.subRecord(ev.Sub.ThreadID, &ev.Sub.Event)
	}
	if msg == uuid.Nil {
		msg = t.childMessages[ev.RunID] // an error event names none
	} else {
		if t.childMessages == nil {
			t.childMessages = map[uuid.UUID]uuid.UUID{}
		}
		t.childMessages[ev.RunID] = msg
	}
	return &thread.SubRecord{ThreadID: th, RunID: ev.RunID, MessageID: msg, Record: rec}
}

// hasSnapshot reports whether ev is a snapshot or wraps one.
func hasSnapshot(ev *thread.Event) bool {
	for ; ev != nil; ev = subEvent(ev) {
		if ev.Snapshot != nil {
			return true
		}
	}
	return false
}

func subEvent(ev *thread.Event) *thread.Event {
	if ev.Sub == nil {
		return nil
	}
	return &ev.Sub.Event
}
