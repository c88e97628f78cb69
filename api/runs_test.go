package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/threadline/threadline/model/builtin"
	"github.com/threadline/threadline/store"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/threadtest/wait"
)

func TestRunNewMessage(t *testing.T) {
	t.Parallel()
	e := setup(t, withTokens(12))
	tid := newID() // the run creates the thread
	resp, evs := e.stream(tid, newMessage("hello there", nil))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("run: got status %d", resp.StatusCode)
	}
	final := checkRun(t, evs)
	if final.RunStatus != "succeeded" {
		t.Fatalf("run status: got %s, want succeeded", final.RunStatus)
	}
	if n := len(evs); n != 12+2 {
		t.Fatalf("events: got %d, want 12 tokens + 2 snapshots", n)
	}
	want := builtin.BuiltinText("hello there", 1, 12)
	asst := checkNewMessageStream(t, evs, final, "hello there", want)
	checkNewMessageStored(t, e, tid, evs[0].RunID, asst.ID, want, "hello there")
}

// checkNewMessageStream checks the stream of a first turn: the first
// snapshot holds the persisted user message (prompt), the tokens and the
// final assistant message are the built-in model's text want, and the
// final snapshot names the run and the reply's checkpoint. It returns the
// final assistant message.
func checkNewMessageStream(t *testing.T, evs []event, final event, prompt, want string) message {
	t.Helper()
	first := evs[0]
	if len(first.Messages) != 2 || first.Messages[0].Role != "user" || first.Messages[0].Text() != prompt {
		t.Fatalf("first snapshot messages: got %s", first.Raw)
	}
	if first.Messages[0].Metadata.Custom.CheckpointID == nil {
		t.Fatalf("persisted user message has no checkpointId")
	}
	if got := tokensText(evs); got != want {
		t.Fatalf("streamed text: got %q, want the built-in model's %q", got, want)
	}
	asst := final.Messages[len(final.Messages)-1]
	if asst.Text() != want || asst.Status == nil || asst.Status.Type != "complete" || asst.Status.Reason != "stop" {
		t.Fatalf("final assistant: got %+v", asst)
	}
	if asst.Metadata.Custom.CheckpointID == nil || asst.Metadata.RunID == nil || *asst.Metadata.RunID != first.RunID {
		t.Fatalf("final assistant metadata: got %+v", asst.Metadata)
	}
	if final.CheckpointID == nil || *final.CheckpointID != asst.ID {
		t.Fatalf("final checkpoint_id: got %v, want %s", final.CheckpointID, asst.ID)
	}
	return asst
}

// checkNewMessageStored checks what a first turn left on thread tid: the
// snapshot equals the stream's final word (reply asstID, text want), the
// run resource is ended with its usage, and the thread got title from its
// first message.
func checkNewMessageStored(t *testing.T, e *env, tid, runID, asstID, want, title string) {
	t.Helper()
	snap := e.snapshot(tid)
	if snap.ActiveRun != nil || len(snap.Messages) != 2 || snap.Messages[1].Text() != want || *snap.Repository.HeadID != asstID {
		t.Fatalf("snapshot after run: got %+v", snap)
	}
	resp, b := e.do("GET", "/api/v1/threads/"+tid+"/runs/"+runID, nil)
	wantStatus(t, resp, b, http.StatusOK, "")
	var run map[string]any
	_ = json.Unmarshal(b, &run)
	if run["status"] != "succeeded" || run["model"] != "builtin" || run["last_sequence"].(float64) != 14 || run["finished_at"] == nil || run["usage"] == nil {
		t.Fatalf("run resource: got %s", b)
	}
	resp, b = e.do("GET", "/api/v1/threads/"+tid, nil)
	wantStatus(t, resp, b, http.StatusOK, "")
	if !strings.Contains(string(b), `"title":"`+title+`"`) {
		t.Fatalf("auto title: got %s", b)
	}
}

