package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/threadtest/wait"
)

// uiEvent is one server-sent event of a UI message stream.
type uiEvent struct {
	ID    int64 // 0: no id line
	Data  string
	Chunk struct {
		Type            string          `json:"type"`
		ID              string          `json:"id"`
		Delta           string          `json:"delta"`
		MessageID       string          `json:"messageId"`
		MessageMetadata json.RawMessage `json:"messageMetadata"`
		ErrorText       string          `json:"errorText"`
		ToolCallID      string          `json:"toolCallId"`
		ToolName        string          `json:"toolName"`
		InputTextDelta  string          `json:"inputTextDelta"`
		Input           json.RawMessage `json:"input"`
		Output          json.RawMessage `json:"output"`
	}
}

// readSSE parses a whole SSE body; every event must be one id line (or
// none) and one data line.
func readSSE(t *testing.T, body []byte) []uiEvent {
	t.Helper()
	var out []uiEvent
	for _, block := range strings.Split(strings.TrimSuffix(string(body), "\n\n"), "\n\n") {
		if block == "" {
			continue
		}
		var ev uiEvent
		sc := bufio.NewScanner(strings.NewReader(block))
		for sc.Scan() {
			k, v, _ := strings.Cut(sc.Text(), ": ")
			switch k {
			case "id":
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					t.Fatalf("id line %q", sc.Text())
				}
				ev.ID = n
			case "data":
				ev.Data = v
			default:
				t.Fatalf("unexpected SSE line %q in %q", sc.Text(), block)
			}
		}
		if ev.Data != "[DONE]" {
			if err := json.Unmarshal([]byte(ev.Data), &ev.Chunk); err != nil {
				t.Fatalf("data %q: %v", ev.Data, err)
			}
		}
		out = append(out, ev)
	}
	return out
}

func types(evs []uiEvent) string {
	var s []string
	for _, ev := range evs {
		if ev.Data == "[DONE]" {
			s = append(s, "[DONE]")
			continue
		}
		t := ev.Chunk.Type
		if n := len(s); t == "text-delta" && n > 0 && s[n-1] == "text-delta" {
			continue // a run of deltas reads as one
		}
		s = append(s, t)
	}
	return strings.Join(s, " ")
}

func deltas(evs []uiEvent) string {
	var b strings.Builder
	for _, ev := range evs {
		if ev.Chunk.Type == "text-delta" {
			b.WriteString(ev.Chunk.Delta)
		}
	}
	return b.String()
}

type uiMsg map[string]any

func userMsg(id, text string) uiMsg {
	return uiMsg{"id": id, "role": "user", "parts": []any{map[string]any{"type": "text", "text": text}}}
}

// uiPost sends a chat request and returns the response and its events.
func (e *env) uiPost(body any) (*http.Response, []byte, []uiEvent) {
	e.t.Helper()
	resp, b := e.do("POST", "/api/v1/ui/chat", body)
	if resp.StatusCode != http.StatusOK {
		return resp, b, nil
	}
	checkUIHeaders(e.t, resp)
	return resp, b, readSSE(e.t, b)
}

func checkUIHeaders(t *testing.T, resp *http.Response) {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type: got %q, want text/event-stream", ct)
	}
	if v := resp.Header.Get("x-vercel-ai-ui-message-stream"); v != "v1" {
		t.Fatalf("x-vercel-ai-ui-message-stream: got %q, want v1", v)
	}
}

// checkUIRun asserts a whole run's stream: start first (naming the
// assistant message), ids rising with the native sequence, finish with the
// run's metadata, [DONE] last. It returns the start's messageId and the
// finish metadata.
func checkUIRun(t *testing.T, evs []uiEvent) (string, map[string]any) {
	t.Helper()
	if len(evs) < 4 || evs[0].Chunk.Type != "start" || evs[len(evs)-1].Data != "[DONE]" || evs[len(evs)-2].Chunk.Type != "finish" {
		t.Fatalf("stream: got %s, want start … finish [DONE]", types(evs))
	}
	if _, err := uuid.Parse(evs[0].Chunk.MessageID); err != nil {
		t.Fatalf("start messageId %q: %v", evs[0].Chunk.MessageID, err)
	}
	prev := int64(0)
	for i, ev := range evs[:len(evs)-1] {
		if ev.ID < prev || ev.ID == 0 {
			t.Fatalf("event %d (%s) has id %d after %d", i, ev.Chunk.Type, ev.ID, prev)
		}
		prev = ev.ID
	}
	var meta map[string]any
	if err := json.Unmarshal(evs[len(evs)-2].Chunk.MessageMetadata, &meta); err != nil {
		t.Fatal(err)
	}
	return evs[0].Chunk.MessageID, meta
}

