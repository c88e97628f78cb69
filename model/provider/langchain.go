package provider

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/thread"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/llms/anthropic"
	"github.com/tmc/langchaingo/llms/googleai"
	"github.com/tmc/langchaingo/llms/ollama"
	"github.com/tmc/langchaingo/llms/openai"
	"google.golang.org/api/option"
)

// Providers this package speaks to.
const (
	OpenAI    = "openai"
	Anthropic = "anthropic"
	GoogleAI  = "googleai"
	Ollama    = "ollama"
)

// Spec is everything a provider model needs.
type Spec struct {
	Name      string // the registry name, for messages
	Provider  string // OpenAI, Anthropic, GoogleAI or Ollama
	Model     string
	BaseURL   string // "" for the provider's own endpoint
	Key       string
	KeyEnv    string // the variable Key came from, for messages
	Timeout   time.Duration
	MaxTokens int
	Vision    bool
}

// defaultAnthropicMaxTokens is sent when a model has no max_tokens: the
// Messages API requires one.
const defaultAnthropicMaxTokens = 4096

// defaultTemperature is sent when run_config.temperature is unset, because
// langchaingo always sends a temperature and 0 is not the providers' own
// default.
var defaultTemperature = map[string]float64{
	OpenAI:    1,
	Anthropic: 1,
	GoogleAI:  1,
	Ollama:    0.8,
}

// NewTransport is the HTTP transport every provider model of a registry
// shares. It has no overall timeout: streams are bounded by the model's
// idle timeout and the caller's context.
func NewTransport() http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 32
	t.ResponseHeaderTimeout = 0
	return t
}

// providerModel is a langchaingo model behind thread.Model.
type providerModel struct {
	spec   Spec
	client *http.Client

	mu      sync.Mutex
	clients map[wire]llms.Model // built on first use
}

var _ thread.Model = (*providerModel)(nil)

// New returns the model of spec, whose HTTP calls go through base (see
// NewTransport).
func New(spec Spec, base http.RoundTripper) thread.Model { return newProviderModel(spec, base) }

func newProviderModel(spec Spec, base http.RoundTripper) *providerModel {
	pt := &probeTransport{base: base}
	switch {
	case spec.Provider == GoogleAI:
		// With a custom HTTP client the Google client does not add the key.
		pt.header = http.Header{"X-Goog-Api-Key": {spec.Key}}
	case spec.Provider == Ollama && spec.Key != "":
		pt.header = http.Header{"Authorization": {"Bearer " + spec.Key}}
	}
	return &providerModel{spec: spec, client: &http.Client{Transport: pt}, clients: map[wire]llms.Model{}}
}

// wire is the protocol a call speaks, which decides the langchaingo client
// and how its stream is read.
type wire uint8

const (
	wireOpenAI    wire = iota + 1 // OpenAI chat completions (also Ollama's /v1 with tools)
	wireAnthropic                 // Anthropic Messages
	wireGoogle                    // Gemini REST
	wireOllama                    // Ollama's native /api/chat (no tools)
)

// wireFor picks the protocol of a call: Ollama's native client knows no
// tools, so a request with tools or earlier tool calls goes to its
// OpenAI-compatible endpoint.
func (m *providerModel) wireFor(req thread.ModelRequest) wire {
	switch m.spec.Provider {
	case Anthropic:
		return wireAnthropic
	case GoogleAI:
		return wireGoogle
	case Ollama:
		if len(req.Tools) > 0 || hasToolCalls(req) {
			return wireOpenAI
		}
		return wireOllama
	}
	return wireOpenAI
}