// turn runs one new message under parent and returns the final snapshot.
func (e *env) turn(tid, content string, parent *string) event {
	e.t.Helper()
	resp, evs := e.stream(tid, newMessage(content, parent))
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("turn %q: status %d", content, resp.StatusCode)
	}
	return checkRun(e.t, evs)
}

func children(r *repository, parent *string) []message {
	var out []message
	for _, m := range r.Messages {
		if (m.ParentID == nil && parent == nil) || (m.ParentID != nil && parent != nil && *m.ParentID == *parent) {
			out = append(out, m.Message)
		}
	}
	return out
}

func TestForkShapes(t *testing.T) {
	t.Parallel()
	e := setup(t)
	tid := newID()
	f1 := e.turn(tid, "first", nil)
	u1, a1 := f1.Messages[0], f1.Messages[1]
	f2 := e.turn(tid, "second", &a1.ID)
	u2, a2 := f2.Messages[2], f2.Messages[3]

	// Regenerate the second reply: a sibling of a2 under u2.
	resp, evs := e.stream(tid, map[string]any{"parent_message_id": u2.ID, "source_message_id": a2.ID})
	if resp.StatusCode != 200 {
		t.Fatalf("regenerate: status %d", resp.StatusCode)
	}
	fr := checkRun(t, evs)
	sib := children(fr.Repository, &u2.ID)
	if len(sib) != 2 || sib[0].ID != a2.ID || sib[1].Role != "assistant" {
		t.Fatalf("regenerate: children of u2 are %+v, want a2 and a new reply", sib)
	}
	if fr.Messages[len(fr.Messages)-1].ID != sib[1].ID || len(fr.Messages) != 4 {
		t.Fatalf("regenerate: path does not end at the new reply")
	}
	// The regenerate is the thread's 4th write, so the built-in model's call
	// is 4 and its text differs from the first reply (call 3).
	if got, want := sib[1].Text(), builtin.BuiltinText("second", 4, 8); got != want || got == a2.Text() {
		t.Fatalf("regenerated text: got %q, want %q (not the first reply's %q)", got, want, a2.Text())
	}

	// Edit the second user message: a sibling of u2 under a1.
	resp, evs = e.stream(tid, map[string]any{"message": map[string]any{"content": "second, edited"},
		"parent_message_id": a1.ID, "source_message_id": u2.ID})
	if resp.StatusCode != 200 {
		t.Fatalf("edit: status %d", resp.StatusCode)
	}
	fe := checkRun(t, evs)
	us := children(fe.Repository, &a1.ID)
	if len(us) != 2 || us[0].ID != u2.ID || us[1].Text() != "second, edited" {
		t.Fatalf("edit: children of a1 are %+v", us)
	}
	if len(fe.Messages) != 4 || fe.Messages[0].ID != u1.ID || fe.Messages[2].ID != us[1].ID {
		t.Fatalf("edit: path is %+v", fe.Messages)
	}

	// Edit the root message: a second root.
	resp, evs = e.stream(tid, map[string]any{"message": map[string]any{"content": "first, edited"}, "source_message_id": u1.ID})
	if resp.StatusCode != 200 {
		t.Fatalf("edit root: status %d", resp.StatusCode)
	}
	fro := checkRun(t, evs)
	if roots := children(fro.Repository, nil); len(roots) != 2 || roots[0].ID != u1.ID {
		t.Fatalf("edit root: roots are %+v", roots)
	}
	// Two turns (4), the regenerated reply (1), the edit and its reply (2),
	// the root edit and its reply (2).
	if len(fro.Repository.Messages) != 4+1+2+2 {
		t.Fatalf("repository holds %d messages, want 9", len(fro.Repository.Messages))
	}
}

func checkpointsOf(e *env, tid string) string {
	resp, b := e.do("GET", "/api/v1/threads/"+tid+"/checkpoints", nil)
	wantStatus(e.t, resp, b, http.StatusOK, "")
	return string(b)
}

