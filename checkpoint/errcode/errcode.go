// Package errcode is Threadline's one error vocabulary: the codes of the
// wire contract (API.md) as typed constants, and the one error type that
// carries them through every layer.
//
// The store maps database errors onto codes once (store.interpretError) and
// the api maps codes onto HTTP statuses once; everything in between wraps
// errors with short context and never matches code strings by hand.
//
// errors.Is compares *Error values by identity: two errors with the same
// code are different errors. A caller that cares about the class of an
// error asks Of(err) == NotFound; one that needs a particular error
// compares it with errors.Is against an exported sentinel.
//
// The package imports nothing of the project, so every package may use it.
package errcode

import (
	"errors"
	"fmt"

	"github.com/google/uuid"
)

// Code is an error code as the wire contract spells it.
type Code string

// The codes of API.md's error table, the service's own ones, and the codes
// of a run's error event.
const (
	// Invalid is a malformed request: bad JSON, wrong types, unknown
	// fields, a bad UUID, a value out of range.
	Invalid Code = "invalid_request"
	// Unauthenticated is missing or bad credentials.
	Unauthenticated Code = "unauthenticated"
	// NotFound is an unknown thread, run, message or attachment, or one
	// that belongs to another caller.
	NotFound Code = "not_found"
	// Conflict is a reused id, or a state change that no longer applies.
	Conflict Code = "conflict"
	// RunInProgress is a second run on a busy thread; the error names the
	// active run (RunID, MessageID).
	RunInProgress Code = "run_in_progress"
	// TooLarge is a body, message or attachment over its limit.
	TooLarge Code = "too_large"
	// UnsupportedMediaType is a body of a content type that is not accepted.
	UnsupportedMediaType Code = "unsupported_media_type"
	// InvalidFork breaks a fork rule: parent not in the thread, edit of a
	// non-user message, source not a child of parent, regenerate under an
	// assistant message.
	InvalidFork Code = "invalid_fork"
	// RateLimited is a caller over its request rate.
	RateLimited Code = "rate_limited"
	// MethodNotAllowed is a known path asked with a method it lacks.
	MethodNotAllowed Code = "method_not_allowed"
	// Unavailable is a failure the caller may retry: the service is
	// draining, or a write could not be made durable.
	Unavailable Code = "unavailable"
	// Internal is any error that carries no code.
	Internal Code = "internal"

	// ModelNotConfigured is a model whose API key or host is not set; the
	// message says which variable to set.
	ModelNotConfigured Code = "model_not_configured"
	// ModelAuth is a provider that rejected the API key.
	ModelAuth Code = "model_auth"
	// ModelTimeout is a model that did not answer in time.
	ModelTimeout Code = "model_timeout"
	// ModelError is any other provider failure.
	ModelError Code = "model_error"

	// RunInterrupted ends, as a stream's error event, a run that recovery
	// ended because the process running it stopped (or could not write
	// its end) before it did.
	RunInterrupted Code = "run_interrupted"
)

// Codes returns every code, so the edges can check they map each one.
func Codes() []Code {
	return []Code{Invalid, Unauthenticated, NotFound, Conflict, RunInProgress, TooLarge,
		UnsupportedMediaType, InvalidFork, RateLimited, MethodNotAllowed, Unavailable, Internal,
		ModelNotConfigured, ModelAuth, ModelTimeout, ModelError, RunInterrupted}
}

// IsModel reports whether c is the code of a model failure, which a run
// reports as an error event rather than as a failed request.
func (c Code) IsModel() bool {
	switch c {
	case ModelNotConfigured, ModelAuth, ModelTimeout, ModelError:
		return true
	}
	return false
}

// Error is a coded error. Its Message is safe to show to API callers.
type Error struct {
	Code    Code
	Message string
	// RunID and MessageID name the run (and its assistant message) an
	// error concerns, such as the active run of a run_in_progress
	// conflict; uuid.Nil when the error names none.
	RunID     uuid.UUID
	MessageID uuid.UUID
	// Field names the request field an invalid_request refuses, when
	// there is one ("message.content[0].text", "file name").
	Field string
}

// New returns a coded error with a formatted message.
func New(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Error returns the code and the message.
func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// Of returns the code of the first *Error in err's chain, Internal when
// there is none, and "" for a nil err.
func Of(err error) Code {
	if err == nil {
		return ""
	}
	if e, ok := As(err); ok {
		return e.Code
	}
	return Internal
}

// As returns the first *Error in err's chain.
func As(err error) (*Error, bool) {
	var e *Error
	if errors.As(err, &e) && e != nil {
		return e, true
	}
	return nil, false
}

// Message returns the caller-safe message of the first *Error in err's
// chain, or "internal error": the text of an uncoded error may hold
// details callers must not see.
func Message(err error) string {
	if e, ok := As(err); ok {
		return e.Message
	}
	return "internal error"
}
