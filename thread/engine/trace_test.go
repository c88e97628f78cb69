package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/model/tool"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/engine"
	twait "github.com/threadline/threadline/thread/threadtest/wait"
)

// chatModel is a chat model that streams its tokens and answers res and
// err.
type chatModel struct {
	tokens []string
	res    thread.ModelResult
	err    error
}

func (m chatModel) Stream(_ context.Context, _ thread.ModelRequest, onDelta func(thread.Delta) error) (thread.ModelResult, error) {
	on := textSink(onDelta)
	for _, tok := range m.tokens {
		if err := on(tok); err != nil {
			return m.res, err
		}
	}
	return m.res, m.err
}

// traceSetup is fakeSetup with an SDK tracer whose ended spans the
// returned exporter keeps.
func traceSetup(t *testing.T, m thread.Model, cfg engine.Config) (*engine.Service, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	cfg.Tracer = tp.Tracer("threadline-test")
	svc, _, _ := fakeSetup(t, m, cfg)
	return svc, exp
}

// runSpans runs text and returns the run's spans once its invoke_agent
// span has ended (it ends after the run's end is published).
func runSpans(t *testing.T, svc *engine.Service, exp *tracetest.InMemoryExporter, text string) (*thread.Run, tracetest.SpanStubs) {
	t.Helper()
	_, r, _ := runAgent(t, svc, text, thread.RunConfig{})
	return r, waitSpans(t, exp)
}

// waitSpans returns the spans once the run's invoke_agent span has ended.
func waitSpans(t *testing.T, exp *tracetest.InMemoryExporter) tracetest.SpanStubs {
	t.Helper()
	var spans tracetest.SpanStubs
	twait.Eventually(t, 30*time.Second, func() bool {
		spans = exp.GetSpans()
		return len(named(spans, "invoke_agent threadline")) == 1
	}, "no invoke_agent span within 30 s; got %v spans", func() any { return len(spans) })
	return spans
}

func named(spans tracetest.SpanStubs, name string) tracetest.SpanStubs {
	var out tracetest.SpanStubs
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// one returns the only span named name.
func one(t *testing.T, spans tracetest.SpanStubs, name string) tracetest.SpanStub {
	t.Helper()
	got := named(spans, name)
	if len(got) != 1 {
		t.Fatalf("spans named %q: got %d, want 1 (all: %v)", name, len(got), spanNames(spans))
	}
	return got[0]
}

func spanNames(spans tracetest.SpanStubs) []string {
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = s.Name
	}
	return out
}

// hasAttrs fails the test unless span has every attribute of want.
func hasAttrs(t *testing.T, span tracetest.SpanStub, want ...attribute.KeyValue) {
	t.Helper()
	got := map[attribute.Key]attribute.Value{}
	for _, kv := range span.Attributes {
		got[kv.Key] = kv.Value
	}
	for _, w := range want {
		if g, ok := got[w.Key]; !ok || g.String() != w.Value.String() {
			t.Errorf("%s: %s: got %q (set %v), want %q", span.Name, w.Key, g.String(), ok, w.Value.String())
		}
	}
}

