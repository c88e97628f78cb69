package model

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/threadline/threadline/model/provider"
)

// Model discovery: with only a provider's key set (OPENAI_API_KEY=… make
// run), the picker should offer that provider's models without a second
// variable naming them. Discover asks each configured provider for its
// list once, at start.

// maxDiscovered bounds the names one provider may add to the list.
const maxDiscovered = 60

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
			base, official = provider.OpenAIBase, true
		}
		return discovery{p, func(ctx context.Context, c *http.Client) ([]string, error) {
			return provider.ListOpenAI(ctx, c, base, key, official)
		}}, true
	case ProviderAnthropic:
		key := env(EnvAnthropicKey)
		if key == "" {
			return discovery{}, false
		}
		base := env(EnvAnthropicURL)
		if base == "" {
			base = provider.AnthropicBase
		}
		return discovery{p, func(ctx context.Context, c *http.Client) ([]string, error) {
			return provider.ListAnthropic(ctx, c, base, key)
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
			base = provider.GoogleBase
		}
		return discovery{p, func(ctx context.Context, c *http.Client) ([]string, error) {
			return provider.ListGoogle(ctx, c, base, key)
		}}, true
	case ProviderOllama:
		base := ollamaURL(r.getenv(EnvOllamaHost))
		if base == "" {
			return discovery{}, false
		}
		return discovery{p, func(ctx context.Context, c *http.Client) ([]string, error) {
			return provider.ListOllama(ctx, c, base)
		}}, true
	}
	return discovery{}, false
}
