package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/thread"
)

type rawLine struct {
	N        int64           `json:"n"`
	Sequence int64           `json:"sequence"`
	Source   string          `json:"source"`
	Kind     string          `json:"kind"`
	At       time.Time       `json:"at"`
	Data     json.RawMessage `json:"data"`
}

func readRaw(t *testing.T, b []byte) []rawLine {
	t.Helper()
	var out []rawLine
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var l rawLine
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&l); err != nil {
			t.Fatalf("raw line %q: %v", sc.Text(), err)
		}
		out = append(out, l)
	}
	return out
}

// TestRunRaw: GET …/runs/{run_id}/raw answers the run's raw records as
// NDJSON in order, across the store's pages, with the sequence of the
// event each produced; another caller's, another thread's or an unknown
// run is 404, and a run without records is an empty 200.
func TestRunRaw(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *options) { o.keys = map[string]string{"alice-key": "alice", "bob-key": "bob"} })
	e.key = "alice-key"
	tid := newID()
	resp, evs := e.stream(tid, newMessage("hello", nil))
	wantStatus(t, resp, nil, http.StatusOK, "")
	runID := uuid.MustParse(evs[0].RunID)
	path := "/api/v1/threads/" + tid + "/runs/" + runID.String() + "/raw"

	resp, b := e.do("GET", path, nil)
	wantStatus(t, resp, b, http.StatusOK, "")
	if ct := resp.Header.Get("Content-Type"); ct != "application/x-ndjson" || len(b) != 0 {
		t.Fatalf("a run without records: got %q %q, want an empty application/x-ndjson body", ct, b)
	}

	// What the engine writes through thread.RawSink, more than a page of it.
	at := time.Date(2026, 11, 25, 9, 30, 0, 0, time.UTC)
	call := `{"tool_call_id":"c1","tool_name":"calculator","input":"{\"expression\":\"12*7\"}","output":84,"is_error":false}`
	recs := []thread.RawRecord{
		{Sequence: 2, Source: "provider", Kind: "chunk", Data: json.RawMessage(`"data: {\"choices\":[{\"delta\":{\"content\":\"he\"}}]}"`), At: at},
		{Sequence: 3, Source: "tool", Kind: "call", Data: json.RawMessage(call), At: at},
	}
	for i := range 1200 {
		recs = append(recs, thread.RawRecord{Sequence: int64(4 + i), Source: "provider", Kind: "chunk", Data: json.RawMessage(fmt.Sprintf(`"data: %d"`, i)), At: at})
	}
	if err := e.store.RunRawAppend(context.Background(), runID, recs); err != nil {
		t.Fatal(err)
	}
	resp, b = e.do("GET", path, nil)
	wantStatus(t, resp, b, http.StatusOK, "")
	lines := readRaw(t, b)
	if len(lines) != len(recs) {
		t.Fatalf("lines: got %d, want %d", len(lines), len(recs))
	}
	for i, l := range lines {
		r := recs[i]
		if l.N != int64(i+1) || l.Sequence != r.Sequence || l.Source != r.Source || l.Kind != r.Kind || string(l.Data) != string(r.Data) || !l.At.Equal(at) {
			t.Fatalf("line %d: got %+v, want n %d and %d %s/%s %s at %v", i, l, i+1, r.Sequence, r.Source, r.Kind, r.Data, at)
		}
	}

	e.key = "bob-key"
	resp, b = e.do("GET", path, nil)
	wantStatus(t, resp, b, http.StatusNotFound, "not_found")
	e.key = "alice-key"
	for _, p := range []string{
		"/api/v1/threads/" + tid + "/runs/" + newID() + "/raw",
		"/api/v1/threads/" + newID() + "/runs/" + runID.String() + "/raw",
	} {
		resp, b = e.do("GET", p, nil)
		wantStatus(t, resp, b, http.StatusNotFound, "not_found")
	}
	resp, b = e.do("GET", "/api/v1/threads/"+tid+"/runs/nope/raw", nil)
	wantStatus(t, resp, b, http.StatusBadRequest, "invalid_request")

	// Deleted with the thread.
	resp, b = e.do("DELETE", "/api/v1/threads/"+tid, nil)
	wantStatus(t, resp, b, http.StatusNoContent, "")
	resp, b = e.do("GET", path, nil)
	wantStatus(t, resp, b, http.StatusNotFound, "not_found")
}

