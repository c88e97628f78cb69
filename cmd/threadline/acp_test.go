package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/store/pgtest"
	"github.com/threadline/threadline/thread/threadtest/wait"
)

// TestACPAgentOverHTTP wires --acp-config: an invalid file stops the
// start naming THREADLINE_ACP_CONFIG; with the SDK's example agent (built
// from the module cache) as acp:example, a run over HTTP ends
// requires_action at its permission, the approval continues it to its
// end, and the run's raw records hold the JSON-RPC lines sent to it.
func TestACPAgentOverHTTP(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "example-agent")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/coder/acp-go-sdk/example/agent").CombinedOutput(); err != nil {
		t.Fatalf("build the SDK's example agent: %v\n%s", err, out)
	}
	db := pgtest.New(t)
	ctx := context.Background()
	bad := writeFile(t, "bad-agents.json", `{"agents":{"x":{"args":["a"]}}}`)
	cfg, err := parseConfig("serve", []string{"--addr", "127.0.0.1:0", "--database-url", db, "--acp-config", bad}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := Start(ctx, cfg, io.Discard); err == nil || !strings.Contains(err.Error(), "THREADLINE_ACP_CONFIG") {
		if p != nil {
			_ = p.Close()
		}
		t.Fatalf("Start with an invalid agents file: got %v, want an error naming THREADLINE_ACP_CONFIG", err)
	}
	binJSON, _ := json.Marshal(bin)
	good := writeFile(t, "agents.json", `{"agents":{"example":{"command":`+string(binJSON)+`,"timeout":"20s"}}}`)
	cfg, err = parseConfig("serve", []string{"--addr", "127.0.0.1:0", "--database-url", db, "--acp-config", good}, func(k string) string {
		if k == "PATH" {
			return "/usr/bin:/bin"
		}
		return ""
	}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Start(ctx, cfg, io.Discard)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer p.Close()
	base := "http://" + p.Addr() + "/api/v1/threads/" + uuid.NewString()
	lines := post(t, base+"/runs/stream", `{"message":{"content":"improve it"},"run_config":{"model":"acp:example"}}`)
	last := lines[len(lines)-1]
	if !strings.Contains(last, `"run_status":"requires_action"`) || !strings.Contains(last, `"name":"permission"`) {
		t.Fatalf("first run's last event: got %.500s, want requires_action with a permission part", last)
	}
	var first struct {
		RunID     string `json:"run_id"`
		MessageID string `json:"message_id"`
	}
	for _, l := range lines {
		if strings.Contains(l, `"type":"token"`) {
			_ = json.Unmarshal([]byte(l), &first)
			break
		}
	}
	cont := `{"parent_message_id":"` + first.MessageID + `","approvals":[{"tool_call_id":"call_2","approved":true}]}`
	lines = post(t, base+"/runs/stream", cont)
	last = lines[len(lines)-1]
	if !strings.Contains(last, `"run_status":"succeeded"`) || !strings.Contains(last, "successfully updated the configuration") {
		t.Fatalf("continuation's last event: got %.500s, want succeeded with the agent's closing text", last)
	}
	var raw []byte
	wait.Eventually(t, 20*time.Second, func() bool {
		resp, err := http.Get(base + "/runs/" + first.RunID + "/raw")
		if err != nil {
			t.Fatal(err)
		}
		raw, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		return strings.Contains(string(raw), `"kind":"sent"`) && strings.Contains(string(raw), `session/new`)
	}, "raw records: got %.500s, want the session/new line sent", func() any { return raw })
}

// post sends body and returns the NDJSON stream's lines.
func post(t *testing.T, url, body string) []string {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: got %d %s", url, resp.StatusCode, b)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}
