package api

import (
	"encoding/json"
	"strconv"

	"github.com/google/uuid"

	"github.com/threadline/threadline/api/wire"
	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/thread"
)

// uiChunk is one chunk of the Vercel AI SDK's UI message stream. Only the
// fields the SDK's chunk schemas allow are ever set (older clients parse
// the chunks with strict schemas and refuse unknown fields), and a field
// the schema requires is never left empty: the encoder sets it.
type uiChunk struct {
	Type             string          `json:"type"`
	ID               string          `json:"id,omitempty"`
	Delta            string          `json:"delta,omitempty"`
	MessageID        string          `json:"messageId,omitempty"`
	MessageMetadata  json.RawMessage `json:"messageMetadata,omitempty"`
	ErrorText        string          `json:"errorText,omitempty"`
	ToolCallID       string          `json:"toolCallId,omitempty"`
	ToolName         string          `json:"toolName,omitempty"`
	InputTextDelta   string          `json:"inputTextDelta,omitempty"`
	Input            json.RawMessage `json:"input,omitempty"`
	Output           json.RawMessage `json:"output,omitempty"`
	ProviderExecuted bool            `json:"providerExecuted,omitempty"`
	Dynamic          bool            `json:"dynamic,omitempty"`
	Data             json.RawMessage `json:"data,omitempty"`
}

// uiStartMeta is the start chunk's messageMetadata.
type uiStartMeta struct {
	ThreadID uuid.UUID `json:"threadId"`
	RunID    uuid.UUID `json:"runId"`
}

// uiErrorMeta is the message-metadata chunk sent before an error chunk.
type uiErrorMeta struct {
	ThreadID uuid.UUID     `json:"threadId"`
	RunID    uuid.UUID     `json:"runId"`
	Error    wire.RunError `json:"error"`
}

// uiFinishMeta is the finish chunk's messageMetadata: the run as it ended.
type uiFinishMeta struct {
	ThreadID uuid.UUID        `json:"threadId"`
	RunID    uuid.UUID        `json:"runId"`
	Status   thread.RunStatus `json:"status"`
	Model    string           `json:"model,omitempty"`
	Usage    *uiUsage         `json:"usage,omitempty"`
	Error    *wire.RunError   `json:"error,omitempty"`
}

type uiUsage struct {
	PromptTokens     int `json:"promptTokens"`
	CompletionTokens int `json:"completionTokens"`
}

// finishMeta is the finish chunk's messageMetadata for run r (read after
// its end, so its usage and model are final) with the final status.
func finishMeta(r *thread.Run, status thread.RunStatus) json.RawMessage {
	m := uiFinishMeta{ThreadID: r.ThreadID, RunID: r.ID, Status: status, Model: r.Model, Error: wire.NewRunError(r.Error)}
	if u := r.Usage; u != nil {
		m.Usage = &uiUsage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens}
	}
	b, _ := json.Marshal(m) // plain fields: cannot fail
	return b
}

// uiCall is a tool call whose input is streaming.
type uiCall struct {
	id, name string
	args     []byte
}

// uiEncoder turns one run's native events, in sequence order from the
// first, into UI message stream chunks. It keeps what a UI message needs
// that the native events leave implicit: which text or reasoning part is
// open (and its id), whether a step is open, and the tool calls whose
// input is still streaming. Part ids are made of the sequence of the event
// that opened the part, so a replay of the same log names the same parts.
type uiEncoder struct {
	run     *thread.Run
	started bool
	step    bool   // a step is open
	open    string // the open part's kind: thread.KindToken, thread.KindReasoning or ""
	partID  string
	calls   []uiCall // tool calls whose input streams, in the order they opened
	done    bool     // the final snapshot came
	status  thread.RunStatus
	out     []uiChunk // add's result, reused
}

// add returns the chunks of one event, valid until the next add.
func (e *uiEncoder) add(ev *thread.Event) []uiChunk {
	e.out = e.encode(e.out[:0], ev)
	return e.out
}

// encode appends the chunks of one event to out.
func (e *uiEncoder) encode(out []uiChunk, ev *thread.Event) []uiChunk {
	if !e.started {
		e.started = true
		meta, _ := json.Marshal(uiStartMeta{ThreadID: e.run.ThreadID, RunID: e.run.ID})
		out = append(out, uiChunk{Type: "start", MessageID: e.run.MessageID.String(), MessageMetadata: meta})
	}
	if ev.Type != thread.KindToolCall {
		out = e.inputsDone(out)
	}
	switch ev.Type {
	case thread.KindToken, thread.KindReasoning:
		out = e.text(out, ev)
	case thread.KindToolCall:
		out = e.toolCall(out, ev)
	case thread.KindToolResult:
		out = e.stepOpen(e.closePart(out))
		c := uiChunk{Type: "tool-output-available", ToolCallID: ev.CallID, Output: thread.OrNull(ev.Data), ProviderExecuted: true, Dynamic: true}
		if ev.IsError {
			c = uiChunk{Type: "tool-output-error", ToolCallID: ev.CallID, ErrorText: errorText(ev.Data), ProviderExecuted: true, Dynamic: true}
		}
		out = append(out, c)
	case thread.KindData:
		out = e.stepOpen(e.closePart(out))
		out = append(out, uiChunk{Type: "data-" + ev.Name, ID: dataPartID(ev.Data), Data: thread.OrNull(ev.Data)})
	case thread.KindError:
		// The SDK's chat stops reading at an error chunk: the error's code
		// goes first, as message metadata, so the message keeps it.
		meta, _ := json.Marshal(uiErrorMeta{ThreadID: e.run.ThreadID, RunID: e.run.ID, Error: wire.RunError{Code: ev.Code, Message: ev.Text}})
		out = append(e.closePart(out), uiChunk{Type: "message-metadata", MessageMetadata: meta},
			uiChunk{Type: "error", ErrorText: orText(ev.Text, string(ev.Code))})
	case thread.KindSnapshot:
		out = e.snapshot(out, ev)
	}
	return out
}

