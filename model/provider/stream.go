package provider

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"sync"

	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/thread"
	"github.com/tmc/langchaingo/llms"
)

func hasToolCalls(req thread.ModelRequest) bool {
	for _, m := range req.Messages {
		for _, p := range m.Parts {
			if p.Type == thread.PartToolCall && p.Call != nil {
				return true
			}
		}
	}
	return false
}

// newCallID makes a tool call id for providers that send none (Google).
func newCallID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "call_" + hex.EncodeToString(b[:])
}

// toLLMTools converts tool specs to langchaingo's, with parameters decoded
// (Google's client reads them as a map and wants "properties").
func toLLMTools(specs []thread.ToolSpec, w wire) []llms.Tool {
	out := make([]llms.Tool, 0, len(specs))
	for _, s := range specs {
		var params map[string]any
		if json.Unmarshal(s.Parameters, &params) != nil || params == nil {
			params = map[string]any{"type": "object"}
		}
		if _, ok := params["properties"]; !ok && w == wireGoogle {
			params["properties"] = map[string]any{}
		}
		out = append(out, llms.Tool{Type: "function", Function: &llms.FunctionDefinition{Name: s.Name, Description: s.Description, Parameters: params}})
	}
	return out
}

// toLLMMessages converts a step request's messages to langchaingo's.
// System and user messages go as userContent says. An assistant message
// (a whole agent turn) is cut into the provider's steps: each run of text
// followed by tool calls becomes an AI message with the text and the calls,
// then a tool message per result; reasoning is not sent back. Anthropic's
// client reads one part per AI message, so there each text and each call
// is a message of its own (the API joins consecutive messages of one role).
// Messages with nothing in them are left out.
func toLLMMessages(req thread.ModelRequest, w wire, vision bool) []llms.MessageContent {
	out := make([]llms.MessageContent, 0, len(req.Messages))
	for i := range req.Messages {
		msg := &req.Messages[i]
		if msg.Role != checkpoint.RoleAssistant {
			if mc, ok := userContent(msg, w, vision); ok {
				out = append(out, mc)
			}
			continue
		}
		out = appendTurn(out, msg.Parts, w)
	}
	return out
}

// appendTurn appends the steps of one assistant turn.
func appendTurn(out []llms.MessageContent, parts []thread.ModelPart, w wire) []llms.MessageContent {
	var text []string
	var calls []*thread.ToolCall
	flush := func() {
		if len(text) == 0 && len(calls) == 0 {
			return
		}
		joined := strings.Join(text, "\n\n")
		out = appendStep(out, joined, calls, w)
		text, calls = nil, nil
	}
	for _, p := range parts {
		switch {
		case p.Type == thread.PartToolCall && p.Call != nil:
			calls = append(calls, p.Call)
		case (p.Type == thread.PartText || p.Type == "") && p.Text != "":
			if len(calls) > 0 {
				flush()
			}
			text = append(text, p.Text)
		}
	}
	flush()
	return out
}

// appendStep appends one step: the assistant's text and calls, then the
// calls' results.
func appendStep(out []llms.MessageContent, text string, calls []*thread.ToolCall, w wire) []llms.MessageContent {
	var ai []llms.ContentPart
	if text != "" {
		ai = append(ai, llms.TextContent{Text: text})
	}
	for _, c := range calls {
		ai = append(ai, llms.ToolCall{ID: c.ID, Type: "function", FunctionCall: &llms.FunctionCall{Name: c.Name, Arguments: argsObject(c.ArgsText)}})
	}
	if w == wireAnthropic {
		for _, p := range ai {
			out = append(out, llms.MessageContent{Role: llms.ChatMessageTypeAI, Parts: []llms.ContentPart{p}})
		}
	} else if len(ai) > 0 {
		out = append(out, llms.MessageContent{Role: llms.ChatMessageTypeAI, Parts: ai})
	}
	var results []llms.ContentPart
	for _, c := range calls {
		results = append(results, llms.ToolCallResponse{ToolCallID: c.ID, Name: c.Name, Content: resultText(c)})
	}
	if w == wireGoogle && len(results) > 0 {
		// One function-response turn answers every call of the step.
		return append(out, llms.MessageContent{Role: llms.ChatMessageTypeTool, Parts: results})
	}
	for _, r := range results {
		out = append(out, llms.MessageContent{Role: llms.ChatMessageTypeTool, Parts: []llms.ContentPart{r}})
	}
	return out
}

// argsObject returns a call's arguments as a JSON object, "{}" when the
// model wrote none or wrote something else (Anthropic's and Google's
// clients decode them and fail otherwise).
func argsObject(args string) string {
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(args), &m) != nil || m == nil {
		return "{}"
	}
	return args
}

// resultText is a tool result as the provider reads it: a string result as
// its text, any other value as JSON, an error prefixed so the model knows
// (only Anthropic has an error flag, and langchaingo does not send it).
func resultText(c *thread.ToolCall) string {
	if c.Result == nil {
		return "error: no result"
	}
	text := string(c.Result)
	var s string
	if json.Unmarshal(c.Result, &s) == nil {
		text = s
	}
	if c.IsError {
		return "error: " + text
	}
	return text
}

