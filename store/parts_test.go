package store_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/store"
	"github.com/threadline/threadline/store/pgtest"
	"github.com/threadline/threadline/thread"
)

// TestDecodePartsMatchesJSON reads contents back through real jsonb and
// checks that the fast path of decodeParts gives what encoding/json gives.
func TestDecodePartsMatchesJSON(t *testing.T) {
	t.Parallel()
	s, pool := setup(t)
	ctx := context.Background()
	th := newThread(t, s, "c")
	contents := [][]checkpoint.Part{
		{{Type: "text", Text: " abcd efgh ijkl"}},
		{{Type: "text", Text: ""}},
		{{Type: "text", Text: `a "quoted" word and a \ backslash`}},
		{{Type: "text", Text: "line one\nline two\ttab \u0001 control"}},
		{{Type: "text", Text: "unicode: héllo wörld 日本語 🎉 <b>&amp;</b>"}},
		{{Type: "text", Text: `", "type": "text"}]`}},
		{{Type: "text", Text: "two"}, {Type: "text", Text: "parts"}},
		{{Type: "image", Image: "/api/v1/attachments/x"}},
		{{Type: "text", Text: "text and"}, {Type: "image", Image: "data:image/png;base64,AAAA"}},
	}
	var nodes []*checkpoint.Node
	for _, c := range contents {
		nodes = append(nodes, &checkpoint.Node{ID: uuid.New(), Role: checkpoint.RoleUser, Content: c})
	}
	if err := s.CheckpointAppend(ctx, th.ID, nodes...); err != nil {
		t.Fatal(err)
	}
	got, err := s.CheckpointsAfter(ctx, th.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(contents) {
		t.Fatalf("read back %d checkpoints, want %d", len(got), len(contents))
	}
	raws := rawContents(t, pool, th.ID)
	fast := 0
	for i, n := range got {
		if !reflect.DeepEqual(n.Content, contents[i]) {
			t.Errorf("content %d: got %#v, want %#v", i, n.Content, contents[i])
		}
		checkDecodeParts(t, raws[i])
		if len(raws[i]) > 0 && string(raws[i][:11]) == `[{"text": "` {
			fast++
		}
	}
	if fast < 3 {
		t.Errorf("jsonb printed %d of the contents in the form the fast path reads, want at least 3; raw: %q", fast, raws)
	}
	for _, bad := range []string{`[{"text": "x", "type": "text"}`, `nope`, `[{"text": "a"b", "type": "text"}]`} {
		if _, err := store.DecodeParts([]byte(bad)); err == nil {
			t.Errorf("store.DecodeParts(%s): got no error, want one", bad)
		}
	}
}

func rawContents(t *testing.T, pool *pgxpool.Pool, threadID uuid.UUID) [][]byte {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT content FROM checkpoints WHERE thread_id = $1 ORDER BY seq`, threadID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out [][]byte
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			t.Fatal(err)
		}
		out = append(out, append([]byte(nil), b...))
	}
	return out
}

func BenchmarkDecodeParts(b *testing.B) {
	raw := []byte(`[{"text": "` + string(make200Tokens()) + `", "type": "text"}]`)
	b.Run("fast", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := store.DecodeParts(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding_json", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := store.UnmarshalParts(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func make200Tokens() []byte {
	out := make([]byte, 0, 1000)
	for i := 0; i < 200; i++ {
		out = append(out, ' ', byte('a'+i%26), byte('a'+i*7%26), byte('a'+i*3%26), byte('a'+i*11%26))
	}
	return out
}

// BenchmarkCheckpointsAfter reads a whole thread of 1,000 messages (500
// turns of a 64-byte question and a 1,000-byte reply) from Postgres.
func BenchmarkCheckpointsAfter(b *testing.B) {
	pool := pgtest.Pool(b)
	s := store.New(pool)
	ctx := context.Background()
	th := &thread.Thread{ID: uuid.New(), Caller: "c"}
	if _, _, err := s.ThreadCreate(ctx, th); err != nil {
		b.Fatal(err)
	}
	reply := string(make200Tokens())
	parent := uuid.Nil
	var nodes []*checkpoint.Node
	for i := 0; i < 500; i++ {
		u := &checkpoint.Node{ID: uuid.New(), ParentID: parent, Role: checkpoint.RoleUser,
			Content: []checkpoint.Part{{Type: "text", Text: "a question of sixty-four bytes, more or less, for the benchmark."}}}
		a := &checkpoint.Node{ID: uuid.New(), ParentID: u.ID, Role: checkpoint.RoleAssistant,
			Content: []checkpoint.Part{{Type: "text", Text: reply}}, Status: &checkpoint.Status{Type: "complete", Reason: "stop"}}
		nodes = append(nodes, u, a)
		parent = a.ID
	}
	if err := s.CheckpointAppend(ctx, th.ID, nodes...); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE checkpoints`); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		got, err := s.CheckpointsAfter(ctx, th.ID, 0)
		if err != nil || len(got) != 1000 {
			b.Fatalf("read %d checkpoints, %v; want 1000", len(got), err)
		}
	}
}

