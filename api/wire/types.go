// Package wire is the API's JSON: the one home of every response and
// stream event shape. The types below are the shapes as a Go client
// decodes them (api/client aliases them); the encoders in this package
// write them from domain values (thread, checkpoint), which carry no JSON
// of their own. The hand-written encoders write byte for byte what
// encoding/json writes for these shapes (tested against golden files).
package wire

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"

	"github.com/threadline/threadline/checkpoint/errcode"
)

// Event kinds of a run's stream.
const (
	EventSnapshot   = "snapshot"
	EventToken      = "token"
	EventReasoning  = "reasoning"
	EventToolCall   = "tool_call"
	EventToolResult = "tool_result"
	EventData       = "data"
	EventError      = "error"
	// EventSubagent wraps an event of a delegate call's child run.
	EventSubagent = "subagent"
)

// Run statuses, of a snapshot event's run_status and of RunInfo.Status.
const (
	StatusRunning        = "running"
	StatusSucceeded      = "succeeded"
	StatusFailed         = "failed"
	StatusCancelled      = "cancelled"
	StatusInterrupted    = "interrupted"
	StatusRequiresAction = "requires_action"
)

// Event is one NDJSON stream event of a run. Every event has Type, RunID
// and Sequence; the other fields are those of its kind (docs/api.md,
// "Events"): a snapshot's ThreadID, CheckpointID, RunStatus, Messages and
// Repository; a token's or reasoning's MessageID and Text; a tool call
// piece's ToolCallID, ToolName and ArgsText; a tool result's ToolCallID,
// Result and IsError; a data event's Name and Data; an error's Error and
// Code.
type Event struct {
	Type         string       `json:"type"`
	RunID        string       `json:"run_id"`
	Sequence     int64        `json:"sequence"`
	MessageID    string       `json:"message_id,omitempty"`
	Text         string       `json:"text,omitempty"`
	Error        string       `json:"error,omitempty"`
	Code         errcode.Code `json:"code,omitempty"`
	ThreadID     string       `json:"thread_id,omitempty"`
	CheckpointID *string      `json:"checkpoint_id,omitempty"`
	RunStatus    string       `json:"run_status,omitempty"`
	Messages     []Message    `json:"messages,omitempty"`
	Repository   *Repository  `json:"messageRepository,omitempty"`
	ToolCallID   string       `json:"tool_call_id,omitempty"`
	ToolName     string       `json:"tool_name,omitempty"`
	// ArgsText is a piece of a tool call's arguments; a pointer, as the
	// piece that opens a call may be empty.
	ArgsText *string         `json:"args_text,omitempty"`
	Result   json.RawMessage `json:"result,omitempty"`
	IsError  bool            `json:"is_error,omitempty"`
	Name     string          `json:"name,omitempty"`
	Data     json.RawMessage `json:"data,omitempty"`
	// ChildRunID and Event are a subagent event's child run and its
	// event (ThreadID is then the child's thread, ToolCallID the
	// delegate call's).
	ChildRunID string `json:"child_run_id,omitempty"`
	Event      *Event `json:"event,omitempty"`
	// Raw is the line as the service sent it, without its newline.
	Raw json.RawMessage `json:"-"`
}

// Final reports whether the event is the last one of its run: a snapshot
// whose run is no longer running.
func (e *Event) Final() bool {
	return e.Type == EventSnapshot && e.RunStatus != "" && e.RunStatus != StatusRunning
}

// LastMessage returns a snapshot's last message on its path (the reply
// of the run), or nil when it has none.
func (e *Event) LastMessage() *Message {
	if len(e.Messages) == 0 {
		return nil
	}
	return &e.Messages[len(e.Messages)-1]
}

// Message is a message in assistant-ui's ThreadMessage shape.
type Message struct {
	ID          string            `json:"id"`
	Role        string            `json:"role"`
	Content     []Part            `json:"content"`
	CreatedAt   time.Time         `json:"createdAt"`
	Status      *MessageStatus    `json:"status,omitempty"`
	Attachments []json.RawMessage `json:"attachments,omitempty"`
	Metadata    MessageMetadata   `json:"metadata"`
}

