package provider

import (
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/thread"
	"github.com/tmc/langchaingo/llms"
)

func TestRedact(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, key, want string
	}{
		{"key literal", "bad key abc123XYZ here", "abc123XYZ", "bad key [redacted] here"},
		{"short key is not replaced", "a b c", "b", "a b c"},
		{"openai-style key", "Incorrect API key provided: sk-proj-AbC_12-34xyz.", "", "Incorrect API key provided: sk-[redacted]."},
		{"bearer", `header "Authorization: Bearer eyJhbGciOi.x.y" sent`, "", `header "Authorization: Bearer [redacted]" sent`},
		{"bearer in parentheses", "(Bearer tok123)", "", "(Bearer [redacted])"},
		{"bearer of a redacted key", "(Bearer sk-abcdef)", "sk-abcdef", "(Bearer [redacted])"},
		{"url key", "GET https://x/v1beta/models?alt=sse&key=AIzaSyXYZ failed", "", "GET https://x/v1beta/models?alt=sse&key=[redacted] failed"},
		{"api key header", "x-api-key: abcdef; next", "", "x-api-key: [redacted]; next"},
		{"nothing secret", "rate limit reached for gpt-4o", "k3y-not-present", "rate limit reached for gpt-4o"},
		{"key in another case", "invalid key ABC123XYZ here", "abc123XYZ", "invalid key [redacted] here"},
		{"key in base64", "token YWJjMTIzWFla sent", "abc123XYZ", "token [redacted] sent"},
		{"key in hex", "hex 616263313233585a5a", "abc123XZZ", "hex [redacted]"},
		{"key URL-escaped", "url k%2Fey%2B1 sent", "k/ey+1", "url [redacted] sent"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := redact(tc.in, tc.key); got != tc.want {
				t.Fatalf("redact(%q): got %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestParseDataURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in       string
		wantOK   bool
		wantMIME string
		wantData string
	}{
		{"data:image/png;base64,aGVsbG8=", true, "image/png", "hello"},
		{"data:image/jpeg;base64,", true, "image/jpeg", ""},
		{"data:image/png,hello", false, "", ""},
		{"data:;base64,aGVsbG8=", false, "", ""},
		{"data:image/png;base64,!!!", false, "", ""},
		{"https://example.com/a.png", false, "", ""},
		{"/api/v1/attachments/123", false, "", ""},
	}
	for _, tc := range tests {
		mime, data, ok := parseDataURL(tc.in)
		if ok != tc.wantOK || mime != tc.wantMIME || string(data) != tc.wantData {
			t.Errorf("parseDataURL(%q): got %q, %q, %v, want %q, %q, %v", tc.in, mime, data, ok, tc.wantMIME, tc.wantData, tc.wantOK)
		}
	}
}

func TestStopReasonAndUsage(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"stop": "stop", "": "stop", "end_turn": "stop", "length": "length", "max_tokens": "length",
		"FinishReasonMaxTokens": "length", "FinishReasonStop": "stop", "content_filter": "stop"} {
		if got := stopReason(in); got != want {
			t.Errorf("stopReason(%q): got %q, want %q", in, got, want)
		}
	}
	tests := []struct {
		name         string
		info         map[string]any
		wantP, wantC int
	}{
		{"openai and ollama", map[string]any{"PromptTokens": 10, "CompletionTokens": 3}, 10, 3},
		{"anthropic", map[string]any{"InputTokens": 7, "OutputTokens": 2}, 7, 2},
		{"googleai int32", map[string]any{"PromptTokens": int32(5), "CompletionTokens": int32(1)}, 5, 1},
		{"none", nil, 0, 0},
	}
	for _, tc := range tests {
		if p, c := usage(tc.info); p != tc.wantP || c != tc.wantC {
			t.Errorf("usage %s: got %d/%d, want %d/%d", tc.name, p, c, tc.wantP, tc.wantC)
		}
	}
}

func TestFormatDuration(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{60 * time.Second: "60s", 90 * time.Second: "90s", 200 * time.Millisecond: "200ms", 1500 * time.Millisecond: "1.5s"} {
		if got := formatDuration(d); got != want {
			t.Errorf("formatDuration(%v): got %q, want %q", d, got, want)
		}
	}
}

func TestToMessages(t *testing.T) {
	t.Parallel()
	req := thread.ModelRequest{Messages: []thread.ModelMessage{
		{Role: checkpoint.RoleSystem, Parts: []thread.ModelPart{{Type: "text", Text: "sys1"}, {Type: "text", Text: "sys2"}}},
		{Role: checkpoint.RoleUser, Parts: []thread.ModelPart{{Type: "text", Text: "look"}, {Type: "image", Image: "data:image/png;base64,aGVsbG8="},
			{Type: "image", Image: "/api/v1/attachments/1"}}},
		{Role: checkpoint.RoleAssistant, Parts: []thread.ModelPart{{Type: "text", Text: ""}}}, // an empty failed reply
		{Role: checkpoint.RoleAssistant, Parts: []thread.ModelPart{{Type: "text", Text: "a"}, {Type: "text", Text: "b"}}},
		{Role: checkpoint.RoleUser, Attachments: []checkpoint.Attachment{{Name: "f.txt", Content: []checkpoint.Part{{Type: "text", Text: "file"}}}}},
	}}
	tests := []struct {
		provider string
		vision   bool
		want     []llms.MessageContent
	}{
		{"openai", true, []llms.MessageContent{
			{Role: llms.ChatMessageTypeSystem, Parts: []llms.ContentPart{llms.TextContent{Text: "sys1\n\nsys2"}}},
			{Role: llms.ChatMessageTypeHuman, Parts: []llms.ContentPart{llms.TextContent{Text: "look\n\n[an image was attached but could not be read]"},
				llms.ImageURLContent{URL: "data:image/png;base64,aGVsbG8="}}},
			{Role: llms.ChatMessageTypeAI, Parts: []llms.ContentPart{llms.TextContent{Text: "a\n\nb"}}},
			{Role: llms.ChatMessageTypeHuman, Parts: []llms.ContentPart{llms.TextContent{Text: "[f.txt]\nfile"}}},
		}},
		{"anthropic", true, []llms.MessageContent{
			{Role: llms.ChatMessageTypeSystem, Parts: []llms.ContentPart{llms.TextContent{Text: "sys1\n\nsys2"}}},
			{Role: llms.ChatMessageTypeHuman, Parts: []llms.ContentPart{llms.TextContent{Text: "look\n\n[an image was attached but could not be read]"},
				llms.BinaryContent{MIMEType: "image/png", Data: []byte("hello")}}},
			{Role: llms.ChatMessageTypeAI, Parts: []llms.ContentPart{llms.TextContent{Text: "a\n\nb"}}},
			{Role: llms.ChatMessageTypeHuman, Parts: []llms.ContentPart{llms.TextContent{Text: "[f.txt]\nfile"}}},
		}},
		{"ollama", false, []llms.MessageContent{
			{Role: llms.ChatMessageTypeSystem, Parts: []llms.ContentPart{llms.TextContent{Text: "sys1\n\nsys2"}}},
			{Role: llms.ChatMessageTypeHuman, Parts: []llms.ContentPart{llms.TextContent{Text: "look\n\n[an image was attached; this model cannot see images]\n\n[an image was attached; this model cannot see images]"}}},
			{Role: llms.ChatMessageTypeAI, Parts: []llms.ContentPart{llms.TextContent{Text: "a\n\nb"}}},
			{Role: llms.ChatMessageTypeHuman, Parts: []llms.ContentPart{llms.TextContent{Text: "[f.txt]\nfile"}}},
		}},
	}
	for _, tc := range tests {
		got := toMessages(req, tc.provider, tc.vision)
		if g, w := describe(got), describe(tc.want); g != w {
			t.Errorf("%s: got\n%s\nwant\n%s", tc.provider, g, w)
		}
	}
}

func describe(ms []llms.MessageContent) string {
	var b strings.Builder
	for _, m := range ms {
		b.WriteString(string(m.Role))
		for _, p := range m.Parts {
			switch p := p.(type) {
			case llms.TextContent:
				b.WriteString(" text=" + p.Text)
			case llms.ImageURLContent:
				b.WriteString(" image_url=" + p.URL)
			case llms.BinaryContent:
				b.WriteString(" binary=" + p.MIMEType + ":" + string(p.Data))
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

func TestProviderMessage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		body string
		err  error
		want string
	}{
		{"openai", `{"error":{"message":"Rate limit reached","type":"requests"}}`, nil, "Rate limit reached"},
		{"ollama", `{"error":"model 'x' not found"}`, nil, "model 'x' not found"},
		{"google array", `[{"error":{"code":429,"message":"Resource exhausted","status":"RESOURCE_EXHAUSTED"}}]`, nil, "Resource exhausted"},
		{"plain text", "upstream connect error", nil, "upstream connect error"},
		{"no body", "", errors.New("boom"), "boom"},
		{"nothing", "", nil, "no message"},
	}
	for _, tc := range tests {
		if got := providerMessage([]byte(tc.body), tc.err); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

// FuzzTaps feeds arbitrary lines to the OpenAI and Anthropic stream
// readers: they never panic, and the pieces streamed for a call always
// join to the call the step returns.
func FuzzTaps(f *testing.F) {
	f.Add(`data: {"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"x","arguments":"{\"q"}}]}}]}`+"\n"+
		`data: {"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\":1}"}}]},"finish_reason":"tool_calls"}]}`, false)
	f.Add(`data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"x"}}`+"\n"+
		`data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{}"}}`, true)
	f.Fuzz(func(t *testing.T, stream string, anthropic bool) {
		pieces := map[string]string{}
		em := &emitter{onDelta: func(d thread.Delta) error {
			if d.Kind == thread.DeltaToolCallArgs {
				pieces[d.ToolCallID] += d.ArgsText
			}
			return nil
		}}
		line := newOpenAITap(em).line
		if anthropic {
			line = newAnthropicTap(em).line
		}
		for _, l := range strings.Split(stream, "\n") {
			if err := line([]byte(l)); err != nil {
				t.Fatalf("line %q: %v", l, err)
			}
		}
		_ = em.finish()
		calls := em.calls()
		if len(calls) != len(pieces) {
			t.Fatalf("calls %+v, streamed %v", calls, pieces)
		}
		for _, c := range calls {
			if pieces[c.ID] != c.ArgsText || c.ID == "" {
				t.Fatalf("call %+v: streamed %q", c, pieces[c.ID])
			}
		}
	})
}

// TestProbeBodyLastLine: a last line without a newline reaches the tap
// once, whether the client reads on to EOF or closes the body as soon as
// it has the bytes (Google's SDK stops at the closing "]": the raw record
// of the response's last line was lost when its data and the EOF came in
// two reads).
func TestProbeBodyLastLine(t *testing.T) {
	t.Parallel()
	for _, toEOF := range []bool{false, true} {
		var got []string
		b := &probeBody{rc: io.NopCloser(strings.NewReader("[a,\r\nb]")), p: &probe{},
			tap: func(line []byte) error { got = append(got, string(line)); return nil }}
		buf := make([]byte, 7)
		if n, err := b.Read(buf); n != 7 || err != nil {
			t.Fatalf("read: got %d, %v; want 7 bytes and no error", n, err)
		}
		if toEOF {
			if n, err := b.Read(buf); n != 0 || err != io.EOF {
				t.Fatalf("read to EOF: got %d, %v; want 0, EOF", n, err)
			}
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		if want := []string{"[a,", "b]"}; !slices.Equal(got, want) {
			t.Errorf("read to EOF %v: tapped %q, want %q", toEOF, got, want)
		}
	}
}

func TestOpenAIChatModel(t *testing.T) {
	t.Parallel()
	for id, want := range map[string]bool{
		"gpt-4o": true, "gpt-4.1-mini": true, "o3": true, "o4-mini": true, "chatgpt-4o-latest": true,
		"text-embedding-3-small": false, "gpt-4o-audio-preview": false, "gpt-4o-realtime-preview": false,
		"tts-1": false, "dall-e-3": false, "gpt-image-1": false, "whisper-1": false, "gpt-3.5-turbo-instruct": false,
	} {
		if got := openAIChatModel(id); got != want {
			t.Errorf("openAIChatModel(%q) = %v, want %v", id, got, want)
		}
	}
}
