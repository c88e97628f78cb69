package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

func TestThreadCRUD(t *testing.T) {
	t.Parallel()
	e := setup(t)
	id := newID()
	resp, b := e.do("POST", "/api/v1/threads", map[string]any{"thread_id": id, "metadata": map[string]any{"k": "v"}})
	wantStatus(t, resp, b, http.StatusCreated, "")
	var th map[string]any
	_ = json.Unmarshal(b, &th)
	if th["thread_id"] != id || th["title"] != nil || th["metadata"].(map[string]any)["k"] != "v" {
		t.Fatalf("created thread: got %s", b)
	}
	resp, b = e.do("POST", "/api/v1/threads", map[string]any{"thread_id": id})
	wantStatus(t, resp, b, http.StatusOK, "")

	resp, b = e.do("POST", "/api/v1/threads", nil)
	wantStatus(t, resp, b, http.StatusCreated, "")

	resp, b = e.do("PATCH", "/api/v1/threads/"+id, map[string]any{"title": "Renamed"})
	wantStatus(t, resp, b, http.StatusOK, "")
	resp, b = e.do("GET", "/api/v1/threads/"+id, nil)
	wantStatus(t, resp, b, http.StatusOK, "")
	_ = json.Unmarshal(b, &th)
	if th["title"] != "Renamed" {
		t.Fatalf("title after PATCH: got %v, want Renamed", th["title"])
	}
	resp, b = e.do("GET", "/api/v1/threads/"+id+"/messages", nil)
	wantStatus(t, resp, b, http.StatusOK, "")
	if !strings.Contains(string(b), `"active_run":null`) || !strings.Contains(string(b), `"messages":[]`) {
		t.Fatalf("empty snapshot: got %s", b)
	}
	resp, b = e.do("DELETE", "/api/v1/threads/"+id, nil)
	wantStatus(t, resp, b, http.StatusNoContent, "")
	resp, b = e.do("GET", "/api/v1/threads/"+id, nil)
	wantStatus(t, resp, b, http.StatusNotFound, "not_found")
	resp, b = e.do("DELETE", "/api/v1/threads/"+id, nil)
	wantStatus(t, resp, b, http.StatusNotFound, "not_found")
}

func TestThreadListPages(t *testing.T) {
	t.Parallel()
	e := setup(t)
	want := map[string]bool{}
	for i := 0; i < 5; i++ {
		id := newID()
		want[id] = true
		resp, b := e.do("POST", "/api/v1/threads", map[string]any{"thread_id": id})
		wantStatus(t, resp, b, http.StatusCreated, "")
	}
	got := map[string]bool{}
	cursor := ""
	var prev string
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("cursor never ends")
		}
		resp, b := e.do("GET", "/api/v1/threads?limit=2&cursor="+cursor, nil)
		wantStatus(t, resp, b, http.StatusOK, "")
		var page struct {
			Threads []struct {
				ID        string `json:"thread_id"`
				UpdatedAt string `json:"updated_at"`
			} `json:"threads"`
			Next *string `json:"next_cursor"`
		}
		if err := json.Unmarshal(b, &page); err != nil {
			t.Fatal(err)
		}
		for _, th := range page.Threads {
			if got[th.ID] {
				t.Fatalf("thread %s on two pages", th.ID)
			}
			if prev != "" && th.UpdatedAt > prev {
				t.Fatalf("not most recent first: %s after %s", th.UpdatedAt, prev)
			}
			prev = th.UpdatedAt
			got[th.ID] = true
		}
		if page.Next == nil {
			break
		}
		cursor = *page.Next
	}
	if len(got) != len(want) {
		t.Fatalf("listed %d threads, want %d", len(got), len(want))
	}
	resp, b := e.do("GET", "/api/v1/threads?cursor=garbage", nil)
	wantStatus(t, resp, b, http.StatusBadRequest, "invalid_request")
	resp, b = e.do("GET", "/api/v1/threads?limit=0", nil)
	wantStatus(t, resp, b, http.StatusBadRequest, "invalid_request")
}

func TestAuthentication(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *options) { o.keys = map[string]string{"alice-key": "alice", "bob-key": "bob"} })
	resp, b := e.do("GET", "/api/v1/threads", nil)
	wantStatus(t, resp, b, http.StatusUnauthorized, "unauthenticated")
	e.key = "wrong"
	resp, b = e.do("GET", "/api/v1/threads", nil)
	wantStatus(t, resp, b, http.StatusUnauthorized, "unauthenticated")
	e.key = "alice-key"
	id := newID()
	resp, b = e.do("POST", "/api/v1/threads", map[string]any{"thread_id": id})
	wantStatus(t, resp, b, http.StatusCreated, "")
	e.key = "bob-key"
	for _, c := range []struct{ method, path string }{
		{"GET", "/api/v1/threads/" + id}, {"GET", "/api/v1/threads/" + id + "/messages"},
		{"GET", "/api/v1/threads/" + id + "/checkpoints"}, {"DELETE", "/api/v1/threads/" + id},
	} {
		resp, b = e.do(c.method, c.path, nil)
		wantStatus(t, resp, b, http.StatusNotFound, "not_found")
	}
	resp, b = e.do("PATCH", "/api/v1/threads/"+id, map[string]any{"title": "mine"})
	wantStatus(t, resp, b, http.StatusNotFound, "not_found")
	resp, b = e.do("GET", "/api/v1/threads", nil)
	wantStatus(t, resp, b, http.StatusOK, "")
	if strings.Contains(string(b), id) {
		t.Fatalf("bob lists alice's thread: %s", b)
	}
	// Health stays open.
	e.key = ""
	resp, b = e.do("GET", "/healthz", nil)
	wantStatus(t, resp, b, http.StatusOK, "")
}

