// Package model owns the models a run can call: the built-in deterministic
// model and langchaingo providers, and the registry that names them.
//
// The built-in model needs no keys and no network: its reply is a pure
// function of the last user message and the call number (see [Builtin]).
// Provider models (OpenAI and OpenAI-compatible servers such as vLLM,
// Anthropic, Google AI, Ollama) are reached through langchaingo; the
// [Registry] names them from the environment and an optional models file.
//
// # Testing the error path without keys
//
// When the last user message starts with "/fail ", the built-in model
// streams three tokens and then fails with the code that follows:
//
//	/fail model_error           -> model_error
//	/fail model_timeout         -> model_timeout
//	/fail model_auth            -> model_auth
//	/fail model_not_configured  -> model_not_configured
//
// Any other word after "/fail " fails with model_error. This exists so the
// failure path of a run (error event, failed run, incomplete message) can be
// tested end to end with zero keys.
package builtin

import (
	"context"
	"strings"
	"time"
	"unsafe"

	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/thread"
)

var _ thread.Model = (*Builtin)(nil)

// Builtin is the zero-key deterministic model. Its reply is Tokens tokens,
// each a space and four pseudo-random lowercase letters (5 bytes), drawn
// from a splitmix64 generator seeded with the FNV-1a hash of the last user
// message's text and the request's Call. With Delay > 0 token i is sent at
// start + (i+1)*Delay, from a goroutine that every paced stream of the
// process shares (see pace), so onDelta must not block; with Delay == 0
// tokens are sent back to back on the caller's goroutine with no timer.
//
// Stream allocates once per block of 256 tokens and hands out substrings, so
// pushing tokens costs no allocation per token.
type Builtin struct {
	Tokens int
	Delay  time.Duration
	// Pacer paces its tokens when Delay is set (nil: each stream is
	// paced on its caller's goroutine).
	Pacer *Pacer
	// Name is ModelResult.Model; BuiltinName when empty.
	Name string
}

// BuiltinName is the registry name and ModelResult.Model of the built-in model.
const BuiltinName = "builtin"

// DefaultBuiltinTokens is the reply length of the built-in model unless
// configured (THREADLINE_BUILTIN_TOKENS).
const DefaultBuiltinTokens = 200

// failTokens is how many tokens a "/fail " prompt streams before failing.
const failTokens = 3

// tokenLen is the byte length of one built-in token.
const tokenLen = 5

// blockTokens is how many tokens Stream renders per allocation.
const blockTokens = 256

// NewBuiltin returns the built-in model: tokens per reply (negative means
// 0) and a delay per token (0: no sleeping at all).
func NewBuiltin(tokens int, delay time.Duration) *Builtin {
	return &Builtin{Tokens: max(tokens, 0), Delay: max(delay, 0)}
}

// BuiltinText is the reply the built-in model streams for lastUser (the
// text of the last user message) on call, with tokens tokens.
func BuiltinText(lastUser string, call int64, tokens int) string {
	if tokens <= 0 {
		return ""
	}
	s := seed(lastUser, call)
	b := make([]byte, tokens*tokenLen)
	fill(&s, b)
	return string(b)
}

// seed hashes the prompt with FNV-1a (64 bit) and mixes in the call.
func seed(prompt string, call int64) uint64 {
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	h := uint64(offset)
	for i := 0; i < len(prompt); i++ {
		h ^= uint64(prompt[i])
		h *= prime
	}
	return h ^ uint64(call)*0x9e3779b97f4a7c15
}

