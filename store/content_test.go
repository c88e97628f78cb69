package store

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"testing"

	"github.com/google/uuid"
	"github.com/threadline/threadline/api/wire/wiretest"
	"github.com/threadline/threadline/checkpoint"
)

// TestStorageGolden: the checkpoint and run columns are written byte for
// byte as before their codec moved here (the golden files were written by
// the domain types' json tags and MarshalJSON methods of then), and read
// back to values that write the same bytes again.
func TestStorageGolden(t *testing.T) {
	t.Parallel()
	var content, run [][]byte
	_, _, nodes := wiretest.Tree()
	for _, n := range nodes {
		st, atts := []byte("null"), []byte("null")
		if n.Status != nil {
			st = marshalStatus(n.Status)
		}
		if n.Attachments != nil {
			atts = marshalAttachments(n.Attachments)
		}
		content = append(content, marshalParts(n.Content), st, atts)
		back, err := unmarshalParts(marshalParts(n.Content))
		if err != nil || !bytes.Equal(marshalParts(back), marshalParts(n.Content)) {
			t.Errorf("parts of %s read back as %s (%v)", n.ID, marshalParts(back), err)
		}
		if len(n.Attachments) > 0 {
			ab, err := unmarshalAttachments(atts)
			if err != nil || !bytes.Equal(marshalAttachments(ab), atts) {
				t.Errorf("attachments of %s read back as %s (%v)", n.ID, marshalAttachments(ab), err)
			}
		}
	}
	content = append(content, marshalParts(wiretest.Parts("so far")))
	for _, r := range wiretest.Runs() {
		cfg, err := marshalRunConfig(&r.Config)
		if err != nil {
			t.Fatal(err)
		}
		u, e := []byte("null"), []byte("null")
		if r.Usage != nil {
			u = marshalUsage(r.Usage)
		}
		if r.Error != nil {
			e = marshalRunError(r.Error)
		}
		run = append(run, cfg, u, e)
	}
	for file, got := range map[string][][]byte{"store_content.ndjson": content, "store_run.ndjson": run} {
		want, err := os.ReadFile("../api/wire/testdata/" + file)
		if err != nil {
			t.Fatal(err)
		}
		lines := bytes.Split(bytes.TrimSuffix(want, []byte("\n")), []byte("\n"))
		if len(got) != len(lines) {
			t.Fatalf("%s: %d lines, want %d", file, len(got), len(lines))
		}
		for i := range got {
			if !bytes.Equal(got[i], lines[i]) {
				t.Errorf("%s line %d:\n got %s\nwant %s", file, i+1, got[i], lines[i])
			}
			if !json.Valid(got[i]) {
				t.Errorf("%s line %d is not JSON", file, i+1)
			}
		}
	}
}

// TestSubagentPartRoundTrip: a delegate call's part keeps its child
// thread and run through the column's codec, answered or not, and a part
// without one stores no subagent field.
func TestSubagentPartRoundTrip(t *testing.T) {
	t.Parallel()
	ref := &checkpoint.SubagentRef{ThreadID: uuid.New(), RunID: uuid.New()}
	parts := []checkpoint.Part{
		{Type: checkpoint.PartToolCall, ToolCallID: "d1", ToolName: "delegate", Args: json.RawMessage(`{"task":"x"}`), ArgsText: `{"task":"x"}`, Subagent: ref},
		{Type: checkpoint.PartToolCall, ToolCallID: "d2", ToolName: "delegate", Args: json.RawMessage(`{}`), Result: json.RawMessage(`"ok"`), Subagent: ref},
		{Type: checkpoint.PartToolCall, ToolCallID: "c1", ToolName: "calculator", Args: json.RawMessage(`{}`), Result: json.RawMessage(`1`)},
	}
	b := marshalParts(parts)
	if bytes.Count(b, []byte(`"subagent":{"thread_id":"`+ref.ThreadID.String()+`","run_id":"`+ref.RunID.String()+`"}`)) != 2 {
		t.Fatalf("stored: %s, want the child named on the two delegate parts", b)
	}
	got, err := unmarshalParts(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, parts) {
		t.Fatalf("read back:\n got %+v\nwant %+v", got, parts)
	}
}
