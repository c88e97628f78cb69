package wire_test

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/threadline/threadline/checkpoint"
)

// Temporary: writes the golden files with the old encoders.
func TestGenGolden(t *testing.T) {
	var ev, ts, th, rn, parts, cfg bytes.Buffer
	for _, e := range fixtureEvents() {
		b, err := e.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		ev.Write(b)
		ev.WriteByte('\n')
	}
	for _, s := range fixtureThreadSnapshots() {
		b, err := s.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		ts.Write(b)
		ts.WriteByte('\n')
	}
	for _, x := range fixtureThreads() {
		b, _ := json.Marshal(&x)
		th.Write(b)
		th.WriteByte('\n')
	}
	for _, x := range fixtureRuns() {
		b, _ := json.Marshal(&x)
		rn.Write(b)
		rn.WriteByte('\n')
		c, _ := json.Marshal(x.Config)
		cfg.Write(c)
		cfg.WriteByte('\n')
		c, _ = json.Marshal(x.Usage)
		cfg.Write(c)
		cfg.WriteByte('\n')
		c, _ = json.Marshal(x.Error)
		cfg.Write(c)
		cfg.WriteByte('\n')
	}
	_, _, nodes := fixtureTree()
	for _, n := range nodes {
		parts.Write(checkpoint.MarshalParts(n.Content))
		parts.WriteByte('\n')
		b, _ := json.Marshal(n.Status)
		parts.Write(b)
		parts.WriteByte('\n')
		b, _ = json.Marshal(n.Attachments)
		parts.Write(b)
		parts.WriteByte('\n')
	}
	parts.Write(checkpoint.MarshalParts(fixtureParts("so far")))
	parts.WriteByte('\n')
	for name, b := range map[string]*bytes.Buffer{"events.ndjson": &ev, "thread_snapshots.ndjson": &ts, "threads.ndjson": &th, "runs.ndjson": &rn,
		"store_content.ndjson": &parts, "store_run.ndjson": &cfg} {
		if err := os.WriteFile("testdata/"+name, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
