package api_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/threadline/threadline/api"
	"github.com/threadline/threadline/model"
	"github.com/threadline/threadline/store"
	"github.com/threadline/threadline/store/pgtest"
	"github.com/threadline/threadline/stream"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/engine"
	"github.com/threadline/threadline/thread/threadtest/wait"
)

// shutdownAtCleanup shuts svc down when the test ends, within a bound (its
// store may be down by then).
func shutdownAtCleanup(t *testing.T, svc *engine.Service) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		svc.Shutdown(ctx)
	})
}

// closedPort returns a loopback port nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return port
}

// TestOutageEveryRoute runs the service against a database URL whose port
// is closed: every route that needs the database answers 503 unavailable
// with Retry-After, never a 500.
func TestOutageEveryRoute(t *testing.T) {
	t.Parallel()
	url := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=2", closedPort(t))
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	store.Configure(cfg)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	st := store.New(pool)
	models, err := model.NewRegistry(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	svc := engine.New(st, stream.New[thread.Event](16), models, st, engine.Config{})
	svc.Start()
	shutdownAtCleanup(t, svc)
	srv := api.New(svc, api.Config{Attachments: st, Ready: st.Ping, Raw: st})
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	e := &env{t: t, url: hs.URL}
	tid, rid := newID(), newID()
	for _, r := range outageRoutes(tid, rid) {
		resp, b := e.do(r.method, r.path, r.body, r.headers...)
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), `"code":"unavailable"`) || resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s %s: got %d %s (Retry-After %q), want 503 unavailable with Retry-After", r.method, r.path, resp.StatusCode, b, resp.Header.Get("Retry-After"))
		}
	}
	resp, b := e.do("GET", "/readyz", nil)
	wantStatus(t, resp, b, http.StatusServiceUnavailable, "")
}

type route struct {
	method, path string
	body         any
	headers      []string
}

// outageRoutes is every route that reads or writes the database.
func outageRoutes(tid, rid string) []route {
	th := "/api/v1/threads/" + tid
	mp := "--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\r\nContent-Type: text/plain\r\n\r\nhello\r\n--B--\r\n"
	return []route{
		{"GET", "/api/v1/threads", nil, nil},
		{"POST", "/api/v1/threads", map[string]any{"thread_id": tid}, nil},
		{"GET", th, nil, nil},
		{"PATCH", th, map[string]any{"title": "t"}, nil},
		{"DELETE", th, nil, nil},
		{"GET", th + "/messages", nil, nil},
		{"PUT", th + "/head", map[string]any{"message_id": rid}, nil},
		{"GET", th + "/checkpoints", nil, nil},
		{"POST", th + "/runs/stream", newMessage("hello", nil), nil},
		{"POST", th + "/runs/stream", map[string]any{"message": map[string]any{"content": "hi", "id": newID()}, "parent_message_id": rid}, nil},
		{"GET", th + "/runs/" + rid + "/stream", nil, nil},
		{"POST", th + "/runs/" + rid + "/cancel", nil, nil},
		{"GET", th + "/runs/" + rid, nil, nil},
		{"GET", th + "/runs/" + rid + "/raw", nil, nil},
		{"POST", "/api/v1/attachments", mp, []string{"Content-Type", "multipart/form-data; boundary=B"}},
		{"GET", "/api/v1/attachments/" + rid, nil, nil},
	}
}

// TestOutageRecovers stops the service's database under it: while it is
// down every route answers 503 unavailable with Retry-After (or from
// memory), never a 500; once it is back, every route works again without a
// restart.
func TestOutageRecovers(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts its own Postgres cluster")
	}
	pg := pgtest.NewPrivate(t)
	ctx := context.Background()
	if err := store.MigrateUp(ctx, pg.URL); err != nil {
		t.Fatal(err)
	}
	cfg, err := pgxpool.ParseConfig(pg.URL + "&connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	store.Configure(cfg)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	st := store.New(pool)
	models, err := model.NewRegistry(func(k string) string {
		return map[string]string{"THREADLINE_BUILTIN_TOKENS": "4"}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	svc := engine.New(st, stream.New[thread.Event](16), models, st, engine.Config{})
	svc.Start()
	shutdownAtCleanup(t, svc)
	hs := httptest.NewServer(api.New(svc, api.Config{Attachments: st, Ready: st.Ping, Raw: st}))
	t.Cleanup(hs.Close)
	e := &env{t: t, url: hs.URL}
	tid := newID()
	_, evs := e.stream(tid, newMessage("before the outage", nil))
	rid := checkRun(t, evs).RunID

	pg.Stop()
	answered, served := 0, 0
	for _, r := range outageRoutes(tid, rid) {
		resp, b := e.do(r.method, r.path, r.body, r.headers...)
		answered++
		switch {
		case resp.StatusCode < 300 || resp.StatusCode == http.StatusNotFound && r.method == "GET" && strings.Contains(r.path, "/attachments/"):
			served++ // from memory (a cached tree or run), or an unknown attachment
		case resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(string(b), `"code":"unavailable"`) && resp.Header.Get("Retry-After") != "":
		default:
			t.Errorf("database down: %s %s: got %d %s, want 503 unavailable with Retry-After", r.method, r.path, resp.StatusCode, b)
		}
	}
	resp, b := e.do("GET", "/readyz", nil)
	wantStatus(t, resp, b, http.StatusServiceUnavailable, "")
	t.Logf("database down: %d requests, %d served from memory, the rest 503", answered, served)

	pg.Start()
	status := 0
	wait.Eventually(t, 60*time.Second, func() bool {
		resp, _ := e.do("GET", "/api/v1/threads", nil)
		status = resp.StatusCode
		return status == http.StatusOK
	}, "database back: GET /threads still %v after 60 s", func() any { return status })
	resp, b = e.do("GET", "/api/v1/threads/"+tid, nil)
	wantStatus(t, resp, b, http.StatusOK, "")
	_, evs = e.stream(tid, newMessage("after the outage", ptr(checkRun(t, evs).Messages[1].ID)))
	if final := checkRun(t, evs); final.RunStatus != "succeeded" {
		t.Fatalf("run after the outage: got %s", final.Raw)
	}
	resp, b = e.rawUpload(`form-data; name="file"; filename="a.txt"`, "text/plain", []byte("back"))
	wantStatus(t, resp, b, http.StatusCreated, "")
	resp, b = e.do("GET", "/readyz", nil)
	wantStatus(t, resp, b, http.StatusOK, "")
}
