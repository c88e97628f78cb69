package api_test

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/threadline/threadline/api"
)

// importResult is POST /threads/import's answer.
type importResult struct {
	Threads []struct {
		ThreadID string  `json:"thread_id"`
		Title    *string `json:"title"`
		Messages int     `json:"messages"`
	} `json:"threads"`
}

func (e *env) importFile(ct string, body []byte) (*http.Response, []byte, importResult) {
	e.t.Helper()
	resp, b := e.do("POST", "/api/v1/threads/import", body, "Content-Type", ct)
	var res importResult
	if resp.StatusCode == http.StatusCreated {
		if err := json.Unmarshal(b, &res); err != nil {
			e.t.Fatalf("import answer %s: %v", b, err)
		}
	}
	return resp, b, res
}

func (e *env) threadCount() int {
	e.t.Helper()
	resp, b := e.do("GET", "/api/v1/threads", nil)
	wantStatus(e.t, resp, b, http.StatusOK, "")
	var l struct {
		Threads []json.RawMessage `json:"threads"`
	}
	json.Unmarshal(b, &l)
	return len(l.Threads)
}

// agentThread makes a thread with the demo model: an agent turn with
// tool calls, a regenerated reply beside it, and a plan.
func (e *env) agentThread() string {
	e.t.Helper()
	tid := newID()
	_, evs := e.stream(tid, demoRun("what is 12*7?", nil))
	checkRun(e.t, evs)
	snap := e.snapshot(tid)
	user, agent := snap.Messages[0].ID, snap.Messages[1].ID
	_, evs = e.stream(tid, map[string]any{"parent_message_id": user, "run_config": map[string]any{"model": "builtin:demo"}})
	checkRun(e.t, evs)
	// The plan goes under the agent turn with the calculator: the shown branch.
	plan := demoRun("make a plan for a picnic", nil)
	plan["parent_message_id"] = agent
	_, evs = e.stream(tid, plan)
	checkRun(e.t, evs)
	return tid
}

func TestExportImportRoundTrip(t *testing.T) {
	t.Parallel()
	e := setup(t, withTools(t))
	tid := e.agentThread()
	resp, doc := e.do("GET", "/api/v1/threads/"+tid+"/export?format=json", nil)
	wantStatus(t, resp, doc, http.StatusOK, "")
	if cd := resp.Header.Get("Content-Disposition"); !strings.HasPrefix(cd, "attachment; filename=") || !strings.Contains(cd, tid[:8]+".json") {
		t.Errorf("Content-Disposition %q", cd)
	}
	resp, md := e.do("GET", "/api/v1/threads/"+tid+"/export?format=markdown", nil)
	wantStatus(t, resp, md, http.StatusOK, "")
	for _, want := range []string{"thread_id: " + tid, "**Tool call `calculator`**", "- [x] ", "model `builtin:demo`", "status **succeeded**"} {
		if !bytes.Contains(md, []byte(want)) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/markdown") {
		t.Errorf("markdown Content-Type %q", resp.Header.Get("Content-Type"))
	}
	_, md2 := e.do("GET", "/api/v1/threads/"+tid+"/export?format=markdown", nil)
	if !bytes.Equal(md, md2) {
		t.Error("the same thread exported twice as Markdown differs")
	}

	// Delete, import the export: the same ids, and the same bytes out.
	resp, b := e.do("DELETE", "/api/v1/threads/"+tid, nil)
	wantStatus(t, resp, b, http.StatusNoContent, "")
	resp, b, res := e.importFile("application/json", doc)
	wantStatus(t, resp, b, http.StatusCreated, "")
	if len(res.Threads) != 1 || res.Threads[0].ThreadID != tid {
		t.Fatalf("import answered %s, want the thread's own id %s", b, tid)
	}
	resp, again := e.do("GET", "/api/v1/threads/"+tid+"/export?format=json", nil)
	wantStatus(t, resp, again, http.StatusOK, "")
	if !bytes.Equal(doc, again) {
		t.Errorf("export → import → export is not byte-exact:\nfirst:\n%s\nthen:\n%s", doc, again)
	}
	// The imported thread serves snapshots and takes new runs.
	snap := e.snapshot(tid)
	_, evs := e.stream(tid, newMessage("and 6*7?", &snap.Messages[len(snap.Messages)-1].ID))
	checkRun(t, evs)

	// The same file again: the ids are taken, so new ones.
	resp, b, res = e.importFile("application/json", doc)
	wantStatus(t, resp, b, http.StatusCreated, "")
	if len(res.Threads) != 1 || res.Threads[0].ThreadID == tid {
		t.Fatalf("a second import kept the taken id: %s", b)
	}
	resp, other := e.do("GET", "/api/v1/threads/"+res.Threads[0].ThreadID+"/export", nil)
	wantStatus(t, resp, other, http.StatusOK, "")
	if bytes.Contains(other, []byte(tid)) {
		t.Error("the renewed thread still names the old thread id")
	}
}

