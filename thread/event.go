package thread

import (
	"encoding/json"

	"github.com/google/uuid"
	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/checkpoint/errcode"
)

// Event is one stream event of a run; api/wire writes it as JSON.
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
	// Sub is a subagent event's child: its thread and run, and its event
	// as a follower of the child run gets it. CallID names the delegate
	// call.
	Sub *SubEvent
}

// SubEvent is the child of a subagent event.
type SubEvent struct {
	ThreadID uuid.UUID
	RunID    uuid.UUID
	Event    Event
}

// RecordEvent is the event of a record that is not a snapshot. A
// subagent record whose child record is a snapshot gets its child event
// without the snapshot's tree (Event.Sub.Event.Snapshot nil): the caller
// fills it in.
func RecordEvent(r *Run, rec *Record) Event {
	ev := Event{Type: rec.Kind, RunID: r.ID, Sequence: rec.Seq, Text: rec.Text, Code: rec.Code,
		CallID: rec.CallID, Name: rec.Name, Data: rec.Data, IsError: rec.IsError}
	if rec.Kind != KindError {
		ev.MessageID = r.MessageID
	}
	if sub := rec.Sub; sub != nil {
		child := &Run{ID: sub.RunID, ThreadID: sub.ThreadID, MessageID: sub.MessageID}
		cev := Event{Type: sub.Record.Kind, RunID: sub.RunID, Sequence: sub.Record.Seq}
		if sub.Record.Kind != KindSnapshot {
			cev = RecordEvent(child, &sub.Record)
		}
		ev.Sub = &SubEvent{ThreadID: sub.ThreadID, RunID: sub.RunID, Event: cev}
	}
	return ev
}

// Final reports whether the event is the last one of its run.
func (e *Event) Final() bool {
	return e.Type == KindSnapshot && e.Snapshot != nil && e.Snapshot.RunStatus.Done()
}

// Snapshot is the thread as a run shows it: the tree as it was at the event
// (immutable, so a replay rebuilds it exactly), the running message, if any,
// and the head. It is turned into JSON only when written (api/wire), so
// in-process consumers pay nothing for it.
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

// ThreadSnapshot is GET /threads/{id}/messages.
type ThreadSnapshot struct {
	Snapshot
	ActiveRun *ActiveRun
}

// ActiveRun names the running run and the last event folded into the
// snapshot's running message.
type ActiveRun struct {
	RunID     uuid.UUID
	MessageID uuid.UUID
	Sequence  int64
}