// TestTraceChat: a chat model's run is an invoke_agent span with one chat
// child that carries the usage, the response model and the finish reason.
func TestTraceChat(t *testing.T) {
	t.Parallel()
	m := chatModel{tokens: []string{"hel", "lo"}, res: thread.ModelResult{Model: "recorder-2024", PromptTokens: 7, CompletionTokens: 2, StopReason: "stop"}}
	svc, exp := traceSetup(t, m, engine.Config{})
	r, spans := runSpans(t, svc, exp, "hi")
	if len(spans) != 2 {
		t.Fatalf("spans: got %v, want invoke_agent and one chat", spanNames(spans))
	}
	run, chat := one(t, spans, "invoke_agent threadline"), one(t, spans, "chat recorder")
	if chat.Parent.SpanID() != run.SpanContext.SpanID() || chat.SpanContext.TraceID() != run.SpanContext.TraceID() {
		t.Errorf("chat's parent: got %v, want the invoke_agent span %v", chat.Parent.SpanID(), run.SpanContext.SpanID())
	}
	ids := []attribute.KeyValue{
		attribute.String("gen_ai.conversation.id", r.ThreadID.String()),
		attribute.String("threadline.run_id", r.ID.String()),
		attribute.String("threadline.thread_id", r.ThreadID.String()),
		attribute.String("gen_ai.provider.name", "threadline"),
		attribute.String("gen_ai.request.model", "recorder"),
	}
	hasAttrs(t, run, append(ids, attribute.String("gen_ai.operation.name", "invoke_agent"),
		attribute.String("gen_ai.agent.name", "threadline"), attribute.String("threadline.run.status", "succeeded"),
		attribute.Int("gen_ai.usage.input_tokens", 7), attribute.Int("gen_ai.usage.output_tokens", 2))...)
	hasAttrs(t, chat, append(ids, attribute.String("gen_ai.operation.name", "chat"),
		attribute.String("gen_ai.response.model", "recorder-2024"),
		attribute.Int("gen_ai.usage.input_tokens", 7), attribute.Int("gen_ai.usage.output_tokens", 2),
		attribute.StringSlice("gen_ai.response.finish_reasons", []string{"stop"}))...)
	if run.Status.Code != codes.Unset || chat.Status.Code != codes.Unset {
		t.Errorf("status: run %v, chat %v; want both unset", run.Status, chat.Status)
	}
}

// TestTraceParallelTools: an agent step that calls two tools at once has
// two execute_tool spans, siblings under the step's chat span, that
// overlap in time (each tool waits for the other to start); the next
// step is a second chat span.
func TestTraceParallelTools(t *testing.T) {
	t.Parallel()
	aStarted, bStarted := make(chan struct{}), make(chan struct{})
	pair := func(name string, mine, other chan struct{}) tool.Tool {
		return funcTool{name, func(ctx context.Context, _ json.RawMessage) (thread.ToolOutput, error) {
			close(mine)
			select {
			case <-other:
				time.Sleep(time.Millisecond) // the other's span is started: they overlap
				return tool.ValueResult(name + " ok"), nil
			case <-ctx.Done():
				return thread.ToolOutput{}, ctx.Err()
			}
		}}
	}
	m := &agentScript{steps: [][]thread.Delta{
		{text("Calling."), call("c1", "a", `{}`), call("c2", "b", `{}`)},
		{text("Done.")},
	}}
	svc, exp := traceSetup(t, m, engine.Config{Tools: registry(t, pair("a", aStarted, bStarted), pair("b", bStarted, aStarted))})
	_, spans := runSpans(t, svc, exp, "go")
	run := one(t, spans, "invoke_agent threadline")
	chats := named(spans, "chat recorder")
	if len(chats) != 2 {
		t.Fatalf("chat spans: got %d, want 2 (all: %v)", len(chats), spanNames(spans))
	}
	first := chats[0]
	if chats[1].StartTime.Before(first.StartTime) {
		first = chats[1]
	}
	hasAttrs(t, first, attribute.StringSlice("gen_ai.response.finish_reasons", []string{"tool_call"}))
	for _, c := range chats {
		if c.Parent.SpanID() != run.SpanContext.SpanID() {
			t.Errorf("chat's parent: got %v, want the run's span", c.Parent.SpanID())
		}
	}
	a, b := one(t, spans, "execute_tool a"), one(t, spans, "execute_tool b")
	for _, s := range []struct {
		span     tracetest.SpanStub
		name, id string
	}{{a, "a", "c1"}, {b, "b", "c2"}} {
		if s.span.Parent.SpanID() != first.SpanContext.SpanID() {
			t.Errorf("%s's parent: got %v, want the first step's chat span %v", s.span.Name, s.span.Parent.SpanID(), first.SpanContext.SpanID())
		}
		hasAttrs(t, s.span, attribute.String("gen_ai.operation.name", "execute_tool"),
			attribute.String("gen_ai.tool.name", s.name), attribute.String("gen_ai.tool.call.id", s.id))
		if s.span.Status.Code != codes.Unset {
			t.Errorf("%s status: got %v, want unset", s.span.Name, s.span.Status)
		}
	}
	if !a.StartTime.Before(b.EndTime) || !b.StartTime.Before(a.EndTime) {
		t.Errorf("tool spans do not overlap: a %v–%v, b %v–%v", a.StartTime, a.EndTime, b.StartTime, b.EndTime)
	}
}

