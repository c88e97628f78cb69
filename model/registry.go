package model

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/model/acp"
	"github.com/threadline/threadline/model/builtin"
	"github.com/threadline/threadline/model/mcp"
	"github.com/threadline/threadline/model/provider"
	"github.com/threadline/threadline/thread"
)

var _ thread.Models = (*Registry)(nil)

// Providers a model can use.
const (
	ProviderBuiltin   = "builtin"
	ProviderOpenAI    = provider.OpenAI
	ProviderAnthropic = provider.Anthropic
	ProviderGoogleAI  = provider.GoogleAI
	ProviderOllama    = provider.Ollama
	// ProviderACP is an external agent of THREADLINE_ACP_CONFIG, named
	// "acp:<name>" (package model/acp).
	ProviderACP = "acp"
)

// Defaults of provider models.
const (
	// DefaultTimeout is the longest wait for a provider's first token and
	// between two tokens.
	DefaultTimeout = 60 * time.Second
	// DefaultContextBudget is a provider model's context budget in bytes of
	// text unless configured.
	DefaultContextBudget = 400_000
)

// Environment variables the registry reads.
const (
	EnvModelsFile     = "THREADLINE_MODELS_FILE"
	EnvDefaultModel   = "THREADLINE_DEFAULT_MODEL"
	EnvModels         = "THREADLINE_MODELS" // extra provider:model names to list
	EnvBuiltinTokens  = "THREADLINE_BUILTIN_TOKENS"
	EnvBuiltinDelay   = "THREADLINE_BUILTIN_DELAY"
	EnvBuiltinMode    = "THREADLINE_BUILTIN_MODE"
	EnvOpenAIKey      = "OPENAI_API_KEY"
	EnvOpenAIBaseURL  = "OPENAI_BASE_URL"
	EnvAnthropicKey   = "ANTHROPIC_API_KEY"
	EnvAnthropicURL   = "ANTHROPIC_BASE_URL"
	EnvGoogleKey      = "GOOGLE_API_KEY"
	EnvGeminiKey      = "GEMINI_API_KEY"
	EnvOllamaHost     = "OLLAMA_HOST"
	maxCachedEntries  = 256
	maxModelNameBytes = 256
)

// providerOrder is the order providers are named in messages.
var providerOrder = []string{ProviderOpenAI, ProviderAnthropic, ProviderGoogleAI, ProviderOllama}

// FileConfig is the models file (THREADLINE_MODELS_FILE):
//
//	{
//	  "default": "gpt",
//	  "models": [
//	    {"name": "gpt", "provider": "openai", "model": "gpt-4o", "vision": true},
//	    {"name": "llama", "provider": "openai", "model": "meta-llama/Llama-3.1-8B-Instruct",
//	     "base_url": "http://127.0.0.1:8000/v1", "api_key_env": "VLLM_API_KEY",
//	     "timeout": "120s", "context_budget": 60000}
//	  ]
//	}
type FileConfig struct {
	Default string        `json:"default,omitempty"`
	Models  []ModelConfig `json:"models"`
}

// ModelConfig is one named model of the models file.
type ModelConfig struct {
	// Name is what run_config.model says. Required.
	Name string `json:"name"`
	// Provider is openai, anthropic, googleai, ollama or builtin. Required.
	Provider string `json:"provider"`
	// Model is the provider's model name. Required except for builtin.
	Model string `json:"model,omitempty"`
	// BaseURL overrides the provider's endpoint (OPENAI_BASE_URL,
	// ANTHROPIC_BASE_URL and OLLAMA_HOST otherwise).
	BaseURL string `json:"base_url,omitempty"`
	// APIKeyEnv is the NAME of the variable that holds the key; the
	// provider's conventional variable when empty. For ollama a key is
	// optional and sent as a bearer token.
	APIKeyEnv string `json:"api_key_env,omitempty"`
	// Timeout is the longest wait for the first token and between tokens:
	// "90s" or a number of seconds. Default 60s.
	Timeout Duration `json:"timeout,omitempty"`
	// ContextBudget is the budget in bytes of text the run trims the
	// conversation to; default 400000 for providers, 0 (unlimited) for
	// builtin.
	ContextBudget *int `json:"context_budget,omitempty"`
	// Vision says whether the model accepts images; default true for
	// openai, anthropic and googleai, false for ollama. Images sent to a
	// model without vision become a short text note.
	Vision *bool `json:"vision,omitempty"`
	// MaxTokens caps the reply (0: the provider's default; anthropic
	// needs one and gets 4096).
	MaxTokens int `json:"max_tokens,omitempty"`
	// Tokens and Delay configure a builtin entry.
	Tokens *int     `json:"tokens,omitempty"`
	Delay  Duration `json:"delay,omitempty"`
}

