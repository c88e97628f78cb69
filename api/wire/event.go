package wire

import (
	"encoding/json"
	"strconv"

	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/thread"
)

// The stream events (docs/api.md, "Events"). A new event kind is written
// here (AppendEvent), declared in thread (the Kind constant, the Record and
// Event fields) and decoded by Event in types.go.

// AppendEventLine appends ev's NDJSON line: its JSON and a newline, byte
// for byte what json.Encoder writes for its shape.
func AppendEventLine(b []byte, ev *thread.Event) []byte {
	b = AppendEvent(b, ev)
	return append(b, '\n')
}

// AppendEvent appends ev in its API.md shape.
func AppendEvent(b []byte, ev *thread.Event) []byte {
	switch ev.Type {
	case thread.KindToken, thread.KindReasoning:
		b = appendMessageHead(b, ev)
		b = append(b, `,"text":`...)
		b = AppendJSONString(b, ev.Text)
		return append(b, '}')
	case thread.KindError:
		q, _ := json.Marshal(struct { // strings: always marshals
			eventHead
			Error string       `json:"error"`
			Code  errcode.Code `json:"code"`
		}{head(ev), ev.Text, ev.Code})
		return append(b, q...)
	case thread.KindToolCall, thread.KindToolResult, thread.KindData:
		q, _ := json.Marshal(agentShape(ev)) // strings and valid JSON values: always marshals
		return append(b, q...)
	case thread.KindSubagent:
		return appendSubagentEvent(b, ev)
	}
	return appendSnapshotEvent(b, ev)
}

// appendMessageHead appends the opening of an event of a message: its
// type, run, sequence and message, without the closing brace.
func appendMessageHead(b []byte, ev *thread.Event) []byte {
	b = append(b, `{"type":`...)
	b = AppendJSONString(b, ev.Type)
	b = append(b, `,"run_id":"`...)
	b = AppendUUID(b, ev.RunID)
	b = append(b, `","sequence":`...)
	b = strconv.AppendInt(b, ev.Sequence, 10)
	b = append(b, `,"message_id":"`...)
	b = AppendUUID(b, ev.MessageID)
	return append(b, '"')
}

// eventHead is what every stream event begins with; messageHead adds the
// message a token or an agent event belongs to. Embedded first, their
// fields open each event's JSON in this order.
type eventHead struct {
	Type     string `json:"type"`
	RunID    string `json:"run_id"`
	Sequence int64  `json:"sequence"`
}

type messageHead struct {
	eventHead
	MessageID string `json:"message_id"`
}

func head(ev *thread.Event) eventHead { return eventHead{ev.Type, ev.RunID.String(), ev.Sequence} }

func msgHead(ev *thread.Event) messageHead { return messageHead{head(ev), ev.MessageID.String()} }

// agentShape is the value encoding/json writes for a tool or data event.
func agentShape(ev *thread.Event) any {
	switch ev.Type {
	case thread.KindToolCall:
		return struct {
			messageHead
			CallID   string `json:"tool_call_id"`
			ToolName string `json:"tool_name"`
			ArgsText string `json:"args_text"`
		}{msgHead(ev), ev.CallID, ev.Name, ev.Text}
	case thread.KindToolResult:
		return struct {
			messageHead
			CallID  string          `json:"tool_call_id"`
			Result  json.RawMessage `json:"result"`
			IsError bool            `json:"is_error"`
		}{msgHead(ev), ev.CallID, thread.OrNull(ev.Data), ev.IsError}
	}
	return struct {
		messageHead
		Name string          `json:"name"`
		Data json.RawMessage `json:"data"`
	}{msgHead(ev), ev.Name, thread.OrNull(ev.Data)}
}

// appendSnapshotEvent appends a snapshot event. It holds the whole tree:
// written by hand rather than by encoding/json, which would re-validate
// and copy every nested message's output once per level.
func appendSnapshotEvent(b []byte, ev *thread.Event) []byte {
	cp, path, repo := ev.Snapshot.Export()
	b = grow(b, treeSize(path, repo))
	b = append(b, `{"type":`...)
	b = AppendJSONString(b, ev.Type)
	b = append(b, `,"run_id":"`...)
	b = AppendUUID(b, ev.RunID)
	b = append(b, `","sequence":`...)
	b = strconv.AppendInt(b, ev.Sequence, 10)
	b = append(b, `,"thread_id":"`...)
	b = AppendUUID(b, ev.Snapshot.ThreadID)
	b = append(b, `","checkpoint_id":`...)
	b = AppendJSONUUID(b, cp)
	b = append(b, `,"run_status":`...)
	b = AppendJSONString(b, string(ev.Snapshot.RunStatus))
	b = appendTree(b, path, &repo)
	return append(b, '}')
}

// AppendThreadSnapshot appends GET /threads/{id}/messages.
func AppendThreadSnapshot(b []byte, s *thread.ThreadSnapshot) []byte {
	cp, path, repo := s.Export()
	b = grow(b, treeSize(path, repo))
	b = append(b, `{"thread_id":"`...)
	b = AppendUUID(b, s.ThreadID)
	b = append(b, `","checkpoint_id":`...)
	b = AppendJSONUUID(b, cp)
	b = appendTree(b, path, &repo)
	b = append(b, `,"active_run":`...)
	if a := s.ActiveRun; a == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, `{"run_id":"`...)
		b = AppendUUID(b, a.RunID)
		b = append(b, `","message_id":"`...)
		b = AppendUUID(b, a.MessageID)
		b = append(b, `","sequence":`...)
		b = strconv.AppendInt(b, a.Sequence, 10)
		b = append(b, '}')
	}
	return append(b, '}')
}

// grow makes room for n more bytes in one allocation.
func grow(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b
	}
	nb := make([]byte, len(b), len(b)+n)
	copy(nb, b)
	return nb
}

// treeSize guesses the encoded size of a path and repository, so that
// one allocation holds them.
func treeSize(path []checkpoint.Message, repo checkpoint.Repository) int {
	size := 512
	for i := range repo.Messages {
		for _, p := range repo.Messages[i].Message.Content {
			size += 400 + len(p.Text) + len(p.Image) + len(p.ArgsText) + len(p.Args) + len(p.Result) + len(p.Data)
		}
	}
	return size + size*len(path)/max(len(repo.Messages), 1)
}

// appendTree appends the "messages" and "messageRepository" members.
func appendTree(b []byte, path []checkpoint.Message, repo *checkpoint.Repository) []byte {
	b = append(b, `,"messages":`...)
	b = AppendMessages(b, path)
	b = append(b, `,"messageRepository":`...)
	return AppendRepository(b, repo)
}

// appendSubagentEvent appends a subagent event: the parent run's head,
// the delegate call, the child thread and run, and the child's own event.
func appendSubagentEvent(b []byte, ev *thread.Event) []byte {
	b = appendMessageHead(b, ev)
	b = append(b, `,"tool_call_id":`...)
	b = AppendJSONString(b, ev.CallID)
	if sub := ev.Sub; sub != nil {
		b = append(b, `,"thread_id":"`...)
		b = AppendUUID(b, sub.ThreadID)
		b = append(b, `","child_run_id":"`...)
		b = AppendUUID(b, sub.RunID)
		b = append(b, `","event":`...)
		if sub.Event.Type == thread.KindSnapshot && sub.Event.Snapshot == nil {
			b = append(b, "null"...) // not rebuilt: never sent by the engine
		} else {
			b = AppendEvent(b, &sub.Event)
		}
	}
	return append(b, '}')
}