func TestBadRunsWriteNothing(t *testing.T) {
	t.Parallel()
	e := setup(t)
	tid := newID()
	f := e.turn(tid, "first", nil)
	u1, a1 := f.Messages[0], f.Messages[1]
	before := checkpointsOf(e, tid)
	other := newID()
	tests := []struct {
		name   string
		body   any
		status int
		code   string
	}{
		{"parent not in thread", map[string]any{"message": map[string]any{"content": "x"}, "parent_message_id": other}, 422, "invalid_fork"},
		{"edit of an assistant message", map[string]any{"message": map[string]any{"content": "x"}, "parent_message_id": u1.ID, "source_message_id": a1.ID}, 422, "invalid_fork"},
		{"source not a child of parent", map[string]any{"message": map[string]any{"content": "x"}, "parent_message_id": a1.ID, "source_message_id": u1.ID}, 422, "invalid_fork"},
		{"regenerate under an assistant message", map[string]any{"parent_message_id": a1.ID}, 422, "invalid_fork"},
		{"regenerate without parent", map[string]any{}, 422, "invalid_fork"},
		{"malformed JSON", `{"message":`, 400, "invalid_request"},
		{"unknown field", `{"message":{"content":"x","colour":1}}`, 400, "invalid_request"},
		{"content of wrong type", `{"message":{"content":5}}`, 400, "invalid_request"},
		{"unknown part type", `{"message":{"content":[{"type":"video"}]}}`, 400, "invalid_request"},
		{"bad parent UUID", `{"message":{"content":"x"},"parent_message_id":"abc"}`, 400, "invalid_request"},
		{"bad on_disconnect", map[string]any{"message": map[string]any{"content": "x"}, "parent_message_id": a1.ID, "on_disconnect": "maybe"}, 400, "invalid_request"},
		{"unknown model", map[string]any{"message": map[string]any{"content": "x"}, "parent_message_id": a1.ID, "run_config": map[string]any{"model": "nope"}}, 400, "invalid_request"},
		{"unknown attachment", map[string]any{"message": map[string]any{"content": "x", "attachments": []any{map[string]any{"id": other}}}, "parent_message_id": a1.ID}, 404, "not_found"},
		{"message too large", map[string]any{"message": map[string]any{"content": strings.Repeat("x", 300<<10)}, "parent_message_id": a1.ID}, 413, "too_large"},
	}
	for _, tt := range tests {
		resp, b := e.do("POST", "/api/v1/threads/"+tid+"/runs/stream", tt.body)
		t.Run(tt.name, func(t *testing.T) { wantStatus(t, resp, b, tt.status, tt.code) })
	}
	resp, b := e.do("POST", "/api/v1/threads/"+tid+"/runs/stream", `{}`, "Content-Type", "text/plain")
	wantStatus(t, resp, b, 415, "unsupported_media_type")
	if after := checkpointsOf(e, tid); after != before {
		t.Fatalf("bad requests changed the tree:\nbefore %s\nafter  %s", before, after)
	}
	if s := e.snapshot(tid); s.ActiveRun != nil || len(s.Repository.Messages) != 2 {
		t.Fatalf("bad requests left a run or messages: %+v", s)
	}
}

func TestRejoinFromEveryN(t *testing.T) {
	t.Parallel()
	e := setup(t, withTokens(20))
	tid := newID()
	e.turn(tid, "one", nil)
	_, b := e.do("POST", "/api/v1/threads/"+tid+"/runs/stream", newMessage("two", ptr(e.snapshot(tid).Messages[1].ID)))
	live := readEvents(t, bytes.NewReader(b))
	checkRun(t, live)
	// Grow the tree after the run; replays must still show it as it was.
	e.turn(tid, "three", ptr(live[len(live)-1].Messages[3].ID))
	for n := 0; n <= len(live); n++ {
		resp, rb := e.do("GET", fmt.Sprintf("/api/v1/threads/%s/runs/%s/stream?after=%d", tid, live[0].RunID, n), nil)
		wantStatus(t, resp, rb, http.StatusOK, "")
		got := readEvents(t, bytes.NewReader(rb))
		if len(got) != len(live)-n {
			t.Fatalf("after=%d: got %d events, want %d", n, len(got), len(live)-n)
		}
		for i, ev := range got {
			if !bytes.Equal(ev.Raw, live[n+i].Raw) {
				t.Fatalf("after=%d: event %d differs\n got %s\nwant %s", n, i, ev.Raw, live[n+i].Raw)
			}
		}
	}
}

