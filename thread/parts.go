package thread

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/threadline/threadline/checkpoint"
)

// Turn folds a run's records, in order, into its assistant message's
// parts: consecutive tokens make one text part and consecutive reasoning
// one reasoning part; the first tool_call record of a call id opens a
// tool-call part and the later ones add to its arguments; a tool_result
// answers its call's part; a data record adds a data part, or replaces
// the data part of the same name whose value has the same "id" (a plan
// sent again as its tasks tick); the first subagent record of a call
// names the call's child thread and run on its part. Snapshots and errors
// add nothing.
type Turn struct {
	parts []checkpoint.Part
	open  string          // the type of the part text holds: text, reasoning or ""
	text  strings.Builder // the open part's text
	calls map[string]int  // tool call id -> its part's index
}

// Add folds one record in.
func (t *Turn) Add(rec *Record) {
	switch rec.Kind {
	case KindToken:
		t.write(checkpoint.PartText, rec.Text)
	case KindReasoning:
		t.write(checkpoint.PartReasoning, rec.Text)
	case KindToolCall:
		if i, ok := t.calls[rec.CallID]; ok {
			t.parts[i].ArgsText += rec.Text
			return
		}
		t.close()
		if t.calls == nil {
			t.calls = map[string]int{}
		}
		t.calls[rec.CallID] = len(t.parts)
		t.parts = append(t.parts, checkpoint.Part{Type: checkpoint.PartToolCall, ToolCallID: rec.CallID, ToolName: rec.Name, ArgsText: rec.Text})
	case KindToolResult:
		if i, ok := t.calls[rec.CallID]; ok {
			t.parts[i].Result, t.parts[i].IsError = OrNull(rec.Data), rec.IsError
		}
	case KindData:
		t.close()
		t.data(rec.Name, rec.Data)
	case KindSubagent:
		if i, ok := t.calls[rec.CallID]; ok && rec.Sub != nil && t.parts[i].Subagent == nil {
			t.parts[i].Subagent = &checkpoint.SubagentRef{ThreadID: rec.Sub.ThreadID, RunID: rec.Sub.RunID}
		}
	}
}

func (t *Turn) write(kind, s string) {
	if t.open != kind {
		t.close()
		t.open = kind
	}
	t.text.WriteString(s)
}

// close ends the open text or reasoning part.
func (t *Turn) close() {
	if t.open == "" {
		return
	}
	t.parts = append(t.parts, checkpoint.Part{Type: t.open, Text: t.text.String()})
	t.open = ""
	t.text.Reset()
}

func (t *Turn) data(name string, v json.RawMessage) {
	if id := dataID(v); id != nil {
		for i := range t.parts {
			p := &t.parts[i]
			if p.Type == checkpoint.PartData && p.Name == name && bytes.Equal(dataID(p.Data), id) {
				p.Data = v
				return
			}
		}
	}
	t.parts = append(t.parts, checkpoint.Part{Type: checkpoint.PartData, Name: name, Data: OrNull(v)})
}

// dataID returns the "id" member of a JSON object, or nil.
func dataID(v json.RawMessage) json.RawMessage {
	if len(v) == 0 || v[0] != '{' {
		return nil
	}
	var o struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(v, &o) != nil {
		return nil
	}
	return o.ID
}

// Content returns the parts so far, as a new slice: a message always has
// at least one part (an empty text part before anything streamed), and a
// tool call's args are its arguments parsed (see checkpoint.ArgsObject).
func (t *Turn) Content() []checkpoint.Part {
	out := make([]checkpoint.Part, len(t.parts), len(t.parts)+1)
	copy(out, t.parts)
	for i := range out {
		if out[i].Type == checkpoint.PartToolCall {
			out[i].Args = checkpoint.ArgsObject(out[i].ArgsText)
		}
	}
	if t.open != "" {
		out = append(out, checkpoint.Part{Type: t.open, Text: t.text.String()})
	}
	if len(out) == 0 {
		out = append(out, checkpoint.Part{Type: checkpoint.PartText})
	}
	return out
}

// Unanswered returns the ids of the tool calls that have no result, in
// the order they opened.
func (t *Turn) Unanswered() []string {
	var ids []string
	for _, p := range t.parts {
		if p.Type == checkpoint.PartToolCall && p.Result == nil {
			ids = append(ids, p.ToolCallID)
		}
	}
	return ids
}

// HasCall reports whether a tool call of id is open in the turn.
func (t *Turn) HasCall(id string) bool {
	_, ok := t.calls[id]
	return ok
}

// Call returns the tool-call part of id as folded so far; false if no
// call of id is open in the turn.
func (t *Turn) Call(id string) (checkpoint.Part, bool) {
	i, ok := t.calls[id]
	if !ok {
		return checkpoint.Part{}, false
	}
	return t.parts[i], true
}

// Empty reports whether nothing is folded in yet.
func (t *Turn) Empty() bool { return len(t.parts) == 0 && t.open == "" }

// TurnFrom returns a fold that goes on from a stored turn's parts (a
// continuation adds to the turn it continues).
func TurnFrom(parts []checkpoint.Part) Turn {
	var t Turn
	for _, p := range parts {
		if p.Type == checkpoint.PartToolCall {
			if t.calls == nil {
				t.calls = map[string]int{}
			}
			t.calls[p.ToolCallID] = len(t.parts)
		}
		t.parts = append(t.parts, p)
	}
	return t
}

// OrNull is b, or the JSON null when b is empty.
func OrNull(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage(`null`)
	}
	return b
}