// emitter hands a step's deltas to the caller and assembles its tool
// calls. It is called from the provider client's goroutine; after finish,
// nothing more is passed on.
type emitter struct {
	onDelta func(thread.Delta) error
	touch   func() // the provider is alive: reset the idle timeout

	mu       sync.Mutex
	finished bool
	err      error
	order    []*thread.ToolCall
	byID     map[string]*thread.ToolCall
	stop     string // a stop reason the wire said
}

var errStepFinished = errors.New("the step already finished")

// check reports the error that ends the stream, if any.
func (e *emitter) check() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.finished {
		return errStepFinished
	}
	return e.err
}

func (e *emitter) emit(d thread.Delta) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.finished {
		return errStepFinished
	}
	if e.err != nil {
		return e.err
	}
	if e.touch != nil {
		e.touch()
	}
	if d.Kind == thread.DeltaToolCallArgs {
		c := e.byID[d.ToolCallID]
		if c == nil {
			if e.byID == nil {
				e.byID = map[string]*thread.ToolCall{}
			}
			c = &thread.ToolCall{ID: d.ToolCallID, Name: d.ToolName}
			e.byID[d.ToolCallID] = c
			e.order = append(e.order, c)
		}
		c.ArgsText += d.ArgsText
	}
	if err := e.onDelta(d); err != nil {
		e.err = err
		return err
	}
	return nil
}

// raw hands a non-empty line of the provider's response to onRaw, unless
// the step has finished.
func (e *emitter) raw(line []byte, onRaw func([]byte)) error {
	if onRaw == nil || len(line) == 0 {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.finished {
		return errStepFinished
	}
	if e.err != nil {
		return e.err
	}
	onRaw(line)
	return nil
}

// setStop records the stop reason the wire said.
func (e *emitter) setStop(s string) {
	e.mu.Lock()
	e.stop = s
	e.mu.Unlock()
}

// closeCalls sends "{}" for every call whose arguments are still empty,
// so that the pieces of a call always join to a JSON object.
func (e *emitter) closeCalls() error {
	e.mu.Lock()
	var empty []*thread.ToolCall
	for _, c := range e.order {
		if strings.TrimSpace(c.ArgsText) == "" {
			empty = append(empty, c)
		}
	}
	e.mu.Unlock()
	for _, c := range empty {
		if err := e.emit(thread.Delta{Kind: thread.DeltaToolCallArgs, ToolCallID: c.ID, ToolName: c.Name, ArgsText: "{}"}); err != nil {
			return err
		}
	}
	return nil
}

// wholeCalls sends the tool calls of a response that did not stream them.
func (e *emitter) wholeCalls(resp *llms.ContentResponse) error {
	if resp == nil {
		return nil
	}
	for _, c := range resp.Choices {
		if c == nil {
			continue
		}
		for _, tc := range c.ToolCalls {
			if tc.FunctionCall == nil {
				continue
			}
			id := tc.ID
			if id == "" {
				id = newCallID()
			}
			if err := e.emit(thread.Delta{Kind: thread.DeltaToolCallArgs, ToolCallID: id, ToolName: tc.FunctionCall.Name, ArgsText: tc.FunctionCall.Arguments}); err != nil {
				return err
			}
		}
	}
	return e.closeCalls()
}

// finish stops the emitter and returns the caller's error, if any.
func (e *emitter) finish() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.finished = true
	return e.err
}

// calls returns the step's tool calls, whole.
func (e *emitter) calls() []thread.ToolCall {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.order) == 0 {
		return nil
	}
	out := make([]thread.ToolCall, len(e.order))
	for i, c := range e.order {
		out[i] = *c
	}
	return out
}

// sseData returns the payload of an SSE data line.
func sseData(line []byte) ([]byte, bool) {
	rest, ok := strings.CutPrefix(string(line), "data:")
	if !ok {
		return nil, false
	}
	rest = strings.TrimSpace(rest)
	if rest == "" || rest == "[DONE]" {
		return nil, false
	}
	return []byte(rest), true
}

// openaiTap reads OpenAI's chat completion stream (and every compatible
// server's) off the wire: content, reasoning (reasoning_content or
// reasoning) and tool-call deltas, keyed by their index so parallel calls
// stay apart.
type openaiTap struct {
	em    *emitter
	calls map[int]*tapCall
	last  *tapCall
}

type tapCall struct{ id, name string }

func newOpenAITap(em *emitter) *openaiTap { return &openaiTap{em: em, calls: map[int]*tapCall{}} }

