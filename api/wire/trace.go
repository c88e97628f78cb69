package wire

import (
	"time"

	"github.com/threadline/threadline/thread"
)

// Trace is GET …/runs/{run_id}/trace: a run's spans, built from its log
// (thread.BuildTrace).
type Trace struct {
	RunID    string           `json:"run_id"`
	ThreadID string           `json:"thread_id"`
	Status   thread.RunStatus `json:"status"`
	Spans    []Span           `json:"spans"`
}

// Span is one step of a run's trace. End is nil while it runs.
type Span struct {
	SpanID       string       `json:"span_id"`
	ParentID     *string      `json:"parent_id"`
	Name         string       `json:"name"`
	Operation    string       `json:"operation"`
	Start        time.Time    `json:"start"`
	End          *time.Time   `json:"end"`
	Status       string       `json:"status"`
	Error        *SpanFailure `json:"error"`
	Model        string       `json:"model,omitempty"`
	ToolName     string       `json:"tool_name,omitempty"`
	ToolCallID   string       `json:"tool_call_id,omitempty"`
	InputTokens  *int         `json:"input_tokens,omitempty"`
	OutputTokens *int         `json:"output_tokens,omitempty"`
	FinishReason string       `json:"finish_reason,omitempty"`
	FirstSeq     int64        `json:"first_sequence"`
	LastSeq      int64        `json:"last_sequence"`
}

// SpanFailure is why a span failed.
type SpanFailure struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// NewTrace is t in the API's shape.
func NewTrace(t *thread.Trace) Trace {
	o := Trace{RunID: t.RunID, ThreadID: t.ThreadID, Status: t.Status}
	if t.Spans != nil {
		o.Spans = make([]Span, len(t.Spans))
		for i := range t.Spans {
			o.Spans[i] = newSpan(&t.Spans[i])
		}
	}
	return o
}

func newSpan(s *thread.Span) Span {
	o := Span{SpanID: s.SpanID, ParentID: s.ParentID, Name: s.Name, Operation: s.Operation, Start: s.Start, End: s.End,
		Status: s.Status, Model: s.Model, ToolName: s.ToolName, ToolCallID: s.ToolCallID, InputTokens: s.InputTokens,
		OutputTokens: s.OutputTokens, FinishReason: s.FinishReason, FirstSeq: s.FirstSeq, LastSeq: s.LastSeq}
	if e := s.Error; e != nil {
		o.Error = &SpanFailure{Type: e.Type, Message: e.Message}
	}
	return o
}
