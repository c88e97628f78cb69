package provider_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/model"
	"github.com/threadline/threadline/thread"
)

// testKey looks like an OpenAI key so both the literal and the pattern
// redaction are exercised.
const testKey = "sk-test-0123456789abcdefSECRET"

var (
	pngBytes = []byte("\x89PNG\r\n\x1a\nnot really a png")
	pngB64   = base64.StdEncoding.EncodeToString(pngBytes)
	pngURL   = "data:image/png;base64," + pngB64
	tokens   = []string{"Hel", "lo", ",", " world"}
)

// dialect is one provider's streaming wire protocol, as its real API
// speaks it.
type dialect struct {
	provider    string
	path        string // the request path the client must use
	baseSuffix  string // appended to the server URL for base_url
	contentType string
	start       func() string
	chunk       func(tok string) string
	finish      func(reason string) string // with usage: 12 prompt, 4 completion tokens
	errBody     func(msg string) string
	lengthStop  string // the provider's "ran out of tokens" reason; "" if langchaingo drops it
	empty       string // a complete response without any reply
	// promptOnlyUsage: langchaingo reports only the prompt tokens reliably.
	promptOnlyUsage bool
}

func js(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func sse(event string, data any) string {
	s := ""
	if event != "" {
		s = "event: " + event + "\n"
	}
	return s + "data: " + js(data) + "\n\n"
}

var openaiDialect = dialect{
	provider:    "openai",
	path:        "/v1/chat/completions",
	baseSuffix:  "/v1",
	contentType: "text/event-stream",
	start: func() string {
		return sse("", map[string]any{"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "test-model",
			"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"role": "assistant", "content": ""}, "finish_reason": nil}}})
	},
	chunk: func(tok string) string {
		return sse("", map[string]any{"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "test-model",
			"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": tok}, "finish_reason": nil}}})
	},
	finish: func(reason string) string {
		return sse("", map[string]any{"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "test-model",
			"choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": reason}}}) +
			sse("", map[string]any{"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "test-model",
				"choices": []any{}, "usage": map[string]any{"prompt_tokens": 12, "completion_tokens": 4, "total_tokens": 16}}) +
			"data: [DONE]\n\n"
	},
	errBody: func(msg string) string {
		return js(map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "param": nil, "code": "x"}})
	},
	lengthStop: "length",
	empty:      "data: [DONE]\n\n",
}

