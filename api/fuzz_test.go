package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/thread"
)

// wantClientError fails unless err is nil or a coded error the statuses
// table maps to a 4xx: hostile input is never a 5xx.
func wantClientError(t *testing.T, err error, input []byte) {
	t.Helper()
	if err == nil {
		return
	}
	if st := statuses[errcode.Of(err)]; st < 400 || st >= 500 {
		t.Fatalf("input %q: got %v (status %d), want a 4xx", input, err, st)
	}
}

// walkStrings calls fn with every key and string value of a decoded JSON
// value.
func walkStrings(v any, fn func(string)) {
	switch v := v.(type) {
	case string:
		fn(v)
	case []any:
		for _, x := range v {
			walkStrings(x, fn)
		}
	case map[string]any:
		for k, x := range v {
			fn(k)
			walkStrings(x, fn)
		}
	}
}

// FuzzRequestDecoding runs a run request body through the edge's decoding
// (bind with the text policy, then the message content): every body gets
// nil or a 4xx, and a body the edge accepts decodes to text with no NUL
// and no U+FFFD the client did not send (nothing silently replaced).
func FuzzRequestDecoding(f *testing.F) {
	for _, seed := range []string{
		`{"message":{"content":"hi"}}`,
		`{"message":{"content":[{"type":"text","text":"a"},{"type":"image","image":"/x"}],"attachments":[{"id":"5f0c4b1e-0000-4000-8000-000000000000"}]},"parent_message_id":null}`,
		`{"message":{"content":"a\u0000b"}}`,
		`{"message":{"content":"\ud800"}}`,
		`{"message":{"content":"\ud83d\ude00"}}`,
		"{\"message\":{\"content\":\"\xff\"}}",
		`{"run_config":{"custom":{"k":[1,{"a":"\u0000"}]},"system":"s","temperature":0.5},"on_disconnect":"cancel"}`,
		`{"message":{"content":"x"}} {}`,
		`[[[[[[[[[[`,
	} {
		f.Add([]byte(seed))
	}
	s := &Server{cfg: Config{MaxBody: 1 << 20, MaxMessage: 256 << 10, MaxAttachments: 10}}
	e := echo.New()
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		req.Header.Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
		c := e.NewContext(req, httptest.NewRecorder())
		var rb runBody
		err := s.bind(c, &rb, false)
		wantClientError(t, err, body)
		if err != nil {
			return
		}
		if rb.Message != nil {
			_, err := decodeContent(rb.Message.Content)
			wantClientError(t, err, body)
		}
		var v any
		if json.Unmarshal(body, &v) != nil {
			t.Fatalf("body %q: accepted by bind, refused by encoding/json", body)
		}
		sent := bytes.Contains(body, []byte("\uFFFD")) || bytes.Contains(bytes.ToLower(body), []byte(`\ufffd`))
		walkStrings(v, func(str string) {
			if strings.IndexByte(str, 0) >= 0 || !utf8.ValidString(str) || (!sent && strings.ContainsRune(str, utf8.RuneError)) {
				t.Fatalf("body %q: accepted, but decodes to %q", body, str)
			}
		})
	})
}

// memAttachments is an in-memory AttachmentStore for the upload fuzz.
type memAttachments struct {
	mu sync.Mutex
	m  map[uuid.UUID]*thread.File
}

func (m *memAttachments) AttachmentCreate(_ context.Context, a *thread.File) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.m[a.ID] = a
	return nil
}

func (m *memAttachments) AttachmentGet(_ context.Context, caller string, id uuid.UUID) (*thread.File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if a := m.m[id]; a != nil && a.Caller == caller {
		return a, nil
	}
	return nil, errcode.New(errcode.NotFound, "attachment %s not found", id)
}

// FuzzUpload sends arbitrary multipart bodies (and arbitrary file names,
// content types and bytes in a well-formed one) to the upload handler: the
// answer is a 201 or a 4xx, and what is stored has a name the text policy
// accepts, an accepted type and at most the size limit.
func FuzzUpload(f *testing.F) {
	f.Add("a.txt", "text/plain", []byte("hello"), []byte(""))
	f.Add("r\u00e9sum\u00e9.pdf", "application/pdf", []byte("%PDF-1.4"), []byte(""))
	f.Add("a\x00.png", "image/png", []byte("\x89PNG"), []byte(""))
	f.Add("a\xff.txt", "", []byte("x"), []byte(""))
	f.Add("", "", []byte(""), []byte("--B\r\nContent-Disposition: form-data; name=\"file\"; filename*=UTF-8''a%FF.txt\r\n\r\nx\r\n--B--\r\n"))
	f.Add("", "", []byte(""), []byte("--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"x.txt\"\r\nContent-Type: text/plain\r\n\r\n"))
	store := &memAttachments{m: make(map[uuid.UUID]*thread.File)}
	const limit = 4096
	srv := New(nil, Config{Attachments: store, MaxAttachment: limit})
	f.Fuzz(func(t *testing.T, name, ct string, data, raw []byte) {
		body := raw
		if len(body) == 0 {
			var buf bytes.Buffer
			h := make(map[string][]string)
			h["Content-Disposition"] = []string{fmt.Sprintf(`form-data; name="file"; filename="%s"`, strings.NewReplacer(`"`, `\"`, "\r", "", "\n", "").Replace(name))}
			if ct != "" {
				h["Content-Type"] = []string{ct}
			}
			w := multipart.NewWriter(&buf)
			_ = w.SetBoundary("B")
			p, err := w.CreatePart(h)
			if err != nil {
				return
			}
			_, _ = p.Write(data)
			_ = w.Close()
			body = buf.Bytes()
		}
		req := httptest.NewRequest(http.MethodPost, "/api/v1/attachments", bytes.NewReader(body))
		req.Header.Set(echo.HeaderContentType, "multipart/form-data; boundary=B")
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		if rec.Code != http.StatusCreated && (rec.Code < 400 || rec.Code >= 500) {
			t.Fatalf("upload %q: got %d %s, want 201 or a 4xx", body, rec.Code, rec.Body.Bytes())
		}
		if rec.Code != http.StatusCreated {
			return
		}
		var got struct{ ID uuid.UUID }
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		a, err := store.AttachmentGet(context.Background(), "local", got.ID)
		if err != nil {
			t.Fatal(err)
		}
		if checkFileName(a.Name) != nil || a.Size > limit || int64(len(a.Data)) != a.Size || !accepted(a.ContentType) {
			t.Fatalf("upload %q stored name %q type %q size %d", body, a.Name, a.ContentType, a.Size)
		}
	})
}

func accepted(ct string) bool {
	for _, t := range DefaultAttachmentTypes {
		if t == ct {
			return true
		}
	}
	return false
}

var _ = errors.New
