package thread

import (
	"cmp"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"
)

// A run's trace, built from what is durable: the run's row, its event log
// and its marks (the commit times of the log's segments that hold a tool
// call, a tool result or an error). Its spans follow the OpenTelemetry
// GenAI conventions' names, as the engine's live spans do: the run is
// "invoke_agent threadline"; each model call (a step of the agent loop)
// "chat {model}", a child of the run; each tool call "execute_tool {tool}",
// a child of the step that asked for it (parallel calls are siblings over
// the same time). The run's usage is on its span; each step's (the run's
// Usage.Steps, which the run's row keeps from its end) on its chat span,
// with its finish reason; a run whose row keeps no steps' usage (a
// running one, one recovered after a crash, one older than them) has it
// on its chat span only when it has one step.

// Mark is the commit time of the run's log up to sequence Seq.
type Mark struct {
	Seq int64
	At  time.Time
}

// TraceSource is what a run's trace is built from (store.RunTraceSource).
type TraceSource struct {
	Run     *Run
	Records []Record // the run's log, in order
	Marks   []Mark
	// ToolNames names the calls of the run's reply by id: a continuation's
	// log answers calls it does not name.
	ToolNames map[string]string
}

// Span statuses.
const (
	SpanOK          = "ok"
	SpanError       = "error"
	SpanCancelled   = "cancelled"
	SpanInterrupted = "interrupted"
	SpanRunning     = "running"
	// SpanUnanswered is a tool call the run did not run: a client tool's
	// call, whose answer is the person's or the client's.
	SpanUnanswered = "unanswered"
)

// Span operations.
const (
	OpInvokeAgent = "invoke_agent"
	OpChat        = "chat"
	OpExecuteTool = "execute_tool"
)

// SpanFailure is why a span failed.
type SpanFailure struct {
	Type    string
	Message string
}

// Span is one step of a run's trace. End is nil while it runs.
type Span struct {
	SpanID       string
	ParentID     *string
	Name         string
	Operation    string
	Start        time.Time
	End          *time.Time
	Status       string
	Error        *SpanFailure
	Model        string
	ToolName     string
	ToolCallID   string
	InputTokens  *int
	OutputTokens *int
	FinishReason string
	FirstSeq     int64
	LastSeq      int64
}

// Trace is a run's spans; api/wire writes it for GET …/runs/{run_id}/trace.
type Trace struct {
	RunID    string
	ThreadID string
	Status   RunStatus
	Spans    []Span
}

// RunSpanID is the id of a trace's run span.
const RunSpanID = "run"

// traceBuild is BuildTrace's state while it reads the log.
type traceBuild struct {
	src      TraceSource
	marks    []Mark
	end      *time.Time // the run's end; nil while it runs
	spans    []*Span
	tools    map[string]*Span
	step     *Span   // the step being read (nil between steps)
	calls    []*Span // its tool calls
	steps    int
	lastStep *Span
	ready    time.Time // when the next step may start: the last tool's end
	// usage is the steps' usage by their first sequence; usageAt the
	// next one no step took yet.
	usage   []StepUsage
	usageAt int
	// agentTools: the model runs its own tools within its one step (an
	// ACP agent): a call starts when it is logged, and its result does
	// not end the step.
	agentTools bool
}