// TestTraceStepUsage: each model call's usage is on its own chat span
// (gen_ai.usage.*), the run's span has their sum, and the run's row keeps
// each step's usage and finish reason by the sequence its step began at,
// which the trace built from the log puts on the same steps; a run of one
// model call keeps only its totals.
func TestTraceStepUsage(t *testing.T) {
	t.Parallel()
	m := &agentScript{steps: [][]thread.Delta{{text("Calling."), call("c1", "echo", `{}`)}, {text("Done.")}},
		usage: [][2]int{{12, 5}, {30, 2}}}
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	echo := funcTool{"echo", func(context.Context, json.RawMessage) (thread.ToolOutput, error) { return tool.ValueResult("ok"), nil }}
	svc, st, _ := fakeSetup(t, m, engine.Config{Tracer: tp.Tracer("threadline-test"), Tools: registry(t, echo)})
	tid, r, evs := runAgent(t, svc, "go", thread.RunConfig{})
	spans := waitSpans(t, exp)
	chats := named(spans, "chat recorder")
	if len(chats) != 2 {
		t.Fatalf("chat spans: got %d, want 2 (all: %v)", len(chats), spanNames(spans))
	}
	if chats[1].StartTime.Before(chats[0].StartTime) {
		chats[0], chats[1] = chats[1], chats[0]
	}
	hasAttrs(t, chats[0], attribute.Int("gen_ai.usage.input_tokens", 12), attribute.Int("gen_ai.usage.output_tokens", 5),
		attribute.StringSlice("gen_ai.response.finish_reasons", []string{"tool_call"}))
	hasAttrs(t, chats[1], attribute.Int("gen_ai.usage.input_tokens", 30), attribute.Int("gen_ai.usage.output_tokens", 2),
		attribute.StringSlice("gen_ai.response.finish_reasons", []string{"stop"}))
	hasAttrs(t, one(t, spans, "invoke_agent threadline"), attribute.Int("gen_ai.usage.input_tokens", 42),
		attribute.Int("gen_ai.usage.output_tokens", 7))

	got, err := st.RunGet(context.Background(), tid, r.ID)
	if err != nil || got.Usage == nil {
		t.Fatalf("RunGet: %v, usage %+v", err, got)
	}
	// Step 1 logged from sequence 2 (after the first snapshot); step 2
	// after the call's result and the running snapshot between steps.
	var step2 int64
	for _, ev := range evs {
		if ev.Type == thread.KindToken && ev.Text == "Done." {
			step2 = ev.Sequence
		}
	}
	want := []thread.StepUsage{{From: 2, PromptTokens: 12, CompletionTokens: 5, FinishReason: "tool_call"},
		{From: step2, PromptTokens: 30, CompletionTokens: 2, FinishReason: "stop"}}
	if fmt.Sprint(got.Usage.Steps) != fmt.Sprint(want) || got.Usage.PromptTokens != 42 || got.Usage.CompletionTokens != 7 {
		t.Fatalf("usage: got %+v, want 42/7 and steps %+v", got.Usage, want)
	}
	recs := make([]thread.Record, 0, len(evs))
	for _, ev := range evs {
		recs = append(recs, thread.Record{Seq: ev.Sequence, Kind: ev.Type, CallID: ev.CallID, Name: ev.Name})
	}
	tr := thread.BuildTrace(thread.TraceSource{Run: got, Records: recs})
	var steps []string
	for _, s := range tr.Spans {
		if s.Operation == thread.OpChat && s.InputTokens != nil {
			steps = append(steps, fmt.Sprintf("%d/%d %s", *s.InputTokens, *s.OutputTokens, s.FinishReason))
		}
	}
	if fmt.Sprint(steps) != "[12/5 tool_call 30/2 stop]" {
		t.Errorf("trace's chat spans: got %v, want [12/5 tool_call 30/2 stop]", steps)
	}

	// A run of one model call (the script's last step again) keeps only
	// its totals: its chat span has them.
	tid1, r1, _ := runAgent(t, svc, "again", thread.RunConfig{})
	one, err := st.RunGet(context.Background(), tid1, r1.ID)
	if err != nil || one.Usage == nil || one.Usage.Steps != nil || one.Usage.PromptTokens != 1 {
		t.Errorf("a one-call run's usage: got %+v, %v; want 1/1 and no steps", one.Usage, err)
	}
}

