package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// The list endpoints' default bases (OPENAI_BASE_URL and
// ANTHROPIC_BASE_URL replace the first two; Registry.GoogleBase the last).
const (
	OpenAIBase    = "https://api.openai.com/v1"
	AnthropicBase = "https://api.anthropic.com"
	GoogleBase    = "https://generativelanguage.googleapis.com"
)

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

// ListOpenAI reads GET {base}/models. From OpenAI itself it keeps the chat
// models (its list also holds embeddings, speech and image models); from
// another OpenAI-compatible server (vLLM, LM Studio…) it keeps them all.
func ListOpenAI(ctx context.Context, c *http.Client, base, key string, official bool) ([]string, error) {
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

// ListAnthropic reads GET {base}/v1/models.
func ListAnthropic(ctx context.Context, c *http.Client, base, key string) ([]string, error) {
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

// ListGoogle reads GET {base}/v1beta/models and keeps those that generate content.
func ListGoogle(ctx context.Context, c *http.Client, base, key string) ([]string, error) {
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

// ListOllama reads GET {base}/api/tags: the models pulled on that host.
func ListOllama(ctx context.Context, c *http.Client, base string) ([]string, error) {
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