// openStream starts a run and returns the response for incremental reading.
func (e *env) openStream(ctx context.Context, tid string, body any) (*http.Response, *bufio.Reader) {
	e.t.Helper()
	j, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, "POST", e.url+"/api/v1/threads/"+tid+"/runs/stream", bytes.NewReader(j))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		e.t.Fatalf("open stream: status %d %s", resp.StatusCode, b)
	}
	return resp, bufio.NewReader(resp.Body)
}

func (e *env) openRejoin(ctx context.Context, tid, runID string, after int64) (*http.Response, *bufio.Reader) {
	e.t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("%s/api/v1/threads/%s/runs/%s/stream?after=%d", e.url, tid, runID, after), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp, bufio.NewReader(resp.Body)
}

func nextEvent(t *testing.T, r *bufio.Reader) event {
	t.Helper()
	line, err := r.ReadBytes('\n')
	if err != nil {
		t.Fatalf("read event: %v", err)
	}
	var ev event
	if err := json.Unmarshal(line, &ev); err != nil {
		t.Fatal(err)
	}
	ev.Raw = bytes.TrimSpace(line)
	return ev
}

func TestRejoinDuringRun(t *testing.T) {
	t.Parallel()
	// 2 s of tokens, so that the run is still going when the snapshot is
	// read, also with the race detector and the whole suite on two cores
	// (0.4 s once was not).
	e := setup(t, withTokens(200), withDelay(10*time.Millisecond))
	tid := newID()
	resp, r := e.openStream(context.Background(), tid, newMessage("slow", nil))
	defer resp.Body.Close()
	var live []event
	for i := 0; i < 6; i++ {
		live = append(live, nextEvent(t, r))
	}
	// A reload: the snapshot has the running reply up to active_run.sequence.
	snap := e.snapshot(tid)
	if snap.ActiveRun == nil || snap.ActiveRun.RunID != live[0].RunID {
		t.Fatalf("active_run during a run: got %+v", snap.ActiveRun)
	}
	running := snap.Messages[len(snap.Messages)-1]
	if running.ID != snap.ActiveRun.MessageID || running.Status.Type != "running" {
		t.Fatalf("running message: got %+v", running)
	}
	rresp, rr := e.openRejoin(context.Background(), tid, snap.ActiveRun.RunID, snap.ActiveRun.Sequence)
	defer rresp.Body.Close()
	rest := readEvents(t, rr)
	liveRest := readEvents(t, r)
	live = append(live, liveRest...)
	checkRun(t, live)
	if got, want := running.Text()+tokensText(rest), tokensText(live); got != want {
		t.Fatalf("snapshot text + rejoined tokens:\n got %q\nwant %q", got, want)
	}
	if rest[0].Sequence != snap.ActiveRun.Sequence+1 {
		t.Fatalf("rejoin starts at %d, want %d", rest[0].Sequence, snap.ActiveRun.Sequence+1)
	}
	for i, ev := range rest {
		if want := live[int(ev.Sequence)-1]; !bytes.Equal(ev.Raw, want.Raw) {
			t.Fatalf("rejoined event %d differs from live\n got %s\nwant %s", i, ev.Raw, want.Raw)
		}
	}
}

