package api_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/threadline/threadline/api/wire"
	"github.com/threadline/threadline/thread"
)

// TestRunTrace: GET …/runs/{run_id}/trace of a demo agent run with three
// parallel tool calls (one failing, one waiting) answers the run span,
// its two model calls and the three calls as children of the first, side
// by side in time, the failed one marked; another caller, another thread
// and an unknown run get 404, and a bad id 400.
func TestRunTrace(t *testing.T) {
	t.Parallel()
	e := setup(t, withTools(t), func(o *options) { o.keys = map[string]string{"alice-key": "alice", "bob-key": "bob"} })
	e.key = "alice-key"
	tid := newID()
	resp, evs := e.stream(tid, demoRun("what is 12*7, what time is it in Mars/Phobos, and wait 1 second", nil))
	wantStatus(t, resp, nil, http.StatusOK, "")
	checkRun(t, evs)
	runID := evs[0].RunID
	path := "/api/v1/threads/" + tid + "/runs/" + runID + "/trace"

	resp, b := e.do("GET", path, nil)
	wantStatus(t, resp, b, http.StatusOK, "")
	var tr wire.Trace
	if err := json.Unmarshal(b, &tr); err != nil {
		t.Fatalf("trace %s: %v", b, err)
	}
	if tr.RunID != runID || tr.ThreadID != tid || tr.Status != thread.RunSucceeded {
		t.Fatalf("trace of %s/%s %s, want %s/%s succeeded", tr.ThreadID, tr.RunID, tr.Status, tid, runID)
	}
	byName := map[string]wire.Span{}
	var names []string
	for _, s := range tr.Spans {
		byName[s.Name] = s
		names = append(names, s.Name+":"+s.Status)
	}
	want := []string{"invoke_agent threadline:ok", "chat demo:ok", "execute_tool calculator:ok", "execute_tool clock:error",
		"execute_tool wait:ok", "chat demo:ok"}
	if len(names) != len(want) {
		t.Fatalf("spans %v, want %v", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Fatalf("spans %v, want %v", names, want)
		}
	}
	run, step1, step2 := tr.Spans[0], tr.Spans[1], tr.Spans[5]
	calc, clock, wait := byName["execute_tool calculator"], byName["execute_tool clock"], byName["execute_tool wait"]
	for _, s := range []wire.Span{calc, clock, wait} {
		if s.ParentID == nil || *s.ParentID != step1.SpanID || s.End == nil || !s.Start.Equal(*step1.End) {
			t.Errorf("%s: parent %v, %v..%v; want a child of %s from its end %v", s.Name, s.ParentID, s.Start, s.End, step1.SpanID, step1.End)
		}
	}
	// Times are commit times: the calls' start is their step's last
	// commit, a group commit after the calls started.
	if d := wait.End.Sub(wait.Start); d < 500*time.Millisecond || calc.End.After(*wait.End) {
		t.Errorf("wait 1 second took %v in the trace (calculator ended %v, wait %v), want about 1s and the longest", d, calc.End, wait.End)
	}
	if clock.Error == nil || clock.Error.Type != "tool_error" || clock.Error.Message == "" {
		t.Errorf("clock's error: %+v, want a tool_error with its message", clock.Error)
	}
	if step2.Start.Before(*wait.End) || run.End == nil || step2.End == nil || step2.End.After(*run.End) || step1.Start.Before(run.Start) {
		t.Errorf("steps out of order: run %v..%v, step 1 %v, step 2 %v..%v, wait ended %v", run.Start, run.End, step1.Start, step2.Start, step2.End, wait.End)
	}
	if step1.FinishReason != "tool_call" || step2.FinishReason != "stop" || run.InputTokens == nil {
		t.Errorf("finish reasons %q %q, run tokens %v; want tool_call, stop and the run's usage", step1.FinishReason, step2.FinishReason, run.InputTokens)
	}

	e.key = "bob-key"
	resp, b = e.do("GET", path, nil)
	wantStatus(t, resp, b, http.StatusNotFound, "not_found")
	e.key = "alice-key"
	for _, p := range []string{
		"/api/v1/threads/" + tid + "/runs/" + newID() + "/trace",
		"/api/v1/threads/" + newID() + "/runs/" + runID + "/trace",
	} {
		resp, b = e.do("GET", p, nil)
		wantStatus(t, resp, b, http.StatusNotFound, "not_found")
	}
	resp, b = e.do("GET", "/api/v1/threads/"+tid+"/runs/nope/trace", nil)
	wantStatus(t, resp, b, http.StatusBadRequest, "invalid_request")
}