// Text returns the message's text parts joined.
func (m Message) Text() string {
	var b strings.Builder
	for _, p := range m.Content {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// WaitingCalls returns the message's tool calls without a result: those a
// requires_action run waits for.
func (m Message) WaitingCalls() []Part {
	var out []Part
	for _, p := range m.Content {
		if p.Type == "tool-call" && p.Result == nil {
			out = append(out, p)
		}
	}
	return out
}

// MessageStatus is an assistant message's status: running, complete,
// incomplete or requires-action, with a reason.
type MessageStatus struct {
	Type   string `json:"type"`
	Reason string `json:"reason,omitempty"`
	Error  string `json:"error,omitempty"`
}

// MessageMetadata holds the run that wrote an assistant message (RunID,
// assistant-ui's own field) and the checkpoint a message is stored as.
type MessageMetadata struct {
	RunID  *string `json:"runId,omitempty"`
	Custom struct {
		CheckpointID       *string `json:"checkpointId"`
		ParentCheckpointID *string `json:"parentCheckpointId"`
		RunID              *string `json:"runId"`
	} `json:"custom"`
}

// Part is one content part: text, reasoning, image, file, tool-call,
// data or source; each kind fills its own fields.
type Part struct {
	Type       string          `json:"type"`
	Text       string          `json:"text,omitempty"`
	Image      string          `json:"image,omitempty"`
	ToolCallID string          `json:"toolCallId,omitempty"`
	ToolName   string          `json:"toolName,omitempty"`
	Args       json.RawMessage `json:"args,omitempty"`
	ArgsText   string          `json:"argsText,omitempty"`
	Result     json.RawMessage `json:"result,omitempty"`
	IsError    bool            `json:"isError,omitempty"`
	Name       string          `json:"name,omitempty"`
	// Data is a data part's value, or a file part's URL (a JSON string).
	Data       json.RawMessage `json:"data,omitempty"`
	SourceType string          `json:"sourceType,omitempty"`
	ID         string          `json:"id,omitempty"`
	URL        string          `json:"url,omitempty"`
	Title      string          `json:"title,omitempty"`
	Filename   string          `json:"filename,omitempty"`
	MimeType   string          `json:"mimeType,omitempty"`
	// Subagent, on a delegate tool-call part, names the child thread and
	// run the call started.
	Subagent *SubagentRef `json:"subagent,omitempty"`
	// Approval is a waiting tool call's approval when an agent asked for
	// it with options of its own (written by AppendParts, read by clients).
	Approval *PartApproval `json:"approval,omitempty"`
}

// PartApproval is a tool-call part's approval request, in assistant-ui's
// shape: its id (the call's) and the options the agent offered.
type PartApproval struct {
	ID      string           `json:"id"`
	Options []ApprovalOption `json:"options"`
}

// ApprovalOption is one option of an approval: the agent's id for it
// (an approval's option_id), its kind in assistant-ui's spelling
// (allow-once, allow-always, reject-once, reject-always) and its name.
type ApprovalOption struct {
	ID    string `json:"id"`
	Kind  string `json:"kind"`
	Label string `json:"label"`
}

// Repository is every message of a thread, parents before children and
// siblings in creation order, with the head (a leaf) the client shows.
type Repository struct {
	HeadID   *string     `json:"headId"`
	Messages []RepoEntry `json:"messages"`
}

// RepoEntry is a message with its parent's id (nil for a root).
type RepoEntry struct {
	Message  Message `json:"message"`
	ParentID *string `json:"parentId"`
}

// Siblings returns the ids of the messages that share id's parent, id
// included, in creation order, and id's index among them (-1 when id is
// not in the repository).
func (r *Repository) Siblings(id string) ([]string, int) {
	var parent *string
	found := false
	for _, m := range r.Messages {
		if m.Message.ID == id {
			parent, found = m.ParentID, true
			break
		}
	}
	if !found {
		return nil, -1
	}
	var out []string
	at := -1
	for _, m := range r.Messages {
		if samePtr(m.ParentID, parent) {
			if m.Message.ID == id {
				at = len(out)
			}
			out = append(out, m.Message.ID)
		}
	}
	return out, at
}

func samePtr(a, b *string) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// Snapshot is a thread's snapshot (GET …/messages).
type Snapshot struct {
	ThreadID     string      `json:"thread_id"`
	CheckpointID *string     `json:"checkpoint_id"`
	Messages     []Message   `json:"messages"`
	Repository   *Repository `json:"messageRepository"`
	ActiveRun    *ActiveRun  `json:"active_run"`
}

// ActiveRun names a thread's running run and the last event already
// folded into the snapshot: rejoin it with after = Sequence.
type ActiveRun struct {
	RunID     string `json:"run_id"`
	MessageID string `json:"message_id"`
	Sequence  int64  `json:"sequence"`
}

// Thread is a thread's row.
type Thread struct {
	ThreadID  string          `json:"thread_id"`
	Title     *string         `json:"title"`
	CreatedAt time.Time       `json:"created_at"`
	UpdatedAt time.Time       `json:"updated_at"`
	Metadata  json.RawMessage `json:"metadata"`
	// Parent is the delegate call that started a sub-agent's thread;
	// absent for a top-level thread.
	Parent *ThreadParent `json:"parent,omitempty"`
}

// ThreadParent names the delegate tool call a child thread was started by.
type ThreadParent struct {
	ThreadID   string `json:"thread_id"`
	RunID      string `json:"run_id"`
	MessageID  string `json:"message_id"`
	ToolCallID string `json:"tool_call_id"`
}

// SubagentRef is a delegate tool-call part's child thread and run.
type SubagentRef struct {
	ThreadID string `json:"thread_id"`
	RunID    string `json:"run_id"`
}

// ThreadPage is a page of the caller's threads, most recently updated
// first; NextCursor is nil on the last page.
type ThreadPage struct {
	Threads    []Thread `json:"threads"`
	NextCursor *string  `json:"next_cursor"`
}

// RunInfo is a run's row (GET …/runs/{run_id}).
type RunInfo struct {
	RunID           string          `json:"run_id"`
	ThreadID        string          `json:"thread_id"`
	Status          string          `json:"status"`
	UserMessageID   *string         `json:"user_message_id"`
	ParentMessageID *string         `json:"parent_message_id"`
	MessageID       string          `json:"message_id"`
	Model           string          `json:"model"`
	RunConfig       json.RawMessage `json:"run_config"`
	Usage           struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
	} `json:"usage"`
	Error *struct {
		Code    errcode.Code `json:"code"`
		Message string       `json:"message"`
	} `json:"error"`
	CreatedAt    time.Time  `json:"created_at"`
	FinishedAt   *time.Time `json:"finished_at"`
	DurationMS   *float64   `json:"duration_ms"`
	LastSequence int64      `json:"last_sequence"`
}

// Model is an entry of GET /models.
type Model struct {
	Name       string `json:"name"`
	Provider   string `json:"provider"`
	Model      string `json:"model"`
	Configured bool   `json:"configured"`
	Default    bool   `json:"default"`
}

// Tool is a server tool of GET /tools.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Approval    bool            `json:"approval"`
}