func TestErrorTable(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *options) { o.maxBody = 4096 })
	id := newID()
	resp, b := e.do("POST", "/api/v1/threads", map[string]any{"thread_id": id})
	wantStatus(t, resp, b, http.StatusCreated, "")
	tests := []struct {
		name, method, path string
		body               any
		headers            []string
		status             int
		code               string
	}{
		{"malformed JSON", "POST", "/api/v1/threads", `{"thread_id":`, nil, 400, "invalid_request"},
		{"unknown field", "POST", "/api/v1/threads", `{"thread":"x"}`, nil, 400, "invalid_request"},
		{"wrong type", "PATCH", "/api/v1/threads/" + id, `{"title":5}`, nil, 400, "invalid_request"},
		{"bad UUID in body", "POST", "/api/v1/threads", `{"thread_id":"nope"}`, nil, 400, "invalid_request"},
		{"bad UUID in path", "GET", "/api/v1/threads/nope", nil, nil, 400, "invalid_request"},
		{"two JSON values", "PATCH", "/api/v1/threads/" + id, `{"title":"a"} {}`, nil, 400, "invalid_request"},
		{"a stray bracket after the value", "PATCH", "/api/v1/threads/" + id, `{"title":"a"}]`, nil, 400, "invalid_request"},
		{"a stray brace after null", "POST", "/api/v1/threads", `null}`, nil, 400, "invalid_request"},
		{"bad head id", "PUT", "/api/v1/threads/" + id + "/head", `{"message_id":"x"}`, nil, 400, "invalid_request"},
		{"missing head id", "PUT", "/api/v1/threads/" + id + "/head", `{}`, nil, 400, "invalid_request"},
		{"bad after", "GET", "/api/v1/threads/" + id + "/runs/" + newID() + "/stream?after=-1", nil, nil, 400, "invalid_request"},
		{"unknown thread", "GET", "/api/v1/threads/" + newID(), nil, nil, 404, "not_found"},
		{"unknown run", "GET", "/api/v1/threads/" + id + "/runs/" + newID(), nil, nil, 404, "not_found"},
		{"unknown head message", "PUT", "/api/v1/threads/" + id + "/head", map[string]any{"message_id": newID()}, nil, 404, "not_found"},
		{"unknown route", "GET", "/api/v1/nothing", nil, nil, 404, "not_found"},
		{"oversized body", "PATCH", "/api/v1/threads/" + id, `{"title":"` + strings.Repeat("x", 5000) + `"}`, nil, 413, "too_large"},
		{"non-JSON body", "PATCH", "/api/v1/threads/" + id, `title=x`, []string{"Content-Type", "application/x-www-form-urlencoded"}, 415, "unsupported_media_type"},
		{"no content type", "PUT", "/api/v1/threads/" + id + "/head", `{}`, []string{"Content-Type", ""}, 415, "unsupported_media_type"},
		{"wrong method", "PUT", "/api/v1/threads", `{}`, nil, 405, "method_not_allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, b := e.do(tt.method, tt.path, tt.body, tt.headers...)
			wantStatus(t, resp, b, tt.status, tt.code)
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Fatalf("error content type: got %q, want application/json", ct)
			}
		})
	}
}

func TestRateLimit(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *options) { o.rateLimit = 1 })
	limited := false
	for i := 0; i < 20 && !limited; i++ {
		resp, b := e.do("GET", "/api/v1/threads", nil)
		if resp.StatusCode == http.StatusTooManyRequests {
			wantStatus(t, resp, b, http.StatusTooManyRequests, "rate_limited")
			limited = true
		}
	}
	if !limited {
		t.Fatal("20 requests at a limit of 1/s: got no 429")
	}
}

func TestRequestIDAndHealth(t *testing.T) {
	t.Parallel()
	e := setup(t)
	resp, b := e.do("GET", "/readyz", nil)
	wantStatus(t, resp, b, http.StatusOK, "")
	if resp.Header.Get("X-Request-Id") == "" {
		t.Fatal("no X-Request-Id on the response")
	}
	resp, b = e.do("GET", "/api/v1/threads", nil, "X-Request-Id", "abc123")
	wantStatus(t, resp, b, http.StatusOK, "")
	if got := resp.Header.Get("X-Request-Id"); got != "abc123" {
		t.Fatalf("X-Request-Id: got %q, want the caller's abc123", got)
	}
	resp, b = e.do("GET", "/metrics", nil)
	wantStatus(t, resp, b, http.StatusOK, "")
	for _, m := range []string{"threadline_http_requests_total", "threadline_http_request_duration_seconds", "threadline_go_sched_latency_seconds_bucket"} {
		if !strings.Contains(string(b), m) {
			t.Errorf("metrics lack %s", m)
		}
	}
}
