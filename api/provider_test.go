package api_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// fakeOpenAI is a local OpenAI-compatible chat completions server speaking
// SSE with [DONE]. It records every request's messages and answers request
// n (from 1) with the tokens "reply", " n".
type fakeOpenAI struct {
	mu   sync.Mutex
	reqs [][]wireMsg
	srv  *httptest.Server
}

// wireMsg is one message as the provider received it, flattened: its text
// parts joined and its image URLs.
type wireMsg struct {
	Role   string
	Text   string
	Images []string
}

func newFakeOpenAI(t *testing.T) *fakeOpenAI {
	f := &fakeOpenAI{}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeOpenAI) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer fake-key" {
		http.Error(w, `{"error":{"message":"bad path or key"}}`, http.StatusUnauthorized)
		return
	}
	var body struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var got []wireMsg
	for _, m := range body.Messages {
		wm := wireMsg{Role: m.Role}
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			wm.Text = s
		} else {
			var parts []struct {
				Type     string `json:"type"`
				Text     string `json:"text"`
				ImageURL struct {
					URL string `json:"url"`
				} `json:"image_url"`
			}
			_ = json.Unmarshal(m.Content, &parts)
			for _, p := range parts {
				switch p.Type {
				case "text":
					wm.Text += p.Text
				case "image_url":
					wm.Images = append(wm.Images, p.ImageURL.URL)
				}
			}
		}
		got = append(got, wm)
	}
	f.mu.Lock()
	f.reqs = append(f.reqs, got)
	n := len(f.reqs)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	chunk := func(delta map[string]any, finish any) {
		b, _ := json.Marshal(map[string]any{"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "fake-model",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
		fmt.Fprintf(w, "data: %s\n\n", b)
		w.(http.Flusher).Flush()
	}
	chunk(map[string]any{"role": "assistant", "content": ""}, nil)
	chunk(map[string]any{"content": "reply"}, nil)
	chunk(map[string]any{"content": fmt.Sprintf(" %d", n)}, nil)
	chunk(map[string]any{}, "stop")
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// last returns the messages of the latest request.
func (f *fakeOpenAI) last(t *testing.T) []wireMsg {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.reqs) == 0 {
		t.Fatal("the provider received no request")
	}
	return f.reqs[len(f.reqs)-1]
}

// wantSent fails unless the provider's latest request held exactly these
// role:text pairs.
func (f *fakeOpenAI) wantSent(t *testing.T, step string, want ...string) []wireMsg {
	t.Helper()
	msgs := f.last(t)
	var got []string
	for _, m := range msgs {
		got = append(got, m.Role+":"+m.Text)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%s: the provider received\n  %q\nwant\n  %q", step, got, want)
	}
	return msgs
}

// TestThreadAgainstOpenAI runs a whole thread with a regenerate, an edit, a
// context budget and an image through the real langchaingo OpenAI client
// against a local server, and checks the exact messages the server got.
func TestThreadAgainstOpenAI(t *testing.T) {
	t.Parallel()
	fake := newFakeOpenAI(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "models.json")
	models := fmt.Sprintf(`{"models":[
		{"name":"fake","provider":"openai","model":"fake-model","base_url":%q,"api_key_env":"FAKE_KEY","context_budget":0},
		{"name":"small","provider":"openai","model":"fake-model","base_url":%q,"api_key_env":"FAKE_KEY","context_budget":90},
		{"name":"tiny","provider":"openai","model":"fake-model","base_url":%q,"api_key_env":"FAKE_KEY","context_budget":60}]}`,
		fake.srv.URL+"/v1", fake.srv.URL+"/v1", fake.srv.URL+"/v1")
	if err := os.WriteFile(file, []byte(models), 0o600); err != nil {
		t.Fatal(err)
	}
	e := setup(t, withVars(map[string]string{"THREADLINE_MODELS_FILE": file, "FAKE_KEY": "fake-key"}))
	cfg := map[string]any{"model": "fake", "system": "be brief"}
	run := func(step, tid string, body map[string]any) event {
		t.Helper()
		body["run_config"] = cfg
		resp, evs := e.stream(tid, body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: status %d", step, resp.StatusCode)
		}
		final := checkRun(t, evs)
		if final.RunStatus != "succeeded" {
			t.Fatalf("%s: run status %s, want succeeded; %s", step, final.RunStatus, final.Raw)
		}
		if got := tokensText(evs); !strings.HasPrefix(got, "reply ") {
			t.Fatalf("%s: streamed %q, want the provider's reply", step, got)
		}
		return final
	}
	tid := newID()
	f1 := run("first turn", tid, newMessage("first", nil))
	fake.wantSent(t, "first turn", "system:be brief", "user:first")
	u1, a1 := f1.Messages[0], f1.Messages[1]
	if a1.Text() != "reply 1" {
		t.Fatalf("first reply: got %q, want %q", a1.Text(), "reply 1")
	}

	f2 := run("second turn", tid, newMessage("second", &a1.ID))
	fake.wantSent(t, "second turn", "system:be brief", "user:first", "assistant:reply 1", "user:second")
	u2, a2 := f2.Messages[2], f2.Messages[3]

	// Regenerate the second reply: the same path, and the old reply is not sent.
	run("regenerate", tid, map[string]any{"parent_message_id": u2.ID, "source_message_id": a2.ID})
	fake.wantSent(t, "regenerate", "system:be brief", "user:first", "assistant:reply 1", "user:second")

	// Edit the second user message: the edited text replaces it.
	run("edit", tid, map[string]any{"message": map[string]any{"content": "second, edited"},
		"parent_message_id": a1.ID, "source_message_id": u2.ID})
	fake.wantSent(t, "edit", "system:be brief", "user:first", "assistant:reply 1", "user:second, edited")

	// Edit the root: nothing above it is sent.
	run("edit root", tid, map[string]any{"message": map[string]any{"content": "first, edited"}, "source_message_id": u1.ID})
	fake.wantSent(t, "edit root", "system:be brief", "user:first, edited")

	// A context budget of 90 bytes (16 per message plus its text, the
	// system text included) keeps the system message and the newest
	// messages only.
	cfg = map[string]any{"model": "small", "system": "be brief"}
	tid2 := newID()
	g1 := run("budget 1", tid2, newMessage("an old question", nil))
	g2 := run("budget 2", tid2, newMessage("a newer one", &g1.Messages[1].ID))
	run("budget 3", tid2, newMessage("newest", &g2.Messages[3].ID))
	fake.wantSent(t, "budget", "system:be brief", "user:a newer one", "assistant:reply 7", "user:newest")
	// With 60 bytes the cut falls after "a newer one"; the conversation
	// never starts with the assistant, so "reply 7" goes too.
	cfg = map[string]any{"model": "tiny", "system": "be brief"}
	run("budget regenerate", tid2, map[string]any{"parent_message_id": g2.Messages[2].ID})
	fake.wantSent(t, "budget regenerate", "system:be brief", "user:a newer one")

	// An image attachment reaches the provider as an image part, a text
	// file as text, and a PDF as a note naming it.
	upload := func(name, ct string, data []byte) map[string]any {
		var buf bytes.Buffer
		w := multipart.NewWriter(&buf)
		p, _ := w.CreatePart(map[string][]string{
			"Content-Disposition": {`form-data; name="file"; filename="` + name + `"`}, "Content-Type": {ct}})
		_, _ = p.Write(data)
		_ = w.Close()
		resp, b := e.do("POST", "/api/v1/attachments", buf.Bytes(), "Content-Type", w.FormDataContentType())
		wantStatus(t, resp, b, http.StatusCreated, "")
		var att struct{ ID string }
		_ = json.Unmarshal(b, &att)
		return map[string]any{"id": att.ID}
	}
	png := []byte("\x89PNG\r\n\x1a\nfake image bytes")
	atts := []any{upload("cat.png", "image/png", png), upload("notes.txt", "text/plain", []byte("some notes")),
		upload("paper.pdf", "application/pdf", []byte("%PDF-1.7 binary"))}
	cfg = map[string]any{"model": "fake", "system": "be brief"}
	run("image", newID(), map[string]any{"message": map[string]any{"content": "what is this?", "attachments": atts}})
	msgs := fake.wantSent(t, "image", "system:be brief", "user:what is this?\n\n[notes.txt]\nsome notes\n\n"+
		"[attached file paper.pdf (application/pdf, 15 bytes); its content is not shown to the model]")
	want := "data:image/png;base64," + base64.StdEncoding.EncodeToString(png)
	if got := msgs[1].Images; len(got) != 1 || got[0] != want {
		t.Fatalf("image: the provider received image parts %q, want one %q", got, want)
	}
}
