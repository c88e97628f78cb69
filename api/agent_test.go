package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/threadline/threadline/model/tool"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/engine"
)

// withTools gives the service the built-in tools.
func withTools(t *testing.T) func(*options) {
	return func(o *options) {
		o.service = func(c *engine.Config) {
			reg := tool.NewRegistry(0)
			if err := reg.Add(tool.Builtins(nil)...); err != nil {
				t.Fatal(err)
			}
			c.Tools = reg
		}
	}
}

// demoRun is a run request of text for the built-in demo model.
func demoRun(text string, cfg map[string]any) map[string]any {
	body := newMessage(text, nil)
	if cfg == nil {
		cfg = map[string]any{}
	}
	cfg["model"] = "builtin:demo"
	body["run_config"] = cfg
	return body
}

// agentEvent is an event's agent fields, decoded from its raw line.
type agentEvent struct {
	Type       string          `json:"type"`
	MessageID  string          `json:"message_id"`
	ToolCallID string          `json:"tool_call_id"`
	ToolName   string          `json:"tool_name"`
	ArgsText   *string         `json:"args_text"`
	Result     json.RawMessage `json:"result"`
	IsError    *bool           `json:"is_error"`
	Name       string          `json:"name"`
	Data       json.RawMessage `json:"data"`
}

