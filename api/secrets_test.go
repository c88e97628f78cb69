package api_test

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/threadline/threadline/api"
	"github.com/threadline/threadline/thread/engine"
)

// syncBuffer is a bytes.Buffer safe for concurrent writers (log handlers).
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// spellings are the forms a secret may leak in: letter cases, escapings
// and encodings.
func spellings(secret string) map[string]string {
	b := []byte(secret)
	return map[string]string{
		"as is": secret, "upper case": strings.ToUpper(secret), "lower case": strings.ToLower(secret),
		"URL-escaped": url.QueryEscape(secret), "base64": base64.RawStdEncoding.EncodeToString(b),
		"base64url": base64.RawURLEncoding.EncodeToString(b), "hex": hex.EncodeToString(b),
	}
}

// TestSecretsNeverLeak has a provider that rejects its key and echoes it
// back in other letter cases and encodings, and callers that send wrong
// keys; then it greps every log line, the metrics, the streams and the
// JSON answers for the provider key and the API keys in every spelling.
func TestSecretsNeverLeak(t *testing.T) {
	t.Parallel()
	const providerKey = "sk-Threadline-Provider-Secret-0123456789abcdef"
	const apiKey = "tl-Caller-Secret-Key-9876543210"
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		w.Header().Set("Content-Type", "application/json")
		status := http.StatusUnauthorized
		if strings.Contains(r.URL.RawQuery, "fail=500") {
			status = http.StatusInternalServerError
		}
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"error":{"message":"Incorrect API key provided: %s (as base64 %s, hex %s, url %s)"}}`,
			strings.ToUpper(got), base64.StdEncoding.EncodeToString([]byte(got)), hex.EncodeToString([]byte(got)), url.QueryEscape(strings.ToLower(got)))
	}))
	t.Cleanup(echo.Close)
	file := filepath.Join(t.TempDir(), "models.json")
	models := fmt.Sprintf(`{"models":[{"name":"echo","provider":"openai","model":"m","base_url":%q,"api_key_env":"ECHO_KEY"}]}`, echo.URL+"/v1")
	if err := os.WriteFile(file, []byte(models), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e := setup(t, withVars(map[string]string{"THREADLINE_MODELS_FILE": file, "ECHO_KEY": providerKey}),
		func(o *options) { o.keys = map[string]string{apiKey: "alice"} },
		withAPI(func(c *api.Config) { c.Logger = logger }),
		withService(func(c *engine.Config) { c.Logger = logger }),
		func(o *options) { o.raw = true })
	var seen strings.Builder
	requests := 0
	record := func(resp *http.Response, b []byte) {
		requests++
		fmt.Fprintf(&seen, "%v\n%s\n", resp.Header, b)
	}
	// Wrong keys, near misses of the right one.
	for _, k := range []string{strings.ToUpper(apiKey), apiKey + "x", apiKey[:10]} {
		e.key = k
		record(e.do("GET", "/api/v1/threads", nil))
	}
	e.key = apiKey
	tid := newID()
	body := newMessage("hello", nil)
	body["run_config"] = map[string]any{"model": "echo"}
	resp, b := e.do("POST", "/api/v1/threads/"+tid+"/runs/stream", body)
	record(resp, b)
	if !strings.Contains(string(b), `"type":"error"`) || !strings.Contains(string(b), "[redacted]") {
		t.Fatalf("the rejected key's run: got %s, want an error event with the key redacted", b)
	}
	final := checkRun(t, readEvents(t, bytes.NewReader(b)))
	e.raw.Stop() // the run's raw records, if any, are written
	for _, path := range []string{"/api/v1/threads/" + tid + "/messages", "/api/v1/threads/" + tid + "/runs/" + final.RunID,
		"/api/v1/threads/" + tid + "/runs/" + final.RunID + "/stream", "/api/v1/threads/" + tid + "/runs/" + final.RunID + "/raw",
		"/api/v1/threads/" + tid + "/checkpoints", "/metrics"} {
		record(e.do("GET", path, nil))
	}
	out := map[string]string{"responses": seen.String(), "logs": logs.String()}
	leaks := 0
	for where, text := range out {
		low := strings.ToLower(text)
		for _, secret := range []string{providerKey, apiKey} {
			for form, s := range spellings(secret) {
				if strings.Contains(low, strings.ToLower(s)) {
					leaks++
					t.Errorf("%s hold the secret %.12s… %s", where, secret, form)
				}
			}
		}
	}
	t.Logf("%d requests, %d bytes of responses and %d of logs searched for 2 secrets in 7 spellings: %d leaks",
		requests, len(out["responses"]), len(out["logs"]), leaks)
}
