// Package step holds the types of one model call of an agent run (a step):
// the request, with the tools the model may call and the earlier steps of
// the turn (its tool calls and their results), and the typed deltas the
// reply streams as: text, reasoning, tool-call argument pieces, data.
//
// It imports nothing of the run engine, so that the engine (thread/engine)
// can declare the interface it calls with these types while package model,
// which imports thread, implements it:
//
//	type StepModel interface {
//		StreamStep(ctx context.Context, req step.Request, onDelta func(step.Delta) error) (step.Result, error)
//	}
package step

import (
	"encoding/json"

	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/model/tool"
)

// Request is one model call of an agent run.
type Request struct {
	// Messages starts with the system message when there is one and ends
	// with the message being answered: a user message, or the assistant
	// message of the turn in progress whose last tool calls have results.
	Messages []Message
	// Tools are the tools the model may call (server and client tools
	// alike); none means a plain chat reply.
	Tools []tool.Spec
	// Temperature is run_config.temperature; nil for the model's default.
	Temperature *float64
	// Call differs between calls on the same prompt (the run's sequence in
	// the thread), so the built-in model varies deterministically.
	Call int64
	// Approvals, on a continuation's first step, answer the calls the
	// model itself asked a person about (see PermissionPart).
	Approvals []Approval
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

// Message is one message the model sees. An assistant message is a whole
// agent turn in the order it happened, exactly as the snapshot holds it:
// text, reasoning and tool-call parts (with their results); providers get
// it cut into their own steps (the assistant's text and calls, then one
// tool message per result).
type Message struct {
	Role  checkpoint.Role
	Parts []Part
	// Attachments of a user message; text files reach the model as text,
	// images as image parts.
	Attachments []checkpoint.Attachment
}

// Part types.
const (
	PartText      = "text"
	PartImage     = "image"
	PartReasoning = "reasoning" // not sent back to providers
	PartToolCall  = "tool-call"
)

// Part is one part of a message. Parts of other types (data, source) are
// not sent to the model.
type Part struct {
	Type  string
	Text  string    // text, reasoning
	Image string    // image: a data: URL
	Call  *ToolCall // tool-call
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

// Kind is what a delta carries.
type Kind uint8

// Delta kinds.
const (
	// Text is a piece of the reply's text.
	Text Kind = iota + 1
	// Reasoning is a piece of the model's reasoning, where it streams it.
	Reasoning
	// ToolCallArgs is a piece of a tool call's arguments. The first delta
	// of a ToolCallID opens the call (its ArgsText may be empty); the
	// pieces of one call, joined, are its arguments. A provider that
	// cannot stream arguments sends them whole in one delta.
	ToolCallArgs
	// Data is an agent action that is not a call (a plan, files), sent
	// whole; the built-in model and external (ACP) agents make them.
	Data
	// ToolResult answers a call the model ran itself (an external agent
	// runs its own tools): Data is the result, IsError says it failed. A
	// call answered so is logged, never run by the engine. ToolCallID
	// names a call of this step or of the turn's earlier runs.
	ToolResult
)

// Delta is one piece of a streamed reply.
type Delta struct {
	Kind       Kind
	Text       string // Text, Reasoning
	ToolCallID string // ToolCallArgs
	ToolName   string // ToolCallArgs, on every piece
	ArgsText   string // ToolCallArgs
	Name       string // Data: the part's name ("plan")
	Data       json.RawMessage
	IsError    bool // ToolResult
}

// Stop reasons of a step.
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
// hands the continuation's answer back to the model (Request.Approvals)
// instead of running the call.
const PermissionPart = "permission"

// Approval is a person's answer to a call a PermissionPart asked about.
type Approval struct {
	ToolCallID string
	Approved   bool
	Reason     string
	// Permission is the value of the call's PermissionPart.
	Permission json.RawMessage
}

// Result describes a finished step.
type Result struct {
	Model            string // the provider's model name
	PromptTokens     int
	CompletionTokens int
	// StopReason is StopDone, StopLength or StopToolCalls.
	StopReason string
	// Waiting says the model ran the step's calls itself (ToolResult
	// deltas answered them) and those still unanswered wait for a person's
	// approval it asked for (PermissionPart): the run ends
	// requires_action and runs none of them.
	Waiting bool
	// ToolCalls are the step's calls, whole, in the order they opened:
	// their streamed pieces joined. The engine runs them (or asks for
	// approval) and calls the model again with their results.
	ToolCalls []ToolCall
}
