package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/store"
	"github.com/threadline/threadline/thread"
)

// pages reads the run's log after after a page at a time and checks each
// page against its budget.
func pages(t *testing.T, s *store.Store, r *thread.Run, after int64, budget int) []thread.Record {
	t.Helper()
	var out []thread.Record
	for n := 0; ; n++ {
		page, more, err := s.RunEventsPage(context.Background(), r.ID, after, budget)
		if err != nil {
			t.Fatal(err)
		}
		size := 0
		for i := range page {
			size += thread.RecordSize(&page[i])
		}
		if len(page) > 1 && size > budget {
			t.Fatalf("page after %d: %d records of %d bytes, over the budget of %d", after, len(page), size, budget)
		}
		if more && len(page) == 0 || n > 1000 {
			t.Fatalf("page after %d: more with nothing read (page %d)", after, n)
		}
		out = append(out, page...)
		if !more {
			return out
		}
		after = page[len(page)-1].Seq
	}
}

// TestRunEventsPage: a run's log read page by page, live and compacted,
// from any sequence and with any budget, is RunEventsAfter's answer.
func TestRunEventsPage(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	ctx := context.Background()
	th := newThread(t, s, "alice")
	r, err := startRun(t, s, th, [16]byte{})
	if err != nil {
		t.Fatal(err)
	}
	recs := []thread.Record{{Seq: 1, Kind: thread.KindSnapshot, Status: thread.RunRunning, TreeSeq: 1}}
	var reply string
	for i := 2; i <= 61; i++ {
		tok := fmt.Sprintf(" t%02d", i)
		if i > 40 {
			tok = " x" // a run of one length: compacted as a count
		}
		reply += tok
		recs = append(recs, thread.Record{Seq: int64(i), Kind: thread.KindToken, Text: tok})
	}
	for _, seg := range [][]thread.Record{recs[1:2], recs[2:30], recs[30:]} {
		if err := s.RunEventsAppend(ctx, []thread.Segment{{RunID: r.ID, Records: seg}}); err != nil {
			t.Fatal(err)
		}
	}
	check := func(what string, want []thread.Record) {
		t.Helper()
		for _, after := range []int64{0, 1, 20, 41, 50, int64(len(want)) - 1, int64(len(want))} {
			for _, budget := range []int{1, 500, 2000, 1 << 20} {
				if got := pages(t, s, r, after, budget); fmt.Sprint(got) != fmt.Sprint(want[after:]) {
					t.Fatalf("%s log after %d in pages of %d bytes: got %v, want %v", what, after, budget, got, want[after:])
				}
			}
		}
	}
	check("live", recs)
	all := append(append([]thread.Record{}, recs...),
		thread.Record{Seq: 62, Kind: thread.KindSnapshot, Status: thread.RunSucceeded, TreeSeq: 2})
	asst := checkpoint.Node{ID: r.MessageID, ThreadID: th.ID, ParentID: r.ParentID, Seq: 2, Role: checkpoint.RoleAssistant,
		Content: text(reply), Status: &checkpoint.Status{Type: "complete", Reason: "stop"}, RunID: r.ID, CreatedAt: r.CreatedAt}
	if err := s.RunFinish(ctx, thread.RunFinish{Run: r, Status: thread.RunSucceeded, Assistant: asst, Records: all, Model: "builtin"}); err != nil {
		t.Fatal(err)
	}
	check("compacted", all)
}
