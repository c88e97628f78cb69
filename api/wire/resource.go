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
	return Thread{ThreadID: t.ID.String(), Title: t.Title, CreatedAt: t.CreatedAt.UTC(), UpdatedAt: t.UpdatedAt.UTC(), Metadata: md}
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
	Config        json.RawMessage  `json:"run_config"`
	Usage         *usage           `json:"usage"`
	Error         *runError        `json:"error"`
	CreatedAt     time.Time        `json:"created_at"`
	FinishedAt    *time.Time       `json:"finished_at"`
	DurationMS    *float64         `json:"duration_ms"`
	LastSequence  int64            `json:"last_sequence"`
}

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

type runError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// NewRun is the run resource (GET …/runs/{run_id}), for json.Marshal.
func NewRun(r *thread.Run) any {
	o := run{ID: r.ID, ThreadID: r.ThreadID, Status: r.Status, ParentID: r.ParentID, MessageID: r.MessageID,
		Model: r.Model, Config: RunConfigJSON(&r.Config), CreatedAt: r.CreatedAt.UTC(), LastSequence: r.LastSequence}
	if r.UserMessageID != uuid.Nil {
		u := r.UserMessageID
		o.UserMessageID = &u
	}
	if u := r.Usage; u != nil {
		o.Usage = &usage{u.PromptTokens, u.CompletionTokens}
	}
	if e := r.Error; e != nil {
		o.Error = &runError{string(e.Code), e.Message}
	}
	if r.FinishedAt != nil {
		f := r.FinishedAt.UTC()
		o.FinishedAt = &f
		d := float64(f.Sub(r.CreatedAt).Microseconds()) / 1000
		o.DurationMS = &d
	}
	return o
}

// RunConfigJSON is a run's run_config as the API writes it: the shape
// the request sent, the one the store keeps (thread.RunConfig's fields).
func RunConfigJSON(c *thread.RunConfig) json.RawMessage {
	b, _ := json.Marshal(c) // strings, numbers and valid JSON values: always marshals
	return b
}
