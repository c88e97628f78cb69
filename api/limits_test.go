package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/threadline/threadline/api"
	"github.com/threadline/threadline/thread/engine"
	"github.com/threadline/threadline/thread/threadtest/wait"
)

func withAPI(f func(*api.Config)) func(*options)        { return func(o *options) { o.api = f } }
func withService(f func(*engine.Config)) func(*options) { return func(o *options) { o.service = f } }

// upload stores data as a file and returns its id.
func (e *env) upload(name, ct string, data []byte) string {
	e.t.Helper()
	resp, b := e.rawUpload(`form-data; name="file"; filename="`+name+`"`, ct, data)
	wantStatus(e.t, resp, b, http.StatusCreated, "")
	var att struct{ ID string }
	_ = json.Unmarshal(b, &att)
	return att.ID
}

func withAttachments(content string, ids ...string) map[string]any {
	atts := make([]any, len(ids))
	for i, id := range ids {
		atts[i] = map[string]any{"id": id}
	}
	return map[string]any{"message": map[string]any{"content": content, "attachments": atts}}
}

// TestAttachmentsPerMessage: a message names at most MaxAttachments files,
// each once; the amplification (one 10 MiB file named 100 times in
// a 4.8 KB request) is refused before anything is read.
func TestAttachmentsPerMessage(t *testing.T) {
	t.Parallel()
	e := setup(t, withAPI(func(c *api.Config) { c.MaxAttachments = 3 }))
	big := e.upload("big.txt", "text/plain", []byte(strings.Repeat("x", 10<<20)))
	small := []string{e.upload("a.txt", "text/plain", []byte("a")), e.upload("b.txt", "text/plain", []byte("b")),
		e.upload("c.txt", "text/plain", []byte("c")), e.upload("d.txt", "text/plain", []byte("d"))}
	hundred := make([]string, 100)
	for i := range hundred {
		hundred[i] = big
	}
	tid := newID()
	resp, b := e.do("POST", "/api/v1/threads/"+tid+"/runs/stream", withAttachments("read these", hundred...))
	wantStatus(t, resp, b, http.StatusRequestEntityTooLarge, "too_large")
	resp, b = e.do("POST", "/api/v1/threads/"+tid+"/runs/stream", withAttachments("four", small...))
	wantStatus(t, resp, b, http.StatusRequestEntityTooLarge, "too_large")
	resp, b = e.do("POST", "/api/v1/threads/"+tid+"/runs/stream", withAttachments("twice", small[0], small[1], small[0]))
	wantStatus(t, resp, b, http.StatusBadRequest, "invalid_request")
	if !strings.Contains(string(b), `"field":"message.attachments[2].id"`) {
		t.Fatalf("repeated attachment: got %s, want the field message.attachments[2].id named", b)
	}
	_, evs := e.stream(tid, withAttachments("three", small[:3]...))
	if final := checkRun(t, evs); final.RunStatus != "succeeded" || len(final.Messages[0].Attachments) != 3 {
		t.Fatalf("three attachments: got %s", final.Raw)
	}
}

// TestInlineBudget: one model call carries at most InlineBytes of
// attachments, newest first; the rest are named to the model, unread.
func TestInlineBudget(t *testing.T) {
	t.Parallel()
	fake := newFakeOpenAI(t)
	file := filepath.Join(t.TempDir(), "models.json")
	models := fmt.Sprintf(`{"models":[{"name":"fake","provider":"openai","model":"m","base_url":%q,"api_key_env":"FAKE_KEY"}]}`, fake.srv.URL+"/v1")
	if err := os.WriteFile(file, []byte(models), 0o600); err != nil {
		t.Fatal(err)
	}
	e := setup(t, withVars(map[string]string{"THREADLINE_MODELS_FILE": file, "FAKE_KEY": "fake-key"}),
		withService(func(c *engine.Config) { c.Limits.InlineBytes = 2500 }))
	var ids []string
	for i := 0; i < 5; i++ {
		ids = append(ids, e.upload(fmt.Sprintf("f%d.txt", i), "text/plain", []byte(strings.Repeat(strconv.Itoa(i), 1000))))
	}
	body := withAttachments("old", ids[:3]...)
	body["run_config"] = map[string]any{"model": "fake"}
	tid := newID()
	_, evs := e.stream(tid, body)
	first := checkRun(t, evs)
	body = withAttachments("new", ids[3:]...)
	body["run_config"] = map[string]any{"model": "fake"}
	body["parent_message_id"] = first.Messages[1].ID
	_, evs = e.stream(tid, body)
	checkRun(t, evs)
	sent := fake.last(t)
	var all string
	for _, m := range sent {
		all += m.Text
	}
	inlined := len(regexp.MustCompile(`\[f\d\.txt\]\n`).FindAllString(all, -1))
	named := strings.Count(all, "not shown to the model")
	// The new message's two files (2,000 bytes) fit; of the old three, none
	// fits in the 500 bytes left.
	if inlined != 2 || named != 3 || !strings.Contains(all, strings.Repeat("4", 1000)) || strings.Contains(all, strings.Repeat("0", 1000)) {
		t.Fatalf("model call under a 2,500-byte budget: %d files inlined, %d named, want 2 and 3 (the newest inlined); sent %.300q", inlined, named, all)
	}
}

