// Package replicatest runs real `threadline serve` processes, several on one
// Postgres database, over loopback HTTP, and injects faults from outside
// (kill -9, cancels and deletes sent to another replica). It holds tests
// only.
package replicatest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	apiclient "github.com/threadline/threadline/api/client"
	"github.com/threadline/threadline/store/pgtest"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// binary builds cmd/threadline once per test binary, into a temporary
// directory that the process removes when it exits (TestMain).
func binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		goBin, err := exec.LookPath("go")
		if err != nil {
			goBin = "/usr/local/go/bin/go" // where the project's machines keep it
		}
		binPath = filepath.Join(binDir, "threadline")
		args := []string{"build", "-o", binPath}
		if *raceBinary {
			args = append(args, "-race")
		}
		out, err := exec.Command(goBin, append(args, "..")...).CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

var binDir string

// raceBinary builds the service with the race detector: a replica that
// reports a data race fails its test (see startReplica's cleanup).
var raceBinary = flag.Bool("replica.race", false, "build the replicas with -race and fail a test whose replica reports a data race")

func TestMain(m *testing.M) {
	var err error
	if binDir, err = os.MkdirTemp("", "threadline-replicatest"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(binDir)
	os.Exit(code)
}

// replica is one running `threadline serve`.
type replica struct {
	t    testing.TB
	name string
	cmd  *exec.Cmd
	addr string
	mu   sync.Mutex
	logs bytes.Buffer
	done chan struct{}
	err  error
}

// startReplica starts a serve process on db and waits until it listens.
func startReplica(t testing.TB, name, db string, env ...string) *replica {
	t.Helper()
	cmd := exec.Command(binary(t), "serve")
	cmd.Env = append(os.Environ(), "THREADLINE_DATABASE_URL="+db, "THREADLINE_ADDR=127.0.0.1:0", "THREADLINE_LOG_LEVEL=info")
	cmd.Env = append(cmd.Env, env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &replica{t: t, name: name, cmd: cmd, done: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			r.mu.Lock()
			r.logs.WriteString(line + "\n")
			r.mu.Unlock()
			var rec struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "listening" {
				select {
				case addr <- strings.TrimPrefix(rec.Addr, "http://"):
				default:
				}
			}
		}
		r.err = cmd.Wait()
		close(r.done)
	}()
	select {
	case r.addr = <-addr:
	case <-r.done:
		t.Fatalf("%s exited before listening: %v\n%s", name, r.err, r.log())
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("%s did not start:\n%s", name, r.log())
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-r.done
		if strings.Contains(r.log(), "WARNING: DATA RACE") {
			t.Errorf("%s reported a data race", name)
		}
		if t.Failed() {
			t.Logf("%s logs:\n%s", name, r.log())
		}
	})
	return r
}

func (r *replica) log() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.logs.String()
}

// kill9 kills the process with SIGKILL and waits for it to be gone.
func (r *replica) kill9() {
	r.t.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		r.t.Fatalf("kill -9 %s: %v", r.name, err)
	}
	<-r.done
}

func (r *replica) url(path string) string { return "http://" + r.addr + "/api/v1" + path }

// cluster starts n replicas on one fresh database.
func cluster(t testing.TB, n int, env ...string) (string, []*replica) {
	t.Helper()
	db := pgtest.New(t)
	rs := make([]*replica, n)
	for i := range rs {
		rs[i] = startReplica(t, fmt.Sprintf("replica%d", i), db, env...)
	}
	return db, rs
}

// event is one stream line, decoded as the Go client decodes it, with the
// line itself in Raw.
type event = apiclient.Event

// stream reads a run's NDJSON stream.
type stream struct {
	t    testing.TB
	resp *http.Response
	r    *bufio.Reader
	evs  []event
	n    atomic.Int64 // len(evs), for other goroutines
}

// next returns the next event, or false at the end of the stream.
func (s *stream) next() (event, bool) {
	s.t.Helper()
	line, err := s.r.ReadBytes('\n')
	if err != nil {
		return event{}, false
	}
	var e event
	if err := json.Unmarshal(line, &e); err != nil {
		s.t.Errorf("stream line %q: %v", line, err)
		return event{}, false
	}
	e.Raw = bytes.TrimSpace(line)
	s.evs = append(s.evs, e)
	s.n.Add(1)
	return e, true
}

// rest reads the stream to its end and returns every event it carried.
func (s *stream) rest() []event {
	for {
		if _, ok := s.next(); !ok {
			return s.evs
		}
	}
}

