package checkpoint_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/uuid"

	"github.com/threadline/threadline/checkpoint"
)

// agentParts are parts of every type an agent turn or a user message may
// hold, for the shape and round-trip tests.
func agentParts() []checkpoint.Part {
	return []checkpoint.Part{
		{Type: "reasoning", Text: "Let me <think>"},
		{Type: "text", Text: "I'll use the calculator."},
		{Type: "tool-call", ToolCallID: "c1", ToolName: "calculator", Args: json.RawMessage(`{"expression":"12*7"}`),
			ArgsText: `{"expression":"12*7"}`, Result: json.RawMessage(`84`)},
		{Type: "tool-call", ToolCallID: "c2", ToolName: "clock", ArgsText: `{"timez`},
		{Type: "tool-call", ToolCallID: "c3", ToolName: "wait", Args: json.RawMessage(`{}`), ArgsText: `{}`,
			Result: json.RawMessage(`"wait timed out"`), IsError: true},
		{Type: "data", Name: "plan", Data: json.RawMessage(`{"id":"p1","tasks":[{"id":"1","status":"done"}]}`)},
		{Type: "source", SourceType: "url", ID: "s1", URL: "https://example.com/a?b=1&c=2", Title: "Example"},
		{Type: "file", Filename: "notes.pdf", MimeType: "application/pdf", Data: json.RawMessage(`"/api/v1/attachments/x"`)},
	}
}

// TestPartShapes: each part type is written in exactly assistant-ui's
// shape, as API.md lists them.
func TestPartShapes(t *testing.T) {
	t.Parallel()
	want := []string{
		`{"type":"reasoning","text":"Let me \u003cthink\u003e"}`,
		`{"type":"text","text":"I'll use the calculator."}`,
		`{"type":"tool-call","toolCallId":"c1","toolName":"calculator","args":{"expression":"12*7"},"argsText":"{\"expression\":\"12*7\"}","result":84,"isError":false}`,
		`{"type":"tool-call","toolCallId":"c2","toolName":"clock","args":{},"argsText":"{\"timez"}`,
		`{"type":"tool-call","toolCallId":"c3","toolName":"wait","args":{},"argsText":"{}","result":"wait timed out","isError":true}`,
		`{"type":"data","name":"plan","data":{"id":"p1","tasks":[{"id":"1","status":"done"}]}}`,
		`{"type":"source","sourceType":"url","id":"s1","url":"https://example.com/a?b=1\u0026c=2","title":"Example"}`,
		`{"type":"file","filename":"notes.pdf","mimeType":"application/pdf","data":"/api/v1/attachments/x"}`,
	}
	for i, p := range agentParts() {
		got, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want[i] {
			t.Errorf("part %d:\n got %s\nwant %s", i, got, want[i])
		}
	}
	all := agentParts()
	want2, err := json.Marshal(all)
	if err != nil {
		t.Fatal(err)
	}
	if got := checkpoint.MarshalParts(all); !bytes.Equal(got, want2) {
		t.Errorf("MarshalParts =\n%s\nwant\n%s", got, want2)
	}
}

// TestPartsRoundTrip: what MarshalParts writes decodes to the same parts,
// and Compacted undoes a database's spacing of JSON values.
func TestPartsRoundTrip(t *testing.T) {
	t.Parallel()
	in := agentParts()
	in[3].Args = json.RawMessage(`{}`)
	var out []checkpoint.Part
	if err := json.Unmarshal(checkpoint.MarshalParts(in), &out); err != nil {
		t.Fatal(err)
	}
	if got, want := checkpoint.MarshalParts(out), checkpoint.MarshalParts(in); !bytes.Equal(got, want) {
		t.Errorf("round trip:\n got %s\nwant %s", got, want)
	}
	spaced := []checkpoint.Part{{Type: "tool-call", Args: json.RawMessage(`{"a": [1, 2]}`), Result: json.RawMessage(`{"x": 1}`)},
		{Type: "text", Text: "t"}}
	c := checkpoint.Compacted(spaced)
	if string(c[0].Args) != `{"a":[1,2]}` || string(c[0].Result) != `{"x":1}` {
		t.Errorf("Compacted: got args %s result %s, want them without spaces", c[0].Args, c[0].Result)
	}
	if string(spaced[0].Args) != `{"a": [1, 2]}` {
		t.Errorf("Compacted changed its argument: %s", spaced[0].Args)
	}
	plain := []checkpoint.Part{{Type: "text", Text: "t"}}
	if c := checkpoint.Compacted(plain); &c[0] != &plain[0] {
		t.Error("Compacted copied parts that have no JSON values")
	}
}

