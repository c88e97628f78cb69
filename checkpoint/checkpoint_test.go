package checkpoint

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/threadline/threadline/checkpoint/errcode"
)

// build makes a tree from (role, parent index) pairs; parent -1 is a root.
func build(t *testing.T, spec ...struct {
	role   Role
	parent int
}) (*Tree, []uuid.UUID) {
	t.Helper()
	ids := make([]uuid.UUID, len(spec))
	nodes := make([]Node, len(spec))
	base := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	for i, s := range spec {
		ids[i] = uuid.New()
		nodes[i] = Node{ID: ids[i], Seq: int64(i + 1), Role: s.role, CreatedAt: base.Add(time.Duration(i) * time.Second),
			Content: []Part{{Type: "text", Text: string(s.role)}}}
		if s.parent >= 0 {
			nodes[i].ParentID = ids[s.parent]
		}
	}
	tr, err := NewTree(nodes)
	if err != nil {
		t.Fatalf("NewTree: %v", err)
	}
	return tr, ids
}

type sp = struct {
	role   Role
	parent int
}

// A conversation: u0 -> a1 -> u2 -> a3, with a regenerated a4 beside a3 and
// an edited u5 beside u2 answered by a6.
func conversation(t *testing.T) (*Tree, []uuid.UUID) {
	return build(t,
		sp{RoleUser, -1}, sp{RoleAssistant, 0}, sp{RoleUser, 1}, sp{RoleAssistant, 2},
		sp{RoleAssistant, 2}, sp{RoleUser, 1}, sp{RoleAssistant, 5})
}

func TestResolveFork(t *testing.T) {
	t.Parallel()
	tr, id := conversation(t)
	other := uuid.New()
	tests := []struct {
		name    string
		req     ForkRequest
		want    Fork
		wantErr errcode.Code
	}{
		{"new message under leaf", ForkRequest{HasMessage: true, ParentID: id[3]}, Fork{UserParent: id[3]}, ""},
		{"edit a user message", ForkRequest{HasMessage: true, ParentID: id[1], SourceID: id[2]}, Fork{UserParent: id[1]}, ""},
		{"edit the root message", ForkRequest{HasMessage: true, SourceID: id[0]}, Fork{}, ""},
		{"regenerate", ForkRequest{ParentID: id[2], SourceID: id[3]}, Fork{AssistantParent: id[2]}, ""},
		{"regenerate without source", ForkRequest{ParentID: id[2]}, Fork{AssistantParent: id[2]}, ""},
		{"parent not in thread", ForkRequest{HasMessage: true, ParentID: other}, Fork{}, errcode.InvalidFork},
		{"edit of an assistant message", ForkRequest{HasMessage: true, ParentID: id[2], SourceID: id[3]}, Fork{}, errcode.InvalidFork},
		{"source not a child of parent", ForkRequest{HasMessage: true, ParentID: id[3], SourceID: id[2]}, Fork{}, errcode.InvalidFork},
		{"source not in thread", ForkRequest{HasMessage: true, ParentID: id[1], SourceID: other}, Fork{}, errcode.InvalidFork},
		{"regenerate under an assistant message", ForkRequest{ParentID: id[3]}, Fork{}, errcode.InvalidFork},
		{"regenerate with no parent", ForkRequest{}, Fork{}, errcode.InvalidFork},
		{"regenerate replacing a user message", ForkRequest{ParentID: id[1], SourceID: id[2]}, Fork{}, errcode.InvalidFork},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := tr.ResolveFork(tt.req)
			if code := errcode.Of(err); code != tt.wantErr {
				t.Fatalf("error code: got %q (%v), want %q", code, err, tt.wantErr)
			}
			if err == nil && got != tt.want {
				t.Fatalf("fork: got %+v, want %+v", got, tt.want)
			}
			if err != nil && errcode.Message(err) == "" {
				t.Fatalf("invalid_fork without a message saying which rule")
			}
		})
	}
}

func TestResolveHead(t *testing.T) {
	t.Parallel()
	tr, id := conversation(t)
	tests := []struct {
		name string
		head uuid.UUID
		want uuid.UUID
	}{
		{"leaf stays", id[3], id[3]},
		{"other leaf stays", id[4], id[4]},
		{"non-leaf resolves to newest leaf below", id[2], id[4]},
		{"root resolves to newest leaf overall", id[0], id[6]},
		{"unknown resolves to newest leaf", uuid.New(), id[6]},
		{"nil resolves to newest leaf", uuid.Nil, id[6]},
	}
	for _, tt := range tests {
		if got := tr.ResolveHead(tt.head); got != tt.want {
			t.Errorf("%s: got %s, want %s", tt.name, got, tt.want)
		}
	}
	if got := (&Tree{}).ResolveHead(uuid.Nil); got != uuid.Nil {
		t.Errorf("empty tree: got %s, want nil", got)
	}
}