// TestTraceFailures: a tool that fails and a model call that fails mark
// their spans Error with an error.type; a failed run marks its own.
func TestTraceFailures(t *testing.T) {
	t.Parallel()
	t.Run("tool", func(t *testing.T) {
		t.Parallel()
		boom := funcTool{"boom", func(context.Context, json.RawMessage) (thread.ToolOutput, error) {
			return thread.ToolOutput{}, errors.New("it broke")
		}}
		m := &agentScript{steps: [][]thread.Delta{{call("c1", "boom", `{}`)}, {text("Sorry.")}}}
		svc, exp := traceSetup(t, m, engine.Config{Tools: registry(t, boom)})
		_, spans := runSpans(t, svc, exp, "go")
		span := one(t, spans, "execute_tool boom")
		if span.Status.Code != codes.Error {
			t.Errorf("tool status: got %v, want Error", span.Status)
		}
		hasAttrs(t, span, attribute.String("error.type", "tool_error"))
		run := one(t, spans, "invoke_agent threadline")
		if run.Status.Code != codes.Unset {
			t.Errorf("run status: got %v, want unset: the run went on", run.Status)
		}
	})
	t.Run("model", func(t *testing.T) {
		t.Parallel()
		m := chatModel{tokens: []string{"par"}, err: errcode.New(errcode.ModelTimeout, "the provider did not answer")}
		svc, exp := traceSetup(t, m, engine.Config{})
		_, spans := runSpans(t, svc, exp, "go")
		for _, name := range []string{"chat recorder", "invoke_agent threadline"} {
			span := one(t, spans, name)
			if span.Status.Code != codes.Error || span.Status.Description != "the provider did not answer" {
				t.Errorf("%s status: got %+v, want Error with the model's message", name, span.Status)
			}
			hasAttrs(t, span, attribute.String("error.type", string(errcode.ModelTimeout)))
		}
		hasAttrs(t, one(t, spans, "invoke_agent threadline"), attribute.String("threadline.run.status", "failed"))
	})
}

// TestTraceCancel: a run cancelled during a tool call ends its spans
// without an error: the tool's and the run's status stay unset, the run
// says it was cancelled.
func TestTraceCancel(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	block := funcTool{"block", func(ctx context.Context, _ json.RawMessage) (thread.ToolOutput, error) {
		close(started)
		<-ctx.Done()
		return thread.ToolOutput{}, ctx.Err()
	}}
	m := &agentScript{steps: [][]thread.Delta{{call("c1", "block", `{}`)}, {text("never")}}}
	svc, exp := traceSetup(t, m, engine.Config{Tools: registry(t, block)})
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
	rest(t, evs, done)
	spans := waitSpans(t, exp)
	run, tl := one(t, spans, "invoke_agent threadline"), one(t, spans, "execute_tool block")
	hasAttrs(t, run, attribute.String("threadline.run.status", "cancelled"))
	if run.Status.Code != codes.Unset || tl.Status.Code != codes.Unset {
		t.Errorf("status: run %+v, tool %+v; want both unset", run.Status, tl.Status)
	}
}
