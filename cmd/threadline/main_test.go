package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/api/client"
	"github.com/threadline/threadline/store/pgtest"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// binary builds the real server once per test run.
func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "threadline-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "threadline")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// server is a running threadline process.
type server struct {
	cmd  *exec.Cmd
	addr string
	logs *bytes.Buffer
	mu   sync.Mutex
	done chan error
}

func startServer(t *testing.T, dbURL string, env ...string) *server {
	t.Helper()
	cmd := exec.Command(binary(t), "serve")
	cmd.Env = append(os.Environ(), "THREADLINE_DATABASE_URL="+dbURL, "THREADLINE_ADDR=127.0.0.1:0")
	cmd.Env = append(cmd.Env, env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &server{cmd: cmd, logs: &bytes.Buffer{}, done: make(chan error, 1)}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.logs.WriteString(line + "\n")
			s.mu.Unlock()
			var rec struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "listening" {
				addr <- strings.TrimPrefix(rec.Addr, "http://")
			}
		}
		s.done <- cmd.Wait()
	}()
	select {
	case s.addr = <-addr:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("server did not start:\n%s", s.logs)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if t.Failed() {
			s.mu.Lock()
			t.Logf("server logs:\n%s", s.logs)
			s.mu.Unlock()
		}
	})
	return s
}

// ev is a stream event, as the Go client decodes it.
type ev = client.Event

func readEvent(t *testing.T, r *bufio.Reader) (ev, error) {
	line, err := r.ReadBytes('\n')
	if err != nil {
		return ev{}, err
	}
	var e ev
	if err := json.Unmarshal(line, &e); err != nil {
		t.Fatalf("bad line %q", line)
	}
	return e, nil
}

func openRun(t *testing.T, addr, tid, content string) *bufio.Reader {
	t.Helper()
	body := fmt.Sprintf(`{"message":{"content":%q}}`, content)
	resp, err := http.Post("http://"+addr+"/api/v1/threads/"+tid+"/runs/stream", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("run: status %d %s", resp.StatusCode, b)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return bufio.NewReader(resp.Body)
}

// TestKill9MidStream kills the real server with SIGKILL in the middle of a
// stream, restarts it, and checks that the user message survived, the reply
// was recovered from the log as incomplete/other, and a rejoin from the last
// event the client saw gets exactly the rest, ending interrupted.
func TestKill9MidStream(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	env := []string{"THREADLINE_BUILTIN_DELAY=20ms", "THREADLINE_BUILTIN_TOKENS=500", "THREADLINE_RUN_LEASE=1s"}
	s1 := startServer(t, db, env...)
	tid := uuid.NewString()
	r := openRun(t, s1.addr, tid, "survive this")
	var seen []ev
	for len(seen) < 15 {
		e, err := readEvent(t, r)
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, e)
	}
	if err := s1.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-s1.done
	s2 := startServer(t, db, env...)
	runID := seen[0].RunID
	last := seen[len(seen)-1].Sequence
	resp, err := http.Get(fmt.Sprintf("http://%s/api/v1/threads/%s/runs/%s/stream?after=%d", s2.addr, tid, runID, last))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rr := bufio.NewReader(resp.Body)
	var rest []ev
	for {
		e, err := readEvent(t, rr)
		if err != nil {
			break
		}
		rest = append(rest, e)
	}
	if len(rest) == 0 {
		t.Fatal("rejoin after restart: no events")
	}
	for i, e := range rest {
		if e.Sequence != last+int64(i)+1 {
			t.Fatalf("rejoined event %d has sequence %d, want %d", i, e.Sequence, last+int64(i)+1)
		}
	}
	final := rest[len(rest)-1]
	if final.Type != "snapshot" || final.RunStatus != "interrupted" {
		t.Fatalf("final event after restart: %+v, want an interrupted snapshot", final)
	}
	var streamed string
	for _, e := range append(seen, rest...) {
		if e.Type == "token" {
			streamed += e.Text
		}
	}
	if len(final.Messages) != 2 || final.Messages[0].Content[0].Text != "survive this" {
		t.Fatalf("user message lost: %+v", final.Messages)
	}
	reply := final.Messages[1]
	if reply.Status == nil || reply.Status.Type != "incomplete" || reply.Status.Reason != "other" || reply.Content[0].Text != streamed {
		t.Fatalf("recovered reply: status %+v text %q, want incomplete/other with the streamed %q", reply.Status, reply.Content[0].Text, streamed)
	}
	// The thread snapshot agrees, with no active run.
	sresp, err := http.Get("http://" + s2.addr + "/api/v1/threads/" + tid + "/messages")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(sresp.Body)
	sresp.Body.Close()
	if !strings.Contains(string(b), `"active_run":null`) || !strings.Contains(string(b), `"reason":"other"`) {
		t.Fatalf("snapshot after recovery: %s", b)
	}
}

