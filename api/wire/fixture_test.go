package wire_test

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/errcode"
)

// The fixture below is the input of the golden files in testdata: every
// event kind, every part type and the awkward strings, built from fixed
// ids and times so that the bytes written for them never change. The
// golden files were written by the encoders as they were before the wire
// moved to this package (MarshalJSON methods on the domain types).

// fid is the fixture's n-th id.
func fid(n int) uuid.UUID { return uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "wire-%d", n)) }

var fixtureTexts = []string{"", "plain", `quote " and \ backslash`, "<b>&amp;</b>", "tab\tnew\nline\r\x00\x1f\b\f", "\u2028\u2029",
	"héllo ✓ 😀", "bad \xff\xfe utf-8", "del \x7f"}

var fixtureTimes = []time.Time{
	time.Date(2026, 11, 23, 1, 2, 3, 456789000, time.UTC),
	time.Date(2026, 11, 23, 1, 2, 3, 0, time.UTC),
	time.Date(2026, 1, 2, 3, 4, 5, 100000000, time.FixedZone("x", 3600+1800)),
}

// fixtureParts is one part of every type, and a few in odd states.
func fixtureParts(text string) []checkpoint.Part {
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

// fixtureTree is a thread of a user/assistant chain with branches, and a
// running reply on its last message.
func fixtureTree() (*checkpoint.Tree, *checkpoint.Node, []checkpoint.Node) {
	tid := fid(0)
	var nodes []checkpoint.Node
	parent := uuid.Nil
	for i, text := range fixtureTexts {
		n := checkpoint.Node{ID: fid(100 + i), ThreadID: tid, ParentID: parent, Seq: int64(len(nodes) + 1), Role: checkpoint.RoleUser,
			Content: []checkpoint.Part{{Type: "text", Text: text}}, CreatedAt: fixtureTimes[i%len(fixtureTimes)]}
		switch i % 4 {
		case 1:
			n.Role, n.RunID = checkpoint.RoleAssistant, fid(200+i)
			n.Status = &checkpoint.Status{Type: "incomplete", Reason: "error", Error: text}
			n.Content = fixtureParts(text)
		case 2:
			n.Content = append(n.Content, checkpoint.Part{Type: "image", Image: "data:image/png;base64,iVBOR<>&"})
			n.Attachments = []checkpoint.Attachment{
				{ID: fid(300 + i).String(), Type: "image", Name: "a<b>" + text, ContentType: "image/png", Size: 3, URL: "/api/v1/attachments/" + fid(300+i).String(),
					Content: []checkpoint.Part{{Type: "image", Image: "x"}}},
				{ID: fid(400 + i).String(), Type: "file", Name: "z", ContentType: "application/zip", Content: []checkpoint.Part{}},
			}
			n.Attachments[0].Status.Type = "complete"
			n.Attachments[1].Status.Type = "complete"
		case 3:
			n.Role, n.RunID = checkpoint.RoleAssistant, fid(200+i)
			n.Status = &checkpoint.Status{Type: "complete", Reason: "stop"}
			n.Content = nil
		}
		nodes = append(nodes, n)
		if i == 4 {
			// a sibling of the fifth message: a branch
			b := n
			b.ID, b.Seq, b.Content, b.Attachments = fid(150), int64(len(nodes)+1), []checkpoint.Part{{Type: "text", Text: "edited " + text}}, []checkpoint.Attachment{}
			nodes = append(nodes, b)
		}
		parent = n.ID
	}
	tree, err := checkpoint.NewTree(nodes)
	if err != nil {
		panic(err)
	}
	running := &checkpoint.Node{ID: fid(500), ThreadID: tid, ParentID: parent, Role: checkpoint.RoleAssistant, Running: true,
		RunID: fid(501), Content: fixtureParts("so far"), CreatedAt: fixtureTimes[0]}
	return tree, running, nodes
}

// fixtureSnapshots are a running run's, a finished run's on a branch, and
// an empty thread's.
func fixtureSnapshots() []thread.Snapshot {
	tree, running, nodes := fixtureTree()
	tid := fid(0)
	return []thread.Snapshot{
		{ThreadID: tid, RunStatus: thread.RunRunning, Tree: tree, Running: running, Head: running.ID},
		{ThreadID: tid, RunStatus: thread.RunSucceeded, Tree: tree, Head: nodes[len(nodes)-1].ID},
		{ThreadID: tid, RunStatus: thread.RunFailed, Tree: tree, Head: fid(150)},
		{ThreadID: tid, RunStatus: thread.RunSucceeded, Tree: &checkpoint.Tree{}},
	}
}

// fixtureEvents is every event kind.
func fixtureEvents() []thread.Event {
	run, msg := fid(1), fid(2)
	var evs []thread.Event
	add := func(ev thread.Event) {
		ev.RunID, ev.Sequence = run, int64(len(evs)+1)
		if ev.Type != thread.KindError && ev.Type != thread.KindSnapshot {
			ev.MessageID = msg
		}
		evs = append(evs, ev)
	}
	for _, text := range fixtureTexts {
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
	snaps := fixtureSnapshots()
	for i := range snaps {
		add(thread.Event{Type: thread.KindSnapshot, Snapshot: &snaps[i]})
	}
	return evs
}

// fixtureThreadSnapshots are the snapshots with and without an active run.
func fixtureThreadSnapshots() []thread.ThreadSnapshot {
	var out []thread.ThreadSnapshot
	for _, snap := range fixtureSnapshots() {
		out = append(out, thread.ThreadSnapshot{Snapshot: snap},
			thread.ThreadSnapshot{Snapshot: snap, ActiveRun: &thread.ActiveRun{RunID: fid(501), MessageID: fid(500), Sequence: 42}})
	}
	return out
}

func fixtureThreads() []thread.Thread {
	title := "a <title> & ✓"
	return []thread.Thread{
		{ID: fid(10), Caller: "c", CreatedAt: fixtureTimes[0], UpdatedAt: fixtureTimes[2]},
		{ID: fid(11), Caller: "c", Title: &title, Metadata: json.RawMessage(`{"k":"v","n":[1,2]}`), HeadID: fid(12), LastSeq: 9,
			CreatedAt: fixtureTimes[2], UpdatedAt: fixtureTimes[1]},
	}
}

func fixtureRuns() []thread.Run {
	temp := 0.25
	fin := fixtureTimes[0].Add(1234567 * time.Microsecond).In(time.FixedZone("y", -7200))
	return []thread.Run{
		{ID: fid(20), ThreadID: fid(10), Status: thread.RunRunning, ParentID: fid(21), MessageID: fid(22), Model: "demo",
			CreatedAt: fixtureTimes[2], LastSequence: 3},
		{ID: fid(23), ThreadID: fid(10), Status: thread.RunFailed, UserMessageID: fid(24), ParentID: fid(24), MessageID: fid(25), Model: "m <x>",
			Config: thread.RunConfig{Model: "m <x>", Temperature: &temp, System: "be <brief>", Custom: json.RawMessage(`{"a":1}`), MaxSteps: 4,
				Tools: []thread.RunTool{{Name: "calculator"}, {Name: "ask", Description: "asks", Parameters: json.RawMessage(`{"type":"object"}`), Client: true}}},
			Usage: &thread.Usage{PromptTokens: 10, CompletionTokens: 20}, Error: &thread.RunError{Code: errcode.Unavailable, Message: "down & <out>"},
			CreatedAt: fixtureTimes[0], FinishedAt: &fin, LastSequence: 99},
	}
}
