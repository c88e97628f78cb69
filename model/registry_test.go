package model_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/model"
	"github.com/threadline/threadline/thread"
)

func envFunc(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "models.json")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func newRegistry(t *testing.T, vars map[string]string) *model.Registry {
	t.Helper()
	r, err := model.NewRegistry(envFunc(vars))
	if err != nil {
		t.Fatalf("NewRegistry: got %v, want nil", err)
	}
	return r
}

// streamErr runs a model on a small request and returns its error.
func streamErr(m thread.Model) error {
	_, err := streamText(m, context.Background(), userReq("hi", 1), func(string) error { return nil })
	return err
}

func TestRegistryEnvConventions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		vars       map[string]string
		model      string
		wantName   string
		wantCode   errcode.Code // model_not_configured, or "" for a configured model
		wantVar    string       // the variable the not-configured message names
		wantBudget int
	}{
		{"empty is builtin", nil, "", "builtin", "", "", 0},
		{"builtin", nil, "builtin", "builtin", "", "", 0},
		{"openai without key", nil, "openai:gpt-4o", "openai:gpt-4o", errcode.ModelNotConfigured, "OPENAI_API_KEY", 400_000},
		{"openai with key", map[string]string{"OPENAI_API_KEY": "sk-x"}, "openai:gpt-4o", "openai:gpt-4o", "", "", 400_000},
		{"openai-compatible path model", map[string]string{"OPENAI_API_KEY": "x", "OPENAI_BASE_URL": "http://127.0.0.1:1/v1"}, "openai:meta-llama/Llama-3.1-8B-Instruct", "openai:meta-llama/Llama-3.1-8B-Instruct", "", "", 400_000},
		{"anthropic without key", nil, "anthropic:claude-sonnet-4-5", "anthropic:claude-sonnet-4-5", errcode.ModelNotConfigured, "ANTHROPIC_API_KEY", 400_000},
		{"anthropic with key", map[string]string{"ANTHROPIC_API_KEY": "k"}, "anthropic:claude-sonnet-4-5", "anthropic:claude-sonnet-4-5", "", "", 400_000},
		{"googleai without key", nil, "googleai:gemini-2.0-flash", "googleai:gemini-2.0-flash", errcode.ModelNotConfigured, "GOOGLE_API_KEY (or GEMINI_API_KEY)", 400_000},
		{"googleai with GEMINI_API_KEY", map[string]string{"GEMINI_API_KEY": "k"}, "googleai:gemini-2.0-flash", "googleai:gemini-2.0-flash", "", "", 400_000},
		{"ollama without host", nil, "ollama:llama3.2", "ollama:llama3.2", errcode.ModelNotConfigured, "OLLAMA_HOST", 400_000},
		{"ollama with host", map[string]string{"OLLAMA_HOST": "127.0.0.1:11434"}, "ollama:llama3.2", "ollama:llama3.2", "", "", 400_000},
		{"default from env", map[string]string{"THREADLINE_DEFAULT_MODEL": "openai:gpt-4o-mini"}, "", "openai:gpt-4o-mini", errcode.ModelNotConfigured, "OPENAI_API_KEY", 400_000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newRegistry(t, tc.vars)
			m, name, err := r.Resolve(tc.model)
			if err != nil {
				t.Fatalf("Resolve(%q): got %v, want nil", tc.model, err)
			}
			if name != tc.wantName {
				t.Fatalf("canonical name: got %q, want %q", name, tc.wantName)
			}
			if got := r.ContextBudget(name); got != tc.wantBudget {
				t.Fatalf("ContextBudget(%q): got %d, want %d", name, got, tc.wantBudget)
			}
			if tc.wantCode == "" {
				// A configured model honours an already cancelled context
				// before it touches the network.
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				if _, err := streamText(m, ctx, userReq("hi", 1), func(string) error { return nil }); !errors.Is(err, context.Canceled) {
					t.Fatalf("Stream on a cancelled context: got %v, want context.Canceled from a configured model", err)
				}
				if tc.wantName == "builtin" {
					if err := streamErr(m); err != nil {
						t.Fatalf("builtin Stream: got %v, want nil", err)
					}
				}
				return
			}
			var me *errcode.Error
			if err := streamErr(m); !errors.As(err, &me) || me.Code != tc.wantCode {
				t.Fatalf("Stream: got %v, want code %s", err, tc.wantCode)
			}
			if want := "set " + tc.wantVar + " to use " + tc.wantName; me.Message != want {
				t.Fatalf("message: got %q, want %q", me.Message, want)
			}
		})
	}
}

