package thread

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/threadline/threadline/checkpoint"
)

// turn folds a run's records, in order, into its assistant message's
// parts: consecutive tokens make one text part and consecutive reasoning
// one reasoning part; the first tool_call record of a call id opens a
// tool-call part and the later ones add to its arguments; a tool_result
// answers its call's part; a data record adds a data part, or replaces
// the data part of the same name whose value has the same "id" (a plan
// sent again as its tasks tick). Snapshots and errors add nothing.
type turn struct {
	parts []checkpoint.Part
	open  string          // the type of the part text holds: text, reasoning or ""
	text  strings.Builder // the open part's text
	calls map[string]int  // tool call id -> its part's index
}

// add folds one record in.
func (t *turn) add(rec *Record) {
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
			t.parts[i].Result, t.parts[i].IsError = orNull(rec.Data), rec.IsError
		}
	case KindData:
		t.close()
		t.data(rec.Name, rec.Data)
	}
}

func (t *turn) write(kind, s string) {
	if t.open != kind {
		t.close()
		t.open = kind
	}
	t.text.WriteString(s)
}

// close ends the open text or reasoning part.
func (t *turn) close() {
	if t.open == "" {
		return
	}
	t.parts = append(t.parts, checkpoint.Part{Type: t.open, Text: t.text.String()})
	t.open = ""
	t.text.Reset()
}

func (t *turn) data(name string, v json.RawMessage) {
	if id := dataID(v); id != nil {
		for i := range t.parts {
			p := &t.parts[i]
			if p.Type == checkpoint.PartData && p.Name == name && bytes.Equal(dataID(p.Data), id) {
				p.Data = v
				return
			}
		}
	}
	t.parts = append(t.parts, checkpoint.Part{Type: checkpoint.PartData, Name: name, Data: orNull(v)})
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

// content returns the parts so far, as a new slice: a message always has
// at least one part (an empty text part before anything streamed), and a
// tool call's args are its arguments parsed (see checkpoint.ArgsObject).
func (t *turn) content() []checkpoint.Part {
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

// unanswered returns the ids of the tool calls that have no result, in
// the order they opened.
func (t *turn) unanswered() []string {
	var ids []string
	for _, p := range t.parts {
		if p.Type == checkpoint.PartToolCall && p.Result == nil {
			ids = append(ids, p.ToolCallID)
		}
	}
	return ids
}

// hasCall reports whether a tool call of id is open in the turn.
func (t *turn) hasCall(id string) bool {
	_, ok := t.calls[id]
	return ok
}
