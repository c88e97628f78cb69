package api_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// subagentEvent is a subagent event's fields, decoded from its raw line.
type subagentEvent struct {
	Type       string          `json:"type"`
	RunID      string          `json:"run_id"`
	MessageID  string          `json:"message_id"`
	ToolCallID string          `json:"tool_call_id"`
	ThreadID   string          `json:"thread_id"`
	ChildRunID string          `json:"child_run_id"`
	Event      json.RawMessage `json:"event"`
}

// TestSubagentsOverHTTP: the demo asked to research three options in
// parallel makes three delegate calls; the parent's stream carries each
// child's events as subagent events naming the child, byte for byte the
// child run's own stream; a rejoin at every sequence equals the live
// tail; each call's part names its child; a child thread shows its
// parent, is not listed, and takes a new run; deleting the parent
// deletes the children.
func TestSubagentsOverHTTP(t *testing.T) {
	t.Parallel()
	e := setup(t, withTools(t), withDelay(time.Millisecond))
	tid := newID()
	resp, evs := e.stream(tid, demoRun("Research three options in parallel", nil))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	last := checkRun(t, evs)
	if last.RunStatus != "succeeded" {
		t.Fatalf("parent: got %s, want succeeded", last.RunStatus)
	}
	head := *evs[0].Repository.HeadID
	children := map[string][]json.RawMessage{} // child thread -> its events as the parent's stream carried them
	childRun := map[string]string{}
	calls := map[string]string{} // tool call -> child thread
	for i, ev := range evs {
		if ev.Type != "subagent" {
			continue
		}
		var se subagentEvent
		if err := json.Unmarshal(ev.Raw, &se); err != nil {
			t.Fatal(err)
		}
		if se.RunID != evs[0].RunID || se.MessageID != head || se.ThreadID == "" || se.ChildRunID == "" || se.ToolCallID == "" {
			t.Fatalf("subagent event %d: got %s", i, ev.Raw)
		}
		if c, ok := calls[se.ToolCallID]; ok && c != se.ThreadID {
			t.Fatalf("call %s names two children: %s and %s", se.ToolCallID, c, se.ThreadID)
		}
		calls[se.ToolCallID], childRun[se.ThreadID] = se.ThreadID, se.ChildRunID
		children[se.ThreadID] = append(children[se.ThreadID], se.Event)
	}
	if len(children) != 3 {
		t.Fatalf("children: got %d, want 3", len(children))
	}
	for child, lines := range children {
		own := e.rejoin(child, childRun[child], 0)
		if len(own) != len(lines) {
			t.Fatalf("child %s: its own stream has %d events, the parent's %d", child, len(own), len(lines))
		}
		for i := range own {
			if !bytes.Equal(own[i].Raw, lines[i]) {
				t.Fatalf("child %s event %d:\n own stream %s\n parent's   %s", child, i, own[i].Raw, lines[i])
			}
		}
		if own[0].Type != "snapshot" || own[0].Sequence != 1 || !strings.Contains(string(own[len(own)-1].Raw), `"run_status":"succeeded"`) {
			t.Fatalf("child %s: events from %s to %s, want its first snapshot to its final one", child, own[0].Raw, own[len(own)-1].Raw)
		}
	}
	for n := range evs {
		tail := e.rejoin(tid, evs[0].RunID, n)
		if len(tail) != len(evs)-n {
			t.Fatalf("rejoin after %d: got %d events, want %d", n, len(tail), len(evs)-n)
		}
		for i := range tail {
			if !bytes.Equal(tail[i].Raw, evs[n+i].Raw) {
				t.Fatalf("rejoin after %d, event %d:\n got %s\nwant %s", n, i, tail[i].Raw, evs[n+i].Raw)
			}
		}
	}
	checkSubagentParts(t, lastParts(t, last.Raw), calls, childRun)
	checkChildThreads(t, e, tid, evs[0].RunID, head, calls)
	resp, b := e.do("GET", "/api/v1/threads/"+tid+"/runs/"+evs[0].RunID+"/trace", nil)
	wantStatus(t, resp, b, http.StatusOK, "")
	if n := strings.Count(string(b), `"name":"execute_tool delegate"`); n != 3 {
		t.Fatalf("trace: %d execute_tool delegate spans in %s, want 3", n, b)
	}
	resp, b = e.do("DELETE", "/api/v1/threads/"+tid, nil)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("delete the parent: %d %s", resp.StatusCode, b)
	}
	for _, child := range calls {
		resp, b := e.do("GET", "/api/v1/threads/"+child, nil)
		wantStatus(t, resp, b, http.StatusNotFound, "not_found")
	}
}