func TestExportBranchAndErrors(t *testing.T) {
	t.Parallel()
	e := setup(t)
	tid := newID()
	_, evs := e.stream(tid, newMessage("first", nil))
	checkRun(t, evs)
	snap := e.snapshot(tid)
	first := snap.Messages[1].ID
	_, evs = e.stream(tid, map[string]any{"parent_message_id": snap.Messages[0].ID})
	checkRun(t, evs)
	resp, md := e.do("GET", "/api/v1/threads/"+tid+"/export?format=markdown&message_id="+first, nil)
	wantStatus(t, resp, md, http.StatusOK, "")
	if !bytes.Contains(md, []byte("head: "+first)) {
		t.Errorf("the branch asked for is not the head:\n%s", md)
	}
	resp, doc := e.do("GET", "/api/v1/threads/"+tid+"/export?message_id="+first, nil)
	wantStatus(t, resp, doc, http.StatusOK, "")
	if !bytes.Contains(doc, []byte(`"head": "`+first+`"`)) {
		t.Errorf("JSON head is not the branch asked for")
	}
	for _, c := range []struct {
		q      string
		status int
		code   string
	}{
		{"?format=pdf", 400, "invalid_request"},
		{"?message_id=nope", 400, "invalid_request"},
		{"?message_id=" + newID(), 404, "not_found"},
		{"?attachments=all", 400, "invalid_request"},
	} {
		resp, b := e.do("GET", "/api/v1/threads/"+tid+"/export"+c.q, nil)
		wantStatus(t, resp, b, c.status, c.code)
	}
	resp, b := e.do("GET", "/api/v1/threads/"+newID()+"/export", nil)
	wantStatus(t, resp, b, http.StatusNotFound, "not_found")
}

func TestImportCallerIsolation(t *testing.T) {
	t.Parallel()
	e := setup(t, threeCallers)
	e.key = "bob-key"
	tid := newID()
	_, evs := e.stream(tid, newMessage("bob's secret", nil))
	checkRun(t, evs)
	resp, doc := e.do("GET", "/api/v1/threads/"+tid+"/export", nil)
	wantStatus(t, resp, doc, http.StatusOK, "")

	e.key = "alice-key"
	resp, b := e.do("GET", "/api/v1/threads/"+tid+"/export", nil)
	wantStatus(t, resp, b, http.StatusNotFound, "not_found")
	// Alice imports a file naming bob's ids: she gets a copy under new ids.
	resp, b, res := e.importFile("application/json", doc)
	wantStatus(t, resp, b, http.StatusCreated, "")
	if len(res.Threads) != 1 || res.Threads[0].ThreadID == tid {
		t.Fatalf("alice's import took bob's thread id: %s", b)
	}
	e.key = "bob-key"
	resp, again := e.do("GET", "/api/v1/threads/"+tid+"/export", nil)
	wantStatus(t, resp, again, http.StatusOK, "")
	if !bytes.Equal(doc, again) {
		t.Error("alice's import changed bob's thread")
	}
	resp, b = e.do("GET", "/api/v1/threads/"+res.Threads[0].ThreadID, nil)
	wantStatus(t, resp, b, http.StatusNotFound, "not_found")
}

func multipartBody(t *testing.T, name string, data []byte) (string, []byte) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	w, err := mw.CreateFormFile("file", name)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(data)
	mw.Close()
	return mw.FormDataContentType(), buf.Bytes()
}

