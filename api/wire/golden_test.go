package wire_test

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/threadline/threadline/api/wire"
	"github.com/threadline/threadline/checkpoint"
)

// TestGolden: the wire and the stored content are byte for byte what they
// were before the wire moved here (testdata was written by the encoders
// of then), line by line.
func TestGolden(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		file  string
		lines func() [][]byte
	}{
		{"events.ndjson", func() (out [][]byte) {
			for _, ev := range fixtureEvents() {
				out = append(out, wire.AppendEvent(nil, &ev))
			}
			return out
		}},
		{"thread_snapshots.ndjson", func() (out [][]byte) {
			for _, s := range fixtureThreadSnapshots() {
				out = append(out, wire.AppendThreadSnapshot(nil, &s))
			}
			return out
		}},
		{"threads.ndjson", func() (out [][]byte) {
			for _, th := range fixtureThreads() {
				out = append(out, mustJSON(t, wire.NewThread(&th)))
			}
			return out
		}},
		{"runs.ndjson", func() (out [][]byte) {
			for _, r := range fixtureRuns() {
				out = append(out, mustJSON(t, wire.NewRun(&r)))
			}
			return out
		}},
		{"store_content.ndjson", func() (out [][]byte) {
			_, _, nodes := fixtureTree()
			for _, n := range nodes {
				out = append(out, checkpoint.MarshalParts(n.Content), mustJSON(t, n.Status), mustJSON(t, n.Attachments))
			}
			return append(out, checkpoint.MarshalParts(fixtureParts("so far")))
		}},
		{"store_run.ndjson", func() (out [][]byte) {
			for _, r := range fixtureRuns() {
				out = append(out, mustJSON(t, r.Config), mustJSON(t, r.Usage), mustJSON(t, r.Error))
			}
			return out
		}},
	} {
		want, err := os.ReadFile("testdata/" + tc.file)
		if err != nil {
			t.Fatal(err)
		}
		wantLines := bytes.Split(bytes.TrimSuffix(want, []byte("\n")), []byte("\n"))
		got := tc.lines()
		if len(got) != len(wantLines) {
			t.Fatalf("%s: %d lines, want %d", tc.file, len(got), len(wantLines))
		}
		for i := range got {
			if !bytes.Equal(got[i], wantLines[i]) {
				t.Errorf("%s line %d:\n got %s\nwant %s", tc.file, i+1, got[i], wantLines[i])
			}
		}
	}
}

// TestAppendEventLine: an event's line is its JSON and a newline, as
// json.Encoder ends a value, and a line buffer is reused.
func TestAppendEventLine(t *testing.T) {
	t.Parallel()
	evs := fixtureEvents()
	var line []byte
	for i := range evs {
		line = wire.AppendEventLine(line[:0], &evs[i])
		want := append(wire.AppendEvent(nil, &evs[i]), '\n')
		if !bytes.Equal(line, want) {
			t.Errorf("event %d line =\n%s\nwant\n%s", i, line, want)
		}
		if !json.Valid(line) {
			t.Errorf("event %d: not JSON: %s", i, line)
		}
	}
}

// TestDecodeRoundTrip: what the service writes decodes into the wire
// types with the values it was written from.
func TestDecodeRoundTrip(t *testing.T) {
	t.Parallel()
	for _, ev := range fixtureEvents() {
		var got wire.Event
		if err := json.Unmarshal(wire.AppendEvent(nil, &ev), &got); err != nil {
			t.Fatal(err)
		}
		if got.Type != ev.Type || got.RunID != ev.RunID.String() || got.Sequence != ev.Sequence {
			t.Errorf("decoded %+v from %+v", got, ev)
		}
		if ev.Snapshot != nil {
			_, path, _ := ev.Snapshot.Export()
			if len(got.Messages) != len(path) || got.RunStatus != string(ev.Snapshot.RunStatus) {
				t.Errorf("snapshot decoded %d messages (%s), want %d (%s)", len(got.Messages), got.RunStatus, len(path), ev.Snapshot.RunStatus)
			}
		}
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
