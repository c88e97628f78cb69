package api

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/thread"
)

// TestTokenLineMatchesEncoder checks that the token fast path writes exactly what
// json.Encoder writes for the event.
func TestTokenLineMatchesEncoder(t *testing.T) {
	t.Parallel()
	texts := []string{"", " abcd", "Hel", `quote " and \ backslash`, "<b>&amp;</b>", "tab\tnew\nline\r\x00\x1f\b\f",
		"\u2028\u2029", "héllo wörld ✓ 😀", "bad \xff\xfe utf-8", "del \x7f", "{\"json\":true}"}
	for _, text := range texts {
		ev := thread.Event{Type: thread.KindToken, RunID: uuid.New(), Sequence: 1234567890123, MessageID: uuid.New(), Text: text}
		var want bytes.Buffer
		if err := json.NewEncoder(&want).Encode(ev); err != nil {
			t.Fatal(err)
		}
		if got := appendTokenLine(nil, &ev); !bytes.Equal(got, want.Bytes()) {
			t.Errorf("appendTokenLine(%q) =\n%s\nwant\n%s", text, got, want.Bytes())
		}
	}
}

func BenchmarkTokenLine(b *testing.B) {
	ev := thread.Event{Type: thread.KindToken, RunID: uuid.New(), Sequence: 42, MessageID: uuid.New(), Text: " abcd"}
	b.Run("encoder", func(b *testing.B) {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		for b.Loop() {
			buf.Reset()
			_ = enc.Encode(ev)
		}
	})
	b.Run("append", func(b *testing.B) {
		var line []byte
		for b.Loop() {
			line = appendTokenLine(line[:0], &ev)
		}
	})
}

// TestEventLine checks that snapshot and error lines are exactly what
// json.Encoder writes for the event.
func TestEventLine(t *testing.T) {
	t.Parallel()
	tid := uuid.New()
	texts := []string{"", "plain", `quote " and \ backslash`, "<b>&amp;</b>", "tab\tnew\nline\r\x00\x1f", "\u2028\u2029", "héllo ✓ 😀", "bad \xff utf-8"}
	var nodes []checkpoint.Node
	parent := uuid.Nil
	for i, text := range texts {
		n := checkpoint.Node{ID: uuid.New(), ThreadID: tid, ParentID: parent, Seq: int64(i + 1), Role: checkpoint.RoleUser,
			Content: []checkpoint.Part{{Type: "text", Text: text}}, CreatedAt: time.Date(2026, 11, 23, 1, 2, 3, 456789000, time.UTC)}
		if i%2 == 1 {
			n.Role, n.RunID = checkpoint.RoleAssistant, uuid.New()
			n.Status = &checkpoint.Status{Type: "incomplete", Reason: "error", Error: text}
		}
		if i == 2 {
			n.Content = append(n.Content, checkpoint.Part{Type: "image", Image: "data:image/png;base64,iVBOR<>&"})
			n.Attachments = []checkpoint.Attachment{{ID: uuid.NewString(), Name: "a<b>.png", ContentType: "image/png", Size: 3}}
		}
		nodes = append(nodes, n)
		parent = n.ID
	}
	tree, err := checkpoint.NewTree(nodes)
	if err != nil {
		t.Fatal(err)
	}
	running := &checkpoint.Node{ID: uuid.New(), ThreadID: tid, ParentID: parent, Role: checkpoint.RoleAssistant,
		Content: []checkpoint.Part{{Type: "text", Text: "so far <&>"}}}
	evs := []thread.Event{
		{Type: thread.KindSnapshot, RunID: uuid.New(), Sequence: 1, Snapshot: &thread.Snapshot{ThreadID: tid, RunStatus: thread.RunRunning, Tree: tree, Running: running, Head: running.ID}},
		{Type: thread.KindSnapshot, RunID: uuid.New(), Sequence: 99, Snapshot: &thread.Snapshot{ThreadID: tid, RunStatus: thread.RunSucceeded, Tree: tree, Head: parent}},
		{Type: thread.KindError, RunID: uuid.New(), Sequence: 7, Text: "model <failed> & \u2028", Code: "model_error"},
	}
	for _, ev := range evs {
		var want bytes.Buffer
		if err := json.NewEncoder(&want).Encode(ev); err != nil {
			t.Fatal(err)
		}
		got, err := eventLine(&ev)
		if err != nil || !bytes.Equal(got, want.Bytes()) {
			t.Errorf("eventLine(%s %d) =\n%s (%v)\nwant\n%s", ev.Type, ev.Sequence, got, err, want.Bytes())
		}
	}
}
