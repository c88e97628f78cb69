package wire_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/threadline/threadline/api/wire"
	"github.com/threadline/threadline/api/wire/wiretest"
	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/thread"
)

// tokenShape is a token event's shape as encoding/json writes it: the
// reference the hand-written line is held to.
type tokenShape struct {
	Type      string    `json:"type"`
	RunID     uuid.UUID `json:"run_id"`
	Sequence  int64     `json:"sequence"`
	MessageID uuid.UUID `json:"message_id"`
	Text      string    `json:"text"`
}

func encoderLine(t testing.TB, ev *thread.Event) []byte {
	var want bytes.Buffer
	if err := json.NewEncoder(&want).Encode(tokenShape{ev.Type, ev.RunID, ev.Sequence, ev.MessageID, ev.Text}); err != nil {
		t.Fatal(err)
	}
	return want.Bytes()
}

// TestTokenLineMatchesEncoder: a token's line is exactly what json.Encoder
// writes for its shape.
func TestTokenLineMatchesEncoder(t *testing.T) {
	t.Parallel()
	for _, text := range append(wiretest.Texts, " abcd", "{\"json\":true}", "\u2028</script>") {
		ev := thread.Event{Type: thread.KindToken, RunID: uuid.New(), Sequence: 1234567890123, MessageID: uuid.New(), Text: text}
		if got, want := wire.AppendEventLine(nil, &ev), encoderLine(t, &ev); !bytes.Equal(got, want) {
			t.Errorf("token line (%q) =\n%s\nwant\n%s", text, got, want)
		}
	}
}

// TestAgentEventJSON: the agent events are written in API.md's shapes.
func TestAgentEventJSON(t *testing.T) {
	t.Parallel()
	run := uuid.MustParse("11111111-1111-1111-1111-111111111111")
	msg := uuid.MustParse("22222222-2222-2222-2222-222222222222")
	head := `{"type":"%s","run_id":"` + run.String() + `","sequence":%d,"message_id":"` + msg.String() + `",`
	for _, tc := range []struct {
		ev   thread.Event
		want string
	}{
		{thread.Event{Type: thread.KindReasoning, Text: "Let me"}, `"text":"Let me"}`},
		{thread.Event{Type: thread.KindToolCall, CallID: "c1", Name: "calculator", Text: `{"expression":`},
			`"tool_call_id":"c1","tool_name":"calculator","args_text":"{\"expression\":"}`},
		{thread.Event{Type: thread.KindToolCall, CallID: "c1", Name: "calculator"}, `"tool_call_id":"c1","tool_name":"calculator","args_text":""}`},
		{thread.Event{Type: thread.KindToolResult, CallID: "c1", Data: json.RawMessage(`84`)}, `"tool_call_id":"c1","result":84,"is_error":false}`},
		{thread.Event{Type: thread.KindToolResult, CallID: "c2", Data: json.RawMessage(`"boom <x>"`), IsError: true},
			`"tool_call_id":"c2","result":"boom \u003cx\u003e","is_error":true}`},
		{thread.Event{Type: thread.KindData, Name: "plan", Data: json.RawMessage(`{"id":"p","tasks":[]}`)}, `"name":"plan","data":{"id":"p","tasks":[]}}`},
	} {
		ev := tc.ev
		ev.RunID, ev.Sequence, ev.MessageID = run, 9, msg
		got := wire.AppendEvent(nil, &ev)
		if want := fmt.Sprintf(head, ev.Type, 9) + tc.want; string(got) != want {
			t.Errorf("%s event:\n got %s\nwant %s", ev.Type, got, want)
		}
	}
}