func agentEvents(t *testing.T, evs []event) []agentEvent {
	t.Helper()
	out := make([]agentEvent, len(evs))
	for i, ev := range evs {
		if err := json.Unmarshal(ev.Raw, &out[i]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// lastParts returns the raw content parts of the last message of a
// snapshot event's messages.
func lastParts(t *testing.T, raw json.RawMessage) []json.RawMessage {
	t.Helper()
	var s struct {
		Messages []struct {
			Content []json.RawMessage `json:"content"`
			Status  json.RawMessage   `json:"status"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	return s.Messages[len(s.Messages)-1].Content
}

// TestAgentCalculatorOverHTTP: "what is 12*7?" to the demo with the
// built-in tools streams a calculator call in pieces, its result 84, an
// interim snapshot and an answer with 84, all on one assistant message;
// the final snapshot holds the call with its result in assistant-ui's
// shape, a rejoin gets the same lines, and the thread snapshot the same
// message.
func TestAgentCalculatorOverHTTP(t *testing.T) {
	t.Parallel()
	e := setup(t, withTools(t))
	tid := newID()
	resp, evs := e.stream(tid, demoRun("what is 12*7?", nil))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	last := checkRun(t, evs)
	head := *evs[0].Repository.HeadID
	var args strings.Builder
	var result *agentEvent
	interim := 0
	for i, ae := range agentEvents(t, evs) {
		switch ae.Type {
		case "tool_call":
			if ae.ToolName != "calculator" || ae.MessageID != head || ae.ArgsText == nil || ae.ToolCallID == "" {
				t.Fatalf("tool_call event: got %s", evs[i].Raw)
			}
			args.WriteString(*ae.ArgsText)
		case "tool_result":
			result = &ae
			if ae.MessageID != head || ae.IsError == nil {
				t.Fatalf("tool_result event: got %s", evs[i].Raw)
			}
		case "snapshot":
			if i > 0 && i < len(evs)-1 {
				interim++
			}
		}
	}
	if args.String() != `{"expression":"12*7"}` || result == nil || string(result.Result) != "84" || *result.IsError {
		t.Fatalf("tool events: args %q result %+v, want {\"expression\":\"12*7\"} and 84", args.String(), result)
	}
	if interim != 1 {
		t.Fatalf("interim snapshots: got %d, want 1", interim)
	}
	parts := lastParts(t, last.Raw)
	if len(parts) != 3 {
		t.Fatalf("reply parts: got %s, want text, tool-call, text", parts)
	}
	want := `{"type":"tool-call","toolCallId":"` + result.ToolCallID + `","toolName":"calculator","args":{"expression":"12*7"},` +
		`"argsText":"{\"expression\":\"12*7\"}","result":84,"isError":false}`
	if string(parts[1]) != want {
		t.Fatalf("tool-call part:\n got %s\nwant %s", parts[1], want)
	}
	if !strings.Contains(string(parts[2]), "84") || last.RunStatus != "succeeded" {
		t.Fatalf("answer: got %s (%s), want a text part with 84, succeeded", parts[2], last.RunStatus)
	}
	checkRejoinAndThread(t, e, tid, head, evs)
}

// checkRejoinAndThread checks that a rejoin of the calculator run gets
// the live lines and the thread shows one assistant message with the call.
func checkRejoinAndThread(t *testing.T, e *env, tid, head string, evs []event) {
	t.Helper()
	rresp, rb := e.do("GET", "/api/v1/threads/"+tid+"/runs/"+evs[0].RunID+"/stream?after=0", nil)
	wantStatus(t, rresp, rb, http.StatusOK, "")
	rejoin := readEvents(t, bytes.NewReader(rb))
	if len(rejoin) != len(evs) {
		t.Fatalf("rejoin: got %d events, want %d", len(rejoin), len(evs))
	}
	for i := range evs {
		if !bytes.Equal(rejoin[i].Raw, evs[i].Raw) {
			t.Fatalf("rejoin event %d:\n got %s\nwant %s", i, rejoin[i].Raw, evs[i].Raw)
		}
	}
	snap := e.snapshot(tid)
	msgs := snap.Messages
	if len(msgs) != 2 || msgs[1].ID != head || len(msgs[1].Content) != 3 || msgs[1].Content[1].Type != "tool-call" {
		t.Fatalf("thread snapshot: got %+v, want the question and one assistant message with the call", msgs)
	}
}

// TestAgentClockAndPlanOverHTTP: a time question calls clock, whose
// result is an object with the time; "make a plan" streams plan data
// events and ends with one plan part whose tasks are all done.
func TestAgentClockAndPlanOverHTTP(t *testing.T) {
	t.Parallel()
	e := setup(t, withTools(t))
	_, evs := e.stream(newID(), demoRun("what time is it?", nil))
	checkRun(t, evs)
	var clock *agentEvent
	for _, ae := range agentEvents(t, evs) {
		if ae.Type == "tool_call" && ae.ToolName != "clock" {
			t.Fatalf("tool_call of %s, want clock", ae.ToolName)
		}
		if ae.Type == "tool_result" {
			clock = &ae
		}
	}
	var now struct{ Time, Timezone string }
	if clock == nil || json.Unmarshal(clock.Result, &now) != nil || now.Time == "" || now.Timezone != "UTC" {
		t.Fatalf("clock result: got %+v, want the time in UTC", clock)
	}

	_, evs = e.stream(newID(), demoRun("make a plan for a picnic", nil))
	last := checkRun(t, evs)
	plans := 0
	for _, ae := range agentEvents(t, evs) {
		if ae.Type == "data" {
			if ae.Name != "plan" || len(ae.Data) == 0 {
				t.Fatalf("data event: got %+v, want a plan", ae)
			}
			plans++
		}
	}
	if plans < 2 {
		t.Fatalf("plan events: got %d, want the plan and its ticks", plans)
	}
	var plan []struct {
		Type string `json:"type"`
		Name string `json:"name"`
		Data struct {
			Tasks []struct{ Status string } `json:"tasks"`
		} `json:"data"`
	}
	raw := lastParts(t, last.Raw)
	b, _ := json.Marshal(raw)
	if err := json.Unmarshal(b, &plan); err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, p := range plan {
		if p.Type != "data" {
			continue
		}
		found++
		for _, task := range p.Data.Tasks {
			if p.Name != "plan" || task.Status != "done" {
				t.Fatalf("plan part: got %+v, want every task done", p)
			}
		}
	}
	if found != 1 {
		t.Fatalf("data parts in the reply: got %d, want one plan (each tick replaces it)", found)
	}
}

// TestAgentRunConfigOverHTTP: run_config.tools limits the server tools
// (the demo then answers the arithmetic itself), an unknown tool is
// refused, and max_steps 1 ends a tool step incomplete/length with the
// call answered as not run.
func TestAgentRunConfigOverHTTP(t *testing.T) {
	t.Parallel()
	e := setup(t, withTools(t))
	_, evs := e.stream(newID(), demoRun("what is 12*7?", map[string]any{"tools": []any{"clock", map[string]any{"name": "wait"}}}))
	checkRun(t, evs)
	for _, ae := range agentEvents(t, evs) {
		if ae.Type == "tool_call" {
			t.Fatalf("a run without calculator called %s", ae.ToolName)
		}
	}
	if !strings.Contains(tokensText(evs), "84") {
		t.Fatalf("answer: got %q, want 84 computed in text", tokensText(evs))
	}
	for _, tools := range []any{[]any{"nope"}, []any{map[string]any{"name": "calculator", "description": "x"}}, []any{"calculator", "calculator"}, []any{7}} {
		resp, b := e.do("POST", "/api/v1/threads/"+newID()+"/runs/stream", demoRun("hi", map[string]any{"tools": tools}))
		wantStatus(t, resp, b, http.StatusBadRequest, "invalid_request")
	}
	resp, b := e.do("POST", "/api/v1/threads/"+newID()+"/runs/stream", demoRun("hi", map[string]any{"max_steps": 101}))
	wantStatus(t, resp, b, http.StatusBadRequest, "invalid_request")

	_, evs = e.stream(newID(), demoRun("what is 12*7?", map[string]any{"max_steps": 1}))
	last := checkRun(t, evs)
	msg := last.Messages[len(last.Messages)-1]
	parts := lastParts(t, last.Raw)
	if msg.Status == nil || msg.Status.Type != "incomplete" || msg.Status.Reason != "length" || len(parts) != 2 ||
		!strings.Contains(string(parts[1]), `"isError":true`) || !strings.Contains(string(parts[1]), "max_steps") {
		t.Fatalf("max_steps 1: got status %+v parts %s, want incomplete/length and the call not run", msg.Status, parts)
	}
}

// withToolSet gives the service these tools.
func withToolSet(t *testing.T, tools ...tool.Tool) func(*options) {
	return func(o *options) {
		o.service = func(c *engine.Config) {
			reg := tool.NewRegistry(0)
			if err := reg.Add(tools...); err != nil {
				t.Fatal(err)
			}
			c.Tools = reg
		}
	}
}

// finalMessage is the last message of a final snapshot, raw.
func finalMessage(t *testing.T, ev event) (message, []json.RawMessage) {
	t.Helper()
	return ev.Messages[len(ev.Messages)-1], lastParts(t, ev.Raw)
}

// TestAgentApprovalOverHTTP: the demo's call of a tool marked approval
// ends the run requires_action with the message waiting; a continuation
// with no message and no run_config (it takes the turn's) approves it,
// runs the tool and streams the answer into the same message; the thread
// shows one assistant message, and the run reads requires_action.
func TestAgentApprovalOverHTTP(t *testing.T) {
	t.Parallel()
	e := setup(t, withToolSet(t, tool.Calculator{}, tool.NeedApproval(tool.Wait{})))
	tid := newID()
	_, evs := e.stream(tid, demoRun("please wait 0.1 seconds", nil))
	last := checkRun(t, evs)
	msg, parts := finalMessage(t, last)
	if last.RunStatus != "requires_action" || msg.Status == nil || msg.Status.Type != "requires-action" || msg.Status.Reason != "tool-calls" {
		t.Fatalf("first run: got %s, message status %+v; want requires_action, requires-action/tool-calls", last.RunStatus, msg.Status)
	}
	var call struct {
		ToolCallID string          `json:"toolCallId"`
		Result     json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(parts[len(parts)-1], &call); err != nil || call.Result != nil {
		t.Fatalf("waiting call: got %s, want a tool-call without result", parts[len(parts)-1])
	}
	resp, b := e.do("GET", "/api/v1/threads/"+tid+"/runs/"+evs[0].RunID, nil)
	wantStatus(t, resp, b, http.StatusOK, "")
	if !strings.Contains(string(b), `"status":"requires_action"`) {
		t.Fatalf("GET run: got %s, want status requires_action", b)
	}
	body := map[string]any{"parent_message_id": msg.ID, "approvals": []any{map[string]any{"tool_call_id": call.ToolCallID, "approved": true}}}
	_, evs2 := e.stream(tid, body)
	last2 := checkContinued(t, evs2, msg.ID)
	for _, ev := range evs2 {
		if ev.Type != "snapshot" && ev.MessageID != msg.ID {
			t.Fatalf("continuation event names message %s, want %s", ev.MessageID, msg.ID)
		}
	}
	msg2, parts2 := finalMessage(t, last2)
	if last2.RunStatus != "succeeded" || msg2.ID != msg.ID || msg2.Status.Type != "complete" || !strings.Contains(msg2.Text(), "waited 0.1 seconds") {
		t.Fatalf("continuation: got %s, message %+v; want succeeded, the same message complete with the answer", last2.RunStatus, msg2)
	}
	if !strings.Contains(string(parts2[len(parts2)-2]), `"isError":false`) {
		t.Fatalf("approved call: got %s, want answered", parts2[len(parts2)-2])
	}
	checkStoredLog(t, e, evs2)
	snap := e.snapshot(tid)
	if len(snap.Messages) != 2 || snap.Messages[1].ID != msg.ID || len(snap.Repository.Messages) != 2 || *snap.Repository.HeadID != msg.ID {
		t.Fatalf("thread: got %d messages, %d in the repository, head %v; want the question and the one turn", len(snap.Messages), len(snap.Repository.Messages), snap.Repository.HeadID)
	}
	resp, b = e.do("GET", "/api/v1/threads/"+tid+"/checkpoints", nil)
	wantStatus(t, resp, b, http.StatusOK, "")
	if n := strings.Count(string(b), `"role":"assistant"`); n != 2 {
		t.Fatalf("checkpoints: %d assistant checkpoints, want the waiting turn and its continuation", n)
	}
	_, evs3 := e.stream(tid, newMessage("and now?", &msg.ID))
	checkRun(t, evs3)
	snap = e.snapshot(tid)
	if len(snap.Messages) != 4 || snap.Messages[1].ID != msg.ID || snap.Messages[1].Status.Type != "complete" {
		t.Fatalf("a message under the turn: got path %+v, want it after the continued turn", snap.Messages)
	}
}

// checkStoredLog checks that a continuation's log reads back from the
// store whole, its tokens as streamed.
func checkStoredLog(t *testing.T, e *env, evs2 []event) {
	t.Helper()
	runID, err := uuid.Parse(evs2[0].RunID)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := e.store.RunEventsAfter(context.Background(), runID, 0)
	if err != nil || len(recs) != len(evs2) {
		t.Fatalf("the continuation's stored log: got %d records, %v; want %d", len(recs), err, len(evs2))
	}
	var stored strings.Builder
	for _, r := range recs {
		if r.Kind == thread.KindToken {
			stored.WriteString(r.Text)
		}
	}
	if stored.String() != tokensText(evs2) {
		t.Fatalf("stored tokens: got %q, want %q", stored.String(), tokensText(evs2))
	}
}

// TestAgentClientToolOverHTTP: a client tool the run declares is told to
// the model and never run: its call ends the run requires_action, and the
// caller's tool_results continue the turn.
func TestAgentClientToolOverHTTP(t *testing.T) {
	t.Parallel()
	e := setup(t, withToolSet(t, tool.Calculator{}))
	tid := newID()
	clock := map[string]any{"name": "clock", "description": "the user's clock", "parameters": map[string]any{"type": "object"}, "client": true}
	_, evs := e.stream(tid, demoRun("what time is it?", map[string]any{"tools": []any{"calculator", clock}}))
	last := checkRun(t, evs)
	msg, parts := finalMessage(t, last)
	if last.RunStatus != "requires_action" || !strings.Contains(string(parts[len(parts)-1]), `"toolName":"clock"`) {
		t.Fatalf("first run: got %s with %s, want requires_action on a clock call", last.RunStatus, parts)
	}
	var call struct {
		ToolCallID string `json:"toolCallId"`
	}
	_ = json.Unmarshal(parts[len(parts)-1], &call)
	result := map[string]any{"time": "2026-01-02T03:04:05Z", "timezone": "UTC", "weekday": "Friday", "unix": 1767323045}
	body := map[string]any{"parent_message_id": msg.ID, "tool_results": []any{map[string]any{"tool_call_id": call.ToolCallID, "result": result}}}
	_, evs2 := e.stream(tid, body)
	last2 := checkContinued(t, evs2, msg.ID)
	msg2, _ := finalMessage(t, last2)
	if last2.RunStatus != "succeeded" || msg2.ID != msg.ID || !strings.Contains(msg2.Text(), "03:04") {
		t.Fatalf("continuation: got %s, %q; want the answer with the client's time", last2.RunStatus, msg2.Text())
	}
	resp, b := e.do("POST", "/api/v1/threads/"+tid+"/runs/stream", body)
	wantStatus(t, resp, b, http.StatusUnprocessableEntity, "invalid_fork")
}

// checkContinued is checkRun for a continuation, whose first snapshot
// already holds the turn so far under the turn's message id.
func checkContinued(t *testing.T, evs []event, msgID string) event {
	t.Helper()
	if len(evs) < 2 {
		t.Fatalf("stream has %d events, want at least 2", len(evs))
	}
	first, last := evs[0], evs[len(evs)-1]
	lastMsg := first.Messages[len(first.Messages)-1]
	if first.Type != "snapshot" || first.RunStatus != "running" || *first.Repository.HeadID != msgID || lastMsg.ID != msgID ||
		lastMsg.Status.Type != "running" || lastMsg.Metadata.Custom.CheckpointID != nil {
		t.Fatalf("first event: got %s, want a running snapshot of message %s", first.Raw, msgID)
	}
	for i, ev := range evs {
		if ev.Sequence != int64(i+1) || ev.RunID != first.RunID {
			t.Fatalf("event %d: got sequence %d of run %s", i, ev.Sequence, ev.RunID)
		}
	}
	if last.Type != "snapshot" || last.RunStatus == "running" || last.Repository == nil {
		t.Fatalf("last event: got %s, want a final snapshot", last.Raw)
	}
	return last
}
