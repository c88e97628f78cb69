package api

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/thread"
)

// TestUIEncoder: native events in, the UI message chunks they encode to.
func TestUIEncoder(t *testing.T) {
	t.Parallel()
	run := &thread.Run{ID: uuid.New(), ThreadID: uuid.New(), MessageID: uuid.New()}
	snap := func(st thread.RunStatus) thread.Event {
		return thread.Event{Type: thread.KindSnapshot, Snapshot: &thread.Snapshot{RunStatus: st}}
	}
	tok := func(s string) thread.Event { return thread.Event{Type: thread.KindToken, Text: s} }
	reason := func(s string) thread.Event { return thread.Event{Type: thread.KindReasoning, Text: s} }
	call := func(id, args string) thread.Event {
		return thread.Event{Type: thread.KindToolCall, CallID: id, Name: "calculator", Text: args}
	}
	result := func(id, v string, isErr bool) thread.Event {
		return thread.Event{Type: thread.KindToolResult, CallID: id, Data: json.RawMessage(v), IsError: isErr}
	}
	tests := []struct {
		name string
		evs  []thread.Event
		want []string // chunks as JSON, but start's (checked apart)
	}{
		{"text", []thread.Event{snap(thread.RunRunning), tok("Hel"), tok("lo"), snap(thread.RunSucceeded)}, []string{
			`{"type":"start-step"}`, `{"type":"text-start","id":"t2"}`, `{"type":"text-delta","id":"t2","delta":"Hel"}`,
			`{"type":"text-delta","id":"t2","delta":"lo"}`, `{"type":"text-end","id":"t2"}`, `{"type":"finish-step"}`}},
		{"reasoning then text", []thread.Event{snap(thread.RunRunning), reason("hm"), tok("ok"), snap(thread.RunSucceeded)}, []string{
			`{"type":"start-step"}`, `{"type":"reasoning-start","id":"r2"}`, `{"type":"reasoning-delta","id":"r2","delta":"hm"}`,
			`{"type":"reasoning-end","id":"r2"}`, `{"type":"text-start","id":"t3"}`, `{"type":"text-delta","id":"t3","delta":"ok"}`,
			`{"type":"text-end","id":"t3"}`, `{"type":"finish-step"}`}},
		{"tool call over two steps", []thread.Event{snap(thread.RunRunning), call("c1", `{"expression":`), call("c1", `"2*3"}`),
			result("c1", "6", false), snap(thread.RunRunning), tok("6"), snap(thread.RunSucceeded)}, []string{
			`{"type":"start-step"}`,
			`{"type":"tool-input-start","toolCallId":"c1","toolName":"calculator","providerExecuted":true,"dynamic":true}`,
			`{"type":"tool-input-delta","toolCallId":"c1","inputTextDelta":"{\"expression\":"}`,
			`{"type":"tool-input-delta","toolCallId":"c1","inputTextDelta":"\"2*3\"}"}`,
			`{"type":"tool-input-available","toolCallId":"c1","toolName":"calculator","input":{"expression":"2*3"},"providerExecuted":true,"dynamic":true}`,
			`{"type":"tool-output-available","toolCallId":"c1","output":6,"providerExecuted":true,"dynamic":true}`,
			`{"type":"finish-step"}`, `{"type":"start-step"}`, `{"type":"text-start","id":"t6"}`,
			`{"type":"text-delta","id":"t6","delta":"6"}`, `{"type":"text-end","id":"t6"}`, `{"type":"finish-step"}`}},
		{"failed tool and data", []thread.Event{snap(thread.RunRunning), call("c1", `{}`), result("c1", `"division by zero"`, true),
			{Type: thread.KindData, Name: "plan", Data: json.RawMessage(`{"id":"p1","tasks":[]}`)},
			{Type: thread.KindData, Name: "files", Data: json.RawMessage(`[]`)}, snap(thread.RunSucceeded)}, []string{
			`{"type":"start-step"}`,
			`{"type":"tool-input-start","toolCallId":"c1","toolName":"calculator","providerExecuted":true,"dynamic":true}`,
			`{"type":"tool-input-delta","toolCallId":"c1","inputTextDelta":"{}"}`,
			`{"type":"tool-input-available","toolCallId":"c1","toolName":"calculator","input":{},"providerExecuted":true,"dynamic":true}`,
			`{"type":"tool-output-error","errorText":"division by zero","toolCallId":"c1","providerExecuted":true,"dynamic":true}`,
			`{"type":"data-plan","id":"p1","data":{"id":"p1","tasks":[]}}`, `{"type":"data-files","data":[]}`, `{"type":"finish-step"}`}},
		{"error", []thread.Event{snap(thread.RunRunning), tok("a"), {Type: thread.KindError, Text: "model timed out", Code: errcode.ModelTimeout},
			snap(thread.RunFailed)}, []string{
			`{"type":"start-step"}`, `{"type":"text-start","id":"t2"}`, `{"type":"text-delta","id":"t2","delta":"a"}`,
			`{"type":"text-end","id":"t2"}`,
			`{"type":"message-metadata","messageMetadata":{"threadId":"` + run.ThreadID.String() + `","runId":"` + run.ID.String() + `","error":{"code":"model_timeout","message":"model timed out"}}}`,
			`{"type":"error","errorText":"model timed out"}`, `{"type":"finish-step"}`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			enc := &uiEncoder{run: run}
			var got []string
			for i := range tc.evs {
				ev := tc.evs[i]
				ev.Sequence = int64(i + 1)
				for _, c := range enc.add(&ev) {
					b, err := json.Marshal(c)
					if err != nil {
						t.Fatal(err)
					}
					got = append(got, string(b))
				}
			}
			start := `{"type":"start","messageId":"` + run.MessageID.String() + `","messageMetadata":{"threadId":"` + run.ThreadID.String() + `","runId":"` + run.ID.String() + `"}}`
			if len(got) == 0 || got[0] != start {
				t.Fatalf("first chunk: got %v, want %s", got, start)
			}
			if g, w := strings.Join(got[1:], "\n"), strings.Join(tc.want, "\n"); g != w {
				t.Fatalf("chunks:\n%s\nwant:\n%s", g, w)
			}
			if !enc.done || enc.status != tc.evs[len(tc.evs)-1].Snapshot.RunStatus {
				t.Fatalf("done %v status %q after the final snapshot", enc.done, enc.status)
			}
		})
	}
}