// restQuiet is rest for another goroutine than the test's: a line that
// is not JSON ends the stream without failing the test from there (the
// caller's checks of the events then fail it).
func (s *stream) restQuiet() []event {
	for {
		line, err := s.r.ReadBytes('\n')
		var e event
		if err != nil || json.Unmarshal(line, &e) != nil {
			return s.evs
		}
		e.Raw = bytes.TrimSpace(line)
		s.evs = append(s.evs, e)
		s.n.Add(1)
	}
}

// client is an HTTP client whose every request is bounded.
var client = &http.Client{Timeout: 90 * time.Second}

func openStream(t testing.TB, req *http.Request) (*stream, int, string) {
	t.Helper()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return nil, resp.StatusCode, string(b)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return &stream{t: t, resp: resp, r: bufio.NewReader(resp.Body)}, resp.StatusCode, ""
}

// startRun posts a run on thread tid to replica r; it fails the test
// unless the answer is 200.
func startRun(t testing.TB, r *replica, tid, body string) *stream {
	t.Helper()
	s, code, msg := tryRun(t, r, tid, body)
	if s == nil {
		t.Fatalf("start run on %s: status %d %s", r.name, code, msg)
	}
	return s
}

func tryRun(t testing.TB, r *replica, tid, body string) (*stream, int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, r.url("/threads/"+tid+"/runs/stream"), strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	return openStream(t, req)
}

// message is a run body with a new user message.
func message(id, text string) string {
	if id == "" {
		return fmt.Sprintf(`{"message":{"content":%q}}`, text)
	}
	return fmt.Sprintf(`{"message":{"id":%q,"content":%q}}`, id, text)
}

// follow rejoins a run on replica r after sequence after.
func follow(t testing.TB, r *replica, tid, runID string, after int64) *stream {
	t.Helper()
	return followWithin(t, r, tid, runID, after, client.Timeout)
}

// followWithin is follow with the whole stream bounded by d: it ends (as
// if the server closed it) when d has passed.
func followWithin(t testing.TB, r *replica, tid, runID string, after int64, d time.Duration) *stream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, r.url(fmt.Sprintf("/threads/%s/runs/%s/stream?after=%d", tid, runID, after)), nil)
	s, code, msg := openStream(t, req)
	if s == nil {
		t.Fatalf("follow on %s: status %d %s", r.name, code, msg)
	}
	return s
}

// call sends a request and returns its status and body.
func call(t testing.TB, method, url, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, url, rd)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// readN reads n events (fewer if the stream ends first).
func (s *stream) readN(n int) []event {
	for len(s.evs) < n {
		if _, ok := s.next(); !ok {
			break
		}
	}
	return s.evs
}

// checkRun checks one run's whole stream as a client saw it: sequences
// from first rise by one with no gap, the last event is a final snapshot
// with status want (any final status if want is ""), and the reply in that
// snapshot is exactly the streamed tokens. It returns the final event.
func checkRun(t testing.TB, who string, evs []event, first int64, want string) event {
	t.Helper()
	if len(evs) == 0 {
		t.Fatalf("%s: no events", who)
	}
	for i, e := range evs {
		if e.Sequence != first+int64(i) {
			t.Fatalf("%s: event %d has sequence %d, want %d (gap or repeat)", who, i, e.Sequence, first+int64(i))
		}
	}
	last := evs[len(evs)-1]
	if last.Type != "snapshot" || last.RunStatus == "" || last.RunStatus == "running" {
		t.Fatalf("%s: last event is %s %q (sequence %d), want a final snapshot", who, last.Type, last.RunStatus, last.Sequence)
	}
	if want != "" && last.RunStatus != want {
		t.Fatalf("%s: run ended %s, want %s", who, last.RunStatus, want)
	}
	return last
}

// tokens joins the token texts of evs.
func tokens(evs []event) string {
	var b strings.Builder
	for _, e := range evs {
		if e.Type == "token" {
			b.WriteString(e.Text)
		}
	}
	return b.String()
}

// reply returns the text of the final snapshot's last assistant message.
func reply(t testing.TB, final event) string {
	t.Helper()
	for i := len(final.Messages) - 1; i >= 0; i-- {
		m := final.Messages[i]
		if m.Role == "assistant" {
			var b strings.Builder
			for _, p := range m.Content {
				b.WriteString(p.Text)
			}
			return b.String()
		}
	}
	t.Fatalf("final snapshot holds no assistant message")
	return ""
}

// sameEvents fails unless a and b are the same events, byte for byte.
func sameEvents(t testing.TB, what string, a, b []event) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: %d events, want %d", what, len(b), len(a))
	}
	for i := range a {
		if !bytes.Equal(a[i].Raw, b[i].Raw) {
			t.Fatalf("%s: event %d differs:\n got %s\nwant %s", what, i, b[i].Raw, a[i].Raw)
		}
	}
}
