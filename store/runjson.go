package store

// The storage codec of run rows: the run_config, usage and error columns
// (jsonb). run_config is what the request sent, kept in the request's
// field names; the API writes the same shape (api/wire), held to the same
// bytes by golden files.

import (
	"bytes"
	"encoding/json"

	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/thread"
)

type storedRunConfig struct {
	Model       string          `json:"model,omitempty"`
	Temperature *float64        `json:"temperature,omitempty"`
	System      string          `json:"system,omitempty"`
	Custom      json.RawMessage `json:"custom,omitempty"`
	MaxSteps    int             `json:"max_steps,omitempty"`
	Tools       []storedRunTool `json:"tools,omitempty"`
}

// storedRunTool is a server tool as its name, a client tool whole.
type storedRunTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Client      bool            `json:"client,omitempty"`
}

func (t storedRunTool) MarshalJSON() ([]byte, error) {
	if !t.Client && t.Description == "" && t.Parameters == nil {
		return json.Marshal(t.Name)
	}
	type plain storedRunTool
	return json.Marshal(plain(t))
}

func (t *storedRunTool) UnmarshalJSON(b []byte) error {
	if b = bytes.TrimSpace(b); len(b) > 0 && b[0] == '"' {
		*t = storedRunTool{}
		return json.Unmarshal(b, &t.Name)
	}
	type plain storedRunTool
	return json.Unmarshal(b, (*plain)(t))
}

func marshalRunConfig(c *thread.RunConfig) ([]byte, error) {
	s := storedRunConfig{Model: c.Model, Temperature: c.Temperature, System: c.System, Custom: c.Custom, MaxSteps: c.MaxSteps}
	if c.Tools != nil {
		s.Tools = make([]storedRunTool, len(c.Tools))
		for i, t := range c.Tools {
			s.Tools[i] = storedRunTool(t)
		}
	}
	return json.Marshal(s)
}

func unmarshalRunConfig(b []byte, c *thread.RunConfig) error {
	if string(b) == "{}" { // most runs': nothing to decode
		*c = thread.RunConfig{}
		return nil
	}
	var s storedRunConfig
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	*c = thread.RunConfig{Model: s.Model, Temperature: s.Temperature, System: s.System, Custom: s.Custom, MaxSteps: s.MaxSteps}
	if s.Tools != nil {
		c.Tools = make([]thread.RunTool, len(s.Tools))
		for i, t := range s.Tools {
			c.Tools[i] = thread.RunTool(t)
		}
	}
	return nil
}

type storedUsage struct {
	PromptTokens     int               `json:"prompt_tokens"`
	CompletionTokens int               `json:"completion_tokens"`
	Steps            []storedStepUsage `json:"steps,omitempty"`
}

// storedStepUsage is one step's usage (thread.StepUsage) in the usage
// column's "steps", which only a run's trace reads.
type storedStepUsage struct {
	From             int64  `json:"from"`
	PromptTokens     int    `json:"prompt_tokens"`
	CompletionTokens int    `json:"completion_tokens"`
	FinishReason     string `json:"finish_reason,omitempty"`
}

type storedRunError struct {
	Code    errcode.Code `json:"code"`
	Message string       `json:"message"`
}

func marshalUsage(u *thread.Usage) []byte {
	s := storedUsage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens}
	if len(u.Steps) > 0 {
		s.Steps = make([]storedStepUsage, len(u.Steps))
		for i, st := range u.Steps {
			s.Steps[i] = storedStepUsage(st)
		}
	}
	b, _ := json.Marshal(s) // ints and strings: always marshals
	return b
}

func unmarshalUsage(b []byte) (*thread.Usage, error) {
	var s storedUsage
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, err
	}
	u := &thread.Usage{PromptTokens: s.PromptTokens, CompletionTokens: s.CompletionTokens}
	if len(s.Steps) > 0 {
		u.Steps = make([]thread.StepUsage, len(s.Steps))
		for i, st := range s.Steps {
			u.Steps[i] = thread.StepUsage(st)
		}
	}
	return u, nil
}

func marshalRunError(e *thread.RunError) []byte {
	b, _ := json.Marshal((*storedRunError)(e)) // two strings: always marshals
	return b
}

func unmarshalRunError(b []byte) (*thread.RunError, error) {
	e := new(thread.RunError)
	if err := json.Unmarshal(b, (*storedRunError)(e)); err != nil {
		return nil, err
	}
	return e, nil
}
