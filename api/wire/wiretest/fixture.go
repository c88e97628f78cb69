// Package wiretest holds the fixture of the wire's and the store's golden
// files (api/wire/testdata): the domain values they were written from.
package wiretest

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/thread"
)

// The fixture below is the input of the golden files in testdata: every
// event kind, every part type and the awkward strings, built from fixed
// ids and times so that the bytes written for them never change. The
// golden files were written by the encoders as they were before the wire
// moved to this package (MarshalJSON methods on the domain types).

// ID is the fixture's n-th id.
func ID(n int) uuid.UUID { return uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "wire-%d", n)) }

// Texts are the awkward strings: escapes, HTML, controls, invalid UTF-8.
var Texts = []string{"", "plain", `quote " and \ backslash`, "<b>&amp;</b>", "tab\tnew\nline\r\x00\x1f\b\f", "\u2028\u2029",
	"héllo ✓ 😀", "bad \xff\xfe utf-8", "del \x7f"}

// Times are times with and without fractions, one not in UTC.
var Times = []time.Time{
	time.Date(2026, 11, 23, 1, 2, 3, 456789000, time.UTC),
	time.Date(2026, 11, 23, 1, 2, 3, 0, time.UTC),
	time.Date(2026, 1, 2, 3, 4, 5, 100000000, time.FixedZone("x", 3600+1800)),
}

// Parts is one part of every type, and a few in odd states.
func Parts(text string) []checkpoint.Part {
	return []checkpoint.Part{
		{Type: checkpoint.PartText, Text: text},
		{Type: checkpoint.PartReasoning, Text: "think " + text},
		{Type: checkpoint.PartImage, Image: "data:image/png;base64,iVBOR<>&"},
		{Type: checkpoint.PartToolCall, ToolCallID: "c1", ToolName: "calculator", ArgsText: `{"expression": "1+<2>"`},
		{Type: checkpoint.PartToolCall, ToolCallID: "c2", ToolName: "calculator", Args: json.RawMessage(`{"expression":"2*3"}`),
			ArgsText: `{"expression": "2*3"}`, Result: json.RawMessage(`6`)},
		{Type: checkpoint.PartToolCall, ToolCallID: "c3", ToolName: "web", Args: json.RawMessage(`{}`), Result: json.RawMessage(`"boom <x>"`), IsError: true},
		{Type: checkpoint.PartData, Name: "plan", Data: json.RawMessage(`{"id":"p","tasks":[]}`)},
		{Type: checkpoint.PartData, Name: "empty"},
		{Type: checkpoint.PartSource, SourceType: "url", ID: "s1", URL: "https://example.com/?a=1&b=<2>", Title: text},
		{Type: checkpoint.PartSource, SourceType: "url", ID: "s2", URL: "https://example.com/"},
		{Type: checkpoint.PartFile, Filename: "a.pdf", MimeType: "application/pdf", Data: json.RawMessage(`"/api/v1/attachments/x"`)},
		{Type: checkpoint.PartFile, MimeType: "text/plain"},
		{Type: "other", Text: text, Name: "n", URL: "u"},
	}
}

// Tree is a thread of a user/assistant chain with branches, and a
// running reply on its last message.
func Tree() (*checkpoint.Tree, *checkpoint.Node, []checkpoint.Node) {
	tid := ID(0)
	var nodes []checkpoint.Node
	parent := uuid.Nil
	for i, text := range Texts {
		n := checkpoint.Node{ID: ID(100 + i), ThreadID: tid, ParentID: parent, Seq: int64(len(nodes) + 1), Role: checkpoint.RoleUser,
			Content: []checkpoint.Part{{Type: "text", Text: text}}, CreatedAt: Times[i%len(Times)]}
		switch i % 4 {
		case 1:
			n.Role, n.RunID = checkpoint.RoleAssistant, ID(200+i)
			n.Status = &checkpoint.Status{Type: "incomplete", Reason: "error", Error: text}
			n.Content = Parts(text)
		case 2:
			n.Content = append(n.Content, checkpoint.Part{Type: "image", Image: "data:image/png;base64,iVBOR<>&"})
			n.Attachments = []checkpoint.Attachment{
				{ID: ID(300 + i).String(), Type: "image", Name: "a<b>" + text, ContentType: "image/png", Size: 3, URL: "/api/v1/attachments/" + ID(300+i).String(),
					Content: []checkpoint.Part{{Type: "image", Image: "x"}}},
				{ID: ID(400 + i).String(), Type: "file", Name: "z", ContentType: "application/zip", Content: []checkpoint.Part{}},
			}
			n.Attachments[0].Status.Type = "complete"
			n.Attachments[1].Status.Type = "complete"
		case 3:
			n.Role, n.RunID = checkpoint.RoleAssistant, ID(200+i)
			n.Status = &checkpoint.Status{Type: "complete", Reason: "stop"}
			n.Content = nil
		}
		nodes = append(nodes, n)
		if i == 4 {
			// a sibling of the fifth message: a branch
			b := n
			b.ID, b.Seq, b.Content, b.Attachments = ID(150), int64(len(nodes)+1), []checkpoint.Part{{Type: "text", Text: "edited " + text}}, []checkpoint.Attachment{}
			nodes = append(nodes, b)
		}
		parent = n.ID
	}
	tree, err := checkpoint.NewTree(nodes)
	if err != nil {
		panic(err)
	}
	running := &checkpoint.Node{ID: ID(500), ThreadID: tid, ParentID: parent, Role: checkpoint.RoleAssistant, Running: true,
		RunID: ID(501), Content: Parts("so far"), CreatedAt: Times[0]}
	return tree, running, nodes
}