func TestManyClientsOneRun(t *testing.T) {
	t.Parallel()
	e := setup(t, withTokens(30), withDelay(5*time.Millisecond))
	tid := newID()
	resp, r := e.openStream(context.Background(), tid, newMessage("fan out", nil))
	defer resp.Body.Close()
	first := nextEvent(t, r)
	var wg sync.WaitGroup
	got := make([][]event, 4)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rr, br := e.openRejoin(context.Background(), tid, first.RunID, 0)
			defer rr.Body.Close()
			got[i] = readEvents(t, br)
		}()
	}
	live := append([]event{first}, readEvents(t, r)...)
	wg.Wait()
	checkRun(t, live)
	for i, evs := range got {
		if len(evs) != len(live) {
			t.Fatalf("client %d: got %d events, want %d", i, len(evs), len(live))
		}
		for j := range evs {
			if !bytes.Equal(evs[j].Raw, live[j].Raw) {
				t.Fatalf("client %d event %d differs", i, j)
			}
		}
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	e := setup(t, withTokens(500), withDelay(5*time.Millisecond))
	tid := newID()
	resp, r := e.openStream(context.Background(), tid, newMessage("cancel me", nil))
	defer resp.Body.Close()
	var live []event
	for i := 0; i < 4; i++ {
		live = append(live, nextEvent(t, r))
	}
	cr, cb := e.do("POST", "/api/v1/threads/"+tid+"/runs/"+live[0].RunID+"/cancel", nil)
	wantStatus(t, cr, cb, http.StatusAccepted, "")
	live = append(live, readEvents(t, r)...)
	final := checkRun(t, live)
	if final.RunStatus != "cancelled" {
		t.Fatalf("after cancel: run_status %s, want cancelled", final.RunStatus)
	}
	asst := final.Messages[len(final.Messages)-1]
	if asst.Status.Type != "incomplete" || asst.Status.Reason != "cancelled" || asst.Text() != tokensText(live) {
		t.Fatalf("cancelled reply: got %+v, want incomplete/cancelled with the streamed text", asst)
	}
	if n := len(live); n >= 502 {
		t.Fatalf("cancel did not stop the run: %d events", n)
	}
	// Cancelling a finished run is accepted and changes nothing.
	cr, cb = e.do("POST", "/api/v1/threads/"+tid+"/runs/"+live[0].RunID+"/cancel", nil)
	wantStatus(t, cr, cb, http.StatusAccepted, "")
}

func waitRun(t *testing.T, e *env, tid, runID string) map[string]any {
	t.Helper()
	var run map[string]any
	wait.Eventually(t, 20*time.Second, func() bool {
		_, b := e.do("GET", "/api/v1/threads/"+tid+"/runs/"+runID, nil)
		run = nil
		_ = json.Unmarshal(b, &run)
		return run["status"] != "running"
	}, "run %s still running", runID)
	return run
}

func TestDisconnectPolicies(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ policy, want string }{{"continue", "succeeded"}, {"", "succeeded"}, {"cancel", "cancelled"}} {
		t.Run("policy="+tc.policy, func(t *testing.T) {
			t.Parallel()
			// 2 s of tokens: a cancel on disconnect has that long to land
			// even when the whole suite shares the cores (it once missed
			// 300 ms).
			e := setup(t, withTokens(400), withDelay(5*time.Millisecond))
			tid := newID()
			ctx, cancel := context.WithCancel(context.Background())
			body := newMessage("leave", nil)
			if tc.policy != "" {
				body["on_disconnect"] = tc.policy
			}
			resp, r := e.openStream(ctx, tid, body)
			first := nextEvent(t, r)
			nextEvent(t, r)
			cancel()
			resp.Body.Close()
			run := waitRun(t, e, tid, first.RunID)
			if run["status"] != tc.want {
				t.Fatalf("after disconnect with %q: status %v, want %s", tc.policy, run["status"], tc.want)
			}
		})
	}
}