// snapshot ends the step an interim snapshot closes (the engine logs one
// after each step of an agent run), or everything at the final one.
func (e *uiEncoder) snapshot(out []uiChunk, ev *thread.Event) []uiChunk {
	if ev.Sequence == 1 && !ev.Final() {
		return out // the run's first event: the message has just started
	}
	out = e.closePart(out)
	if e.step {
		e.step = false
		out = append(out, uiChunk{Type: "finish-step"})
	}
	if ev.Final() {
		e.done = true
		e.status = ev.Snapshot.RunStatus
	}
	return out
}

// text adds a token or reasoning piece, opening its part when the open
// part is of the other kind or none.
func (e *uiEncoder) text(out []uiChunk, ev *thread.Event) []uiChunk {
	if ev.Text == "" {
		return out
	}
	start, delta, prefix := "text-start", "text-delta", "t"
	if ev.Type == thread.KindReasoning {
		start, delta, prefix = "reasoning-start", "reasoning-delta", "r"
	}
	if e.open != ev.Type {
		out = e.stepOpen(e.closePart(out))
		e.open = ev.Type
		e.partID = prefix + strconv.FormatInt(ev.Sequence, 10)
		out = append(out, uiChunk{Type: start, ID: e.partID})
	}
	return append(out, uiChunk{Type: delta, ID: e.partID, Delta: ev.Text})
}

// toolCall adds a piece of a call's input; the first piece opens the call.
// A piece for a call whose input was already complete is dropped: the SDK
// has no chunk for it.
func (e *uiEncoder) toolCall(out []uiChunk, ev *thread.Event) []uiChunk {
	for i := range e.calls {
		if c := &e.calls[i]; c.id == ev.CallID {
			c.args = append(c.args, ev.Text...)
			if ev.Text == "" {
				return out
			}
			return append(out, uiChunk{Type: "tool-input-delta", ToolCallID: ev.CallID, InputTextDelta: ev.Text})
		}
	}
	out = e.stepOpen(e.closePart(out))
	e.calls = append(e.calls, uiCall{id: ev.CallID, name: ev.Name, args: []byte(ev.Text)})
	out = append(out, uiChunk{Type: "tool-input-start", ToolCallID: ev.CallID, ToolName: ev.Name, ProviderExecuted: true, Dynamic: true})
	if ev.Text != "" {
		out = append(out, uiChunk{Type: "tool-input-delta", ToolCallID: ev.CallID, InputTextDelta: ev.Text})
	}
	return out
}

// inputsDone makes the input of every streaming call available: any event
// but a further piece of arguments ends them.
func (e *uiEncoder) inputsDone(out []uiChunk) []uiChunk {
	for _, c := range e.calls {
		out = append(out, uiChunk{Type: "tool-input-available", ToolCallID: c.id, ToolName: c.name,
			Input: thread.OrNull(checkpoint.ArgsObject(string(c.args))), ProviderExecuted: true, Dynamic: true})
	}
	e.calls = e.calls[:0]
	return out
}

// stepOpen opens a step unless one is open.
func (e *uiEncoder) stepOpen(out []uiChunk) []uiChunk {
	if e.step {
		return out
	}
	e.step = true
	return append(out, uiChunk{Type: "start-step"})
}

// closePart ends the open text or reasoning part.
func (e *uiEncoder) closePart(out []uiChunk) []uiChunk {
	switch e.open {
	case thread.KindToken:
		out = append(out, uiChunk{Type: "text-end", ID: e.partID})
	case thread.KindReasoning:
		out = append(out, uiChunk{Type: "reasoning-end", ID: e.partID})
	}
	e.open = ""
	return out
}

// dataPartID is the id of a data part: the "id" member of its value, so
// a value sent again with the same id replaces its part (as the native
// fold does); "" (append) for a value without one.
func dataPartID(v json.RawMessage) string {
	if len(v) == 0 || v[0] != '{' {
		return ""
	}
	var o struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(v, &o) != nil || len(o.ID) == 0 || string(o.ID) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(o.ID, &s) == nil {
		return s
	}
	return string(o.ID)
}

// errorText is a failed tool's result as text: a JSON string as it is,
// anything else as its JSON.
func errorText(v json.RawMessage) string {
	var s string
	if json.Unmarshal(v, &s) == nil && s != "" {
		return s
	}
	return orText(string(v), "tool failed")
}

func orText(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// appendSSE appends chunk c as one server-sent event whose id is the
// native sequence of the event it encodes (none for seq 0).
func appendSSE(b []byte, seq int64, c *uiChunk) ([]byte, error) {
	if seq > 0 {
		b = append(b, "id: "...)
		b = strconv.AppendInt(b, seq, 10)
		b = append(b, '\n')
	}
	b = append(b, "data: "...)
	if c.Type == "text-delta" || c.Type == "reasoning-delta" {
		// Deltas are most of a stream: written directly, byte for byte
		// what json.Marshal writes for them (tested).
		b = append(b, `{"type":"`...)
		b = append(b, c.Type...)
		b = append(b, `","id":`...)
		b = wire.AppendJSONString(b, c.ID)
		b = append(b, `,"delta":`...)
		b = wire.AppendJSONString(b, c.Delta)
		b = append(b, '}')
	} else {
		j, err := json.Marshal(c)
		if err != nil {
			return b, err
		}
		b = append(b, j...)
	}
	return append(b, "\n\n"...), nil
}
