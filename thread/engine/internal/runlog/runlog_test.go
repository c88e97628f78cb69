package runlog

import (
	"testing"

	"github.com/google/uuid"

	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/thread"
)

// TestContinuation: a run whose parent is an assistant checkpoint
// continues its turn: its reply becomes a checkpoint of the run's id and
// its fold starts from the turn; any other run's reply is its message id,
// folded from nothing.
func TestContinuation(t *testing.T) {
	t.Parallel()
	tid := uuid.New()
	user := checkpoint.Node{ID: uuid.New(), ThreadID: tid, Seq: 1, Role: checkpoint.RoleUser}
	asst := checkpoint.Node{ID: uuid.New(), ThreadID: tid, ParentID: user.ID, Seq: 2, Role: checkpoint.RoleAssistant,
		Content: []checkpoint.Part{{Type: checkpoint.PartText, Text: "so far"}}}
	tree, err := checkpoint.NewTree([]checkpoint.Node{user, asst})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		parent uuid.UUID
		cont   bool
		text   string
	}{
		{"a reply to the user", user.ID, false, ""},
		{"a continuation", asst.ID, true, "so far"},
	}
	for _, tt := range tests {
		r := &thread.Run{ID: uuid.New(), ThreadID: tid, ParentID: tt.parent, MessageID: uuid.New(), TreeSeq: 2}
		if got := IsContinuation(r, tree); got != tt.cont {
			t.Fatalf("%s: IsContinuation got %v, want %v", tt.name, got, tt.cont)
		}
		want := r.MessageID
		if tt.cont {
			want = r.ID
		}
		if got := CheckpointOf(r, tree); got != want {
			t.Fatalf("%s: CheckpointOf got %s, want %s", tt.name, got, want)
		}
		fold := Seeded(r, tree)
		if got := RunningNode(r, tree, fold.Content()); got.ID != want || !got.Running || got.Text() != tt.text {
			t.Fatalf("%s: RunningNode got %+v, want id %s running with %q", tt.name, got, want, tt.text)
		}
		ev := Event(r, FirstRecord(r), tree, nil)
		if ev.Sequence != 1 || ev.Snapshot == nil || ev.Snapshot.Running == nil || ev.Final() {
			t.Fatalf("%s: the first record's event: got %+v, want a running snapshot", tt.name, ev)
		}
	}
}
