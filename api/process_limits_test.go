package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/threadline/threadline/api"
	"github.com/threadline/threadline/thread/engine"
	"github.com/threadline/threadline/thread/threadtest/wait"
)

// want503 checks an unavailable answer with Retry-After.
func want503(t *testing.T, resp *http.Response, b []byte) {
	t.Helper()
	wantStatus(t, resp, b, http.StatusServiceUnavailable, "unavailable")
	if resp.Header.Get("Retry-After") == "" {
		t.Fatalf("503 without Retry-After: %s", b)
	}
}

// open sends a request as the caller of key and returns the answer with
// its body unread (a stream goes on until ctx ends); a non-200 answer's
// body is read and returned.
func (e *env) open(ctx context.Context, key, method, path string, body any) (*http.Response, *bufio.Reader, []byte) {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		j, _ := json.Marshal(body)
		rd = bytes.NewReader(j)
	}
	req, _ := http.NewRequestWithContext(ctx, method, e.url+path, rd)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, nil, b
	}
	return resp, bufio.NewReader(resp.Body), nil
}

// threeCallers is a setup option with the keys of alice, bob and carol.
func threeCallers(o *options) {
	o.keys = map[string]string{"alice-key": "alice", "bob-key": "bob", "carol-key": "carol"}
}

// TestRunsPerProcess: the process's runs in progress are capped over all
// callers (each under its own cap): the next caller's run is a 503 with
// Retry-After, and a run that ends makes room.
func TestRunsPerProcess(t *testing.T) {
	t.Parallel()
	e := setup(t, threeCallers, withDelay(20*time.Millisecond), withTokens(2000),
		withService(func(c *engine.Config) { c.Limits.RunsPerProcess, c.Limits.RunsPerCaller = 2, 5 }))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	long := map[string]any{"message": map[string]any{"content": "long"}}
	var tids, runs []string
	for _, key := range []string{"alice-key", "bob-key"} {
		tid := newID()
		sctx, scancel := context.WithCancel(ctx)
		resp, r, b := e.open(sctx, key, "POST", "/api/v1/threads/"+tid+"/runs/stream", long)
		wantStatus(t, resp, b, http.StatusOK, "")
		tids, runs = append(tids, tid), append(runs, nextEvent(t, r).RunID)
		scancel() // the stream goes; its run goes on (on_disconnect continue)
	}
	third := "/api/v1/threads/" + newID() + "/runs/stream"
	resp, _, b := e.open(ctx, "carol-key", "POST", third, long)
	want503(t, resp, b)

	resp, _, b = e.open(ctx, "alice-key", "POST", "/api/v1/threads/"+tids[0]+"/runs/"+runs[0]+"/cancel", nil)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("cancel: got %d %s, want 202", resp.StatusCode, b)
	}
	wait.Eventually(t, streamsBound, func() bool {
		resp, r, b := e.open(ctx, "carol-key", "POST", third, long)
		if resp.StatusCode == http.StatusOK {
			nextEvent(t, r)
			return true
		}
		want503(t, resp, b)
		return false
	}, "waited %v for the cancelled run to make room", streamsBound)
}

// TestStreamsPerProcess: the process's open streams are capped over all
// callers (each under its own cap): the next stream, a run's or a
// rejoin, is a 503 with Retry-After; closing one makes room.
func TestStreamsPerProcess(t *testing.T) {
	t.Parallel()
	e := setup(t, threeCallers, withDelay(20*time.Millisecond), withTokens(2000),
		withAPI(func(c *api.Config) { c.StreamsPerProcess, c.StreamsPerCaller = 2, 5 }))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	long := map[string]any{"message": map[string]any{"content": "long"}}
	tid := newID()
	resp, r, b := e.open(ctx, "alice-key", "POST", "/api/v1/threads/"+tid+"/runs/stream", long)
	wantStatus(t, resp, b, http.StatusOK, "")
	run := nextEvent(t, r).RunID
	bctx, bcancel := context.WithCancel(ctx)
	resp, r, b = e.open(bctx, "bob-key", "POST", "/api/v1/threads/"+newID()+"/runs/stream", long)
	wantStatus(t, resp, b, http.StatusOK, "")
	nextEvent(t, r)

	resp, _, b = e.open(ctx, "carol-key", "POST", "/api/v1/threads/"+newID()+"/runs/stream", long)
	want503(t, resp, b)
	rejoin := "/api/v1/threads/" + tid + "/runs/" + run + "/stream"
	resp, _, b = e.open(ctx, "alice-key", "GET", rejoin, nil)
	want503(t, resp, b) // a rejoin is a stream too

	bcancel()
	wait.Eventually(t, streamsBound, func() bool { return e.streamsOpen() == 1 }, "waited %v for the closed stream to free its slot", streamsBound)
	resp, r, b = e.open(ctx, "alice-key", "GET", rejoin, nil)
	wantStatus(t, resp, b, http.StatusOK, "")
	if ev := nextEvent(t, r); ev.RunID != run {
		t.Fatalf("rejoin after a stream closed: got run %s, want %s", ev.RunID, run)
	}
}