// TestUIChatConversation: a chat with a useChat id (not a UUID) sends a
// message, regenerates the reply and edits the message; the native
// snapshot of the thread the id maps to shows each as the tree has it.
func TestUIChatConversation(t *testing.T) {
	t.Parallel()
	e := setup(t)
	chat := "k3Hq0aZ1vB7xYw2c"
	_, _, evs := e.uiPost(map[string]any{"id": chat, "trigger": "submit-message", "messages": []any{userMsg("u1", "hello")}})
	reply, meta := checkUIRun(t, evs)
	if got, want := types(evs), "start start-step text-start text-delta text-end finish-step finish [DONE]"; got != want {
		t.Fatalf("chunks: got %s, want %s", got, want)
	}
	if meta["status"] != "succeeded" || meta["model"] == "" || meta["runId"] == nil || meta["usage"] == nil {
		t.Fatalf("finish metadata: got %v", meta)
	}
	tid := meta["threadId"].(string)
	snap := e.snapshot(tid)
	if len(snap.Messages) != 2 || snap.Messages[1].ID != reply || snap.Messages[1].Text() != deltas(evs) || snap.Messages[0].Text() != "hello" {
		t.Fatalf("thread after send: got %+v, want hello and the streamed reply %s", snap.Messages, reply)
	}
	user := snap.Messages[0].ID

	// Regenerate: messageId names the reply; messages end with the user's.
	_, _, evs = e.uiPost(map[string]any{"id": chat, "trigger": "regenerate-message", "messageId": reply, "messages": []any{userMsg("u1", "hello")}})
	reply2, _ := checkUIRun(t, evs)
	snap = e.snapshot(tid)
	if reply2 == reply || len(snap.Messages) != 2 || snap.Messages[1].ID != reply2 {
		t.Fatalf("thread after regenerate: got %+v, want the new reply %s", snap.Messages, reply2)
	}
	if got := uiChildren(snap, user); len(got) != 2 || got[0] != reply || got[1] != reply2 {
		t.Fatalf("replies of the user message: got %v, want %s and %s", got, reply, reply2)
	}

	// Next message: under the reply the client shows (the first one).
	_, _, evs = e.uiPost(map[string]any{"id": chat, "trigger": "submit-message", "messages": []any{
		userMsg("u1", "hello"), uiMsg{"id": reply, "role": "assistant", "parts": []any{}}, userMsg("u2", "more")}})
	checkUIRun(t, evs)
	snap = e.snapshot(tid)
	if len(snap.Messages) != 4 || snap.Messages[1].ID != reply || snap.Messages[2].Text() != "more" {
		t.Fatalf("thread after second message: got %+v, want it under %s", snap.Messages, reply)
	}

	// Edit: the same message id with other text forks beside it.
	_, _, evs = e.uiPost(map[string]any{"id": chat, "trigger": "submit-message", "messages": []any{userMsg("u1", "hello again")}})
	checkUIRun(t, evs)
	snap = e.snapshot(tid)
	if got := uiChildren(snap, ""); len(got) != 2 || got[0] != user || len(snap.Messages) != 2 || snap.Messages[0].Text() != "hello again" {
		t.Fatalf("thread after edit: roots %v, path %+v; want two roots, the edit shown", got, snap.Messages)
	}
}

// uiChildren returns the ids of parent's children in the snapshot's
// repository ("" for the roots), in creation order.
func uiChildren(s snapshot, parent string) []string {
	var out []string
	for _, m := range s.Repository.Messages {
		p := ""
		if m.ParentID != nil {
			p = *m.ParentID
		}
		if p == parent {
			out = append(out, m.Message.ID)
		}
	}
	return out
}

// TestUIChatToolCall: the demo model's calculator call streams as tool
// input chunks, the input as an object once complete, the output 84, and
// the answer in a second step.
func TestUIChatToolCall(t *testing.T) {
	t.Parallel()
	e := setup(t, withTools(t))
	_, _, evs := e.uiPost(map[string]any{"id": newID(), "trigger": "submit-message", "run_config": map[string]any{"model": "builtin:demo"},
		"messages": []any{userMsg(newID(), "what is 12*7?")}})
	checkUIRun(t, evs)
	got := types(evs)
	want := "start start-step text-start text-delta text-end tool-input-start tool-input-delta"
	if !strings.HasPrefix(got, want) || !strings.Contains(got, "tool-input-available tool-output-available finish-step start-step text-start") {
		t.Fatalf("chunks: got %s, want a text, the call and a second step", got)
	}
	var args strings.Builder
	for _, ev := range evs {
		c := ev.Chunk
		switch c.Type {
		case "tool-input-delta":
			args.WriteString(c.InputTextDelta)
		case "tool-input-available":
			if c.ToolName != "calculator" || string(c.Input) != `{"expression":"12*7"}` {
				t.Fatalf("tool-input-available: got %s", ev.Data)
			}
		case "tool-output-available":
			if string(c.Output) != "84" {
				t.Fatalf("tool-output-available: got %s", ev.Data)
			}
		}
	}
	if args.String() != `{"expression":"12*7"}` || !strings.Contains(deltas(evs), "84") {
		t.Fatalf("input %q, text %q: want the expression and 84", args.String(), deltas(evs))
	}
}

