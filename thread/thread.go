package thread

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/checkpoint/errcode"
)

// Thread is one conversation. Its row is mutable (title, metadata, head);
// its messages are immutable checkpoints.
type Thread struct {
	ID        uuid.UUID
	Caller    string
	Title     *string
	Metadata  json.RawMessage
	HeadID    uuid.UUID // uuid.Nil: the newest leaf
	LastSeq   int64     // Seq of the newest checkpoint
	CreatedAt time.Time
	UpdatedAt time.Time
	// Parent is the delegate call that started this thread as a
	// sub-agent's; nil for a top-level thread.
	Parent *ThreadParent
	// Depth is 0 for a top-level thread, its parent's + 1 for a child.
	Depth int
}

// ThreadParent names the delegate tool call a child thread was started
// by: the parent thread, its run, the run's assistant message and the
// call's id.
type ThreadParent struct {
	ThreadID   uuid.UUID
	RunID      uuid.UUID
	MessageID  uuid.UUID
	ToolCallID string
}

// ThreadUpdate is a PATCH: nil fields are left as they are.
type ThreadUpdate struct {
	Title    *string
	Metadata json.RawMessage
}

// ThreadCursor is a keyset position in a caller's thread list.
type ThreadCursor struct {
	UpdatedAt time.Time
	ID        uuid.UUID
}

// RunStatus is a run's lifecycle state.
type RunStatus string

const (
	RunRunning     RunStatus = "running"
	RunSucceeded   RunStatus = "succeeded"
	RunFailed      RunStatus = "failed"
	RunCancelled   RunStatus = "cancelled"
	RunInterrupted RunStatus = "interrupted"
	// RunRequiresAction ends a run whose turn waits for a person: a client
	// tool's result or an approval. A continuation run goes on with it.
	RunRequiresAction RunStatus = "requires_action"
)

// Done reports whether the status is final.
func (s RunStatus) Done() bool { return s != RunRunning && s != "" }

// RunConfig is the request's run_config.
type RunConfig struct {
	Model       string
	Temperature *float64
	System      string
	Custom      json.RawMessage
	// MaxSteps bounds an agent run's model calls (DefaultMaxSteps when 0).
	MaxSteps int
	// Tools, when present, names the server tools the run may call (all
	// when absent) and declares the caller's client tools.
	Tools []RunTool
}

// RunTool is one entry of run_config.tools: a server tool by name (a
// string, or an object with only "name"), or a client tool the caller
// declares, {"name","description","parameters","client":true}, which the
// service never runs.
type RunTool struct {
	Name        string
	Description string
	Parameters  json.RawMessage
	Client      bool
}

// Usage is what the provider reported.
type Usage struct {
	PromptTokens     int
	CompletionTokens int
	// Steps is the usage of each model call (step) of an agent run that
	// reported some, in order: what a run's trace puts on its chat spans.
	// The run's row keeps them beside its totals; the API's usage shows
	// only the totals. A run of one model call keeps none (its totals are
	// that call's).
	Steps []StepUsage
}

// StepUsage is one model call's usage. From is the sequence of the first
// record the step could log (its records, if any, are From and after, up
// to the next step's From).
type StepUsage struct {
	From             int64
	PromptTokens     int
	CompletionTokens int
	// FinishReason is the step's in the GenAI conventions' spelling
	// ("stop", "tool_call", "length", "content_filter", "error",
	// "cancelled"); empty when not known.
	FinishReason string
}

// RunError is why a run failed.
type RunError struct {
	Code    errcode.Code
	Message string
}

// Run is one model invocation on a thread.
type Run struct {
	ID            uuid.UUID
	ThreadID      uuid.UUID
	Status        RunStatus
	UserMessageID uuid.UUID // the user message the run appended; uuid.Nil for a regenerate
	ParentID      uuid.UUID // the user message the reply answers
	MessageID     uuid.UUID // the assistant message
	Model         string
	Config        RunConfig
	Usage         *Usage
	Error         *RunError
	Owner         string
	LeaseUntil    time.Time
	TreeSeq       int64 // the thread's last checkpoint Seq when the run started
	// Claim is the run's claim epoch: 0 when it starts, one more each time
	// recovery takes it over. Its owner's writes (log appends, the end,
	// lease renewals) succeed only while the stored claim is still this
	// one, so an owner that lost the run writes and publishes nothing more.
	Claim      int64
	CreatedAt  time.Time
	FinishedAt *time.Time
	// LastSequence is the last durable event sequence (filled by RunGet).
	LastSequence int64
}

