package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/thread"
)

func rawText(recs []thread.RawRecord) string {
	var b strings.Builder
	for _, r := range recs {
		fmt.Fprintf(&b, "%d:%d:%s/%s:%s\n", r.N, r.Sequence, r.Source, r.Kind, r.Data)
	}
	return b.String()
}

// TestRunRawAppendAndList: records come back in order, byte for byte, with
// their numbers, sequences and times; pages continue after a record; only
// the thread's owner, through the run's own thread, reads them.
func TestRunRawAppendAndList(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	ctx := context.Background()
	th, run := startThreadRun(t, s)
	at := time.Date(2026, 11, 25, 10, 0, 0, 123000, time.UTC)
	line := `data: {"choices":[{"delta":{"content":"Hi"}}],  "x":1}`
	lineJSON, _ := json.Marshal(line)
	call := `{"tool_call_id":"c1", "tool_name":"calculator","input":"{\"expression\":\"12*7\"}","output":84,"is_error":false}`
	recs := []thread.RawRecord{
		{Sequence: 2, Source: thread.RawProvider, Kind: thread.RawChunk, Data: lineJSON, At: at},
		{Sequence: 3, Source: thread.RawTool, Kind: thread.RawCall, Data: json.RawMessage(`{"tool_call_id":"c0","tool_name":"clock"}`), At: at},
		{Sequence: 4, Source: thread.RawTool, Kind: thread.RawCall, Data: json.RawMessage(call)}, // no time: the append's
	}
	if err := s.RunRawAppend(ctx, run.ID, recs[:1]); err != nil {
		t.Fatalf("RunRawAppend: %v", err)
	}
	if err := s.RunRawAppend(ctx, run.ID, recs[1:]); err != nil {
		t.Fatalf("RunRawAppend: %v", err)
	}
	got, err := s.RunRawList(ctx, "alice", th.ID, run.ID, 0, 0)
	if err != nil {
		t.Fatalf("RunRawList: %v", err)
	}
	want := "1:2:provider/chunk:" + string(lineJSON) + "\n" +
		`2:3:tool/call:{"tool_call_id":"c0","tool_name":"clock"}` + "\n" +
		"3:4:tool/call:" + call + "\n" // byte for byte, spaces too
	if rawText(got) != want {
		t.Errorf("records:\ngot  %s\nwant %s", rawText(got), want)
	}
	if len(got) == 3 && (!got[0].At.Equal(at) || got[2].At.IsZero() || got[2].At.Location() != time.UTC) {
		t.Errorf("times: got %v and %v, want %v and the append's time in UTC", got[0].At, got[2].At, at)
	}
	page, err := s.RunRawList(ctx, "alice", th.ID, run.ID, 1, 1)
	if err != nil || len(page) != 1 || page[0].N != 2 {
		t.Errorf("the page after record 1, limit 1: got %s %v, want record 2", rawText(page), err)
	}
	if rest, err := s.RunRawList(ctx, "alice", th.ID, run.ID, 3, 0); err != nil || len(rest) != 0 {
		t.Errorf("after the last record: got %s %v, want none", rawText(rest), err)
	}

	other := newThread(t, s, "alice")
	for name, call := range map[string]func() error{
		"another caller":  func() error { _, err := s.RunRawList(ctx, "bob", th.ID, run.ID, 0, 0); return err },
		"another thread":  func() error { _, err := s.RunRawList(ctx, "alice", other.ID, run.ID, 0, 0); return err },
		"an unknown run":  func() error { _, err := s.RunRawList(ctx, "alice", th.ID, uuid.New(), 0, 0); return err },
		"append, unknown": func() error { return s.RunRawAppend(ctx, uuid.New(), recs[:1]) },
	} {
		if err := call(); errcode.Of(err) != errcode.NotFound {
			t.Errorf("%s: got %v, want not_found", name, err)
		}
	}
	// A run without records is an empty list, not a 404.
	run2, err := startRun(t, s, other, uuid.Nil)
	if err != nil {
		t.Fatal(err)
	}
	if none, err := s.RunRawList(ctx, "alice", other.ID, run2.ID, 0, 0); err != nil || none == nil || len(none) != 0 {
		t.Errorf("a run without records: got %v %v, want an empty list", none, err)
	}
	for name, bad := range map[string]thread.RawRecord{
		"no source": {Kind: "chunk", Data: json.RawMessage(`1`)},
		"no kind":   {Source: "tool", Data: json.RawMessage(`1`)},
		"not JSON":  {Source: "tool", Kind: "input", Data: json.RawMessage(`{"a":`)},
	} {
		if err := s.RunRawAppend(ctx, run.ID, []thread.RawRecord{recs[0], bad}); errcode.Of(err) != errcode.Invalid {
			t.Errorf("%s: got %v, want invalid_request", name, err)
		}
	}
	if got, _ := s.RunRawList(ctx, "alice", th.ID, run.ID, 0, 0); len(got) != 3 {
		t.Errorf("after refused appends: got %d records, want 3 (nothing appended)", len(got))
	}
}