// Limits is GET /limits: what a client can check before it sends.
type Limits struct {
	MaxBodyBytes       int64    `json:"max_body_bytes"`
	MaxMessageBytes    int64    `json:"max_message_bytes"`
	MaxAttachmentBytes int64    `json:"max_attachment_bytes"`
	MaxAttachments     int      `json:"max_attachments"`
	AttachmentTypes    []string `json:"attachment_types"`
}

// Attachment is an uploaded file.
type Attachment struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	ContentType string `json:"contentType"`
	Size        int64  `json:"size"`
	URL         string `json:"url"`
}

// RunRequest starts a run (docs/api.md, "Request"). An empty
// ParentMessageID is sent as null (a new message on an empty thread); an
// empty SourceMessageID is left out.
type RunRequest struct {
	Message         *NewMessage `json:"message,omitempty"`
	ParentMessageID string      `json:"-"`
	SourceMessageID string      `json:"-"`
	RunConfig       *RunConfig  `json:"run_config,omitempty"`
	// OnDisconnect is "continue" (the default) or "cancel".
	OnDisconnect string       `json:"on_disconnect,omitempty"`
	ToolResults  []ToolResult `json:"tool_results,omitempty"`
	Approvals    []Approval   `json:"approvals,omitempty"`
}

// MarshalJSON writes the request with parent_message_id null when empty.
func (r RunRequest) MarshalJSON() ([]byte, error) {
	type plain RunRequest
	return json.Marshal(struct {
		plain
		Parent *string `json:"parent_message_id"`
		Source *string `json:"source_message_id,omitempty"`
	}{plain(r), nonEmpty(r.ParentMessageID), nonEmpty(r.SourceMessageID)})
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// NewMessage is a run's user message. Content is a string or a []Part of
// text and image parts. An ID makes the request idempotent, and lets
// RunStart retry it.
type NewMessage struct {
	ID          string          `json:"id,omitempty"`
	Content     any             `json:"content"`
	Attachments []AttachmentRef `json:"attachments,omitempty"`
}

// AttachmentRef names an upload in a message.
type AttachmentRef struct {
	ID string `json:"id"`
}

// RunConfig is a run's configuration, as a request sends it and the run
// resource shows it; zero fields are left out. Custom is a JSON object.
type RunConfig struct {
	Model       string          `json:"model,omitempty"`
	Temperature *float64        `json:"temperature,omitempty"`
	System      string          `json:"system,omitempty"`
	Custom      json.RawMessage `json:"custom,omitempty"`
	MaxSteps    int             `json:"max_steps,omitempty"`
	// Tools names the server tools the run may call (nil: all) and
	// declares client tools.
	Tools []ToolSpec `json:"tools,omitempty"`
}

// ToolSpec is a server tool by name, or a client tool (Client true) with
// its description and JSON Schema parameters. A server tool is written as
// its name; it is read as a name or an object.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Client      bool            `json:"client,omitempty"`
}

