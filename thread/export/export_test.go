package export_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/export"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func id(n int) uuid.UUID {
	return uuid.MustParse("00000000-0000-4000-8000-" + strings.Repeat("0", 12-len(itoa(n))) + itoa(n))
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

func at(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }

// agentThread is a thread with one agent turn (reasoning, a plan, a tool
// call and its result, a failed tool call, files, a source) and a
// regenerated plain reply beside it, the agent turn shown.
func agentThread() *thread.ThreadExport {
	title := "Multiply and plan"
	done := &checkpoint.Status{Type: "complete", Reason: "stop"}
	plan := func(second string) json.RawMessage {
		return json.RawMessage(`{"id":"plan_1","title":"Plan","tasks":[{"id":"1","title":"Compute 12*7","status":"done"},{"id":"2","title":"Check the clock","status":"` + second + `"}]}`)
	}
	nodes := []checkpoint.Node{
		{ID: id(1), Seq: 1, Role: checkpoint.RoleUser, Content: []checkpoint.Part{{Type: "text", Text: "What is 12*7? Then tell me the time."}}, CreatedAt: at(0), RunID: id(101),
			Attachments: []checkpoint.Attachment{{ID: id(900).String(), Type: "document", Name: "notes.txt", ContentType: "text/plain", Size: 12, URL: "/api/v1/attachments/" + id(900).String(), Content: []checkpoint.Part{}}}},
		{ID: id(2), Seq: 2, ParentID: id(1), Role: checkpoint.RoleAssistant, Status: done, RunID: id(101), CreatedAt: at(1),
			Content: []checkpoint.Part{{Type: "text", Text: "84, and I could not read the clock."}}},
		{ID: id(3), Seq: 3, ParentID: id(1), Role: checkpoint.RoleAssistant, Status: done, RunID: id(102), CreatedAt: at(10), Content: []checkpoint.Part{
			{Type: "reasoning", Text: "The user wants a product and the time.\nI will plan, then call the calculator and the clock."},
			{Type: "data", Name: "plan", Data: plan("pending")},
			{Type: "tool-call", ToolCallID: "c1", ToolName: "calculator", Args: json.RawMessage(`{"expression":"12*7"}`), ArgsText: `{"expression":"12*7"}`, Result: json.RawMessage(`84`)},
			{Type: "tool-call", ToolCallID: "c2", ToolName: "clock", Args: json.RawMessage(`{"zone":"Mars/Olympus"}`), ArgsText: `{"zone":"Mars/Olympus"}`, Result: json.RawMessage(`"unknown time zone \"Mars/Olympus\""`), IsError: true},
			{Type: "data", Name: "plan", Data: plan("done")},
			{Type: "text", Text: "12*7 is **84**. The clock tool failed: it does not know that zone.\n\n```go\nfmt.Println(12*7)\n```"},
			{Type: "data", Name: "files", Data: json.RawMessage(`[{"filepath":"out/result.txt","filename":"result.txt","url":"/api/v1/attachments/` + id(901).String() + `"}]`)},
			{Type: "source", SourceType: "url", ID: "s1", URL: "https://example.com/multiplication", Title: "Multiplication [basics]"},
		}},
	}
	fin := func(s int) *time.Time { v := at(s); return &v }
	runs := []*thread.Run{
		{ID: id(101), Status: thread.RunSucceeded, UserMessageID: id(1), ParentID: id(1), MessageID: id(2), Model: "builtin",
			Usage: &thread.Usage{PromptTokens: 12, CompletionTokens: 9}, CreatedAt: at(0), FinishedAt: fin(1)},
		{ID: id(102), Status: thread.RunSucceeded, ParentID: id(1), MessageID: id(3), Model: "demo-agent", Config: thread.RunConfig{Model: "demo-agent", MaxSteps: 4},
			Usage: &thread.Usage{PromptTokens: 120, CompletionTokens: 64}, CreatedAt: at(9), FinishedAt: func() *time.Time { v := at(12).Add(345 * time.Millisecond); return &v }()},
	}
	for i := range nodes {
		nodes[i].ThreadID = id(500)
	}
	return &thread.ThreadExport{
		Thread: &thread.Thread{ID: id(500), Caller: "alice", Title: &title, Metadata: json.RawMessage(`{"project": "demo"}`), HeadID: id(3), LastSeq: 3, CreatedAt: at(0), UpdatedAt: at(12)},
		Nodes:  nodes, Runs: runs,
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(p, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test -update rewrites it); got:\n%s", name, got)
	}
}