var anthropicDialect = dialect{
	provider:    "anthropic",
	path:        "/v1/messages",
	baseSuffix:  "/v1",
	contentType: "text/event-stream",
	start: func() string {
		return sse("message_start", map[string]any{"type": "message_start", "message": map[string]any{
			"id": "msg_1", "type": "message", "role": "assistant", "model": "test-model", "content": []any{},
			"stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{"input_tokens": 12, "output_tokens": 1}}}) +
			sse("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}}) +
			sse("ping", map[string]any{"type": "ping"})
	},
	chunk: func(tok string) string {
		return sse("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": tok}})
	},
	finish: func(reason string) string {
		if reason == "stop" {
			reason = "end_turn"
		}
		return sse("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0}) +
			sse("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": reason, "stop_sequence": nil},
				"usage": map[string]any{"output_tokens": 4}}) +
			sse("message_stop", map[string]any{"type": "message_stop"})
	},
	errBody: func(msg string) string {
		return js(map[string]any{"type": "error", "error": map[string]any{"type": "api_error", "message": msg}})
	},
	lengthStop: "max_tokens",
	empty:      "",
}

var ollamaDialect = dialect{
	provider:    "ollama",
	path:        "/api/chat",
	contentType: "application/x-ndjson",
	start:       func() string { return "" },
	chunk: func(tok string) string {
		return js(map[string]any{"model": "test-model", "created_at": "2026-01-01T00:00:00Z",
			"message": map[string]any{"role": "assistant", "content": tok}, "done": false}) + "\n"
	},
	finish: func(reason string) string {
		return js(map[string]any{"model": "test-model", "created_at": "2026-01-01T00:00:00Z",
			"message": map[string]any{"role": "assistant", "content": ""}, "done": true, "done_reason": reason,
			"total_duration": 1000, "prompt_eval_count": 12, "eval_count": 4}) + "\n"
	},
	errBody: func(msg string) string { return js(map[string]any{"error": msg}) },
	empty:   "",
}

// googleaiDialect is the Gemini REST API's streamGenerateContent: one JSON
// array whose elements arrive as the model produces them.
var googleaiDialect = dialect{
	provider:    "googleai",
	path:        "/v1beta/models/test-model:streamGenerateContent",
	contentType: "application/json",
	start: func() string {
		// Gemini repeats usageMetadata in every chunk; langchaingo v0.1.14
		// (generative-ai-go) keeps only the first chunk's.
		return "[" + js(map[string]any{"candidates": []any{map[string]any{"index": 0,
			"content": map[string]any{"role": "model", "parts": []any{map[string]any{"text": ""}}}}},
			"usageMetadata": map[string]any{"promptTokenCount": 12, "totalTokenCount": 12}})
	},
	chunk: func(tok string) string {
		return ",\r\n" + js(map[string]any{"candidates": []any{map[string]any{"index": 0,
			"content": map[string]any{"role": "model", "parts": []any{map[string]any{"text": tok}}}}}})
	},
	finish: func(reason string) string {
		if reason == "stop" {
			reason = "STOP"
		}
		return ",\r\n" + js(map[string]any{"candidates": []any{map[string]any{"index": 0, "finishReason": reason,
			"content": map[string]any{"role": "model", "parts": []any{map[string]any{"text": ""}}}}},
			"usageMetadata": map[string]any{"promptTokenCount": 12, "candidatesTokenCount": 4, "totalTokenCount": 16}}) + "]"
	},
	errBody: func(msg string) string {
		return js(map[string]any{"error": map[string]any{"code": 400, "message": msg, "status": "FAILED_PRECONDITION"}})
	},
	lengthStop:      "MAX_TOKENS",
	promptOnlyUsage: true,
	empty:           "[]",
}

var dialects = []dialect{openaiDialect, anthropicDialect, ollamaDialect, googleaiDialect}

// fake is a provider server. Its behaviour is fixed per test.
type fake struct {
	d       dialect
	mode    string // ok, status, slow, stall, cut, hang
	status  int
	message string // the error message of a status response
	reason  string // the finish reason of an ok response

	srv     *httptest.Server
	mu      sync.Mutex
	reqs    []captured
	ctxDone chan struct{} // closed when a hang handler sees its request context end
}

type captured struct {
	path   string
	header http.Header
	body   map[string]any
}

func newFake(t *testing.T, d dialect, mode string) *fake {
	t.Helper()
	f := &fake{d: d, mode: mode, reason: "stop", ctxDone: make(chan struct{})}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fake) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	f.mu.Lock()
	f.reqs = append(f.reqs, captured{path: r.URL.Path, header: r.Header.Clone(), body: body})
	f.mu.Unlock()
	if r.URL.Path != f.d.path {
		http.Error(w, `{"error":{"message":"wrong path `+r.URL.Path+`"}}`, http.StatusNotFound)
		return
	}
	flush := func() { _ = http.NewResponseController(w).Flush() }
	switch f.mode {
	case "status":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(f.status)
		_, _ = io.WriteString(w, f.d.errBody(f.message))
		return
	case "slow": // nothing at all until the client gives up
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
		return
	}
	w.Header().Set("Content-Type", f.d.contentType)
	w.WriteHeader(http.StatusOK)
	if f.mode != "empty" {
		_, _ = io.WriteString(w, f.d.start())
	}
	switch f.mode {
	case "ok":
		for _, tok := range tokens {
			_, _ = io.WriteString(w, f.d.chunk(tok))
			flush()
		}
		_, _ = io.WriteString(w, f.d.finish(f.reason))
		flush()
	case "empty": // a well-formed stream with no reply in it
		_, _ = io.WriteString(w, f.d.empty)
	case "cut": // two tokens, then the connection drops mid-stream
		for _, tok := range tokens[:2] {
			_, _ = io.WriteString(w, f.d.chunk(tok))
		}
		flush()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(err)
		}
		_ = conn.Close()
	case "stall", "hang": // one token, then silence until the client leaves
		_, _ = io.WriteString(w, f.d.chunk(tokens[0]))
		flush()
		select {
		case <-r.Context().Done():
			if f.mode == "hang" {
				close(f.ctxDone)
			}
		case <-time.After(10 * time.Second):
		}
	}
}

func (f *fake) requests() []captured {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reqs)
}