// TestRunRawCap: a run's records stop at the cap with one truncation
// marker, the last record, naming the cap and the first dropped sequence.
func TestRunRawCap(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	s.SetRawMaxBytes(100)
	ctx := context.Background()
	th, run := startThreadRun(t, s)
	rec := func(seq int64) thread.RawRecord { // 32 bytes of data
		return thread.RawRecord{Sequence: seq, Source: thread.RawProvider, Kind: thread.RawChunk, Data: json.RawMessage(`"` + strings.Repeat("x", 30) + `"`)}
	}
	if err := s.RunRawAppend(ctx, run.ID, []thread.RawRecord{rec(1), rec(2)}); err != nil {
		t.Fatal(err)
	}
	if err := s.RunRawAppend(ctx, run.ID, []thread.RawRecord{rec(3), rec(4), rec(5)}); err != nil {
		t.Fatal(err)
	}
	if err := s.RunRawAppend(ctx, run.ID, []thread.RawRecord{{Sequence: 6, Source: "tool", Kind: "input", Data: json.RawMessage(`1`)}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.RunRawList(ctx, "alice", th.ID, run.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	for _, r := range got {
		seqs = append(seqs, r.Sequence)
	}
	if len(got) != 4 || fmt.Sprint(seqs) != "[1 2 3 4]" {
		t.Fatalf("records: got %s, want 3 of 32 bytes within 100, then the marker", rawText(got))
	}
	last := got[3]
	if last.Source != thread.RawService || last.Kind != thread.RawTruncated || string(last.Data) != `{"max_bytes":100,"first_dropped_sequence":4}` {
		t.Errorf("marker: got %s/%s %s, want service/truncated naming 100 bytes and sequence 4", last.Source, last.Kind, last.Data)
	}
}

// TestRunRawConcurrentAppends: appends of one run from several
// connections at once are serialized: every record is kept once, numbered
// without gaps.
func TestRunRawConcurrentAppends(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	ctx := context.Background()
	th, run := startThreadRun(t, s)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- s.RunRawAppend(ctx, run.ID, []thread.RawRecord{
				{Sequence: int64(i), Source: "tool", Kind: "input", Data: json.RawMessage(`1`)},
				{Sequence: int64(i), Source: "tool", Kind: "output", Data: json.RawMessage(`2`)}})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("RunRawAppend: %v", err)
		}
	}
	got, err := s.RunRawList(ctx, "alice", th.ID, run.ID, 0, 0)
	if err != nil || len(got) != 16 {
		t.Fatalf("records: got %d %v, want 16", len(got), err)
	}
	for i, r := range got {
		if r.N != int64(i+1) || (i%2 == 1 && (r.Kind != "output" || got[i-1].Sequence != r.Sequence)) {
			t.Fatalf("record %d: got n %d %s seq %d, want n %d and each append's two records together", i, r.N, r.Kind, r.Sequence, i+1)
		}
	}
}

// TestThreadDeleteRemovesRawRecords: deleting a thread deletes its runs'
// raw records, and a later append for the run is not_found.
func TestThreadDeleteRemovesRawRecords(t *testing.T) {
	t.Parallel()
	s, pool := setup(t)
	ctx := context.Background()
	th, run := startThreadRun(t, s)
	if err := s.RunRawAppend(ctx, run.ID, []thread.RawRecord{{Sequence: 1, Source: "tool", Kind: "input", Data: json.RawMessage(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	if err := s.ThreadDelete(ctx, "alice", th.ID); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM run_raw WHERE run_id = $1`, run.ID).Scan(&n); err != nil || n != 0 {
		t.Errorf("raw rows after the thread's delete: got %d %v, want 0", n, err)
	}
	if err := s.RunRawAppend(ctx, run.ID, []thread.RawRecord{{Sequence: 2, Source: "tool", Kind: "input", Data: json.RawMessage(`{}`)}}); errcode.Of(err) != errcode.NotFound {
		t.Errorf("append after the delete: got %v, want not_found", err)
	}
}

// TestRunRawAppendAll: one write for several runs answers each append on
// its own: an unknown run and invalid records write nothing of theirs,
// the others are appended, each numbered in its own run.
func TestRunRawAppendAll(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	ctx := context.Background()
	th, a := startThreadRun(t, s)
	th2, b := startThreadRun(t, s)
	rec := func(seq int64, data string) thread.RawRecord {
		return thread.RawRecord{Sequence: seq, Source: thread.RawTool, Kind: thread.RawCall, Data: json.RawMessage(data)}
	}
	if err := s.RunRawAppend(ctx, b.ID, []thread.RawRecord{rec(1, `"b1"`)}); err != nil {
		t.Fatal(err)
	}
	errs, err := s.RunRawAppendAll(ctx, []thread.RawAppend{
		{RunID: a.ID, Records: []thread.RawRecord{rec(2, `"a2"`), rec(3, `"a3"`)}},
		{RunID: uuid.New(), Records: []thread.RawRecord{rec(1, `"nobody"`)}},
		{RunID: b.ID, Records: []thread.RawRecord{rec(5, `"b5"`)}},
		{RunID: th.ID, Records: []thread.RawRecord{rec(1, `{"bad":`)}},
	})
	if err != nil {
		t.Fatalf("RunRawAppendAll: %v", err)
	}
	wantCodes := []errcode.Code{"", errcode.NotFound, "", errcode.Invalid}
	for i, want := range wantCodes {
		if got := errcode.Of(errs[i]); (want == "" && errs[i] != nil) || (want != "" && got != want) {
			t.Errorf("append %d: got %v, want %q", i, errs[i], want)
		}
	}
	for _, c := range []struct {
		th   *thread.Thread
		run  uuid.UUID
		want string
	}{
		{th, a.ID, "1:2:tool/call:\"a2\"\n2:3:tool/call:\"a3\"\n"},
		{th2, b.ID, "1:1:tool/call:\"b1\"\n2:5:tool/call:\"b5\"\n"},
	} {
		got, err := s.RunRawList(ctx, "alice", c.th.ID, c.run, 0, 0)
		if err != nil || rawText(got) != c.want {
			t.Errorf("run %s: got %q %v, want %q", c.run, rawText(got), err, c.want)
		}
	}
}