// next is one splitmix64 step.
func next(s *uint64) uint64 {
	*s += 0x9e3779b97f4a7c15
	z := *s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// fill writes len(b)/5 tokens into b.
func fill(s *uint64, b []byte) {
	for i := 0; i+tokenLen <= len(b); i += tokenLen {
		v := next(s)
		b[i] = ' '
		b[i+1] = 'a' + byte(v%26)
		v /= 26
		b[i+2] = 'a' + byte(v%26)
		v /= 26
		b[i+3] = 'a' + byte(v%26)
		v /= 26
		b[i+4] = 'a' + byte(v%26)
	}
}

// tokenSource renders a reply's tokens a block at a time; at(i) must be
// called for i = 0, 1, 2, … in order.
type tokenSource struct {
	s     uint64
	n     int
	block []byte
}

func (t *tokenSource) at(i int) string {
	k := i % blockTokens
	if k == 0 {
		t.block = make([]byte, min(t.n-i, blockTokens)*tokenLen)
		fill(&t.s, t.block)
	}
	// The block is never written again, so its substrings are immutable.
	return unsafe.String(&t.block[k*tokenLen], tokenLen)
}

// failCode returns the error code a "/fail " prompt asks for, or "".
func failCode(prompt string) errcode.Code {
	rest, ok := strings.CutPrefix(prompt, "/fail ")
	if !ok {
		return ""
	}
	word, _, _ := strings.Cut(strings.TrimSpace(rest), " ")
	if c := errcode.Code(word); c.IsModel() {
		return c
	}
	return errcode.ModelError
}

// Stream implements thread.Model: the words as text deltas; the words
// model calls no tools. It returns ctx.Err() when ctx ends between two
// tokens, and onDelta's error as is.
func (m *Builtin) Stream(ctx context.Context, req thread.ModelRequest, onDelta func(thread.Delta) error) (thread.ModelResult, error) {
	return m.stream(ctx, lastUserText(req), req.Call, promptTokens(req), onDelta)
}

func (m *Builtin) stream(ctx context.Context, prompt string, call int64, ptoks int, onDelta func(thread.Delta) error) (thread.ModelResult, error) {
	n := m.Tokens
	fail := failCode(prompt)
	if fail != "" {
		n = failTokens
	}
	if err := ctx.Err(); err != nil {
		return thread.ModelResult{}, err
	}
	if m.Delay > 0 {
		// Its own variable: the closure moves it to the heap, and the
		// unpaced path below should not pay for that.
		paced := &tokenSource{s: seed(prompt, call), n: n}
		send := func(i int) error { return onDelta(thread.Delta{Kind: thread.DeltaText, Text: paced.at(i)}) }
		if err := paceWith(ctx, m.Pacer, n, m.Delay, send); err != nil {
			return thread.ModelResult{}, err
		}
	} else {
		toks := tokenSource{s: seed(prompt, call), n: n}
		done := ctx.Done() // nil for a context that never ends
		for i := 0; i < n; i++ {
			if done != nil {
				select {
				case <-done:
					return thread.ModelResult{}, ctx.Err()
				default:
				}
			}
			if err := onDelta(thread.Delta{Kind: thread.DeltaText, Text: toks.at(i)}); err != nil {
				return thread.ModelResult{}, err
			}
		}
	}
	name := m.Name
	if name == "" {
		name = BuiltinName
	}
	if fail != "" {
		return thread.ModelResult{Model: name, PromptTokens: ptoks, CompletionTokens: n},
			&errcode.Error{Code: fail, Message: "the built-in model was asked to fail (/fail " + string(fail) + ")"}
	}
	return thread.ModelResult{Model: name, PromptTokens: ptoks, CompletionTokens: n, StopReason: "stop"}, nil
}

// lastUserText returns the concatenated text parts of the last user message.
func lastUserText(req thread.ModelRequest) string {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		m := &req.Messages[i]
		if m.Role != checkpoint.RoleUser {
			continue
		}
		if len(m.Parts) == 1 {
			return m.Parts[0].Text
		}
		var b strings.Builder
		for _, p := range m.Parts {
			if p.Type == thread.PartText || p.Type == "" {
				b.WriteString(p.Text)
			}
		}
		return b.String()
	}
	return ""
}

// promptTokens is a rough token count of every message: text bytes / 4.
func promptTokens(req thread.ModelRequest) int {
	n := 0
	for i := range req.Messages {
		for _, p := range req.Messages[i].Parts {
			n += len(p.Text)
			if p.Call != nil {
				n += len(p.Call.ArgsText) + len(p.Call.Result)
			}
		}
		for _, a := range req.Messages[i].Attachments {
			for _, p := range a.Content {
				n += len(p.Text)
			}
		}
	}
	return n / 4
}