// Snapshots are a running run's, a finished run's on a branch, and
// an empty thread's.
func Snapshots() []thread.Snapshot {
	tree, running, nodes := Tree()
	tid := ID(0)
	return []thread.Snapshot{
		{ThreadID: tid, RunStatus: thread.RunRunning, Tree: tree, Running: running, Head: running.ID},
		{ThreadID: tid, RunStatus: thread.RunSucceeded, Tree: tree, Head: nodes[len(nodes)-1].ID},
		{ThreadID: tid, RunStatus: thread.RunFailed, Tree: tree, Head: ID(150)},
		{ThreadID: tid, RunStatus: thread.RunSucceeded, Tree: &checkpoint.Tree{}},
	}
}

// Events is every event kind.
func Events() []thread.Event {
	run, msg := ID(1), ID(2)
	var evs []thread.Event
	add := func(ev thread.Event) {
		ev.RunID, ev.Sequence = run, int64(len(evs)+1)
		if ev.Type != thread.KindError && ev.Type != thread.KindSnapshot {
			ev.MessageID = msg
		}
		evs = append(evs, ev)
	}
	for _, text := range Texts {
		add(thread.Event{Type: thread.KindToken, Text: text})
		add(thread.Event{Type: thread.KindReasoning, Text: text})
	}
	add(thread.Event{Type: thread.KindToolCall, CallID: "c1", Name: "calculator", Text: `{"expression":`})
	add(thread.Event{Type: thread.KindToolCall, CallID: "c1", Name: "calculator"})
	add(thread.Event{Type: thread.KindToolResult, CallID: "c1", Data: json.RawMessage(`84`)})
	add(thread.Event{Type: thread.KindToolResult, CallID: "c2", Data: json.RawMessage(`"boom <x>"`), IsError: true})
	add(thread.Event{Type: thread.KindToolResult, CallID: "c3"})
	add(thread.Event{Type: thread.KindData, Name: "plan", Data: json.RawMessage(`{"id":"p","tasks":[]}`)})
	add(thread.Event{Type: thread.KindData, Name: "nothing"})
	add(thread.Event{Type: thread.KindError, Code: errcode.Unavailable, Text: "model <down> & out"})
	snaps := Snapshots()
	for i := range snaps {
		add(thread.Event{Type: thread.KindSnapshot, Snapshot: &snaps[i]})
	}
	// A sub-agent's events: its first snapshot, a token, and a
	// grandchild's token within the child's subagent event.
	child, childRun, childMsg := ID(30), ID(31), ID(32)
	add(thread.Event{Type: thread.KindSubagent, CallID: "d1", Sub: &thread.SubEvent{ThreadID: child, RunID: childRun,
		Event: thread.Event{Type: thread.KindSnapshot, RunID: childRun, Sequence: 1, Snapshot: &snaps[3]}}})
	add(thread.Event{Type: thread.KindSubagent, CallID: "d1", Sub: &thread.SubEvent{ThreadID: child, RunID: childRun,
		Event: thread.Event{Type: thread.KindToken, RunID: childRun, Sequence: 2, MessageID: childMsg, Text: "a <b>"}}})
	add(thread.Event{Type: thread.KindSubagent, CallID: "d1", Sub: &thread.SubEvent{ThreadID: child, RunID: childRun,
		Event: thread.Event{Type: thread.KindSubagent, RunID: childRun, Sequence: 3, MessageID: childMsg, CallID: "e1",
			Sub: &thread.SubEvent{ThreadID: ID(33), RunID: ID(34), Event: thread.Event{Type: thread.KindToken, RunID: ID(34), Sequence: 7,
				MessageID: ID(35), Text: "deep"}}}}})
	return evs
}