// TestAppendSSE: one chunk is an id line and a data line; [DONE]-style
// events without a sequence have no id line.
func TestAppendSSE(t *testing.T) {
	t.Parallel()
	b, err := appendSSE(nil, 7, &uiChunk{Type: "text-delta", ID: "t2", Delta: "a\nb"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), "id: 7\ndata: {\"type\":\"text-delta\",\"id\":\"t2\",\"delta\":\"a\\nb\"}\n\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	for _, delta := range []string{"plain", "<b>&</b>", "tab\there \"quoted\" \\", "\u2028 line sep, ü, 😀, \x01", "bad \xff utf-8", ""} {
		for _, typ := range []string{"text-delta", "reasoning-delta"} {
			c := uiChunk{Type: typ, ID: "t1", Delta: delta}
			b, _ := appendSSE(nil, 3, &c)
			j, _ := json.Marshal(struct {
				Type  string `json:"type"`
				ID    string `json:"id"`
				Delta string `json:"delta"`
			}{typ, "t1", delta})
			if want := "id: 3\ndata: " + string(j) + "\n\n"; string(b) != want {
				t.Errorf("%s %q: got %q, want %q", typ, delta, b, want)
			}
		}
	}
	b, _ = appendSSE(nil, 0, &uiChunk{Type: "finish-step"})
	if got, want := string(b), "data: {\"type\":\"finish-step\"}\n\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// BenchmarkUIEncode: one run of 200 tokens, from the first snapshot to the
// final one, encoded to SSE bytes (chunks and their id and data lines).
func BenchmarkUIEncode(b *testing.B) {
	run := &thread.Run{ID: uuid.New(), ThreadID: uuid.New(), MessageID: uuid.New()}
	evs := []thread.Event{{Type: thread.KindSnapshot, Snapshot: &thread.Snapshot{RunStatus: thread.RunRunning}}}
	for i := 0; i < 200; i++ {
		evs = append(evs, thread.Event{Type: thread.KindToken, Text: " word"})
	}
	evs = append(evs, thread.Event{Type: thread.KindSnapshot, Snapshot: &thread.Snapshot{RunStatus: thread.RunSucceeded}})
	for i := range evs {
		evs[i].Sequence = int64(i + 1)
	}
	b.ReportAllocs()
	var buf []byte
	for b.Loop() {
		enc := &uiEncoder{run: run}
		for i := range evs {
			chunks := enc.add(&evs[i])
			for j := range chunks {
				var err error
				if buf, err = appendSSE(buf[:0], evs[i].Sequence, &chunks[j]); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
}
