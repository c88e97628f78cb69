package thread

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/stream"
	"github.com/threadline/threadline/thread/errcode"
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
}

// MarshalJSON writes the API.md thread shape.
func (t *Thread) MarshalJSON() ([]byte, error) {
	md := t.Metadata
	if len(md) == 0 {
		md = json.RawMessage(`{}`)
	}
	return json.Marshal(struct {
		ID        uuid.UUID       `json:"thread_id"`
		Title     *string         `json:"title"`
		CreatedAt time.Time       `json:"created_at"`
		UpdatedAt time.Time       `json:"updated_at"`
		Metadata  json.RawMessage `json:"metadata"`
	}{t.ID, t.Title, t.CreatedAt.UTC(), t.UpdatedAt.UTC(), md})
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
	Model       string          `json:"model,omitempty"`
	Temperature *float64        `json:"temperature,omitempty"`
	System      string          `json:"system,omitempty"`
	Custom      json.RawMessage `json:"custom,omitempty"`
	// MaxSteps bounds an agent run's model calls (DefaultMaxSteps when 0).
	MaxSteps int `json:"max_steps,omitempty"`
	// Tools, when present, names the server tools the run may call (all
	// when absent) and declares the caller's client tools.
	Tools []RunTool `json:"tools,omitempty"`
}

// RunTool is one entry of run_config.tools: a server tool by name (a
// string, or an object with only "name"), or a client tool the caller
// declares, {"name","description","parameters","client":true}, which the
// service never runs.
type RunTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Client      bool            `json:"client,omitempty"`
}

// UnmarshalJSON reads a tool name or a tool object; an object's unknown
// fields are refused.
func (t *RunTool) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		*t = RunTool{}
		return json.Unmarshal(b, &t.Name)
	}
	type plain RunTool
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var p plain
	if err := dec.Decode(&p); err != nil {
		return err
	}
	*t = RunTool(p)
	return nil
}

// MarshalJSON writes a server tool as its name, a client tool whole.
func (t RunTool) MarshalJSON() ([]byte, error) {
	if !t.Client && t.Description == "" && t.Parameters == nil {
		return json.Marshal(t.Name)
	}
	type plain RunTool
	return json.Marshal(plain(t))
}

// Usage is what the provider reported.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

// RunError is why a run failed.
type RunError struct {
	Code    errcode.Code `json:"code"`
	Message string       `json:"message"`
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
	// Local is what the process that started the run keeps on the value
	// StartRun returned, for that caller alone (the engine's subscription
	// made before the run's first event); nil on runs read from a store.
	Local any
}

// MarshalJSON writes the run resource.
func (r *Run) MarshalJSON() ([]byte, error) {
	type out struct {
		ID            uuid.UUID  `json:"run_id"`
		ThreadID      uuid.UUID  `json:"thread_id"`
		Status        RunStatus  `json:"status"`
		UserMessageID *uuid.UUID `json:"user_message_id"`
		ParentID      uuid.UUID  `json:"parent_message_id"`
		MessageID     uuid.UUID  `json:"message_id"`
		Model         string     `json:"model"`
		Config        RunConfig  `json:"run_config"`
		Usage         *Usage     `json:"usage"`
		Error         *RunError  `json:"error"`
		CreatedAt     time.Time  `json:"created_at"`
		FinishedAt    *time.Time `json:"finished_at"`
		DurationMS    *float64   `json:"duration_ms"`
		LastSequence  int64      `json:"last_sequence"`
	}
	o := out{ID: r.ID, ThreadID: r.ThreadID, Status: r.Status, ParentID: r.ParentID, MessageID: r.MessageID,
		Model: r.Model, Config: r.Config, Usage: r.Usage, Error: r.Error, CreatedAt: r.CreatedAt.UTC(), LastSequence: r.LastSequence}
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
	return json.Marshal(o)
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
}

