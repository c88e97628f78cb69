package thread

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/model/step"
	"github.com/threadline/threadline/model/tool"
	"github.com/threadline/threadline/thread/errcode"
)

// Stepper is a model that takes one step of an agent run: it streams typed
// deltas and sees the tools and the turn's earlier steps with their
// results. It is model.Stepper's method; a resolved Model that implements
// it runs as an agent (see Service.drive), any other streams text only.
//
// Errors are those of Model.Stream; onDelta is not called after it returns.
type Stepper interface {
	StreamStep(ctx context.Context, req step.Request, onDelta func(step.Delta) error) (step.Result, error)
}

// Tools runs the server tools agent runs may call (*tool.Registry). Call
// answers every failure of a tool as an IsError result; its error is only
// ctx's, when the run is cancelled.
type Tools interface {
	Specs() []tool.Spec
	Call(ctx context.Context, name string, args json.RawMessage) (tool.Result, error)
}

// RawSink keeps what a run's provider and tools exchanged, for audit: the
// provider's response lines ("provider", a JSON string) and each tool
// call's input and output ("tool", {"tool_call_id","tool_name","input",
// "output","is_error"}), each with the sequence of the event it produced.
// Append must not block and owns its failures; payload is the sink's.
type RawSink interface {
	Append(runID uuid.UUID, seq int64, kind string, payload json.RawMessage)
}

// DefaultMaxSteps is the steps of an agent run when run_config.max_steps
// is not set.
const DefaultMaxSteps = 8

// turnRun is one run's turn as its loop produces it: every record it logs
// is folded into the assistant message too.
type turnRun struct {
	s    *Service
	ar   *activeRun
	w    *logWriter
	tree *checkpoint.Tree // the thread as the run's snapshots show it
	seq  int64
	fold turn
	// ids maps this step's call ids as the model named them to the ids
	// logged (a provider may reuse an id of an earlier step); opened lists
	// the logged ids in the order the calls opened.
	ids    map[string]string
	opened []string
}

// add logs rec as the next event and folds it in.
func (t *turnRun) add(rec Record) {
	t.seq++
	rec.Seq = t.seq
	t.fold.add(&rec)
	t.w.Add(rec)
}

// snapshot logs an interim running snapshot of the turn so far.
func (t *turnRun) snapshot() {
	r := t.ar.run
	t.w.setSnapshot(t.seq+1, &Snapshot{ThreadID: r.ThreadID, RunStatus: RunRunning, Tree: t.tree,
		Running: runningNode(r, t.tree, t.fold.content()), Head: r.MessageID})
	t.add(Record{Kind: KindSnapshot, Status: RunRunning, TreeSeq: r.TreeSeq})
}

// onDelta logs one delta of a step.
func (t *turnRun) onDelta(d step.Delta) error {
	if err := t.ar.ctx.Err(); err != nil {
		return err
	}
	switch d.Kind {
	case step.Text:
		if d.Text != "" {
			t.add(Record{Kind: KindToken, Text: storable(d.Text)})
		}
	case step.Reasoning:
		if d.Text != "" {
			t.add(Record{Kind: KindReasoning, Text: storable(d.Text)})
		}
	case step.ToolCallArgs:
		t.add(Record{Kind: KindToolCall, CallID: t.callID(d.ToolCallID), Name: storable(d.ToolName), Text: storable(d.ArgsText)})
	case step.Data:
		t.add(Record{Kind: KindData, Name: storable(d.Name), Data: storableJSON(d.Data)})
	}
	return nil
}

// callID returns the logged id of a call of this step, opening it when new.
func (t *turnRun) callID(id string) string {
	if got, ok := t.ids[id]; ok {
		return got
	}
	logged := storable(id)
	if logged == "" {
		logged = "call"
	}
	for n := 2; t.fold.hasCall(logged); n++ {
		logged = fmt.Sprintf("%s_%d", storable(id), n)
	}
	t.ids[id] = logged
	t.opened = append(t.opened, logged)
	return logged
}

