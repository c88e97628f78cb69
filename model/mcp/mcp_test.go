package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/model/mcp"
	"github.com/threadline/threadline/model/mcp/mcptest"
	"github.com/threadline/threadline/model/tool"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/threadtest/wait"
)

// serverEnv makes the test binary an MCP stdio server instead of running
// the tests (see TestMain).
const serverEnv = "THREADLINE_MCP_TEST_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(serverEnv) == "stdio" {
		if err := mcptest.ServeStdio(context.Background(), mcptest.Server(mcptest.Options{Crash: true})); err != nil {
			fmt.Fprintln(os.Stderr, "test MCP server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// waitCancelled hears from the in-process (HTTP) server's wait tool when
// its call was cancelled by the client.
var waitCancelled = make(chan struct{}, 1)

// stdioConfig runs the test binary as a stdio server.
func stdioConfig(t *testing.T, extra string) mcp.Config {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := mcp.ParseConfig([]byte(`{"servers":[{"name":"local","command":` + js(exe) +
		`,"env":{"` + serverEnv + `":"stdio"},"timeout":"2s"` + extra + `}]}`))
	if err != nil {
		t.Fatalf("ParseConfig: %v", err)
	}
	return cfg
}

func httpConfig(t *testing.T, extra string) (mcp.Config, *httptest.Server) {
	t.Helper()
	hs := httptest.NewServer(mcptest.Handler(mcptest.Server(mcptest.Options{WaitCancelled: waitCancelled})))
	t.Cleanup(hs.Close)
	cfg, err := mcp.ParseConfig([]byte(`{"servers":[{"name":"remote","url":"` + hs.URL + `","timeout":"2s"` + extra + `}]}`))
	if err != nil {
		t.Fatalf("ParseConfig: %v", err)
	}
	return cfg, hs
}

func js(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// setup opens the servers of cfg into a tool registry.
func setup(t *testing.T, cfg mcp.Config) *tool.Registry {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := mcp.Open(ctx, cfg, mcp.Options{Retry: 10 * time.Millisecond})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	r := tool.NewRegistry(0)
	if err := r.Add(s.Tools()...); err != nil {
		t.Fatalf("Add: %v", err)
	}
	return r
}

func call(t *testing.T, r *tool.Registry, name, args string) thread.ToolOutput {
	t.Helper()
	res, err := r.Call(context.Background(), name, json.RawMessage(args))
	if err != nil {
		t.Fatalf("Call(%s): got %v, want a result", name, err)
	}
	return res
}

func TestListAndCall(t *testing.T) {
	t.Parallel()
	httpCfg, _ := httpConfig(t, `,"approval":["echo"]`)
	for _, tc := range []struct {
		name   string
		cfg    mcp.Config
		prefix string
		tools  string
	}{
		{"stdio", stdioConfig(t, `,"approval":["echo"]`), "local__", "add,crash,echo,fail,files_read,wait"},
		{"streamable HTTP", httpCfg, "remote__", "add,echo,fail,files_read,wait"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := setup(t, tc.cfg)
			var names []string
			for _, s := range r.Specs() {
				names = append(names, strings.TrimPrefix(s.Name, tc.prefix))
				if want := s.Name == tc.prefix+"echo"; s.Approval != want {
					t.Errorf("%s: approval %v, want %v", s.Name, s.Approval, want)
				}
			}
			if got := strings.Join(names, ","); got != tc.tools {
				t.Errorf("tools: got %s, want %s", got, tc.tools)
			}
			add, _ := r.Get(tc.prefix + "add")
			if p := string(add.Spec().Parameters); !strings.Contains(p, `"a":{"type":"number"}`) || add.Spec().Description != "Adds a and b." {
				t.Errorf("add: parameters %s, description %q; want its schema and description", p, add.Spec().Description)
			}
			tests := []struct {
				tool, args string
				want       string
				isError    bool
			}{
				{"add", `{"a":2,"b":40}`, `{"sum":42}`, false},
				{"echo", `{"text":"hi"}`, `"you said: hi"`, false},
				{"files_read", `{}`, `"read"`, false},
				{"fail", `{}`, `"it failed on purpose"`, true},
				{"add", `{"a":"two"}`, ``, true}, // the SDK refuses arguments against the schema
				{"wait", `{"seconds":30}`, `"` + tc.prefix + `wait timed out after 2s"`, true},
				{"echo", `{"text":"still there"}`, `"you said: still there"`, false}, // the timed-out call did not break the session
			}
			for _, c := range tests {
				res := call(t, r, tc.prefix+c.tool, c.args)
				if res.IsError != c.isError || (c.want != "" && string(res.Value) != c.want) {
					t.Errorf("%s %s: got %s isError=%v, want %s isError=%v", c.tool, c.args, res.Value, res.IsError, c.want, c.isError)
				}
			}
			if tc.prefix == "remote__" {
				// The timed-out call was cancelled on the server too.
				select {
				case <-waitCancelled:
				case <-time.After(10 * time.Second):
					t.Errorf("the server's wait tool never saw its call cancelled")
				}
			}
		})
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	r := setup(t, stdioConfig(t, `,"timeout":"1m"`))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := r.Call(ctx, "local__wait", json.RawMessage(`{"seconds":60}`))
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled call: got %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a cancelled call did not return")
	}
	if res := call(t, r, "local__add", `{"a":1,"b":1}`); string(res.Value) != `{"sum":2}` {
		t.Errorf("after a cancelled call: got %s, want {\"sum\":2}", res.Value)
	}
}

// TestServerCrash: a stdio server that dies mid-call answers isError, and
// the next call starts it again.
func TestServerCrash(t *testing.T) {
	t.Parallel()
	// A call's timeout also bounds starting the server again, which a
	// loaded machine may take a while to do.
	r := setup(t, stdioConfig(t, `,"timeout":"20s"`))
	res := call(t, r, "local__crash", `{}`)
	if !res.IsError || !strings.Contains(string(res.Value), "MCP server local") {
		t.Errorf("crash: got %s isError=%v, want an isError result naming the server", res.Value, res.IsError)
	}
	// A new server process starts after the client's retry interval.
	wait.Eventually(t, 10*time.Second, func() bool {
		res = call(t, r, "local__add", `{"a":1,"b":2}`)
		return !res.IsError
	}, "after the crash: got %s isError=true for 10 s, want {\"sum\":3} from a new server process", func() any { return string(res.Value) })
	if res.IsError || string(res.Value) != `{"sum":3}` {
		t.Errorf("after the crash: got %s isError=%v, want {\"sum\":3} from a new server process", res.Value, res.IsError)
	}
}

func TestHTTPServerGone(t *testing.T) {
	t.Parallel()
	cfg, hs := httpConfig(t, "")
	r := setup(t, cfg)
	hs.CloseClientConnections()
	hs.Close()
	res := call(t, r, "remote__add", `{"a":1,"b":2}`)
	if !res.IsError || !strings.Contains(string(res.Value), "MCP server remote") {
		t.Errorf("a server that is gone: got %s isError=%v, want an isError result naming the server", res.Value, res.IsError)
	}
}

func TestOpenUnreachable(t *testing.T) {
	t.Parallel()
	cfg, err := mcp.ParseConfig([]byte(`{"servers":[{"name":"nope","command":"/nonexistent/mcp-server"},{"name":"gone","url":"http://127.0.0.1:1/mcp","timeout":"2s"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	s, err := mcp.Open(context.Background(), cfg, mcp.Options{})
	if err == nil || !strings.Contains(err.Error(), "MCP server nope") || !strings.Contains(err.Error(), "MCP server gone") || s == nil || len(s.Tools()) != 0 {
		t.Errorf("Open: got %v, want usable Servers with no tools and an error naming both servers", err)
	}
	if s != nil {
		_ = s.Close()
	}
}

func TestParseConfig(t *testing.T) {
	t.Parallel()
	good := `{"servers":[{"name":"a-b_c","command":"x","args":["1"],"env":{"K":"${V}"},"approval":true,"tools":["t"],"timeout":5},` +
		`{"name":"web","url":"https://example.com/mcp","headers":{"Authorization":"Bearer ${TOKEN}"},"approval":["x","y"]}]}`
	c, err := mcp.ParseConfig([]byte(good))
	if err != nil || len(c.Servers) != 2 || !c.Servers[0].Approval.All || len(c.Servers[1].Approval.Names) != 2 ||
		time.Duration(c.Servers[0].Timeout) != 5*time.Second {
		t.Errorf("ParseConfig(good): got %+v, %v", c, err)
	}
	bad := map[string]string{
		"unknown field":  `{"servers":[{"name":"a","command":"x","colour":1}]}`,
		"no transport":   `{"servers":[{"name":"a"}]}`,
		"both":           `{"servers":[{"name":"a","command":"x","url":"http://h/"}]}`,
		"double _":       `{"servers":[{"name":"a__b","command":"x"}]}`,
		"dot":            `{"servers":[{"name":"a.b","command":"x"}]}`,
		"twice":          `{"servers":[{"name":"a","command":"x"},{"name":"a","command":"y"}]}`,
		"bad url":        `{"servers":[{"name":"a","url":"ftp://h/"}]}`,
		"env on http":    `{"servers":[{"name":"a","url":"http://h/","env":{"A":"b"}}]}`,
		"bad approval":   `{"servers":[{"name":"a","command":"x","approval":"yes"}]}`,
		"negative":       `{"servers":[{"name":"a","command":"x","timeout":-1}]}`,
		"headers on cmd": `{"servers":[{"name":"a","command":"x","headers":{"A":"b"}}]}`,
	}
	for name, in := range bad {
		if _, err := mcp.ParseConfig([]byte(in)); errcode.Of(err) != errcode.Invalid {
			t.Errorf("%s: got %v, want invalid_request", name, err)
		}
	}
}

func TestToolName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		server, tool, want string
		ok                 bool
	}{
		{"files", "read_file", "files__read_file", true},
		{"files", "fs.read/v2", "files__fs_read_v2", true},
		{"files", "", "files__", false},
		{"s", strings.Repeat("x", 61), "s__" + strings.Repeat("x", 61), true},
		{"s", strings.Repeat("x", 62), "s__" + strings.Repeat("x", 62), false},
	} {
		got, ok := mcp.ToolName(tc.server, tc.tool)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ToolName(%q, %q): got %q %v, want %q %v", tc.server, tc.tool, got, ok, tc.want, tc.ok)
		}
		if ok && !thread.ValidToolName(got) {
			t.Errorf("ToolName(%q, %q) = %q is not a valid tool name", tc.server, tc.tool, got)
		}
	}
}