// FuzzTokenLine checks the token line against json.Encoder for any text,
// and that every line is one JSON object on one line.
func FuzzTokenLine(f *testing.F) {
	for _, seed := range []string{"", " abcd", "tab\tnew\nline\r\x00\x1f", "\u2028\u2029</script>&", "bad \xff\xfe utf-8", "😀", "\"\\"} {
		f.Add(seed, int64(1))
	}
	runID, msgID := uuid.New(), uuid.New()
	f.Fuzz(func(t *testing.T, text string, seq int64) {
		ev := thread.Event{Type: thread.KindToken, RunID: runID, Sequence: seq, MessageID: msgID, Text: text}
		got := wire.AppendEventLine(nil, &ev)
		if want := encoderLine(t, &ev); !bytes.Equal(got, want) {
			t.Fatalf("token line (%q) =\n%s\nwant\n%s", text, got, want)
		}
		if bytes.IndexByte(got[:len(got)-1], '\n') >= 0 || !json.Valid(got) {
			t.Fatalf("token line for %q is not one JSON object on one line: %q", text, got)
		}
		var back struct{ Text string }
		if err := json.Unmarshal(got, &back); err != nil || (utf8.ValidString(text) && back.Text != text) {
			t.Fatalf("token line for %q reads back as %q (%v)", text, back.Text, err)
		}
	})
}

func BenchmarkTokenLine(b *testing.B) {
	ev := thread.Event{Type: thread.KindToken, RunID: uuid.New(), Sequence: 42, MessageID: uuid.New(), Text: " abcd"}
	b.Run("encoder", func(b *testing.B) {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		s := tokenShape{ev.Type, ev.RunID, ev.Sequence, ev.MessageID, ev.Text}
		for b.Loop() {
			buf.Reset()
			_ = enc.Encode(s)
		}
	})
	b.Run("append", func(b *testing.B) {
		var line []byte
		for b.Loop() {
			line = wire.AppendEventLine(line[:0], &ev)
		}
	})
}

func BenchmarkSnapshotEvent(b *testing.B) {
	evs := wiretest.Events()
	ev := evs[len(evs)-3] // the finished run's snapshot
	b.ReportAllocs()
	var line []byte
	for b.Loop() {
		line = wire.AppendEventLine(line[:0], &ev)
	}
	b.ReportMetric(float64(len(line)), "bytes/event")
}

// TestPartShapes: each part type is written in exactly assistant-ui's
// shape, as API.md lists them.
func TestPartShapes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		part checkpoint.Part
		want string
	}{
		{checkpoint.Part{Type: "reasoning", Text: "Let me <think>"}, `{"type":"reasoning","text":"Let me \u003cthink\u003e"}`},
		{checkpoint.Part{Type: "text", Text: "I'll use the calculator."}, `{"type":"text","text":"I'll use the calculator."}`},
		{checkpoint.Part{Type: "tool-call", ToolCallID: "c1", ToolName: "calculator", Args: json.RawMessage(`{"expression":"12*7"}`),
			ArgsText: `{"expression":"12*7"}`, Result: json.RawMessage(`84`)},
			`{"type":"tool-call","toolCallId":"c1","toolName":"calculator","args":{"expression":"12*7"},"argsText":"{\"expression\":\"12*7\"}","result":84,"isError":false}`},
		{checkpoint.Part{Type: "tool-call", ToolCallID: "c2", ToolName: "clock", ArgsText: `{"timez`},
			`{"type":"tool-call","toolCallId":"c2","toolName":"clock","args":{},"argsText":"{\"timez"}`},
		{checkpoint.Part{Type: "tool-call", ToolCallID: "c3", ToolName: "wait", Args: json.RawMessage(`{}`), ArgsText: `{}`,
			Result: json.RawMessage(`"wait timed out"`), IsError: true},
			`{"type":"tool-call","toolCallId":"c3","toolName":"wait","args":{},"argsText":"{}","result":"wait timed out","isError":true}`},
		{checkpoint.Part{Type: "data", Name: "plan", Data: json.RawMessage(`{"id":"p1","tasks":[{"id":"1","status":"done"}]}`)},
			`{"type":"data","name":"plan","data":{"id":"p1","tasks":[{"id":"1","status":"done"}]}}`},
		{checkpoint.Part{Type: "source", SourceType: "url", ID: "s1", URL: "https://example.com/a?b=1&c=2", Title: "Example"},
			`{"type":"source","sourceType":"url","id":"s1","url":"https://example.com/a?b=1\u0026c=2","title":"Example"}`},
		{checkpoint.Part{Type: "file", Filename: "notes.pdf", MimeType: "application/pdf", Data: json.RawMessage(`"/api/v1/attachments/x"`)},
			`{"type":"file","filename":"notes.pdf","mimeType":"application/pdf","data":"/api/v1/attachments/x"}`},
	} {
		if got := wire.AppendPart(nil, &tc.part); string(got) != tc.want {
			t.Errorf("%s part:\n got %s\nwant %s", tc.part.Type, got, tc.want)
		}
		var back wire.Part
		if err := json.Unmarshal([]byte(tc.want), &back); err != nil {
			t.Fatal(err)
		}
		p := back.DomainPart()
		if got := wire.AppendPart(nil, &p); string(got) != tc.want {
			t.Errorf("%s part decoded and written again:\n got %s\nwant %s", tc.part.Type, got, tc.want)
		}
	}
}