// TestUIChatResume: GET …/stream answers 204 for a chat with no run,
// replays a running run from its first event while it runs (the same
// bytes the POST wrote), after it ended too, and after Last-Event-ID only
// the events past it.
func TestUIChatResume(t *testing.T) {
	t.Parallel()
	e := setup(t, withDelay(20*time.Millisecond), withTokens(30))
	chat := newID()
	resp, b := e.do("GET", "/api/v1/ui/chat/"+chat+"/stream", nil)
	wantStatus(t, resp, b, http.StatusNoContent, "")

	posted, postDone := make(chan []byte, 1), make(chan struct{})
	go func() {
		defer close(postDone)
		_, b := e.do("POST", "/api/v1/ui/chat", map[string]any{"id": chat, "trigger": "submit-message", "messages": []any{userMsg(newID(), "hi")}})
		posted <- b
	}()
	t.Cleanup(func() { <-postDone }) // the POST ends before the server does
	var mid []byte
	wait.Eventually(t, 10*time.Second, func() bool {
		resp, b := e.do("GET", "/api/v1/threads/"+chat+"/messages", nil)
		var s snapshot
		if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &s) != nil || s.ActiveRun == nil || s.ActiveRun.Sequence <= 2 {
			return false
		}
		resp, mid = e.do("GET", "/api/v1/ui/chat/"+chat+"/stream", nil)
		wantStatus(t, resp, mid, http.StatusOK, "")
		checkUIHeaders(t, resp)
		return true
	}, "the run ended before a resume could join it")
	full := <-posted
	if !bytes.Equal(mid, full) {
		t.Fatalf("resumed mid-reply:\n%s\nwant what the POST wrote:\n%s", mid, full)
	}
	resp, after := e.do("GET", "/api/v1/ui/chat/"+chat+"/stream", nil)
	wantStatus(t, resp, after, http.StatusOK, "")
	if !bytes.Equal(after, full) {
		t.Fatalf("resumed after the end:\n%s\nwant:\n%s", after, full)
	}
	evs := readSSE(t, full)
	checkUIRun(t, evs)
	cut := evs[len(evs)/2].ID
	resp, tail := e.do("GET", "/api/v1/ui/chat/"+chat+"/stream", nil, "Last-Event-ID", strconv.FormatInt(cut, 10))
	wantStatus(t, resp, tail, http.StatusOK, "")
	var want []uiEvent
	for _, ev := range evs {
		if ev.ID > cut || ev.Data == "[DONE]" {
			want = append(want, ev)
		}
	}
	got := readSSE(t, tail)
	if len(got) != len(want) || got[0].Data != want[0].Data || got[0].ID != want[0].ID {
		t.Fatalf("after Last-Event-ID %d: got %d events from %+v, want %d from %+v", cut, len(got), got[0], len(want), want[0])
	}
}

