package engine_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/model/tool"
	"github.com/threadline/threadline/stream"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/engine"
)

// continueRun starts a continuation of the turn msgID and follows it.
func continueRun(t *testing.T, svc *engine.Service, tid, msgID uuid.UUID, req thread.RunRequest) (*thread.Run, []thread.Event) {
	t.Helper()
	req.ParentID = msgID
	r, _, err := svc.StartRun(context.Background(), "local", tid, req)
	if err != nil {
		t.Fatalf("continue: %v", err)
	}
	evs, done := live(svc, r)
	return r, rest(t, evs, done)
}

// wireReply is the reply as the client sees it: the last message of the
// final snapshot's path.
func wireReply(t *testing.T, evs []thread.Event) checkpoint.Message {
	t.Helper()
	_, path, _ := evs[len(evs)-1].Snapshot.Export()
	return path[len(path)-1]
}

// TestClientToolContinues: a step that calls a client tool and a server
// tool runs the server tool and ends requires_action, its message
// waiting; a continuation with the client's result streams into the same
// message, the next step sees both results, and the turn is one message
// on the wire over two appended checkpoints, replayed the same from the
// store.
func TestClientToolContinues(t *testing.T) {
	t.Parallel()
	var counted atomic.Int64
	count := funcTool{"count", func(context.Context, json.RawMessage) (thread.ToolOutput, error) {
		return tool.ValueResult(counted.Add(1)), nil
	}}
	m := &agentScript{steps: [][]thread.Delta{
		{text("Asking."), call("c1", "ask_user", `{"q":"ok?"}`), call("c2", "count", `{}`)},
		{text("Thanks.")},
	}}
	svc, st, _ := fakeSetup(t, m, engine.Config{Tools: registry(t, count)})
	cfg := thread.RunConfig{Tools: []thread.RunTool{{Name: "count"}, {Name: "ask_user", Description: "ask", Client: true}}}
	tid, r1, evs1 := runAgent(t, svc, "go", cfg)
	if last := evs1[len(evs1)-1]; last.Snapshot.RunStatus != thread.RunRequiresAction {
		t.Fatalf("first run: got %s, want requires_action", last.Snapshot.RunStatus)
	}
	w := wireReply(t, evs1)
	if w.ID != r1.MessageID || w.Status.Type != "requires-action" || w.Status.Reason != "tool-calls" || len(w.Content) != 3 ||
		w.Content[1].Result != nil || string(w.Content[2].Result) != "1" {
		t.Fatalf("waiting message: got %+v, want requires-action with ask_user unanswered and count answered", w)
	}
	if names := toolNames(m.requests()[0].Tools); names != "count,ask_user" {
		t.Fatalf("tools told to the model: got %s, want count,ask_user", names)
	}
	r2, evs2 := continueRun(t, svc, tid, r1.MessageID, thread.RunRequest{
		ToolResults: []thread.ToolResult{{CallID: "c1", Result: json.RawMessage(`{"answer":"yes"}`)}}})
	checkContinuedTurn(t, m, evs2, r1, r2)
	sameAgentEvents(t, "replay of the continuation", replay(t, st, tid, r2.ID), evs2, r1.MessageID)
	if counted.Load() != 1 {
		t.Fatalf("count ran %d times, want once", counted.Load())
	}
}

// checkContinuedTurn checks a continuation of the turn of TestClientToolContinues:
// it streams into the turn's message from the turn so far, and the next
// step sees the client's result.
func checkContinuedTurn(t *testing.T, m *agentScript, evs2 []thread.Event, r1, r2 *thread.Run) {
	t.Helper()
	if r2.MessageID != r1.MessageID {
		t.Fatalf("continuation message id: got %s, want the turn's %s", r2.MessageID, r1.MessageID)
	}
	for _, ev := range evs2 {
		if ev.Type != thread.KindSnapshot && ev.Type != thread.KindError && ev.MessageID != r1.MessageID {
			t.Fatalf("continuation event %+v names another message than %s", ev, r1.MessageID)
		}
	}
	if ev := evs2[1]; ev.Type != thread.KindToolResult || ev.CallID != "c1" || string(ev.Data) != `{"answer":"yes"}` {
		t.Fatalf("continuation's first event after its snapshot: got %+v, want the client's result", ev)
	}
	first := evs2[0].Snapshot
	if _, p, _ := first.Export(); len(p[len(p)-1].Content) != 3 || p[len(p)-1].ID != r1.MessageID {
		t.Fatalf("continuation's first snapshot: got %+v, want the turn so far under its id", p[len(p)-1])
	}
	w := wireReply(t, evs2)
	if w.ID != r1.MessageID || w.Status.Type != "complete" || len(w.Content) != 4 || w.Content[3].Text != "Thanks." ||
		string(w.Content[1].Result) != `{"answer":"yes"}` {
		t.Fatalf("continued message: got %+v, want the whole turn complete under the turn's id", w)
	}
	reqs := m.requests()
	turn := reqs[1].Messages[len(reqs[1].Messages)-1]
	if len(reqs) != 2 || turn.Role != checkpoint.RoleAssistant || string(turn.Parts[1].Call.Result) != `{"answer":"yes"}` ||
		len(reqs[1].Messages) != 2 {
		t.Fatalf("second step: got %+v, want the question and the turn with both results", reqs[1].Messages)
	}
	tree := evs2[len(evs2)-1].Snapshot.Tree
	if tree.Len() != 3 || tree.Get(r2.ID) == nil || tree.Get(r1.MessageID).Status.Type != "requires-action" {
		t.Fatalf("checkpoints: got %d, want the question, the waiting turn unchanged and its continuation", tree.Len())
	}
}

