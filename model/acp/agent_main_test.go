package acp_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The test binary is also the project's own test agent: with ACPTEST_MODE
// set (the agent's env in the config file) it speaks ACP's JSON-RPC on
// stdin and stdout, by hand, so that it can also misbehave.
func TestMain(m *testing.M) {
	if mode := os.Getenv("ACPTEST_MODE"); mode != "" {
		testAgent(mode)
		os.Exit(0)
	}
	code := m.Run()
	if code == 0 && leaked() != "" {
		fmt.Fprintf(os.Stderr, "goroutines of the ACP client left after every test:\n%s\n", leaked())
		code = 1
	}
	os.Exit(code)
}

// leaked returns the stacks of goroutines of this package's client or the
// SDK still running once every test's service and registry stopped (they
// get a few seconds: the SDK drains its notifications in the background).
func leaked() string {
	deadline := time.Now().Add(10 * time.Second)
	for {
		buf := make([]byte, 1<<20)
		var left []string
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if strings.Contains(g, "acp-go-sdk") || strings.Contains(g, "model/acp.(") {
				left = append(left, g)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return strings.Join(left, "\n\n")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type rpc struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
}

type agentIO struct {
	in  *bufio.Scanner
	out *bufio.Writer
	sid string
	mcp []string // the MCP servers session/new named
}

func (a *agentIO) send(v any) {
	b, _ := json.Marshal(v)
	a.out.Write(b)
	a.out.WriteByte('\n')
	a.out.Flush()
}

func (a *agentIO) reply(id json.RawMessage, result any) {
	a.send(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
}

func (a *agentIO) update(u map[string]any) {
	a.send(map[string]any{"jsonrpc": "2.0", "method": "session/update", "params": map[string]any{"sessionId": a.sid, "update": u}})
}

func (a *agentIO) text(kind, s string) {
	a.update(map[string]any{"sessionUpdate": kind, "content": map[string]any{"type": "text", "text": s}})
}

// next reads the next message; it exits when stdin ends.
func (a *agentIO) next() rpc {
	if !a.in.Scan() {
		os.Exit(0)
	}
	var m rpc
	_ = json.Unmarshal(a.in.Bytes(), &m)
	return m
}

func testAgent(mode string) {
	if f := os.Getenv("ACPTEST_PIDFILE"); f != "" {
		_ = os.WriteFile(f, []byte(fmt.Sprint(os.Getpid())), 0o600)
	}
	a := &agentIO{in: bufio.NewScanner(os.Stdin), out: bufio.NewWriter(os.Stdout), sid: "sess_test"}
	a.in.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for {
		m := a.next()
		switch m.Method {
		case "initialize":
			if mode == "initerr" {
				a.send(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": -32000, "message": "not logged in"}})
				continue
			}
			a.reply(m.ID, map[string]any{"protocolVersion": 1, "agentCapabilities": map[string]any{}, "authMethods": []any{}})
		case "session/new":
			var p struct {
				McpServers []struct {
					Name    string `json:"name"`
					Command string `json:"command"`
				} `json:"mcpServers"`
			}
			_ = json.Unmarshal(m.Params, &p)
			for _, s := range p.McpServers {
				a.mcp = append(a.mcp, s.Name+"="+s.Command)
			}
			a.reply(m.ID, map[string]any{"sessionId": a.sid})
		case "session/prompt":
			var p struct {
				Prompt []struct {
					Type string `json:"type"`
					Text string `json:"text"`
				} `json:"prompt"`
			}
			_ = json.Unmarshal(m.Params, &p)
			var texts []string
			for _, b := range p.Prompt {
				texts = append(texts, b.Text)
			}
			a.turn(mode, m.ID, strings.Join(texts, "\n"))
		}
	}
}

func (a *agentIO) turn(mode string, id json.RawMessage, prompt string) {
	end := func(reason string) { a.reply(id, map[string]any{"stopReason": reason}) }
	switch mode {
	case "all":
		a.text("agent_thought_chunk", "Thinking it over.")
		a.text("agent_message_chunk", "Hello")
		a.text("agent_message_chunk", " there.")
		a.update(map[string]any{"sessionUpdate": "plan", "entries": []any{
			map[string]any{"content": "Read", "priority": "high", "status": "completed"},
			map[string]any{"content": "Write", "priority": "low", "status": "pending"}}})
		a.update(map[string]any{"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Read file", "kind": "read",
			"status": "pending", "rawInput": map[string]any{"path": "/a.txt"}})
		a.update(map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed",
			"content": []any{map[string]any{"type": "content", "content": map[string]any{"type": "text", "text": "file body"}}}})
		a.update(map[string]any{"sessionUpdate": "tool_call", "toolCallId": "t2", "title": "Run tests", "status": "in_progress"})
		a.update(map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": "t2", "status": "failed", "rawOutput": map[string]any{"exit": 1}})
		a.update(map[string]any{"sessionUpdate": "tool_call", "toolCallId": "t3", "title": "Left open", "status": "pending"})
		a.update(map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="}})
		a.text("agent_message_chunk", "\nMCP<"+strings.Join(a.mcp, ",")+">\nPROMPT<"+prompt+">")
		end("end_turn")
	case "perm":
		a.text("agent_message_chunk", "May I?")
		a.update(map[string]any{"sessionUpdate": "tool_call", "toolCallId": "p1", "title": "Edit config", "status": "pending"})
		a.send(map[string]any{"jsonrpc": "2.0", "id": 900, "method": "session/request_permission", "params": map[string]any{
			"sessionId": a.sid, "toolCall": map[string]any{"toolCallId": "p1"},
			"options": []any{map[string]any{"optionId": "yes", "name": "Allow", "kind": "allow_once"},
				map[string]any{"optionId": "always", "name": "Allow always", "kind": "allow_always"},
				map[string]any{"optionId": "no", "name": "Deny", "kind": "reject_once"}}}})
		var resp struct {
			Outcome struct {
				Outcome  string `json:"outcome"`
				OptionID string `json:"optionId"`
			} `json:"outcome"`
		}
		for {
			m := a.next()
			if m.Method == "" && string(m.ID) == "900" {
				_ = json.Unmarshal(m.Result, &resp)
				break
			}
		}
		if o := resp.Outcome.OptionID; o == "yes" || o == "always" {
			a.update(map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": "p1", "status": "completed", "rawOutput": "edited"})
			a.text("agent_message_chunk", map[string]string{"yes": " Done: allowed.", "always": " Done: allowed always."}[o])
		} else {
			a.text("agent_message_chunk", " Skipped: "+resp.Outcome.Outcome+" "+resp.Outcome.OptionID+".")
		}
		end("end_turn")
	case "cancel":
		a.text("agent_message_chunk", "Working")
		for {
			if m := a.next(); m.Method == "session/cancel" {
				if f := os.Getenv("ACPTEST_MARK"); f != "" {
					_ = os.WriteFile(f, []byte("got session/cancel"), 0o600)
				}
				end("cancelled")
				return
			}
		}
	case "bench":
		// ACPTEST_N chunks, one every 500µs, each its send time in unix nanoseconds.
		n, _ := strconv.Atoi(os.Getenv("ACPTEST_N"))
		for i := 0; i < n; i++ {
			a.text("agent_message_chunk", strconv.FormatInt(time.Now().UnixNano(), 10)+" ")
			time.Sleep(500 * time.Microsecond)
		}
		end("end_turn")
	case "refusal":
		a.text("agent_message_chunk", "No.")
		end("refusal")
	case "crash":
		fmt.Fprintln(os.Stderr, "boom: the agent crashed")
		os.Exit(3)
	case "garbage":
		fmt.Println("this is not json")
		time.Sleep(time.Hour)
	case "huge":
		a.text("agent_message_chunk", strings.Repeat("x", 2<<20))
		time.Sleep(time.Hour)
	case "hang":
		time.Sleep(time.Hour)
	}
}
