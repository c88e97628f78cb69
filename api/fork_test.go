package api_test

import (
	"encoding/json"
	"net/http"
	"testing"
)

// TestThreadFork: forking at a message copies the path from the root to
// it into a new thread of the caller's (new ids, head the message, the
// off-path sibling left out); the source is unchanged, and bad input or
// another caller's thread writes nothing.
func TestThreadFork(t *testing.T) {
	t.Parallel()
	s := shareSetup(t)
	path := "/api/v1/threads/" + s.thread + "/fork"
	resp, b := s.do("POST", path, map[string]any{"message_id": s.u2})
	wantStatus(t, resp, b, http.StatusCreated, "")
	var fork struct {
		ThreadID string `json:"thread_id"`
	}
	if err := json.Unmarshal(b, &fork); err != nil || fork.ThreadID == "" || fork.ThreadID == s.thread {
		t.Fatalf("fork answer: got %s", b)
	}
	snap := s.snapshot(fork.ThreadID)
	var texts []string
	for _, m := range snap.Messages {
		texts = append(texts, m.Text())
	}
	if len(texts) != 3 || texts[0] != "root-mark" || texts[2] != "later-mark" || len(snap.Repository.Messages) != 3 {
		t.Fatalf("fork path: got %q (%d in the repository), want root-mark … later-mark, 3", texts, len(snap.Repository.Messages))
	}
	if snap.Messages[0].ID == s.u1 || snap.Messages[2].ID == s.u2 || *snap.Repository.HeadID != snap.Messages[2].ID {
		t.Fatalf("fork ids: want new ids, head the last; got head %s", *snap.Repository.HeadID)
	}
	if got := s.snapshot(s.thread); len(got.Repository.Messages) != 6 {
		t.Fatalf("source thread: %d messages, want 6", len(got.Repository.Messages))
	}

	cases := []struct {
		name, key string
		body      map[string]any
		status    int
		code      string
	}{
		{"no message_id", "alice-key", map[string]any{}, http.StatusBadRequest, "invalid_request"},
		{"malformed message_id", "alice-key", map[string]any{"message_id": "nope"}, http.StatusBadRequest, "invalid_request"},
		{"unknown message", "alice-key", map[string]any{"message_id": newID()}, http.StatusNotFound, "not_found"},
		{"another caller's thread", "bob-key", map[string]any{"message_id": s.u2}, http.StatusNotFound, "not_found"},
	}
	for _, tc := range cases {
		s.key = tc.key
		resp, b := s.do("POST", path, tc.body)
		wantStatus(t, resp, b, tc.status, tc.code)
	}
	s.key = "bob-key"
	resp, b = s.do("GET", "/api/v1/threads?limit=50", nil)
	wantStatus(t, resp, b, http.StatusOK, "")
	var page struct {
		Threads []json.RawMessage `json:"threads"`
	}
	_ = json.Unmarshal(b, &page)
	if len(page.Threads) != 0 {
		t.Fatalf("bob's threads after refused forks: got %d, want 0", len(page.Threads))
	}
}
