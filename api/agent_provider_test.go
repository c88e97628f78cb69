package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/threadline/threadline/api/wire"
)

// fakeAgentOpenAI is a local OpenAI-compatible server that acts as an
// agent: asked without tool results it reasons, says a sentence and calls
// calculator (its arguments streamed in pieces) and clock in parallel;
// asked with them it answers with the calculator's result. Each step
// reports its usage in a last chunk (21 in, 8 out; then 35 in, 4 out).
type fakeAgentOpenAI struct {
	mu   sync.Mutex
	reqs []agentReq
	srv  *httptest.Server
}

type agentReq struct {
	Tools []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
	Messages []struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		ToolCallID string          `json:"tool_call_id"`
		ToolCalls  []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
}

func (f *fakeAgentOpenAI) serve(w http.ResponseWriter, r *http.Request) {
	var req agentReq
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	chunk := func(delta map[string]any, finish any) {
		b, _ := json.Marshal(map[string]any{"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "fake-model",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
		fmt.Fprintf(w, "data: %s\n\n", b)
		w.(http.Flusher).Flush()
	}
	call := func(index int, id, name, args string) map[string]any {
		c := map[string]any{"index": index, "function": map[string]any{"arguments": args}}
		if id != "" {
			c["id"], c["type"], c["function"] = id, "function", map[string]any{"name": name, "arguments": args}
		}
		return map[string]any{"tool_calls": []any{c}}
	}
	usage := func(in, out int) {
		b, _ := json.Marshal(map[string]any{"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "fake-model",
			"choices": []any{}, "usage": map[string]any{"prompt_tokens": in, "completion_tokens": out, "total_tokens": in + out}})
		fmt.Fprintf(w, "data: %s\n\n", b)
	}
	last := req.Messages[len(req.Messages)-1]
	if last.Role == "tool" {
		chunk(map[string]any{"role": "assistant", "content": "It is "}, nil)
		chunk(map[string]any{"content": "84."}, nil)
		chunk(map[string]any{}, "stop")
		usage(35, 4)
	} else {
		chunk(map[string]any{"role": "assistant", "reasoning_content": "Arithmetic: "}, nil)
		chunk(map[string]any{"reasoning_content": "use the tool."}, nil)
		chunk(map[string]any{"content": "Let me compute."}, nil)
		chunk(call(0, "call_a", "calculator", ""), nil)
		chunk(call(0, "", "", `{"expression":`), nil)
		chunk(call(1, "call_b", "clock", "{}"), nil)
		chunk(call(0, "", "", `"12*7"}`), nil)
		chunk(map[string]any{}, "tool_calls")
		usage(21, 8)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// TestAgentAgainstOpenAI: an agent turn through the real langchaingo
// OpenAI client and a local server streaming reasoning and two parallel
// tool calls: the stream carries them as reasoning, tool_call and
// tool_result events, the tools run, the second request carries the calls
// and their results in OpenAI's format, and the turn is one message.
func TestAgentAgainstOpenAI(t *testing.T) {
	t.Parallel()
	fake := &fakeAgentOpenAI{}
	fake.srv = httptest.NewServer(http.HandlerFunc(fake.serve))
	t.Cleanup(fake.srv.Close)
	file := filepath.Join(t.TempDir(), "models.json")
	models := fmt.Sprintf(`{"models":[{"name":"fake","provider":"openai","model":"fake-model","base_url":%q,"api_key_env":"FAKE_KEY"}]}`,
		fake.srv.URL+"/v1")
	if err := os.WriteFile(file, []byte(models), 0o600); err != nil {
		t.Fatal(err)
	}
	opts := withTools(t)
	e := setup(t, func(o *options) {
		opts(o)
		o.vars = map[string]string{"THREADLINE_MODELS_FILE": file, "FAKE_KEY": "fake-key"}
	})
	body := newMessage("what is 12*7?", nil)
	body["run_config"] = map[string]any{"model": "fake", "tools": []any{"calculator", "clock"}}
	tid := newID()
	_, evs := e.stream(tid, body)
	last := checkRun(t, evs)
	var reasoning, args strings.Builder
	results := map[string]string{}
	for i, ae := range agentEvents(t, evs) {
		switch ae.Type {
		case "reasoning":
			reasoning.WriteString(evs[i].Text)
		case "tool_call":
			if ae.ToolCallID == "call_a" {
				args.WriteString(*ae.ArgsText)
			}
		case "tool_result":
			results[ae.ToolCallID] = string(ae.Result)
		}
	}
	if args.String() != `{"expression":"12*7"}` || results["call_a"] != "84" || !strings.Contains(results["call_b"], `"time"`) {
		t.Fatalf("tool events: calculator args %q, results %v; want 12*7 answered 84 and the clock's time", args.String(), results)
	}
	if reasoning.String() != "Arithmetic: use the tool." {
		t.Fatalf("reasoning events: got %q", reasoning.String())
	}
	if tokensText(evs) != "Let me compute.It is 84." || last.RunStatus != "succeeded" {
		t.Fatalf("text %q, status %s; want the two steps' text, succeeded", tokensText(evs), last.RunStatus)
	}
	parts := lastParts(t, last.Raw)
	var types []string
	for _, p := range parts {
		var x struct{ Type string }
		_ = json.Unmarshal(p, &x)
		types = append(types, x.Type)
	}
	if got := strings.Join(types, ","); got != "reasoning,text,tool-call,tool-call,text" {
		t.Fatalf("reply parts: got %s (%s), want reasoning,text,tool-call,tool-call,text", got, parts)
	}
	if !strings.Contains(string(parts[0]), "Arithmetic: use the tool.") {
		t.Fatalf("reasoning part: got %s", parts[0])
	}
	fake.checkSecond(t)
	checkStepUsage(t, e, "/api/v1/threads/"+tid+"/runs/"+evs[0].RunID+"/trace")
}

// checkStepUsage checks the trace of the agent run: each step's chat span
// carries the usage its provider reported and its finish reason, the run
// span their sum.
func checkStepUsage(t *testing.T, e *env, path string) {
	t.Helper()
	resp, b := e.do("GET", path, nil)
	wantStatus(t, resp, b, http.StatusOK, "")
	var tr wire.Trace
	if err := json.Unmarshal(b, &tr); err != nil {
		t.Fatalf("trace %s: %v", b, err)
	}
	var got []string
	for _, s := range tr.Spans {
		if s.Operation == "execute_tool" {
			continue
		}
		line := s.Name + " " + s.FinishReason
		if s.InputTokens != nil && s.OutputTokens != nil {
			line += fmt.Sprintf(" %d/%d", *s.InputTokens, *s.OutputTokens)
		}
		got = append(got, line)
	}
	want := []string{"invoke_agent threadline  56/12", "chat fake tool_call 21/8", "chat fake stop 35/4"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Fatalf("trace spans: got %q, want %q", got, want)
	}
}

// checkSecond checks the requests: the first told of two tools, the second
// carried the calls and their results in OpenAI's format.
func (fake *fakeAgentOpenAI) checkSecond(t *testing.T) {
	t.Helper()
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if len(fake.reqs) != 2 || len(fake.reqs[0].Tools) != 2 {
		t.Fatalf("requests: got %d, the first with %d tools; want 2 requests, 2 tools", len(fake.reqs), len(fake.reqs[0].Tools))
	}
	second := fake.reqs[1].Messages
	var roles []string
	for _, m := range second {
		roles = append(roles, m.Role)
	}
	if got := strings.Join(roles, ","); got != "user,assistant,tool,tool" {
		t.Fatalf("second request roles: got %s, want user,assistant,tool,tool", got)
	}
	ai, tool1 := second[1], second[2]
	if len(ai.ToolCalls) != 2 || ai.ToolCalls[0].ID != "call_a" || ai.ToolCalls[0].Function.Arguments != `{"expression":"12*7"}` ||
		tool1.ToolCallID != "call_a" || !strings.Contains(string(tool1.Content), "84") {
		t.Fatalf("second request: assistant %+v, tool %+v; want the calls and calculator's 84", ai, tool1)
	}
}
