package client

import (
	"encoding/json"
	"testing"
)

func TestDecodeEventHead(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, line string
		wantHead   string // the repository's head, "" for none
	}{
		{"token", `{"type":"token","run_id":"r","sequence":2,"message_id":"m","text":"hi"}`, ""},
		{"snapshot", `{"type":"snapshot","run_id":"r","sequence":9,"thread_id":"t","run_status":"succeeded","messages":[{"id":"u","role":"user","content":[{"type":"text","text":"q"}]}],"messageRepository":{"headId":"a","messages":[{"message":{"id":"u"},"parentId":null}]}}`, "a"},
		{"error", `{"type":"error","run_id":"r","sequence":3,"code":"model_error","error":"boom"}`, ""},
		{"tool call", `{"type":"tool_call","run_id":"r","sequence":4,"tool_call_id":"c","tool_name":"calculator","args_text":""}`, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got, want Event
			if err := DecodeEventHead([]byte(tc.line), &got); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(tc.line), &want); err != nil {
				t.Fatal(err)
			}
			if got.Messages != nil {
				t.Errorf("Messages = %v, want them left out", got.Messages)
			}
			head := ""
			if got.Repository != nil && got.Repository.HeadID != nil {
				head = *got.Repository.HeadID
			}
			if head != tc.wantHead || (got.Repository != nil && got.Repository.Messages != nil) {
				t.Errorf("Repository = %+v, want only the head %q", got.Repository, tc.wantHead)
			}
			got.Repository, want.Repository, want.Messages = nil, nil, nil
			gotRaw := string(got.Raw)
			got.Raw = nil
			gb, _ := json.Marshal(got)
			wb, _ := json.Marshal(want)
			if string(gb) != string(wb) || gotRaw != tc.line {
				t.Errorf("got %s (raw %q), want %s", gb, gotRaw, wb)
			}
		})
	}
	var ev Event
	if err := DecodeEventHead([]byte(`not json`), &ev); err == nil {
		t.Error("a line that is not JSON decoded without an error")
	}
}
