package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"
	"time"

	"github.com/threadline/threadline/model/step"
	"github.com/threadline/threadline/model/tool"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/errcode"
)

// Model names the bench's models resolve.
const (
	agentModel = "bench-agent" // calls echo until it has `steps` results, then answers
	plainModel = "bench-plain" // the same tokens in one step, no tools
	echoTool   = "echo"
)

var (
	_ thread.Model   = (*script)(nil)
	_ thread.Stepper = (*script)(nil)
	_ thread.Tools   = (*timedTools)(nil)
	_ thread.Models  = models{}
)

// marks records, per run (its first user message's text), when each step's
// model call began and when each tool call returned, so the bench can
// measure the service's time between a tool result and the next call.
type marks struct {
	mu    sync.Mutex
	steps map[string][]time.Time
	tools map[string][]time.Time
}

func newMarks() *marks {
	return &marks{steps: map[string][]time.Time{}, tools: map[string][]time.Time{}}
}

func (m *marks) step(key string) {
	m.mu.Lock()
	m.steps[key] = append(m.steps[key], time.Now())
	m.mu.Unlock()
}

func (m *marks) tool(key string) {
	m.mu.Lock()
	m.tools[key] = append(m.tools[key], time.Now())
	m.mu.Unlock()
}

// gaps returns, for key, each tool return to the next step's start.
func (m *marks) gaps(key string) []time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	steps, tools := m.steps[key], m.tools[key]
	var out []time.Duration
	for i, t := range tools {
		if i+1 < len(steps) {
			out = append(out, steps[i+1].Sub(t))
		}
	}
	return out
}

// script is a deterministic, instant model: in agent mode a step sends
// `tokens` words and calls echo until the request holds `steps` tool
// results, then answers with `tokens` words; in plain mode it sends
// (steps+1)·tokens words at once.
type script struct {
	agent         bool
	steps, tokens int
	marks         *marks
}

func (m *script) Stream(context.Context, thread.ModelRequest, func(string) error) (thread.ModelResult, error) {
	return thread.ModelResult{}, errors.New("bench model: steps only")
}

// StreamStep implements thread.Stepper.
func (m *script) StreamStep(ctx context.Context, req step.Request, on func(step.Delta) error) (step.Result, error) {
	key, done := scan(req)
	m.marks.step(key)
	n, first := m.tokens, done*m.tokens
	if !m.agent {
		n *= m.steps + 1
	}
	res := step.Result{StopReason: step.StopDone, PromptTokens: 1, CompletionTokens: n}
	for i := range n {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		if err := on(step.Delta{Kind: step.Text, Text: word(first + i)}); err != nil {
			return res, err
		}
	}
	if m.agent && done < m.steps {
		id := fmt.Sprintf("call_%d", done+1)
		args := fmt.Sprintf(`{"key":%q,"n":%d}`, key, done+1)
		if err := on(step.Delta{Kind: step.ToolCallArgs, ToolCallID: id, ToolName: echoTool, ArgsText: args}); err != nil {
			return res, err
		}
		res.StopReason = step.StopToolCalls
	}
	return res, nil
}

// word is the run's i-th token: the same in an agent run and a plain run,
// and as hard to compress as text, so that stored sizes compare.
func word(i int) string {
	h := fnv.New32a()
	fmt.Fprint(h, i)
	return fmt.Sprintf(" %08x", h.Sum32())
}

// scan returns the run's key (its first user text) and how many tool
// results the request holds.
func scan(req step.Request) (key string, results int) {
	for _, msg := range req.Messages {
		for _, p := range msg.Parts {
			switch {
			case key == "" && p.Type == step.PartText:
				key = strings.TrimSpace(p.Text)
			case p.Type == step.PartToolCall && p.Call != nil && p.Call.Result != nil:
				results++
			}
		}
	}
	return key, results
}

// timedTools is echo: it answers its arguments and marks when it returned.
type timedTools struct{ marks *marks }

func (timedTools) Specs() []tool.Spec {
	return []tool.Spec{{Name: echoTool, Description: "Answers its arguments.", Parameters: json.RawMessage(`{"type":"object"}`)}}
}

func (t timedTools) Call(_ context.Context, name string, args json.RawMessage) (tool.Result, error) {
	if name != echoTool {
		return tool.ErrorResult("no tool " + name), nil
	}
	var a struct{ Key string }
	_ = json.Unmarshal(args, &a)
	defer t.marks.tool(a.Key)
	return tool.Result{Value: args}, nil
}

// models resolves the bench's two models.
type models struct{ agent, plain *script }

func (m models) Resolve(name string) (thread.Model, string, error) {
	switch name {
	case agentModel, "":
		return m.agent, agentModel, nil
	case plainModel:
		return m.plain, plainModel, nil
	}
	return nil, "", errcode.New(errcode.Invalid, "unknown model %q", name)
}

func (m models) List() []thread.ModelInfo {
	return []thread.ModelInfo{{Name: agentModel, Provider: "bench", Configured: true, Default: true}, {Name: plainModel, Provider: "bench", Configured: true}}
}

func (models) ContextBudget(string) int { return 0 }