func TestSecondRunRace(t *testing.T) {
	t.Parallel()
	// 1 s of tokens: the loser's request must land while the winner runs.
	e := setup(t, withTokens(200), withDelay(5*time.Millisecond))
	tid := newID()
	e.turn(tid, "warm", nil) // the thread exists, so both requests race on the run
	parent := e.snapshot(tid).Messages[1].ID
	var wg sync.WaitGroup
	type result struct {
		status int
		body   []byte
	}
	results := make([]result, 2)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, b := e.do("POST", "/api/v1/threads/"+tid+"/runs/stream", newMessage(fmt.Sprint("racer ", i), &parent))
			results[i] = result{resp.StatusCode, b}
		}()
	}
	wg.Wait()
	ok, busy := 0, 0
	for _, r := range results {
		switch r.status {
		case 200:
			ok++
		case 409:
			busy++
			var eb struct {
				Error struct {
					Code  string `json:"code"`
					RunID string `json:"run_id"`
				} `json:"error"`
			}
			_ = json.Unmarshal(r.body, &eb)
			if eb.Error.Code != "run_in_progress" || eb.Error.RunID == "" {
				t.Fatalf("409 body: got %s, want run_in_progress naming the run", r.body)
			}
		default:
			t.Fatalf("racer: status %d %s", r.status, r.body)
		}
	}
	if ok != 1 || busy != 1 {
		t.Fatalf("race: %d won and %d got 409, want 1 and 1", ok, busy)
	}
	if s := e.snapshot(tid); len(s.Repository.Messages) != 4 {
		t.Fatalf("after the race: %d messages, want 4 (the loser wrote nothing)", len(s.Repository.Messages))
	}
}

func TestIdempotentRetry(t *testing.T) {
	t.Parallel()
	e := setup(t)
	tid := newID()
	mid := newID()
	body := map[string]any{"message": map[string]any{"id": mid, "content": "once"}, "parent_message_id": nil}
	_, first := e.stream(tid, body)
	checkRun(t, first)
	resp, again := e.stream(tid, body)
	if resp.StatusCode != 200 || len(again) != len(first) || again[0].RunID != first[0].RunID {
		t.Fatalf("retry: status %d, %d events, want the same run's %d events", resp.StatusCode, len(again), len(first))
	}
	if s := e.snapshot(tid); len(s.Repository.Messages) != 2 {
		t.Fatalf("retry appended: %d messages, want 2", len(s.Repository.Messages))
	}
	other := map[string]any{"message": map[string]any{"id": mid, "content": "different"}, "parent_message_id": nil}
	resp, b := e.do("POST", "/api/v1/threads/"+tid+"/runs/stream", other)
	wantStatus(t, resp, b, http.StatusConflict, "conflict")
}

// TestStalledClient: a client that stops reading does not slow the run or a
// second client, and later catches up from the log with nothing missing.
func TestStalledClient(t *testing.T) {
	t.Parallel()
	e := setup(t, withTokens(5000))
	tid := newID()
	stalled, sr := e.openStream(context.Background(), tid, newMessage("big", nil))
	defer stalled.Body.Close()
	first := nextEvent(t, sr) // then stop reading
	rr, br := e.openRejoin(context.Background(), tid, first.RunID, 0)
	other := readEvents(t, br)
	rr.Body.Close()
	final := checkRun(t, other)
	if final.RunStatus != "succeeded" {
		t.Fatalf("run with a stalled client: %s", final.RunStatus)
	}
	if run := waitRun(t, e, tid, first.RunID); run["status"] != "succeeded" {
		t.Fatalf("run status %v", run["status"])
	}
	rest := readEvents(t, sr)
	all := append([]event{first}, rest...)
	checkRun(t, all)
	if tokensText(all) != tokensText(other) {
		t.Fatal("the stalled client's text differs after catching up")
	}
}

