package wire

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/thread"
)

// NewThread is a thread's row as the API writes it: times in UTC,
// metadata {} when it has none.
func NewThread(t *thread.Thread) Thread {
	md := t.Metadata
	if len(md) == 0 {
		md = json.RawMessage(`{}`)
	}
	out := Thread{ThreadID: t.ID.String(), Title: t.Title, CreatedAt: t.CreatedAt.UTC(), UpdatedAt: t.UpdatedAt.UTC(), Metadata: md}
	if p := t.Parent; p != nil {
		out.Parent = &ThreadParent{ThreadID: p.ThreadID.String(), RunID: p.RunID.String(), MessageID: p.MessageID.String(),
			ToolCallID: p.ToolCallID}
	}
	return out
}

// NewThreads is NewThread of each, an empty list for none.
func NewThreads(ts []*thread.Thread) []Thread {
	out := make([]Thread, len(ts))
	for i, t := range ts {
		out[i] = NewThread(t)
	}
	return out
}

// run is the run resource as the service writes it: RunInfo's shape, with
// a usage that is null until the run reports one.
type run struct {
	ID            uuid.UUID        `json:"run_id"`
	ThreadID      uuid.UUID        `json:"thread_id"`
	Status        thread.RunStatus `json:"status"`
	UserMessageID *uuid.UUID       `json:"user_message_id"`
	ParentID      uuid.UUID        `json:"parent_message_id"`
	MessageID     uuid.UUID        `json:"message_id"`
	Model         string           `json:"model"`
	Config        RunConfig        `json:"run_config"`
	Usage         *Usage           `json:"usage"`
	Error         *RunError        `json:"error"`
	CreatedAt     time.Time        `json:"created_at"`
	FinishedAt    *time.Time       `json:"finished_at"`
	DurationMS    *float64         `json:"duration_ms"`
	LastSequence  int64            `json:"last_sequence"`
}

// NewRun is the run resource (GET …/runs/{run_id}), for json.Marshal.
func NewRun(r *thread.Run) any {
	o := run{ID: r.ID, ThreadID: r.ThreadID, Status: r.Status, ParentID: r.ParentID, MessageID: r.MessageID,
		Model: r.Model, Config: NewRunConfig(&r.Config), Usage: NewUsage(r.Usage), Error: NewRunError(r.Error), CreatedAt: r.CreatedAt.UTC(), LastSequence: r.LastSequence}
	if r.UserMessageID != uuid.Nil {
		u := r.UserMessageID
		o.UserMessageID = &u
	}
	if r.FinishedAt != nil {
		f := r.FinishedAt.UTC()
		o.FinishedAt = &f
		d := float64(f.Sub(r.CreatedAt).Microseconds()) / 1000
		o.DurationMS = &d
	}
	return o
}

// NewRunConfig is c in the request's shape.
func NewRunConfig(c *thread.RunConfig) RunConfig {
	o := RunConfig{Model: c.Model, Temperature: c.Temperature, System: c.System, Custom: c.Custom, MaxSteps: c.MaxSteps}
	if c.Tools != nil {
		o.Tools = make([]ToolSpec, len(c.Tools))
		for i, t := range c.Tools {
			o.Tools[i] = ToolSpec(t)
		}
	}
	return o
}

// Domain is the run configuration c sends.
func (c *RunConfig) Domain() thread.RunConfig {
	o := thread.RunConfig{Model: c.Model, Temperature: c.Temperature, System: c.System, Custom: c.Custom, MaxSteps: c.MaxSteps}
	if c.Tools != nil {
		o.Tools = make([]thread.RunTool, len(c.Tools))
		for i, t := range c.Tools {
			o.Tools[i] = thread.RunTool(t)
		}
	}
	return o
}

// NewUsage is u in the API's shape (nil for nil).
func NewUsage(u *thread.Usage) *Usage {
	if u == nil {
		return nil
	}
	o := Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens} // the totals: a run's steps are its trace's
	return &o
}

// NewRunError is e in the API's shape (nil for nil).
func NewRunError(e *thread.RunError) *RunError {
	if e == nil {
		return nil
	}
	o := RunError(*e)
	return &o
}

// ToolResultBody is a continuation's tool_results entry as the service
// reads it: the result kept as the JSON it was sent as. (ToolResult is the
// client's side of the same shape, its result any value to encode.)
type ToolResultBody struct {
	ToolCallID string          `json:"tool_call_id"`
	Result     json.RawMessage `json:"result"`
	IsError    bool            `json:"is_error,omitempty"`
}

// DomainToolResults and DomainApprovals are a continuation's answers.
func DomainToolResults(in []ToolResultBody) []thread.ToolResult {
	if in == nil {
		return nil
	}
	out := make([]thread.ToolResult, len(in))
	for i, r := range in {
		out[i] = thread.ToolResult{CallID: r.ToolCallID, Result: r.Result, IsError: r.IsError}
	}
	return out
}

// DomainApprovals: see DomainToolResults.
func DomainApprovals(in []Approval) []thread.Approval {
	if in == nil {
		return nil
	}
	out := make([]thread.Approval, len(in))
	for i, a := range in {
		out[i] = thread.Approval{CallID: a.ToolCallID, Approved: a.Approved, OptionID: a.OptionID, Reason: a.Reason}
	}
	return out
}

// Imported is what POST /threads/import wrote of one thread.
type Imported struct {
	ThreadID uuid.UUID `json:"thread_id"`
	Title    *string   `json:"title"`
	Messages int       `json:"messages"`
}

// NewImported is Imported of each (nil for nil).
func NewImported(in []thread.Imported) []Imported {
	if in == nil {
		return nil
	}
	out := make([]Imported, len(in))
	for i, x := range in {
		out[i] = Imported(x)
	}
	return out
}

// NewModels is GET /models's list (nil for nil).
func NewModels(in []thread.ModelInfo) []Model {
	if in == nil {
		return nil
	}
	out := make([]Model, len(in))
	for i, m := range in {
		out[i] = Model(m)
	}
	return out
}
