package checkpoint_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/checkpoint"
)

// TestAppendJSON: the hand-written encoders write exactly what
// encoding/json writes for messages and repositories.
func TestAppendJSON(t *testing.T) {
	t.Parallel()
	tid := uuid.New()
	texts := []string{"", "plain", `quote " and \ backslash`, "<b>&amp;</b>", "tab\tnew\nline\r\x00\x1f\b\f", "\u2028\u2029",
		"héllo ✓ 😀", "bad \xff\xfe utf-8", "del \x7f"}
	at := []time.Time{
		time.Date(2026, 11, 23, 1, 2, 3, 456789000, time.UTC),
		time.Date(2026, 11, 23, 1, 2, 3, 0, time.UTC),
		time.Date(2026, 1, 2, 3, 4, 5, 100000000, time.FixedZone("x", 3600+1800)),
	}
	var nodes []checkpoint.Node
	parent := uuid.Nil
	for i, text := range texts {
		n := checkpoint.Node{ID: uuid.New(), ThreadID: tid, ParentID: parent, Seq: int64(i + 1), Role: checkpoint.RoleUser,
			Content: []checkpoint.Part{{Type: "text", Text: text}}, CreatedAt: at[i%len(at)]}
		switch i % 4 {
		case 1:
			n.Role, n.RunID = checkpoint.RoleAssistant, uuid.New()
			n.Status = &checkpoint.Status{Type: "incomplete", Reason: "error", Error: text}
		case 2:
			n.Content = append(n.Content, checkpoint.Part{Type: "image", Image: "data:image/png;base64,iVBOR<>&"},
				checkpoint.Part{Type: "other", Text: text})
			n.Attachments = []checkpoint.Attachment{{ID: uuid.NewString(), Type: "image", Name: "a<b>" + text, ContentType: "image/png", Size: 3,
				Content: []checkpoint.Part{{Type: "image", Image: "x"}}}}
		case 3:
			n.Role = checkpoint.RoleAssistant
			n.Status = &checkpoint.Status{Type: "complete"}
			n.Content = nil
		}
		nodes = append(nodes, n)
		parent = n.ID
	}
	running := checkpoint.Node{ID: uuid.New(), ThreadID: tid, ParentID: parent, Role: checkpoint.RoleAssistant, Running: true,
		Content: []checkpoint.Part{{Type: "text", Text: "so far"}}, RunID: uuid.New(), CreatedAt: at[0]}
	tree, err := checkpoint.NewTree(nodes)
	if err != nil {
		t.Fatal(err)
	}
	for _, head := range []uuid.UUID{parent, nodes[2].ID, uuid.Nil} {
		path, repo := tree.Export(head)
		path = append(path, checkpoint.WireMessage(&running))
		want, err := json.Marshal(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := checkpoint.AppendMessages(nil, path); !bytes.Equal(got, want) {
			t.Errorf("AppendMessages =\n%s\nwant\n%s", got, want)
		}
		want, err = json.Marshal(repo)
		if err != nil {
			t.Fatal(err)
		}
		if got := repo.AppendJSON(nil); !bytes.Equal(got, want) {
			t.Errorf("Repository.AppendJSON =\n%s\nwant\n%s", got, want)
		}
	}
	for _, n := range append(nodes, running) {
		want, err := json.Marshal(n.Content)
		if err != nil {
			t.Fatal(err)
		}
		if got := checkpoint.MarshalParts(n.Content); !bytes.Equal(got, want) {
			t.Errorf("MarshalParts =\n%s\nwant\n%s", got, want)
		}
	}
	var empty checkpoint.Repository
	if got, want := empty.AppendJSON(nil), `{"headId":null,"messages":null}`; string(got) != want {
		t.Errorf("empty repository: got %s, want %s", got, want)
	}
	if got := checkpoint.AppendMessages(nil, nil); string(got) != "null" {
		t.Errorf("nil messages: got %s, want null", got)
	}
}