// Duration is a time.Duration read from JSON as "90s" or as seconds.
type Duration time.Duration

// UnmarshalJSON reads "1m30s" or 90.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		*d = Duration(v)
		return nil
	}
	var secs float64
	if err := json.Unmarshal(b, &secs); err != nil {
		return fmt.Errorf("want a duration such as \"60s\" or a number of seconds, got %s", b)
	}
	*d = Duration(secs * float64(time.Second))
	return nil
}

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// entry is one resolvable model.
type entry struct {
	name     string
	provider string
	model    string
	budget   int
	spec     provider.Spec // provider models
	missing  string        // the key variable to set; "" when configured

	once sync.Once
	m    thread.Model
}

func (e *entry) configured() bool { return e.missing == "" }

// Registry resolves run_config.model names. It always holds "builtin";
// provider models come from the models file and from the conventional
// variables (OPENAI_API_KEY makes "openai:<model>" work, and so on). It is
// safe for concurrent use.
type Registry struct {
	getenv    func(string) string
	transport http.RoundTripper
	builtin   *builtin.Builtin
	pacer     *builtin.Pacer // paces every built-in model of the registry
	named     map[string]*entry
	order     []string // listed names, builtin first
	def       string
	// googleBase replaces Google's endpoint for Discover (tests).
	googleBase string

	mu    sync.Mutex
	cache map[string]*entry // provider:model names resolved so far

	agents []*acp.Agent // THREADLINE_ACP_CONFIG's
}

// Start starts the goroutine that paces the built-in models (their first
// paced stream does if nobody did).
func (r *Registry) Start() { r.pacer.Start() }

// Stop stops it: streams still paced end with builtin.ErrPacerStopped. Call it
// once no run uses the registry's models any more.
func (r *Registry) Stop() {
	r.pacer.Stop()
	for _, a := range r.agents {
		a.Close()
	}
}

// addAgents adds an "acp:<name>" model for each agent of the
// THREADLINE_ACP_CONFIG file, handing each session the stdio servers of
// THREADLINE_MCP_CONFIG. Errors name the variable.
func (r *Registry) addAgents() error {
	path := strings.TrimSpace(r.getenv(acp.EnvConfig))
	if path == "" {
		return nil
	}
	cfg, err := acp.LoadConfig(path)
	if err != nil {
		return errcode.New(errcode.Invalid, "%s %s: %s", acp.EnvConfig, path, errcode.Message(err))
	}
	servers, err := acpMCPServers(r.getenv)
	if err != nil {
		return err
	}
	for _, n := range cfg.Names() {
		name := ProviderACP + ":" + n
		if _, dup := r.named[name]; dup {
			return errcode.New(errcode.Invalid, "%s: model %q is defined twice", acp.EnvConfig, name)
		}
		a := acp.New(n, cfg.Agents[n], r.getenv, servers)
		r.agents = append(r.agents, a)
		r.named[name] = &entry{name: name, provider: ProviderACP, model: n, m: a}
		r.order = append(r.order, name)
	}
	return nil
}

// acpMCPServers are the stdio MCP servers of THREADLINE_MCP_CONFIG as
// ACP hands them to an agent (HTTP ones stay the service's own).
func acpMCPServers(getenv func(string) string) ([]sdk.McpServer, error) {
	path := strings.TrimSpace(getenv("THREADLINE_MCP_CONFIG"))
	if path == "" {
		return nil, nil
	}
	mc, err := mcp.LoadConfig(path)
	if err != nil {
		return nil, errcode.New(errcode.Invalid, "THREADLINE_MCP_CONFIG: %s", errcode.Message(err))
	}
	var out []sdk.McpServer
	for _, s := range mc.Servers {
		if s.Command == "" {
			continue
		}
		env := []sdk.EnvVariable{}
		for k, v := range s.Env {
			env = append(env, sdk.EnvVariable{Name: k, Value: os.Expand(v, getenv)})
		}
		args := s.Args
		if args == nil {
			args = []string{}
		}
		out = append(out, sdk.McpServer{Stdio: &sdk.McpServerStdio{Name: s.Name, Command: s.Command, Args: args, Env: env}})
	}
	return out, nil
}