func TestMarkdownAgentRunGolden(t *testing.T) {
	t.Parallel()
	got, err := export.Markdown(agentThread(), uuid.Nil)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "agent.md", got)
	again, _ := export.Markdown(agentThread(), uuid.Nil)
	if !bytes.Equal(got, again) {
		t.Error("the same thread gave other bytes the second time")
	}
}

func TestMarkdownOtherBranch(t *testing.T) {
	t.Parallel()
	got, err := export.Markdown(agentThread(), id(2))
	if err != nil {
		t.Fatal(err)
	}
	s := string(got)
	for _, want := range []string{"head: " + id(2).String(), "84, and I could not read the clock.", "model `builtin`", "12 prompt + 9 completion tokens"} {
		if !strings.Contains(s, want) {
			t.Errorf("markdown of the other branch lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "Tool call") {
		t.Error("the other branch shows the agent turn's tool calls")
	}
	if _, err := export.Markdown(agentThread(), id(77)); errcode.Of(err) != errcode.NotFound {
		t.Errorf("a message not in the thread: got %v, want not_found", err)
	}
}

func TestDocumentGolden(t *testing.T) {
	t.Parallel()
	d, err := export.Build(agentThread(), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := d.Encode()
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "agent.json", got)
	var back map[string]any
	if err := json.Unmarshal(got, &back); err != nil {
		t.Fatal(err)
	}
	if back["format"] != "threadline.thread" || back["version"] != float64(1) || back["head"] != id(3).String() {
		t.Errorf("format %v version %v head %v", back["format"], back["version"], back["head"])
	}
}

func TestDocumentInlineAttachments(t *testing.T) {
	t.Parallel()
	d, err := export.Build(agentThread(), func(string) ([]byte, error) { return []byte("hello, notes"), nil })
	if err != nil {
		t.Fatal(err)
	}
	b, _ := d.Encode()
	if !bytes.Contains(b, []byte(`"data": "aGVsbG8sIG5vdGVz"`)) {
		t.Errorf("inline attachment: no base64 data in\n%s", b)
	}
}

// read runs a Reader over the file to the end.
func read(t *testing.T, data []byte, opt export.Options) ([]*thread.ImportThread, error) {
	t.Helper()
	rd, err := export.NewReader(bytes.NewReader(data), opt)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	var out []*thread.ImportThread
	for {
		it, err := rd.Next()
		if err != nil {
			if err.Error() == "EOF" {
				return out, nil
			}
			return out, err
		}
		out = append(out, it)
	}
}

func TestDocumentReadBack(t *testing.T) {
	t.Parallel()
	x := agentThread()
	d, _ := export.Build(x, nil)
	b, _ := d.Encode()
	its, err := read(t, b, export.Options{})
	if err != nil || len(its) != 1 {
		t.Fatalf("read: %d threads, %v", len(its), err)
	}
	it := its[0]
	back := &thread.ThreadExport{Thread: &it.Thread, Nodes: it.Nodes}
	back.Thread.HeadID = it.Head
	for i := range it.Runs {
		back.Runs = append(back.Runs, &it.Runs[i])
	}
	d2, err := export.Build(back, nil)
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := d2.Encode()
	if !bytes.Equal(b, b2) {
		t.Errorf("read back and exported again, the document differs:\n%s", b2)
	}
}