// open builds the langchaingo client of a wire once.
func (m *providerModel) open(w wire) (llms.Model, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if llm, ok := m.clients[w]; ok {
		return llm, nil
	}
	s := m.spec
	var (
		llm llms.Model
		err error
	)
	switch w {
	case wireOpenAI:
		baseURL, key := s.BaseURL, s.Key
		switch {
		case s.Provider == Ollama:
			baseURL = strings.TrimRight(baseURL, "/") + "/v1"
			if key == "" {
				key = "ollama" // the client wants one; Ollama ignores it
			}
		case baseURL == "":
			baseURL = "https://api.openai.com/v1"
		}
		llm, err = openai.New(openai.WithToken(key), openai.WithModel(s.Model), openai.WithBaseURL(baseURL),
			openai.WithOrganization(""), openai.WithHTTPClient(m.client))
	case wireAnthropic:
		opts := []anthropic.Option{anthropic.WithToken(s.Key), anthropic.WithModel(s.Model), anthropic.WithHTTPClient(m.client)}
		if s.BaseURL != "" {
			opts = append(opts, anthropic.WithBaseURL(s.BaseURL))
		}
		llm, err = anthropic.New(opts...)
	case wireGoogle:
		opts := []googleai.Option{googleai.WithAPIKey(s.Key), googleai.WithHTTPClient(m.client), googleai.WithRest(),
			googleai.WithDefaultModel(s.Model), googleai.WithDefaultTopK(40)}
		if s.BaseURL != "" {
			opts = append(opts, func(o *googleai.Options) {
				o.ClientOptions = append(o.ClientOptions, option.WithEndpoint(s.BaseURL))
			})
		}
		llm, err = googleai.New(context.Background(), opts...)
	case wireOllama:
		llm, err = ollama.New(ollama.WithModel(s.Model), ollama.WithServerURL(s.BaseURL), ollama.WithHTTPClient(m.client))
	default:
		err = fmt.Errorf("unknown provider %q", s.Provider)
	}
	if err != nil {
		return nil, err
	}
	m.clients[w] = llm
	return llm, nil
}

// errIdle is the cancel cause of a model that sent nothing for its timeout.
var errIdle = errors.New("model idle timeout")

// Stream implements thread.Model: it streams one reply (a step) as typed
// deltas, in order. OpenAI-compatible servers and Anthropic stream text,
// reasoning and tool-call arguments as they come; Google and Ollama stream
// text and send each tool call whole once the reply ends (Ollama reaches
// tools through its OpenAI-compatible endpoint). The model's timeout
// bounds the wait for the first delta and between two (model_timeout). A
// 401/403 is model_auth; any other failure is model_error with the
// provider's message, secrets redacted. When ctx ends the provider request
// is cancelled and ctx.Err() is returned; onDelta's error is returned as
// is. After it returns, onDelta is not called again.
func (m *providerModel) Stream(ctx context.Context, req thread.ModelRequest, onDelta func(thread.Delta) error) (thread.ModelResult, error) {
	s := m.spec
	if err := ctx.Err(); err != nil {
		return thread.ModelResult{}, err
	}
	w := m.wireFor(req)
	llm, err := m.open(w)
	if err != nil {
		return thread.ModelResult{}, &errcode.Error{Code: errcode.ModelError, Message: m.redact(s.Provider + ": " + err.Error())}
	}
	msgs := toLLMMessages(req, w, s.Vision)

	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	idle := time.AfterFunc(s.Timeout, func() { cancel(errIdle) })
	defer idle.Stop()
	em := &emitter{onDelta: onDelta, touch: func() { idle.Reset(s.Timeout) }}
	parse, tap := wireTap(w, em, req.OnRaw)
	p := &probe{tap: tap}
	cctx = context.WithValue(cctx, probeKey{}, p)

	resp, err := generate(cctx, llm, msgs, m.callOptions(req, w, chunkFunc(em, parse != nil)))
	if err == nil && parse == nil {
		// Google and Ollama hand tool calls over whole with the response.
		err = em.wholeCalls(resp)
	}
	te := em.finish()

	switch {
	case te != nil:
		return thread.ModelResult{}, te
	case ctx.Err() != nil:
		return thread.ModelResult{}, ctx.Err()
	case errors.Is(context.Cause(cctx), errIdle):
		return thread.ModelResult{}, &errcode.Error{Code: errcode.ModelTimeout, Message: "model timed out after " + formatDuration(s.Timeout)}
	}
	if me := m.failure(err, p); me != nil {
		return thread.ModelResult{}, me
	}
	return stepResult(s.Model, resp, em), nil
}

