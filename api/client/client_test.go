package client_test

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/api/client"
	"github.com/threadline/threadline/checkpoint/errcode"
)

// fastRetry keeps the tests' waits short.
var fastRetry = client.Retry{Attempts: 5, Backoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}

func message(text string) *client.NewMessage { return &client.NewMessage{Content: text} }

// collect reads a run to its end, calling at(ev) after each event.
func collect(t *testing.T, r *client.Run, at func(client.Event)) []client.Event {
	t.Helper()
	var evs []client.Event
	for ev, err := range r.Events() {
		if err != nil {
			t.Fatalf("after %d events: %v", len(evs), err)
		}
		evs = append(evs, ev)
		if at != nil {
			at(ev)
		}
	}
	return evs
}

// checkSequences fails unless evs are sequences 1..n, each once, ending
// with a final snapshot.
func checkSequences(t *testing.T, evs []client.Event) {
	t.Helper()
	for i, ev := range evs {
		if ev.Sequence != int64(i+1) {
			t.Fatalf("event %d: got sequence %d, want %d", i, ev.Sequence, i+1)
		}
	}
	if len(evs) == 0 || !evs[len(evs)-1].Final() {
		t.Fatalf("the stream did not end with a final snapshot: %d events", len(evs))
	}
}

func tokens(evs []client.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		if ev.Type == client.EventToken {
			b.WriteString(ev.Text)
		}
	}
	return b.String()
}

// TestRunRejoinsAfterDroppedConnection: a proxy cuts the connection twice
// mid-stream and refuses the next connections once; the iterator rejoins
// from the last sequence each time and the caller sees every sequence
// exactly once, with the reply's whole text.
func TestRunRejoinsAfterDroppedConnection(t *testing.T) {
	t.Parallel()
	base := startServer(t, options{tokens: 40, delay: 15 * time.Millisecond})
	p := newProxy(t, strings.TrimPrefix(base, "http://"))
	c := client.New(p.URL(), client.WithRetry(fastRetry))
	ctx := t.Context()
	r, err := c.RunStart(ctx, uuid.NewString(), client.RunRequest{Message: message("tell me a story")})
	if err != nil {
		t.Fatal(err)
	}
	var rejoinedAfter []int64
	r.OnRejoin = func(after int64, cause error) { rejoinedAfter = append(rejoinedAfter, after) }
	evs := collect(t, r, func(ev client.Event) {
		switch ev.Sequence {
		case 5:
			p.Cut()
		case 20:
			p.Refuse(2) // the first two rejoins fail on the network
			p.Cut()
		}
	})
	checkSequences(t, evs)
	final := evs[len(evs)-1]
	if final.RunStatus != client.StatusSucceeded {
		t.Fatalf("final run_status: got %q, want succeeded", final.RunStatus)
	}
	if got, want := tokens(evs), final.LastMessage().Text(); got != want || got == "" {
		t.Fatalf("streamed text %q, want the final reply %q", got, want)
	}
	// Each rejoin starts after the last event read: the one the cut came
	// at, or a later one already in the socket's buffer (on a busy machine
	// the client may have read far past the first cut before it happens,
	// so the two cuts can fall on one connection). A refused attempt is
	// tried again from the same event.
	a := rejoinedAfter
	if r.Rejoins() < 1 || len(a) < r.Rejoins() || !slices.IsSorted(a) || a[0] < 5 {
		t.Fatalf("rejoins: got %d connections, attempts after %v; want at least one, after 5 or later, never going back", r.Rejoins(), a)
	}
}

// TestRunGivesUpAfterAttempts: with the service out of reach the iterator
// stops after Retry.Attempts tries with the network error, instead of
// hanging or skipping events.
func TestRunGivesUpAfterAttempts(t *testing.T) {
	t.Parallel()
	base := startServer(t, options{tokens: 40, delay: 15 * time.Millisecond})
	p := newProxy(t, strings.TrimPrefix(base, "http://"))
	c := client.New(p.URL(), client.WithRetry(client.Retry{Attempts: 3, Backoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond}))
	r, err := c.RunStart(t.Context(), uuid.NewString(), client.RunRequest{Message: message("hello")})
	if err != nil {
		t.Fatal(err)
	}
	var last int64
	var gotErr error
	for ev, err := range r.Events() {
		if err != nil {
			gotErr = err
			break
		}
		last = ev.Sequence
		if ev.Sequence == 3 {
			p.Refuse(1000)
			p.Cut()
		}
	}
	// Events already read from the socket before the cut still come.
	if gotErr == nil || !strings.Contains(gotErr.Error(), "gave up after 3 attempts") || last < 3 {
		t.Fatalf("got error %v after sequence %d, want a give-up after 3 attempts", gotErr, last)
	}
	if opened := p.Opened(); opened != 4 {
		t.Fatalf("proxy saw %d connections, want the run and 3 rejoins", opened)
	}
	// The run itself went on: a rejoin from the start, directly, reads it
	// whole.
	r2, err := client.New(base).RunRejoin(t.Context(), r.ThreadID, r.RunID, 0)
	if err != nil {
		t.Fatal(err)
	}
	checkSequences(t, collect(t, r2, nil))
}

