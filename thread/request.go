package thread

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/checkpoint/errcode"
)

// UserMessage is the message a run appends.
type UserMessage struct {
	ID            uuid.UUID // uuid.Nil: the service picks one
	Content       []checkpoint.Part
	AttachmentIDs []uuid.UUID
}

// RunRequest is POST /threads/{id}/runs/stream, decoded.
type RunRequest struct {
	Message      *UserMessage
	ParentID     uuid.UUID
	SourceID     uuid.UUID
	Config       RunConfig
	OnDisconnect string // "continue" (default) or "cancel"
	// ToolResults and Approvals continue a turn that waits (its run ended
	// requires_action): no Message, ParentID the turn's message.
	ToolResults []ToolResult
	Approvals   []Approval
	// Child, set by the engine only (never decoded from a request), makes
	// the run's new thread a sub-agent's: its parent, depth and title.
	Child *ChildThread
}

// ChildThread is what a delegate call's new thread is created with.
type ChildThread struct {
	Parent ThreadParent
	Depth  int
	Title  *string
}

// ToolResult answers a client tool's call.
type ToolResult struct {
	CallID  string
	Result  json.RawMessage
	IsError bool
}

// Approval approves or rejects a call of a tool marked approval.
type Approval struct {
	CallID   string
	Approved bool
	// OptionID chooses one of the options of an agent's permission (a
	// PermissionPart) by its id; empty for a plain approve or reject.
	OptionID string
	Reason   string
}

// Continuation reports whether the request continues a waiting turn.
func (r *RunRequest) Continuation() bool { return len(r.ToolResults) > 0 || len(r.Approvals) > 0 }

// Validate checks the request's own shape; invalid_request names the field.
func (r *RunRequest) Validate() error {
	switch r.OnDisconnect {
	case "", "continue", "cancel":
	default:
		return errcode.New(errcode.Invalid, "on_disconnect must be \"continue\" or \"cancel\", got %q", r.OnDisconnect)
	}
	if r.Config.Temperature != nil && (*r.Config.Temperature < 0 || *r.Config.Temperature > 2) {
		return errcode.New(errcode.Invalid, "run_config.temperature must be between 0 and 2")
	}
	if err := r.Config.validateAgent(); err != nil {
		return err
	}
	if err := r.validateAnswers(); err != nil {
		return err
	}
	if bytes.Contains(r.Config.Custom, []byte(`\u0000`)) {
		// jsonb holds no U+0000; a client's own data is refused, not changed.
		return errcode.New(errcode.Invalid, "run_config.custom must not contain \\u0000")
	}
	if m := r.Message; m != nil {
		if len(m.Content) == 0 && len(m.AttachmentIDs) == 0 {
			return errcode.New(errcode.Invalid, "message.content must not be empty")
		}
		for i, p := range m.Content {
			switch p.Type {
			case "text":
				if !utf8.ValidString(p.Text) {
					return errcode.New(errcode.Invalid, "message.content[%d].text is not valid UTF-8", i)
				}
			case "image":
				if p.Image == "" {
					return errcode.New(errcode.Invalid, "message.content[%d].image must not be empty", i)
				}
			default:
				return errcode.New(errcode.Invalid, "message.content[%d].type must be \"text\" or \"image\", got %q", i, p.Type)
			}
		}
	}
	return nil
}

// Clean makes the request's texts storable: a U+0000 in the message or
// the system prompt becomes U+FFFD (see storable), before the message id's
// idempotency compares contents.
func (r *RunRequest) Clean() {
	r.Config.System = Storable(r.Config.System)
	if m := r.Message; m != nil {
		var parts []checkpoint.Part
		for i, p := range m.Content {
			if t := Storable(p.Text); t != p.Text {
				if parts == nil {
					parts = append([]checkpoint.Part(nil), m.Content...)
				}
				parts[i].Text = t
			}
		}
		if parts != nil {
			mm := *m
			mm.Content = parts
			r.Message = &mm
		}
	}
}

// validateAnswers checks a continuation's own shape; invalid_request
// names the field.
func (r *RunRequest) validateAnswers() error {
	if !r.Continuation() {
		return nil
	}
	if r.Message != nil || r.SourceID != uuid.Nil {
		return errcode.New(errcode.Invalid, "tool_results and approvals continue a turn: they take no message and no source_message_id")
	}
	seen := map[string]bool{}
	for i, a := range r.ToolResults {
		if a.CallID == "" || seen[a.CallID] {
			return errcode.New(errcode.Invalid, "tool_results[%d].tool_call_id must name a call once", i)
		}
		seen[a.CallID] = true
	}
	for i, a := range r.Approvals {
		if a.CallID == "" || seen[a.CallID] {
			return errcode.New(errcode.Invalid, "approvals[%d].tool_call_id must name a call once", i)
		}
		if !utf8.ValidString(a.Reason) {
			return errcode.New(errcode.Invalid, "approvals[%d].reason is not valid UTF-8", i)
		}
		if !utf8.ValidString(a.OptionID) {
			return errcode.New(errcode.Invalid, "approvals[%d].option_id is not valid UTF-8", i)
		}
		seen[a.CallID] = true
	}
	return nil
}