func TestImportChatGPTAndOpenWebUI(t *testing.T) {
	t.Parallel()
	e := setup(t)
	conv, err := os.ReadFile("../thread/export/testdata/chatgpt/conversations.json")
	if err != nil {
		t.Fatal(err)
	}
	ct, body := multipartBody(t, "conversations.json", conv)
	resp, b, res := e.importFile(ct, body)
	wantStatus(t, resp, b, http.StatusCreated, "")
	if len(res.Threads) != 2 || res.Threads[0].Messages != 8 || res.Threads[1].Messages != 2 {
		t.Fatalf("ChatGPT import: %s", b)
	}
	snap := e.snapshot(res.Threads[0].ThreadID)
	if n := len(snap.Messages); n != 2 || !strings.Contains(snap.Messages[1].Text(), "**5**") {
		t.Errorf("shown branch: %d messages, last %q", n, snap.Messages[n-1].Text())
	}

	owui, err := os.ReadFile("../thread/export/testdata/openwebui/chat-export.json")
	if err != nil {
		t.Fatal(err)
	}
	var zb bytes.Buffer
	zw := zip.NewWriter(&zb)
	w, _ := zw.Create("chats/capital.json")
	w.Write(owui)
	zw.Close()
	resp, b, res = e.importFile("application/zip", zb.Bytes())
	wantStatus(t, resp, b, http.StatusCreated, "")
	if len(res.Threads) != 1 || res.Threads[0].Messages != 5 || *res.Threads[0].Title != "Capital of France" {
		t.Fatalf("Open WebUI ZIP import: %s", b)
	}
	snap = e.snapshot(res.Threads[0].ThreadID)
	if n := len(snap.Messages); n != 4 || snap.Messages[3].Text() != "Rome." {
		t.Errorf("Open WebUI shown branch: %d messages", n)
	}
}

func TestImportHostileWritesNothing(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *options) { o.api = func(c *api.Config) { c.MaxImport = 64 << 10 } })
	good := `{"title":"ok","mapping":{"a":{"parent":null,"message":{"author":{"role":"user"},"content":{"content_type":"text","parts":["hi"]}}}}}`
	bad := `{"title":"bad","mapping":{"a":{"parent":null,"message":{"author":{"role":"user"},"content":{"content_type":"text","parts":["hi"]}}},"abc":{"parent":"x","message":null}}}`
	cases := []struct {
		name, ct string
		body     []byte
		status   int
		code     string
		says     string
	}{
		{"missing parent after good ones", "application/json", []byte("[" + good + "," + good + "," + bad + "]"), 400, "invalid_request", `conversations[2].mapping["abc"]: parent "x" not found`},
		{"too large", "application/json", []byte("[" + good + "," + `{"title":"` + strings.Repeat("x", 200<<10) + `"}]`), 413, "too_large", "THREADLINE_MAX_IMPORT"},
		{"NUL", "application/json", []byte(`[` + good + `,{"title":"a\u0000","mapping":{}}]`), 400, "invalid_request", "U+0000"},
		{"not a file type", "text/plain", []byte(good), 415, "unsupported_media_type", "multipart"},
		{"no file field", "multipart/form-data; boundary=x", []byte("--x\r\nContent-Disposition: form-data; name=\"other\"\r\n\r\nhi\r\n--x--\r\n"), 400, "invalid_request", "field \"file\""},
	}
	for _, c := range cases {
		resp, b, _ := e.importFile(c.ct, c.body)
		wantStatus(t, resp, b, c.status, c.code)
		if !bytes.Contains(b, []byte(strings.ReplaceAll(c.says, `"`, `\"`))) {
			t.Errorf("%s: %s does not say %q", c.name, b, c.says)
		}
	}
	if n := e.threadCount(); n != 0 {
		t.Errorf("refused imports wrote %d threads", n)
	}
	resp, b, _ := e.importFile("application/json", []byte("["+good+"]"))
	wantStatus(t, resp, b, http.StatusCreated, "")
	if n := e.threadCount(); n != 1 {
		t.Errorf("%d threads after one good import", n)
	}
	_ = fmt.Sprint
}