// TestSIGTERMDrains: running streams finish within the grace period; past
// it, they are cancelled cleanly.
func TestSIGTERMDrains(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, grace, tokens, want string
	}{
		{"finishes within grace", "10s", "40", "succeeded"},
		{"cancelled after grace", "200ms", "5000", "cancelled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t, pgtest.New(t), "THREADLINE_BUILTIN_DELAY=10ms", "THREADLINE_BUILTIN_TOKENS="+tc.tokens, "THREADLINE_SHUTDOWN_GRACE="+tc.grace)
			r := openRun(t, s.addr, uuid.NewString(), "drain")
			if _, err := readEvent(t, r); err != nil {
				t.Fatal(err)
			}
			if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			var last ev
			for {
				e, err := readEvent(t, r)
				if err != nil {
					break
				}
				last = e
			}
			if last.Type != "snapshot" || last.RunStatus != tc.want {
				t.Fatalf("last event after SIGTERM: %+v, want a %s snapshot", last, tc.want)
			}
			select {
			case err := <-s.done:
				if err != nil {
					t.Fatalf("exit after SIGTERM: %v", err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("server did not exit after SIGTERM")
			}
		})
	}
}

func TestHelpListsSettings(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	err := Main(context.Background(), []string{"serve", "--help"}, func(string) string { return "" }, &out, &out)
	if err == nil {
		t.Fatal("--help: got nil error, want flag.ErrHelp")
	}
	for _, v := range []string{"THREADLINE_ADDR", "THREADLINE_DATABASE_URL", "THREADLINE_API_KEYS", "THREADLINE_BUILTIN_DELAY", "THREADLINE_SHUTDOWN_GRACE", "127.0.0.1:8080"} {
		if !strings.Contains(out.String(), v) {
			t.Errorf("--help does not mention %s", v)
		}
	}
}

// TestNoBenchSubcommand: the benchmarks are cmd/threadline-bench; the
// service neither lists nor runs them.
func TestNoBenchSubcommand(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	err := Main(context.Background(), []string{"bench", "peer"}, func(string) string { return "" }, &out, &out)
	if err == nil || !strings.Contains(err.Error(), `unknown subcommand "bench"`) {
		t.Errorf("threadline bench: got %v, want unknown subcommand", err)
	}
	if strings.Contains(usage, "bench") {
		t.Errorf("usage mentions bench:\n%s", usage)
	}
}

func TestConfigFromEnvironment(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"THREADLINE_DATABASE_URL":     "postgres://x",
		"THREADLINE_ATTACHMENT_TYPES": "image/png, text/plain",
		"THREADLINE_API_KEYS":         "k1:alice,k2:bob",
		"THREADLINE_SHUTDOWN_GRACE":   "3s",
		"THREADLINE_TITLE_MODEL":      "builtin",
		"THREADLINE_START_LINGER":     "5ms",
	}
	cfg, err := parseConfig("serve", []string{"--addr", "127.0.0.1:0"}, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfg.AttachmentTypes, ","); got != "image/png,text/plain" {
		t.Errorf("attachment types: got %q, want image/png,text/plain", got)
	}
	if cfg.APIKeys["k2"] != "bob" || len(cfg.APIKeys) != 2 {
		t.Errorf("API keys: got %d keys, want k1 and k2", len(cfg.APIKeys))
	}
	if cfg.StartLinger != 5*time.Millisecond || startLinger(0) >= 0 {
		t.Errorf("start linger: got %v (0 maps to %v), want 5ms (and 0 to commit at once)", cfg.StartLinger, startLinger(0))
	}
	if cfg.ShutdownGrace != 3*time.Second || cfg.Addr != "127.0.0.1:0" || cfg.TitleModel != "builtin" {
		t.Errorf("config: got grace %v addr %s title model %q, want 3s, the flag's 127.0.0.1:0 and builtin", cfg.ShutdownGrace, cfg.Addr, cfg.TitleModel)
	}
	env["THREADLINE_SHUTDOWN_GRACE"] = "soon"
	if _, err := parseConfig("serve", nil, func(k string) string { return env[k] }, io.Discard); err == nil || !strings.Contains(err.Error(), "THREADLINE_SHUTDOWN_GRACE") {
		t.Errorf("bad duration: got %v, want an error naming THREADLINE_SHUTDOWN_GRACE", err)
	}
}
