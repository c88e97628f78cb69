package thread_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/thread"
)

// traceT0 is when the test runs start.
var traceT0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// ms is traceT0 plus n milliseconds.
func ms(n int) time.Time { return traceT0.Add(time.Duration(n) * time.Millisecond) }

// spanWant is what a test checks of a span: "name status start..end
// parent", times in milliseconds after traceT0 ("-" for an open end).
func spanLine(s thread.Span) string {
	end := "-"
	if s.End != nil {
		end = fmt.Sprint(s.End.Sub(traceT0).Milliseconds())
	}
	parent := ""
	if s.ParentID != nil {
		parent = *s.ParentID
	}
	line := fmt.Sprintf("%s %s %s %d..%s <%s", s.SpanID, s.Name, s.Status, s.Start.Sub(traceT0).Milliseconds(), end, parent)
	if s.FinishReason != "" {
		line += " finish=" + s.FinishReason
	}
	if s.Error != nil {
		line += " err=" + s.Error.Type + ":" + s.Error.Message
	}
	return line
}

func rec(seq int64, kind string, f ...func(*thread.Record)) thread.Record {
	r := thread.Record{Seq: seq, Kind: kind}
	for _, fn := range f {
		fn(&r)
	}
	return r
}

func call(id, name string) func(*thread.Record) {
	return func(r *thread.Record) { r.CallID, r.Name = id, name }
}

func result(id string, isErr bool, data string) func(*thread.Record) {
	return func(r *thread.Record) { r.CallID, r.IsError, r.Data = id, isErr, json.RawMessage(data) }
}

