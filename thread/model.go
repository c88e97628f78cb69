package thread

import (
	"context"

	"github.com/threadline/threadline/checkpoint"
)

// ModelMessage is one message the model sees.
type ModelMessage struct {
	Role checkpoint.Role
	// Parts are text and image parts. Image parts carry Image as a data: URL
	// or an attachment URL the model resolves through AttachmentLoader.
	Parts []checkpoint.Part
	// Attachments of a user message; text files reach the model as text,
	// images as image parts.
	Attachments []checkpoint.Attachment
}

// ModelRequest is one model call. Messages starts with the system message
// when run_config.system is set and ends with the message being answered.
type ModelRequest struct {
	Messages    []ModelMessage
	Temperature *float64
	// Call is a number that differs between calls on the same prompt (the
	// run's sequence within the thread), so the built-in model can vary its
	// text deterministically.
	Call int64
}

// ModelResult describes a finished model call.
type ModelResult struct {
	Model            string // the provider's model name
	PromptTokens     int
	CompletionTokens int
	// StopReason is "stop" or "length".
	StopReason string
}

// Model streams one reply. Implementations call onToken for every token in
// order and stop when ctx is done. A model failure is returned as an
// *errcode.Error with a model code (errcode.ModelError, ModelTimeout,
// ModelAuth, ModelNotConfigured) so the run can report it; onToken's own
// error is returned as is.
type Model interface {
	Stream(ctx context.Context, req ModelRequest, onToken func(text string) error) (ModelResult, error)
}

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