func toolNames(specs []thread.ToolSpec) string {
	var names []string
	for _, s := range specs {
		names = append(names, s.Name)
	}
	return strings.Join(names, ",")
}

// TestApprovalContinues: a call of a tool marked approval waits; an
// approval with an option_id is refused (options are an agent's); an
// approval runs it in the continuation, a rejection answers it isError
// with the reason and never runs it.
func TestApprovalContinues(t *testing.T) {
	t.Parallel()
	for _, approved := range []bool{true, false} {
		var ran atomic.Int64
		danger := tool.NeedApproval(funcTool{"danger", func(context.Context, json.RawMessage) (thread.ToolOutput, error) {
			ran.Add(1)
			return tool.ValueResult("done"), nil
		}})
		m := &agentScript{steps: [][]thread.Delta{{call("c1", "danger", `{}`)}, {text("ok")}}}
		svc, _, _ := fakeSetup(t, m, engine.Config{Tools: registry(t, danger)})
		tid, r1, evs1 := runAgent(t, svc, "do it", thread.RunConfig{})
		if evs1[len(evs1)-1].Snapshot.RunStatus != thread.RunRequiresAction || ran.Load() != 0 {
			t.Fatalf("approved %v: first run %s, tool ran %d times; want requires_action, not run", approved,
				evs1[len(evs1)-1].Snapshot.RunStatus, ran.Load())
		}
		// An option_id is for an agent's permission request, not a tool's approval.
		_, _, err := svc.StartRun(context.Background(), "local", tid, thread.RunRequest{ParentID: r1.MessageID,
			Approvals: []thread.Approval{{CallID: "c1", Approved: approved, OptionID: "allow"}}})
		if errcode.Of(err) != errcode.Invalid || !strings.Contains(err.Error(), "takes no option_id") {
			t.Fatalf("an option_id for a tool's approval: got %v, want invalid_request", err)
		}
		_, evs2 := continueRun(t, svc, tid, r1.MessageID, thread.RunRequest{
			Approvals: []thread.Approval{{CallID: "c1", Approved: approved, Reason: "too risky"}}})
		c := wireReply(t, evs2).Content
		want, wantRan := `"done"`, int64(1)
		if !approved {
			want, wantRan = `"rejected by a person: too risky"`, 0
		}
		if string(c[0].Result) != want || c[0].IsError == approved || ran.Load() != wantRan || c[len(c)-1].Text != "ok" {
			t.Fatalf("approved %v: got %+v, ran %d; want result %s, ran %d, then the model's answer", approved, c, ran.Load(), want, wantRan)
		}
	}
}

// TestContinuationRefused: a continuation must answer exactly the calls
// that wait, each as its kind needs, on a turn that waits.
func TestContinuationRefused(t *testing.T) {
	t.Parallel()
	m := &agentScript{steps: [][]thread.Delta{{call("c1", "ask_user", `{}`), call("c2", "ask_user2", `{}`)}, {text("ok")}}}
	svc, _, _ := fakeSetup(t, m, engine.Config{})
	cfg := thread.RunConfig{Tools: []thread.RunTool{{Name: "ask_user", Client: true}, {Name: "ask_user2", Client: true}}}
	tid, r1, _ := runAgent(t, svc, "go", cfg)
	res := func(ids ...string) []thread.ToolResult {
		var out []thread.ToolResult
		for _, id := range ids {
			out = append(out, thread.ToolResult{CallID: id, Result: json.RawMessage(`1`)})
		}
		return out
	}
	for _, tc := range []struct {
		name string
		req  thread.RunRequest
		code errcode.Code
	}{
		{"one of two", thread.RunRequest{ToolResults: res("c1")}, errcode.Invalid},
		{"an unknown call", thread.RunRequest{ToolResults: res("c1", "c2", "c3")}, errcode.Invalid},
		{"approval for a client tool", thread.RunRequest{ToolResults: res("c1"), Approvals: []thread.Approval{{CallID: "c2", Approved: true}}}, errcode.Invalid},
		{"twice", thread.RunRequest{ToolResults: res("c1", "c1")}, errcode.Invalid},
		{"with a message", thread.RunRequest{ToolResults: res("c1", "c2"), Message: msg("x")}, errcode.Invalid},
	} {
		tc.req.ParentID = r1.MessageID
		if _, _, err := svc.StartRun(context.Background(), "local", tid, tc.req); errcode.Of(err) != tc.code {
			t.Errorf("%s: got %v, want %s", tc.name, err, tc.code)
		}
	}
	continueRun(t, svc, tid, r1.MessageID, thread.RunRequest{ToolResults: res("c1", "c2")})
	_, _, err := svc.StartRun(context.Background(), "local", tid, thread.RunRequest{ParentID: r1.MessageID, ToolResults: res("c1", "c2")})
	if errcode.Of(err) != errcode.InvalidFork {
		t.Fatalf("continuing a turn that no longer waits: got %v, want invalid_fork", err)
	}
}