// BuildTrace returns the run's trace: the run span first, then its steps
// and tool calls in the order the log has them. Times come from the run's
// start and end and from the marks; a record between marks takes the time
// of the next mark (its commit was no later), and one after the last mark
// the run's end (or its last mark while it runs).
func BuildTrace(src TraceSource) Trace {
	r := src.Run
	b := &traceBuild{src: src, marks: slices.Clone(src.Marks), end: r.FinishedAt, tools: map[string]*Span{}, ready: r.CreatedAt,
		agentTools: strings.HasPrefix(r.Model, "acp:")}
	slices.SortFunc(b.marks, func(x, y Mark) int { return cmp.Compare(x.Seq, y.Seq) })
	run := &Span{SpanID: RunSpanID, Name: OpInvokeAgent + " threadline", Operation: OpInvokeAgent, Start: r.CreatedAt,
		End: r.FinishedAt, Status: runSpanStatus(r.Status), Model: r.Model}
	if r.Error != nil {
		run.Error = &SpanFailure{Type: string(r.Error.Code), Message: r.Error.Message}
	}
	if r.Usage != nil {
		run.InputTokens, run.OutputTokens = ptr(r.Usage.PromptTokens), ptr(r.Usage.CompletionTokens)
		b.usage = slices.Clone(r.Usage.Steps)
		slices.SortStableFunc(b.usage, func(x, y StepUsage) int { return cmp.Compare(x.From, y.From) })
	}
	b.spans = append(b.spans, run)
	for i := range src.Records {
		b.read(&src.Records[i])
	}
	b.finish(run)
	if n := len(src.Records); n > 0 {
		run.FirstSeq, run.LastSeq = src.Records[0].Seq, src.Records[n-1].Seq
	}
	out := Trace{RunID: r.ID.String(), ThreadID: r.ThreadID.String(), Status: r.Status, Spans: make([]Span, len(b.spans))}
	for i, s := range b.spans {
		out.Spans[i] = *s
	}
	return out
}

// read folds one record of the log into the trace.
func (b *traceBuild) read(rec *Record) {
	switch rec.Kind {
	case KindToken, KindReasoning, KindData:
		b.inStep(rec.Seq)
	case KindToolCall:
		b.inStep(rec.Seq)
		if b.tools[rec.CallID] == nil {
			t := &Span{SpanID: "tool-" + rec.CallID, ParentID: &b.step.SpanID, Name: OpExecuteTool + " " + rec.Name,
				Operation: OpExecuteTool, ToolName: rec.Name, ToolCallID: rec.CallID, FirstSeq: rec.Seq, LastSeq: rec.Seq}
			if b.agentTools {
				t.Start = b.at(rec.Seq)
			}
			b.tools[rec.CallID] = t
			b.calls = append(b.calls, t)
			b.spans = append(b.spans, t)
		}
	case KindToolResult:
		b.result(rec)
	case KindError:
		s := b.step
		if s == nil {
			s = b.spans[0]
		}
		s.Status = SpanError
		s.Error = &SpanFailure{Type: string(rec.Code), Message: rec.Text}
	}
}

// inStep opens a step at seq when none is open, and extends it to seq.
func (b *traceBuild) inStep(seq int64) {
	if b.step == nil {
		b.steps++
		b.step = &Span{SpanID: "chat-" + strconv.Itoa(b.steps), ParentID: ptr(RunSpanID), Name: OpChat + " " + modelName(b.src.Run.Model),
			Operation: OpChat, Model: b.src.Run.Model, Start: b.ready, Status: SpanOK, FirstSeq: seq}
		b.calls = nil
		b.spans = append(b.spans, b.step)
		b.stepUsage(b.step, seq)
	}
	b.step.LastSeq = seq
}

// stepUsage puts on step s, opened by the record of sequence seq, the
// usage of the model call that logged it: the last one that began at seq
// or before (a call that logged nothing leaves its usage to no span).
func (b *traceBuild) stepUsage(s *Span, seq int64) {
	var hit *StepUsage
	for ; b.usageAt < len(b.usage) && b.usage[b.usageAt].From <= seq; b.usageAt++ {
		hit = &b.usage[b.usageAt]
	}
	if hit == nil {
		return
	}
	s.InputTokens, s.OutputTokens, s.FinishReason = ptr(hit.PromptTokens), ptr(hit.CompletionTokens), hit.FinishReason
}

// closeStep ends the open step at its last record's commit: its calls
// start running then.
func (b *traceBuild) closeStep() {
	s := b.step
	if s == nil {
		return
	}
	end := b.at(s.LastSeq)
	s.End = &end
	if len(b.calls) > 0 && s.FinishReason == "" {
		s.FinishReason = "tool_call"
	}
	for _, t := range b.calls {
		t.Start = end
	}
	b.ready = end
	b.lastStep, b.step = s, nil
}

