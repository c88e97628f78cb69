package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/thread"
)

// TestRunTraceSource: group commits holding a tool call, a tool result or
// an error leave a mark of their commit time, those of tokens alone none,
// and a commit refused for a lost claim none; the run's trace source is
// its run, whole log and marks, after its end too, for its owner alone;
// the marks go with the thread.
func TestRunTraceSource(t *testing.T) {
	t.Parallel()
	s, pool := setup(t)
	ctx := context.Background()
	th, r := startThreadRun(t, s)
	_, o := startThreadRun(t, s)
	toolCall := []thread.Record{{Seq: 3, Kind: thread.KindToolCall, CallID: "c1", Name: "clock", Text: "{}"},
		{Seq: 4, Kind: thread.KindToolCall, CallID: "c2", Name: "wait", Text: "{}"}}
	results := []thread.Record{{Seq: 5, Kind: thread.KindToolResult, CallID: "c1", Data: json.RawMessage(`"12:00"`)},
		{Seq: 6, Kind: thread.KindToolResult, CallID: "c2", Data: json.RawMessage(`"no"`), IsError: true}}
	for i, segs := range [][]thread.Segment{
		{{RunID: r.ID, Records: tokens(2, 1)}, {RunID: o.ID, Records: tokens(2, 1)}},
		{{RunID: r.ID, Records: toolCall}, {RunID: o.ID, Records: tokens(3, 1)}},
		{{RunID: r.ID, Records: results}},
		{{RunID: r.ID, Records: tokens(7, 2)}},
	} {
		if err := s.RunEventsAppend(ctx, segs); err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
	}
	src, err := s.RunTraceSource(ctx, "alice", th.ID, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got := markSeqs(src.Marks); got != "[4 6]" {
		t.Errorf("marks at %s, want [4 6]", got)
	}
	if len(src.Records) != 8 || src.Run.ID != r.ID || src.Run.Status != thread.RunRunning {
		t.Errorf("source: %d records of run %s %s, want 8 of %s running", len(src.Records), src.Run.ID, src.Run.Status, r.ID)
	}
	if len(src.Marks) == 2 && (src.Marks[1].At.Before(src.Marks[0].At) || src.Marks[0].At.Before(r.CreatedAt.Add(-time.Second))) {
		t.Errorf("mark times %v, want in order and after the run's start %v", src.Marks, r.CreatedAt)
	}

	// After the end the log is one compacted row: the marks stay.
	all := append(append(append(append([]thread.Record{{Seq: 1, Kind: thread.KindSnapshot, Status: thread.RunRunning, TreeSeq: 1}},
		tokens(2, 1)...), toolCall...), results...), tokens(7, 2)...)
	all = append(all, thread.Record{Seq: 9, Kind: thread.KindSnapshot, Status: thread.RunSucceeded, TreeSeq: 2})
	asst := checkpoint.Node{ID: r.MessageID, ThreadID: th.ID, ParentID: r.ParentID, Seq: 2, Role: checkpoint.RoleAssistant,
		Content: text(" abcd abcd abcd"), Status: &checkpoint.Status{Type: "complete", Reason: "stop"}, RunID: r.ID, CreatedAt: r.CreatedAt}
	if err := s.RunFinish(ctx, thread.RunFinish{Run: r, Status: thread.RunSucceeded, Assistant: asst, Records: all, Model: "builtin"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RunLogPurge(ctx); err != nil {
		t.Fatal(err)
	}
	lost := []thread.Segment{{RunID: r.ID, Records: []thread.Record{{Seq: 10, Kind: thread.KindError, Code: "model_error", Text: "x"}}}}
	var lostErr *thread.ClaimLostError
	if err := s.RunEventsAppend(ctx, lost); !errors.As(err, &lostErr) {
		t.Fatalf("append after the end: got %v, want ClaimLostError", err)
	}
	src, err = s.RunTraceSource(ctx, "alice", th.ID, r.ID)
	if err != nil || markSeqs(src.Marks) != "[4 6]" || len(src.Records) != 9 || src.Run.FinishedAt == nil {
		t.Fatalf("after the end: %v, %d records, marks %s, finished %v; want 9 records, marks [4 6], finished",
			err, len(src.Records), markSeqs(src.Marks), src.Run.FinishedAt)
	}

	other := newThread(t, s, "alice")
	for name, call := range map[string]func() error{
		"another caller": func() error { _, err := s.RunTraceSource(ctx, "bob", th.ID, r.ID); return err },
		"another thread": func() error { _, err := s.RunTraceSource(ctx, "alice", other.ID, r.ID); return err },
		"an unknown run": func() error { _, err := s.RunTraceSource(ctx, "alice", th.ID, uuid.New()); return err },
	} {
		if err := call(); errcode.Of(err) != errcode.NotFound {
			t.Errorf("%s: got %v, want not_found", name, err)
		}
	}

	// The marks go with the run's thread.
	if err := s.ThreadDelete(ctx, "alice", th.ID); err != nil {
		t.Fatal(err)
	}
	var left int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM run_marks WHERE run_id = $1`, r.ID).Scan(&left); err != nil || left != 0 {
		t.Errorf("marks left after the thread's delete: %d (%v), want none", left, err)
	}
}

func markSeqs(ms []thread.Mark) string {
	seqs := make([]int64, len(ms))
	for i, m := range ms {
		seqs[i] = m.Seq
	}
	return fmt.Sprint(seqs)
}

// BenchmarkRunEventsAppendMarks is BenchmarkRunEventsAppend's group
// commit when every run's segment holds a tool result, so that each
// writes a mark: the worst case of migration 0019's cost (a commit of
// tokens alone writes none).
func BenchmarkRunEventsAppendMarks(b *testing.B) {
	for _, runs := range []int{1, 100} {
		b.Run(fmt.Sprintf("runs=%d", runs), func(b *testing.B) {
			s, _ := setup(b)
			ctx := context.Background()
			ids := startRuns(b, s, runs)
			const per = 8
			next := int64(2)
			b.ResetTimer()
			for b.Loop() {
				segs := make([]thread.Segment, runs)
				for i, id := range ids {
					recs := tokens(next, per)
					recs[per-1] = thread.Record{Seq: next + per - 1, Kind: thread.KindToolResult, CallID: "c", Data: json.RawMessage(`"x"`)}
					segs[i] = thread.Segment{RunID: id, Records: recs}
				}
				if err := s.RunEventsAppend(ctx, segs); err != nil {
					b.Fatal(err)
				}
				next += per
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(int64(b.N)*int64(runs*per)), "ns/token")
		})
	}
}