// registryFor is a registry with one model "m" of the fake's provider.
func (f *fake) registry(t *testing.T, timeout string, vision bool) *model.Registry {
	t.Helper()
	cfg := map[string]any{"models": []any{map[string]any{
		"name": "m", "provider": f.d.provider, "model": "test-model", "base_url": f.srv.URL + f.d.baseSuffix,
		"api_key_env": "TEST_KEY", "timeout": timeout, "vision": vision,
	}}}
	return newRegistry(t, map[string]string{"THREADLINE_MODELS_FILE": writeFile(t, js(cfg)), "TEST_KEY": testKey})
}

func resolve(t *testing.T, r *model.Registry, name string) thread.Model {
	t.Helper()
	m, _, err := r.Resolve(name)
	if err != nil {
		t.Fatalf("Resolve(%q): got %v, want nil", name, err)
	}
	return m
}

// visionReq is a conversation with a system prompt, an earlier turn and a
// last user message with an image and a text attachment.
func visionReq() thread.ModelRequest {
	temp := 0.2
	return thread.ModelRequest{Temperature: &temp, Call: 1, Messages: []thread.ModelMessage{
		{Role: checkpoint.RoleSystem, Parts: []thread.ModelPart{{Type: "text", Text: "be brief"}}},
		{Role: checkpoint.RoleUser, Parts: []thread.ModelPart{{Type: "text", Text: "an earlier question"}}},
		{Role: checkpoint.RoleAssistant, Parts: []thread.ModelPart{{Type: "text", Text: "an earlier answer"}}},
		{Role: checkpoint.RoleUser, Parts: []thread.ModelPart{{Type: "text", Text: "what is in this picture?"}, {Type: "image", Image: pngURL}},
			Attachments: []checkpoint.Attachment{{ID: "a1", Type: "document", Name: "notes.txt", ContentType: "text/plain",
				Content: []checkpoint.Part{{Type: "text", Text: "some notes"}}}}},
	}}
}

const wantLastText = "what is in this picture?\n\n[notes.txt]\nsome notes"

// get walks a decoded JSON value: get(v, "messages", 0, "role").
func get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			a, _ := v.([]any)
			if k < 0 {
				k += len(a)
			}
			if k < 0 || k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

func roles(body map[string]any) []string {
	var out []string
	msgs, _ := body["messages"].([]any)
	for i := range msgs {
		s, _ := get(msgs, i, "role").(string)
		out = append(out, s)
	}
	return out
}

// checkRequest asserts what the provider received for visionReq.
func checkRequest(t *testing.T, provider string, c captured) {
	t.Helper()
	// Gemini streams through its streamGenerateContent path (the fake
	// serves no other); the others say so in the body.
	if got := get(c.body, "stream"); got != true && provider != "googleai" {
		t.Errorf("stream: got %v, want true", got)
	}
	switch provider {
	case "openai":
		checkOpenAIRequest(t, c)
	case "anthropic":
		checkAnthropicRequest(t, c)
	case "googleai":
		checkGoogleRequest(t, c)
	case "ollama":
		checkOllamaRequest(t, c)
	default:
		t.Errorf("provider %q: no check of its request", provider)
	}
}

// checkChatRequest asserts what OpenAI-compatible servers and Ollama
// (whose chat requests have the same head) received for visionReq: the
// key as a bearer token (Ollama's through api_key_env), the roles with
// the system prompt first, and the model.
func checkChatRequest(t *testing.T, c captured) {
	t.Helper()
	b := c.body
	if got, want := c.header.Get("Authorization"), "Bearer "+testKey; got != want {
		t.Errorf("Authorization: got %q, want %q", got, want)
	}
	if got, want := roles(b), []string{"system", "user", "assistant", "user"}; !slices.Equal(got, want) {
		t.Errorf("roles: got %v, want %v", got, want)
	}
	if got := get(b, "messages", 0, "content"); got != "be brief" {
		t.Errorf("system content: got %v, want %q", got, "be brief")
	}
	if got := get(b, "model"); got != "test-model" {
		t.Errorf("model: got %v, want test-model", got)
	}
}

