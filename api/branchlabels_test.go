package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

func TestBranchLabels(t *testing.T) {
	t.Parallel()
	e := setup(t)
	tid := newID()
	first := e.turn(tid, "first", nil)
	user, reply := first.Messages[0].ID, first.Messages[1].ID
	other := newID()
	e.turn(other, "elsewhere", nil)
	foreign := e.snapshot(other).Messages[0].ID
	long := strings.Repeat("é", 81)

	bad := []struct {
		name   string
		labels any
	}{
		{"not an object", "shorter"},
		{"key not a UUID", map[string]any{"branch-1": "shorter"}},
		{"name not a string", map[string]any{reply: 3}},
		{"blank name", map[string]any{reply: "  "}},
		{"name too long", map[string]any{reply: long}},
		{"message of another thread", map[string]any{foreign: "shorter"}},
		{"no such message", map[string]any{newID(): "shorter"}},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			resp, b := e.do("PATCH", "/api/v1/threads/"+tid, map[string]any{"metadata": map[string]any{"branch_labels": tc.labels}})
			wantStatus(t, resp, b, http.StatusBadRequest, "invalid_request")
		})
	}
	// Nothing was written: the metadata is still empty.
	resp, b := e.do("GET", "/api/v1/threads/"+tid, nil)
	wantStatus(t, resp, b, http.StatusOK, "")
	var th struct {
		Metadata map[string]any `json:"metadata"`
	}
	_ = json.Unmarshal(b, &th)
	if len(th.Metadata) != 0 {
		t.Fatalf("metadata after refused patches: got %v, want {}", th.Metadata)
	}

	// Good names (80 characters is the most) are kept with the other keys.
	labels := map[string]any{user: "the question", reply: strings.Repeat("é", 80)}
	resp, b = e.do("PATCH", "/api/v1/threads/"+tid, map[string]any{"metadata": map[string]any{
		"branch_labels": labels,
		"chat_settings": map[string]any{"temperature": 0.5},
	}})
	wantStatus(t, resp, b, http.StatusOK, "")
	resp, b = e.do("GET", "/api/v1/threads/"+tid, nil)
	wantStatus(t, resp, b, http.StatusOK, "")
	_ = json.Unmarshal(b, &th)
	got, _ := th.Metadata["branch_labels"].(map[string]any)
	if got[user] != "the question" || got[reply] != labels[reply] || th.Metadata["chat_settings"] == nil {
		t.Fatalf("metadata after patch: got %v", th.Metadata)
	}

	// A thread the caller cannot see is not found, labels or not.
	resp, b = e.do("PATCH", "/api/v1/threads/"+newID(), map[string]any{"metadata": map[string]any{"branch_labels": map[string]any{reply: "x"}}})
	wantStatus(t, resp, b, http.StatusNotFound, "not_found")
}