func TestHeadSurvivesReload(t *testing.T) {
	t.Parallel()
	e := setup(t)
	tid := newID()
	f := e.turn(tid, "q", nil)
	u, a := f.Messages[0], f.Messages[1]
	_, evs := e.stream(tid, map[string]any{"parent_message_id": u.ID, "source_message_id": a.ID})
	a2 := checkRun(t, evs).Messages[1]
	if s := e.snapshot(tid); *s.Repository.HeadID != a2.ID {
		t.Fatalf("head after regenerate: got %s, want %s", *s.Repository.HeadID, a2.ID)
	}
	resp, b := e.do("PUT", "/api/v1/threads/"+tid+"/head", map[string]any{"message_id": a.ID})
	wantStatus(t, resp, b, http.StatusNoContent, "")
	s := e.snapshot(tid)
	if *s.Repository.HeadID != a.ID || s.Messages[1].ID != a.ID || *s.CheckpointID != a.ID {
		t.Fatalf("head after PUT: got %s, want %s", *s.Repository.HeadID, a.ID)
	}
	// A non-leaf resolves to the most recent leaf below it.
	resp, b = e.do("PUT", "/api/v1/threads/"+tid+"/head", map[string]any{"message_id": u.ID})
	wantStatus(t, resp, b, http.StatusNoContent, "")
	if s := e.snapshot(tid); *s.Repository.HeadID != a2.ID {
		t.Fatalf("head at a non-leaf: got %s, want the newest leaf %s", *s.Repository.HeadID, a2.ID)
	}
}

func TestModelErrorIsAnEvent(t *testing.T) {
	t.Parallel()
	e := setup(t)
	tid := newID()
	resp, evs := e.stream(tid, newMessage("/fail model_timeout", nil))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	final := checkRun(t, evs)
	errEv := evs[len(evs)-2]
	if errEv.Type != "error" || errEv.Code != "model_timeout" || errEv.Error == "" {
		t.Fatalf("error event: got %s", errEv.Raw)
	}
	asst := final.Messages[1]
	if final.RunStatus != "failed" || asst.Status.Type != "incomplete" || asst.Status.Reason != "error" || asst.Text() != tokensText(evs) {
		t.Fatalf("failed run: status %s, reply %+v", final.RunStatus, asst)
	}
	// A failed first reply still names the thread by its question.
	resp, b := e.do("GET", "/api/v1/threads/"+tid, nil)
	wantStatus(t, resp, b, http.StatusOK, "")
	if !strings.Contains(string(b), `"title":"/fail model_timeout"`) {
		t.Fatalf("title after a failed first run: got %s, want %q", b, "/fail model_timeout")
	}
}

func TestAttachments(t *testing.T) {
	t.Parallel()
	e := setup(t)
	png := []byte("\x89PNG\r\n\x1a\nfake image bytes")
	upload := func(name, ct string, data []byte) (*http.Response, []byte) {
		var buf bytes.Buffer
		w := multipart.NewWriter(&buf)
		h := make(map[string][]string)
		h["Content-Disposition"] = []string{fmt.Sprintf(`form-data; name="file"; filename="%s"`, name)}
		h["Content-Type"] = []string{ct}
		p, _ := w.CreatePart(h)
		_, _ = p.Write(data)
		_ = w.Close()
		return e.do("POST", "/api/v1/attachments", buf.Bytes(), "Content-Type", w.FormDataContentType())
	}
	resp, b := upload("cat.png", "image/png", png)
	wantStatus(t, resp, b, http.StatusCreated, "")
	var att struct{ ID, Name, ContentType, URL string }
	_ = json.Unmarshal(b, &att)
	if att.ContentType != "image/png" || att.URL != "/api/v1/attachments/"+att.ID {
		t.Fatalf("upload: got %s", b)
	}
	resp, b = e.do("GET", att.URL, nil)
	wantStatus(t, resp, b, http.StatusOK, "")
	if !bytes.Equal(b, png) || resp.Header.Get("Content-Type") != "image/png" {
		t.Fatalf("download: got %q as %s", b, resp.Header.Get("Content-Type"))
	}
	resp, b = upload("x.exe", "application/x-msdownload", []byte("MZ"))
	wantStatus(t, resp, b, http.StatusUnsupportedMediaType, "unsupported_media_type")
	resp, b = upload("big.png", "image/png", bytes.Repeat([]byte("x"), 11<<20))
	wantStatus(t, resp, b, http.StatusRequestEntityTooLarge, "too_large")
	resp, b = e.do("POST", "/api/v1/attachments", `{}`)
	wantStatus(t, resp, b, http.StatusUnsupportedMediaType, "unsupported_media_type")

	tid := newID()
	_, evs := e.stream(tid, map[string]any{"message": map[string]any{"content": "what is this?", "attachments": []any{map[string]any{"id": att.ID}}}})
	final := checkRun(t, evs)
	if final.RunStatus != "succeeded" || len(final.Messages[0].Attachments) != 1 || !strings.Contains(string(final.Messages[0].Attachments[0]), att.ID) {
		t.Fatalf("user message attachments: got %s", final.Raw)
	}
}

