package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/threadline/threadline/api"
	"github.com/threadline/threadline/store"
)

var _ api.SearchStore = (*store.Store)(nil)

type searchPage struct {
	Results []struct {
		ThreadID    string   `json:"thread_id"`
		ThreadTitle *string  `json:"thread_title"`
		MessageID   string   `json:"message_id"`
		Role        string   `json:"role"`
		CreatedAt   string   `json:"created_at"`
		Snippet     string   `json:"snippet"`
		Highlights  [][2]int `json:"highlights"`
	} `json:"results"`
	Next *string `json:"next_cursor"`
}

func (e *env) search(query string) searchPage {
	e.t.Helper()
	// Search is eventually consistent: what was committed is indexed first.
	if _, err := e.store.SearchIndexPending(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	resp, b := e.do("GET", "/api/v1/search?"+query, nil)
	wantStatus(e.t, resp, b, http.StatusOK, "")
	var p searchPage
	if err := json.Unmarshal(b, &p); err != nil {
		e.t.Fatalf("search answer %s: %v", b, err)
	}
	return p
}

// TestSearch: GET /search finds the caller's messages a page at a time,
// each hit naming its thread and message with a marked snippet, and
// never another caller's.
func TestSearch(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *options) { o.keys = map[string]string{"alice-key": "alice", "bob-key": "bob"} })
	e.key = "alice-key"
	threads := map[string]bool{}
	for range 3 {
		tid := newID()
		resp, _ := e.stream(tid, newMessage("please call parseConfigFile for the walrus", nil))
		wantStatus(t, resp, nil, http.StatusOK, "")
		threads[tid] = true
	}
	seen := map[string]bool{}
	q := "q=" + url.QueryEscape("walrus") + "&limit=2"
	for pages := 0; ; pages++ {
		if pages > 3 {
			t.Fatal("the cursor never ends")
		}
		p := e.search(q)
		for _, r := range p.Results {
			if !threads[r.ThreadID] || seen[r.MessageID] || r.Role != "user" || r.CreatedAt == "" {
				t.Fatalf("unexpected hit %+v", r)
			}
			seen[r.MessageID] = true
			if len(r.Highlights) != 1 || string([]rune(r.Snippet)[r.Highlights[0][0]:r.Highlights[0][1]]) != "walrus" {
				t.Fatalf("snippet %q highlights %v, want walrus marked", r.Snippet, r.Highlights)
			}
		}
		if p.Next == nil {
			break
		}
		q = "q=walrus&limit=2&cursor=" + url.QueryEscape(*p.Next)
	}
	if len(seen) != 3 {
		t.Fatalf("found %d messages, want 3", len(seen))
	}
	if p := e.search("q=ConfigFile&role=user"); len(p.Results) != 3 {
		t.Fatalf("identifier part: %d hits, want 3", len(p.Results))
	}
	e.key = "bob-key"
	if p := e.search("q=walrus"); len(p.Results) != 0 || p.Next != nil {
		t.Fatalf("bob found alice's messages: %+v", p)
	}
}

// TestSearchRefusals: bad parameters are 400 invalid_request.
func TestSearchRefusals(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, q := range []string{
		"",
		"q=",
		"q=%20%20",
		"q=" + strings.Repeat("a", 257),
		"q=a%00b",
		"q=%ff",
		"q=*",
		"q=fox&limit=0",
		"q=fox&limit=51",
		"q=fox&limit=ten",
		"q=fox&cursor=garbage",
		"q=fox&cursor=" + strings.Repeat("A", 40),
		"q=fox&from=yesterday",
		"q=fox&to=2026-13-01T00:00:00Z",
		"q=fox&from=2026-02-01T00:00:00Z&to=2026-01-01T00:00:00Z",
		"q=fox&role=system",
		"q=fox&title=" + strings.Repeat("t", 257),
	} {
		resp, b := e.do("GET", "/api/v1/search?"+q, nil)
		wantStatus(t, resp, b, http.StatusBadRequest, "invalid_request")
	}
	resp, b := e.do("POST", "/api/v1/search?q=fox", nil)
	wantStatus(t, resp, b, http.StatusMethodNotAllowed, "method_not_allowed")
	p := e.search("q=fox&from=2026-01-01T00:00:00Z&to=2026-02-01T00:00:00%2B01:00&role=assistant&title=x&limit=50")
	if p.Results == nil || len(p.Results) != 0 {
		t.Fatalf("an empty search: got %+v, want results []", p)
	}
}
