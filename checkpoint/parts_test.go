package checkpoint_test

import (
	"encoding/json"
	"testing"

	"github.com/google/uuid"

	"github.com/threadline/threadline/checkpoint"
)

// TestCompacted: Compacted undoes a database's spacing of JSON values,
// copying only when it must. (The parts' JSON shapes are tested in
// api/wire and store.)
func TestCompacted(t *testing.T) {
	t.Parallel()
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

// TestPartsEqual: parts are the same content when their type's fields
// are; an absent JSON value is its type's empty one.
func TestPartsEqual(t *testing.T) {
	t.Parallel()
	text := checkpoint.Part{Type: "text", Text: "a"}
	call := checkpoint.Part{Type: "tool-call", ToolCallID: "c", ToolName: "n", ArgsText: "{}"}
	for _, tc := range []struct {
		name string
		a, b []checkpoint.Part
		want bool
	}{
		{"same text", []checkpoint.Part{text}, []checkpoint.Part{text}, true},
		{"other text", []checkpoint.Part{text}, []checkpoint.Part{{Type: "text", Text: "b"}}, false},
		{"a field text does not hold", []checkpoint.Part{text}, []checkpoint.Part{{Type: "text", Text: "a", Name: "x"}}, true},
		{"other type", []checkpoint.Part{text}, []checkpoint.Part{{Type: "reasoning", Text: "a"}}, false},
		{"other length", []checkpoint.Part{text}, []checkpoint.Part{text, text}, false},
		{"args absent is {}", []checkpoint.Part{call}, []checkpoint.Part{{Type: "tool-call", ToolCallID: "c", ToolName: "n", ArgsText: "{}", Args: json.RawMessage(`{}`)}}, true},
		{"other result", []checkpoint.Part{{Type: "tool-call", Result: json.RawMessage(`1`)}}, []checkpoint.Part{{Type: "tool-call", Result: json.RawMessage(`2`)}}, false},
		{"data absent is null", []checkpoint.Part{{Type: "data", Name: "d"}}, []checkpoint.Part{{Type: "data", Name: "d", Data: json.RawMessage(`null`)}}, true},
		{"unknown type, every field", []checkpoint.Part{{Type: "x", URL: "u"}}, []checkpoint.Part{{Type: "x", URL: "v"}}, false},
		{"none", nil, []checkpoint.Part{}, true},
	} {
		if got := checkpoint.PartsEqual(tc.a, tc.b); got != tc.want {
			t.Errorf("%s: PartsEqual = %v, want %v", tc.name, got, tc.want)
		}
	}
}
