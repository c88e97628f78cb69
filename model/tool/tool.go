// Package tool holds the server tools an agent run may call: the [Tool]
// interface, the [Registry] that names them (what GET /api/v1/tools lists)
// and the built-in tools that need nothing: calculator, clock and wait.
//
// A tool answers with a [thread.ToolOutput]: a JSON value and whether it is an error
// the model should read ("division by zero"). Failures of the call itself
// (a timeout, a crashed MCP server, a panic) also become isError results in
// [Registry.Call], so the run goes on; only the end of the caller's context
// is returned as an error.
package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/thread"
)

// Tool is a server tool. Call runs it on args, a JSON object the model
// wrote; it must return when ctx ends. A problem with the arguments or the
// tool's own work is an IsError result; a returned error means the call
// could not be made at all (the registry reports it to the model as an
// IsError result too).
type Tool interface {
	Spec() thread.ToolSpec
	Call(ctx context.Context, args json.RawMessage) (thread.ToolOutput, error)
}

// Timeouter is implemented by tools that want their own per-call timeout
// instead of the registry's.
type Timeouter interface {
	Timeout() time.Duration
}

// DefaultTimeout bounds one call unless the registry or the tool says
// otherwise.
const DefaultTimeout = 30 * time.Second

// ErrorResult is an IsError result whose value is msg as a JSON string.
func ErrorResult(msg string) thread.ToolOutput {
	b, _ := json.Marshal(msg)
	return thread.ToolOutput{Value: b, IsError: true}
}

// ValueResult is a result holding v encoded as JSON; a value that cannot
// be encoded is an IsError result saying so.
func ValueResult(v any) thread.ToolOutput {
	b, err := json.Marshal(v)
	if err != nil {
		return ErrorResult("the tool's result could not be encoded: " + err.Error())
	}
	return thread.ToolOutput{Value: b}
}

// Registry names the server tools. It is safe for concurrent use.
type Registry struct {
	timeout time.Duration

	mu    sync.RWMutex
	tools map[string]Tool
}

// NewRegistry returns an empty registry whose calls time out after
// timeout (DefaultTimeout when 0 or less).
func NewRegistry(timeout time.Duration) *Registry {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &Registry{timeout: timeout, tools: map[string]Tool{}}
}

// Add registers tools. It returns an invalid_request *errcode.Error for
// a name providers refuse, a parameters value that is not a JSON object,
// or a name already taken; nothing is added then.
func (r *Registry) Add(tools ...Tool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[string]bool{}
	for _, t := range tools {
		s := t.Spec()
		if !thread.ValidToolName(s.Name) {
			return errcode.New(errcode.Invalid, "tool name %q: want 1 to 64 letters, digits, _ or -", s.Name)
		}
		if !isObject(s.Parameters) {
			return errcode.New(errcode.Invalid, "tool %q: parameters must be a JSON Schema object", s.Name)
		}
		if _, ok := r.tools[s.Name]; ok || seen[s.Name] {
			return errcode.New(errcode.Invalid, "tool %q is defined twice", s.Name)
		}
		seen[s.Name] = true
	}
	for _, t := range tools {
		r.tools[t.Spec().Name] = t
	}
	return nil
}

func isObject(b json.RawMessage) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(b, &m) == nil && m != nil
}

// Specs lists every tool's spec, sorted by name.
func (r *Registry) Specs() []thread.ToolSpec {
	r.mu.RLock()
	out := make([]thread.ToolSpec, 0, len(r.tools))
	for _, t := range r.tools {
		out = append(out, t.Spec())
	}
	r.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Get returns the tool named name.
func (r *Registry) Get(name string) (Tool, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.tools[name]
	return t, ok
}

// Names returns the sorted tool names.
func (r *Registry) Names() []string {
	r.mu.RLock()
	out := make([]string, 0, len(r.tools))
	for n := range r.tools {
		out = append(out, n)
	}
	r.mu.RUnlock()
	slices.Sort(out)
	return out
}

// Call runs the tool named name on args with the tool's timeout. Every
// outcome but the end of ctx is a result the model reads: an unknown tool,
// arguments that are not a JSON object, a timeout, a tool's error or panic
// are IsError results with a message. When ctx ends (the run was
// cancelled) Call returns as soon as the tool does, with ctx's error.
func (r *Registry) Call(ctx context.Context, name string, args json.RawMessage) (thread.ToolOutput, error) {
	t, ok := r.Get(name)
	if !ok {
		return ErrorResult(fmt.Sprintf("there is no tool %q", name)), nil
	}
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	if !isObject(args) {
		return ErrorResult(fmt.Sprintf("the arguments of %s must be a JSON object, got %.200s", name, args)), nil
	}
	timeout := r.timeout
	if tt, ok := t.(Timeouter); ok && tt.Timeout() > 0 {
		timeout = tt.Timeout()
	}
	cctx, cancel := context.WithTimeoutCause(ctx, timeout, errTimeout)
	defer cancel()
	res, err := safeCall(cctx, t, args)
	switch {
	case ctx.Err() != nil:
		return ErrorResult("cancelled"), ctx.Err()
	case context.Cause(cctx) == errTimeout:
		return ErrorResult(fmt.Sprintf("%s timed out after %s", name, timeout)), nil
	case err != nil:
		return ErrorResult(err.Error()), nil
	case !json.Valid(res.Value):
		return ErrorResult(name + " answered something that is not JSON"), nil
	}
	return res, nil
}

var errTimeout = fmt.Errorf("tool call timed out")

// safeCall runs t, turning a panic into an error so that one broken tool
// does not take the process down.
func safeCall(ctx context.Context, t Tool, args json.RawMessage) (res thread.ToolOutput, err error) {
	defer func() {
		if v := recover(); v != nil {
			res, err = thread.ToolOutput{}, fmt.Errorf("%s failed: %v", t.Spec().Name, v)
		}
	}()
	return t.Call(ctx, args)
}

// withApproval marks a tool as needing approval.
type withApproval struct{ Tool }

func (w withApproval) Spec() thread.ToolSpec {
	s := w.Tool.Spec()
	s.Approval = true
	return s
}

func (w withApproval) Timeout() time.Duration {
	if tt, ok := w.Tool.(Timeouter); ok {
		return tt.Timeout()
	}
	return 0
}

// NeedApproval returns t with its spec's Approval set, for tools a
// deployment wants a person to approve.
func NeedApproval(t Tool) Tool { return withApproval{t} }
