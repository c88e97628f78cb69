package wire_test

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/threadline/threadline/api/wire"
	"github.com/threadline/threadline/api/wire/wiretest"
	"github.com/threadline/threadline/thread"
)

// TestGolden: the wire is byte for byte what it was before it moved here
// (testdata was written by the encoders of then), line by line. The store
// holds its columns to the store_*.ndjson files (store/content_test.go).
func TestGolden(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		file  string
		lines func() [][]byte
	}{
		{"events.ndjson", func() (out [][]byte) {
			for _, ev := range wiretest.Events() {
				out = append(out, wire.AppendEvent(nil, &ev))
			}
			return out
		}},
		{"thread_snapshots.ndjson", func() (out [][]byte) {
			for _, s := range wiretest.ThreadSnapshots() {
				out = append(out, wire.AppendThreadSnapshot(nil, &s))
			}
			return out
		}},
		{"threads.ndjson", func() (out [][]byte) {
			for _, th := range wiretest.Threads() {
				out = append(out, mustJSON(t, wire.NewThread(&th)))
			}
			return out
		}},
		{"trace.ndjson", func() (out [][]byte) {
			tr := wiretest.Trace()
			return append(out, mustJSON(t, wire.NewTrace(&tr)), mustJSON(t, wire.NewTrace(&thread.Trace{RunID: "x"})))
		}},
		{"runs.ndjson", func() (out [][]byte) {
			for _, r := range wiretest.Runs() {
				out = append(out, mustJSON(t, wire.NewRun(&r)))
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
	evs := wiretest.Events()
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
	for _, ev := range wiretest.Events() {
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