// ThreadSnapshots are the snapshots with and without an active run.
func ThreadSnapshots() []thread.ThreadSnapshot {
	var out []thread.ThreadSnapshot
	for _, snap := range Snapshots() {
		out = append(out, thread.ThreadSnapshot{Snapshot: snap},
			thread.ThreadSnapshot{Snapshot: snap, ActiveRun: &thread.ActiveRun{RunID: ID(501), MessageID: ID(500), Sequence: 42}})
	}
	return out
}

// Threads are a bare thread and a full one.
func Threads() []thread.Thread {
	title := "a <title> & ✓"
	return []thread.Thread{
		{ID: ID(10), Caller: "c", CreatedAt: Times[0], UpdatedAt: Times[2]},
		{ID: ID(11), Caller: "c", Title: &title, Metadata: json.RawMessage(`{"k":"v","n":[1,2]}`), HeadID: ID(12), LastSeq: 9,
			CreatedAt: Times[2], UpdatedAt: Times[1]},
		{ID: ID(13), Caller: "c", CreatedAt: Times[2], UpdatedAt: Times[2], Depth: 1,
			Parent: &thread.ThreadParent{ThreadID: ID(11), RunID: ID(14), MessageID: ID(15), ToolCallID: "call <1>"}},
	}
}

// Runs are a running run and a failed one with every field.
func Runs() []thread.Run {
	temp := 0.25
	fin := Times[0].Add(1234567 * time.Microsecond).In(time.FixedZone("y", -7200))
	return []thread.Run{
		{ID: ID(20), ThreadID: ID(10), Status: thread.RunRunning, ParentID: ID(21), MessageID: ID(22), Model: "demo",
			CreatedAt: Times[2], LastSequence: 3},
		{ID: ID(23), ThreadID: ID(10), Status: thread.RunFailed, UserMessageID: ID(24), ParentID: ID(24), MessageID: ID(25), Model: "m <x>",
			Config: thread.RunConfig{Model: "m <x>", Temperature: &temp, System: "be <brief>", Custom: json.RawMessage(`{"a":1}`), MaxSteps: 4,
				Tools: []thread.RunTool{{Name: "calculator"}, {Name: "ask", Description: "asks", Parameters: json.RawMessage(`{"type":"object"}`), Client: true}}},
			Usage: &thread.Usage{PromptTokens: 10, CompletionTokens: 20}, Error: &thread.RunError{Code: errcode.Unavailable, Message: "down & <out>"},
			CreatedAt: Times[0], FinishedAt: &fin, LastSequence: 99},
	}
}

// Trace is a failed run's trace: a span of every operation and state.
func Trace() thread.Trace {
	t0 := time.Date(2026, 11, 23, 1, 2, 3, 456789000, time.UTC)
	t1 := t0.Add(1500 * time.Millisecond)
	parent := "run"
	in, out := 12, 34
	return thread.Trace{RunID: "r <1>", ThreadID: "t", Status: thread.RunFailed, Spans: []thread.Span{
		{SpanID: "run", Name: "invoke_agent demo", Operation: thread.OpInvokeAgent, Start: t0, End: &t1, Status: thread.SpanError,
			Error: &thread.SpanFailure{Type: "model_error", Message: "down & <out>"}, Model: "demo", FirstSeq: 1, LastSeq: 9},
		{SpanID: "s1", ParentID: &parent, Name: "chat demo", Operation: thread.OpChat, Start: t0, Status: thread.SpanRunning,
			Model: "demo", InputTokens: &in, OutputTokens: &out, FinishReason: "tool-calls", FirstSeq: 2, LastSeq: 5},
		{SpanID: "c1", ParentID: &parent, Name: "execute_tool calculator", Operation: thread.OpExecuteTool, Start: t1, End: &t1,
			Status: thread.SpanOK, ToolName: "calculator", ToolCallID: "c1", FirstSeq: 6, LastSeq: 7},
	}}
}