func TestRegistryUnknownNames(t *testing.T) {
	t.Parallel()
	path := writeFile(t, `{"models":[{"name":"gpt","provider":"openai","model":"gpt-4o"}]}`)
	r := newRegistry(t, map[string]string{"THREADLINE_MODELS_FILE": path})
	for _, name := range []string{"gpt-4o", "nope:gpt-4o", "openai:", "openai: ", "builtin:x", "openai:a\nb", "openai:" + strings.Repeat("x", 300)} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, _, err := r.Resolve(name)
			var ce *errcode.Error
			if !errors.As(err, &ce) || ce.Code != errcode.Invalid {
				t.Fatalf("Resolve(%q): got %v, want an invalid_request *errcode.Error", name, err)
			}
			if !strings.Contains(ce.Message, "unknown model") || !strings.Contains(ce.Message, "models: builtin, builtin:demo, gpt") ||
				!strings.Contains(ce.Message, "openai:<model>") {
				t.Fatalf("message: got %q, want it to name the unknown model, list builtin, gpt and the provider:model forms", ce.Message)
			}
			if r.ContextBudget(name) != 0 {
				t.Fatalf("ContextBudget(%q): got %d, want 0 for an unknown name", name, r.ContextBudget(name))
			}
		})
	}
}

func TestRegistryFileConfig(t *testing.T) {
	t.Parallel()
	path := writeFile(t, `{
	  "default": "local",
	  "models": [
	    {"name": "gpt", "provider": "openai", "model": "gpt-4o", "api_key_env": "MY_OPENAI_KEY", "context_budget": 1000},
	    {"name": "local", "provider": "openai", "model": "meta-llama/Llama-3.1-8B-Instruct", "base_url": "http://127.0.0.1:8000/v1", "api_key_env": "VLLM_KEY", "timeout": "90s"},
	    {"name": "claude", "provider": "anthropic", "model": "claude-sonnet-4-5", "timeout": 30},
	    {"name": "llava", "provider": "ollama", "model": "llava", "base_url": "http://gpu:11434", "vision": true},
	    {"name": "short", "provider": "builtin", "tokens": 3}
	  ]
	}`)
	r := newRegistry(t, map[string]string{"THREADLINE_MODELS_FILE": path, "VLLM_KEY": "x"})
	wantList := []thread.ModelInfo{
		{Name: "builtin", Provider: "builtin", Model: "builtin", Configured: true},
		{Name: "builtin:demo", Provider: "builtin", Model: "demo", Configured: true},
		{Name: "gpt", Provider: "openai", Model: "gpt-4o", Configured: false},
		{Name: "local", Provider: "openai", Model: "meta-llama/Llama-3.1-8B-Instruct", Configured: true, Default: true},
		{Name: "claude", Provider: "anthropic", Model: "claude-sonnet-4-5", Configured: false},
		{Name: "llava", Provider: "ollama", Model: "llava", Configured: true},
		{Name: "short", Provider: "builtin", Model: "builtin", Configured: true},
	}
	got := r.List()
	if len(got) != len(wantList) {
		t.Fatalf("List: got %+v, want %+v", got, wantList)
	}
	for i := range wantList {
		if got[i] != wantList[i] {
			t.Fatalf("List[%d]: got %+v, want %+v", i, got[i], wantList[i])
		}
	}
	if _, name, err := r.Resolve(""); err != nil || name != "local" {
		t.Fatalf("Resolve(\"\"): got %q, %v, want the file's default local", name, err)
	}
	budgets := map[string]int{"gpt": 1000, "local": 400_000, "builtin": 0, "short": 0, "": 400_000}
	for name, want := range budgets {
		if got := r.ContextBudget(name); got != want {
			t.Fatalf("ContextBudget(%q): got %d, want %d", name, got, want)
		}
	}
	m, _, _ := r.Resolve("gpt")
	var me *errcode.Error
	if err := streamErr(m); !errors.As(err, &me) || me.Code != errcode.ModelNotConfigured || me.Message != "set MY_OPENAI_KEY to use gpt" {
		t.Fatalf("gpt without MY_OPENAI_KEY: got %v, want model_not_configured naming MY_OPENAI_KEY", err)
	}
	m, _, _ = r.Resolve("short")
	toks, _, err := collect(t, m, context.Background(), userReq("x", 1))
	if err != nil || len(toks) != 3 {
		t.Fatalf("short builtin: got %d tokens and %v, want 3 and nil", len(toks), err)
	}
	// Conventional names still work next to the file.
	if _, name, err := r.Resolve("anthropic:claude-haiku-4-5"); err != nil || name != "anthropic:claude-haiku-4-5" {
		t.Fatalf("conventional name next to a file: got %q, %v", name, err)
	}
}