// drive runs the model: one Stream call for a chat model; for a Stepper,
// steps until one calls no tool, running each step's tool calls in
// between, at most max steps (then the run ends with stop reason length
// and the last step's calls answered as not run). A step that calls a
// tool that waits for a person (see waits) ends the run with stop reason
// tool-calls once its other calls are answered. A continuation first
// logs its answers and runs the approved calls. Every call left without a
// result when the run ends otherwise (an error, a cancel) is answered as
// an error, so the turn shows no call running.
func (s *Service) drive(t *turnRun, m Model, req ModelRequest, cfg RunConfig) (ModelResult, error) {
	ctx := t.ar.ctx
	st, ok := m.(Stepper)
	if !ok {
		return m.Stream(ctx, req, func(tok string) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			t.add(Record{Kind: KindToken, Text: storable(tok)})
			return nil
		})
	}
	sreq := stepRequest(req, s.runTools(cfg))
	if s.cfg.Raw != nil {
		runID := t.ar.run.ID
		sreq.OnRaw = func(line []byte) { s.cfg.Raw.Append(runID, t.seq+1, "provider", jsonString(line)) }
	}
	base := sreq.Messages
	maxSteps := cmp(cfg.MaxSteps, DefaultMaxSteps)
	var res ModelResult
	if ans := t.ar.run.answers; ans != nil {
		if err := t.answer(ctx, cfg, ans); err != nil {
			t.answerAll(unrunReason(ctx))
			return res, err
		}
	}
	for n := 1; ; n++ {
		t.ids, t.opened = map[string]string{}, nil
		sreq.Messages = t.messages(base)
		sres, err := st.StreamStep(ctx, sreq, t.onDelta)
		res = addStep(res, sres)
		if err != nil {
			t.answerAll(unrunReason(ctx))
			return res, err
		}
		t.logUnstreamed(sres.ToolCalls)
		if len(t.opened) == 0 {
			return res, nil
		}
		if n >= maxSteps {
			t.answerAll(fmt.Sprintf("not run: the run reached its limit of %d steps (run_config.max_steps)", maxSteps))
			res.StopReason = step.StopLength
			return res, nil
		}
		run, waiting := t.s.partition(cfg, t.stepCalls())
		if len(run) > 0 {
			if err := t.runCalls(ctx, cfg, run); err != nil {
				t.answerAll(unrunReason(ctx))
				return res, err
			}
		}
		if waiting {
			res.StopReason = step.StopToolCalls // requires action
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
func addStep(res ModelResult, s step.Result) ModelResult {
	res.PromptTokens += s.PromptTokens
	res.CompletionTokens += s.CompletionTokens
	if s.Model != "" {
		res.Model = s.Model
	}
	res.StopReason = step.StopDone
	if s.StopReason == step.StopLength {
		res.StopReason = step.StopLength
	}
	return res
}

// logUnstreamed logs the calls a step returned whole without streaming
// them, as one piece each.
func (t *turnRun) logUnstreamed(calls []step.ToolCall) {
	for _, c := range calls {
		if _, ok := t.ids[c.ID]; !ok {
			t.add(Record{Kind: KindToolCall, CallID: t.callID(c.ID), Name: storable(c.Name), Text: storable(c.ArgsText)})
		}
	}
}

// answerAll answers every unanswered call of the turn as an error.
func (t *turnRun) answerAll(reason string) {
	msg, _ := json.Marshal(reason)
	for _, id := range t.fold.unanswered() {
		t.add(Record{Kind: KindToolResult, CallID: id, Data: msg, IsError: true})
	}
}

// messages is what a step sees: the conversation, then the turn so far.
func (t *turnRun) messages(base []step.Message) []step.Message {
	if len(t.fold.parts) == 0 && t.fold.open == "" {
		return base
	}
	turn := step.Message{Role: checkpoint.RoleAssistant, Parts: stepParts(t.fold.content())}
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
func (t *turnRun) runCalls(ctx context.Context, cfg RunConfig, calls []pendingCall) error {
	type answer struct {
		c   pendingCall
		res tool.Result
	}
	answers := make(chan answer, len(calls))
	for _, c := range calls[1:] {
		go func() { answers <- answer{c, t.s.callTool(ctx, cfg, c)} }()
	}
	answers <- answer{calls[0], t.s.callTool(ctx, cfg, calls[0])}
	for range calls {
		a := <-answers
		t.add(Record{Kind: KindToolResult, CallID: a.c.id, Data: storableJSON(a.res.Value), IsError: a.res.IsError})
		t.raw(a.c, a.res)
	}
	return ctx.Err()
}

// stepCalls returns this step's calls with their arguments as logged.
func (t *turnRun) stepCalls() []pendingCall {
	out := make([]pendingCall, 0, len(t.opened))
	for _, id := range t.opened {
		p := t.fold.parts[t.fold.calls[id]]
		out = append(out, pendingCall{id: id, name: p.ToolName, args: json.RawMessage(p.ArgsText)})
	}
	return out
}

// raw hands a tool call's input and output to the raw sink.
func (t *turnRun) raw(c pendingCall, res tool.Result) {
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
	}{c.id, c.name, string(c.args), orNull(res.Value), res.IsError})
	if err == nil {
		sink.Append(t.ar.run.ID, t.seq, "tool", b)
	}
}

// callTool runs one server tool call as the run allows it.
func (s *Service) callTool(ctx context.Context, cfg RunConfig, c pendingCall) tool.Result {
	if s.cfg.Tools == nil || !cfg.allows(c.name) {
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
func (s *Service) needsApproval(name string) bool {
	for _, sp := range s.cfg.Tools.Specs() {
		if sp.Name == name {
			return sp.Approval
		}
	}
	return false
}

// runTools returns the specs of the tools a run may call: the server
// tools it allows, then its client tools.
func (s *Service) runTools(cfg RunConfig) []tool.Spec {
	var out []tool.Spec
	if s.cfg.Tools != nil {
		for _, sp := range s.cfg.Tools.Specs() {
			if cfg.allows(sp.Name) {
				out = append(out, sp)
			}
		}
	}
	return append(out, cfg.clientSpecs()...)
}

// partition splits a step's calls into those to run now and reports
// whether any other waits for a person.
func (s *Service) partition(cfg RunConfig, calls []pendingCall) (run []pendingCall, waiting bool) {
	for _, c := range calls {
		if s.waits(cfg, c.name) {
			waiting = true
			continue
		}
		run = append(run, c)
	}
	return run, waiting
}

// stepRequest converts a chat request to a step request with tools.
func stepRequest(req ModelRequest, tools []tool.Spec) step.Request {
	out := step.Request{Temperature: req.Temperature, Call: req.Call, Tools: tools, Messages: make([]step.Message, len(req.Messages))}
	for i, m := range req.Messages {
		out.Messages[i] = step.Message{Role: m.Role, Parts: stepParts(m.Parts), Attachments: m.Attachments}
	}
	return out
}

// stepParts converts message parts to what a model sees: text, image,
// reasoning and tool calls with their results; data, source and file
// parts are not for the model.
func stepParts(parts []checkpoint.Part) []step.Part {
	out := make([]step.Part, 0, len(parts))
	for _, p := range parts {
		switch p.Type {
		case checkpoint.PartText, checkpoint.PartImage, checkpoint.PartReasoning:
			out = append(out, step.Part{Type: p.Type, Text: p.Text, Image: p.Image})
		case checkpoint.PartToolCall:
			out = append(out, step.Part{Type: p.Type, Call: &step.ToolCall{ID: p.ToolCallID, Name: p.ToolName,
				ArgsText: p.ArgsText, Result: p.Result, IsError: p.IsError}})
		}
	}
	return out
}

func jsonString(b []byte) json.RawMessage {
	q, _ := json.Marshal(storable(string(b))) // a string always marshals
	return q
}

// storableJSON returns v as a jsonb value can hold it: a JSON value
// whose strings have no U+0000 (see storable); a value that is not JSON
// becomes a JSON string of its text, and an empty one null.
func storableJSON(v json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(v)) == 0 {
		return json.RawMessage(`null`)
	}
	if !json.Valid(v) {
		return jsonString(v)
	}
	if !bytes.Contains(v, []byte(`\u0000`)) && utf8.Valid(v) {
		return v
	}
	var x any
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	if dec.Decode(&x) != nil {
		return jsonString(v)
	}
	b, err := json.Marshal(cleanJSON(x))
	if err != nil {
		return jsonString(v)
	}
	return b
}

func cleanJSON(x any) any {
	switch v := x.(type) {
	case string:
		return storable(v)
	case []any:
		for i := range v {
			v[i] = cleanJSON(v[i])
		}
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[storable(k)] = cleanJSON(e)
		}
		return out
	}
	return x
}

// allows reports whether the run may call the server tool name: every
// tool when run_config.tools is absent, else those it names.
func (c *RunConfig) allows(name string) bool {
	if c.Tools == nil {
		return true
	}
	for _, t := range c.Tools {
		if t.Name == name && !t.Client {
			return true
		}
	}
	return false
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

// MaxStepsLimit is the most steps run_config.max_steps may ask for.
const MaxStepsLimit = 100

// validateAgent checks run_config's agent fields; invalid_request names
// the field.
func (c *RunConfig) validateAgent() error {
	if c.MaxSteps < 0 || c.MaxSteps > MaxStepsLimit {
		return errcode.New(errcode.Invalid, "run_config.max_steps must be between 1 and %d, got %d", MaxStepsLimit, c.MaxSteps)
	}
	seen := map[string]bool{}
	for i, t := range c.Tools {
		if !tool.ValidName(t.Name) {
			return errcode.New(errcode.Invalid, "run_config.tools[%d].name must be 1 to 64 letters, digits, _ or -, got %q", i, t.Name)
		}
		if seen[t.Name] {
			return errcode.New(errcode.Invalid, "run_config.tools[%d]: %q is named twice", i, t.Name)
		}
		seen[t.Name] = true
		if !t.Client && (t.Description != "" || t.Parameters != nil) {
			return errcode.New(errcode.Invalid, "run_config.tools[%d]: a server tool is named only; a client tool needs \"client\": true", i)
		}
		if t.Client && t.Parameters != nil && !isJSONObject(t.Parameters) {
			return errcode.New(errcode.Invalid, "run_config.tools[%d].parameters must be a JSON Schema object", i)
		}
	}
	return nil
}

func isJSONObject(b json.RawMessage) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(b, &m) == nil && m != nil
}

// checkTools checks run_config.tools against the server's tools: every
// server tool it names exists, and no client tool takes a server tool's
// name. invalid_request names the entry.
func (s *Service) checkTools(c RunConfig) error {
	if len(c.Tools) == 0 {
		return nil
	}
	server := map[string]bool{}
	if s.cfg.Tools != nil {
		for _, sp := range s.cfg.Tools.Specs() {
			server[sp.Name] = true
		}
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
