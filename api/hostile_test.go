package api_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// hostileError is the JSON error of a refused hostile input.
type hostileError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Field   string `json:"field"`
	} `json:"error"`
}

// TestTextPolicy sends NUL, invalid UTF-8 and lone surrogates in every text
// a client writes: each is a 400 invalid_request naming the field, and
// nothing of the request is written.
func TestTextPolicy(t *testing.T) {
	t.Parallel()
	e := setup(t)
	tid := newID()
	resp, b := e.do("POST", "/api/v1/threads", map[string]any{"thread_id": tid})
	wantStatus(t, resp, b, http.StatusCreated, "")
	run := "/api/v1/threads/" + newID() + "/runs/stream" // a new thread: a refused run must not create it
	cases := []struct {
		name, method, path string
		body               []byte
		field              string
	}{
		{"content NUL", "POST", run, []byte(`{"message":{"content":"a\u0000b"}}`), "message.content"},
		{"content part NUL", "POST", run, []byte(`{"message":{"content":[{"type":"text","text":"\u0000"}]}}`), "message.content[0].text"},
		{"content lone high surrogate", "POST", run, []byte(`{"message":{"content":"x\ud800y"}}`), "message.content"},
		{"content lone low surrogate", "POST", run, []byte(`{"message":{"content":"\udc00"}}`), "message.content"},
		{"content high surrogate then a letter", "POST", run, []byte(`{"message":{"content":"\ud800\u0041"}}`), "message.content"},
		{"content invalid UTF-8", "POST", run, []byte("{\"message\":{\"content\":\"a\xffb\"}}"), "message.content"},
		{"content overlong NUL", "POST", run, []byte("{\"message\":{\"content\":\"a\xc0\x80b\"}}"), "message.content"},
		{"content UTF-8 surrogate", "POST", run, []byte("{\"message\":{\"content\":\"\xed\xa0\x80\"}}"), "message.content"},
		{"system NUL", "POST", run, []byte(`{"message":{"content":"hi"},"run_config":{"system":"be\u0000"}}`), "run_config.system"},
		{"custom NUL", "POST", run, []byte(`{"message":{"content":"hi"},"run_config":{"custom":{"k":["ok","\u0000"]}}}`), "run_config.custom.k[1]"},
		{"custom key NUL", "POST", run, []byte(`{"message":{"content":"hi"},"run_config":{"custom":{"a\u0000":1}}}`), "run_config.custom key"},
		{"model invalid UTF-8", "POST", run, []byte("{\"message\":{\"content\":\"hi\"},\"run_config\":{\"model\":\"\xfe\"}}"), "run_config.model"},
		{"create metadata NUL", "POST", "/api/v1/threads", []byte(`{"metadata":{"k":"\u0000"}}`), "metadata.k"},
		{"create metadata surrogate", "POST", "/api/v1/threads", []byte(`{"metadata":{"k":{"deep":"\udfff"}}}`), "metadata.k.deep"},
		{"create metadata invalid UTF-8", "POST", "/api/v1/threads", []byte("{\"metadata\":{\"\xc3\":1}}"), "metadata key"},
		{"patch title NUL", "PATCH", "/api/v1/threads/" + tid, []byte(`{"title":"t\u0000"}`), "title"},
		{"patch title surrogate", "PATCH", "/api/v1/threads/" + tid, []byte(`{"title":"\ud83d"}`), "title"},
		{"patch title invalid UTF-8", "PATCH", "/api/v1/threads/" + tid, []byte("{\"title\":\"\x80\"}"), "title"},
		{"patch metadata NUL", "PATCH", "/api/v1/threads/" + tid, []byte(`{"metadata":{"a":[1,{"b":"\u0000"}]}}`), "metadata.a[1].b"},
		{"head NUL", "PUT", "/api/v1/threads/" + tid + "/head", []byte(`{"message_id":"\u0000"}`), "message_id"},
	}
	for _, c := range cases {
		resp, b := e.do(c.method, c.path, c.body)
		wantStatus(t, resp, b, http.StatusBadRequest, "invalid_request")
		var he hostileError
		_ = json.Unmarshal(b, &he)
		if he.Error.Field != c.field {
			t.Errorf("%s: got field %q, want %q (%s)", c.name, he.Error.Field, c.field, b)
		}
	}
	// Nothing was written: the run's thread does not exist, the thread
	// list holds only tid, and tid is unchanged.
	resp, b = e.do("GET", strings.TrimSuffix(run, "/runs/stream"), nil)
	wantStatus(t, resp, b, http.StatusNotFound, "not_found")
	resp, b = e.do("GET", "/api/v1/threads", nil)
	wantStatus(t, resp, b, http.StatusOK, "")
	var list struct {
		Threads []struct {
			ID       string          `json:"thread_id"`
			Title    *string         `json:"title"`
			Metadata json.RawMessage `json:"metadata"`
		} `json:"threads"`
	}
	if err := json.Unmarshal(b, &list); err != nil || len(list.Threads) != 1 || list.Threads[0].ID != tid {
		t.Fatalf("threads after refusals: got %s, want only %s", b, tid)
	}
	if th := list.Threads[0]; (th.Title != nil && *th.Title != "") || string(th.Metadata) != "{}" {
		t.Fatalf("thread after refused patches: got title %v metadata %s, want unchanged", th.Title, th.Metadata)
	}
}