// Record kinds in the event log.
const (
	KindSnapshot = "snapshot"
	KindToken    = "token"
	KindError    = "error"
	// Agent runs: a piece of reasoning; a piece of a tool call's
	// arguments (the first of a call opens it); a tool's answer; a data
	// part (a plan, files).
	KindReasoning  = "reasoning"
	KindToolCall   = "tool_call"
	KindToolResult = "tool_result"
	KindData       = "data"
	// KindSubagent wraps one event of a child run (a delegate call's
	// sub-agent) in the parent run's log: Record.Sub holds it.
	KindSubagent = "subagent"
)

// Record is one event as the log stores it: small, with no tree in it. A
// snapshot record names the tree by TreeSeq, the thread's last checkpoint
// Seq it showed, so it can be rebuilt exactly from immutable checkpoints.
type Record struct {
	Seq     int64
	Kind    string
	Text    string       // token or reasoning text, error message, tool_call arguments piece
	Code    errcode.Code // error code
	Status  RunStatus    // snapshot
	TreeSeq int64        // snapshot
	CallID  string       // tool_call, tool_result
	Name    string       // tool_call: the tool; data: the part's name
	// Data is a tool_result's result or a data record's value, a JSON value.
	Data    json.RawMessage
	IsError bool // tool_result
	// Sub is a subagent record's child event; CallID is then the
	// delegate call's id.
	Sub *SubRecord
}

// SubRecord is a child run's record as the parent's log holds it: the
// child's thread, run and assistant message, and the record as the
// child's own log holds it (its own sequence).
type SubRecord struct {
	ThreadID  uuid.UUID
	RunID     uuid.UUID
	MessageID uuid.UUID
	Record    Record
}

// RecordSize is what a record takes in memory, about: its fields' bytes
// and the struct's own. A page of the log is measured in it.
func RecordSize(r *Record) int {
	n := recordOverhead + len(r.Text) + len(r.Code) + len(r.Status) + len(r.CallID) + len(r.Name) + len(r.Data)
	if r.Sub != nil {
		n += RecordSize(&r.Sub.Record) + 48
	}
	return n
}

// recordOverhead is a Record's own size, rounded up to an allocation's.
const recordOverhead = 160

// Segment is consecutive records of one run's log, appended under the
// run's claim.
type Segment struct {
	RunID   uuid.UUID
	Claim   int64
	Records []Record
}

// RunClaim names a run and the claim its owner holds on it.
type RunClaim struct {
	RunID uuid.UUID
	Claim int64
}

// ClaimLostError is the store's answer to a write made under a claim that
// is no longer the run's (recovery took it over, or it ended or was
// deleted): nothing was written. Runs names the runs that were lost.
type ClaimLostError struct {
	Runs []uuid.UUID
}

func (e *ClaimLostError) Error() string {
	return fmt.Sprintf("claim lost on %d run(s): recovered, ended or deleted elsewhere", len(e.Runs))
}

// RunCreate is what the store writes atomically to start a run.
type RunCreate struct {
	Caller string
	Thread uuid.UUID
	// User is the new user message, or nil for a regenerate. Its Seq is
	// filled by the store.
	User *checkpoint.Node
	Run  Run
	// Create, when set, is a thread the caller named but that did not
	// exist: the write creates it first unless the id exists by then. A
	// new conversation's first run then costs one commit, not two.
	Create *Thread
}

// RunFinish is what the store writes atomically when a run ends: the
// assistant checkpoint, the run's whole log (compacted) and its final state.
type RunFinish struct {
	Run       *Run
	Status    RunStatus
	Assistant checkpoint.Node // Seq must be Run.TreeSeq+1
	Records   []Record        // every event of the run, sequence 1..n
	Model     string
	Usage     *Usage
	Error     *RunError
	// Title, when not empty, becomes the thread's title if it has none.
	Title string
}

// File is an uploaded attachment with its bytes.
type File struct {
	ID          uuid.UUID
	Caller      string
	Name        string
	ContentType string
	Size        int64
	Data        []byte
	CreatedAt   time.Time
}

// Wire returns the attachment as a user message carries it.
func (f *File) Wire() checkpoint.Attachment {
	a := checkpoint.Attachment{ID: f.ID.String(), Type: "file", Name: f.Name, ContentType: f.ContentType, Size: f.Size,
		URL: AttachmentURL(f.ID)}
	switch {
	case len(f.ContentType) > 6 && f.ContentType[:6] == "image/":
		a.Type = "image"
		a.Content = []checkpoint.Part{{Type: "image", Image: a.URL}}
	case len(f.ContentType) > 5 && f.ContentType[:5] == "text/", f.ContentType == "application/json":
		a.Type = "document"
		a.Content = []checkpoint.Part{{Type: "text", Text: string(f.Data)}}
	default:
		a.Content = []checkpoint.Part{}
	}
	a.Status.Type = "complete"
	return a
}