// result ends a tool call at its result's commit. A result of a call no
// step of this run made (a continuation answering the last run's calls)
// is a call of the run, from its start.
func (b *traceBuild) result(rec *Record) {
	if !b.agentTools {
		b.closeStep()
	}
	t := b.tools[rec.CallID]
	if t == nil {
		name := b.src.ToolNames[rec.CallID]
		t = &Span{SpanID: "tool-" + rec.CallID, ParentID: ptr(RunSpanID), Name: strings.TrimSpace(OpExecuteTool + " " + name),
			Operation: OpExecuteTool, ToolName: name, ToolCallID: rec.CallID, Start: b.src.Run.CreatedAt, FirstSeq: rec.Seq}
		b.tools[rec.CallID] = t
		b.spans = append(b.spans, t)
	}
	end := b.at(rec.Seq)
	t.End, t.LastSeq, t.Status = &end, rec.Seq, SpanOK
	if rec.IsError {
		t.Status = SpanError
		t.Error = &SpanFailure{Type: "tool_error", Message: toolErrorText(rec)}
	}
	if end.After(b.ready) {
		b.ready = end
	}
}

// finish ends what the log left open as the run ended (or leaves it
// running), and puts the run's usage and stop on its last step.
func (b *traceBuild) finish(run *Span) {
	st := b.src.Run.Status
	if len(b.calls) > 0 && !b.agentTools {
		b.closeStep() // its calls were logged whole: they were running
	}
	last := b.step
	if last != nil && st.Done() {
		last.End = b.end
		if run.Status != SpanOK && last.Status == SpanOK {
			last.Status, last.Error = run.Status, run.Error
		}
	} else if last != nil {
		last.Status = SpanRunning
	} else {
		last = b.lastStep
	}
	if last != nil && last.FinishReason == "" {
		last.FinishReason = finishOf(st)
	}
	if b.steps == 1 && last != nil && last.InputTokens == nil {
		last.InputTokens, last.OutputTokens = run.InputTokens, run.OutputTokens
	}
	for _, t := range b.spans {
		if t.Operation != OpExecuteTool || t.End != nil {
			continue
		}
		switch {
		case !st.Done():
			t.Status = SpanRunning
		case st == RunSucceeded || st == RunRequiresAction:
			t.Status, t.End = SpanUnanswered, ptr(t.Start)
		default:
			t.Status, t.End = runSpanStatus(st), b.end
		}
	}
}

// at is when the record of sequence seq was committed, at the latest.
func (b *traceBuild) at(seq int64) time.Time {
	i, _ := slices.BinarySearchFunc(b.marks, seq, func(m Mark, s int64) int { return cmp.Compare(m.Seq, s) })
	if i < len(b.marks) {
		return b.marks[i].At
	}
	if b.end != nil {
		return *b.end
	}
	if n := len(b.marks); n > 0 {
		return b.marks[n-1].At
	}
	return b.src.Run.CreatedAt
}

// runSpanStatus is a run status as a span's.
func runSpanStatus(s RunStatus) string {
	switch s {
	case RunFailed:
		return SpanError
	case RunCancelled:
		return SpanCancelled
	case RunInterrupted:
		return SpanInterrupted
	case RunRunning, "":
		return SpanRunning
	}
	return SpanOK
}

// finishOf is the finish reason of a run's last step, by how it ended.
func finishOf(s RunStatus) string {
	switch s {
	case RunSucceeded:
		return "stop"
	case RunRequiresAction:
		return "tool_call"
	case RunFailed:
		return "error"
	case RunCancelled, RunInterrupted:
		return string(s)
	}
	return ""
}

// toolErrorText is a failed tool's answer as text, cut short.
func toolErrorText(rec *Record) string {
	s := string(rec.Data)
	var str string
	if json.Unmarshal(rec.Data, &str) == nil {
		s = str // a string answer, unquoted
	}
	if r := []rune(s); len(r) > 200 {
		s = string(r[:200]) + "…"
	}
	if s == "" || s == "null" {
		return "the tool answered with an error"
	}
	return s
}

// modelName is the provider's name of the model a run asked for
// ("openai:gpt-4o (gpt-4o-2024-08-06)" → "gpt-4o"), as the chat span
// names it (a run keeps the model that answered in parentheses).
func modelName(m string) string {
	m, _, _ = strings.Cut(m, " (")
	if _, after, ok := strings.Cut(m, ":"); ok {
		return after
	}
	return m
}

func ptr[T any](v T) *T { return &v }