// NewRegistry reads the configuration from getenv (os.Getenv in the
// server; a map in tests) and, when THREADLINE_MODELS_FILE names one, the
// models file. Variables:
//
//	THREADLINE_BUILTIN_TOKENS  tokens per built-in reply (default 200)
//	THREADLINE_BUILTIN_DELAY   delay per built-in token (default 0)
//	THREADLINE_MODELS_FILE     JSON models file (see FileConfig)
//	THREADLINE_DEFAULT_MODEL   model for an empty run_config.model (else the file's default, else builtin)
//	THREADLINE_MODELS          extra provider:model names for List, comma separated
//	OPENAI_API_KEY, OPENAI_BASE_URL     openai:<model> (also any OpenAI-compatible server)
//	ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL  anthropic:<model>
//	GOOGLE_API_KEY or GEMINI_API_KEY    googleai:<model>
//	OLLAMA_HOST                          ollama:<model>
//	THREADLINE_ACP_CONFIG                JSON file of ACP agents, acp:<name> (package model/acp)
//
// It returns an invalid_request *errcode.Error for a malformed value,
// file or default.
func NewRegistry(getenv func(string) string) (*Registry, error) {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	tokens := builtin.DefaultBuiltinTokens
	if v := strings.TrimSpace(getenv(EnvBuiltinTokens)); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, errcode.New(errcode.Invalid, "%s must be a whole number, got %q", EnvBuiltinTokens, v)
		}
		tokens = n
	}
	var delay time.Duration
	if v := strings.TrimSpace(getenv(EnvBuiltinDelay)); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return nil, errcode.New(errcode.Invalid, "%s must be a duration such as 20ms, got %q", EnvBuiltinDelay, v)
		}
		delay = d
	}
	mode := strings.TrimSpace(getenv(EnvBuiltinMode))
	switch mode {
	case "":
		mode = BuiltinWords
	case BuiltinWords, BuiltinDemo:
	default:
		return nil, errcode.New(errcode.Invalid, "%s must be %s or %s, got %q", EnvBuiltinMode, BuiltinWords, BuiltinDemo, mode)
	}
	r := &Registry{
		getenv:    getenv,
		transport: provider.NewTransport(),
		builtin:   builtin.NewBuiltin(tokens, delay),
		pacer:     builtin.NewPacer(),
		named:     map[string]*entry{},
		cache:     map[string]*entry{},
	}
	r.builtin.Pacer = r.pacer
	r.named[builtin.BuiltinName] = &entry{name: builtin.BuiltinName, provider: ProviderBuiltin, model: builtin.BuiltinName, m: r.builtinModel(mode, "", tokens, delay)}
	r.order = append(r.order, builtin.BuiltinName)
	for _, m := range []string{BuiltinWords, BuiltinDemo} {
		name := builtin.BuiltinName + ":" + m
		r.named[name] = &entry{name: name, provider: ProviderBuiltin, model: m, m: r.builtinModel(m, name, tokens, delay)}
		if m != mode {
			r.order = append(r.order, name)
		}
	}

	var fileDefault string
	if path := strings.TrimSpace(getenv(EnvModelsFile)); path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, errcode.New(errcode.Invalid, "%s: %v", EnvModelsFile, err)
		}
		fc, err := ParseFileConfig(data)
		if err != nil {
			return nil, errcode.New(errcode.Invalid, "%s %s: %s", EnvModelsFile, path, errcode.Message(err))
		}
		for _, mc := range fc.Models {
			e, err := r.fileEntry(mc)
			if err != nil {
				return nil, errcode.New(errcode.Invalid, "%s %s: %s", EnvModelsFile, path, errcode.Message(err))
			}
			if _, dup := r.named[e.name]; dup {
				return nil, errcode.New(errcode.Invalid, "%s %s: model %q is defined twice (builtin is always defined)", EnvModelsFile, path, e.name)
			}
			r.named[e.name] = e
			r.order = append(r.order, e.name)
		}
		fileDefault = fc.Default
	}
	if err := r.addListed(); err != nil {
		return nil, err
	}
	if err := r.addAgents(); err != nil {
		return nil, err
	}
	r.def = builtin.BuiltinName
	for _, d := range []struct{ from, name string }{{EnvDefaultModel, strings.TrimSpace(getenv(EnvDefaultModel))}, {"the models file's default", fileDefault}} {
		if d.name == "" {
			continue
		}
		e, err := r.lookup(d.name)
		if err != nil {
			return nil, errcode.New(errcode.Invalid, "%s: %s", d.from, errcode.Message(err))
		}
		r.def = e.name
		r.listOnce(e.name)
		break
	}
	return r, nil
}