// RecordSize is what a record takes in memory, about: its fields' bytes
// and the struct's own. A page of the log is measured in it.
func RecordSize(r *Record) int {
	return recordOverhead + len(r.Text) + len(r.Code) + len(r.Status) + len(r.CallID) + len(r.Name) + len(r.Data)
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

// Store persists threads, checkpoints, runs and run event logs. Every method
// returns *errcode.Error values for domain failures: not_found for an
// unknown or foreign thread, run or message; conflict for a reused id;
// run_in_progress when a thread already has a running run. Other errors are
// infrastructure failures.
type Store interface {
	// ThreadCreate inserts t. It returns the existing thread and false if
	// the id exists for the same caller, conflict if it exists for another.
	ThreadCreate(ctx context.Context, t *Thread) (*Thread, bool, error)
	// ThreadGet returns not_found for an unknown id or another caller's
	// thread. Every caller is checked: "" is a caller like any other, whose
	// threads are those created with caller "".
	ThreadGet(ctx context.Context, caller string, id uuid.UUID) (*Thread, error)
	// ThreadOwner returns the caller that owns the thread, or not_found: for
	// the service's own work on a thread (recovering its run), which then
	// reads it as that caller. Never answer a request with it.
	ThreadOwner(ctx context.Context, id uuid.UUID) (string, error)
	// ThreadList returns up to limit threads, most recently updated first,
	// after the cursor (nil: from the start).
	ThreadList(ctx context.Context, caller string, limit int, after *ThreadCursor) ([]*Thread, error)
	// ThreadUpdate applies a PATCH; not_found as ThreadGet.
	ThreadUpdate(ctx context.Context, caller string, id uuid.UUID, u ThreadUpdate) (*Thread, error)
	// ThreadDelete removes the thread and everything in it; not_found as ThreadGet.
	ThreadDelete(ctx context.Context, caller string, id uuid.UUID) error
	// ThreadSetHead stores the client's branch; not_found as ThreadGet.
	ThreadSetHead(ctx context.Context, caller string, id, head uuid.UUID) error
	// CheckpointsAfter returns the thread's checkpoints with Seq > after, in Seq order.
	CheckpointsAfter(ctx context.Context, threadID uuid.UUID, after int64) ([]checkpoint.Node, error)
	// ThreadRead returns, in one round trip, the caller's thread, its
	// checkpoints with Seq > after in Seq order, and its running run (nil
	// when none): what a snapshot reads. not_found as ThreadGet.
	ThreadRead(ctx context.Context, caller string, id uuid.UUID, after int64) (*Thread, []checkpoint.Node, *Run, error)

	// RunCreate starts a run and commits it at once, in one round trip: the
	// user message, the running run with its first log record, the
	// thread's new end and head. not_found for an unknown or foreign
	// thread; run_in_progress names the active run; conflict when the user
	// message id already exists or the thread grew past in.Run.TreeSeq;
	// invalid_fork when the parent is not in the thread.
	RunCreate(ctx context.Context, in RunCreate, first Record) (*Run, error)

	// RunCreateAll writes the starts of several runs, each as RunCreate
	// would and firsts[i] the first record of ins[i], in one round trip and
	// one commit. It is all or nothing: any refusal returns its error and
	// writes nothing.
	RunCreateAll(ctx context.Context, ins []RunCreate, firsts []Record) error
	// RunComplete writes a whole run at once, in its final state, in one
	// transaction: RunCreate's checks, the user message, the ended run,
	// the reply, the compacted log and the thread's new end, head and
	// title. Errors as RunCreate.
	RunComplete(ctx context.Context, in RunCreate, fin RunFinish) error
	// RunGet returns the run; not_found. Its LastSequence is exact for a
	// run that has ended; for a running one it may be lower (the group
	// commit's records are not counted).
	RunGet(ctx context.Context, threadID, runID uuid.UUID) (*Run, error)
	// RunByUserMessage returns the run that appended the user message; not_found.
	RunByUserMessage(ctx context.Context, threadID, messageID uuid.UUID) (*Run, error)
	// RunActive returns the thread's running run, or not_found.
	RunActive(ctx context.Context, threadID uuid.UUID) (*Run, error)
	// RunEventsAppend durably appends, in one transaction, one segment of
	// consecutive records to each run's log, if every segment's claim is
	// still its run's; else it writes nothing and returns a
	// *ClaimLostError naming the runs whose claim is not.
	RunEventsAppend(ctx context.Context, segs []Segment) error
	// RunEventsAfter returns the logged records with Seq > after, in order.
	RunEventsAfter(ctx context.Context, runID uuid.UUID, after int64) ([]Record, error)
	// RunEventsPage is RunEventsAfter cut to a page: the first records
	// after after whose RecordSize adds up to at most maxBytes (at least
	// one record), holding nothing else in memory, and whether more
	// follow.
	RunEventsPage(ctx context.Context, runID uuid.UUID, after int64, maxBytes int) ([]Record, bool, error)
	// RunLogPurge keeps what RunEventsAppend writes bounded: records of
	// ended runs are freed (their RunFinish holds their whole log), and a
	// running run's older records are moved to rows of its own, so a long
	// run holds nothing shared. It reports whether something is left to
	// free later.
	RunLogPurge(ctx context.Context) (more bool, err error)
	// RunFinish ends a running run under in.Run.Claim; a
	// *ClaimLostError if the run is not running under that claim any more
	// (recovered, ended, or its thread deleted).
	RunFinish(ctx context.Context, in RunFinish) error
	// RunFinishAll ends several running runs, each as RunFinish would, in
	// one round trip and one commit. It is all or nothing: any refusal
	// returns its error and writes nothing.
	RunFinishAll(ctx context.Context, ins []RunFinish) error
	// RunLeaseRenew extends the leases of the runs still running under
	// the given claims. It returns those whose cancel was requested
	// elsewhere, and lost: those not running under their claim any more.
	RunLeaseRenew(ctx context.Context, claims []RunClaim, until time.Time) (cancels, lost []uuid.UUID, err error)
	// RunRequestCancel flags a running run for its owner to cancel; conflict
	// when it is no longer running.
	RunRequestCancel(ctx context.Context, runID uuid.UUID) error
	// RunClaimExpired takes over up to limit running runs whose lease ended
	// before now, setting owner and lease and taking a new claim (the old
	// claim's writes fail from then on, and any that committed before are
	// in the log the claimer reads next), and returns them.
	RunClaimExpired(ctx context.Context, owner string, now, until time.Time, limit int) ([]*Run, error)
}

// Attachments loads attachment bytes for the model. It may be nil.
type Attachments interface {
	// AttachmentData returns the content type and bytes; not_found for
	// another caller's or an unknown attachment.
	AttachmentData(ctx context.Context, caller string, id uuid.UUID) (*checkpoint.Attachment, []byte, error)
}

// Hub fans run events out to live subscribers. Publish never blocks; a
// subscriber that falls behind is dropped (its channel closes with Lagged
// true) and catches up from the log.
type Hub interface {
	Publish(runID uuid.UUID, events ...Event)
	Subscribe(runID uuid.UUID) stream.Subscription[Event]
	// End closes every subscription of the run.
	End(runID uuid.UUID)
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
		URL: "/api/v1/attachments/" + f.ID.String()}
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
