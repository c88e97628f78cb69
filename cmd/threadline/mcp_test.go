package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/model/mcp/mcptest"
	"github.com/threadline/threadline/store/pgtest"
	"github.com/threadline/threadline/thread/threadtest/wait"
)

// mcpServerEnv makes the test binary a stdio MCP server instead of
// running the tests (TestMain), so that the service's wiring starts a real
// child process as a config file names it.
const mcpServerEnv = "THREADLINE_MCP_TEST_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(mcpServerEnv) == "stdio" {
		if err := mcptest.ServeStdio(context.Background(), mcptest.Server(mcptest.Options{})); err != nil {
			fmt.Fprintln(os.Stderr, "test MCP server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// lockedBuffer collects a service's log lines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

type listedTool struct {
	Name       string          `json:"name"`
	Parameters json.RawMessage `json:"parameters"`
	Approval   bool            `json:"approval"`
}

func listTools(t *testing.T, addr string) []listedTool {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/api/v1/tools")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out struct{ Tools []listedTool }
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &out) != nil {
		t.Fatalf("GET /tools: got %d %s, want 200 and a tool list", resp.StatusCode, b)
	}
	return out.Tools
}

// TestMCPServersAtStart starts the service as `serve` does, with an MCP
// config naming a stdio server (this test binary as a child process), a
// streamable HTTP server (httptest) and a server that cannot start: GET
// /tools lists the built-in tools and both servers' tools, the broken
// server is logged and left out, a demo agent run's tool call reaches GET
// …/raw (raw records on by default), the registry calls the servers'
// tools, and Close ends the sessions. A config file that does not parse
// stops the start.
func TestMCPServersAtStart(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(mcptest.Handler(mcptest.Server(mcptest.Options{})))
	defer hs.Close()
	db := pgtest.New(t)
	ctx := context.Background()

	bad := writeFile(t, "bad.json", `{"servers":[{"name":"x"}]}`)
	cfg, err := parseConfig("serve", []string{"--addr", "127.0.0.1:0", "--database-url", db, "--mcp-config", bad}, os.Getenv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := Start(ctx, cfg, io.Discard); err == nil || !strings.Contains(err.Error(), "THREADLINE_MCP_CONFIG") {
		if p != nil {
			_ = p.Close()
		}
		t.Fatalf("Start with an invalid MCP config: got %v, want an error naming THREADLINE_MCP_CONFIG", err)
	}

	exeJSON, _ := json.Marshal(exe)
	good := writeFile(t, "mcp.json", `{"servers":[`+
		`{"name":"local","command":`+string(exeJSON)+`,"env":{"`+mcpServerEnv+`":"stdio"},"approval":["echo"]},`+
		`{"name":"remote","url":"`+hs.URL+`","tools":["add","echo"]},`+
		`{"name":"broken","command":"/nonexistent/mcp-server"}]}`)
	cfg, err = parseConfig("serve", []string{"--addr", "127.0.0.1:0", "--database-url", db, "--mcp-config", good}, os.Getenv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	p, err := Start(ctx, cfg, logs)
	if err != nil {
		t.Fatalf("Start: %v\n%s", err, logs)
	}
	closed := false
	defer func() {
		if !closed {
			_ = p.Close()
		}
	}()

	var names []string
	for _, tl := range listTools(t, p.Addr()) {
		names = append(names, tl.Name)
		if want := tl.Name == "local__echo"; tl.Approval != want {
			t.Errorf("%s: approval %v, want %v", tl.Name, tl.Approval, want)
		}
		if tl.Name == "local__add" && !strings.Contains(string(tl.Parameters), `"a":{"type":"number"}`) {
			t.Errorf("local__add: parameters %s, want the server's input schema", tl.Parameters)
		}
	}
	want := []string{"calculator", "clock", "delegate", "local__add", "local__echo", "local__fail", "local__files_read", "local__wait",
		"remote__add", "remote__echo", "wait"}
	if !slices.Equal(names, want) {
		t.Errorf("GET /tools: got %v, want %v", names, want)
	}
	if l := logs.String(); !strings.Contains(l, `"level":"ERROR"`) || !strings.Contains(l, "MCP server broken") {
		t.Errorf("logs: want an error line naming MCP server broken, got:\n%s", l)
	}

	checkRawRecords(t, p.Addr())

	for _, name := range []string{"local__add", "remote__add"} {
		res, err := p.Tools().Call(ctx, name, json.RawMessage(`{"a":2,"b":40}`))
		if err != nil || res.IsError || string(res.Value) != `{"sum":42}` {
			t.Errorf("%s: got %s isError=%v err=%v, want {\"sum\":42}", name, res.Value, res.IsError, err)
		}
	}

	if err := p.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	closed = true
	res, err := p.Tools().Call(ctx, "local__add", json.RawMessage(`{"a":1,"b":1}`))
	if err != nil || !res.IsError || !strings.Contains(string(res.Value), "closed") {
		t.Errorf("a call after Close: got %s isError=%v err=%v, want an isError result saying the server is closed", res.Value, res.IsError, err)
	}
}

// checkRawRecords runs the demo agent ("what is 12*7?" calls calculator)
// on the service at addr and waits for the run's raw records (written
// every quarter second, off the model loop) to hold its calculator call.
func checkRawRecords(t *testing.T, addr string) {
	t.Helper()
	tid := uuid.NewString()
	body := `{"message":{"content":"what is 12*7?"},"run_config":{"model":"builtin:demo"}}`
	resp, err := http.Post("http://"+addr+"/api/v1/threads/"+tid+"/runs/stream", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var first struct {
		RunID string `json:"run_id"`
	}
	line, _, _ := strings.Cut(string(b), "\n")
	if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(line), &first) != nil || !strings.Contains(string(b), `"tool_result"`) {
		t.Fatalf("demo run: got %d %.300s, want a stream with a tool_result", resp.StatusCode, b)
	}
	// The writer flushes now and then: wait for its next flush.
	wait.Eventually(t, 20*time.Second, func() bool {
		resp, err := http.Get("http://" + addr + "/api/v1/threads/" + tid + "/runs/" + first.RunID + "/raw")
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET …/raw: got %d %s, want 200", resp.StatusCode, raw)
		}
		if len(raw) > 0 {
			var rec struct {
				Source, Kind string
				Data         struct {
					ToolName string          `json:"tool_name"`
					Output   json.RawMessage `json:"output"`
				}
			}
			if err := json.Unmarshal(raw, &rec); err != nil || rec.Source != "tool" || rec.Kind != "call" ||
				rec.Data.ToolName != "calculator" || string(rec.Data.Output) != "84" {
				t.Fatalf("raw records: got %s, want the calculator call answering 84", raw)
			}
			return true
		}
		return false
	}, "the demo run's raw records never arrived")
}