// wireTap returns the parser of the wire w's stream, when the reply is
// read off the wire (OpenAI-compatible and Anthropic), else nil; and the
// tap the transport hands every line to: onRaw (when not nil), then the
// parser. The tap is nil when there is neither.
func wireTap(w wire, em *emitter, onRaw func([]byte)) (parse, tap func([]byte) error) {
	switch w {
	case wireOpenAI:
		parse = newOpenAITap(em).line
	case wireAnthropic:
		parse = newAnthropicTap(em).line
	}
	if parse == nil && onRaw == nil {
		return nil, nil
	}
	return parse, func(line []byte) error {
		if err := em.raw(line, onRaw); err != nil {
			return err
		}
		if parse == nil {
			return nil
		}
		return parse(line)
	}
}

// chunkFunc returns langchaingo's streaming function: when tapped (the tap
// reads the wire), langchaingo's chunks (tool calls arrive there as JSON)
// are not the reply and only give em a chance to stop the stream; else
// every chunk is a text delta.
func chunkFunc(em *emitter, tapped bool) func(context.Context, []byte) error {
	return func(_ context.Context, chunk []byte) error {
		if tapped {
			return em.check()
		}
		if len(chunk) == 0 {
			return nil
		}
		return em.emit(thread.Delta{Kind: thread.DeltaText, Text: string(chunk)})
	}
}

// callOptions is the provider call's options for req on the wire w:
// streaming through streamFn, the temperature (the request's, else the
// provider's default), the max tokens (the model's, Anthropic's default
// when it needs one) and the tools.
func (m *providerModel) callOptions(req thread.ModelRequest, w wire, streamFn func(context.Context, []byte) error) []llms.CallOption {
	s := m.spec
	temp := defaultTemperature[s.Provider]
	if req.Temperature != nil {
		temp = *req.Temperature
	}
	opts := []llms.CallOption{llms.WithStreamingFunc(streamFn), llms.WithTemperature(temp)}
	maxTokens := s.MaxTokens
	if maxTokens == 0 && s.Provider == Anthropic {
		maxTokens = defaultAnthropicMaxTokens
	}
	if maxTokens > 0 {
		opts = append(opts, llms.WithMaxTokens(maxTokens))
	}
	if len(req.Tools) > 0 {
		opts = append(opts, llms.WithTools(toLLMTools(req.Tools, w)))
	}
	return opts
}

// stepResult is a successful step's result: the tool calls em gathered,
// the usage and the stop reason of resp, overridden by the one the wire
// gave and by tool calls.
func stepResult(model string, resp *llms.ContentResponse, em *emitter) thread.ModelResult {
	res := thread.ModelResult{Model: model, StopReason: thread.StopDone, ToolCalls: em.calls()}
	if resp != nil && len(resp.Choices) > 0 && resp.Choices[0] != nil {
		c := resp.Choices[0]
		res.StopReason = stopReason(c.StopReason)
		res.PromptTokens, res.CompletionTokens = usage(c.GenerationInfo)
	}
	if em.stop != "" {
		res.StopReason = em.stop
	}
	if len(res.ToolCalls) > 0 {
		res.StopReason = thread.StopToolCalls
	}
	return res
}

// generate calls the provider, turning a panic of the provider client (such
// as langchaingo's googleai on an empty stream) into an error.
func generate(ctx context.Context, llm llms.Model, msgs []llms.MessageContent, opts []llms.CallOption) (resp *llms.ContentResponse, err error) {
	defer func() {
		if v := recover(); v != nil {
			resp, err = nil, fmt.Errorf("the provider client failed on the response: %v", v)
		}
	}()
	return llm.GenerateContent(ctx, msgs, opts...)
}

// failure maps a provider error, or a stream the transport saw cut off,
// onto a model error; nil when the call succeeded.
func (m *providerModel) failure(err error, p *probe) *errcode.Error {
	status, body, readErr := p.result()
	name := m.spec.Provider
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return &errcode.Error{Code: errcode.ModelAuth, Message: m.redact(fmt.Sprintf("%s rejected the API key%s (%d %s): %s",
			name, m.keyHint(), status, http.StatusText(status), providerMessage(body, err)))}
	case status >= 400:
		return &errcode.Error{Code: errcode.ModelError, Message: m.redact(fmt.Sprintf("%s returned %d %s: %s",
			name, status, http.StatusText(status), providerMessage(body, err)))}
	case readErr != nil:
		return &errcode.Error{Code: errcode.ModelError, Message: m.redact(fmt.Sprintf("%s stream was cut off: %v", name, readErr))}
	case err != nil:
		return &errcode.Error{Code: errcode.ModelError, Message: m.redact(name + ": " + err.Error())}
	}
	return nil
}

