package model

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
)

// Model discovery: with only a provider's key set (OPENAI_API_KEY=… make
// run), the picker should offer that provider's models without a second
// variable naming them. Discover asks each configured provider for its
// list once, at start.

// maxDiscovered bounds the names one provider may add to the list.
const maxDiscovered = 60

// The list endpoints' default bases (OPENAI_BASE_URL and
// ANTHROPIC_BASE_URL replace the first two; Registry.googleBase the last).
const (
	openAIBase    = "https://api.openai.com/v1"
	anthropicBase = "https://api.anthropic.com"
	googleBase    = "https://generativelanguage.googleapis.com"
)

// A discovery asks one provider for its model ids.
type discovery struct {
	provider string
	list     func(ctx context.Context, c *http.Client) ([]string, error)
}

// Discover lists, beside the configured names, the models of every
// provider whose key (or, for Ollama, host) is set and of which the models
// file and THREADLINE_MODELS name no model: the user who named models chose
// them. The providers are asked at once; ctx bounds the whole. It returns
// one error per provider that could not be listed (its models stay usable
// by name); call it before the registry serves requests.
func (r *Registry) Discover(ctx context.Context) []error {
	var ds []discovery
	for _, p := range providerOrder {
		if r.namesProvider(p) {
			continue
		}
		if d, ok := r.discovery(p); ok {
			ds = append(ds, d)
		}
	}
	found := make([][]string, len(ds))
	errs := make([]error, len(ds))
	c := &http.Client{Transport: r.transport}
	var wg sync.WaitGroup
	for i, d := range ds {
		wg.Go(func() { found[i], errs[i] = d.list(ctx, c) })
	}
	wg.Wait()
	var out []error
	for i, d := range ds {
		if errs[i] != nil {
			out = append(out, fmt.Errorf("list %s models: %w", d.provider, errs[i]))
			continue
		}
		r.listDiscovered(d.provider, found[i])
	}
	return out
}

// namesProvider reports whether a listed name (other than builtin) is of provider p.
func (r *Registry) namesProvider(p string) bool {
	for _, n := range r.order {
		if e, err := r.lookup(n); err == nil && e.provider == p {
			return true
		}
	}
	return false
}

// listDiscovered lists provider:id for each id, sorted, up to maxDiscovered.
func (r *Registry) listDiscovered(provider string, ids []string) {
	slices.Sort(ids)
	ids = slices.Compact(ids)
	n := 0
	for _, id := range ids {
		if n == maxDiscovered {
			return
		}
		e, err := r.lookup(provider + ":" + id)
		if err != nil {
			continue // a name the registry refuses (too long, odd bytes)
		}
		r.listOnce(e.name)
		n++
	}
}

// discovery returns how to list provider p's models, if it is configured.
func (r *Registry) discovery(p string) (discovery, bool) {
	env := func(k string) string { return strings.TrimSpace(r.getenv(k)) }
	switch p {
	case ProviderOpenAI:
		key := env(EnvOpenAIKey)
		if key == "" {
			return discovery{}, false
		}
		base, official := env(EnvOpenAIBaseURL), false
		if base == "" {
			base, official = openAIBase, true
		}
		return discovery{p, func(ctx context.Context, c *http.Client) ([]string, error) {
			return listOpenAI(ctx, c, base, key, official)
		}}, true
	case ProviderAnthropic:
		key := env(EnvAnthropicKey)
		if key == "" {
			return discovery{}, false
		}
		base := env(EnvAnthropicURL)
		if base == "" {
			base = anthropicBase
		}
		return discovery{p, func(ctx context.Context, c *http.Client) ([]string, error) {
			return listAnthropic(ctx, c, base, key)
		}}, true
	case ProviderGoogleAI:
		key := env(EnvGoogleKey)
		if key == "" {
			key = env(EnvGeminiKey)
		}
		if key == "" {
			return discovery{}, false
		}
		base := r.googleBase
		if base == "" {
			base = googleBase
		}
		return discovery{p, func(ctx context.Context, c *http.Client) ([]string, error) {
			return listGoogle(ctx, c, base, key)
		}}, true
	case ProviderOllama:
		base := ollamaURL(r.getenv(EnvOllamaHost))
		if base == "" {
			return discovery{}, false
		}
		return discovery{p, func(ctx context.Context, c *http.Client) ([]string, error) {
			return listOllama(ctx, c, base)
		}}, true
	}
	return discovery{}, false
}

