package thread

import (
	"context"
	"encoding/json"
	"regexp"

	"github.com/threadline/threadline/checkpoint"
)

// Model is a model the run calls: one method that streams one reply (an
// agent step) as typed deltas: text, reasoning, tool-call argument pieces,
// data. A request without Tools is a plain chat reply (the text-only path:
// a chat turn, a title); with Tools the model may call them, and the
// engine runs the calls and calls Stream again with their results, as
// langchaingo's llms.Model does with GenerateContent.
//
// Implementations call onDelta for every delta in order and stop when ctx
// is done; onDelta must not block and is not called after Stream returns.
// A model failure is returned as an *errcode.Error with a model code
// (errcode.ModelError, ModelTimeout, ModelAuth, ModelNotConfigured) so the
// run can report it; ctx.Err() when ctx ends; onDelta's own error is
// returned as is.
type Model interface {
	Stream(ctx context.Context, req ModelRequest, onDelta func(Delta) error) (ModelResult, error)
}

// ModelRequest is one model call: a chat reply or one step of an agent run.
type ModelRequest struct {
	// Messages starts with the system message when there is one and ends
	// with the message being answered: a user message, or the assistant
	// message of the turn in progress whose last tool calls have results.
	Messages []ModelMessage
	// Tools are the tools the model may call (server and client tools
	// alike); none means a plain chat reply.
	Tools []ToolSpec
	// Temperature is run_config.temperature; nil for the model's default.
	Temperature *float64
	// Call differs between calls on the same prompt (the run's sequence in
	// the thread), so the built-in model varies deterministically.
	Call int64
	// Approvals, on a continuation's first step, answer the calls the
	// model itself asked a person about (see PermissionPart).
	Approvals []ModelApproval
	// OnRawSent, when set, receives each line the model sends to its
	// provider when the exchange is a protocol of lines both ways (an ACP
	// agent's JSON-RPC); like OnRaw otherwise.
	OnRawSent func(line []byte)
	// OnRaw, when set, receives each non-empty line of the provider's response as
	// it arrives (SSE lines for OpenAI-compatible servers and Anthropic,
	// the JSON array's lines for Google, NDJSON for Ollama), before the
	// deltas it produces, for the run's raw events. The line is only valid
	// during the call; OnRaw must not block. Built-in models send none.
	OnRaw func(line []byte)
}

// ModelMessage is one message the model sees. An assistant message is a
// whole agent turn in the order it happened, exactly as the snapshot holds
// it: text, reasoning and tool-call parts (with their results); providers
// get it cut into their own steps (the assistant's text and calls, then one
// tool message per result).
type ModelMessage struct {
	Role  checkpoint.Role
	Parts []ModelPart
	// Attachments of a user message; text files reach the model as text,
	// images as image parts.
	Attachments []checkpoint.Attachment
}

// Model part types.
const (
	PartText      = "text"
	PartImage     = "image"
	PartReasoning = "reasoning" // not sent back to providers
	PartToolCall  = "tool-call"
)

// ModelPart is one part of a message the model sees. Parts of other types
// (data, source) are not sent to the model.
type ModelPart struct {
	Type  string
	Text  string    // text, reasoning
	Image string    // image: a data: URL
	Call  *ToolCall // tool-call
}

// ModelParts converts message parts to what a model sees: text, image,
// reasoning and tool calls with their results; data, source and file
// parts are not for the model.
func ModelParts(parts []checkpoint.Part) []ModelPart {
	out := make([]ModelPart, 0, len(parts))
	for _, p := range parts {
		switch p.Type {
		case checkpoint.PartText, checkpoint.PartImage, checkpoint.PartReasoning:
			out = append(out, ModelPart{Type: p.Type, Text: p.Text, Image: p.Image})
		case checkpoint.PartToolCall:
			out = append(out, ModelPart{Type: p.Type, Call: &ToolCall{ID: p.ToolCallID, Name: p.ToolName,
				ArgsText: p.ArgsText, Result: p.Result, IsError: p.IsError}})
		}
	}
	return out
}

// ToolCall is a call the model made, with its result once answered.
type ToolCall struct {
	ID       string
	Name     string
	ArgsText string // the arguments as the model wrote them (a JSON object)
	// Result is the tool's answer (a JSON value); nil while unanswered. An
	// unanswered call reaches the provider as an error result, "no result".
	Result  json.RawMessage
	IsError bool
}

// DeltaKind is what a delta carries.
type DeltaKind uint8

// Delta kinds.
const (
	// DeltaText is a piece of the reply's text.
	DeltaText DeltaKind = iota + 1
	// DeltaReasoning is a piece of the model's reasoning, where it streams it.
	DeltaReasoning
	// DeltaToolCallArgs is a piece of a tool call's arguments. The first
	// delta of a ToolCallID opens the call (its ArgsText may be empty); the
	// pieces of one call, joined, are its arguments. A provider that
	// cannot stream arguments sends them whole in one delta.
	DeltaToolCallArgs
	// DeltaData is an agent action that is not a call (a plan, files), sent
	// whole; the built-in model and external (ACP) agents make them.
	DeltaData
	// DeltaToolResult answers a call the model ran itself (an external
	// agent runs its own tools): Data is the result, IsError says it
	// failed. A call answered so is logged, never run by the engine.
	// ToolCallID names a call of this step or of the turn's earlier runs.
	DeltaToolResult
)

