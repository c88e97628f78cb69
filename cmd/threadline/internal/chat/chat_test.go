package chat

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/threadline/threadline/api/client"
)

// TestPrinter: reasoning is dimmed and ends its line before the text;
// tool calls read "⚙ name args → result"; data parts are one line.
func TestPrinter(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	s := &session{out: &out, color: true}
	p := printer{s: s, calls: map[string]bool{}}
	args := []string{`{"expression":`, `"12*7"}`}
	for _, ev := range []client.Event{
		{Type: client.EventReasoning, Text: "Let me "},
		{Type: client.EventReasoning, Text: "think."},
		{Type: client.EventToken, Text: "Sure."},
		{Type: client.EventToolCall, ToolCallID: "c1", ToolName: "calculator", ArgsText: &args[0]},
		{Type: client.EventToolCall, ToolCallID: "c1", ToolName: "calculator", ArgsText: &args[1]},
		{Type: client.EventToolResult, ToolCallID: "c1", Result: json.RawMessage(`84`)},
		{Type: client.EventData, Name: "plan", Data: json.RawMessage(`{"id":"p","title":"Plan","tasks":[{"status":"done"},{"status":"pending"}]}`)},
		{Type: client.EventError, Code: "model_error", Error: "boom"},
	} {
		p.event(&ev)
	}
	want := "\x1b[2mLet me \x1b[0m\x1b[2mthink.\x1b[0m\nSure.\n" +
		"\x1b[2m⚙ calculator \x1b[0m\x1b[2m{\"expression\":\x1b[0m\x1b[2m\"12*7\"}\x1b[0m\x1b[2m → 84\x1b[0m\n" +
		"\x1b[2m[plan] Plan: 1/2 done\x1b[0m\n" +
		"error: model_error: boom\n"
	if got := out.String(); got != want {
		t.Fatalf("got\n%q\nwant\n%q", got, want)
	}
}