// getJSON GETs u with the headers into v; a status other than 200 is an error.
func getJSON(ctx context.Context, c *http.Client, u string, h map[string]string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	for k, val := range h {
		req.Header.Set(k, val)
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	body := io.LimitReader(resp.Body, 4<<20)
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(body, 512))
		return fmt.Errorf("%s answered %d: %s", redactURL(u), resp.StatusCode, strings.TrimSpace(string(msg)))
	}
	return json.NewDecoder(body).Decode(v)
}

// redactURL drops the query, where Google's key travels.
func redactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "the provider"
	}
	p.RawQuery = ""
	return p.String()
}

// listOpenAI reads GET {base}/models. From OpenAI itself it keeps the chat
// models (its list also holds embeddings, speech and image models); from
// another OpenAI-compatible server (vLLM, LM Studio…) it keeps them all.
func listOpenAI(ctx context.Context, c *http.Client, base, key string, official bool) ([]string, error) {
	var body struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := getJSON(ctx, c, strings.TrimRight(base, "/")+"/models", map[string]string{"Authorization": "Bearer " + key}, &body); err != nil {
		return nil, err
	}
	var ids []string
	for _, m := range body.Data {
		if !official || openAIChatModel(m.ID) {
			ids = append(ids, m.ID)
		}
	}
	return ids, nil
}

// openAIChatModel reports whether an OpenAI model id is a chat model.
func openAIChatModel(id string) bool {
	chat := false
	for _, p := range []string{"gpt-", "o1", "o3", "o4", "chatgpt-"} {
		chat = chat || strings.HasPrefix(id, p)
	}
	for _, not := range []string{"audio", "realtime", "tts", "transcribe", "image", "embedding", "search", "instruct"} {
		if strings.Contains(id, not) {
			return false
		}
	}
	return chat
}

// listAnthropic reads GET {base}/v1/models.
func listAnthropic(ctx context.Context, c *http.Client, base, key string) ([]string, error) {
	var body struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	h := map[string]string{"x-api-key": key, "anthropic-version": "2023-06-01"}
	if err := getJSON(ctx, c, strings.TrimRight(base, "/")+"/v1/models?limit=100", h, &body); err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(body.Data))
	for _, m := range body.Data {
		ids = append(ids, m.ID)
	}
	return ids, nil
}

// listGoogle reads GET {base}/v1beta/models and keeps those that generate content.
func listGoogle(ctx context.Context, c *http.Client, base, key string) ([]string, error) {
	var body struct {
		Models []struct {
			Name    string   `json:"name"`
			Methods []string `json:"supportedGenerationMethods"`
		} `json:"models"`
	}
	u := strings.TrimRight(base, "/") + "/v1beta/models?pageSize=200&key=" + url.QueryEscape(key)
	if err := getJSON(ctx, c, u, nil, &body); err != nil {
		return nil, err
	}
	var ids []string
	for _, m := range body.Models {
		if slices.Contains(m.Methods, "generateContent") {
			ids = append(ids, strings.TrimPrefix(m.Name, "models/"))
		}
	}
	return ids, nil
}

// listOllama reads GET {base}/api/tags: the models pulled on that host.
func listOllama(ctx context.Context, c *http.Client, base string) ([]string, error) {
	var body struct {
		Models []struct {
			Name string `json:"name"`
		} `json:"models"`
	}
	if err := getJSON(ctx, c, strings.TrimRight(base, "/")+"/api/tags", nil, &body); err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(body.Models))
	for _, m := range body.Models {
		ids = append(ids, m.Name)
	}
	return ids, nil
}