// TestAgentPartsRoundTrip: the parts of an agent turn and a user's file
// part come back from jsonb as they were written, and decodeParts reads
// them as encoding/json does.
func TestAgentPartsRoundTrip(t *testing.T) {
	t.Parallel()
	s, pool := setup(t)
	ctx := context.Background()
	th := newThread(t, s, "c")
	parts := []checkpoint.Part{
		{Type: "reasoning", Text: "Let me think"},
		{Type: "text", Text: "I'll use the calculator."},
		{Type: "tool-call", ToolCallID: "c1", ToolName: "calculator", Args: json.RawMessage(`{"expression":"12*7"}`),
			ArgsText: `{"expression": "12*7"}`, Result: json.RawMessage(`84`)},
		{Type: "tool-call", ToolCallID: "c2", ToolName: "clock", Args: json.RawMessage(`{}`), ArgsText: `{}`,
			Result: json.RawMessage(`"unknown time zone"`), IsError: true},
		{Type: "tool-call", ToolCallID: "c3", ToolName: "wait", Args: json.RawMessage(`{}`), ArgsText: `{"seconds":`},
		{Type: "data", Name: "plan", Data: json.RawMessage(`{"id":"p1","tasks":[{"id":"1","title":"a <b>","status":"done"}]}`)},
		{Type: "source", SourceType: "url", ID: "s1", URL: "https://example.com/?a=1&b=2", Title: "Example"},
		{Type: "text", Text: "**12*7 = 84**"},
	}
	user := []checkpoint.Part{{Type: "text", Text: "see the file"},
		{Type: "file", Filename: "a.pdf", MimeType: "application/pdf", Data: json.RawMessage(`"/api/v1/attachments/x"`)}}
	u := &checkpoint.Node{ID: uuid.New(), Role: checkpoint.RoleUser, Content: user}
	a := &checkpoint.Node{ID: uuid.New(), ParentID: u.ID, Role: checkpoint.RoleAssistant, Content: parts,
		Status: &checkpoint.Status{Type: "complete", Reason: "stop"}}
	if err := s.CheckpointAppend(ctx, th.ID, u, a); err != nil {
		t.Fatal(err)
	}
	got, err := s.CheckpointsAfter(ctx, th.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	raws := rawContents(t, pool, th.ID)
	for i, want := range [][]checkpoint.Part{user, parts} {
		if g, w := store.MarshalParts(got[i].Content), store.MarshalParts(want); string(g) != string(w) {
			t.Errorf("content %d read back:\n got %s\nwant %s", i, g, w)
		}
		checkDecodeParts(t, raws[i])
	}
}

// checkDecodeParts checks that store.DecodeParts reads a content as
// written by Postgres (raw) as its encoding/json path does.
func checkDecodeParts(t *testing.T, raw []byte) {
	t.Helper()
	viaJSON, err := store.UnmarshalParts(raw)
	if err != nil {
		t.Fatal(err)
	}
	dp, err := store.DecodeParts(raw)
	if err != nil || !reflect.DeepEqual(dp, viaJSON) {
		t.Errorf("store.DecodeParts(%s): got %#v, %v; want %#v as encoding/json decodes it", raw, dp, err, viaJSON)
	}
}
