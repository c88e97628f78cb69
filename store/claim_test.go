package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/store"
	"github.com/threadline/threadline/thread"
)

// TestRunClaimFencesOldOwner: a claim of an expired run takes a new epoch;
// from then on the old claim's log appends, lease renewals and end are
// refused as lost and write nothing, while the new claim's succeed. An
// append of several runs with one lost writes none of them and names the
// lost one.
func TestRunClaimFencesOldOwner(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	ctx := context.Background()
	var runs []*thread.Run
	var fins []thread.RunFinish
	for range 2 {
		th := newThread(t, s, "alice")
		in, fin := benchTurn(th, uuid.Nil)
		in.Run.LeaseUntil = time.Now().Add(-time.Second).UTC().Truncate(time.Microsecond)
		if _, err := s.RunCreate(ctx, in, fin.Records[0]); err != nil {
			t.Fatal(err)
		}
		runs, fins = append(runs, &in.Run), append(fins, fin)
	}
	old := *runs[0]
	// Only the first run's lease has lapsed.
	if _, lost, err := s.RunLeaseRenew(ctx, []thread.RunClaim{{RunID: runs[1].ID}}, time.Now().Add(time.Hour)); err != nil || len(lost) != 0 {
		t.Fatalf("renew the second run: lost %v (%v), want none", lost, err)
	}
	now := time.Now().UTC()
	claimed, err := s.RunClaimExpired(ctx, "recoverer", now, now.Add(time.Minute), 16)
	if err != nil || len(claimed) != 1 || claimed[0].ID != old.ID || claimed[0].Claim != old.Claim+1 {
		t.Fatalf("RunClaimExpired: got %v (%v), want run %s with claim %d", claimed, err, old.ID, old.Claim+1)
	}
	var lost *thread.ClaimLostError
	segs := []thread.Segment{{RunID: old.ID, Claim: old.Claim, Records: tokens(2, 1)}, {RunID: runs[1].ID, Records: tokens(2, 1)}}
	if err := s.RunEventsAppend(ctx, segs); !errors.As(err, &lost) || !slices.Equal(lost.Runs, []uuid.UUID{old.ID}) {
		t.Fatalf("append under the old claim: got %v, want the claim on %s lost", err, old.ID)
	}
	for _, r := range runs {
		if recs, err := s.RunEventsAfter(ctx, r.ID, 1); err != nil || len(recs) != 0 {
			t.Fatalf("log of %s after a refused append: got %v (%v), want nothing", r.ID, recs, err)
		}
	}
	_, gone, err := s.RunLeaseRenew(ctx, []thread.RunClaim{{RunID: old.ID, Claim: old.Claim}, {RunID: runs[1].ID}}, time.Now().Add(time.Hour))
	if err != nil || !slices.Equal(gone, []uuid.UUID{old.ID}) {
		t.Fatalf("renew under the old claim: lost %v (%v), want [%s]", gone, err, old.ID)
	}
	fin := fins[0]
	fin.Run = &old
	if err := s.RunFinish(ctx, fin); !errors.As(err, &lost) {
		t.Fatalf("end under the old claim: got %v, want its claim lost", err)
	}
	segs[0].Claim = claimed[0].Claim
	if err := s.RunEventsAppend(ctx, segs); err != nil {
		t.Fatalf("append under the new claim: %v", err)
	}
	fin.Run = claimed[0]
	fin.Records = append(fin.Records[:2:2], thread.Record{Seq: 3, Kind: thread.KindSnapshot, Status: thread.RunInterrupted, TreeSeq: fin.Assistant.Seq})
	fin.Assistant.Content = text(" abcd")
	fin.Status = thread.RunInterrupted
	if err := s.RunFinish(ctx, fin); err != nil {
		t.Fatalf("end under the new claim: %v", err)
	}
	recs, err := s.RunEventsAfter(ctx, old.ID, 0)
	if err != nil || fmt.Sprint(recs) != fmt.Sprint(fin.Records) {
		t.Fatalf("log after the new claim's end: got %v (%v), want %v", recs, err, fin.Records)
	}
}

// TestFenceCountsClaims: the group commit checks a run's claim again only
// when a claim was taken or a running run deleted since its last check,
// and every such event is seen: an old owner's append is refused after a
// claim on its run, after its thread was deleted, and for a run it never
// appended for whose claim was taken before its last append of another.
func TestFenceCountsClaims(t *testing.T) {
	t.Parallel()
	s, pool := setup(t)
	other := store.New(pool) // another process on the same database
	ctx := context.Background()
	start := func(leaseUntil time.Time) *thread.Run {
		th := newThread(t, s, "alice")
		in, fin := benchTurn(th, uuid.Nil)
		in.Run.LeaseUntil = leaseUntil.UTC().Truncate(time.Microsecond)
		if _, err := s.RunCreate(ctx, in, fin.Records[0]); err != nil {
			t.Fatal(err)
		}
		return &in.Run
	}
	live := time.Now().Add(time.Hour)
	seq := int64(2)
	appendFor := func(runs ...*thread.Run) error {
		segs := make([]thread.Segment, len(runs))
		for i, r := range runs {
			segs[i] = thread.Segment{RunID: r.ID, Claim: r.Claim, Records: tokens(seq, 1)}
		}
		seq++
		return s.RunEventsAppend(ctx, segs)
	}
	wantLost := func(what string, err error, r *thread.Run) {
		t.Helper()
		var lost *thread.ClaimLostError
		if !errors.As(err, &lost) || !slices.Equal(lost.Runs, []uuid.UUID{r.ID}) {
			t.Fatalf("%s: got %v, want the claim on %s lost", what, err, r.ID)
		}
	}
	a, b := start(live), start(live)
	if err := appendFor(a, b); err != nil {
		t.Fatalf("first append: %v", err)
	}
	if err := appendFor(a, b); err != nil {
		t.Fatalf("append of checked runs: %v", err)
	}

	// A claim taken over a, by another process.
	if _, err := pool.Exec(ctx, `UPDATE runs SET lease_until = now() - interval '1 second' WHERE id = $1`, a.ID); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	if got, err := other.RunClaimExpired(ctx, "other", now, now.Add(time.Minute), 16); err != nil || len(got) != 1 {
		t.Fatalf("claim a: got %v (%v), want one run", got, err)
	}
	wantLost("append for a after its claim was taken", appendFor(a, b), a)
	if err := appendFor(b); err != nil {
		t.Fatalf("append for b alone: %v", err)
	}

	// b's thread deleted while b runs.
	if err := other.ThreadDelete(ctx, "alice", b.ThreadID); err != nil {
		t.Fatal(err)
	}
	wantLost("append for b after its thread was deleted", appendFor(b), b)

	// c's claim is taken, then d (checked after that) appends: c, never
	// checked here, is checked on its first append all the same.
	c, d := start(time.Now().Add(-time.Second)), start(live)
	now = time.Now().UTC()
	if got, err := other.RunClaimExpired(ctx, "other", now, now.Add(time.Minute), 16); err != nil || len(got) != 1 || got[0].ID != c.ID {
		t.Fatalf("claim c: got %v (%v), want run %s", got, err, c.ID)
	}
	if err := appendFor(d); err != nil {
		t.Fatalf("append for d: %v", err)
	}
	wantLost("first append for c, whose claim was taken before d's", appendFor(c, d), c)
	if err := appendFor(d); err != nil {
		t.Fatalf("append for d after c's refusal: %v", err)
	}
}