// checkOpenAIRequest asserts what an OpenAI-compatible server received
// for visionReq.
func checkOpenAIRequest(t *testing.T, c captured) {
	t.Helper()
	b := c.body
	checkChatRequest(t, c)
	if got := get(b, "messages", -1, "content", 0, "text"); got != wantLastText {
		t.Errorf("last user text: got %v, want %q", got, wantLastText)
	}
	if got, typ := get(b, "messages", -1, "content", 1, "image_url", "url"), get(b, "messages", -1, "content", 1, "type"); got != pngURL || typ != "image_url" {
		t.Errorf("image part: got type %v url %v, want image_url with the data: URL", typ, got)
	}
	if got := get(b, "temperature"); got != 0.2 {
		t.Errorf("temperature: got %v, want 0.2", got)
	}
}

// checkAnthropicRequest asserts what Anthropic received for visionReq.
func checkAnthropicRequest(t *testing.T, c captured) {
	t.Helper()
	b := c.body
	if got := c.header.Get("X-Api-Key"); got != testKey {
		t.Errorf("x-api-key: got %q, want the key", got)
	}
	if got := get(b, "system"); got != "be brief" {
		t.Errorf("system: got %v, want %q", got, "be brief")
	}
	if got, want := roles(b), []string{"user", "assistant", "user"}; !slices.Equal(got, want) {
		t.Errorf("roles: got %v, want %v", got, want)
	}
	if got := get(b, "messages", -1, "content", 0, "text"); got != wantLastText {
		t.Errorf("last user text: got %v, want %q", got, wantLastText)
	}
	img := get(b, "messages", -1, "content", 1)
	if get(img, "type") != "image" || get(img, "source", "type") != "base64" || get(img, "source", "media_type") != "image/png" || get(img, "source", "data") != pngB64 {
		t.Errorf("image block: got %v, want a base64 image/png block with the image's bytes", img)
	}
	if got := get(b, "max_tokens"); got != float64(4096) {
		t.Errorf("max_tokens: got %v, want 4096", got)
	}
	if got := get(b, "temperature"); got != 0.2 {
		t.Errorf("temperature: got %v, want 0.2", got)
	}
}

// checkGoogleRequest asserts what Google AI received for visionReq.
func checkGoogleRequest(t *testing.T, c captured) {
	t.Helper()
	b := c.body
	if got := c.header.Get("X-Goog-Api-Key"); got != testKey {
		t.Errorf("x-goog-api-key: got %q, want the key", got)
	}
	if got := get(b, "systemInstruction", "parts", 0, "text"); got != "be brief" {
		t.Errorf("systemInstruction: got %v, want %q", got, "be brief")
	}
	var rs []string
	contents, _ := b["contents"].([]any)
	for i := range contents {
		r, _ := get(contents, i, "role").(string)
		rs = append(rs, r)
	}
	if want := []string{"user", "model", "user"}; !slices.Equal(rs, want) {
		t.Errorf("roles: got %v, want %v", rs, want)
	}
	if got := get(b, "contents", -1, "parts", 0, "text"); got != wantLastText {
		t.Errorf("last user text: got %v, want %q", got, wantLastText)
	}
	if got, mime := get(b, "contents", -1, "parts", 1, "inlineData", "data"), get(b, "contents", -1, "parts", 1, "inlineData", "mimeType"); got != pngB64 || mime != "image/png" {
		t.Errorf("image part: got %v %v, want inline image/png data", mime, got)
	}
	if got, _ := get(b, "generationConfig", "temperature").(float64); got < 0.199 || got > 0.201 {
		t.Errorf("temperature: got %v, want 0.2", got)
	}
}

// checkOllamaRequest asserts what Ollama received for visionReq.
func checkOllamaRequest(t *testing.T, c captured) {
	t.Helper()
	b := c.body
	checkChatRequest(t, c)
	if got := get(b, "messages", -1, "content"); got != wantLastText {
		t.Errorf("last user content: got %v, want %q", got, wantLastText)
	}
	if got := get(b, "messages", -1, "images", 0); got != pngB64 {
		t.Errorf("images: got %v, want the image's base64", got)
	}
	if got := get(b, "options", "temperature"); got != 0.2 {
		t.Errorf("options.temperature: got %v, want 0.2", got)
	}
}

