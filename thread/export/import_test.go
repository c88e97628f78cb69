package export_test

import (
	"archive/zip"
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/export"
)

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var opt = export.Options{MaxMessage: 256 << 10, MaxThreadMessages: 10000, Now: t0}

// shown is the text of the wire messages on the path to the head.
func shown(t *testing.T, it *thread.ImportThread) []string {
	t.Helper()
	tree, err := checkpoint.NewTree(it.Nodes)
	if err != nil {
		t.Fatal(err)
	}
	path, _ := tree.Export(it.Head)
	var out []string
	for _, m := range path {
		var b strings.Builder
		for _, p := range m.Content {
			switch p.Type {
			case "text", "reasoning":
				b.WriteString(p.Type + ":" + p.Text + ";")
			case "tool-call":
				fmt.Fprintf(&b, "tool-call:%s(%s)=%s;", p.ToolName, p.ArgsText, p.Result)
			default:
				b.WriteString(p.Type + ";")
			}
		}
		out = append(out, string(m.Role)+" "+b.String())
	}
	return out
}

func TestChatGPTBranchesAndEdits(t *testing.T) {
	t.Parallel()
	its, err := read(t, fixture(t, "chatgpt/conversations.json"), opt)
	if err != nil || len(its) != 2 {
		t.Fatalf("read: %d threads, %v", len(its), err)
	}
	it := its[0]
	if it.Thread.ID != uuid.MustParse("cccccccc-0000-4000-8000-000000000001") || *it.Thread.Title != "Average of three numbers" {
		t.Errorf("thread %s %q", it.Thread.ID, *it.Thread.Title)
	}
	// Left out: the root, the hidden system message, the hidden context
	// and the reasoning recap. Kept: two edited user messages, two
	// regenerated replies, and the agent turn's four steps.
	if got, want := len(it.Nodes), 8; got != want {
		t.Errorf("%d checkpoints, want %d", got, want)
	}
	tree, _ := checkpoint.NewTree(it.Nodes)
	roots := tree.Children(uuid.Nil)
	if len(roots) != 2 || roots[0].Text() != "What is the average of 3, 4 and 8?" {
		t.Fatalf("roots (the edit and its original, re-parented above the hidden nodes): %+v", roots)
	}
	if regen := tree.Children(roots[0].ID); len(regen) != 2 || regen[1].Text() != "(3 + 4 + 8) / 3 = 5" {
		t.Errorf("regenerated replies: %+v", regen)
	}
	got := shown(t, it)
	want := []string{
		"user text:[image: file-service://file-abc123];text:Compute the average of the numbers in this picture with Python.;",
		"assistant reasoning:Reading the picture\n\nThe picture shows 3, 4 and 8.;tool-call:python(nums = [3, 4, 8]\nprint(sum(nums) / len(nums)))=\"5.0\";text:The average of 3, 4 and 8 is **5**.;",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("shown branch:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !bytes.Contains(it.Thread.Metadata, []byte(`"models":["gpt-4o","o3"]`)) {
		t.Errorf("metadata %s", it.Thread.Metadata)
	}
	if its[1].Thread.ID != uuid.MustParse("cccccccc-0000-4000-8000-000000000002") || len(its[1].Nodes) != 2 {
		t.Errorf("second conversation: %s, %d nodes", its[1].Thread.ID, len(its[1].Nodes))
	}
}

func TestOpenWebUIRegenerations(t *testing.T) {
	t.Parallel()
	its, err := read(t, fixture(t, "openwebui/chat-export.json"), opt)
	if err != nil || len(its) != 1 {
		t.Fatalf("read: %d threads, %v", len(its), err)
	}
	it := its[0]
	tree, _ := checkpoint.NewTree(it.Nodes)
	user := tree.Children(uuid.Nil)
	if len(user) != 1 {
		t.Fatalf("roots %d", len(user))
	}
	replies := tree.Children(user[0].ID)
	if len(replies) != 2 || replies[0].Text() != "Paris." || replies[1].Text() != "The capital of France is Paris." {
		t.Errorf("regenerations: %+v", replies)
	}
	if it.Head != uuid.MustParse("11111111-0000-4000-8000-000000000005") {
		t.Errorf("head %s, want currentId", it.Head)
	}
	out := replies[1].Content[len(replies[1].Content)-1]
	if out.Type != "data" || out.Name != "openwebui.output" || !bytes.Contains(out.Data, []byte(`"call_id":"call_1"`)) {
		t.Errorf("output[] kept as %+v", out)
	}
	if !bytes.Contains(it.Thread.Metadata, []byte(`"models":["llama3.1:8b","qwen2.5:7b"]`)) {
		t.Errorf("metadata %s", it.Thread.Metadata)
	}
	// One chat alone reads too.
	single := bytes.TrimSuffix(bytes.TrimPrefix(bytes.TrimSpace(fixture(t, "openwebui/chat-export.json")), []byte("[")), []byte("]"))
	if its, err := read(t, single, opt); err != nil || len(its) != 1 || len(its[0].Nodes) != 5 {
		t.Errorf("a single chat: %d threads, %v", len(its), err)
	}
}

func zipOf(t *testing.T, files map[string][]byte, order ...string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, name := range order {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(files[name])
	}
	zw.Close()
	return buf.Bytes()
}

func TestZip(t *testing.T) {
	t.Parallel()
	conv := fixture(t, "chatgpt/conversations.json")
	// ChatGPT's own ZIP: conversations.json beside files that are not conversations.
	z := zipOf(t, map[string][]byte{
		"user.json": []byte(`{"id":"user-1","email":"a@example.com"}`), "shared_conversations.json": []byte(`[{"id":"x","conversation_id":"y","title":"t"}]`),
		"message_feedback.json": []byte(`[]`), "chat.html": []byte("<html></html>"), "conversations.json": conv,
	}, "user.json", "conversations.json", "chat.html", "message_feedback.json", "shared_conversations.json")
	its, err := read(t, z, opt)
	if err != nil || len(its) != 2 {
		t.Fatalf("ChatGPT ZIP: %d threads, %v", len(its), err)
	}
	// A ZIP of many JSON files, one conversation each.
	single := bytes.TrimSuffix(bytes.TrimPrefix(bytes.TrimSpace(fixture(t, "openwebui/chat-export.json")), []byte("[")), []byte("]"))
	z = zipOf(t, map[string][]byte{"chats/b.json": single, "chats/a.json": conv}, "chats/b.json", "chats/a.json")
	its, err = read(t, z, opt)
	if err != nil || len(its) != 3 {
		t.Fatalf("ZIP of many files: %d threads, %v", len(its), err)
	}
	if *its[2].Thread.Title != "Capital of France" {
		t.Errorf("entries are read by name: the last is %q", *its[2].Thread.Title)
	}
	// A ZIP with no conversation at all.
	z = zipOf(t, map[string][]byte{"user.json": []byte(`{"id":"u"}`)}, "user.json")
	if _, err := read(t, z, opt); errcode.Of(err) != errcode.Invalid {
		t.Errorf("a ZIP without conversations: %v, want invalid_request", err)
	}
}

// deepChain is a ChatGPT conversation whose mapping is one chain of n
// alternating messages.
func deepChain(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`[{"title":"deep","create_time":1732000000,"mapping":{`)
	for i := 0; i < n; i++ {
		role, parent := "user", "null"
		if i%2 == 1 {
			role = "assistant"
		}
		if i > 0 {
			parent = fmt.Sprintf(`"n%d"`, i-1)
		}
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"n%d":{"id":"n%d","parent":%s,"children":["n%d"],"message":{"author":{"role":"%s"},"content":{"content_type":"text","parts":["m%d"]}}}`, i, i, parent, i+1, role, i)
	}
	fmt.Fprintf(&b, `},"current_node":"n%d"}]`, n-1)
	return b.Bytes()
}

func TestDeepChain(t *testing.T) {
	t.Parallel()
	const n = 100_000
	its, err := read(t, deepChain(n), export.Options{Now: t0})
	if err != nil || len(its) != 1 || len(its[0].Nodes) != n {
		t.Fatalf("a %d-deep chain: %v", n, err)
	}
	if its[0].Head != its[0].Nodes[n-1].ID {
		t.Errorf("head is not the chain's end")
	}
	if _, err := read(t, deepChain(opt.MaxThreadMessages+1), opt); errcode.Of(err) != errcode.TooLarge || !strings.Contains(err.Error(), "10001 messages") {
		t.Errorf("over the thread limit: %v, want too_large naming the count", err)
	}
}

func TestHostileFiles(t *testing.T) {
	t.Parallel()
	msg := func(key, parent, role, text string) string {
		p := "null"
		if parent != "" {
			p = `"` + parent + `"`
		}
		return fmt.Sprintf(`"%s":{"id":"%s","parent":%s,"children":[],"message":{"author":{"role":"%s"},"content":{"content_type":"text","parts":[%s]}}}`, key, key, p, role, text)
	}
	conv := func(nodes ...string) string { return `{"title":"t","mapping":{` + strings.Join(nodes, ",") + `}}` }
	ok := conv(msg("a", "", "user", `"hi"`))
	huge := `"` + strings.Repeat("x", 300<<10) + `"`
	cases := []struct {
		name, file string
		code       errcode.Code
		says       string
	}{
		{"not JSON", `hello`, errcode.Invalid, "must be a JSON array"},
		{"cut off", `[` + ok + `,{"title":`, errcode.Invalid, "conversations[1]"},
		{"wrong type", `[` + ok + `,{"title":"t","mapping":{"a":{"parent":7}}}]`, errcode.Invalid, "conversations[1]"},
		{"mapping a list", `[{"title":"t","mapping":[1,2]}]`, errcode.Invalid, "conversations[0]"},
		{"missing parent", `[` + ok + `,` + ok + `,` + conv(msg("a", "", "user", `"hi"`), msg("abc", "x", "assistant", `"yo"`)) + `]`, errcode.Invalid, `conversations[2].mapping["abc"]: parent "x" not found`},
		{"cycle", `[` + conv(msg("a", "b", "user", `"hi"`), msg("b", "a", "assistant", `"yo"`)) + `]`, errcode.Invalid, "loops"},
		{"self parent", `[` + conv(msg("a", "a", "user", `"hi"`)) + `]`, errcode.Invalid, "loops"},
		{"unknown role", `[` + conv(msg("a", "", "critic", `"hi"`)) + `]`, errcode.Invalid, `mapping["a"].message.author.role`},
		{"bad part", `[` + conv(msg("a", "", "user", `7`)) + `]`, errcode.Invalid, "parts[0]"},
		{"NUL", `[` + conv(msg("a", "", "user", `"a\u0000b"`)) + `]`, errcode.Invalid, "U+0000"},
		{"NUL title", `[{"title":"a\u0000","mapping":{}}]`, errcode.Invalid, "U+0000"},
		{"huge string", `[` + conv(msg("a", "", "user", huge)) + `]`, errcode.TooLarge, "THREADLINE_MAX_MESSAGE"},
		{"not a conversation", `[{"hello":1}]`, errcode.Invalid, "neither"},
		{"trailing garbage", `[` + ok + `] x`, errcode.Invalid, "something follows"},
		{"empty", ``, errcode.Invalid, "empty"},
		{"empty array", `[]`, errcode.Invalid, "no conversation"},
		{"bad version", `{"format":"threadline.thread","version":2,"thread":{"thread_id":"` + uuid.NewString() + `"}}`, errcode.Invalid, "version 2"},
		{"document parent after child", `{"format":"threadline.thread","version":1,"thread":{"thread_id":"` + id(1).String() + `"},"checkpoints":[` +
			`{"id":"` + id(2).String() + `","parent_id":"` + id(3).String() + `","seq":1,"role":"user","content":[],"created_at":"2026-01-01T00:00:00Z"},` +
			`{"id":"` + id(3).String() + `","parent_id":null,"seq":2,"role":"user","content":[],"created_at":"2026-01-01T00:00:00Z"}]}`, errcode.Invalid, "parent"},
		{"owui cycle", `[{"id":"c","title":"t","chat":{"history":{"messages":{"a":{"id":"a","parentId":"b","role":"user","content":"x"},"b":{"id":"b","parentId":"a","role":"assistant","content":"y"}},"currentId":"a"}}}]`, errcode.Invalid, "loops"},
		{"owui wrong type", `[{"id":"c","title":"t","chat":{"history":{"messages":{"a":{"id":"a","parentId":null,"role":"user","content":5}}}}}]`, errcode.Invalid, "conversations[0]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := read(t, []byte(c.file), opt)
			if errcode.Of(err) != c.code || !strings.Contains(err.Error(), c.says) {
				t.Errorf("got %v, want %s saying %q", err, c.code, c.says)
			}
		})
	}
}