func TestRegistryDefaults(t *testing.T) {
	t.Parallel()
	file := writeFile(t, `{"default":"short","models":[{"name":"short","provider":"builtin","tokens":2}]}`)
	tests := []struct {
		name string
		vars map[string]string
		want string
	}{
		{"no configuration", nil, "builtin"},
		{"env", map[string]string{"THREADLINE_DEFAULT_MODEL": "ollama:llama3.2", "OLLAMA_HOST": "x:1"}, "ollama:llama3.2"},
		{"file", map[string]string{"THREADLINE_MODELS_FILE": file}, "short"},
		{"env beats file", map[string]string{"THREADLINE_MODELS_FILE": file, "THREADLINE_DEFAULT_MODEL": "builtin"}, "builtin"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newRegistry(t, tc.vars)
			if _, name, err := r.Resolve(""); err != nil || name != tc.want {
				t.Fatalf("Resolve(\"\"): got %q, %v, want %q", name, err, tc.want)
			}
			defaults := 0
			for _, mi := range r.List() {
				if mi.Default {
					defaults++
					if mi.Name != tc.want {
						t.Fatalf("List default: got %q, want %q", mi.Name, tc.want)
					}
				}
			}
			if defaults != 1 {
				t.Fatalf("List defaults: got %d, want exactly 1", defaults)
			}
		})
	}
}

func TestRegistryListsExtraModels(t *testing.T) {
	t.Parallel()
	r := newRegistry(t, map[string]string{"THREADLINE_MODELS": "openai:gpt-4o, ollama:llama3.2", "OPENAI_API_KEY": "k"})
	got := r.List()
	want := []thread.ModelInfo{
		{Name: "builtin", Provider: "builtin", Model: "builtin", Configured: true, Default: true},
		{Name: "builtin:demo", Provider: "builtin", Model: "demo", Configured: true},
		{Name: "openai:gpt-4o", Provider: "openai", Model: "gpt-4o", Configured: true},
		{Name: "ollama:llama3.2", Provider: "ollama", Model: "llama3.2", Configured: false},
	}
	if len(got) != len(want) {
		t.Fatalf("List: got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("List[%d]: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestRegistryBadConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		vars    map[string]string
		file    string
		wantMsg string
	}{
		{"tokens not a number", map[string]string{"THREADLINE_BUILTIN_TOKENS": "many"}, "", "THREADLINE_BUILTIN_TOKENS"},
		{"negative tokens", map[string]string{"THREADLINE_BUILTIN_TOKENS": "-1"}, "", "THREADLINE_BUILTIN_TOKENS"},
		{"bad delay", map[string]string{"THREADLINE_BUILTIN_DELAY": "soon"}, "", "THREADLINE_BUILTIN_DELAY"},
		{"unknown default", map[string]string{"THREADLINE_DEFAULT_MODEL": "gpt-5"}, "", "unknown model \"gpt-5\""},
		{"missing file", map[string]string{"THREADLINE_MODELS_FILE": "/nonexistent/models.json"}, "", "THREADLINE_MODELS_FILE"},
		{"not json", nil, `{"models": [`, "not a models file"},
		{"unknown field", nil, `{"models":[{"name":"a","provider":"openai","model":"m","api_key":"sk-oops"}]}`, "unknown field"},
		{"unknown provider", nil, `{"models":[{"name":"a","provider":"cohere","model":"m"}]}`, "provider \"cohere\""},
		{"no model", nil, `{"models":[{"name":"a","provider":"openai"}]}`, "no model"},
		{"no name", nil, `{"models":[{"provider":"openai","model":"m"}]}`, "no name"},
		{"duplicate", nil, `{"models":[{"name":"a","provider":"builtin"},{"name":"a","provider":"builtin"}]}`, "defined twice"},
		{"redefines builtin", nil, `{"models":[{"name":"builtin","provider":"builtin"}]}`, "defined twice"},
		{"bad base_url", nil, `{"models":[{"name":"a","provider":"openai","model":"m","base_url":"127.0.0.1:8000"}]}`, "base_url"},
		{"bad timeout", nil, `{"models":[{"name":"a","provider":"openai","model":"m","timeout":"soon"}]}`, "not a models file"},
		{"unknown file default", nil, `{"default":"zzz","models":[]}`, "unknown model \"zzz\""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			vars := map[string]string{}
			for k, v := range tc.vars {
				vars[k] = v
			}
			if tc.file != "" {
				vars["THREADLINE_MODELS_FILE"] = writeFile(t, tc.file)
			}
			_, err := model.NewRegistry(envFunc(vars))
			var ce *errcode.Error
			if !errors.As(err, &ce) || ce.Code != errcode.Invalid || !strings.Contains(ce.Message, tc.wantMsg) {
				t.Fatalf("NewRegistry: got %v, want invalid_request containing %q", err, tc.wantMsg)
			}
		})
	}
}