// addListed lists the names of THREADLINE_MODELS; an unknown one is an
// invalid_request error naming the variable.
func (r *Registry) addListed() error {
	for _, name := range strings.Split(r.getenv(EnvModels), ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		e, err := r.lookup(name)
		if err != nil {
			return errcode.New(errcode.Invalid, "%s: %s", EnvModels, errcode.Message(err))
		}
		r.listOnce(e.name)
	}
	return nil
}

func (r *Registry) listOnce(name string) {
	for _, n := range r.order {
		if n == name {
			return
		}
	}
	r.order = append(r.order, name)
}

// Modes of the built-in model.
const (
	// BuiltinWords answers with pseudo-random four-letter words: the
	// benchmarks' and tests' workload (see Builtin).
	BuiltinWords = "words"
	// BuiltinDemo answers in readable sentences and acts as an agent (see
	// Demo).
	BuiltinDemo = "demo"
)

// builtinModel is the built-in model of a mode; name is its ModelResult.Model
// ("" for "builtin").
func (r *Registry) builtinModel(mode, name string, tokens int, delay time.Duration) thread.Model {
	if mode == BuiltinDemo {
		return &builtin.Demo{Name: name, Delay: max(delay, 0), Pacer: r.pacer}
	}
	b := builtin.NewBuiltin(tokens, delay)
	b.Name, b.Pacer = name, r.pacer
	return b
}

// builtinMode is the mode "builtin" resolves to.
func (r *Registry) builtinMode() string {
	if _, ok := r.named[builtin.BuiltinName].m.(*builtin.Demo); ok {
		return BuiltinDemo
	}
	return BuiltinWords
}

// ParseFileConfig decodes a models file strictly (unknown fields are errors).
func ParseFileConfig(data []byte) (FileConfig, error) {
	var fc FileConfig
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&fc); err != nil {
		return fc, errcode.New(errcode.Invalid, "not a models file: %v", err)
	}
	return fc, nil
}

// fileEntry checks one file model and builds its entry. It returns an
// errcode.Invalid error naming the model and what is wrong with it.
func (r *Registry) fileEntry(mc ModelConfig) (*entry, error) {
	mc.Name = strings.TrimSpace(mc.Name)
	if mc.Name == "" {
		return nil, errcode.New(errcode.Invalid, "a model has no name")
	}
	if mc.Timeout < 0 || mc.Delay < 0 || mc.MaxTokens < 0 || (mc.ContextBudget != nil && *mc.ContextBudget < 0) {
		return nil, errcode.New(errcode.Invalid, "model %q: timeout, delay, max_tokens and context_budget must not be negative", mc.Name)
	}
	if mc.Provider == ProviderBuiltin {
		return r.builtinFileEntry(mc)
	}
	if err := checkProviderConfig(mc); err != nil {
		return nil, err
	}
	return r.providerEntry(mc.Name, mc), nil
}