func TestArgsObject(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{`{"expression": "12*7"}`, `{"expression":"12*7"}`},
		{`{"expr`, `{}`},
		{``, `{}`},
		{`[1]`, `{}`},
		{`null`, `{}`},
	} {
		if got := checkpoint.ArgsObject(tc.in); string(got) != tc.want {
			t.Errorf("ArgsObject(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// TestContinuedTurnExport: a turn continued by appending (an assistant
// checkpoint under the waiting one) is one message on the wire: the
// first checkpoint's id and position, the last one's content and status,
// and the next user message under it by that id.
func TestContinuedTurnExport(t *testing.T) {
	t.Parallel()
	tid := uuid.New()
	u := checkpoint.Node{ID: uuid.New(), ThreadID: tid, Seq: 1, Role: checkpoint.RoleUser, Content: []checkpoint.Part{{Type: "text", Text: "q"}}}
	wait := checkpoint.Node{ID: uuid.New(), ThreadID: tid, ParentID: u.ID, Seq: 2, Role: checkpoint.RoleAssistant,
		Content: []checkpoint.Part{{Type: "tool-call", ToolCallID: "c1", ToolName: "ask"}}, Status: &checkpoint.Status{Type: "requires-action", Reason: "tool-calls"}}
	other := checkpoint.Node{ID: uuid.New(), ThreadID: tid, ParentID: u.ID, Seq: 3, Role: checkpoint.RoleAssistant,
		Content: []checkpoint.Part{{Type: "text", Text: "sibling"}}, Status: &checkpoint.Status{Type: "complete", Reason: "stop"}}
	cont := checkpoint.Node{ID: uuid.New(), ThreadID: tid, ParentID: wait.ID, Seq: 4, Role: checkpoint.RoleAssistant,
		Content: []checkpoint.Part{{Type: "tool-call", ToolCallID: "c1", ToolName: "ask", Result: json.RawMessage(`"yes"`)}, {Type: "text", Text: "done"}},
		Status:  &checkpoint.Status{Type: "complete", Reason: "stop"}}
	next := checkpoint.Node{ID: uuid.New(), ThreadID: tid, ParentID: cont.ID, Seq: 5, Role: checkpoint.RoleUser, Content: []checkpoint.Part{{Type: "text", Text: "more"}}}
	tree, err := checkpoint.NewTree([]checkpoint.Node{u, wait, other, cont, next})
	if err != nil {
		t.Fatal(err)
	}
	if tip := tree.TurnTip(wait.ID); tip == nil || tip.ID != cont.ID {
		t.Fatalf("TurnTip(wait): got %v, want the continuation", tip)
	}
	if got := tree.WireID(cont.ID); got != wait.ID {
		t.Fatalf("WireID(continuation): got %s, want the turn's id %s", got, wait.ID)
	}
	path, repo := tree.Export(wait.ID)
	if len(path) != 3 || path[1].ID != wait.ID || path[1].Content[1].Text != "done" || path[1].Status.Type != "complete" ||
		*path[1].Metadata.Custom.CheckpointID != cont.ID || path[2].ID != next.ID {
		t.Fatalf("path: got %+v, want the question, the turn as one message with the continuation's content, the next message", path)
	}
	if repo.HeadID == nil || *repo.HeadID != next.ID {
		t.Fatalf("headId: got %v, want %s", repo.HeadID, next.ID)
	}
	var ids []uuid.UUID
	for _, it := range repo.Messages {
		ids = append(ids, it.Message.ID)
		if it.Message.ID == next.ID && (it.ParentID == nil || *it.ParentID != wait.ID) {
			t.Fatalf("the next message's parentId: got %v, want the turn's id", it.ParentID)
		}
	}
	if len(ids) != 4 || ids[0] != u.ID || ids[1] != wait.ID || ids[2] != other.ID || ids[3] != next.ID {
		t.Fatalf("repository order: got %v, want question, turn, sibling, next", ids)
	}
	if got := checkpoint.CollapseTurns(tree.PathRefs(next.ID)); len(got) != 3 || got[1].ID != cont.ID {
		t.Fatalf("CollapseTurns: got %d nodes, want 3 with the continuation", len(got))
	}
}