func (m *providerModel) keyHint() string {
	if m.spec.KeyEnv == "" {
		return ""
	}
	return " in " + m.spec.KeyEnv
}

var (
	reBearer = regexp.MustCompile(`(?i)\bbearer\s+[^\s"',;()\[\]]+`)
	reSK     = regexp.MustCompile(`\bsk-[A-Za-z0-9_\-]{4,}`)
	reURLKey = regexp.MustCompile(`(?i)([?&](?:api_?)?key=)[^&\s"']+`)
	reHeader = regexp.MustCompile(`(?i)((?:x-api-key|x-goog-api-key|api-key)\s*[:=]\s*)[^\s"',;()\[\]]+`)
)

// redact removes the model's key and anything that looks like a secret.
func (m *providerModel) redact(s string) string { return redact(s, m.spec.Key) }

func redact(s, key string) string {
	if len(key) >= 4 {
		// In any letter case and in the encodings a provider or a proxy
		// may echo it in: a key that reaches a caller is a key lost.
		for _, form := range secretForms(key) {
			s = regexp.MustCompile("(?i)"+regexp.QuoteMeta(form)).ReplaceAllLiteralString(s, "[redacted]")
		}
	}
	s = reBearer.ReplaceAllString(s, "Bearer [redacted]")
	s = reSK.ReplaceAllString(s, "sk-[redacted]")
	s = reURLKey.ReplaceAllString(s, "${1}[redacted]")
	s = reHeader.ReplaceAllString(s, "${1}[redacted]")
	return s
}

// secretForms are the spellings of key that redact removes: itself, its
// URL and JSON escapings, base64 (padded or not, standard or URL) and hex.
func secretForms(key string) []string {
	b := []byte(key)
	quoted, _ := json.Marshal(key)
	forms := []string{key, url.QueryEscape(key), url.PathEscape(key), string(quoted[1 : len(quoted)-1]),
		base64.StdEncoding.EncodeToString(b), base64.RawStdEncoding.EncodeToString(b),
		base64.URLEncoding.EncodeToString(b), base64.RawURLEncoding.EncodeToString(b), hex.EncodeToString(b)}
	// Longest first, so a form is not left half-replaced by a shorter one.
	slices.SortFunc(forms, func(a, b string) int { return len(b) - len(a) })
	return slices.Compact(forms)
}

// providerMessage extracts the provider's own error message from an error
// body (OpenAI, Anthropic, Google: {"error":{"message":…}}; Ollama:
// {"error":"…"}), else the body's text, else err.
func providerMessage(body []byte, err error) string {
	text := strings.TrimSpace(string(body))
	if text != "" {
		var v struct {
			Error   json.RawMessage `json:"error"`
			Message string          `json:"message"`
		}
		dec := []byte(text)
		if len(dec) > 0 && dec[0] == '[' { // Google REST may wrap errors in an array
			var arr []json.RawMessage
			if json.Unmarshal(dec, &arr) == nil && len(arr) > 0 {
				dec = arr[0]
			}
		}
		if json.Unmarshal(dec, &v) == nil {
			var inner struct {
				Message string `json:"message"`
			}
			var s string
			switch {
			case json.Unmarshal(v.Error, &inner) == nil && inner.Message != "":
				return inner.Message
			case json.Unmarshal(v.Error, &s) == nil && s != "":
				return s
			case v.Message != "":
				return v.Message
			}
		}
		if len(text) > 300 {
			text = text[:300] + "…"
		}
		return text
	}
	if err != nil {
		return err.Error()
	}
	return "no message"
}

// stopReason maps a provider's finish reason to "stop" or "length".
func stopReason(s string) string {
	l := strings.ToLower(s)
	if strings.Contains(l, "length") || strings.Contains(l, "max_tokens") || strings.Contains(l, "maxtokens") {
		return "length"
	}
	return "stop"
}