// TestTextPolicyKeepsText stores text the policy accepts byte for byte:
// other control characters, paired surrogate escapes, U+FFFD and U+FFFF.
func TestTextPolicyKeepsText(t *testing.T) {
	t.Parallel()
	e := setup(t)
	want := "a\x01b\x1f\u00e9\U0001F600\uFFFD\uFFFF\u2028</script>"
	body := []byte(`{"message":{"content":"a\u0001b\u001f\u00e9\ud83d\ude00` + "\uFFFD\uFFFF\u2028</script>" + `"},"run_config":{"system":"s\u0001"}}`)
	tid := newID()
	resp, b := e.do("POST", "/api/v1/threads/"+tid+"/runs/stream", body)
	wantStatus(t, resp, b, http.StatusOK, "")
	checkRun(t, readEvents(t, bytes.NewReader(b)))
	snap := e.snapshot(tid)
	if got := snap.Messages[0].Text(); got != want {
		t.Fatalf("stored text: got %q, want %q", got, want)
	}
	resp, b = e.do("PATCH", "/api/v1/threads/"+tid, []byte(`{"title":"t\u0001\ud83d\ude00","metadata":{"k\u00e9":"v\u0002"}}`))
	wantStatus(t, resp, b, http.StatusOK, "")
	var th struct {
		Title    string         `json:"title"`
		Metadata map[string]any `json:"metadata"`
	}
	if err := json.Unmarshal(b, &th); err != nil || th.Title != "t\x01\U0001F600" || th.Metadata["k\u00e9"] != "v\x02" {
		t.Fatalf("patched thread: got %s, want title %q and metadata kept", b, "t\x01\U0001F600")
	}
}

// rawUpload posts one multipart file whose Content-Disposition is sent as
// the bytes given, unescaped.
func (e *env) rawUpload(disposition, ct string, data []byte) (*http.Response, []byte) {
	e.t.Helper()
	var buf bytes.Buffer
	buf.WriteString("--BOUNDARY\r\nContent-Disposition: " + disposition + "\r\nContent-Type: " + ct + "\r\n\r\n")
	buf.Write(data)
	buf.WriteString("\r\n--BOUNDARY--\r\n")
	return e.do("POST", "/api/v1/attachments", buf.Bytes(), "Content-Type", "multipart/form-data; boundary=BOUNDARY")
}