// TestMessagesPerThread: a run that would take a thread over its limit is
// refused, and the thread is left as it was.
func TestMessagesPerThread(t *testing.T) {
	t.Parallel()
	e := setup(t, withService(func(c *engine.Config) { c.Limits.MessagesPerThread = 4 }))
	tid := newID()
	f1 := e.turn(tid, "one", nil)
	f2 := e.turn(tid, "two", &f1.Messages[1].ID)
	resp, b := e.do("POST", "/api/v1/threads/"+tid+"/runs/stream", newMessage("three", &f2.Messages[3].ID))
	wantStatus(t, resp, b, http.StatusRequestEntityTooLarge, "too_large")
	if n := len(e.snapshot(tid).Messages); n != 4 {
		t.Fatalf("thread after the refused run: %d messages, want 4", n)
	}
}

// TestThreadsPerPage: a page is at most MaxPage threads.
func TestThreadsPerPage(t *testing.T) {
	t.Parallel()
	e := setup(t, withAPI(func(c *api.Config) { c.MaxPage = 5 }))
	resp, b := e.do("GET", "/api/v1/threads?limit=6", nil)
	wantStatus(t, resp, b, http.StatusBadRequest, "invalid_request")
	resp, b = e.do("GET", "/api/v1/threads?limit=5", nil)
	wantStatus(t, resp, b, http.StatusOK, "")
	d := setup(t)
	resp, b = d.do("GET", "/api/v1/threads?limit=101", nil)
	wantStatus(t, resp, b, http.StatusBadRequest, "invalid_request")
}

// want429 checks a rate_limited answer with Retry-After.
func want429(t *testing.T, resp *http.Response, b []byte) {
	t.Helper()
	wantStatus(t, resp, b, http.StatusTooManyRequests, "rate_limited")
	if resp.Header.Get("Retry-After") == "" {
		t.Fatalf("429 without Retry-After: %s", b)
	}
}

// TestRunsPerCaller: a caller's runs in progress are capped even when their
// streams are gone (on_disconnect continue).
func TestRunsPerCaller(t *testing.T) {
	t.Parallel()
	e := setup(t, withDelay(50*time.Millisecond), withTokens(200), withService(func(c *engine.Config) { c.Limits.RunsPerCaller = 2 }))
	ctx, cancel := context.WithCancel(context.Background())
	var ids []string
	for i := 0; i < 2; i++ {
		tid := newID()
		_, r := e.openStream(ctx, tid, newMessage("long", nil))
		ids = append(ids, nextEvent(t, r).RunID)
	}
	cancel() // the streams go; the runs go on
	resp, b := e.do("POST", "/api/v1/threads/"+newID()+"/runs/stream", newMessage("third", nil))
	want429(t, resp, b)
	if len(ids) != 2 || ids[0] == ids[1] {
		t.Fatalf("the two runs: got %v", ids)
	}
}

// TestStreamsPerCaller and per run: open streams are capped per caller and
// rejoins per run; closing one makes room.
func TestStreamsPerCaller(t *testing.T) {
	t.Parallel()
	e := setup(t, withDelay(50*time.Millisecond), withTokens(2000),
		withAPI(func(c *api.Config) { c.StreamsPerCaller, c.RejoinsPerRun = 3, 1 }))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tid := newID()
	_, r := e.openStream(ctx, tid, newMessage("long", nil))
	run := nextEvent(t, r).RunID
	rctx, rcancel := context.WithCancel(ctx)
	_, rr := e.openRejoin(rctx, tid, run, 0)
	nextEvent(t, rr)
	resp, b := e.do("GET", "/api/v1/threads/"+tid+"/runs/"+run+"/stream", nil)
	want429(t, resp, b) // a second rejoin of the run
	rcancel()
	wait.Eventually(t, streamsBound, func() bool { return e.streamsOpen() == 1 }, "waited %v for the rejoin to close", streamsBound)
	_, r2 := e.openStream(ctx, newID(), newMessage("long", nil))
	nextEvent(t, r2)
	_, rr = e.openRejoin(ctx, tid, run, 0) // the run's one rejoin again: three streams
	nextEvent(t, rr)
	resp, b = e.do("POST", "/api/v1/threads/"+newID()+"/runs/stream", newMessage("fourth", nil))
	want429(t, resp, b)
}

// streamsBound bounds the wait for a stream's end to show, generously:
// under a loaded machine a cancelled query's connection is closed by pgx
// in the background for up to 15 s.
const streamsBound = 60 * time.Second