// TestBuildTrace: a run's log and marks become its spans: steps as chat
// spans, parallel tool calls as siblings over the same time, failures
// and an interrupted run marked.
func TestBuildTrace(t *testing.T) {
	t.Parallel()
	done := func(n int) *time.Time { v := ms(n); return &v }
	tests := []struct {
		name    string
		model   string
		status  thread.RunStatus
		end     *time.Time
		runErr  *thread.RunError
		records []thread.Record
		marks   []thread.Mark
		names   map[string]string
		want    []string
	}{{
		name:   "parallel tools, then the answer",
		status: thread.RunSucceeded, end: done(1500),
		records: []thread.Record{rec(1, thread.KindSnapshot), rec(2, thread.KindToken),
			rec(3, thread.KindToolCall, call("a", "calculator")), rec(4, thread.KindToolCall, call("b", "clock")),
			rec(5, thread.KindToolCall, call("c", "wait")), rec(6, thread.KindToolCall, call("c", "wait")),
			rec(7, thread.KindToolResult, result("a", false, `"5"`)), rec(8, thread.KindToolResult, result("b", false, `"12:00"`)),
			rec(9, thread.KindToolResult, result("c", false, `"waited"`)), rec(10, thread.KindToken), rec(11, thread.KindToken),
			rec(12, thread.KindSnapshot)},
		marks: []thread.Mark{{Seq: 6, At: ms(100)}, {Seq: 8, At: ms(120)}, {Seq: 9, At: ms(1100)}},
		want: []string{
			"run invoke_agent threadline ok 0..1500 <",
			"chat-1 chat demo ok 0..100 <run finish=tool_call",
			"tool-a execute_tool calculator ok 100..120 <chat-1",
			"tool-b execute_tool clock ok 100..120 <chat-1",
			"tool-c execute_tool wait ok 100..1100 <chat-1",
			"chat-2 chat demo ok 1100..1500 <run finish=stop",
		},
	}, {
		name:   "a failed tool",
		status: thread.RunSucceeded, end: done(400),
		records: []thread.Record{rec(1, thread.KindSnapshot), rec(2, thread.KindToolCall, call("x", "fetch")),
			rec(3, thread.KindToolResult, result("x", true, `"connection \"refused\""`)), rec(4, thread.KindToken), rec(5, thread.KindSnapshot)},
		marks: []thread.Mark{{Seq: 2, At: ms(50)}, {Seq: 3, At: ms(250)}},
		want: []string{
			"run invoke_agent threadline ok 0..400 <",
			"chat-1 chat demo ok 0..50 <run finish=tool_call",
			"tool-x execute_tool fetch error 50..250 <chat-1 err=tool_error:connection \"refused\"",
			"chat-2 chat demo ok 250..400 <run finish=stop",
		},
	}, {
		name:   "interrupted while a tool ran",
		status: thread.RunInterrupted, end: done(9000),
		runErr: &thread.RunError{Code: errcode.RunInterrupted, Message: "the process running it stopped"},
		records: []thread.Record{rec(1, thread.KindSnapshot), rec(2, thread.KindToken),
			rec(3, thread.KindToolCall, call("w", "wait"))},
		marks: []thread.Mark{{Seq: 3, At: ms(30)}},
		want: []string{
			"run invoke_agent threadline interrupted 0..9000 < err=run_interrupted:the process running it stopped",
			"chat-1 chat demo ok 0..30 <run finish=tool_call",
			"tool-w execute_tool wait interrupted 30..9000 <chat-1",
		},
	}, {
		name:   "a model error ends the step",
		status: thread.RunFailed, end: done(700),
		runErr: &thread.RunError{Code: errcode.ModelError, Message: "rate limited"},
		records: []thread.Record{rec(1, thread.KindSnapshot), rec(2, thread.KindToken),
			rec(3, thread.KindError, func(r *thread.Record) { r.Code, r.Text = errcode.ModelError, "rate limited" }), rec(4, thread.KindSnapshot)},
		marks: []thread.Mark{{Seq: 3, At: ms(600)}},
		want: []string{
			"run invoke_agent threadline error 0..700 < err=model_error:rate limited",
			"chat-1 chat demo error 0..700 <run finish=error err=model_error:rate limited",
		},
	}, {
		name: "still running", status: thread.RunRunning,
		records: []thread.Record{rec(1, thread.KindSnapshot), rec(2, thread.KindToolCall, call("w", "wait"))},
		marks:   []thread.Mark{{Seq: 2, At: ms(10)}},
		want: []string{
			"run invoke_agent threadline running 0..- <",
			"chat-1 chat demo ok 0..10 <run finish=tool_call",
			"tool-w execute_tool wait running 10..- <chat-1",
		},
	}, {
		name: "a client tool waits for the person", status: thread.RunRequiresAction, end: done(80),
		records: []thread.Record{rec(1, thread.KindSnapshot), rec(2, thread.KindToolCall, call("q", "ask_user")), rec(3, thread.KindSnapshot)},
		marks:   []thread.Mark{{Seq: 2, At: ms(60)}},
		want: []string{
			"run invoke_agent threadline ok 0..80 <",
			"chat-1 chat demo ok 0..60 <run finish=tool_call",
			"tool-q execute_tool ask_user unanswered 60..60 <chat-1",
		},
	}, {
		name: "an ACP agent runs its own tools in its one step", model: "acp:example (example)", status: thread.RunRequiresAction, end: done(900),
		records: []thread.Record{rec(1, thread.KindSnapshot), rec(2, thread.KindToken),
			rec(3, thread.KindToolCall, call("t1", "Reading project files")), rec(4, thread.KindToolResult, result("t1", false, `"ok"`)),
			rec(5, thread.KindToken), rec(6, thread.KindToolCall, call("t2", "Modifying a file")), rec(7, thread.KindSnapshot)},
		marks: []thread.Mark{{Seq: 3, At: ms(100)}, {Seq: 4, At: ms(300)}, {Seq: 6, At: ms(800)}},
		want: []string{
			"run invoke_agent threadline ok 0..900 <",
			"chat-1 chat example ok 0..900 <run finish=tool_call",
			"tool-t1 execute_tool Reading project files ok 100..300 <chat-1",
			"tool-t2 execute_tool Modifying a file unanswered 800..800 <chat-1",
		},
	}, {
		name: "a continuation answers the last run's call", status: thread.RunSucceeded, end: done(500),
		names:   map[string]string{"p": "edit"},
		records: []thread.Record{rec(1, thread.KindSnapshot), rec(2, thread.KindToolResult, result("p", false, `"done"`)), rec(3, thread.KindToken), rec(4, thread.KindSnapshot)},
		marks:   []thread.Mark{{Seq: 2, At: ms(40)}},
		want: []string{
			"run invoke_agent threadline ok 0..500 <",
			"tool-p execute_tool edit ok 0..40 <run",
			"chat-1 chat demo ok 40..500 <run finish=stop",
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.model == "" {
				tc.model = "demo"
			}
			run := &thread.Run{ID: uuid.New(), ThreadID: uuid.New(), Status: tc.status, Model: tc.model, CreatedAt: traceT0,
				FinishedAt: tc.end, Error: tc.runErr, Usage: &thread.Usage{PromptTokens: 10, CompletionTokens: 20}}
			tr := thread.BuildTrace(thread.TraceSource{Run: run, Records: tc.records, Marks: tc.marks, ToolNames: tc.names})
			var got []string
			for _, s := range tr.Spans {
				got = append(got, spanLine(s))
			}
			if g, w := strings.Join(got, "\n"), strings.Join(tc.want, "\n"); g != w {
				t.Errorf("spans:\n%s\nwant:\n%s", g, w)
			}
			if tr.RunID != run.ID.String() || tr.Status != tc.status {
				t.Errorf("trace of %s %s, want %s %s", tr.RunID, tr.Status, run.ID, tc.status)
			}
		})
	}
}