type openaiChunk struct {
	Choices []struct {
		Delta struct {
			Content          *string `json:"content"`
			ReasoningContent *string `json:"reasoning_content"`
			Reasoning        *string `json:"reasoning"`
			ToolCalls        []struct {
				Index    *int   `json:"index"`
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
}

func (t *openaiTap) line(line []byte) error {
	data, ok := sseData(line)
	if !ok {
		return nil
	}
	var c openaiChunk
	if json.Unmarshal(data, &c) != nil || len(c.Choices) == 0 {
		return nil // langchaingo skips these too
	}
	ch := &c.Choices[0]
	d := &ch.Delta
	for _, r := range []*string{d.ReasoningContent, d.Reasoning} {
		if r != nil && *r != "" {
			if err := t.em.emit(thread.Delta{Kind: thread.DeltaReasoning, Text: *r}); err != nil {
				return err
			}
		}
	}
	if d.Content != nil && *d.Content != "" {
		if err := t.em.emit(thread.Delta{Kind: thread.DeltaText, Text: *d.Content}); err != nil {
			return err
		}
	}
	for _, tc := range d.ToolCalls {
		call := t.call(tc.Index, tc.ID, tc.Function.Name)
		if call == nil {
			continue
		}
		if err := t.em.emit(thread.Delta{Kind: thread.DeltaToolCallArgs, ToolCallID: call.id, ToolName: call.name, ArgsText: tc.Function.Arguments}); err != nil {
			return err
		}
	}
	if ch.FinishReason != nil && *ch.FinishReason != "" {
		if s := stopReason(*ch.FinishReason); s == thread.StopLength {
			t.em.setStop(s)
		}
		return t.em.closeCalls()
	}
	return nil
}

// call finds the call a tool-call delta belongs to: by index, else by id,
// else the last one; a delta with a new index or id opens a call.
func (t *openaiTap) call(index *int, id, name string) *tapCall {
	var c *tapCall
	switch {
	case index != nil:
		c = t.calls[*index]
		if c == nil || (id != "" && id != c.id && c.id != "") {
			c = &tapCall{id: id, name: name}
			t.calls[*index] = c
		}
	case id != "":
		for _, k := range t.calls {
			if k.id == id {
				c = k
			}
		}
		if c == nil {
			c = &tapCall{id: id, name: name}
			t.calls[-len(t.calls)-1] = c
		}
	default:
		c = t.last
	}
	if c == nil {
		return nil
	}
	if c.id == "" {
		c.id = newCallID()
	}
	if c.name == "" {
		c.name = name
	}
	t.last = c
	return c
}

// anthropicTap reads Anthropic's Messages stream off the wire: text,
// thinking and tool_use blocks with their input_json_delta pieces.
type anthropicTap struct {
	em     *emitter
	blocks map[int]*tapCall // tool_use blocks by index
}

func newAnthropicTap(em *emitter) *anthropicTap {
	return &anthropicTap{em: em, blocks: map[int]*tapCall{}}
}

type anthropicEvent struct {
	Type         string `json:"type"`
	Index        int    `json:"index"`
	ContentBlock struct {
		Type string `json:"type"`
		ID   string `json:"id"`
		Name string `json:"name"`
		Text string `json:"text"`
	} `json:"content_block"`
	Delta struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		Thinking    string `json:"thinking"`
		PartialJSON string `json:"partial_json"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
}

func (t *anthropicTap) line(line []byte) error {
	data, ok := sseData(line)
	if !ok {
		return nil
	}
	var ev anthropicEvent
	if json.Unmarshal(data, &ev) != nil {
		return nil
	}
	switch ev.Type {
	case "content_block_start":
		cb := ev.ContentBlock
		switch cb.Type {
		case "tool_use":
			c := &tapCall{id: cb.ID, name: cb.Name}
			if c.id == "" {
				c.id = newCallID()
			}
			t.blocks[ev.Index] = c
			return t.em.emit(thread.Delta{Kind: thread.DeltaToolCallArgs, ToolCallID: c.id, ToolName: c.name})
		case "text":
			if cb.Text != "" {
				return t.em.emit(thread.Delta{Kind: thread.DeltaText, Text: cb.Text})
			}
		}
	case "content_block_delta":
		switch ev.Delta.Type {
		case "text_delta":
			if ev.Delta.Text != "" {
				return t.em.emit(thread.Delta{Kind: thread.DeltaText, Text: ev.Delta.Text})
			}
		case "thinking_delta":
			if ev.Delta.Thinking != "" {
				return t.em.emit(thread.Delta{Kind: thread.DeltaReasoning, Text: ev.Delta.Thinking})
			}
		case "input_json_delta":
			if c := t.blocks[ev.Index]; c != nil && ev.Delta.PartialJSON != "" {
				return t.em.emit(thread.Delta{Kind: thread.DeltaToolCallArgs, ToolCallID: c.id, ToolName: c.name, ArgsText: ev.Delta.PartialJSON})
			}
		}
	case "content_block_stop":
		if t.blocks[ev.Index] != nil {
			return t.em.closeCalls()
		}
	case "message_delta":
		if s := stopReason(ev.Delta.StopReason); s == thread.StopLength {
			t.em.setStop(s)
		}
	}
	return nil
}