func TestExportShape(t *testing.T) {
	t.Parallel()
	tr, id := conversation(t)
	path, repo := tr.Export(id[3])
	if repo.HeadID == nil || *repo.HeadID != id[3] {
		t.Fatalf("headId: got %v, want %s", repo.HeadID, id[3])
	}
	wantPath := []uuid.UUID{id[0], id[1], id[2], id[3]}
	if len(path) != len(wantPath) {
		t.Fatalf("path length: got %d, want %d", len(path), len(wantPath))
	}
	for i, m := range path {
		if m.ID != wantPath[i] {
			t.Fatalf("path[%d]: got %s, want %s", i, m.ID, wantPath[i])
		}
	}
	// The JSON of these fields is api/wire's (tested there).
	msg := repo.Messages[0].Message
	if msg.Attachments == nil || msg.Content == nil {
		t.Errorf("user message lacks attachments or content: %+v", msg)
	}
	if msg.Status != nil {
		t.Errorf("user message has a status: %+v", msg.Status)
	}
	if c := msg.Metadata.Custom; c.CheckpointID == nil || *c.CheckpointID != id[0] || c.ParentCheckpointID != nil {
		t.Errorf("root metadata.custom: got %+v", c)
	}
}

// randomTree grows a tree the way runs do: user messages under assistant
// messages (or as roots), assistant messages under user messages.
func randomTree(r *rand.Rand, n int) *Tree {
	nodes := make([]Node, 0, n)
	for i := 0; i < n; i++ {
		nd := Node{ID: uuid.New(), Seq: int64(i + 1), CreatedAt: time.Unix(int64(i), 0).UTC()}
		var candidates []int
		want := RoleUser
		if i > 0 && r.IntN(2) == 0 {
			want = RoleAssistant
		}
		for j := range nodes {
			if (want == RoleAssistant && nodes[j].Role == RoleUser) || (want == RoleUser && nodes[j].Role == RoleAssistant) {
				candidates = append(candidates, j)
			}
		}
		nd.Role = want
		if len(candidates) > 0 {
			nd.ParentID = nodes[candidates[r.IntN(len(candidates))]].ID
		} else {
			nd.Role = RoleUser
		}
		nodes = append(nodes, nd)
	}
	t, err := NewTree(nodes)
	if err != nil {
		panic(err)
	}
	return t
}

func TestExportProperties(t *testing.T) {
	t.Parallel()
	for seed := uint64(0); seed < 300; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		tr := randomTree(r, 1+r.IntN(60))
		var head uuid.UUID
		if r.IntN(4) > 0 {
			head = tr.Nodes()[r.IntN(tr.Len())].ID
		}
		path, repo := tr.Export(head)
		pos := map[uuid.UUID]int{}
		for i, item := range repo.Messages {
			if _, dup := pos[item.Message.ID]; dup {
				t.Fatalf("seed %d: message %s appears twice", seed, item.Message.ID)
			}
			pos[item.Message.ID] = i
			if item.ParentID != nil {
				p, ok := pos[*item.ParentID]
				if !ok || p >= i {
					t.Fatalf("seed %d: parent of %s does not precede it", seed, item.Message.ID)
				}
			}
		}
		if len(repo.Messages) != tr.Len() {
			t.Fatalf("seed %d: got %d messages, want %d", seed, len(repo.Messages), tr.Len())
		}
		// Siblings keep creation order.
		lastChild := map[uuid.UUID]int64{}
		for _, item := range repo.Messages {
			var p uuid.UUID
			if item.ParentID != nil {
				p = *item.ParentID
			}
			n := tr.Get(item.Message.ID)
			if n.Seq <= lastChild[p] {
				t.Fatalf("seed %d: siblings out of creation order under %s", seed, p)
			}
			lastChild[p] = n.Seq
		}
		if repo.HeadID == nil {
			t.Fatalf("seed %d: nil headId on a non-empty tree", seed)
		}
		if len(tr.Children(*repo.HeadID)) != 0 {
			t.Fatalf("seed %d: headId %s is not a leaf", seed, *repo.HeadID)
		}
		if len(path) == 0 || path[len(path)-1].ID != *repo.HeadID {
			t.Fatalf("seed %d: path does not end at headId", seed)
		}
		for i := 1; i < len(path); i++ {
			if p := path[i].Metadata.Custom.ParentCheckpointID; p == nil || *p != path[i-1].ID {
				t.Fatalf("seed %d: path[%d] is not a child of path[%d]", seed, i, i-1)
			}
		}
		if path[0].Metadata.Custom.ParentCheckpointID != nil {
			t.Fatalf("seed %d: path does not start at a root", seed)
		}
		if head != uuid.Nil {
			// The head is the given node or a descendant of it.
			found := false
			for _, m := range path {
				found = found || m.ID == head
			}
			if !found {
				t.Fatalf("seed %d: resolved head %s is not below the requested %s", seed, *repo.HeadID, head)
			}
		}
	}
}