// TestUploadFileName refuses file names the text policy does not accept
// and keeps the others byte for byte.
func TestUploadFileName(t *testing.T) {
	t.Parallel()
	e := setup(t)
	// A NUL in a header line is refused by the MIME reader itself (400,
	// malformed multipart body); the cases below reach the name.
	resp, b := e.rawUpload("form-data; name=\"file\"; filename=\"a\x00.txt\"", "text/plain", []byte("hello"))
	wantStatus(t, resp, b, http.StatusBadRequest, "invalid_request")
	for _, d := range []string{
		"form-data; name=\"file\"; filename=\"a\xff.txt\"",
		"form-data; name=\"file\"; filename*=UTF-8''a%FF.txt",
		"form-data; name=\"file\"; filename*=UTF-8''a%00.txt",
		"form-data; name=\"file\"; filename=\"" + strings.Repeat("n", 2000) + ".txt\"",
	} {
		resp, b := e.rawUpload(d, "text/plain", []byte("hello"))
		wantStatus(t, resp, b, http.StatusBadRequest, "invalid_request")
		var he hostileError
		if _ = json.Unmarshal(b, &he); he.Error.Field != "file name" {
			t.Errorf("%q: got field %q, want \"file name\"", d, he.Error.Field)
		}
	}
	resp, b = e.rawUpload("form-data; name=\"file\"; filename*=UTF-8''r%C3%A9sum%C3%A9%20%F0%9F%98%80.txt", "text/plain", []byte("hello"))
	wantStatus(t, resp, b, http.StatusCreated, "")
	var att struct{ Name, URL string }
	if _ = json.Unmarshal(b, &att); att.Name != "résumé 😀.txt" {
		t.Fatalf("stored name: got %q, want %q", att.Name, "résumé 😀.txt")
	}
}

// TestSecurityHeaders: API JSON (answers and errors) is neither sniffed nor
// stored; attachments download unless they are raster images, and run in a
// sandbox either way.
func TestSecurityHeaders(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, path := range []string{"/api/v1/threads", "/api/v1/threads/" + newID(), "/api/v1/nothing"} {
		resp, b := e.do("GET", path, nil)
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("GET %s: got nosniff %q, Cache-Control %q, want nosniff and no-store (%s)", path,
				resp.Header.Get("X-Content-Type-Options"), resp.Header.Get("Cache-Control"), b)
		}
	}
	_, b := e.do("POST", "/api/v1/threads/"+newID()+"/runs/stream", newMessage("hi", nil))
	_ = b
	for _, c := range []struct {
		name, ct, disp string
	}{
		{"x.html", "text/plain", "attachment"}, // an HTML payload uploaded as text
		{"x.png", "image/png", "inline"},
		{"x.pdf", "application/pdf", "attachment"},
		{"x.json", "application/json", "attachment"},
	} {
		resp, b := e.rawUpload(`form-data; name="file"; filename="`+c.name+`"`, c.ct, []byte("<script>alert(1)</script>"))
		wantStatus(t, resp, b, http.StatusCreated, "")
		var att struct{ URL string }
		_ = json.Unmarshal(b, &att)
		resp, b = e.do("GET", att.URL, nil)
		wantStatus(t, resp, b, http.StatusOK, "")
		h := resp.Header
		if !strings.HasPrefix(h.Get("Content-Disposition"), c.disp+";") || !strings.Contains(h.Get("Content-Security-Policy"), "sandbox") ||
			h.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: got Content-Disposition %q, CSP %q, nosniff %q; want %s, sandbox, nosniff", c.name,
				h.Get("Content-Disposition"), h.Get("Content-Security-Policy"), h.Get("X-Content-Type-Options"), c.disp)
		}
	}
}

// TestHeadEmptyID: an empty message id is a bad request, not an unknown
// message.
func TestHeadEmptyID(t *testing.T) {
	t.Parallel()
	e := setup(t)
	tid := newID()
	resp, b := e.do("POST", "/api/v1/threads", map[string]any{"thread_id": tid})
	wantStatus(t, resp, b, http.StatusCreated, "")
	resp, b = e.do("PUT", "/api/v1/threads/"+tid+"/head", map[string]any{"message_id": ""})
	wantStatus(t, resp, b, http.StatusBadRequest, "invalid_request")
}

// TestForeignThreadID: creating a thread with another caller's id says
// not_found, as for every other route on it, and does not reveal it exists.
func TestForeignThreadID(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *options) { o.keys = map[string]string{"alice-key": "alice", "bob-key": "bob"} })
	id := newID()
	e.key = "alice-key"
	resp, b := e.do("POST", "/api/v1/threads", map[string]any{"thread_id": id})
	wantStatus(t, resp, b, http.StatusCreated, "")
	e.key = "bob-key"
	resp, b = e.do("POST", "/api/v1/threads", map[string]any{"thread_id": id})
	wantStatus(t, resp, b, http.StatusNotFound, "not_found")
	resp, b = e.do("POST", "/api/v1/threads/"+id+"/runs/stream", newMessage("mine now", nil))
	wantStatus(t, resp, b, http.StatusNotFound, "not_found")
}