// TestUIChatBadRequests: malformed chat requests get a JSON error and
// create no thread.
func TestUIChatBadRequests(t *testing.T) {
	t.Parallel()
	e := setup(t)
	chat := newID()
	tests := []struct {
		name   string
		body   any
		status int
		code   string
	}{
		{"no id", map[string]any{"trigger": "submit-message", "messages": []any{userMsg("a", "x")}}, 400, "invalid_request"},
		{"bad trigger", map[string]any{"id": chat, "trigger": "resume-stream", "messages": []any{userMsg("a", "x")}}, 400, "invalid_request"},
		{"no messages", map[string]any{"id": chat, "trigger": "submit-message", "messages": []any{}}, 400, "invalid_request"},
		{"unknown field", map[string]any{"id": chat, "trigger": "submit-message", "messages": []any{userMsg("a", "x")}, "model": "x"}, 400, "invalid_request"},
		{"assistant last", map[string]any{"id": chat, "trigger": "submit-message", "messages": []any{uiMsg{"id": "a", "role": "assistant", "parts": []any{}}}}, 400, "invalid_request"},
		{"empty text", map[string]any{"id": chat, "trigger": "submit-message", "messages": []any{uiMsg{"id": "a", "role": "user", "parts": []any{}}}}, 400, "invalid_request"},
		{"tool part", map[string]any{"id": chat, "trigger": "submit-message", "messages": []any{uiMsg{"id": "a", "role": "user", "parts": []any{map[string]any{"type": "dynamic-tool"}}}}}, 400, "invalid_request"},
		{"frontend tools", map[string]any{"id": chat, "trigger": "submit-message", "messages": []any{userMsg("a", "x")}, "tools": map[string]any{"t": map[string]any{}}}, 400, "invalid_request"},
		{"bad on_disconnect", map[string]any{"id": chat, "trigger": "submit-message", "messages": []any{userMsg("a", "x")}, "on_disconnect": "stop"}, 400, "invalid_request"},
		{"regenerate unknown", map[string]any{"id": chat, "trigger": "regenerate-message", "messageId": "nope", "messages": []any{userMsg("a", "x")}}, 422, "invalid_fork"},
		{"regenerate unsent", map[string]any{"id": chat, "trigger": "regenerate-message", "messages": []any{userMsg("a", "x")}}, 422, "invalid_fork"},
	}
	for _, tc := range tests {
		resp, b := e.do("POST", "/api/v1/ui/chat", tc.body)
		if resp.StatusCode != tc.status || !strings.Contains(string(b), `"code":"`+tc.code+`"`) {
			t.Errorf("%s: got %d %s, want %d %s", tc.name, resp.StatusCode, b, tc.status, tc.code)
		}
	}
	resp, b := e.do("GET", "/api/v1/threads/"+chat, nil)
	wantStatus(t, resp, b, http.StatusNotFound, "not_found")
	resp, b = e.do("GET", "/api/v1/ui/chat/"+chat+"/stream", nil, "Last-Event-ID", "x")
	wantStatus(t, resp, b, http.StatusBadRequest, "invalid_request")
}

// TestUIChatAssistantUIBody: the fields assistant-ui's
// AssistantChatTransport adds are taken; system becomes the run's system
// prompt.
func TestUIChatAssistantUIBody(t *testing.T) {
	t.Parallel()
	e := setup(t)
	_, _, evs := e.uiPost(map[string]any{"id": "__LOCALID_abc", "trigger": "submit-message", "messages": []any{userMsg("m", "hi")},
		"system": "be brief", "tools": map[string]any{}, "callSettings": map[string]any{}, "config": map[string]any{}, "metadata": nil})
	_, meta := checkUIRun(t, evs)
	resp, b := e.do("GET", "/api/v1/threads/"+meta["threadId"].(string)+"/runs/"+meta["runId"].(string), nil)
	wantStatus(t, resp, b, http.StatusOK, "")
	var run struct {
		Config struct {
			System string `json:"system"`
		} `json:"run_config"`
	}
	if err := json.Unmarshal(b, &run); err != nil || run.Config.System != "be brief" {
		t.Fatalf("run: got %s, want run_config.system \"be brief\"", b)
	}
}