// Delta is one piece of a streamed reply.
type Delta struct {
	Kind       DeltaKind
	Text       string // DeltaText, DeltaReasoning
	ToolCallID string // DeltaToolCallArgs
	ToolName   string // DeltaToolCallArgs, on every piece
	ArgsText   string // DeltaToolCallArgs
	Name       string // DeltaData: the part's name ("plan")
	Data       json.RawMessage
	IsError    bool // DeltaToolResult
}

// Stop reasons of a model call.
const (
	StopDone      = "stop"
	StopLength    = "length"
	StopToolCalls = "tool-calls"
	// StopContentFilter: the model refused (assistant-ui's
	// incomplete/content-filter).
	StopContentFilter = "content-filter"
)

// PermissionPart is the name of the data part a model that runs its own
// tools (an ACP agent) sends for a call that waits for a person's
// approval: {"id","toolCallId","options":[{"optionId","name","kind"}],…}.
// The engine treats such a call like a server tool marked approval, and
// hands the continuation's answer back to the model (ModelRequest.Approvals)
// instead of running the call.
const PermissionPart = "permission"

// PermissionOption is one answer a PermissionPart offers: the agent's id
// for it, its name for people, and its kind (ACP's allow_once,
// allow_always, reject_once, reject_always).
type PermissionOption struct {
	ID   string
	Name string
	Kind string
}

// Permission kinds that approve a call; the reject kinds reject it.
const (
	PermissionAllowOnce    = "allow_once"
	PermissionAllowAlways  = "allow_always"
	PermissionRejectOnce   = "reject_once"
	PermissionRejectAlways = "reject_always"
)

// Approves reports whether choosing the option approves the call (an
// allow kind), rejects it (a reject kind), or neither says (known false).
func (o PermissionOption) Approves() (approved, known bool) {
	switch o.Kind {
	case PermissionAllowOnce, PermissionAllowAlways:
		return true, true
	case PermissionRejectOnce, PermissionRejectAlways:
		return false, true
	}
	return false, false
}

// ReadPermission reads a PermissionPart's value: the call it asks about
// and the options it offers; ok false when data is not one.
func ReadPermission(data json.RawMessage) (callID string, opts []PermissionOption, ok bool) {
	var v struct {
		ToolCallID string `json:"toolCallId"`
		Options    []struct {
			OptionID string `json:"optionId"`
			Name     string `json:"name"`
			Kind     string `json:"kind"`
		} `json:"options"`
	}
	if json.Unmarshal(data, &v) != nil || v.ToolCallID == "" {
		return "", nil, false
	}
	opts = make([]PermissionOption, len(v.Options))
	for i, o := range v.Options {
		opts[i] = PermissionOption{ID: o.OptionID, Name: o.Name, Kind: o.Kind}
	}
	return v.ToolCallID, opts, true
}

// ModelApproval is a person's answer to a call a PermissionPart asked about.
type ModelApproval struct {
	ToolCallID string
	Approved   bool
	// OptionID, when set, is the option of the PermissionPart the person
	// chose (its kind agrees with Approved); else the model picks the
	// first option that says Approved.
	OptionID string
	Reason   string
	// Permission is the value of the call's PermissionPart.
	Permission json.RawMessage
}

// ModelResult describes a finished model call.
type ModelResult struct {
	Model            string // the provider's model name
	PromptTokens     int
	CompletionTokens int
	// StopReason is StopDone, StopLength or StopToolCalls.
	StopReason string
	// Waiting says the model ran the step's calls itself (DeltaToolResult
	// deltas answered them) and those still unanswered wait for a person's
	// approval it asked for (PermissionPart): the run ends
	// requires_action and runs none of them.
	Waiting bool
	// ToolCalls are the step's calls, whole, in the order they opened:
	// their streamed pieces joined. The engine runs them (or asks for
	// approval) and calls the model again with their results.
	ToolCalls []ToolCall
}

// ToolSpec describes a tool, as GET /api/v1/tools lists it and as
// providers are told about it.
type ToolSpec struct {
	// Name matches ^[A-Za-z0-9_-]{1,64}$, the names every provider accepts.
	Name        string
	Description string
	// Parameters is a JSON Schema of the arguments object.
	Parameters json.RawMessage
	// Approval says a person must approve each call before it runs.
	Approval bool
}

// ToolOutput is what a tool answered: Value is a JSON value (a number, an
// object, a string with the error message when IsError).
type ToolOutput struct {
	Value   json.RawMessage
	IsError bool
}

var validToolName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// ValidToolName reports whether name is a tool name every provider accepts.
func ValidToolName(name string) bool { return validToolName.MatchString(name) }

// ModelInfo describes a model a client may pick.
type ModelInfo struct {
	Name       string
	Provider   string
	Model      string
	Configured bool
	Default    bool
}

// Models resolves run_config.model names.
type Models interface {
	// Resolve returns the model for name ("" means the default) and its
	// canonical name. An unknown name returns an invalid_request
	// *errcode.Error listing the names that exist. A known model whose key
	// is missing resolves to a Model whose Stream fails with
	// model_not_configured, so the failure reaches the client as an event.
	Resolve(name string) (Model, string, error)
	// List returns every model a client may pick.
	List() []ModelInfo
	// ContextBudget returns the model's context budget in bytes of text
	// (0 = unlimited); the run trims the oldest messages to fit.
	ContextBudget(name string) int
}