// TestRunRawThroughTheEngine: with the service's RawSink a RawWriter over
// the store, a run on an OpenAI-compatible server (the real langchaingo
// client against a local server) keeps every non-empty line of the
// server's SSE response, each with the sequence of the event it led to,
// and a demo agent run keeps its calculator call's input and output.
func TestRunRawThroughTheEngine(t *testing.T) {
	t.Parallel()
	fake := newFakeOpenAI(t)
	models := filepath.Join(t.TempDir(), "models.json")
	cfg := fmt.Sprintf(`{"models":[{"name":"fake","provider":"openai","model":"fake-model","base_url":%q,"api_key_env":"FAKE_KEY"}]}`, fake.srv.URL+"/v1")
	if err := os.WriteFile(models, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	e := setup(t, withTools(t), func(o *options) { o.raw = true },
		withVars(map[string]string{"THREADLINE_MODELS_FILE": models, "FAKE_KEY": "fake-key"}))
	tid := newID()
	resp, evs := e.stream(tid, map[string]any{"message": map[string]any{"content": "hello"}, "run_config": map[string]any{"model": "fake"}})
	wantStatus(t, resp, nil, http.StatusOK, "")
	final := checkRun(t, evs)
	chatRun := evs[0].RunID
	parent := final.Messages[len(final.Messages)-1].ID
	resp, evs = e.stream(tid, map[string]any{"message": map[string]any{"content": "what is 12*7?"}, "parent_message_id": parent,
		"run_config": map[string]any{"model": "builtin:demo"}})
	wantStatus(t, resp, nil, http.StatusOK, "")
	checkRun(t, evs)
	agentRun := evs[0].RunID
	var resultSeq int64
	for _, ev := range evs {
		if ev.Type == "tool_result" {
			resultSeq = ev.Sequence
		}
	}
	e.raw.Stop() // writes what is queued

	resp, b := e.do("GET", "/api/v1/threads/"+tid+"/runs/"+chatRun+"/raw", nil)
	wantStatus(t, resp, b, http.StatusOK, "")
	var got []string
	for _, l := range readRaw(t, b) {
		var line string
		if err := json.Unmarshal(l.Data, &line); err != nil || l.Source != "provider" || l.Kind != "chunk" {
			t.Fatalf("chat run record %+v: want provider/chunk holding a line", l)
		}
		got = append(got, fmt.Sprintf("%d %.40s", l.Sequence, line))
	}
	// The snapshot is event 1; "reply" and " 1" are tokens 2 and 3 (the
	// first 40 bytes of each line).
	want := []string{
		`2 data: {"choices":[{"delta":{"content":""`, // the role
		`2 data: {"choices":[{"delta":{"content":"r`, // "reply"
		`3 data: {"choices":[{"delta":{"content":" `, // " 1"
		`4 data: {"choices":[{"delta":{},"finish_re`, // the end: the final snapshot's sequence
		`4 data: [DONE]`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("chat run records:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	resp, b = e.do("GET", "/api/v1/threads/"+tid+"/runs/"+agentRun+"/raw", nil)
	wantStatus(t, resp, b, http.StatusOK, "")
	lines := readRaw(t, b)
	if len(lines) != 1 || lines[0].Source != "tool" || lines[0].Kind != "call" || lines[0].Sequence != resultSeq {
		t.Fatalf("agent run records: got %+v, want one tool/call at the tool_result's sequence %d", lines, resultSeq)
	}
	var call struct {
		ToolCallID string          `json:"tool_call_id"`
		ToolName   string          `json:"tool_name"`
		Input      string          `json:"input"`
		Output     json.RawMessage `json:"output"`
		IsError    bool            `json:"is_error"`
	}
	if err := json.Unmarshal(lines[0].Data, &call); err != nil || call.ToolName != "calculator" || call.Input != `{"expression":"12*7"}` ||
		string(call.Output) != "84" || call.IsError || call.ToolCallID == "" {
		t.Errorf("the calculator call: got %s, want its input {\"expression\":\"12*7\"} and output 84", lines[0].Data)
	}
}
