package thread_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/thread"
)

// shareTree is
//
//	u1 (attachment a) -> r1 -> u2 -> r2 (waiting) -> r2c (its continuation)
//	                       \-> s (sibling, attachment b)
type shareTree struct {
	tree                         *checkpoint.Tree
	u1, r1, u2, r2, r2c, s, a, b uuid.UUID
}

func newShareTree(t *testing.T) shareTree {
	t.Helper()
	st := shareTree{u1: uuid.New(), r1: uuid.New(), u2: uuid.New(), r2: uuid.New(), r2c: uuid.New(), s: uuid.New(), a: uuid.New(), b: uuid.New()}
	att := func(id uuid.UUID) []checkpoint.Attachment {
		url := "/api/v1/attachments/" + id.String()
		return []checkpoint.Attachment{{ID: id.String(), Type: "image", Name: "x.png", ContentType: "image/png", URL: url,
			Content: []checkpoint.Part{{Type: "image", Image: url}}}}
	}
	text := func(s string) []checkpoint.Part { return []checkpoint.Part{{Type: "text", Text: s}} }
	now := time.Now().UTC()
	run := uuid.New()
	nodes := []checkpoint.Node{
		{ID: st.u1, Role: checkpoint.RoleUser, Content: text("one"), Attachments: att(st.a)},
		{ID: st.r1, ParentID: st.u1, Role: checkpoint.RoleAssistant, Content: text("reply one"), RunID: run},
		{ID: st.u2, ParentID: st.r1, Role: checkpoint.RoleUser, Content: text("two")},
		{ID: st.r2, ParentID: st.u2, Role: checkpoint.RoleAssistant, Content: text("waiting")},
		{ID: st.s, ParentID: st.r1, Role: checkpoint.RoleUser, Content: text("sibling"), Attachments: att(st.b)},
		{ID: st.r2c, ParentID: st.r2, Role: checkpoint.RoleAssistant, Content: text("continued")},
	}
	for i := range nodes {
		nodes[i].Seq, nodes[i].CreatedAt = int64(i+1), now
	}
	tree, err := checkpoint.NewTree(nodes)
	if err != nil {
		t.Fatal(err)
	}
	st.tree = tree
	return st
}

func TestSharePath(t *testing.T) {
	t.Parallel()
	st := newShareTree(t)
	share := uuid.New()
	tests := []struct {
		name      string
		at        uuid.UUID
		wantIDs   []uuid.UUID
		wantTexts []string
	}{
		{"a reply", st.r1, []uuid.UUID{st.u1, st.r1}, []string{"one", "reply one"}},
		{"a turn frozen before its continuation", st.r2, []uuid.UUID{st.u1, st.r1, st.u2, st.r2}, []string{"one", "reply one", "two", "waiting"}},
		{"a continued turn, one message", st.r2c, []uuid.UUID{st.u1, st.r1, st.u2, st.r2}, []string{"one", "reply one", "two", "continued"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := thread.SharePath(st.tree, tc.at, share)
			if len(got) != len(tc.wantIDs) {
				t.Fatalf("got %d messages, want %d", len(got), len(tc.wantIDs))
			}
			for i, m := range got {
				n := checkpoint.Node{Content: m.Content}
				if m.ID != tc.wantIDs[i] || n.Text() != tc.wantTexts[i] {
					t.Errorf("message %d: got %s %q, want %s %q", i, m.ID, n.Text(), tc.wantIDs[i], tc.wantTexts[i])
				}
				if m.Metadata.RunID != nil || m.Metadata.Custom.RunID != nil {
					t.Errorf("message %d shows a run id", i)
				}
			}
			b, _ := json.Marshal(got)
			for _, leak := range []string{"sibling", st.s.String(), st.b.String(), "/api/v1/attachments/"} {
				if strings.Contains(string(b), leak) {
					t.Errorf("shared path shows %q: %s", leak, b)
				}
			}
			if want := thread.ShareAttachmentURL(share, st.a.String()); strings.Count(string(b), want) != 2 {
				t.Errorf("attachment URL and image: want %s twice in %s", want, b)
			}
		})
	}
	if got := thread.SharePath(st.tree, uuid.New(), share); got != nil {
		t.Fatalf("unknown checkpoint: got %v, want nil", got)
	}
	if got := thread.PathAttachments(st.tree, st.r2c); len(got) != 1 || !got[st.a] {
		t.Fatalf("path attachments: got %v, want only %s", got, st.a)
	}
}

func TestForkPath(t *testing.T) {
	t.Parallel()
	st := newShareTree(t)
	th := uuid.New()
	nodes, atts := thread.ForkPath(st.tree, st.r2c, th)
	if len(nodes) != 5 {
		t.Fatalf("got %d nodes, want the 5 checkpoints of the path", len(nodes))
	}
	if _, err := checkpoint.NewTree(nodes); err != nil {
		t.Fatalf("the copy is not a tree: %v", err)
	}
	old := map[uuid.UUID]bool{st.u1: true, st.r1: true, st.u2: true, st.r2: true, st.r2c: true}
	for i, n := range nodes {
		if old[n.ID] || n.ThreadID != th || n.RunID != uuid.Nil || n.Seq != int64(i+1) {
			t.Errorf("node %d: got id %s thread %s run %s seq %d", i, n.ID, n.ThreadID, n.RunID, n.Seq)
		}
		if i > 0 && n.ParentID != nodes[i-1].ID {
			t.Errorf("node %d: parent %s, want %s", i, n.ParentID, nodes[i-1].ID)
		}
	}
	nid, ok := atts[st.a]
	if len(atts) != 1 || !ok {
		t.Fatalf("attachments: got %v, want only %s", atts, st.a)
	}
	a := nodes[0].Attachments[0]
	if a.ID != nid.String() || a.URL != "/api/v1/attachments/"+nid.String() || a.Content[0].Image != a.URL {
		t.Fatalf("copied attachment: got %+v", a)
	}
	if st.tree.Get(st.u1).Attachments[0].ID != st.a.String() {
		t.Fatal("the source tree changed")
	}
}