func TestAppendIsImmutable(t *testing.T) {
	t.Parallel()
	tr, id := conversation(t)
	n := tr.Len()
	a, err := tr.Append(Node{ID: uuid.New(), ParentID: id[6], Seq: 8, Role: RoleUser})
	if err != nil {
		t.Fatal(err)
	}
	b, err := tr.Append(Node{ID: uuid.New(), ParentID: id[3], Seq: 8, Role: RoleUser})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Len() != n || a.Len() != n+1 || b.Len() != n+1 || a.Nodes()[n].ID == b.Nodes()[n].ID {
		t.Fatalf("append changed a shared tree: lens %d %d %d", tr.Len(), a.Len(), b.Len())
	}
	if _, err := tr.Append(Node{ID: uuid.New(), ParentID: uuid.New(), Seq: 9}); errcode.Of(err) != errcode.Invalid {
		t.Fatalf("unknown parent: got %v, want invalid_request", err)
	}
	if up := a.Upto(7); up.Len() != n {
		t.Fatalf("Upto: got %d nodes, want %d", up.Len(), n)
	}
	// Each branch of versions sees only its own nodes, also after growing.
	na, nb := a.Nodes()[n].ID, b.Nodes()[n].ID
	a2, err := a.Append(Node{ID: uuid.New(), ParentID: na, Seq: 9, Role: RoleAssistant})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		tr   *Tree
		id   uuid.UUID
		want bool
	}{
		{"tr has a's node", tr, na, false}, {"tr has b's node", tr, nb, false},
		{"a has b's node", a, nb, false}, {"b has a's node", b, na, false},
		{"a2 has a's node", a2, na, true}, {"a2 has b's node", a2, nb, false},
		{"a has a2's node", a, a2.Nodes()[n+1].ID, false}, {"Upto has a's node", a2.Upto(7), na, false},
	} {
		if got := c.tr.Get(c.id) != nil; got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
	// An older version appends by copying: the id a2 added is free there.
	again, err := a.Append(Node{ID: a2.Nodes()[n+1].ID, ParentID: na, Seq: 9, Role: RoleAssistant})
	if err != nil || again.Len() != n+2 || a2.Len() != n+2 {
		t.Fatalf("append to an older version: got %v (%v)", again, err)
	}
	if _, err := a2.Append(Node{ID: na, Seq: 10, Role: RoleUser}); errcode.Of(err) != errcode.Invalid {
		t.Fatalf("repeated id: got %v, want invalid_request", err)
	}
	if got := a2.Nodes(); cap(got) != len(got) {
		t.Fatalf("Nodes: cap %d beyond len %d lets a caller write into the shared array", cap(got), len(got))
	}
}

// TestConcurrentAppends: goroutines appending to one tree each get their
// own tree (run with -race).
func TestConcurrentAppends(t *testing.T) {
	t.Parallel()
	tr, id := conversation(t)
	const k = 16
	out := make(chan *Tree, k)
	for range k {
		go func() {
			nt, err := tr.Append(Node{ID: uuid.New(), ParentID: id[6], Seq: 8, Role: RoleUser})
			if err != nil {
				t.Error(err)
			}
			out <- nt
		}()
	}
	seen := map[uuid.UUID]bool{}
	for range k {
		nt := <-out
		last := nt.Nodes()[tr.Len()].ID
		if seen[last] || nt.Len() != tr.Len()+1 || nt.Get(last) == nil {
			t.Fatalf("a concurrent append got a shared or broken tree: len %d", nt.Len())
		}
		seen[last] = true
		for other := range seen {
			if other != last && nt.Get(other) != nil {
				t.Fatalf("tree sees another goroutine's node %s", other)
			}
		}
	}
}

// BenchmarkAppend is one message appended to the newest tree of N nodes:
// its cost must not grow with N.
func BenchmarkAppend(b *testing.B) {
	for _, n := range []int{20, 1000, 10000} {
		r := rand.New(rand.NewPCG(1, 2))
		base := randomTree(r, n)
		b.Run(itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			tr := base
			last := tr.Nodes()[tr.Len()-1].ID
			for b.Loop() {
				id := uuid.New()
				var err error
				if tr, err = tr.Append(Node{ID: id, ParentID: last, Seq: int64(tr.Len() + 1), Role: RoleUser}); err != nil {
					b.Fatal(err)
				}
				last = id
			}
		})
	}
}

func BenchmarkExport(b *testing.B) {
	for _, n := range []int{10, 100, 500} {
		r := rand.New(rand.NewPCG(1, 2))
		tr := randomTree(r, 2*n)
		b.Run(itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, repo := tr.Export(uuid.Nil)
				if _, err := json.Marshal(repo); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return "N=" + string(b) }