func TestTitleModel(t *testing.T) {
	t.Parallel()
	e := setup(t, withTokens(8), withTitleModel("builtin"))
	tid := newID()
	e.turn(tid, "hello there", nil)
	// The built-in model answers the title prompt deterministically: its
	// last user message is the exchange.
	reply := builtin.BuiltinText("hello there", 1, 8)
	want := thread.TitleFrom(builtin.BuiltinText("User: hello there\n\nAssistant: "+reply, 0, 8))
	var title *string
	wait.Eventually(t, 10*time.Second, func() bool {
		_, b := e.do("GET", "/api/v1/threads/"+tid, nil)
		var th struct{ Title *string }
		_ = json.Unmarshal(b, &th)
		title = th.Title
		return title != nil
	}, "title: still none after 10s, want %q", want)
	if *title != want {
		t.Fatalf("title: got %q, want the title model's %q", *title, want)
	}
	// PATCH still overrides it.
	resp, b := e.do("PATCH", "/api/v1/threads/"+tid, map[string]any{"title": "mine"})
	wantStatus(t, resp, b, http.StatusOK, "")
	if _, b = e.do("GET", "/api/v1/threads/"+tid, nil); !strings.Contains(string(b), `"title":"mine"`) {
		t.Fatalf("title after PATCH: got %s", b)
	}
}

// unsavedStore fails every run's commit, as a database that went away.
type unsavedStore struct{ *store.Store }

func (unsavedStore) RunCreate(context.Context, thread.RunCreate, thread.Record) (*thread.Run, error) {
	return nil, errors.New("connection lost")
}

func (unsavedStore) RunComplete(context.Context, thread.RunCreate, thread.RunFinish) error {
	return errors.New("connection lost")
}

// TestUnsavedRunIsAnError: a run that cannot be saved is 503 unavailable as
// JSON, with no stream, and nothing of the run exists.
func TestUnsavedRunIsAnError(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *options) { o.wrap = func(s *store.Store) thread.Store { return unsavedStore{s} } })
	tid := newID()
	resp, body := e.do("POST", "/api/v1/threads/"+tid+"/runs/stream", newMessage("hello", nil))
	var got struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &got); err != nil || resp.StatusCode != 503 || got.Error.Code != "unavailable" ||
		!strings.Contains(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("got %d %q %s, want 503 unavailable as JSON", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if strings.Contains(got.Error.Message, "connection lost") {
		t.Fatalf("message %q shows the database's error to the caller", got.Error.Message)
	}
	// The thread would have been created with the run's start: nothing of
	// the request was written.
	resp, body = e.do("GET", "/api/v1/threads/"+tid+"/checkpoints", nil)
	wantStatus(t, resp, body, http.StatusNotFound, "not_found")
}