// TestExportInlineAttachments: an export with attachments inline carries
// their bytes; it imports back byte-exact for its caller, and for another
// caller the bytes are stored under a new id that the copy names.
func TestExportInlineAttachments(t *testing.T) {
	t.Parallel()
	e := setup(t, threeCallers)
	e.key = "alice-key"
	att := e.upload("notes.txt", "text/plain", []byte("hello notes"))
	tid := newID()
	_, evs := e.stream(tid, map[string]any{"message": map[string]any{"content": "read this", "attachments": []any{map[string]any{"id": att}}}})
	checkRun(t, evs)
	resp, doc := e.do("GET", "/api/v1/threads/"+tid+"/export?attachments=inline", nil)
	wantStatus(t, resp, doc, http.StatusOK, "")
	if !bytes.Contains(doc, []byte(`"data": "aGVsbG8gbm90ZXM="`)) {
		t.Fatalf("no inline bytes in\n%s", doc)
	}
	resp, b := e.do("DELETE", "/api/v1/threads/"+tid, nil)
	wantStatus(t, resp, b, http.StatusNoContent, "")
	resp, b, _ = e.importFile("application/json", doc)
	wantStatus(t, resp, b, http.StatusCreated, "")
	_, again := e.do("GET", "/api/v1/threads/"+tid+"/export?attachments=inline", nil)
	if !bytes.Equal(doc, again) {
		t.Errorf("inline export → import → export differs:\n%s\n%s", doc, again)
	}

	e.key = "bob-key"
	resp, b, res := e.importFile("application/json", doc)
	wantStatus(t, resp, b, http.StatusCreated, "")
	resp, copyDoc := e.do("GET", "/api/v1/threads/"+res.Threads[0].ThreadID+"/export?attachments=inline", nil)
	wantStatus(t, resp, copyDoc, http.StatusOK, "")
	if bytes.Contains(copyDoc, []byte(att)) || !bytes.Contains(copyDoc, []byte(`"data": "aGVsbG8gbm90ZXM="`)) {
		t.Fatalf("bob's copy names alice's attachment or lacks the bytes:\n%s", copyDoc)
	}
	var d struct {
		Checkpoints []struct {
			Attachments []struct {
				ID string `json:"id"`
			} `json:"attachments"`
		} `json:"checkpoints"`
	}
	json.Unmarshal(copyDoc, &d)
	resp, data := e.do("GET", "/api/v1/attachments/"+d.Checkpoints[0].Attachments[0].ID, nil)
	wantStatus(t, resp, data, http.StatusOK, "")
	if string(data) != "hello notes" {
		t.Errorf("bob's attachment holds %q", data)
	}
}

// TestImportedRunRejoin: an imported run has no event log; its rejoin
// ends at once with a final snapshot, and GET …/runs/{run_id} answers it.
func TestImportedRunRejoin(t *testing.T) {
	t.Parallel()
	e := setup(t)
	tid := newID()
	_, evs := e.stream(tid, newMessage("hello", nil))
	checkRun(t, evs)
	_, doc := e.do("GET", "/api/v1/threads/"+tid+"/export", nil)
	var d struct {
		Runs []struct {
			RunID string `json:"run_id"`
		} `json:"runs"`
	}
	json.Unmarshal(doc, &d)
	e.do("DELETE", "/api/v1/threads/"+tid, nil)
	resp, b, _ := e.importFile("application/json", doc)
	wantStatus(t, resp, b, http.StatusCreated, "")
	resp, b = e.do("GET", "/api/v1/threads/"+tid+"/runs/"+d.Runs[0].RunID, nil)
	wantStatus(t, resp, b, http.StatusOK, "")
	done := make(chan []byte, 1)
	go func() {
		_, b := e.do("GET", "/api/v1/threads/"+tid+"/runs/"+d.Runs[0].RunID+"/stream?after=0", nil)
		done <- b
	}()
	select {
	case b := <-done:
		evs := readEvents(t, bytes.NewReader(b))
		if len(evs) != 1 || evs[0].Type != "snapshot" || evs[0].RunStatus != "succeeded" || len(evs[0].Messages) != 2 {
			t.Fatalf("rejoin of an imported run: %s, want its final snapshot", b)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the rejoin of an imported run did not end")
	}
}
