package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/google/uuid"
	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/model/tool"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/engine/internal/runlog"
)

// turnRun is one run's turn as its loop produces it: every record it logs
// is folded into the assistant message too.
type turnRun struct {
	s    *Runner
	ar   *Active
	w    *logWriter
	tree *checkpoint.Tree // the thread as the run's snapshots show it
	seq  int64
	fold thread.Turn
	// ctx is the run's context with its span.
	ctx context.Context
	// ids maps this step's call ids as the model named them to the ids
	// logged (a provider may reuse an id of an earlier step); opened lists
	// the logged ids in the order the calls opened.
	ids    map[string]string
	opened []string

	// mu orders the records of the run's sub-agents, which its delegate
	// calls log from their own goroutines, with the loop's (add).
	mu sync.Mutex
	// children counts the run's delegate calls; childMessages maps each
	// child run to its assistant message.
	children      atomic.Int32
	childMessages map[uuid.UUID]uuid.UUID
	// commitStart commits the run's start now unless it is committed or
	// being committed (nil: nothing to commit).
	commitStart func()
	// steps is the usage of each step that reported some; calls counts
	// the model calls.
	steps []thread.StepUsage
	calls int
}

// add logs rec as the next event and folds it in.
// It returns the record's sequence.
func (t *turnRun) add(rec thread.Record) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.addLocked(rec)
	return t.seq
}

// addLocked is add with t.mu held.
func (t *turnRun) addLocked(rec thread.Record) {
	t.seq++
	rec.Seq = t.seq
	t.fold.Add(&rec)
	if rec.Kind == thread.KindToken || rec.Kind == thread.KindReasoning {
		t.w.AddSoon(rec) // may wait for the others of its hold (TokenHold)
		return
	}
	t.w.Add(rec)
}

// snapshot logs an interim running snapshot of the turn so far.
func (t *turnRun) snapshot() {
	r := t.ar.run
	t.mu.Lock()
	defer t.mu.Unlock()
	t.w.setSnapshot(t.seq+1, &thread.Snapshot{ThreadID: r.ThreadID, RunStatus: thread.RunRunning, Tree: t.tree,
		Running: runlog.RunningNode(r, t.tree, t.fold.Content()), Head: r.MessageID})
	t.addLocked(thread.Record{Kind: thread.KindSnapshot, Status: thread.RunRunning, TreeSeq: r.TreeSeq})
}

// onDelta logs one delta of a step.
func (t *turnRun) onDelta(d thread.Delta) error {
	if err := t.ar.ctx.Err(); err != nil {
		return err
	}
	switch d.Kind {
	case thread.DeltaText:
		if d.Text != "" {
			t.add(thread.Record{Kind: thread.KindToken, Text: thread.Storable(d.Text)})
		}
	case thread.DeltaReasoning:
		if d.Text != "" {
			t.add(thread.Record{Kind: thread.KindReasoning, Text: thread.Storable(d.Text)})
		}
	case thread.DeltaToolCallArgs:
		t.add(thread.Record{Kind: thread.KindToolCall, CallID: t.callID(d.ToolCallID), Name: thread.Storable(d.ToolName), Text: thread.Storable(d.ArgsText)})
	case thread.DeltaData:
		t.add(thread.Record{Kind: thread.KindData, Name: thread.Storable(d.Name), Data: thread.StorableJSON(d.Data)})
	case thread.DeltaToolResult:
		id, ok := t.ids[d.ToolCallID]
		if !ok {
			id = thread.Storable(d.ToolCallID) // a call of the turn's earlier run
		}
		if p, open := t.fold.Call(id); open && p.Result == nil {
			t.add(thread.Record{Kind: thread.KindToolResult, CallID: id, Data: thread.StorableJSON(d.Data), IsError: d.IsError})
		}
	}
	return nil
}

// callID returns the logged id of a call of this step, opening it when new.
func (t *turnRun) callID(id string) string {
	if got, ok := t.ids[id]; ok {
		return got
	}
	logged := thread.Storable(id)
	if logged == "" {
		logged = "call"
	}
	for n := 2; t.fold.HasCall(logged); n++ {
		logged = fmt.Sprintf("%s_%d", thread.Storable(id), n)
	}
	t.ids[id] = logged
	t.opened = append(t.opened, logged)
	return logged
}