// TestErrors: every refusal is an *Error with the contract's status and
// code, and errors.Is matches its code.
func TestErrors(t *testing.T) {
	t.Parallel()
	base := startServer(t, options{tokens: 200, delay: 20 * time.Millisecond, keys: map[string]string{"k1": "alice"}})
	c := client.New(base, client.WithKey("k1"))
	ctx := t.Context()
	busy := uuid.NewString()
	r, err := c.RunStart(ctx, busy, client.RunRequest{Message: message("a long one"), OnDisconnect: "cancel"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		call   func() error
		status int
		target error
	}{
		{"unknown thread", func() error { _, err := c.ThreadGet(ctx, uuid.NewString()); return err }, http.StatusNotFound, client.ErrNotFound},
		{"bad uuid", func() error { _, err := c.ThreadGet(ctx, "nope"); return err }, http.StatusBadRequest, client.ErrInvalid},
		{"bad limit", func() error { _, err := c.ThreadList(ctx, 1000, ""); return err }, http.StatusBadRequest, client.ErrInvalid},
		{"no key", func() error { _, err := client.New(base).ThreadList(ctx, 0, ""); return err }, http.StatusUnauthorized, client.ErrUnauthenticated},
		{"busy thread", func() error {
			_, err := c.RunStart(ctx, busy, client.RunRequest{Message: message("again"), ParentMessageID: uuid.NewString()})
			return err
		}, http.StatusConflict, client.ErrRunInProgress},
		{"bad fork", func() error {
			th, err := c.ThreadCreate(ctx, "", nil)
			if err != nil {
				return err
			}
			_, err = c.RunStart(ctx, th.ThreadID, client.RunRequest{Message: message("hi"), ParentMessageID: uuid.NewString()})
			return err
		}, http.StatusUnprocessableEntity, client.ErrInvalidFork},
		{"unknown run", func() error { return c.RunCancel(ctx, busy, uuid.NewString()) }, http.StatusNotFound, client.ErrNotFound},
		{"rejoin unknown run", func() error { _, err := c.RunRejoin(ctx, busy, uuid.NewString(), 0); return err }, http.StatusNotFound, client.ErrNotFound},
		{"long title", func() error { _, err := c.ThreadRename(ctx, busy, strings.Repeat("x", 201)); return err }, http.StatusBadRequest, client.ErrInvalid},
		{"bad upload type", func() error {
			_, err := c.AttachmentUpload(ctx, "x.exe", "application/x-msdownload", strings.NewReader("MZ"))
			return err
		}, http.StatusUnsupportedMediaType, client.ErrUnsupportedMediaType},
	}
	for _, tc := range tests {
		err := tc.call()
		var e *client.Error
		if !errors.As(err, &e) || e.Status != tc.status || !errors.Is(err, tc.target) || e.Message == "" {
			t.Errorf("%s: got %v, want a %d %v", tc.name, err, tc.status, tc.target)
			continue
		}
		if errors.Is(err, client.ErrConflict) {
			t.Errorf("%s: %v matches conflict too", tc.name, err)
		}
	}
	// run_in_progress names the running run.
	_, err = c.RunStart(ctx, busy, client.RunRequest{Message: message("again")})
	var e *client.Error
	if !errors.As(err, &e) || e.Code != errcode.RunInProgress || e.RunID != r.RunID || e.MessageID == "" {
		t.Fatalf("busy thread: got %+v, want run_in_progress naming run %s", err, r.RunID)
	}
}

// TestClientTool: a run that declares a client tool waits for it
// (requires_action); RunContinue with the tool's result finishes the turn
// in the same message.
func TestClientTool(t *testing.T) {
	t.Parallel()
	c := client.New(exampleURL)
	ctx := t.Context()
	tid := uuid.NewString()
	ask := client.ToolSpec{Name: "ask_user", Description: "ask the person", Parameters: []byte(`{"type":"object"}`), Client: true}
	r, err := c.RunStart(ctx, tid, client.RunRequest{Message: message("ask me what to do"),
		RunConfig: &client.RunConfig{Model: "builtin:demo", Tools: []client.ToolSpec{{Name: "calculator"}, ask}}})
	if err != nil {
		t.Fatal(err)
	}
	evs := collect(t, r, nil)
	checkSequences(t, evs)
	final := evs[len(evs)-1]
	msg := final.LastMessage()
	waiting := msg.WaitingCalls()
	if final.RunStatus != client.StatusRequiresAction || len(waiting) != 1 || waiting[0].ToolName != "ask_user" {
		t.Fatalf("first run: got %s with waiting calls %+v, want requires_action on ask_user", final.RunStatus, waiting)
	}
	var opened bool
	for _, ev := range evs {
		if ev.Type == client.EventToolCall && ev.ToolCallID == waiting[0].ToolCallID && ev.ToolName == "ask_user" {
			opened = true
		}
	}
	if !opened {
		t.Fatal("no tool_call event for the waiting call")
	}
	r2, err := c.RunContinue(ctx, tid, msg.ID, []client.ToolResult{{ToolCallID: waiting[0].ToolCallID, Result: "Do the sums"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	evs2 := collect(t, r2, nil)
	checkSequences(t, evs2)
	var result *client.Event
	for i := range evs2 {
		if evs2[i].Type == client.EventToolResult {
			result = &evs2[i]
		}
	}
	final2 := evs2[len(evs2)-1]
	if result == nil || string(result.Result) != `"Do the sums"` || result.IsError || result.MessageID != msg.ID {
		t.Fatalf("continuation's tool_result: got %+v, want the client's answer on message %s", result, msg.ID)
	}
	if final2.RunStatus != client.StatusSucceeded || final2.LastMessage().ID != msg.ID || len(final2.LastMessage().WaitingCalls()) != 0 {
		t.Fatalf("continuation: got %s on %s, want succeeded on %s", final2.RunStatus, final2.LastMessage().ID, msg.ID)
	}
	// Continuing again is invalid_fork: the message no longer waits.
	if _, err := c.RunContinue(ctx, tid, msg.ID, []client.ToolResult{{ToolCallID: waiting[0].ToolCallID, Result: "x"}}, nil); !errors.Is(err, client.ErrInvalidFork) {
		t.Fatalf("second continuation: got %v, want invalid_fork", err)
	}
}

// TestThreadsAndCatalog: threads are created, listed, renamed, read and
// deleted; models, tools, limits and uploads answer.
func TestThreadsAndCatalog(t *testing.T) {
	t.Parallel()
	c := client.New(startServer(t, options{}) + "/api/v1/")
	ctx := t.Context()
	th, err := c.ThreadCreate(ctx, "", map[string]any{"project": "x"})
	if err != nil {
		t.Fatal(err)
	}
	evs := collect(t, mustStart(t, c, th.ThreadID, client.RunRequest{Message: message("hello")}), nil)
	checkSequences(t, evs)
	if _, err := c.ThreadRename(ctx, th.ThreadID, "renamed"); err != nil {
		t.Fatal(err)
	}
	page, err := c.ThreadList(ctx, 10, "")
	if err != nil || len(page.Threads) != 1 || page.Threads[0].ThreadID != th.ThreadID || *page.Threads[0].Title != "renamed" {
		t.Fatalf("list: got %+v, %v; want the renamed thread", page, err)
	}
	snap, err := c.ThreadMessages(ctx, th.ThreadID)
	if err != nil || len(snap.Messages) != 2 || snap.Messages[1].Text() != tokens(evs) || snap.ActiveRun != nil {
		t.Fatalf("snapshot: got %+v, %v", snap, err)
	}
	sibs, at := snap.Repository.Siblings(snap.Messages[1].ID)
	if len(sibs) != 1 || at != 0 {
		t.Fatalf("siblings: got %v at %d", sibs, at)
	}
	info, err := c.RunGet(ctx, th.ThreadID, evs[0].RunID)
	if err != nil || info.Status != client.StatusSucceeded || info.LastSequence != int64(len(evs)) {
		t.Fatalf("run: got %+v, %v", info, err)
	}
	models, err := c.Models(ctx)
	if err != nil || len(models) == 0 || models[0].Name != "builtin" {
		t.Fatalf("models: got %+v, %v", models, err)
	}
	tools, err := c.Tools(ctx)
	if err != nil || len(tools) == 0 || tools[0].Name != "calculator" {
		t.Fatalf("tools: got %+v, %v", tools, err)
	}
	lim, err := c.Limits(ctx)
	if err != nil || lim.MaxBodyBytes <= 0 || len(lim.AttachmentTypes) == 0 {
		t.Fatalf("limits: got %+v, %v", lim, err)
	}
	att, err := c.AttachmentUpload(ctx, "notes.txt", "", strings.NewReader("some notes"))
	if err != nil || att.ContentType != "text/plain" || att.Size != 10 || att.URL == "" {
		t.Fatalf("upload: got %+v, %v", att, err)
	}
	if err := c.ThreadDelete(ctx, th.ThreadID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ThreadGet(ctx, th.ThreadID); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("deleted thread: got %v, want not_found", err)
	}
}

func mustStart(t *testing.T, c *client.Client, tid string, req client.RunRequest) *client.Run {
	t.Helper()
	r, err := c.RunStart(t.Context(), tid, req)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRunStartRetriesOnlyIdempotent: a start whose message has an id is
// retried when the network fails; one without is sent once and fails.
func TestRunStartRetriesOnlyIdempotent(t *testing.T) {
	t.Parallel()
	p := newProxy(t, strings.TrimPrefix(exampleURL, "http://"))
	c := client.New(p.URL(), client.WithRetry(fastRetry))
	p.Refuse(1)
	if _, err := c.RunStart(t.Context(), uuid.NewString(), client.RunRequest{Message: message("once")}); err == nil {
		t.Fatal("a start without a message id was retried past a dropped connection")
	}
	p.Refuse(2)
	tid, mid := uuid.NewString(), uuid.NewString()
	r, err := c.RunStart(t.Context(), tid, client.RunRequest{Message: &client.NewMessage{ID: mid, Content: "again"}})
	if err != nil {
		t.Fatalf("idempotent start: %v", err)
	}
	evs := collect(t, r, nil)
	checkSequences(t, evs)
	if got := evs[0].Messages[0].ID; got != mid {
		t.Fatalf("user message id: got %s, want %s", got, mid)
	}
	if opened := p.Opened(); opened != 4 {
		t.Fatalf("proxy saw %d connections, want 1 refused start, then 2 refused and 1 served", opened)
	}
}

// TestRejoinRetriesOnly5xx: a rejoin answered 503 is tried again and the
// run reads whole; one answered 404 ends the iterator with that error at
// once.
func TestRejoinRetriesOnly5xx(t *testing.T) {
	t.Parallel()
	base := startServer(t, options{tokens: 30, delay: 15 * time.Millisecond})
	p := newProxy(t, strings.TrimPrefix(base, "http://"))
	c := client.New(p.URL(), client.WithRetry(fastRetry))
	r := mustStart(t, c, uuid.NewString(), client.RunRequest{Message: message("one")})
	evs := collect(t, r, func(ev client.Event) {
		if ev.Sequence == 4 {
			p.RefuseWith(2, httpError(http.StatusServiceUnavailable, "unavailable"))
			p.Cut()
		}
	})
	checkSequences(t, evs)
	if r.Rejoins() != 1 {
		t.Fatalf("rejoins: got %d, want 1 after two 503s", r.Rejoins())
	}

	r2 := mustStart(t, c, uuid.NewString(), client.RunRequest{Message: message("two")})
	var gotErr error
	for ev, err := range r2.Events() {
		if err != nil {
			gotErr = err
			break
		}
		if ev.Sequence == 4 {
			p.RefuseWith(5, httpError(http.StatusNotFound, "not_found"))
			p.Cut()
		}
	}
	var e *client.Error
	if !errors.As(gotErr, &e) || e.Status != http.StatusNotFound || !errors.Is(gotErr, client.ErrNotFound) {
		t.Fatalf("rejoin answered 404: got %v, want the *Error", gotErr)
	}
	p.mu.Lock()
	left := p.refuse
	p.mu.Unlock()
	if left != 4 {
		t.Fatalf("the 404 was tried %d times, want once", 5-left)
	}
}