func TestProviderStream(t *testing.T) {
	t.Parallel()
	for _, d := range dialects {
		t.Run(d.provider, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, d, "ok")
			m := resolve(t, f.registry(t, "5s", true), "m")
			var got []string
			res, err := streamText(m, context.Background(), visionReq(), func(s string) error {
				got = append(got, s)
				return nil
			})
			if err != nil {
				t.Fatalf("Stream: got %v, want nil", err)
			}
			if !slices.Equal(got, tokens) {
				t.Fatalf("tokens: got %q, want %q one by one in order", got, tokens)
			}
			if res.PromptTokens != 12 || (res.CompletionTokens != 4 && !d.promptOnlyUsage) {
				t.Fatalf("usage: got %d prompt / %d completion, want 12 / 4", res.PromptTokens, res.CompletionTokens)
			}
			if res.StopReason != "stop" || res.Model != "test-model" {
				t.Fatalf("result: got %+v, want stop reason stop, model test-model", res)
			}
			reqs := f.requests()
			if len(reqs) != 1 {
				t.Fatalf("requests: got %d, want 1", len(reqs))
			}
			checkRequest(t, d.provider, reqs[0])
		})
	}
}

func TestProviderStopLength(t *testing.T) {
	t.Parallel()
	for _, d := range dialects {
		if d.lengthStop == "" {
			continue
		}
		t.Run(d.provider, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, d, "ok")
			f.reason = d.lengthStop
			_, res, err := collect(t, resolve(t, f.registry(t, "5s", true), "m"), context.Background(), userReq("hi", 1))
			if err != nil || res.StopReason != "length" {
				t.Fatalf("got %+v, %v, want stop reason length", res, err)
			}
		})
	}
}

// TestProviderEnvConventions reaches each fake through the conventional
// variables alone, without a models file.
func TestProviderEnvConventions(t *testing.T) {
	t.Parallel()
	for _, d := range dialects {
		t.Run(d.provider, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, d, "ok")
			vars := map[string]string{}
			switch d.provider {
			case "openai":
				vars["OPENAI_API_KEY"], vars["OPENAI_BASE_URL"] = testKey, f.srv.URL+"/v1"
			case "anthropic":
				vars["ANTHROPIC_API_KEY"], vars["ANTHROPIC_BASE_URL"] = testKey, f.srv.URL+"/v1"
			case "ollama":
				vars["OLLAMA_HOST"] = f.srv.URL
			case "googleai":
				t.Skip("the Google endpoint is only configurable in the models file")
			}
			m := resolve(t, newRegistry(t, vars), d.provider+":test-model")
			toks, _, err := collect(t, m, context.Background(), visionReq())
			if err != nil || !slices.Equal(toks, tokens) {
				t.Fatalf("Stream: got %q, %v, want %q, nil", toks, err, tokens)
			}
			b := f.requests()[0].body
			if d.provider == "ollama" {
				// Ollama models have no vision unless configured: the image
				// becomes a note.
				if get(b, "messages", -1, "images") != nil {
					t.Fatalf("images: got %v, want none for a model without vision", get(b, "messages", -1, "images"))
				}
				if got, _ := get(b, "messages", -1, "content").(string); !strings.Contains(got, "cannot see images") {
					t.Fatalf("last user content: got %q, want a note that the model cannot see images", got)
				}
			}
			if get(b, "model") != "test-model" {
				t.Fatalf("model: got %v, want test-model", get(b, "model"))
			}
		})
	}
}