// usage reads token counts from langchaingo's GenerationInfo: OpenAI,
// Ollama and Google report PromptTokens/CompletionTokens, Anthropic
// InputTokens/OutputTokens.
func usage(info map[string]any) (prompt, completion int) {
	prompt = toInt(info["PromptTokens"])
	if prompt == 0 {
		prompt = toInt(info["InputTokens"])
	}
	completion = toInt(info["CompletionTokens"])
	if completion == 0 {
		completion = toInt(info["OutputTokens"])
	}
	return prompt, completion
}

func toInt(v any) int {
	switch n := v.(type) {
	case int:
		return n
	case int32:
		return int(n)
	case int64:
		return int(n)
	case float64:
		return int(n)
	}
	return 0
}

// formatDuration writes 60s as "60s" rather than "1m0s".
func formatDuration(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return d.String()
}

// toMessages converts a request's messages to langchaingo's for provider
// (see toLLMMessages).
func toMessages(req thread.ModelRequest, provider string, vision bool) []llms.MessageContent {
	w := map[string]wire{OpenAI: wireOpenAI, Anthropic: wireAnthropic, GoogleAI: wireGoogle, Ollama: wireOllama}[provider]
	return toLLMMessages(req, w, vision)
}

// userContent converts a system or user message: its text parts are joined
// (Anthropic and Ollama read one text per message); images become an image
// part (OpenAI: the data: URL as is; others: the decoded bytes) or, for a
// model without vision or an image that is not a data: URL, a short text
// note. Text attachments become text parts. ok is false for a message with
// nothing in it.
func userContent(msg *thread.ModelMessage, w wire, vision bool) (llms.MessageContent, bool) {
	role := llms.ChatMessageTypeHuman
	if msg.Role == checkpoint.RoleSystem {
		role = llms.ChatMessageTypeSystem
	}
	var text []string
	var images []llms.ContentPart
	addImage := func(src string) {
		if role != llms.ChatMessageTypeHuman {
			return
		}
		if !vision {
			text = append(text, "[an image was attached; this model cannot see images]")
			return
		}
		if part, ok := imagePart(src, w); ok {
			images = append(images, part)
			return
		}
		text = append(text, "[an image was attached but could not be read]")
	}
	for _, p := range msg.Parts {
		switch p.Type {
		case thread.PartImage:
			addImage(p.Image)
		case thread.PartText, "":
			if p.Text != "" {
				text = append(text, p.Text)
			}
		}
	}
	for _, a := range msg.Attachments {
		for _, p := range a.Content {
			switch {
			case p.Type == "image":
				addImage(p.Image)
			case p.Text != "":
				text = append(text, "["+a.Name+"]\n"+p.Text)
			}
		}
	}
	if len(text) == 0 && len(images) == 0 {
		return llms.MessageContent{}, false
	}
	mc := llms.MessageContent{Role: role, Parts: make([]llms.ContentPart, 0, 1+len(images))}
	if len(text) > 0 {
		mc.Parts = append(mc.Parts, llms.TextContent{Text: strings.Join(text, "\n\n")})
	}
	mc.Parts = append(mc.Parts, images...)
	return mc, true
}

// imagePart converts an image source to a part the provider accepts.
// Only data: URLs are read; no URL is ever fetched.
func imagePart(src string, w wire) (llms.ContentPart, bool) {
	mime, data, ok := parseDataURL(src)
	if w == wireOpenAI {
		if ok {
			return llms.ImageURLContent{URL: src}, true
		}
		if u, err := url.Parse(src); err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != "" {
			return llms.ImageURLContent{URL: src}, true
		}
		return nil, false
	}
	if !ok {
		return nil, false
	}
	return llms.BinaryPart(mime, data), true
}

// parseDataURL decodes "data:image/png;base64,…".
func parseDataURL(s string) (mime string, data []byte, ok bool) {
	rest, found := strings.CutPrefix(s, "data:")
	if !found {
		return "", nil, false
	}
	meta, payload, found := strings.Cut(rest, ",")
	if !found {
		return "", nil, false
	}
	mime, isB64 := strings.CutSuffix(meta, ";base64")
	if !isB64 || mime == "" {
		return "", nil, false
	}
	data, err := base64.StdEncoding.DecodeString(payload)
	if err != nil {
		return "", nil, false
	}
	return mime, data, true
}

