package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/api"
	"github.com/threadline/threadline/api/client"
	"github.com/threadline/threadline/model"
	"github.com/threadline/threadline/store"
	"github.com/threadline/threadline/store/pgtest"
	"github.com/threadline/threadline/stream"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/engine"
)

// env is one isolated service: its own database, hub and HTTP server.
type env struct {
	t     *testing.T
	url   string
	store *store.Store
	svc   *engine.Service
	key   string            // bearer key sent by do, if any
	raw   *engine.RawWriter // with the raw option: the service's RawSink
}

type options struct {
	delay     time.Duration
	tokens    int
	keys      map[string]string
	maxBody   int64
	rateLimit float64
	lease     time.Duration
	vars      map[string]string // extra environment for the model registry
	title     string            // the title model
	wrap      func(*store.Store) thread.Store
	api       func(*api.Config)    // changes the API's settings
	service   func(*engine.Config) // changes the service's settings
	raw       bool                 // keep raw records (env.raw)
}

func setup(t *testing.T, opts ...func(*options)) *env {
	t.Helper()
	o := options{tokens: 8}
	for _, f := range opts {
		f(&o)
	}
	pool := pgtest.Pool(t)
	st := store.New(pool)
	vars := map[string]string{
		"THREADLINE_BUILTIN_TOKENS": fmt.Sprint(o.tokens),
		"THREADLINE_BUILTIN_DELAY":  o.delay.String(),
	}
	for k, v := range o.vars {
		vars[k] = v
	}
	models, err := model.NewRegistry(func(k string) string { return vars[k] })
	if err != nil {
		t.Fatal(err)
	}
	var ts thread.Store = st
	if o.wrap != nil {
		ts = o.wrap(st)
	}
	tcfg := engine.Config{Lease: o.lease, TitleModel: o.title}
	if o.service != nil {
		o.service(&tcfg)
	}
	var raw *engine.RawWriter
	if o.raw {
		raw = engine.NewRawWriter(st, nil)
		raw.Start()
		tcfg.Raw = raw
	}
	svc := engine.New(ts, stream.New[thread.Event](256), models, st, tcfg)
	acfg := api.Config{APIKeys: o.keys, MaxBody: o.maxBody, RateLimit: o.rateLimit, Attachments: st, Ready: st.Ping, Raw: st, Trace: st, Transfer: st, Shares: st, Search: st}
	if o.api != nil {
		o.api(&acfg)
	}
	srv := api.New(svc, acfg)
	hs := httptest.NewServer(srv)
	svc.Start()
	t.Cleanup(func() {
		hs.Close()
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		svc.Shutdown(sctx) // stops what Start started too
		if raw != nil {
			raw.Stop()
		}
	})
	return &env{t: t, url: hs.URL, store: st, svc: svc, raw: raw}
}

func withDelay(d time.Duration) func(*options)    { return func(o *options) { o.delay = d } }
func withTokens(n int) func(*options)             { return func(o *options) { o.tokens = n } }
func withTitleModel(name string) func(*options)   { return func(o *options) { o.title = name } }
func withVars(v map[string]string) func(*options) { return func(o *options) { o.vars = v } }

// do sends a request; body is JSON-encoded unless it is a string or []byte.
func (e *env) do(method, path string, body any, headers ...string) (*http.Response, []byte) {
	e.t.Helper()
	var rd io.Reader
	ct := "application/json"
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, e.url+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", ct)
	}
	if e.key != "" {
		req.Header.Set("Authorization", "Bearer "+e.key)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp, b
}

// wantStatus fails unless resp has the status (and, for errors, the code).
func wantStatus(t *testing.T, resp *http.Response, body []byte, status int, code string) {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("%s %s: got status %d, want %d; body %s", resp.Request.Method, resp.Request.URL.Path, resp.StatusCode, status, body)
	}
	if code == "" {
		return
	}
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("error body is not JSON: %s", body)
	}
	if e.Error.Code != code || e.Error.Message == "" {
		t.Fatalf("%s %s: got error %+v, want code %q with a message", resp.Request.Method, resp.Request.URL.Path, e.Error, code)
	}
}

// event is a decoded NDJSON event, as the Go client decodes it.
type (
	event      = client.Event
	message    = client.Message
	repository = client.Repository
)

type snapshot = client.Snapshot

// readEvents decodes an NDJSON stream to its end.
func readEvents(t *testing.T, r io.Reader) []event {
	t.Helper()
	var out []event
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var ev event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("bad NDJSON line %q: %v", sc.Text(), err)
		}
		ev.Raw = append(json.RawMessage(nil), sc.Bytes()...)
		out = append(out, ev)
	}
	return out
}

// stream posts a run and returns its events (or the error response).
func (e *env) stream(threadID string, body any) (*http.Response, []event) {
	e.t.Helper()
	resp, b := e.do("POST", "/api/v1/threads/"+threadID+"/runs/stream", body)
	if resp.StatusCode != http.StatusOK {
		return resp, nil
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/x-ndjson" {
		e.t.Fatalf("run content type: got %q, want application/x-ndjson", ct)
	}
	return resp, readEvents(e.t, bytes.NewReader(b))
}

func newMessage(content string, parent *string) map[string]any {
	return map[string]any{"message": map[string]any{"content": content}, "parent_message_id": parent}
}

// checkRun asserts the stream's invariants and returns its final snapshot.
func checkRun(t *testing.T, evs []event) event {
	t.Helper()
	if len(evs) < 2 {
		t.Fatalf("stream has %d events, want at least 2", len(evs))
	}
	first, last := evs[0], evs[len(evs)-1]
	if first.Type != "snapshot" || first.RunStatus != "running" || first.Repository == nil || first.Repository.HeadID == nil {
		t.Fatalf("first event: got %s", first.Raw)
	}
	head := *first.Repository.HeadID
	lastMsg := first.Messages[len(first.Messages)-1]
	if lastMsg.ID != head || lastMsg.Role != "assistant" || lastMsg.Status == nil || lastMsg.Status.Type != "running" || lastMsg.Text() != "" {
		t.Fatalf("first snapshot's last message: got %+v, want the empty running assistant %s", lastMsg, head)
	}
	if lastMsg.Metadata.Custom.CheckpointID != nil {
		t.Fatalf("running message has checkpointId %v, want null", *lastMsg.Metadata.Custom.CheckpointID)
	}
	for i, ev := range evs {
		if ev.Sequence != int64(i+1) {
			t.Fatalf("event %d has sequence %d, want %d", i, ev.Sequence, i+1)
		}
		if ev.RunID != first.RunID {
			t.Fatalf("event %d has run_id %s, want %s", i, ev.RunID, first.RunID)
		}
		if ev.Type == "token" && ev.MessageID != head {
			t.Fatalf("token %d names message %s, want %s", i, ev.MessageID, head)
		}
	}
	if last.Type != "snapshot" || last.RunStatus == "running" || last.Repository == nil {
		t.Fatalf("last event: got %s, want a final snapshot", last.Raw)
	}
	return last
}

func tokensText(evs []event) string {
	var s string
	for _, ev := range evs {
		if ev.Type == "token" {
			s += ev.Text
		}
	}
	return s
}

func (e *env) snapshot(threadID string) snapshot {
	e.t.Helper()
	resp, b := e.do("GET", "/api/v1/threads/"+threadID+"/messages", nil)
	wantStatus(e.t, resp, b, http.StatusOK, "")
	var s snapshot
	if err := json.Unmarshal(b, &s); err != nil {
		e.t.Fatal(err)
	}
	return s
}

func ptr(s string) *string { return &s }

func newID() string { return uuid.NewString() }
