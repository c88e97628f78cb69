package model

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

// providerLists is a local server answering each provider's list route as
// the provider does, checking the credentials it is sent.
func providerLists(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Header.Get("Authorization") == "Bearer sk-test": // OpenAI-compatible
			_, _ = w.Write([]byte(`{"object":"list","data":[{"id":"llama-3-8b"},{"id":"gpt-4o"},{"id":"gpt-4o"}]}`))
		case r.Header.Get("x-api-key") == "ak-test" && r.Header.Get("anthropic-version") != "":
			_, _ = w.Write([]byte(`{"data":[{"id":"claude-sonnet-4-5","type":"model"}],"has_more":false}`))
		default:
			http.Error(w, `{"error":"bad key"}`, http.StatusUnauthorized)
		}
	})
	mux.HandleFunc("GET /v1beta/models", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("key") != "gk-test" {
			http.Error(w, `{"error":"bad key"}`, http.StatusForbidden)
			return
		}
		_, _ = w.Write([]byte(`{"models":[{"name":"models/gemini-2.5-flash","supportedGenerationMethods":["generateContent","countTokens"]},{"name":"models/text-embedding-004","supportedGenerationMethods":["embedContent"]}]}`))
	})
	mux.HandleFunc("GET /api/tags", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"models":[{"name":"llama3.2:latest"},{"name":"qwen3:8b"}]}`))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestDiscover(t *testing.T) {
	t.Parallel()
	srv := providerLists(t)
	tests := []struct {
		name    string
		env     map[string]string
		want    []string // listed beside builtin's entries, in order
		wantErr string   // in the one error, if any
	}{
		{name: "no keys: nothing asked", env: map[string]string{}},
		{name: "an OpenAI-compatible server: every model, sorted, once",
			env:  map[string]string{EnvOpenAIKey: "sk-test", EnvOpenAIBaseURL: srv.URL + "/v1"},
			want: []string{"openai:gpt-4o", "openai:llama-3-8b"}},
		{name: "anthropic", env: map[string]string{EnvAnthropicKey: "ak-test", EnvAnthropicURL: srv.URL},
			want: []string{"anthropic:claude-sonnet-4-5"}},
		{name: "google keeps the models that generate content", env: map[string]string{EnvGeminiKey: "gk-test"},
			want: []string{"googleai:gemini-2.5-flash"}},
		{name: "ollama", env: map[string]string{EnvOllamaHost: srv.URL},
			want: []string{"ollama:llama3.2:latest", "ollama:qwen3:8b"}},
		{name: "THREADLINE_MODELS naming the provider: it is not asked",
			env:  map[string]string{EnvOpenAIKey: "sk-test", EnvOpenAIBaseURL: srv.URL + "/v1", EnvModels: "openai:my-model"},
			want: []string{"openai:my-model"}},
		{name: "a refused key: an error naming the provider, nothing listed",
			env:     map[string]string{EnvOpenAIKey: "sk-wrong", EnvOpenAIBaseURL: srv.URL + "/v1"},
			wantErr: "list openai models: " + srv.URL + "/v1/models answered 401"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, err := NewRegistry(func(k string) string { return tc.env[k] })
			if err != nil {
				t.Fatal(err)
			}
			r.googleBase = srv.URL
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			errs := r.Discover(ctx)
			var got []string
			for _, m := range r.List() {
				if m.Provider != ProviderBuiltin {
					got = append(got, m.Name)
					if !m.Configured {
						t.Errorf("%s listed as not configured", m.Name)
					}
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("listed %q, want %q", got, tc.want)
			}
			switch {
			case tc.wantErr == "" && len(errs) > 0:
				t.Errorf("errors %v, want none", errs)
			case tc.wantErr != "" && (len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.wantErr)):
				t.Errorf("errors %v, want one containing %q", errs, tc.wantErr)
			}
		})
	}
}

func TestOllamaURL(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"", ""},
		{"127.0.0.1", "http://127.0.0.1:11434"},
		{"0.0.0.0:11434", "http://127.0.0.1:11434"},
		{"gpu-box:8080", "http://gpu-box:8080"},
		{"http://gpu-box:11434/", "http://gpu-box:11434"},
		{"https://ollama.example.com", "https://ollama.example.com:443"},
		{"http://proxy:80/ollama", "http://proxy:80/ollama"},
		{"[::1]:11434", "http://[::1]:11434"},
	}
	for _, tc := range tests {
		if got := ollamaURL(tc.in); got != tc.want {
			t.Errorf("ollamaURL(%q): got %q, want %q", tc.in, got, tc.want)
		}
	}
}
