// Package runlog turns a run's log records into what they show: the
// running message, the checkpoint its reply becomes, and stream events.
// The run side (runner) and the follow side (follow) both read it.
package runlog

import (
	"github.com/google/uuid"
	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/thread"
)

// IsContinuation reports whether r continues a turn: its parent is the
// turn's assistant checkpoint.
func IsContinuation(r *thread.Run, tree *checkpoint.Tree) bool {
	p := tree.Get(r.ParentID)
	return p != nil && p.Role == checkpoint.RoleAssistant
}

// CheckpointOf is the id of the checkpoint r's reply becomes: its message
// id, or for a continuation (whose message id is the turn's) the run's id.
func CheckpointOf(r *thread.Run, tree *checkpoint.Tree) uuid.UUID {
	if IsContinuation(r, tree) {
		return r.ID
	}
	return r.MessageID
}

// Seeded returns the fold r's records go into: empty, or for a
// continuation the turn so far.
func Seeded(r *thread.Run, tree *checkpoint.Tree) thread.Turn {
	if !IsContinuation(r, tree) {
		return thread.Turn{}
	}
	return thread.TurnFrom(tree.Get(r.ParentID).Content)
}

// RunningNode is the run's assistant message while it runs, holding
// content (nil: one empty text part), with the id of the checkpoint it
// becomes in tree.
func RunningNode(r *thread.Run, tree *checkpoint.Tree, content []checkpoint.Part) *checkpoint.Node {
	if content == nil {
		content = []checkpoint.Part{{Type: checkpoint.PartText}}
	}
	return &checkpoint.Node{
		ID: CheckpointOf(r, tree), ThreadID: r.ThreadID, ParentID: r.ParentID, Role: checkpoint.RoleAssistant,
		Content: content, Status: &checkpoint.Status{Type: "running"},
		RunID: r.ID, CreatedAt: r.CreatedAt, Running: true,
	}
}

// FirstRecord is a run's first log record: its running snapshot.
func FirstRecord(r *thread.Run) thread.Record {
	return thread.Record{Seq: 1, Kind: thread.KindSnapshot, Status: thread.RunRunning, TreeSeq: r.TreeSeq}
}

// Event rebuilds a stream event from its log record. running is the
// running message's content at a running snapshot.
func Event(r *thread.Run, rec thread.Record, tree *checkpoint.Tree, running []checkpoint.Part) thread.Event {
	if rec.Kind != thread.KindSnapshot {
		return thread.RecordEvent(r, &rec)
	}
	snap := &thread.Snapshot{ThreadID: r.ThreadID, RunStatus: rec.Status, Tree: tree.Upto(rec.TreeSeq), Head: r.MessageID}
	if !rec.Status.Done() {
		snap.Running = RunningNode(r, tree, running)
	}
	return thread.Event{Type: rec.Kind, RunID: r.ID, Sequence: rec.Seq, Snapshot: snap}
}

// ErrShuttingDown is the engine's refusal of a new run while it drains,
// and the end of a follow of another process's run once it has drained.
var ErrShuttingDown = &errcode.Error{Code: errcode.Unavailable, Message: "the service is shutting down; retry on another instance"}
