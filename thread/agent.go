package thread

import (
	"context"
	"encoding/json"

	"github.com/google/uuid"
	"github.com/threadline/threadline/checkpoint/errcode"
)

// Tools runs the server tools agent runs may call (model/tool's Registry). Call
// answers every failure of a tool as an IsError result; its error is only
// ctx's, when the run is cancelled.
type Tools interface {
	Specs() []ToolSpec
	Call(ctx context.Context, name string, args json.RawMessage) (ToolOutput, error)
}

// RawSink keeps what a run's provider and tools exchanged, for audit: the
// provider's response lines ("provider", a JSON string) and each tool
// call's input and output ("tool", {"tool_call_id","tool_name","input",
// "output","is_error"}), each with the sequence of the event it produced.
// Append must not block and owns its failures; payload is the sink's.
type RawSink interface {
	Append(runID uuid.UUID, seq int64, kind string, payload json.RawMessage)
}

// DefaultMaxSteps is the steps of an agent run when run_config.max_steps
// is not set.
const DefaultMaxSteps = 8

// Allows reports whether the run may call the server tool name: every
// tool when run_config.tools is absent, else those it names.
func (c *RunConfig) Allows(name string) bool {
	if c.Tools == nil {
		return true
	}
	for _, t := range c.Tools {
		if t.Name == name && !t.Client {
			return true
		}
	}
	return false
}

// MaxStepsLimit is the most steps run_config.max_steps may ask for.
const MaxStepsLimit = 100

// validateAgent checks run_config's agent fields; invalid_request names
// the field.
func (c *RunConfig) validateAgent() error {
	if c.MaxSteps < 0 || c.MaxSteps > MaxStepsLimit {
		return errcode.New(errcode.Invalid, "run_config.max_steps must be between 1 and %d, got %d", MaxStepsLimit, c.MaxSteps)
	}
	seen := map[string]bool{}
	for i, t := range c.Tools {
		if !ValidToolName(t.Name) {
			return errcode.New(errcode.Invalid, "run_config.tools[%d].name must be 1 to 64 letters, digits, _ or -, got %q", i, t.Name)
		}
		if seen[t.Name] {
			return errcode.New(errcode.Invalid, "run_config.tools[%d]: %q is named twice", i, t.Name)
		}
		seen[t.Name] = true
		if !t.Client && (t.Description != "" || t.Parameters != nil) {
			return errcode.New(errcode.Invalid, "run_config.tools[%d]: a server tool is named only; a client tool needs \"client\": true", i)
		}
		if t.Client && t.Parameters != nil && !isJSONObject(t.Parameters) {
			return errcode.New(errcode.Invalid, "run_config.tools[%d].parameters must be a JSON Schema object", i)
		}
	}
	return nil
}

func isJSONObject(b json.RawMessage) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(b, &m) == nil && m != nil
}

// IsClient reports whether name is a client tool the run declared.
func (c *RunConfig) IsClient(name string) bool {
	for _, t := range c.Tools {
		if t.Name == name && t.Client {
			return true
		}
	}
	return false
}

// ClientSpecs returns the run's client tools as the model is told them.
func (c *RunConfig) ClientSpecs() []ToolSpec {
	var out []ToolSpec
	for _, t := range c.Tools {
		if t.Client {
			params := t.Parameters
			if params == nil {
				params = json.RawMessage(`{"type":"object"}`)
			}
			out = append(out, ToolSpec{Name: t.Name, Description: t.Description, Parameters: params})
		}
	}
	return out
}