// UnmarshalJSON reads a tool name or a tool object; an object's unknown
// fields are refused.
func (t *ToolSpec) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		*t = ToolSpec{}
		return json.Unmarshal(b, &t.Name)
	}
	type plain ToolSpec
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var p plain
	if err := dec.Decode(&p); err != nil {
		return err
	}
	*t = ToolSpec(p)
	return nil
}

// MarshalJSON writes a server tool as its name, a client tool whole.
func (t ToolSpec) MarshalJSON() ([]byte, error) {
	if !t.Client && t.Description == "" && t.Parameters == nil {
		return json.Marshal(t.Name)
	}
	type plain ToolSpec
	return json.Marshal(plain(t))
}

// Usage is what a run's provider reported.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

// RunError is why a run failed.
type RunError struct {
	Code    errcode.Code `json:"code"`
	Message string       `json:"message"`
}

// ToolResult answers a client tool's call in a continuation.
type ToolResult struct {
	ToolCallID string `json:"tool_call_id"`
	Result     any    `json:"result"`
	IsError    bool   `json:"is_error,omitempty"`
}

// Approval approves or rejects a call of a tool that needs approval.
// OptionID chooses an option of an agent's permission request (the
// tool-call part's approval.options), whose kind approved agrees with.
type Approval struct {
	ToolCallID string `json:"tool_call_id"`
	Approved   bool   `json:"approved"`
	OptionID   string `json:"option_id,omitempty"`
	Reason     string `json:"reason,omitempty"`
}
