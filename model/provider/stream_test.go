package provider_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/model/tool"
	"github.com/threadline/threadline/thread"
)

// scripted is a provider server that answers every request on path with
// the pieces of one response, flushed one by one, and keeps the requests.
type scripted struct {
	srv *httptest.Server
	mu  sync.Mutex
	// bodies by path
	bodies map[string][]map[string]any
}

func newScripted(t *testing.T, path, contentType string, pieces []string) *scripted {
	t.Helper()
	s := &scripted{bodies: map[string][]map[string]any{}}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(raw, &body)
		s.mu.Lock()
		s.bodies[r.URL.Path] = append(s.bodies[r.URL.Path], body)
		s.mu.Unlock()
		if r.URL.Path != path {
			http.Error(w, `{"error":{"message":"wrong path `+r.URL.Path+`"}}`, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", contentType)
		for _, p := range pieces {
			_, _ = io.WriteString(w, p)
			_ = http.NewResponseController(w).Flush()
		}
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *scripted) body(t *testing.T, path string) map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.bodies[path]
	if len(b) != 1 {
		t.Fatalf("requests to %s: got %d, want 1 (all: %v)", path, len(b), s.bodies)
	}
	return b[0]
}

// stepper resolves model "m" of provider at the server.
func (s *scripted) stepper(t *testing.T, provider, suffix string) thread.Model {
	t.Helper()
	cfg := map[string]any{"models": []any{map[string]any{
		"name": "m", "provider": provider, "model": "test-model", "base_url": s.srv.URL + suffix, "api_key_env": "TEST_KEY", "timeout": "5s",
	}}}
	r := newRegistry(t, map[string]string{"THREADLINE_MODELS_FILE": writeFile(t, js(cfg)), "TEST_KEY": testKey})
	return resolve(t, r, "m")
}

// agentReq is a turn in progress: the user asked, the model answered with
// text and two parallel calls (one failed), and now it is called again.
func agentReq() thread.ModelRequest {
	return thread.ModelRequest{
		Tools: []thread.ToolSpec{tool.Calculator{}.Spec(), tool.NewClock(nil).Spec()},
		Messages: []thread.ModelMessage{
			{Role: checkpoint.RoleSystem, Parts: []thread.ModelPart{{Type: "text", Text: "be brief"}}},
			{Role: checkpoint.RoleUser, Parts: []thread.ModelPart{{Type: "text", Text: "what is 12*7, and the time?"}}},
			{Role: checkpoint.RoleAssistant, Parts: []thread.ModelPart{
				{Type: "reasoning", Text: "two tools"},
				{Type: "text", Text: "Let me check."},
				{Type: "tool-call", Call: &thread.ToolCall{ID: "c1", Name: "calculator", ArgsText: `{"expression":"12*7"}`, Result: json.RawMessage(`84`)}},
				{Type: "tool-call", Call: &thread.ToolCall{ID: "c2", Name: "clock", ArgsText: `{"timezone":"Mars"}`, Result: json.RawMessage(`"unknown time zone"`), IsError: true}},
			}},
		},
	}
}

// collect runs a step and returns its deltas, merged: text, reasoning and
// each call's argument pieces.
type collected struct {
	text, reasoning strings.Builder
	pieces          map[string][]string // by call id
	names           map[string]string
	order           []string
	kinds           []thread.DeltaKind
}

func collectStep(t *testing.T, m thread.Model, req thread.ModelRequest) (*collected, thread.ModelResult) {
	t.Helper()
	c := &collected{pieces: map[string][]string{}, names: map[string]string{}}
	res, err := m.Stream(context.Background(), req, func(d thread.Delta) error {
		c.kinds = append(c.kinds, d.Kind)
		switch d.Kind {
		case thread.DeltaText:
			c.text.WriteString(d.Text)
		case thread.DeltaReasoning:
			c.reasoning.WriteString(d.Text)
		case thread.DeltaToolCallArgs:
			if _, ok := c.pieces[d.ToolCallID]; !ok {
				c.order = append(c.order, d.ToolCallID)
			}
			c.pieces[d.ToolCallID] = append(c.pieces[d.ToolCallID], d.ArgsText)
			if n, ok := c.names[d.ToolCallID]; ok && n != d.ToolName {
				t.Errorf("call %s: name %q then %q, want the same on every piece", d.ToolCallID, n, d.ToolName)
			}
			c.names[d.ToolCallID] = d.ToolName
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Stream: got %v, want nil", err)
	}
	return c, res
}

func oaChunk(delta map[string]any, finish any) string {
	return sse("", map[string]any{"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "test-model",
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
}

func oaCall(index int, id, name, args string) map[string]any {
	tc := map[string]any{"index": index, "function": map[string]any{"arguments": args}}
	if id != "" {
		tc["id"], tc["type"] = id, "function"
		tc["function"].(map[string]any)["name"] = name
	}
	return map[string]any{"tool_calls": []any{tc}}
}

// openaiToolStream: reasoning, text, then two parallel calls whose
// arguments come in pieces, interleaved by index the way some servers send
// them.
var openaiToolStream = []string{
	oaChunk(map[string]any{"role": "assistant", "content": nil, "reasoning_content": "Need "}, nil),
	oaChunk(map[string]any{"reasoning_content": "both."}, nil),
	oaChunk(map[string]any{"content": "On it."}, nil),
	oaChunk(oaCall(0, "call_a", "calculator", ""), nil),
	oaChunk(oaCall(0, "", "", `{"expr`), nil),
	oaChunk(oaCall(1, "call_b", "clock", `{"time`), nil),
	oaChunk(oaCall(0, "", "", `ession":"12*7"}`), nil),
	oaChunk(oaCall(1, "", "", `zone":"UTC"}`), nil),
	oaChunk(map[string]any{}, "tool_calls"),
	sse("", map[string]any{"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "test-model", "choices": []any{},
		"usage": map[string]any{"prompt_tokens": 30, "completion_tokens": 9, "total_tokens": 39}}),
	"data: [DONE]\n\n",
}

func checkCalls(t *testing.T, c *collected, res thread.ModelResult, want []thread.ToolCall) {
	t.Helper()
	if len(res.ToolCalls) != len(want) || len(c.order) != len(want) {
		t.Fatalf("tool calls: got %+v (streamed %v), want %+v", res.ToolCalls, c.pieces, want)
	}
	for i, w := range want {
		got := res.ToolCalls[i]
		if w.ID == "" { // the provider sends none: any id, the same in both
			w.ID = got.ID
		}
		if got.ID != w.ID || got.Name != w.Name || got.ArgsText != w.ArgsText {
			t.Errorf("call %d: got %+v, want %+v", i, got, w)
		}
		if joined := strings.Join(c.pieces[got.ID], ""); joined != w.ArgsText || c.names[got.ID] != w.Name || c.order[i] != got.ID {
			t.Errorf("call %d streamed: got %q (%s) pieces %q, want %q (%s)", i, joined, c.names[got.ID], c.pieces[got.ID], w.ArgsText, w.Name)
		}
	}
	if res.StopReason != thread.StopToolCalls {
		t.Errorf("stop reason: got %q, want %q", res.StopReason, thread.StopToolCalls)
	}
}

func TestOpenAIToolCallStream(t *testing.T) {
	t.Parallel()
	s := newScripted(t, "/v1/chat/completions", "text/event-stream", openaiToolStream)
	c, res := collectStep(t, s.stepper(t, "openai", "/v1"), agentReq())
	if c.text.String() != "On it." || c.reasoning.String() != "Need both." {
		t.Errorf("text %q reasoning %q: want %q and %q", c.text.String(), c.reasoning.String(), "On it.", "Need both.")
	}
	checkCalls(t, c, res, []thread.ToolCall{
		{ID: "call_a", Name: "calculator", ArgsText: `{"expression":"12*7"}`},
		{ID: "call_b", Name: "clock", ArgsText: `{"timezone":"UTC"}`},
	})
	if len(c.pieces["call_a"]) != 3 {
		t.Errorf("call_a pieces: got %q, want the opening piece and two argument pieces", c.pieces["call_a"])
	}
	if res.PromptTokens != 30 || res.CompletionTokens != 9 {
		t.Errorf("usage: got %d/%d, want 30/9", res.PromptTokens, res.CompletionTokens)
	}

	// The request: the tools, and the earlier step in OpenAI's format (the
	// assistant's text and calls, then one tool message per result).
	body := s.body(t, "/v1/chat/completions")
	tools, _ := body["tools"].([]any)
	if len(tools) != 2 || get(body, "tools", 0, "function", "name") != "calculator" ||
		get(body, "tools", 0, "function", "parameters", "required", 0) != "expression" {
		t.Errorf("tools: got %s, want calculator and clock with their schemas", js(body["tools"]))
	}
	if got := strings.Join(roles(body), ","); got != "system,user,assistant,tool,tool" {
		t.Errorf("roles: got %s, want system,user,assistant,tool,tool", got)
	}
	msgs := body["messages"].([]any)
	asst := msgs[2].(map[string]any)
	if get(asst, "tool_calls", 0, "id") != "c1" || get(asst, "tool_calls", 1, "function", "arguments") != `{"timezone":"Mars"}` ||
		!strings.Contains(js(asst), "Let me check.") || strings.Contains(js(asst), "two tools") {
		t.Errorf("assistant step: got %s, want its text and both calls, no reasoning", js(asst))
	}
	if get(msgs[3], "tool_call_id") != "c1" || get(msgs[3], "content") != "84" ||
		get(msgs[4], "tool_call_id") != "c2" || get(msgs[4], "content") != "error: unknown time zone" {
		t.Errorf("tool results: got %s and %s, want c1 84 and c2 error: unknown time zone", js(msgs[3]), js(msgs[4]))
	}
}

// TestOpenAIToolCallsNeverText: on a reply that calls tools, the text
// deltas hold only the text; langchaingo's JSON of the tool-call deltas
// never reaches them.
func TestOpenAIToolCallsNeverText(t *testing.T) {
	t.Parallel()
	s := newScripted(t, "/v1/chat/completions", "text/event-stream", openaiToolStream)
	var text strings.Builder
	res, err := s.stepper(t, "openai", "/v1").Stream(context.Background(), userReq("hi", 1), textOf(func(tok string) error {
		text.WriteString(tok)
		return nil
	}))
	if err != nil || text.String() != "On it." || res.StopReason != thread.StopToolCalls || len(res.ToolCalls) == 0 {
		t.Errorf("Stream: got %q, %+v, %v; want only %q and the calls", text.String(), res, err, "On it.")
	}
}

func TestOpenAISequentialCallsWithoutIndex(t *testing.T) {
	t.Parallel()
	// Some compatible servers send no index and no id on argument pieces.
	call := func(id, name, args string) map[string]any {
		tc := map[string]any{"function": map[string]any{"arguments": args}}
		if id != "" {
			tc["id"], tc["type"] = id, "function"
			tc["function"].(map[string]any)["name"] = name
		}
		return map[string]any{"tool_calls": []any{tc}}
	}
	s := newScripted(t, "/v1/chat/completions", "text/event-stream", []string{
		oaChunk(call("a", "calculator", `{"expression":`), nil),
		oaChunk(call("", "", `"1+1"}`), nil),
		oaChunk(call("b", "clock", ``), nil),
		oaChunk(map[string]any{}, "stop"),
		"data: [DONE]\n\n",
	})
	c, res := collectStep(t, s.stepper(t, "openai", "/v1"), thread.ModelRequest{Messages: []thread.ModelMessage{
		{Role: checkpoint.RoleUser, Parts: []thread.ModelPart{{Type: "text", Text: "hi"}}}}, Tools: []thread.ToolSpec{tool.Calculator{}.Spec()}})
	checkCalls(t, c, res, []thread.ToolCall{
		{ID: "a", Name: "calculator", ArgsText: `{"expression":"1+1"}`},
		{ID: "b", Name: "clock", ArgsText: `{}`}, // no arguments: "{}"
	})
}

func TestAnthropicToolCallStream(t *testing.T) {
	t.Parallel()
	ev := func(typ string, v map[string]any) string { v["type"] = typ; return sse(typ, v) }
	s := newScripted(t, "/v1/messages", "text/event-stream", []string{
		ev("message_start", map[string]any{"message": map[string]any{"id": "m", "type": "message", "role": "assistant", "model": "test-model",
			"content": []any{}, "usage": map[string]any{"input_tokens": 20, "output_tokens": 1}}}),
		ev("content_block_start", map[string]any{"index": 0, "content_block": map[string]any{"type": "thinking", "thinking": ""}}),
		ev("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "thinking_delta", "thinking": "Need calc."}}),
		ev("content_block_stop", map[string]any{"index": 0}),
		ev("content_block_start", map[string]any{"index": 1, "content_block": map[string]any{"type": "text", "text": ""}}),
		ev("content_block_delta", map[string]any{"index": 1, "delta": map[string]any{"type": "text_delta", "text": "Computing."}}),
		ev("content_block_stop", map[string]any{"index": 1}),
		ev("content_block_start", map[string]any{"index": 2, "content_block": map[string]any{"type": "tool_use", "id": "toolu_1", "name": "calculator", "input": map[string]any{}}}),
		ev("content_block_delta", map[string]any{"index": 2, "delta": map[string]any{"type": "input_json_delta", "partial_json": ""}}),
		ev("content_block_delta", map[string]any{"index": 2, "delta": map[string]any{"type": "input_json_delta", "partial_json": `{"expression": "1`}}),
		ev("content_block_delta", map[string]any{"index": 2, "delta": map[string]any{"type": "input_json_delta", "partial_json": `2*7"}`}}),
		ev("content_block_stop", map[string]any{"index": 2}),
		ev("content_block_start", map[string]any{"index": 3, "content_block": map[string]any{"type": "tool_use", "id": "toolu_2", "name": "clock", "input": map[string]any{}}}),
		ev("content_block_stop", map[string]any{"index": 3}),
		ev("message_delta", map[string]any{"delta": map[string]any{"stop_reason": "tool_use"}, "usage": map[string]any{"output_tokens": 7}}),
		ev("message_stop", map[string]any{}),
	})
	c, res := collectStep(t, s.stepper(t, "anthropic", "/v1"), agentReq())
	if c.text.String() != "Computing." || c.reasoning.String() != "Need calc." {
		t.Errorf("text %q reasoning %q: want %q and %q", c.text.String(), c.reasoning.String(), "Computing.", "Need calc.")
	}
	checkCalls(t, c, res, []thread.ToolCall{
		{ID: "toolu_1", Name: "calculator", ArgsText: `{"expression": "12*7"}`},
		{ID: "toolu_2", Name: "clock", ArgsText: `{}`},
	})
	body := s.body(t, "/v1/messages")
	if get(body, "tools", 0, "name") != "calculator" || get(body, "tools", 0, "input_schema", "type") != "object" {
		t.Errorf("tools: got %s, want calculator with its input_schema", js(body["tools"]))
	}
	// The earlier step: text and each call as assistant messages, the
	// results as user tool_result blocks (the API joins same-role turns).
	msgs := js(body["messages"])
	for _, want := range []string{`{"id":"c1","input":{"expression":"12*7"},"name":"calculator","type":"tool_use"}`,
		`{"content":"84","tool_use_id":"c1","type":"tool_result"}`, `{"content":"error: unknown time zone","tool_use_id":"c2","type":"tool_result"}`,
		`{"content":[{"text":"Let me check.","type":"text"}],"role":"assistant"}`} {
		if !strings.Contains(msgs, want) {
			t.Errorf("messages: got %s, want %s in it", msgs, want)
		}
	}
}

func TestGoogleToolCalls(t *testing.T) {
	t.Parallel()
	chunk := func(parts []any, finish string) string {
		cand := map[string]any{"index": 0, "content": map[string]any{"role": "model", "parts": parts}}
		if finish != "" {
			cand["finishReason"] = finish
		}
		return js(map[string]any{"candidates": []any{cand}, "usageMetadata": map[string]any{"promptTokenCount": 12, "totalTokenCount": 12}})
	}
	s := newScripted(t, "/v1beta/models/test-model:streamGenerateContent", "application/json", []string{
		"[" + chunk([]any{map[string]any{"text": "Sure."}}, ""),
		",\r\n" + chunk([]any{map[string]any{"functionCall": map[string]any{"name": "calculator", "args": map[string]any{"expression": "12*7"}}},
			map[string]any{"functionCall": map[string]any{"name": "clock", "args": map[string]any{}}}}, "STOP") + "]",
	})
	req := agentReq()
	var raw []string
	req.OnRaw = func(line []byte) { raw = append(raw, string(line)) }
	c, res := collectStep(t, s.stepper(t, "googleai", ""), req)
	if c.text.String() != "Sure." {
		t.Errorf("text: got %q, want %q", c.text.String(), "Sure.")
	}
	if len(raw) != 2 || !strings.HasPrefix(raw[0], `[{"candidates"`) || !strings.Contains(raw[1], `"functionCall"`) {
		t.Errorf("raw lines: got %q, want the two lines of the response", raw)
	}
	// Google sends no ids and no argument pieces: each call whole, with an
	// id of ours.
	checkCalls(t, c, res, []thread.ToolCall{
		{Name: "calculator", ArgsText: `{"expression":"12*7"}`},
		{Name: "clock", ArgsText: `{}`},
	})
	if res.ToolCalls[0].ID == res.ToolCalls[1].ID || !strings.HasPrefix(res.ToolCalls[0].ID, "call_") {
		t.Errorf("ids: got %q and %q, want two distinct call_ ids", res.ToolCalls[0].ID, res.ToolCalls[1].ID)
	}
	body := js(s.body(t, "/v1beta/models/test-model:streamGenerateContent"))
	for _, want := range []string{`"name":"calculator","parameters":{"properties":{"expression"`, `{"functionCall":{"args":{"expression":"12*7"},"name":"calculator"}}`,
		`"functionResponse":{"name":"calculator","response":{"response":"84"}}`, `"functionResponse":{"name":"clock","response":{"response":"error: unknown time zone"}}`} {
		if !strings.Contains(body, want) {
			t.Errorf("request: got %s, want %s in it", body, want)
		}
	}
}

// TestOllamaTools: Ollama's native client knows no tools, so a request
// with tools goes to its OpenAI-compatible /v1 endpoint; one without
// stays on /api/chat.
func TestOllamaTools(t *testing.T) {
	t.Parallel()
	s := newScripted(t, "/v1/chat/completions", "text/event-stream", openaiToolStream)
	m := s.stepper(t, "ollama", "")
	c, res := collectStep(t, m, agentReq())
	checkCalls(t, c, res, []thread.ToolCall{
		{ID: "call_a", Name: "calculator", ArgsText: `{"expression":"12*7"}`},
		{ID: "call_b", Name: "clock", ArgsText: `{"timezone":"UTC"}`},
	})
	if body := s.body(t, "/v1/chat/completions"); get(body, "model") != "test-model" || len(body["tools"].([]any)) != 2 {
		t.Errorf("request: got %s, want test-model with 2 tools", js(body))
	}
	_, err := m.Stream(context.Background(), thread.ModelRequest{Messages: []thread.ModelMessage{
		{Role: checkpoint.RoleUser, Parts: []thread.ModelPart{{Type: "text", Text: "hi"}}}}}, func(thread.Delta) error { return nil })
	if s.bodies["/api/chat"] == nil {
		t.Errorf("a request without tools: got requests to %v (err %v), want one to /api/chat", s.bodies, err)
	}
}

func TestStepOnDeltaError(t *testing.T) {
	t.Parallel()
	s := newScripted(t, "/v1/chat/completions", "text/event-stream", openaiToolStream)
	stop := errors.New("stop here")
	n := 0
	_, err := s.stepper(t, "openai", "/v1").Stream(context.Background(), agentReq(), func(d thread.Delta) error {
		n++
		if d.Kind == thread.DeltaToolCallArgs {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 4 {
		t.Errorf("Stream: got %v after %d deltas, want the callback's error after 4", err, n)
	}
}

// TestStepRaw: OnRaw sees every line of the provider's response as it
// came, each before the deltas it produced; reasoning in OpenRouter's and
// Ollama's "reasoning" field streams too.
func TestStepRaw(t *testing.T) {
	t.Parallel()
	script := []string{
		oaChunk(map[string]any{"role": "assistant", "reasoning": "Hmm."}, nil),
		oaChunk(map[string]any{"content": "Hi"}, nil),
		oaChunk(map[string]any{}, "stop"),
		"data: [DONE]\n\n",
	}
	s := newScripted(t, "/v1/chat/completions", "text/event-stream", script)
	var log []string
	req := thread.ModelRequest{Messages: []thread.ModelMessage{{Role: checkpoint.RoleUser, Parts: []thread.ModelPart{{Type: "text", Text: "hi"}}}},
		OnRaw: func(line []byte) { log = append(log, "raw "+string(line)) }}
	_, err := s.stepper(t, "openai", "/v1").Stream(context.Background(), req, func(d thread.Delta) error {
		log = append(log, fmt.Sprintf("delta %d %s", d.Kind, d.Text))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i, piece := range script {
		want = append(want, "raw "+strings.TrimSuffix(piece, "\n\n"))
		switch i {
		case 0:
			want = append(want, fmt.Sprintf("delta %d Hmm.", thread.DeltaReasoning))
		case 1:
			want = append(want, fmt.Sprintf("delta %d Hi", thread.DeltaText))
		}
	}
	if strings.Join(log, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(log, "\n"), strings.Join(want, "\n"))
	}
}