// builtinFileEntry checks a file model of the builtin provider (its mode
// and tokens) and builds its entry. It returns an errcode.Invalid error
// naming the model and what is wrong with it.
func (r *Registry) builtinFileEntry(mc ModelConfig) (*entry, error) {
	tokens, delay := r.builtin.Tokens, time.Duration(mc.Delay)
	if mc.Tokens != nil {
		if *mc.Tokens < 0 {
			return nil, errcode.New(errcode.Invalid, "model %q: tokens must not be negative", mc.Name)
		}
		tokens = *mc.Tokens
	}
	mode := mc.Model
	switch {
	case mode == "":
		mode = r.builtinMode()
	case mode != BuiltinWords && mode != BuiltinDemo:
		return nil, errcode.New(errcode.Invalid, "model %q: a builtin model is %s or %s, not %q", mc.Name, BuiltinWords, BuiltinDemo, mode)
	}
	if mode == BuiltinDemo && mc.Tokens != nil {
		return nil, errcode.New(errcode.Invalid, "model %q: tokens are for the words model (the demo's replies have their own length)", mc.Name)
	}
	e := &entry{name: mc.Name, provider: ProviderBuiltin, model: builtin.BuiltinName, m: r.builtinModel(mode, mc.Name, tokens, delay)}
	if mc.ContextBudget != nil {
		e.budget = *mc.ContextBudget
	}
	return e, nil
}

// checkProviderConfig checks a file model of a provider: a known provider,
// a model name, no builtin settings and an http(s) base_url if any. It
// returns an errcode.Invalid error naming the model and what is wrong.
func checkProviderConfig(mc ModelConfig) error {
	if !knownProvider(mc.Provider) {
		return errcode.New(errcode.Invalid, "model %q: provider %q is not one of builtin, %s", mc.Name, mc.Provider, strings.Join(providerOrder, ", "))
	}
	if strings.TrimSpace(mc.Model) == "" {
		return errcode.New(errcode.Invalid, "model %q: no model (the provider's model name)", mc.Name)
	}
	if mc.Tokens != nil || mc.Delay != 0 {
		return errcode.New(errcode.Invalid, "model %q: tokens and delay are for builtin models only", mc.Name)
	}
	if mc.BaseURL != "" {
		u, err := url.Parse(mc.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return errcode.New(errcode.Invalid, "model %q: base_url %q is not an http(s) URL", mc.Name, mc.BaseURL)
		}
	}
	return nil
}

func knownProvider(p string) bool {
	for _, q := range providerOrder {
		if p == q {
			return true
		}
	}
	return false
}

// providerEntry builds the entry of a provider model, reading its key and
// endpoint from the environment.
func (r *Registry) providerEntry(name string, mc ModelConfig) *entry {
	s := provider.Spec{
		Name:      name,
		Provider:  mc.Provider,
		Model:     mc.Model,
		BaseURL:   mc.BaseURL,
		Timeout:   time.Duration(mc.Timeout),
		MaxTokens: mc.MaxTokens,
		Vision:    mc.Provider != ProviderOllama,
	}
	if s.Timeout == 0 {
		s.Timeout = DefaultTimeout
	}
	if mc.Vision != nil {
		s.Vision = *mc.Vision
	}
	e := &entry{name: name, provider: mc.Provider, model: mc.Model, budget: DefaultContextBudget}
	if mc.ContextBudget != nil {
		e.budget = *mc.ContextBudget
	}
	keyVars := []string{mc.APIKeyEnv}
	if mc.APIKeyEnv == "" {
		switch mc.Provider {
		case ProviderOpenAI:
			keyVars = []string{EnvOpenAIKey}
		case ProviderAnthropic:
			keyVars = []string{EnvAnthropicKey}
		case ProviderGoogleAI:
			keyVars = []string{EnvGoogleKey, EnvGeminiKey}
		case ProviderOllama:
			keyVars = nil // no key; OLLAMA_HOST or base_url is what it needs
		}
	}
	for _, v := range keyVars {
		if k := strings.TrimSpace(r.getenv(v)); k != "" {
			s.Key, s.KeyEnv = k, v
			break
		}
	}
	if s.Key == "" && len(keyVars) > 0 {
		e.missing = strings.Join(keyVars, " (or ") + strings.Repeat(")", len(keyVars)-1)
	}
	if s.BaseURL == "" {
		switch mc.Provider {
		case ProviderOpenAI:
			s.BaseURL = strings.TrimSpace(r.getenv(EnvOpenAIBaseURL))
		case ProviderAnthropic:
			s.BaseURL = strings.TrimSpace(r.getenv(EnvAnthropicURL))
		case ProviderOllama:
			s.BaseURL = ollamaURL(r.getenv(EnvOllamaHost))
			if s.BaseURL == "" && e.missing == "" {
				e.missing = EnvOllamaHost
			}
		}
	}
	e.spec = s
	return e
}

