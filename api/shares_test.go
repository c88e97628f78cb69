package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/thread"
)

// shareEnv is a service with authentication on, alice's thread on it and
// what the share tests look for:
//
//	U1 "root-mark" (attachment onPath) -> A1 -> U2 "later-mark" -> A2
//	                                         \-> S "sibling-mark" (attachment offPath) -> AS
//
// and another thread of alice's, "other-mark".
type shareEnv struct {
	*env
	thread, u1, a1, u2       string
	onPath, offPath, unnamed string
}

func shareSetup(t *testing.T) *shareEnv {
	t.Helper()
	e := setup(t, withTokens(3), func(o *options) { o.keys = map[string]string{"alice-key": "alice", "bob-key": "bob"} })
	e.key = "alice-key"
	s := &shareEnv{env: e, thread: newID()}
	s.onPath = e.upload("on.txt", "text/plain", []byte("on-path-bytes"))
	s.offPath = e.upload("off.txt", "text/plain", []byte("off-path-bytes"))
	s.unnamed = e.upload("none.txt", "text/plain", []byte("unnamed-bytes"))
	run := func(body map[string]any, parent *string) (user, reply string) {
		body["parent_message_id"] = parent
		resp, evs := e.stream(s.thread, body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("run: status %d", resp.StatusCode)
		}
		last := checkRun(t, evs)
		n := len(last.Messages)
		return last.Messages[n-2].ID, last.Messages[n-1].ID
	}
	s.u1, s.a1 = run(withAttachments("root-mark", s.onPath), nil)
	s.u2, _ = run(map[string]any{"message": map[string]any{"content": "later-mark"}}, &s.a1)
	run(withAttachments("sibling-mark", s.offPath), &s.a1)
	resp, evs := e.stream(newID(), newMessage("other-mark", nil))
	wantStatus(t, resp, nil, http.StatusOK, "")
	checkRun(t, evs)
	return s
}

type shareCreated struct {
	ShareID string `json:"share_id"`
	URL     string `json:"url"`
}

func (s *shareEnv) share(message string, expires *string) shareCreated {
	s.t.Helper()
	body := map[string]any{"message_id": message}
	if expires != nil {
		body["expires_at"] = *expires
	}
	resp, b := s.do("POST", "/api/v1/threads/"+s.thread+"/share", body)
	wantStatus(s.t, resp, b, http.StatusCreated, "")
	var got shareCreated
	if err := json.Unmarshal(b, &got); err != nil {
		s.t.Fatal(err)
	}
	if _, err := uuid.Parse(got.ShareID); err != nil || got.URL != "/api/v1/shares/"+got.ShareID {
		s.t.Fatalf("share answer: got %s", b)
	}
	return got
}

// anon sends a request with no credentials.
func (s *shareEnv) anon(method, path string) (*http.Response, []byte) {
	s.t.Helper()
	key := s.key
	s.key = ""
	defer func() { s.key = key }()
	return s.do(method, path, nil)
}

