package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/threadline/threadline/api/wire"
)

// TestACPPermissionOptions: an ACP agent no one here wrote (the Go SDK's
// example agent) asks a permission: the waiting tool-call part carries
// the agent's own options (ids, names, kinds) as its approval; an
// option_id the agent did not offer, or one whose kind says the opposite
// of approved, is 400 and writes nothing; the option chosen by its id
// goes back to the agent, which ends its turn by it.
func TestACPPermissionOptions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "example-agent")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/coder/acp-go-sdk/example/agent").CombinedOutput(); err != nil {
		t.Fatalf("build the SDK's example agent: %v\n%s", err, out)
	}
	config := filepath.Join(dir, "acp.json")
	agents := fmt.Sprintf(`{"agents":{"example":{"command":%q,"cwd":%q,"timeout":"30s"}}}`, bin, dir)
	if err := os.WriteFile(config, []byte(agents), 0o600); err != nil {
		t.Fatal(err)
	}
	e := setup(t, withVars(map[string]string{"THREADLINE_ACP_CONFIG": config}))
	tid := newID()
	body := newMessage("improve the project", nil)
	body["run_config"] = map[string]any{"model": "acp:example"}
	resp, evs := e.stream(tid, body)
	wantStatus(t, resp, nil, http.StatusOK, "")
	if last := evs[len(evs)-1]; last.RunStatus != "requires_action" {
		t.Fatalf("first run ended %s, want requires_action", last.RunStatus)
	}
	snap := e.snapshot(tid)
	turn := snap.Messages[len(snap.Messages)-1]
	var edit *wire.Part
	for i := range turn.Content {
		if p := &turn.Content[i]; p.Type == "tool-call" && p.ToolCallID == "call_2" {
			edit = p
		}
	}
	want := &wire.PartApproval{ID: "call_2", Options: []wire.ApprovalOption{
		{ID: "allow", Kind: "allow-once", Label: "Allow this change"}, {ID: "reject", Kind: "reject-once", Label: "Skip this change"}}}
	if edit == nil || edit.Approval == nil || fmt.Sprint(*edit.Approval) != fmt.Sprint(*want) {
		t.Fatalf("the waiting call's approval: got %+v, want %+v", edit, want)
	}

	path := "/api/v1/threads/" + tid + "/runs/stream"
	cont := func(a map[string]any) map[string]any {
		return map[string]any{"parent_message_id": turn.ID, "approvals": []any{a}}
	}
	for _, bad := range []map[string]any{
		{"tool_call_id": "call_2", "approved": true, "option_id": "allow_always"},
		{"tool_call_id": "call_2", "approved": true, "option_id": "reject"},
		{"tool_call_id": "call_2", "option_id": "allow"}, // approved left out: false, against allow's kind
	} {
		resp, b := e.do("POST", path, cont(bad))
		wantStatus(t, resp, b, http.StatusBadRequest, "invalid_request")
	}
	if after := e.snapshot(tid); len(after.Messages) != len(snap.Messages) || after.Messages[len(after.Messages)-1].Status.Type != "requires-action" {
		t.Fatalf("after refused answers: %d messages, last %+v; want the turn still waiting", len(after.Messages), after.Messages[len(after.Messages)-1].Status)
	}

	resp, evs = e.stream(tid, cont(map[string]any{"tool_call_id": "call_2", "approved": false, "option_id": "reject"}))
	wantStatus(t, resp, nil, http.StatusOK, "")
	last := evs[len(evs)-1]
	if last.RunStatus != "succeeded" {
		t.Fatalf("the continuation ended %s, want succeeded", last.RunStatus)
	}
	parts := lastParts(t, last.Raw)
	var text strings.Builder
	for _, p := range parts {
		var x struct{ Type, Text string }
		_ = json.Unmarshal(p, &x)
		if x.Type == "text" {
			text.WriteString(x.Text)
		}
	}
	if !strings.Contains(text.String(), "skip the configuration update") || strings.Contains(text.String(), "successfully updated") {
		t.Fatalf("the agent's end after its reject option: %q", text.String())
	}
}