// TestUIChatResumeAfterOwnerDied: a run whose process died (its lease
// lapsed, its log holds part of a reply) resumes over GET …/stream: the
// logged text, then, once recovery ends it, the run_interrupted error and
// finish with status interrupted.
func TestUIChatResumeAfterOwnerDied(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	tid := uuid.New()
	now := time.Now().UTC().Truncate(time.Microsecond)
	if _, _, err := e.store.ThreadCreate(ctx, &thread.Thread{ID: tid, Caller: "local", CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	user := &checkpoint.Node{ID: uuid.New(), ThreadID: tid, Role: checkpoint.RoleUser, Content: []checkpoint.Part{{Type: "text", Text: "q"}}, Seq: 1, CreatedAt: now}
	r := thread.Run{ID: uuid.New(), ThreadID: tid, Status: thread.RunRunning, UserMessageID: user.ID, ParentID: user.ID, MessageID: uuid.New(),
		Model: "builtin", Owner: "dead-process", LeaseUntil: now.Add(-time.Second), TreeSeq: 1, CreatedAt: now}
	if _, err := e.store.RunCreate(ctx, thread.RunCreate{Caller: "local", Thread: tid, User: user, Run: r},
		thread.Record{Seq: 1, Kind: thread.KindSnapshot, Status: thread.RunRunning, TreeSeq: 1}); err != nil {
		t.Fatal(err)
	}
	if err := e.store.RunEventsAppend(ctx, []thread.Segment{{RunID: r.ID, Records: []thread.Record{{Seq: 2, Kind: thread.KindToken, Text: "half"}, {Seq: 3, Kind: thread.KindToken, Text: " done"}}}}); err != nil {
		t.Fatal(err)
	}
	got := make(chan []byte, 1)
	go func() {
		resp, b := e.do("GET", "/api/v1/ui/chat/"+tid.String()+"/stream", nil)
		if resp.StatusCode != http.StatusOK {
			b = nil
		}
		got <- b
	}()
	e.svc.Recover(ctx) // before or after the GET joined: the same stream
	b := <-got
	if b == nil {
		t.Fatal("GET …/stream did not answer 200")
	}
	evs := readSSE(t, b)
	_, meta := checkUIRun(t, evs)
	if got, want := types(evs), "start start-step text-start text-delta text-end message-metadata error finish-step finish [DONE]"; got != want {
		t.Fatalf("chunks: got %s, want %s", got, want)
	}
	if evs[0].Chunk.MessageID != r.MessageID.String() || deltas(evs) != "half done" || meta["status"] != "interrupted" {
		t.Fatalf("resumed: message %s, text %q, finish %v; want %s, \"half done\", interrupted", evs[0].Chunk.MessageID, deltas(evs), meta, r.MessageID)
	}
}

// TestUIChatEscapedID: a chat id that needs escaping in the resume URL
// (DefaultChatTransport encodeURIComponent()s it) names the same thread.
func TestUIChatEscapedID(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, id := range []string{"my chat/ü?x=1", "100% sure", "plain-id_1"} {
		_, _, evs := e.uiPost(map[string]any{"id": id, "trigger": "submit-message", "messages": []any{userMsg("m", "hi")}})
		checkUIRun(t, evs)
		resp, b := e.do("GET", "/api/v1/ui/chat/"+url.PathEscape(id)+"/stream", nil)
		if resp.StatusCode != http.StatusOK || !bytes.Contains(b, []byte(evs[0].Data)) {
			t.Errorf("resume of chat %q: got %d %.200s, want the run that started with %s", id, resp.StatusCode, b, evs[0].Data)
		}
	}
}

// TestUIChatRetry: the same submit again is answered with the run it
// started, replayed; the thread gets no second message.
func TestUIChatRetry(t *testing.T) {
	t.Parallel()
	e := setup(t)
	body := map[string]any{"id": newID(), "trigger": "submit-message", "messages": []any{userMsg("m1", "hi")}}
	_, first, evs := e.uiPost(body)
	_, meta := checkUIRun(t, evs)
	_, again, _ := e.uiPost(body)
	if !bytes.Equal(again, first) {
		t.Fatalf("retry:\n%s\nwant the first stream:\n%s", again, first)
	}
	if s := e.snapshot(meta["threadId"].(string)); len(s.Repository.Messages) != 2 {
		t.Fatalf("thread after a retry: %d messages, want 2", len(s.Repository.Messages))
	}
}

// TestUIChatCancelOnDisconnect: with on_disconnect "cancel", closing the
// stream (useChat's stop()) cancels the run; by default the run goes on.
func TestUIChatCancelOnDisconnect(t *testing.T) {
	t.Parallel()
	e := setup(t, withDelay(20*time.Millisecond), withTokens(200))
	for _, tc := range []struct{ onDisconnect, want string }{{"cancel", "cancelled"}, {"", "succeeded"}} {
		body, _ := json.Marshal(map[string]any{"id": newID(), "trigger": "submit-message", "messages": []any{userMsg(newID(), "hi")}, "on_disconnect": tc.onDisconnect})
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "POST", e.url+"/api/v1/ui/chat", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		tid, rid := resp.Header.Get("X-Thread-Id"), resp.Header.Get("X-Run-Id")
		sc := bufio.NewScanner(resp.Body)
		for n := 0; n < 8; n++ { // a few chunks in
			if !sc.Scan() {
				break
			}
		}
		cancel()
		resp.Body.Close()
		var run struct {
			Status string `json:"status"`
		}
		wait.Eventually(t, 20*time.Second, func() bool {
			_, b := e.do("GET", "/api/v1/threads/"+tid+"/runs/"+rid, nil)
			_ = json.Unmarshal(b, &run)
			return run.Status != "running"
		}, "on_disconnect %q: run still %q after 20 s, want %q", tc.onDisconnect, func() any { return run.Status }, tc.want)
		if run.Status != tc.want {
			t.Errorf("on_disconnect %q: run ended %q, want %q", tc.onDisconnect, run.Status, tc.want)
		}
	}
}
