package thread_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/thread"
)

// TestSnapshotJSON: snapshot events and thread snapshots, written by hand,
// are byte for byte what encoding/json writes for their API.md shapes.
func TestSnapshotJSON(t *testing.T) {
	t.Parallel()
	tid := uuid.New()
	var nodes []checkpoint.Node
	parent := uuid.Nil
	for i, text := range []string{"hi <there> & \u2028", "", "ünï ✓", "q\"\\\n"} {
		n := checkpoint.Node{ID: uuid.New(), ThreadID: tid, ParentID: parent, Seq: int64(i + 1), Role: checkpoint.RoleUser,
			Content: []checkpoint.Part{{Type: "text", Text: text}}, CreatedAt: time.Date(2026, 11, 23, 2, 0, i, 1000*i, time.UTC)}
		if i%2 == 1 {
			n.Role, n.RunID, n.Status = checkpoint.RoleAssistant, uuid.New(), &checkpoint.Status{Type: "complete", Reason: "stop"}
		}
		nodes = append(nodes, n)
		parent = n.ID
	}
	tree, err := checkpoint.NewTree(nodes)
	if err != nil {
		t.Fatal(err)
	}
	running := &checkpoint.Node{ID: uuid.New(), ThreadID: tid, ParentID: parent, Role: checkpoint.RoleAssistant, Running: true,
		RunID: uuid.New(), Content: []checkpoint.Part{{Type: "text", Text: "so far"}}, CreatedAt: time.Now().UTC()}
	snaps := []thread.Snapshot{
		{ThreadID: tid, RunStatus: thread.RunRunning, Tree: tree, Running: running, Head: running.ID},
		{ThreadID: tid, RunStatus: thread.RunSucceeded, Tree: tree, Head: parent},
		{ThreadID: tid, RunStatus: thread.RunSucceeded, Tree: &checkpoint.Tree{}},
	}
	for i, snap := range snaps {
		ev := thread.Event{Type: thread.KindSnapshot, RunID: uuid.New(), Sequence: int64(7 + i), Snapshot: &snap}
		cp, path, repo := snap.Export()
		want, err := json.Marshal(struct {
			Type              string                `json:"type"`
			RunID             uuid.UUID             `json:"run_id"`
			Sequence          int64                 `json:"sequence"`
			ThreadID          uuid.UUID             `json:"thread_id"`
			CheckpointID      *uuid.UUID            `json:"checkpoint_id"`
			RunStatus         thread.RunStatus      `json:"run_status"`
			Messages          []checkpoint.Message  `json:"messages"`
			MessageRepository checkpoint.Repository `json:"messageRepository"`
		}{ev.Type, ev.RunID, ev.Sequence, snap.ThreadID, cp, snap.RunStatus, path, repo})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := ev.MarshalJSON(); err != nil || !bytes.Equal(got, want) {
			t.Errorf("snapshot event %d =\n%s (%v)\nwant\n%s", i, got, err, want)
		}
		for _, active := range []*thread.ActiveRun{nil, {RunID: uuid.New(), MessageID: running.ID, Sequence: 42}} {
			ts := &thread.ThreadSnapshot{Snapshot: snap, ActiveRun: active}
			want, err := json.Marshal(struct {
				ThreadID          uuid.UUID             `json:"thread_id"`
				CheckpointID      *uuid.UUID            `json:"checkpoint_id"`
				Messages          []checkpoint.Message  `json:"messages"`
				MessageRepository checkpoint.Repository `json:"messageRepository"`
				ActiveRun         *thread.ActiveRun     `json:"active_run"`
			}{snap.ThreadID, cp, path, repo, active})
			if err != nil {
				t.Fatal(err)
			}
			if got, err := ts.MarshalJSON(); err != nil || !bytes.Equal(got, want) {
				t.Errorf("thread snapshot %d (active %v) =\n%s (%v)\nwant\n%s", i, active != nil, got, err, want)
			}
		}
	}
}