func TestRegistryConcurrentResolve(t *testing.T) {
	t.Parallel()
	r := newRegistry(t, map[string]string{"OPENAI_API_KEY": "k"})
	done := make(chan thread.Model, 16)
	for i := 0; i < cap(done); i++ {
		go func() {
			m, _, err := r.Resolve("openai:gpt-4o")
			if err != nil {
				t.Error(err)
			}
			done <- m
		}()
	}
	first := <-done
	for i := 1; i < cap(done); i++ {
		if m := <-done; m != first {
			t.Fatalf("Resolve: got different models for the same name, want one shared model")
		}
	}
}

// TestRegistryBuiltinModes: "builtin" is the words model unless
// THREADLINE_BUILTIN_MODE says demo; builtin:words and builtin:demo always
// name each; the models file picks a mode with "model".
func TestRegistryBuiltinModes(t *testing.T) {
	t.Parallel()
	file := writeFile(t, `{"models":[{"name":"w","provider":"builtin","model":"words","tokens":2},{"name":"d","provider":"builtin","model":"demo"},{"name":"dflt","provider":"builtin"}]}`)
	tests := []struct {
		mode     string
		name     string
		wantDemo bool
		wantList string
	}{
		{"", "builtin", false, "builtin,builtin:demo,w,d,dflt"},
		{"words", "builtin", false, "builtin,builtin:demo,w,d,dflt"},
		{"demo", "builtin", true, "builtin,builtin:words,w,d,dflt"},
		{"", "builtin:demo", true, ""},
		{"demo", "builtin:words", false, ""},
		{"", "w", false, ""},
		{"", "d", true, ""},
		{"", "dflt", false, ""},
		{"demo", "dflt", true, ""},
	}
	for _, tc := range tests {
		r := newRegistry(t, map[string]string{"THREADLINE_BUILTIN_MODE": tc.mode, "THREADLINE_MODELS_FILE": file})
		m, name, err := r.Resolve(tc.name)
		if err != nil || name != tc.name {
			t.Fatalf("mode %q Resolve(%q): got %q, %v", tc.mode, tc.name, name, err)
		}
		var text strings.Builder
		res, err := streamText(m, context.Background(), userReq("hello", 1), func(s string) error { text.WriteString(s); return nil })
		isDemo := strings.Contains(text.String(), "built-in model")
		if err != nil || isDemo != tc.wantDemo || res.Model != tc.name {
			t.Errorf("mode %q %s: got %q (model %q, %v), want demo=%v and model %q", tc.mode, tc.name, text.String(), res.Model, err, tc.wantDemo, tc.name)
		}
		if tc.wantList != "" {
			var names []string
			for _, mi := range r.List() {
				names = append(names, mi.Name)
			}
			if got := strings.Join(names, ","); got != tc.wantList {
				t.Errorf("mode %q List: got %s, want %s", tc.mode, got, tc.wantList)
			}
		}
	}
	for _, bad := range []map[string]string{
		{"THREADLINE_BUILTIN_MODE": "chatty"},
		{"THREADLINE_MODELS_FILE": writeFile(t, `{"models":[{"name":"x","provider":"builtin","model":"poems"}]}`)},
		{"THREADLINE_MODELS_FILE": writeFile(t, `{"models":[{"name":"x","provider":"builtin","model":"demo","tokens":3}]}`)},
	} {
		if _, err := model.NewRegistry(envFunc(bad)); errcode.Of(err) != errcode.Invalid {
			t.Errorf("NewRegistry(%v): got %v, want invalid_request", bad, err)
		}
	}
}