// TestBuildTraceStepUsage: each step's usage and finish reason, kept in
// the run's Usage.Steps by the sequence its step began at, is on that
// step's chat span; a step that logged nothing (the empty last call)
// gives its usage to no span, and a step without usage has none.
func TestBuildTraceStepUsage(t *testing.T) {
	t.Parallel()
	end := ms(10)
	records := []thread.Record{rec(1, thread.KindSnapshot), rec(2, thread.KindToken),
		rec(3, thread.KindToolCall, call("a", "clock")), rec(4, thread.KindToolResult, result("a", false, `"x"`)),
		rec(5, thread.KindSnapshot), // step 2 began at 6
		rec(6, thread.KindToolCall, call("b", "clock")), rec(7, thread.KindToolResult, result("b", false, `"y"`)),
		rec(8, thread.KindSnapshot), rec(9, thread.KindToken), rec(10, thread.KindToken)}
	steps := []thread.StepUsage{
		{From: 2, PromptTokens: 11, CompletionTokens: 3, FinishReason: "tool_call"},
		// step 2 (From 6) reported nothing; step 3 began at 9
		{From: 9, PromptTokens: 40, CompletionTokens: 12, FinishReason: "length"},
		{From: 11, PromptTokens: 50, CompletionTokens: 0, FinishReason: "stop"}, // logged nothing
	}
	run := &thread.Run{ID: uuid.New(), Status: thread.RunSucceeded, Model: "openai:gpt-4o", CreatedAt: traceT0, FinishedAt: &end,
		Usage: &thread.Usage{PromptTokens: 101, CompletionTokens: 15, Steps: steps}}
	tr := thread.BuildTrace(thread.TraceSource{Run: run, Records: records})
	var got []string
	for _, s := range tr.Spans {
		if s.Operation != thread.OpChat && s.Operation != thread.OpInvokeAgent {
			continue
		}
		line := s.SpanID + " " + s.FinishReason
		if s.InputTokens != nil {
			line += fmt.Sprintf(" %d/%d", *s.InputTokens, *s.OutputTokens)
		}
		got = append(got, line)
	}
	want := []string{"run  101/15", "chat-1 tool_call 11/3", "chat-2 tool_call", "chat-3 length 40/12"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("spans:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestBuildTraceTokens: without steps' usage (a recovered run, an older
// row) the run's usage is on its span, and on its chat span when it made
// one model call.
func TestBuildTraceTokens(t *testing.T) {
	t.Parallel()
	end := ms(10)
	for _, tc := range []struct {
		records  []thread.Record
		wantChat bool
	}{
		{[]thread.Record{rec(1, thread.KindSnapshot), rec(2, thread.KindToken), rec(3, thread.KindSnapshot)}, true},
		{[]thread.Record{rec(1, thread.KindSnapshot), rec(2, thread.KindToolCall, call("a", "clock")),
			rec(3, thread.KindToolResult, result("a", false, `"x"`)), rec(4, thread.KindToken)}, false},
	} {
		run := &thread.Run{ID: uuid.New(), Status: thread.RunSucceeded, Model: "openai:gpt-4o", CreatedAt: traceT0, FinishedAt: &end,
			Usage: &thread.Usage{PromptTokens: 7, CompletionTokens: 9}}
		tr := thread.BuildTrace(thread.TraceSource{Run: run, Records: tc.records})
		if s := tr.Spans[0]; s.InputTokens == nil || *s.InputTokens != 7 || *s.OutputTokens != 9 {
			t.Errorf("run span tokens %v %v, want 7 9", s.InputTokens, s.OutputTokens)
		}
		chat := tr.Spans[1]
		if chat.Name != "chat gpt-4o" {
			t.Errorf("chat span named %q, want chat gpt-4o", chat.Name)
		}
		if got := chat.InputTokens != nil; got != tc.wantChat {
			t.Errorf("chat span has tokens: %v, want %v", got, tc.wantChat)
		}
	}
}

// BenchmarkBuildTrace builds the trace of a long agent run: 100 steps of
// 50 tokens and 4 parallel tool calls each (about 5,900 records).
func BenchmarkBuildTrace(b *testing.B) {
	var recs []thread.Record
	var marks []thread.Mark
	seq := int64(1)
	add := func(r thread.Record) { r.Seq = seq; recs = append(recs, r); seq++ }
	add(thread.Record{Kind: thread.KindSnapshot})
	for s := range 100 {
		for range 50 {
			add(thread.Record{Kind: thread.KindToken, Text: "abc"})
		}
		for c := range 4 {
			add(thread.Record{Kind: thread.KindToolCall, CallID: fmt.Sprintf("c%d_%d", s, c), Name: "clock"})
		}
		marks = append(marks, thread.Mark{Seq: seq - 1, At: ms(int(seq))})
		for c := range 4 {
			add(thread.Record{Kind: thread.KindToolResult, CallID: fmt.Sprintf("c%d_%d", s, c), Data: json.RawMessage(`"x"`)})
			marks = append(marks, thread.Mark{Seq: seq - 1, At: ms(int(seq))})
		}
	}
	end := ms(int(seq) + 10)
	src := thread.TraceSource{Run: &thread.Run{Status: thread.RunSucceeded, Model: "demo", CreatedAt: traceT0, FinishedAt: &end}, Records: recs, Marks: marks}
	b.ReportAllocs()
	for b.Loop() {
		if tr := thread.BuildTrace(src); len(tr.Spans) != 1+100+400 {
			b.Fatalf("%d spans", len(tr.Spans))
		}
	}
}