// TestPermissionApproval: in a message's parts, a waiting tool call that
// an agent's permission data part asks about carries the approval with
// the agent's options (ids, names as labels, kinds in assistant-ui's
// spelling), decoded back by clients; an answered call, another call and
// parts without a permission carry none.
func TestPermissionApproval(t *testing.T) {
	t.Parallel()
	perm := json.RawMessage(`{"id":"permission_p1","toolCallId":"p1","title":"Edit config","key":"k","options":[` +
		`{"optionId":"yes","name":"Allow","kind":"allow_once"},{"optionId":"always","name":"Allow always","kind":"allow_always"},` +
		`{"optionId":"no","name":"Deny","kind":"reject_once"}]}`)
	parts := []checkpoint.Part{
		{Type: "tool-call", ToolCallID: "p1", ToolName: "Edit config", ArgsText: `{}`},
		{Type: "tool-call", ToolCallID: "p2", ToolName: "Read", ArgsText: `{}`},
		{Type: "data", Name: "permission", Data: perm},
	}
	got := string(wire.AppendParts(nil, parts))
	want := `[{"type":"tool-call","toolCallId":"p1","toolName":"Edit config","args":{},"argsText":"{}","approval":{"id":"p1","options":[` +
		`{"id":"yes","kind":"allow-once","label":"Allow"},{"id":"always","kind":"allow-always","label":"Allow always"},` +
		`{"id":"no","kind":"reject-once","label":"Deny"}]}},` +
		`{"type":"tool-call","toolCallId":"p2","toolName":"Read","args":{},"argsText":"{}"},` +
		`{"type":"data","name":"permission","data":` + string(perm) + `}]`
	if got != want {
		t.Fatalf("parts:\n got %s\nwant %s", got, want)
	}
	var back []wire.Part
	if err := json.Unmarshal([]byte(got), &back); err != nil {
		t.Fatal(err)
	}
	if a := back[0].Approval; a == nil || a.ID != "p1" || len(a.Options) != 3 || a.Options[1] != (wire.ApprovalOption{ID: "always", Kind: "allow-always", Label: "Allow always"}) {
		t.Errorf("decoded approval: got %+v", back[0].Approval)
	}
	parts[0].Result = json.RawMessage(`"edited"`)
	if got := string(wire.AppendParts(nil, parts)); strings.Contains(got, `"approval"`) {
		t.Errorf("an answered call still carries its approval: %s", got)
	}
	if got := string(wire.AppendParts(nil, parts[1:2])); strings.Contains(got, `"approval"`) {
		t.Errorf("a call without a permission carries an approval: %s", got)
	}
}
