package thread

import (
	"encoding/json"
	"strconv"

	"github.com/google/uuid"
	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/checkpoint/errcode"
)

// Event is one NDJSON stream event of a run.
type Event struct {
	Type      string
	RunID     uuid.UUID
	Sequence  int64
	MessageID uuid.UUID    // every kind but snapshot and error
	Text      string       // token or reasoning text, error message, tool_call args_text piece
	Code      errcode.Code // error code
	Snapshot  *Snapshot    // snapshot
	CallID    string       // tool_call, tool_result
	Name      string       // tool_call: the tool; data: the part's name
	// Data is a tool_result's result or a data event's value.
	Data    json.RawMessage
	IsError bool // tool_result
}

// RecordEvent is the event of a record that is not a snapshot.
func RecordEvent(r *Run, rec *Record) Event {
	ev := Event{Type: rec.Kind, RunID: r.ID, Sequence: rec.Seq, Text: rec.Text, Code: rec.Code,
		CallID: rec.CallID, Name: rec.Name, Data: rec.Data, IsError: rec.IsError}
	if rec.Kind != KindError {
		ev.MessageID = r.MessageID
	}
	return ev
}

// Final reports whether the event is the last one of its run.
func (e *Event) Final() bool {
	return e.Type == KindSnapshot && e.Snapshot != nil && e.Snapshot.RunStatus.Done()
}

// Snapshot is the thread as a run shows it: the tree as it was at the event
// (immutable, so a replay rebuilds it exactly), the running message, if any,
// and the head. It is turned into JSON only when written, so in-process
// consumers pay nothing for it.
type Snapshot struct {
	ThreadID  uuid.UUID
	RunStatus RunStatus
	Tree      *checkpoint.Tree
	Running   *checkpoint.Node // the in-flight assistant message, not a checkpoint yet
	Head      uuid.UUID
}

// View returns the snapshot's tree including the running message.
func (s *Snapshot) View() *checkpoint.Tree {
	if s.Running == nil {
		return s.Tree
	}
	t, err := s.Tree.Append(*s.Running)
	if err != nil {
		return s.Tree
	}
	return t
}

// Export returns the path to the head and the repository.
func (s *Snapshot) Export() (checkpointID *uuid.UUID, path []checkpoint.Message, repo checkpoint.Repository) {
	path, repo = s.View().Export(s.Head)
	for i := len(path) - 1; i >= 0; i-- {
		if id := path[i].Metadata.Custom.CheckpointID; id != nil {
			checkpointID = id
			break
		}
	}
	return checkpointID, path, repo
}

// eventHead is what every stream event begins with; messageHead adds the
// message a token or an agent event belongs to. Embedded first, their
// fields open each event's JSON in this order.
type eventHead struct {
	Type     string    `json:"type"`
	RunID    uuid.UUID `json:"run_id"`
	Sequence int64     `json:"sequence"`
}

type messageHead struct {
	eventHead
	MessageID uuid.UUID `json:"message_id"`
}

func (e *Event) head() eventHead { return eventHead{e.Type, e.RunID, e.Sequence} }

func (e *Event) messageHead() messageHead { return messageHead{e.head(), e.MessageID} }

// MarshalJSON writes the API.md stream event.
func (e Event) MarshalJSON() ([]byte, error) {
	switch e.Type {
	case KindToken, KindReasoning:
		return json.Marshal(struct {
			messageHead
			Text string `json:"text"`
		}{e.messageHead(), e.Text})
	case KindError:
		return json.Marshal(struct {
			eventHead
			Error string       `json:"error"`
			Code  errcode.Code `json:"code"`
		}{e.head(), e.Text, e.Code})
	case KindToolCall, KindToolResult, KindData:
		return e.marshalAgent()
	}
	// A snapshot holds the whole tree: written by hand, byte for byte what
	// encoding/json would write (tested), which re-validates every nested
	// message's output.
	cp, path, repo := e.Snapshot.Export()
	b := make([]byte, 0, treeSize(path, repo))
	b = append(b, `{"type":`...)
	b = checkpoint.AppendJSONString(b, e.Type)
	b = append(b, `,"run_id":"`...)
	b = checkpoint.AppendUUID(b, e.RunID)
	b = append(b, `","sequence":`...)
	b = strconv.AppendInt(b, e.Sequence, 10)
	b = append(b, `,"thread_id":"`...)
	b = checkpoint.AppendUUID(b, e.Snapshot.ThreadID)
	b = append(b, `","checkpoint_id":`...)
	b = checkpoint.AppendJSONUUID(b, cp)
	b = append(b, `,"run_status":`...)
	b = checkpoint.AppendJSONString(b, string(e.Snapshot.RunStatus))
	b = appendTree(b, path, repo)
	return append(b, '}'), nil
}

// marshalAgent writes the tool and data events of agent runs.
func (e *Event) marshalAgent() ([]byte, error) {
	switch e.Type {
	case KindToolCall:
		return json.Marshal(struct {
			messageHead
			CallID   string `json:"tool_call_id"`
			ToolName string `json:"tool_name"`
			ArgsText string `json:"args_text"`
		}{e.messageHead(), e.CallID, e.Name, e.Text})
	case KindToolResult:
		return json.Marshal(struct {
			messageHead
			CallID  string          `json:"tool_call_id"`
			Result  json.RawMessage `json:"result"`
			IsError bool            `json:"is_error"`
		}{e.messageHead(), e.CallID, OrNull(e.Data), e.IsError})
	}
	return json.Marshal(struct {
		messageHead
		Name string          `json:"name"`
		Data json.RawMessage `json:"data"`
	}{e.messageHead(), e.Name, OrNull(e.Data)})
}

func OrNull(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage(`null`)
	}
	return b
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
func appendTree(b []byte, path []checkpoint.Message, repo checkpoint.Repository) []byte {
	b = append(b, `,"messages":`...)
	b = checkpoint.AppendMessages(b, path)
	b = append(b, `,"messageRepository":`...)
	return repo.AppendJSON(b)
}

// ThreadSnapshot is GET /threads/{id}/messages.
type ThreadSnapshot struct {
	Snapshot
	ActiveRun *ActiveRun
}

// ActiveRun names the running run and the last event folded into the
// snapshot's running message.
type ActiveRun struct {
	RunID     uuid.UUID `json:"run_id"`
	MessageID uuid.UUID `json:"message_id"`
	Sequence  int64     `json:"sequence"`
}

// MarshalJSON writes the API.md thread snapshot.
func (s *ThreadSnapshot) MarshalJSON() ([]byte, error) {
	cp, path, repo := s.Export()
	b := make([]byte, 0, treeSize(path, repo))
	b = append(b, `{"thread_id":"`...)
	b = checkpoint.AppendUUID(b, s.ThreadID)
	b = append(b, `","checkpoint_id":`...)
	b = checkpoint.AppendJSONUUID(b, cp)
	b = appendTree(b, path, repo)
	b = append(b, `,"active_run":`...)
	if a := s.ActiveRun; a == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, `{"run_id":"`...)
		b = checkpoint.AppendUUID(b, a.RunID)
		b = append(b, `","message_id":"`...)
		b = checkpoint.AppendUUID(b, a.MessageID)
		b = append(b, `","sequence":`...)
		b = strconv.AppendInt(b, a.Sequence, 10)
		b = append(b, '}')
	}
	return append(b, '}'), nil
}