// rejoin reads a run's stream after sequence n.
func (e *env) rejoin(tid, runID string, n int) []event {
	e.t.Helper()
	resp, b := e.do("GET", "/api/v1/threads/"+tid+"/runs/"+runID+"/stream?after="+strconv.Itoa(n), nil)
	wantStatus(e.t, resp, b, http.StatusOK, "")
	return readEvents(e.t, bytes.NewReader(b))
}

// checkSubagentParts checks that each delegate call's part names its
// child thread and run and holds the child's answer.
func checkSubagentParts(t *testing.T, parts []json.RawMessage, calls, childRun map[string]string) {
	t.Helper()
	n := 0
	for _, raw := range parts {
		var p struct {
			Type       string `json:"type"`
			ToolCallID string `json:"toolCallId"`
			ToolName   string `json:"toolName"`
			Result     string `json:"result"`
			IsError    bool   `json:"isError"`
			Subagent   *struct {
				ThreadID string `json:"thread_id"`
				RunID    string `json:"run_id"`
			} `json:"subagent"`
		}
		if err := json.Unmarshal(raw, &p); err != nil {
			t.Fatal(err)
		}
		if p.Type != "tool-call" {
			continue
		}
		n++
		child := calls[p.ToolCallID]
		if p.ToolName != "delegate" || p.IsError || p.Subagent == nil || p.Subagent.ThreadID != child || p.Subagent.RunID != childRun[child] ||
			!strings.Contains(p.Result, "for storing chat history") {
			t.Fatalf("delegate part: got %s, want its child %s and its answer", raw, child)
		}
	}
	if n != 3 {
		t.Fatalf("delegate parts: got %d, want 3", n)
	}
}

// checkChildThreads checks that every child names its parent, that the
// list holds the parent alone, and that a child takes a new run.
func checkChildThreads(t *testing.T, e *env, tid, runID, head string, calls map[string]string) {
	t.Helper()
	for call, child := range calls {
		resp, b := e.do("GET", "/api/v1/threads/"+child, nil)
		wantStatus(t, resp, b, http.StatusOK, "")
		var th struct {
			Parent *struct {
				ThreadID   string `json:"thread_id"`
				RunID      string `json:"run_id"`
				MessageID  string `json:"message_id"`
				ToolCallID string `json:"tool_call_id"`
			} `json:"parent"`
		}
		if err := json.Unmarshal(b, &th); err != nil {
			t.Fatal(err)
		}
		if p := th.Parent; p == nil || p.ThreadID != tid || p.RunID != runID || p.MessageID != head || p.ToolCallID != call {
			t.Fatalf("child thread %s: got %s, want its parent named", child, b)
		}
	}
	resp, b := e.do("GET", "/api/v1/threads/"+tid, nil)
	wantStatus(t, resp, b, http.StatusOK, "")
	if strings.Contains(string(b), `"parent"`) {
		t.Fatalf("the parent thread: got %s, want no parent field", b)
	}
	resp, b = e.do("GET", "/api/v1/threads", nil)
	wantStatus(t, resp, b, http.StatusOK, "")
	var page struct {
		Threads []struct {
			ThreadID string `json:"thread_id"`
		} `json:"threads"`
	}
	if err := json.Unmarshal(b, &page); err != nil || len(page.Threads) != 1 || page.Threads[0].ThreadID != tid {
		t.Fatalf("list: got %s, want the parent alone", b)
	}
	for _, child := range calls {
		resp, evs := e.stream(child, demoRun("And in one word?", nil))
		if resp.StatusCode != http.StatusOK || checkRun(t, evs).RunStatus != "succeeded" {
			t.Fatalf("a new run on child %s: status %d", child, resp.StatusCode)
		}
		break
	}
}

// TestUIChatSkipsSubagents: the AI SDK stream of a delegated turn leaves
// the sub-agents' events out: it shows the three delegate calls with
// their results, then the summary.
func TestUIChatSkipsSubagents(t *testing.T) {
	t.Parallel()
	e := setup(t, withTools(t))
	_, _, evs := e.uiPost(map[string]any{"id": newID(), "trigger": "submit-message", "run_config": map[string]any{"model": "builtin:demo"},
		"messages": []any{userMsg(newID(), "Research three options in parallel")}})
	checkUIRun(t, evs)
	got := types(evs)
	if n := strings.Count(got, "tool-output-available"); n != 3 || strings.Contains(got, "subagent") || !strings.Contains(deltas(evs), "Summary: 3 sub-agents") {
		t.Fatalf("chunks: got %s (%d results), text %q; want three delegate results and the summary", got, n, deltas(evs))
	}
}