// TestMessageUnderContinuedTurn: a message whose parent is a continued
// turn's id goes under the turn's newest checkpoint, and a retry of it
// with the same id returns its run.
func TestMessageUnderContinuedTurn(t *testing.T) {
	t.Parallel()
	m := &agentScript{steps: [][]thread.Delta{{call("c1", "ask_user", `{}`)}, {text("ok")}}}
	svc, _, _ := fakeSetup(t, m, engine.Config{})
	cfg := thread.RunConfig{Tools: []thread.RunTool{{Name: "ask_user", Client: true}}}
	tid, r1, _ := runAgent(t, svc, "go", cfg)
	r2, _ := continueRun(t, svc, tid, r1.MessageID, thread.RunRequest{ToolResults: []thread.ToolResult{{CallID: "c1", Result: json.RawMessage(`1`)}}})
	um := msg("next")
	um.ID = uuid.New()
	req := thread.RunRequest{Message: um, ParentID: r1.MessageID}
	r3, _, err := svc.StartRun(context.Background(), "local", tid, req)
	if err != nil {
		t.Fatal(err)
	}
	evs, done := live(svc, r3)
	all := rest(t, evs, done)
	tree := all[len(all)-1].Snapshot.Tree
	if u := tree.Get(um.ID); u == nil || u.ParentID != r2.ID {
		t.Fatalf("the new message's parent: got %v, want the continuation checkpoint %s", u, r2.ID)
	}
	again, existing, err := svc.StartRun(context.Background(), "local", tid, req)
	if err != nil || !existing || again.ID != r3.ID {
		t.Fatalf("retry: got run %v existing %v err %v, want run %s", again, existing, err, r3.ID)
	}
}

// TestAgentRecoveryOnPostgres: on the real store, a run whose process
// stops answering during a tool call is recovered from its group-commit
// log (agent records in run_log segments) with the call answered
// "interrupted"; the tool ran once, and the owner's client, a replay
// from the compacted log and the stored reply agree.
func TestAgentRecoveryOnPostgres(t *testing.T) {
	t.Parallel()
	block, runs, started, release := blockingTool()
	m := &agentScript{steps: [][]thread.Delta{
		{{Kind: thread.DeltaReasoning, Text: "thinking"}, text("Working."), call("c1", "block", `{"a":`), call("c1", "block", `1}`)},
		{text("after")},
	}}
	fs := newFaultStore(t)
	svc := faultSetup(t, fs, m, engine.Config{Tools: registry(t, block)})
	tid := uuid.New()
	r, _, err := svc.StartRun(context.Background(), "local", tid, thread.RunRequest{Message: msg("block")})
	if err != nil {
		t.Fatal(err)
	}
	evs, done := live(svc, r)
	seen := []thread.Event{}
	for ev := next(t, evs); ; ev = next(t, evs) {
		seen = append(seen, ev)
		if ev.Type == thread.KindToolCall && ev.Text == "1}" {
			break
		}
	}
	<-started
	rec := engine.New(fs.Store, stream.New[thread.Event](16), models{m: &recorder{}}, fs.Store,
		engine.Config{Now: func() time.Time { return time.Now().Add(time.Hour) }})
	engine.StartWriters(rec) // this test drives recovery by hand
	shutdownAtCleanup(t, rec)
	if n := rec.Recover(context.Background()); n != 1 {
		t.Fatalf("Recover: got %d, want 1", n)
	}
	close(release)
	seen = append(seen, rest(t, evs, done)...)
	got := stored(t, fs, tid, r.ID)
	sameAgentEvents(t, "the owner's client against the stored log", seen, got, r.MessageID)
	nodes, err := fs.CheckpointsAfter(context.Background(), tid, 0)
	if err != nil || len(nodes) != 2 {
		t.Fatalf("checkpoints: got %d, %v; want the question and the reply", len(nodes), err)
	}
	c := nodes[1].Content
	if len(c) != 3 || c[0].Type != "reasoning" || c[2].ArgsText != `{"a":1}` || string(c[2].Result) != `"interrupted"` || !c[2].IsError {
		t.Fatalf("stored reply: got %+v, want reasoning, text and the call answered \"interrupted\"", c)
	}
	if runs.Load() != 1 {
		t.Fatalf("the tool ran %d times, want once", runs.Load())
	}
}