// drive runs the model, one Stream call per step (a chat reply is one
// step without tools): steps until one calls no tool, running each step's
// tool calls in between, at most max steps (then the run ends with stop reason length
// and the last step's calls answered as not run). A step that calls a
// tool that waits for a person (see waits) ends the run with stop reason
// tool-calls once its other calls are answered. A continuation first
// logs its answers and runs the approved calls. Every call left without a
// result when the run ends otherwise (an error, a cancel) is answered as
// an error, so the turn shows no call running.
func (s *Runner) drive(t *turnRun, m thread.Model, req thread.ModelRequest, cfg thread.RunConfig) (thread.ModelResult, error) {
	ctx := t.ctx
	sreq := req
	sreq.Tools = s.runTools(cfg)
	if s.canDelegate(cfg, t.ar.thread.Depth) {
		sreq.Tools = append(sreq.Tools, DelegateSpec)
	}
	if s.cfg.Raw != nil {
		runID := t.ar.run.ID
		sreq.OnRaw = func(line []byte) { s.cfg.Raw.Append(runID, t.seq+1, thread.RawProvider, thread.JSONString(line)) }
		sreq.OnRawSent = func(line []byte) { s.cfg.Raw.Append(runID, t.seq+1, thread.RawProviderSent, thread.JSONString(line)) }
	}
	base := sreq.Messages
	maxSteps := cmp(cfg.MaxSteps, thread.DefaultMaxSteps)
	var res thread.ModelResult
	if ans := t.ar.answers; ans != nil {
		agentAnswers, err := t.answer(ctx, cfg, ans)
		if err != nil {
			t.answerAll(unrunReason(ctx))
			return res, err
		}
		sreq.Approvals = agentAnswers
	}
	for n := 1; ; n++ {
		t.ids, t.opened = map[string]string{}, nil
		sreq.Messages = t.messages(base)
		sctx, span := s.startChatSpan(ctx, t.ar.run)
		from := t.seq + 1
		t.calls++
		sres, err := m.Stream(sctx, sreq, t.onDelta)
		endChatSpan(ctx, span, sres, err)
		t.stepUsage(ctx, from, sres, err)
		sreq.Approvals = nil
		res = addStep(res, sres)
		if err != nil {
			t.answerAll(unrunReason(ctx))
			return res, err
		}
		t.logUnstreamed(sres.ToolCalls)
		if sres.Waiting && len(t.fold.Unanswered()) > 0 {
			res.StopReason = thread.StopToolCalls // requires action: the model asked
			return res, nil
		}
		t.dropAnswered()
		if len(t.opened) == 0 {
			return res, nil
		}
		if n >= maxSteps {
			t.answerAll(fmt.Sprintf("not run: the run reached its limit of %d steps (run_config.max_steps)", maxSteps))
			res.StopReason = thread.StopLength
			return res, nil
		}
		run, waiting := t.s.partition(cfg, t.stepCalls())
		if len(run) > 0 {
			if err := t.runCalls(sctx, cfg, run); err != nil {
				t.answerAll(unrunReason(ctx))
				return res, err
			}
		}
		if waiting {
			res.StopReason = thread.StopToolCalls // requires action
			return res, nil
		}
		t.snapshot()
	}
}

