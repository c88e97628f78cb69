package thread_test

import (
	"bytes"
	"encoding/json"
	"fmt"
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

// TestAgentEventJSON: the agent events are written in API.md's shapes.
func TestAgentEventJSON(t *testing.T) {
	t.Parallel()
	run := uuid.MustParse("11111111-1111-1111-1111-111111111111")
	msg := uuid.MustParse("22222222-2222-2222-2222-222222222222")
	head := `{"type":"%s","run_id":"` + run.String() + `","sequence":%d,"message_id":"` + msg.String() + `",`
	for _, tc := range []struct {
		ev   thread.Event
		want string
	}{
		{thread.Event{Type: thread.KindReasoning, Text: "Let me"}, `"text":"Let me"}`},
		{thread.Event{Type: thread.KindToolCall, CallID: "c1", Name: "calculator", Text: `{"expression":`},
			`"tool_call_id":"c1","tool_name":"calculator","args_text":"{\"expression\":"}`},
		{thread.Event{Type: thread.KindToolCall, CallID: "c1", Name: "calculator"}, `"tool_call_id":"c1","tool_name":"calculator","args_text":""}`},
		{thread.Event{Type: thread.KindToolResult, CallID: "c1", Data: json.RawMessage(`84`)}, `"tool_call_id":"c1","result":84,"is_error":false}`},
		{thread.Event{Type: thread.KindToolResult, CallID: "c2", Data: json.RawMessage(`"boom <x>"`), IsError: true},
			`"tool_call_id":"c2","result":"boom \u003cx\u003e","is_error":true}`},
		{thread.Event{Type: thread.KindData, Name: "plan", Data: json.RawMessage(`{"id":"p","tasks":[]}`)}, `"name":"plan","data":{"id":"p","tasks":[]}}`},
	} {
		ev := tc.ev
		ev.RunID, ev.Sequence, ev.MessageID = run, 9, msg
		got, err := json.Marshal(ev)
		want := fmt.Sprintf(head, ev.Type, 9) + tc.want
		if err != nil || string(got) != want {
			t.Errorf("%s event:\n got %s (%v)\nwant %s", ev.Type, got, err, want)
		}
	}
}