// ollamaURL turns an OLLAMA_HOST value ("127.0.0.1", "0.0.0.0:11434",
// "http://gpu-box:11434") into a base URL, or "".
func ollamaURL(host string) string {
	host = strings.TrimSpace(host)
	if host == "" {
		return ""
	}
	scheme, rest, ok := strings.Cut(host, "://")
	if !ok {
		scheme, rest = "http", host
	}
	rest = strings.TrimRight(rest, "/")
	hostport, path, _ := strings.Cut(rest, "/")
	h, port, err := net.SplitHostPort(hostport)
	if err != nil {
		h, port = strings.Trim(hostport, "[]"), "11434"
		if scheme == "https" {
			port = "443"
		}
	}
	if h == "" || h == "0.0.0.0" || h == "::" {
		h = "127.0.0.1"
	}
	u := scheme + "://" + net.JoinHostPort(h, port)
	if path != "" {
		u += "/" + path
	}
	return u
}

// lookup finds the entry for a non-empty name.
func (r *Registry) lookup(name string) (*entry, error) {
	if e, ok := r.named[name]; ok {
		return e, nil
	}
	r.mu.Lock()
	e, ok := r.cache[name]
	r.mu.Unlock()
	if ok {
		return e, nil
	}
	provider, model, ok := strings.Cut(name, ":")
	if !ok || !knownProvider(provider) || strings.TrimSpace(model) == "" || len(name) > maxModelNameBytes || strings.ContainsFunc(name, isControl) {
		return nil, r.unknown(name)
	}
	e = r.providerEntry(name, ModelConfig{Provider: provider, Model: model})
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.cache[name]; ok {
		return old, nil
	}
	if len(r.cache) < maxCachedEntries {
		r.cache[name] = e
	}
	return e, nil
}

func isControl(c rune) bool { return c < 0x20 || c == 0x7f }

func (r *Registry) unknown(name string) error {
	forms := make([]string, len(providerOrder))
	for i, p := range providerOrder {
		forms[i] = p + ":<model>"
	}
	return errcode.New(errcode.Invalid, "unknown model %q; models: %s; or %s",
		name, strings.Join(r.order, ", "), strings.Join(forms, ", "))
}

// Resolve implements thread.Models. "" is the default model.
func (r *Registry) Resolve(name string) (thread.Model, string, error) {
	if name == "" {
		name = r.def
	}
	e, err := r.lookup(name)
	if err != nil {
		return nil, "", err
	}
	return r.model(e), e.name, nil
}

// model returns the entry's model, building it on first use.
func (r *Registry) model(e *entry) thread.Model {
	e.once.Do(func() {
		switch {
		case e.m != nil:
		case !e.configured():
			e.m = notConfigured{msg: fmt.Sprintf("set %s to use %s", e.missing, e.name)}
		default:
			e.m = provider.New(e.spec, r.transport)
		}
	})
	return e.m
}

// Default returns the name of the default model.
func (r *Registry) Default() string { return r.def }

// List implements thread.Models: builtin, the file's models, the names of
// THREADLINE_MODELS and the default, in that order.
func (r *Registry) List() []thread.ModelInfo {
	out := make([]thread.ModelInfo, 0, len(r.order))
	for _, name := range r.order {
		e, err := r.lookup(name)
		if err != nil {
			continue
		}
		out = append(out, thread.ModelInfo{Name: e.name, Provider: e.provider, Model: e.model, Configured: e.configured(), Default: e.name == r.def})
	}
	return out
}

// ContextBudget implements thread.Models: bytes of text, 0 = unlimited.
func (r *Registry) ContextBudget(name string) int {
	if name == "" {
		name = r.def
	}
	e, err := r.lookup(name)
	if err != nil {
		return 0
	}
	return e.budget
}

// notConfigured is a known model whose key is missing.
type notConfigured struct{ msg string }

// Stream implements thread.Model: it fails with model_not_configured.
func (n notConfigured) Stream(context.Context, thread.ModelRequest, func(thread.Delta) error) (thread.ModelResult, error) {
	return thread.ModelResult{}, &errcode.Error{Code: errcode.ModelNotConfigured, Message: n.msg}
}