func TestProviderFailures(t *testing.T) {
	t.Parallel()
	type tcase struct {
		name       string
		mode       string
		status     int
		timeout    string
		wantCode   errcode.Code
		wantInMsg  []string
		wantTokens int
	}
	secretMsg := "Incorrect API key provided: " + testKey + " (sent as Authorization: Bearer " + testKey + ")"
	cases := []tcase{
		{"401", "status", 401, "5s", errcode.ModelAuth, []string{"401", "Incorrect API key provided", "TEST_KEY"}, 0},
		{"403", "status", 403, "5s", errcode.ModelAuth, []string{"403"}, 0},
		{"429", "status", 429, "5s", errcode.ModelError, []string{"429", "Incorrect API key provided"}, 0},
		{"500", "status", 500, "5s", errcode.ModelError, []string{"500", "Incorrect API key provided"}, 0},
		{"slow first byte", "slow", 0, "200ms", errcode.ModelTimeout, []string{"model timed out after 200ms"}, 0},
		{"stall mid-stream", "stall", 0, "200ms", errcode.ModelTimeout, []string{"model timed out after 200ms"}, 1},
		{"stream cut", "cut", 0, "5s", errcode.ModelError, []string{"cut off"}, 2},
	}
	for _, d := range dialects {
		for _, tc := range cases {
			t.Run(d.provider+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				f := newFake(t, d, tc.mode)
				f.status, f.message = tc.status, secretMsg
				m := resolve(t, f.registry(t, tc.timeout, true), "m")
				start := time.Now()
				toks, _, err := collect(t, m, context.Background(), userReq("hi", 1))
				var me *errcode.Error
				if !errors.As(err, &me) || me.Code != tc.wantCode {
					t.Fatalf("error: got %v, want a *errcode.Error with code %s", err, tc.wantCode)
				}
				t.Logf("%s: %s", me.Code, me.Message)
				for _, s := range tc.wantInMsg {
					if !strings.Contains(me.Message, s) {
						t.Errorf("message: got %q, want it to contain %q", me.Message, s)
					}
				}
				if strings.Contains(me.Message, testKey) || strings.Contains(me.Message, "SECRET") {
					t.Errorf("message: got %q, want the key redacted", me.Message)
				}
				if tc.mode == "status" && !strings.Contains(me.Message, "[redacted]") {
					t.Errorf("message: got %q, want [redacted] where the key was", me.Message)
				}
				if len(toks) != tc.wantTokens {
					t.Errorf("tokens before the failure: got %d, want %d", len(toks), tc.wantTokens)
				}
				if tc.wantCode == errcode.ModelTimeout {
					if el := time.Since(start); el > 5*time.Second {
						t.Errorf("elapsed: got %v, want about the 200ms timeout", el)
					}
				}
			})
		}
	}
}

func TestProviderCancel(t *testing.T) {
	t.Parallel()
	for _, d := range dialects {
		t.Run(d.provider, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, d, "hang")
			m := resolve(t, f.registry(t, "30s", true), "m")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			n := 0
			_, err := streamText(m, ctx, userReq("hi", 1), func(string) error {
				n++
				cancel()
				return nil
			})
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("error: got %v, want context.Canceled", err)
			}
			var me *errcode.Error
			if errors.As(err, &me) {
				t.Fatalf("error: got model error %v, want the caller's cancellation", me)
			}
			if n != 1 {
				t.Fatalf("tokens: got %d, want 1", n)
			}
			select {
			case <-f.ctxDone:
			case <-time.After(5 * time.Second):
				t.Fatalf("server: request context still live 5s after the cancel, want it done")
			}
		})
	}
}

func TestProviderOnTokenError(t *testing.T) {
	t.Parallel()
	stop := errors.New("the run is over")
	for _, d := range dialects {
		t.Run(d.provider, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, d, "ok")
			m := resolve(t, f.registry(t, "5s", true), "m")
			n := 0
			_, err := streamText(m, context.Background(), userReq("hi", 1), func(string) error {
				n++
				return stop
			})
			if !errors.Is(err, stop) {
				t.Fatalf("error: got %v, want onToken's error as is", err)
			}
			if n != 1 {
				t.Fatalf("onToken calls: got %d, want 1 (none after it failed)", n)
			}
		})
	}
}

func TestProviderUnreachable(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there any more
	cfg := fmt.Sprintf(`{"models":[{"name":"m","provider":"openai","model":"x","base_url":%q,"api_key_env":"K"}]}`, url+"/v1")
	r := newRegistry(t, map[string]string{"THREADLINE_MODELS_FILE": writeFile(t, cfg), "K": testKey})
	_, _, err := collect(t, resolve(t, r, "m"), context.Background(), userReq("hi", 1))
	var me *errcode.Error
	if !errors.As(err, &me) || me.Code != errcode.ModelError || strings.Contains(me.Message, testKey) {
		t.Fatalf("error: got %v, want model_error without the key", err)
	}
}

// TestProviderEmptyStream: a stream that ends without a reply is an empty
// answer or a model_error, never a panic.
func TestProviderEmptyStream(t *testing.T) {
	t.Parallel()
	for _, d := range dialects {
		t.Run(d.provider, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, d, "empty")
			toks, res, err := collect(t, resolve(t, f.registry(t, "5s", true), "m"), context.Background(), userReq("hi", 1))
			var me *errcode.Error
			if len(toks) != 0 || (err != nil && (!errors.As(err, &me) || me.Code != errcode.ModelError)) {
				t.Fatalf("got %q, %+v, %v, want no tokens and either success or model_error", toks, res, err)
			}
			t.Logf("result %+v, error %v", res, err)
		})
	}
}