func cmp(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

func unrunReason(ctx context.Context) string {
	if ctx.Err() != nil {
		return "cancelled"
	}
	return "not run: the model call failed"
}

// addStep adds a step's usage to the run's result; the stop reason is the
// last step's.
func addStep(res thread.ModelResult, s thread.ModelResult) thread.ModelResult {
	res.PromptTokens += s.PromptTokens
	res.CompletionTokens += s.CompletionTokens
	if s.Model != "" {
		res.Model = s.Model
	}
	res.StopReason = thread.StopDone
	if s.StopReason == thread.StopLength || s.StopReason == thread.StopContentFilter {
		res.StopReason = s.StopReason
	}
	return res
}

// stepUsage keeps a step's usage when its model reported some, with its
// finish reason as its chat span has it.
func (t *turnRun) stepUsage(ctx context.Context, from int64, res thread.ModelResult, err error) {
	if res.PromptTokens <= 0 && res.CompletionTokens <= 0 {
		return
	}
	reason := stepFinishReason(res)
	switch {
	case err != nil && ctx.Err() != nil:
		reason = "cancelled"
	case err != nil:
		reason = "error"
	}
	t.steps = append(t.steps, thread.StepUsage{From: from, PromptTokens: res.PromptTokens, CompletionTokens: res.CompletionTokens,
		FinishReason: reason})
}

// dropAnswered leaves out of this step's calls those the model answered
// itself (thread.DeltaToolResult): the engine runs only the others.
func (t *turnRun) dropAnswered() {
	open := t.opened[:0]
	for _, id := range t.opened {
		if p, ok := t.fold.Call(id); ok && p.Result == nil {
			open = append(open, id)
		}
	}
	t.opened = open
}

// logUnstreamed logs the calls a step returned whole without streaming
// them, as one piece each.
func (t *turnRun) logUnstreamed(calls []thread.ToolCall) {
	for _, c := range calls {
		if _, ok := t.ids[c.ID]; !ok {
			t.add(thread.Record{Kind: thread.KindToolCall, CallID: t.callID(c.ID), Name: thread.Storable(c.Name), Text: thread.Storable(c.ArgsText)})
		}
	}
}

// answerAll answers every unanswered call of the turn as an error.
func (t *turnRun) answerAll(reason string) {
	msg, _ := json.Marshal(reason)
	for _, id := range t.fold.Unanswered() {
		t.add(thread.Record{Kind: thread.KindToolResult, CallID: id, Data: msg, IsError: true})
	}
}

// messages is what a step sees: the conversation, then the turn so far.
func (t *turnRun) messages(base []thread.ModelMessage) []thread.ModelMessage {
	if t.fold.Empty() {
		return base
	}
	turn := thread.ModelMessage{Role: checkpoint.RoleAssistant, Parts: thread.ModelParts(t.fold.Content())}
	return append(base[:len(base):len(base)], turn)
}

// pendingCall is a call of the step to run.
type pendingCall struct {
	id, name string
	args     json.RawMessage
	approved bool // a person approved it
}

// runCalls runs this step's calls, in parallel when there are several,
// and logs each result as it comes. It returns ctx's error once every
// call has returned when the run was cancelled meanwhile.
func (t *turnRun) runCalls(ctx context.Context, cfg thread.RunConfig, calls []pendingCall) error {
	type answer struct {
		c   pendingCall
		res thread.ToolOutput
	}
	answers := make(chan answer, len(calls))
	for _, c := range calls[1:] {
		go func() { answers <- answer{c, t.callTool(ctx, cfg, c)} }()
	}
	answers <- answer{calls[0], t.callTool(ctx, cfg, calls[0])}
	for range calls {
		a := <-answers
		// The sequence comes back from add: the calls still running (a
		// sub-agent's events) log from their own goroutines meanwhile.
		seq := t.add(thread.Record{Kind: thread.KindToolResult, CallID: a.c.id, Data: thread.StorableJSON(a.res.Value), IsError: a.res.IsError})
		t.raw(a.c, a.res, seq)
	}
	return ctx.Err()
}

// stepCalls returns this step's calls with their arguments as logged.
func (t *turnRun) stepCalls() []pendingCall {
	out := make([]pendingCall, 0, len(t.opened))
	for _, id := range t.opened {
		p, _ := t.fold.Call(id)
		out = append(out, pendingCall{id: id, name: p.ToolName, args: json.RawMessage(p.ArgsText)})
	}
	return out
}

// raw hands a tool call's input and output, logged as event seq, to the
// raw sink.
func (t *turnRun) raw(c pendingCall, res thread.ToolOutput, seq int64) {
	sink := t.s.cfg.Raw
	if sink == nil {
		return
	}
	b, err := json.Marshal(struct {
		ID      string          `json:"tool_call_id"`
		Name    string          `json:"tool_name"`
		Input   string          `json:"input"`
		Output  json.RawMessage `json:"output"`
		IsError bool            `json:"is_error"`
	}{c.id, c.name, string(c.args), thread.OrNull(res.Value), res.IsError})
	if err == nil {
		sink.Append(t.ar.run.ID, seq, "tool", b)
	}
}

// callTool runs one call of the run: a delegate call as a sub-agent,
// another as a server tool.
func (t *turnRun) callTool(ctx context.Context, cfg thread.RunConfig, c pendingCall) thread.ToolOutput {
	if c.name != DelegateTool || t.s.cfg.Subagents == nil {
		return t.s.callTool(ctx, cfg, c)
	}
	tctx, span := t.s.startToolSpan(ctx, c)
	res := t.delegate(tctx, cfg, c)
	endToolSpan(ctx, span, res)
	return res
}

// callTool runs one server tool call as the run allows it.
func (s *Runner) callTool(ctx context.Context, cfg thread.RunConfig, c pendingCall) thread.ToolOutput {
	tctx, span := s.startToolSpan(ctx, c)
	res := s.runTool(tctx, cfg, c)
	endToolSpan(ctx, span, res)
	return res
}

func (s *Runner) runTool(ctx context.Context, cfg thread.RunConfig, c pendingCall) thread.ToolOutput {
	if s.cfg.Tools == nil || !cfg.Allows(c.name) {
		return tool.ErrorResult(fmt.Sprintf("there is no tool %q in this run", c.name))
	}
	if !c.approved && s.needsApproval(c.name) {
		return tool.ErrorResult(fmt.Sprintf("not run: %s needs a person's approval, which this service cannot ask for yet", c.name))
	}
	res, err := s.cfg.Tools.Call(ctx, c.name, c.args)
	if err != nil && res.Value == nil {
		return tool.ErrorResult("cancelled")
	}
	return res
}

// needsApproval reports whether the server tool name is marked approval.
func (s *Runner) needsApproval(name string) bool {
	for _, sp := range s.cfg.Tools.Specs() {
		if sp.Name == name {
			return sp.Approval
		}
	}
	return false
}

// runTools returns the specs of the tools a run may call: the server
// tools it allows, then its client tools.
func (s *Runner) runTools(cfg thread.RunConfig) []thread.ToolSpec {
	var out []thread.ToolSpec
	if s.cfg.Tools != nil {
		for _, sp := range s.cfg.Tools.Specs() {
			if cfg.Allows(sp.Name) {
				out = append(out, sp)
			}
		}
	}
	return append(out, cfg.ClientSpecs()...)
}

// partition splits a step's calls into those to run now and reports
// whether any other waits for a person.
func (s *Runner) partition(cfg thread.RunConfig, calls []pendingCall) (run []pendingCall, waiting bool) {
	for _, c := range calls {
		if s.waits(cfg, c.name) {
			waiting = true
			continue
		}
		run = append(run, c)
	}
	return run, waiting
}

// replyText is the text parts of content joined: what the title model
// reads of a reply.
func replyText(content []checkpoint.Part) string {
	var b strings.Builder
	for _, p := range content {
		if p.Type == checkpoint.PartText {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// CheckTools checks run_config.tools against the server's tools: every
// server tool it names exists, and no client tool takes a server tool's
// name. invalid_request names the entry.
func (s *Runner) CheckTools(c thread.RunConfig) error {
	if len(c.Tools) == 0 {
		return nil
	}
	server := map[string]bool{}
	if s.cfg.Tools != nil {
		for _, sp := range s.cfg.Tools.Specs() {
			server[sp.Name] = true
		}
	}
	if s.cfg.Subagents != nil {
		server[DelegateTool] = true
	}
	for i, t := range c.Tools {
		switch {
		case t.Client && server[t.Name]:
			return errcode.New(errcode.Invalid, "run_config.tools[%d]: client tool %q has a server tool's name", i, t.Name)
		case !t.Client && !server[t.Name]:
			return errcode.New(errcode.Invalid, "run_config.tools[%d]: there is no server tool %q (GET /api/v1/tools lists them)", i, t.Name)
		}
	}
	return nil
}