// probeKey carries a call's *probe in the request context.
type probeKey struct{}

// probe records, for one call, what the transport saw: the status, the
// first bytes of an error body and a read error that cut a stream off.
type probe struct {
	mu      sync.Mutex
	status  int
	body    []byte
	readErr error
	// tap, when set, reads each line of a successful response as the
	// client reads it; its error ends the read.
	tap func(line []byte) error
}

const maxErrorBody = 8 << 10

func (p *probe) result() (int, []byte, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.status, p.body, p.readErr
}

// probeTransport adds the model's extra headers and reports responses to
// the call's probe.
type probeTransport struct {
	base   http.RoundTripper
	header http.Header
}

func (t *probeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.header) > 0 {
		req = req.Clone(req.Context())
		for k, v := range t.header {
			req.Header[k] = v
		}
	}
	resp, err := t.base.RoundTrip(req)
	p, _ := req.Context().Value(probeKey{}).(*probe)
	if err != nil || p == nil {
		return resp, err
	}
	p.mu.Lock()
	p.status, p.body, p.readErr = resp.StatusCode, nil, nil
	p.mu.Unlock()
	pb := &probeBody{rc: resp.Body, p: p, keep: resp.StatusCode >= 400}
	if resp.StatusCode < 300 {
		pb.tap = p.tap
	}
	resp.Body = pb
	return resp, nil
}

type probeBody struct {
	rc   io.ReadCloser
	p    *probe
	keep bool
	tap  func([]byte) error
	// mu keeps a Close from another goroutine off partial and the tap
	// while a Read uses them.
	mu      sync.Mutex
	partial []byte // the start of a line whose end has not arrived
}

func (b *probeBody) Read(buf []byte) (int, error) {
	n, err := b.rc.Read(buf)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tap != nil && n > 0 {
		if terr := b.lines(buf[:n]); terr != nil {
			return 0, terr
		}
	}
	if b.tap != nil && err == io.EOF && len(b.partial) > 0 {
		line := b.partial
		b.partial = nil
		if terr := b.tap(bytes.TrimSuffix(line, []byte{'\r'})); terr != nil {
			return 0, terr
		}
	}
	if b.keep && n > 0 {
		b.p.mu.Lock()
		if room := maxErrorBody - len(b.p.body); room > 0 {
			b.p.body = append(b.p.body, buf[:min(n, room)]...)
		}
		b.p.mu.Unlock()
	}
	if err != nil && err != io.EOF {
		b.p.mu.Lock()
		if b.p.readErr == nil {
			b.p.readErr = err
		}
		b.p.mu.Unlock()
	}
	return n, err
}

// lines hands every complete line of data to the tap.
func (b *probeBody) lines(data []byte) error {
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			if len(b.partial)+len(data) > maxTapLine {
				return errTapLine
			}
			b.partial = append(b.partial, data...)
			return nil
		}
		line := data[:i]
		if len(b.partial) > 0 {
			line = append(b.partial, line...)
			b.partial = b.partial[:0]
		}
		if err := b.tap(bytes.TrimSuffix(line, []byte{'\r'})); err != nil {
			return err
		}
		data = data[i+1:]
	}
}

// maxTapLine bounds one line of a provider's stream.
const maxTapLine = 8 << 20

var errTapLine = errors.New("a line of the provider's stream is longer than 8 MiB")

// Close hands the tap a last line that no newline ended: a client that
// stops reading once its decoder has the whole reply (Google's JSON array
// ends with "]") never reads the EOF that would have passed it on.
func (b *probeBody) Close() error {
	b.mu.Lock()
	if b.tap != nil && len(b.partial) > 0 {
		line := b.partial
		b.partial = nil
		_ = b.tap(bytes.TrimSuffix(line, []byte{'\r'})) // the read is over: there is nothing left to end
	}
	b.mu.Unlock()
	return b.rc.Close()
}