// streamsOpen reads threadline_streams_open from /metrics.
func (e *env) streamsOpen() int {
	e.t.Helper()
	_, b := e.do("GET", "/metrics", nil)
	m := regexp.MustCompile(`(?m)^threadline_streams_open (\d+)`).FindSubmatch(b)
	if m == nil {
		e.t.Fatalf("no threadline_streams_open in /metrics")
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// TestStalledReaderDropped: a client that stops reading a long rejoin is
// dropped after the stall timeout, releasing what its stream held, and
// rejoins from the last sequence it read.
func TestStalledReaderDropped(t *testing.T) {
	t.Parallel()
	e := setup(t, withTokens(50000), withAPI(func(c *api.Config) { c.StallTimeout = time.Second }))
	tid := newID()
	resp, b := e.do("POST", "/api/v1/threads/"+tid+"/runs/stream", newMessage("long", nil))
	wantStatus(t, resp, b, http.StatusOK, "")
	if len(b) < 6<<20 {
		t.Fatalf("the run's stream is %d bytes; it must be over what socket buffers hold (6 MiB) to stall", len(b))
	}
	line, _, _ := strings.Cut(string(b), "\n")
	var first event
	_ = json.Unmarshal([]byte(line), &first)
	total := strings.Count(string(b), "\n")

	// A rejoin read up to event 10, then never again: with a 4 KiB receive
	// buffer, its 8 MB cannot fit in the sockets' buffers (tcp_wmem's
	// largest send buffer is 4 MiB), so its writes block and only the
	// stall timeout ends it.
	c, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.(*net.TCPConn).SetReadBuffer(4096); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "GET /api/v1/threads/%s/runs/%s/stream HTTP/1.1\r\nHost: x\r\n\r\n", tid, first.RunID)
	br := bufio.NewReaderSize(c, 1024)
	rresp, err := http.ReadResponse(br, nil)
	if err != nil || rresp.StatusCode != http.StatusOK {
		t.Fatalf("rejoin: %v %v", err, rresp)
	}
	cr := bufio.NewReader(rresp.Body)
	var last int64
	for last < 10 {
		ev := nextEvent(t, cr)
		last = ev.Sequence
	}
	wait.Eventually(t, streamsBound, func() bool { return e.streamsOpen() == 0 }, "waited %v for the stalled stream to be dropped", streamsBound)

	// It comes back for the rest.
	resp, b = e.do("GET", fmt.Sprintf("/api/v1/threads/%s/runs/%s/stream?after=%d", tid, first.RunID, last), nil)
	wantStatus(t, resp, b, http.StatusOK, "")
	if n := strings.Count(string(b), "\n"); int64(n) != int64(total)-last {
		t.Fatalf("rejoin after the drop: %d events, want %d", n, int64(total)-last)
	}
}

// TestLimitsEndpoint: GET /limits tells a client the limits it can check
// before sending, and an upload that declares more than the limit is
// refused without the service waiting for its body; one that does not
// declare its length is cut off at the limit.
func TestLimitsEndpoint(t *testing.T) {
	t.Parallel()
	e := setup(t, withAPI(func(c *api.Config) {
		c.MaxAttachment = 1 << 20
		c.MaxAttachments = 4
		c.AttachmentTypes = []string{"text/plain", "image/png"}
	}))
	resp, b := e.do("GET", "/api/v1/limits", nil)
	wantStatus(t, resp, b, http.StatusOK, "")
	var got api.Limits
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("GET /limits: %v in %s", err, b)
	}
	want := api.Limits{MaxBodyBytes: 1 << 20, MaxMessageBytes: 256 << 10, MaxAttachmentBytes: 1 << 20, MaxAttachments: 4,
		AttachmentTypes: []string{"text/plain", "image/png"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("GET /limits: got %+v, want %+v", got, want)
	}

	// Declares 100 MiB, sends a few bytes: the answer comes at once.
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(e.url, "http://"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "POST /api/v1/attachments HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=B\r\nContent-Length: %d\r\n\r\n--B\r\n", 100<<20)
	r, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("an upload declaring 100 MiB: no answer before its body: %v", err)
	}
	body := make([]byte, 512)
	n, _ := r.Body.Read(body)
	if r.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(body[:n]), `"too_large"`) {
		t.Fatalf("an upload declaring 100 MiB: got %d %s, want 413 too_large", r.StatusCode, body[:n])
	}

	// No declared length (chunked): read up to the limit, then refused.
	pr, pw := io.Pipe()
	go func() {
		_, _ = pw.Write([]byte("--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"big.txt\"\r\nContent-Type: text/plain\r\n\r\n"))
		// More than the socket buffers hold, so the answer comes while it
		// is still being sent; the transport then closes the pipe.
		chunk := []byte(strings.Repeat("x", 64<<10))
		for i := 0; i < 1024; i++ {
			if _, err := pw.Write(chunk); err != nil {
				return
			}
		}
		_ = pw.Close()
	}()
	req, _ := http.NewRequest("POST", e.url+"/api/v1/attachments", pr)
	req.Header.Set("Content-Type", "multipart/form-data; boundary=B")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("a chunked upload over the limit: %v", err)
	}
	defer res.Body.Close()
	b, _ = io.ReadAll(res.Body)
	wantStatus(t, res, b, http.StatusRequestEntityTooLarge, "too_large")
}