type sharedPath struct {
	ShareID   string     `json:"share_id"`
	Title     *string    `json:"title"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt *time.Time `json:"expires_at"`
	Messages  []message  `json:"messages"`
}

// TestShareIsolation: a share shows the path to its message and nothing
// else of the thread, without credentials while authentication is on.
func TestShareIsolation(t *testing.T) {
	t.Parallel()
	s := shareSetup(t)
	sh := s.share(s.a1, nil)
	resp, b := s.anon("GET", sh.URL)
	wantStatus(t, resp, b, http.StatusOK, "")
	var got sharedPath
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.ShareID != sh.ShareID || got.ExpiresAt != nil || got.CreatedAt.IsZero() {
		t.Fatalf("share head: got %s", b)
	}
	ids := []string{}
	for _, m := range got.Messages {
		ids = append(ids, m.ID)
	}
	if want := []string{s.u1, s.a1}; strings.Join(ids, ",") != strings.Join(want, ",") {
		t.Fatalf("shared path: got %v, want %v", ids, want)
	}
	if got.Messages[0].Text() != "root-mark" {
		t.Fatalf("first message: got %q", got.Messages[0].Text())
	}
	for _, leak := range []string{"later-mark", "sibling-mark", "other-mark", s.u2, s.offPath, s.unnamed, "runId", "messageRepository", "off-path-bytes"} {
		if strings.Contains(string(b), leak) {
			t.Fatalf("share shows %q: %s", leak, b)
		}
	}
	// The attachment on the path is served under the share, and its URL
	// in the message says so; others are not, whoever owns them.
	want := "/api/v1/shares/" + sh.ShareID + "/attachments/" + s.onPath
	if !strings.Contains(string(got.Messages[0].Attachments[0]), want) {
		t.Fatalf("attachment URL: got %s, want %s", got.Messages[0].Attachments[0], want)
	}
	resp, b = s.anon("GET", want)
	wantStatus(t, resp, b, http.StatusOK, "")
	if string(b) != "on-path-bytes" {
		t.Fatalf("shared attachment: got %q", b)
	}
	for _, id := range []string{s.offPath, s.unnamed, "nope"} {
		resp, b = s.anon("GET", "/api/v1/shares/"+sh.ShareID+"/attachments/"+id)
		wantStatus(t, resp, b, http.StatusNotFound, "not_found")
	}
	// The owner's own routes still need a key.
	resp, b = s.anon("GET", "/api/v1/threads/"+s.thread+"/shares")
	wantStatus(t, resp, b, http.StatusUnauthorized, "unauthenticated")
}

// TestShareFrozen: what is added below the shared message later does not
// show.
func TestShareFrozen(t *testing.T) {
	t.Parallel()
	s := shareSetup(t)
	sh := s.share(s.u1, nil)
	resp, b := s.anon("GET", sh.URL)
	wantStatus(t, resp, b, http.StatusOK, "")
	var got sharedPath
	_ = json.Unmarshal(b, &got)
	if len(got.Messages) != 1 || got.Messages[0].ID != s.u1 {
		t.Fatalf("share of the root: got %s", b)
	}
}

// TestShareRevoke: only the owner revokes; a revoked, expired, malformed
// or unknown share is the same not_found.
func TestShareRevoke(t *testing.T) {
	t.Parallel()
	s := shareSetup(t)
	sh := s.share(s.a1, nil)
	s.key = "bob-key"
	resp, b := s.do("DELETE", sh.URL, nil)
	wantStatus(t, resp, b, http.StatusNotFound, "not_found")
	resp, b = s.do("GET", "/api/v1/threads/"+s.thread+"/shares", nil)
	wantStatus(t, resp, b, http.StatusNotFound, "not_found")
	resp, b = s.do("POST", "/api/v1/threads/"+s.thread+"/share", map[string]any{"message_id": s.a1})
	wantStatus(t, resp, b, http.StatusNotFound, "not_found")
	resp, b = s.anon("GET", sh.URL)
	wantStatus(t, resp, b, http.StatusOK, "")

	s.key = "alice-key"
	resp, b = s.do("GET", "/api/v1/threads/"+s.thread+"/shares", nil)
	wantStatus(t, resp, b, http.StatusOK, "")
	if !strings.Contains(string(b), sh.ShareID) {
		t.Fatalf("list: got %s, want %s", b, sh.ShareID)
	}
	resp, b = s.do("DELETE", sh.URL, nil)
	wantStatus(t, resp, b, http.StatusNoContent, "")
	resp, b = s.do("DELETE", sh.URL, nil)
	wantStatus(t, resp, b, http.StatusNotFound, "not_found")

	expired := &thread.Share{ID: uuid.New(), ThreadID: uuid.MustParse(s.thread), MessageID: uuid.MustParse(s.a1),
		CheckpointID: uuid.MustParse(s.a1), Caller: "alice"}
	past := time.Now().Add(-time.Minute)
	expired.ExpiresAt = &past
	if err := s.store.ShareCreate(context.Background(), expired); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{sh.URL, "/api/v1/shares/" + expired.ID.String(), "/api/v1/shares/" + uuid.NewString(), "/api/v1/shares/not-a-uuid",
		sh.URL + "/attachments/" + s.onPath, "/api/v1/shares/" + expired.ID.String() + "/attachments/" + s.onPath} {
		resp, b = s.anon("GET", p)
		wantStatus(t, resp, b, http.StatusNotFound, "not_found")
	}
	resp, b = s.do("POST", "/api/v1/shares/"+expired.ID.String()+"/fork", nil)
	wantStatus(t, resp, b, http.StatusNotFound, "not_found")
}

// TestShareCreateInput: bad input is a 400 and writes nothing; an expiry
// in the future shows.
func TestShareCreateInput(t *testing.T) {
	t.Parallel()
	s := shareSetup(t)
	path := "/api/v1/threads/" + s.thread + "/share"
	for _, c := range []struct {
		name   string
		body   any
		status int
		code   string
	}{
		{"no message", map[string]any{}, 400, "invalid_request"},
		{"bad message", map[string]any{"message_id": "x"}, 400, "invalid_request"},
		{"past expiry", map[string]any{"message_id": s.a1, "expires_at": time.Now().Add(-time.Hour).Format(time.RFC3339)}, 400, "invalid_request"},
		{"bad expiry", map[string]any{"message_id": s.a1, "expires_at": "tomorrow"}, 400, "invalid_request"},
		{"unknown field", map[string]any{"message_id": s.a1, "x": 1}, 400, "invalid_request"},
		{"unknown message", map[string]any{"message_id": uuid.NewString()}, 404, "not_found"},
	} {
		resp, b := s.do("POST", path, c.body)
		if resp.StatusCode != c.status || !strings.Contains(string(b), `"`+c.code+`"`) {
			t.Errorf("%s: got %d %s, want %d %s", c.name, resp.StatusCode, b, c.status, c.code)
		}
	}
	resp, b := s.do("GET", "/api/v1/threads/"+s.thread+"/shares", nil)
	wantStatus(t, resp, b, http.StatusOK, "")
	if strings.TrimSpace(string(b)) != `{"shares":[]}` {
		t.Fatalf("after refused creates: got %s, want no shares", b)
	}
	exp := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	sh := s.share(s.a1, ptr(exp.Format(time.RFC3339)))
	resp, b = s.anon("GET", sh.URL)
	wantStatus(t, resp, b, http.StatusOK, "")
	var got sharedPath
	_ = json.Unmarshal(b, &got)
	if got.ExpiresAt == nil || !got.ExpiresAt.Equal(exp) {
		t.Fatalf("expires_at: got %v, want %v", got.ExpiresAt, exp)
	}
}

// TestShareFork: continuing a share makes a thread of the viewer's whose
// checkpoints are copies of the path (new ids), head the last, with its
// attachments copied to the viewer; the share's thread is unchanged, and
// the fork survives the share's revocation.
func TestShareFork(t *testing.T) {
	t.Parallel()
	s := shareSetup(t)
	sh := s.share(s.a1, nil)
	resp, b := s.anon("POST", sh.URL+"/fork")
	wantStatus(t, resp, b, http.StatusUnauthorized, "unauthenticated")
	s.key = "bob-key"
	resp, b = s.do("POST", sh.URL+"/fork", nil)
	wantStatus(t, resp, b, http.StatusCreated, "")
	var fork struct {
		ThreadID string `json:"thread_id"`
	}
	_ = json.Unmarshal(b, &fork)
	snap := s.snapshot(fork.ThreadID)
	if len(snap.Messages) != 2 || snap.Messages[0].Text() != "root-mark" || snap.Repository == nil || len(snap.Repository.Messages) != 2 {
		t.Fatalf("fork: got %+v", snap)
	}
	if snap.Messages[0].ID == s.u1 || snap.Messages[1].ID == s.a1 || *snap.Repository.HeadID != snap.Messages[1].ID {
		t.Fatalf("fork ids: got %s %s head %s, want new ids, head the last", snap.Messages[0].ID, snap.Messages[1].ID, *snap.Repository.HeadID)
	}
	var att struct{ ID, URL string }
	_ = json.Unmarshal(snap.Messages[0].Attachments[0], &att)
	if att.ID == s.onPath || att.URL != "/api/v1/attachments/"+att.ID {
		t.Fatalf("fork attachment: got %+v", att)
	}
	resp, b = s.do("GET", att.URL, nil)
	wantStatus(t, resp, b, http.StatusOK, "")
	if string(b) != "on-path-bytes" {
		t.Fatalf("fork attachment bytes: got %q", b)
	}
	// Bob continues the copy: a run on it works.
	resp, evs := s.stream(fork.ThreadID, newMessage("bob-mark", &snap.Messages[1].ID))
	wantStatus(t, resp, nil, http.StatusOK, "")
	if last := checkRun(t, evs); len(last.Messages) != 4 {
		t.Fatalf("run on the fork: %d messages, want 4", len(last.Messages))
	}
	s.key = "alice-key"
	if got := s.snapshot(s.thread); len(got.Repository.Messages) != 6 {
		t.Fatalf("alice's thread: %d messages, want 6", len(got.Repository.Messages))
	}
	resp, b = s.do("DELETE", sh.URL, nil)
	wantStatus(t, resp, b, http.StatusNoContent, "")
	s.key = "bob-key"
	if got := s.snapshot(fork.ThreadID); len(got.Messages) != 4 {
		t.Fatalf("fork after revoke: %d messages, want 4", len(got.Messages))
	}
}

// TestShareThreadDeleted: deleting the thread removes its shares.
func TestShareThreadDeleted(t *testing.T) {
	t.Parallel()
	s := shareSetup(t)
	sh := s.share(s.a1, nil)
	resp, b := s.do("DELETE", "/api/v1/threads/"+s.thread, nil)
	wantStatus(t, resp, b, http.StatusNoContent, "")
	resp, b = s.anon("GET", sh.URL)
	wantStatus(t, resp, b, http.StatusNotFound, "not_found")
	var n int
	if err := s.store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM shares`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("shares left: %d, %v", n, err)
	}
}
