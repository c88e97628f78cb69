package threadtest

// The behaviour every thread.Store keeps, as its doc comments state it:
// one suite run against the fake (contract_test.go) and against Postgres
// (store/contract_test.go), so that the fake the engine is tested on
// cannot drift from the store the service runs on.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/thread"
)

// StoreContract runs the thread.Store behaviour tests against the stores
// setup returns: a new, empty store for each subtest, which the subtests
// use in parallel.
func StoreContract(t *testing.T, setup func(t *testing.T) thread.Store) {
	for _, c := range []struct {
		name string
		test func(t *testing.T, s thread.Store)
	}{
		{"ThreadCreate", contractThreadCreate},
		{"ThreadNotFound", contractThreadNotFound},
		{"ThreadList", contractThreadList},
		{"ThreadUpdate", contractThreadUpdate},
		{"ThreadDelete", contractThreadDelete},
		{"ChildThreads", contractChildThreads},
		{"ThreadSetHead", contractThreadSetHead},
		{"ThreadRead", contractThreadRead},
		{"RunCreate", contractRunCreate},
		{"RunCreateRefusals", contractRunCreateRefusals},
		{"RunCreateAll", contractRunCreateAll},
		{"RunComplete", contractRunComplete},
		{"RunLogPurge", contractRunLogPurge},
		{"RunLookups", contractRunLookups},
		{"RunEvents", contractRunEvents},
		{"RunEventsPage", contractRunEventsPage},
		{"ClaimLost", contractClaimLost},
		{"RunFinish", contractRunFinish},
		{"RunFinishAll", contractRunFinishAll},
		{"RunLeaseRenew", contractRunLeaseRenew},
		{"RunRequestCancel", contractRunRequestCancel},
		{"RunClaimExpired", contractRunClaimExpired},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.test(t, setup(t))
		})
	}
}

// wantCode fails t unless err is an *errcode.Error with code want.
func wantCode(t *testing.T, what string, err error, want errcode.Code) *errcode.Error {
	t.Helper()
	var e *errcode.Error
	if !errors.As(err, &e) || e.Code != want {
		t.Fatalf("%s: got %v, want %s", what, err, want)
	}
	return e
}

// wantLost fails t unless err is a *thread.ClaimLostError naming runs.
func wantLost(t *testing.T, what string, err error, runs ...uuid.UUID) {
	t.Helper()
	var e *thread.ClaimLostError
	if !errors.As(err, &e) || !sameIDs(e.Runs, runs) {
		t.Fatalf("%s: got %v, want a claim lost on %v", what, err, runs)
	}
}

// sameIDs reports whether a and b hold the same ids, in any order.
func sameIDs(a, b []uuid.UUID) bool {
	cmp := func(x, y uuid.UUID) int { return slices.Compare(x[:], y[:]) }
	a, b = slices.Clone(a), slices.Clone(b)
	slices.SortFunc(a, cmp)
	slices.SortFunc(b, cmp)
	return slices.Equal(a, b)
}

func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

func newThread(t *testing.T, s thread.Store, caller string, at time.Time) *thread.Thread {
	t.Helper()
	th, created, err := s.ThreadCreate(context.Background(), &thread.Thread{ID: uuid.New(), Caller: caller, CreatedAt: at, UpdatedAt: at})
	if err != nil || !created {
		t.Fatalf("ThreadCreate: created %v, err %v", created, err)
	}
	return th
}

func text(s string) []checkpoint.Part { return []checkpoint.Part{{Type: "text", Text: s}} }

// turn is a run's start appending a user message under parent at the end
// of th (as th says it ends), leased until lease, and its first record.
func turn(th *thread.Thread, parent uuid.UUID, lease time.Time) (thread.RunCreate, thread.Record) {
	at := now()
	user := &checkpoint.Node{ID: uuid.New(), ThreadID: th.ID, ParentID: parent, Role: checkpoint.RoleUser, Content: text("hi"),
		Seq: th.LastSeq + 1, CreatedAt: at}
	r := thread.Run{ID: uuid.New(), ThreadID: th.ID, Status: thread.RunRunning, UserMessageID: user.ID, ParentID: user.ID,
		MessageID: uuid.New(), Model: "builtin", Owner: "test", LeaseUntil: lease, TreeSeq: user.Seq, CreatedAt: at}
	user.RunID = r.ID
	return thread.RunCreate{Caller: th.Caller, Thread: th.ID, User: user, Run: r},
		thread.Record{Seq: 1, Kind: thread.KindSnapshot, Status: thread.RunRunning, TreeSeq: r.TreeSeq}
}

// start starts a run on th (leased for a minute) and moves th to its new end.
func start(t *testing.T, s thread.Store, th *thread.Thread, parent uuid.UUID) *thread.Run {
	t.Helper()
	return startLeased(t, s, th, parent, now().Add(time.Minute))
}

func startLeased(t *testing.T, s thread.Store, th *thread.Thread, parent uuid.UUID, lease time.Time) *thread.Run {
	t.Helper()
	in, first := turn(th, parent, lease)
	r, err := s.RunCreate(context.Background(), in, first)
	if err != nil {
		t.Fatalf("RunCreate: %v", err)
	}
	th.LastSeq = r.TreeSeq
	return r
}

// ending is r's end as succeeded with reply text, its log the first
// record, a token per word of reply and the end snapshot.
func ending(r *thread.Run, reply ...string) thread.RunFinish {
	recs := []thread.Record{{Seq: 1, Kind: thread.KindSnapshot, Status: thread.RunRunning, TreeSeq: r.TreeSeq}}
	all := ""
	for _, w := range reply {
		recs = append(recs, thread.Record{Seq: int64(len(recs) + 1), Kind: thread.KindToken, Text: w})
		all += w
	}
	recs = append(recs, thread.Record{Seq: int64(len(recs) + 1), Kind: thread.KindSnapshot, Status: thread.RunSucceeded, TreeSeq: r.TreeSeq + 1})
	asst := checkpoint.Node{ID: r.MessageID, ThreadID: r.ThreadID, ParentID: r.ParentID, Seq: r.TreeSeq + 1, Role: checkpoint.RoleAssistant,
		Content: text(all), Status: &checkpoint.Status{Type: "complete", Reason: "stop"}, RunID: r.ID, CreatedAt: r.CreatedAt}
	return thread.RunFinish{Run: r, Status: thread.RunSucceeded, Assistant: asst, Records: recs, Model: "builtin"}
}

// finish ends r as ending says and moves th to its new end.
func finish(t *testing.T, s thread.Store, th *thread.Thread, r *thread.Run, reply ...string) thread.RunFinish {
	t.Helper()
	fin := ending(r, reply...)
	if err := s.RunFinish(context.Background(), fin); err != nil {
		t.Fatalf("RunFinish: %v", err)
	}
	th.LastSeq = fin.Assistant.Seq
	return fin
}

func tokens(from int64, words ...string) []thread.Record {
	out := make([]thread.Record, len(words))
	for i, w := range words {
		out[i] = thread.Record{Seq: from + int64(i), Kind: thread.KindToken, Text: w}
	}
	return out
}

func checkLog(t *testing.T, s thread.Store, runID uuid.UUID, after int64, want []thread.Record) {
	t.Helper()
	got, err := s.RunEventsAfter(context.Background(), runID, after)
	if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("RunEventsAfter(%d): got %v (%v), want %v", after, got, err, want)
	}
}

func contractThreadCreate(t *testing.T, s thread.Store) {
	ctx := context.Background()
	at := now()
	title := "plans"
	in := &thread.Thread{ID: uuid.New(), Caller: "alice", Title: &title, CreatedAt: at, UpdatedAt: at}
	got, created, err := s.ThreadCreate(ctx, in)
	if err != nil || !created || got.ID != in.ID || got.Caller != "alice" || got.Title == nil || *got.Title != title || !got.CreatedAt.Equal(at) {
		t.Fatalf("new ThreadCreate: got %+v, %v, %v; want the thread, created", got, created, err)
	}
	again := &thread.Thread{ID: in.ID, Caller: "alice", CreatedAt: at.Add(time.Hour), UpdatedAt: at.Add(time.Hour)}
	got, created, err = s.ThreadCreate(ctx, again)
	if err != nil || created || got.Title == nil || *got.Title != title || !got.CreatedAt.Equal(at) {
		t.Fatalf("ThreadCreate of the same id, same caller: got %+v, %v, %v; want the existing thread, not created", got, created, err)
	}
	_, created, err = s.ThreadCreate(ctx, &thread.Thread{ID: in.ID, Caller: "mallory", CreatedAt: at, UpdatedAt: at})
	wantCode(t, "ThreadCreate of the same id, another caller", err, errcode.Conflict)
	if created {
		t.Fatal("ThreadCreate of another caller's id: created")
	}
	if owner, err := s.ThreadOwner(ctx, in.ID); err != nil || owner != "alice" {
		t.Fatalf("ThreadOwner: got %q, %v; want alice", owner, err)
	}
	_, err = s.ThreadOwner(ctx, uuid.New())
	wantCode(t, "ThreadOwner of an unknown id", err, errcode.NotFound)
}

func contractThreadNotFound(t *testing.T, s thread.Store) {
	ctx := context.Background()
	th := newThread(t, s, "alice", now())
	mine := newThread(t, s, "", now())
	for _, c := range []struct {
		name   string
		caller string
		id     uuid.UUID
	}{
		{"another caller", "mallory", th.ID},
		{"the empty caller", "", th.ID},
		{"a named caller on the empty caller's thread", "alice", mine.ID},
		{"unknown id", "alice", uuid.New()},
	} {
		_, err := s.ThreadGet(ctx, c.caller, c.id)
		wantCode(t, "ThreadGet, "+c.name, err, errcode.NotFound)
		_, _, _, err = s.ThreadRead(ctx, c.caller, c.id, 0)
		wantCode(t, "ThreadRead, "+c.name, err, errcode.NotFound)
		_, err = s.ThreadUpdate(ctx, c.caller, c.id, thread.ThreadUpdate{Metadata: []byte(`{"a":1}`)})
		wantCode(t, "ThreadUpdate, "+c.name, err, errcode.NotFound)
		wantCode(t, "ThreadSetHead, "+c.name, s.ThreadSetHead(ctx, c.caller, c.id, uuid.New()), errcode.NotFound)
		wantCode(t, "ThreadDelete, "+c.name, s.ThreadDelete(ctx, c.caller, c.id), errcode.NotFound)
	}
	if got, err := s.ThreadGet(ctx, "", mine.ID); err != nil || got.ID != mine.ID {
		t.Fatalf("ThreadGet by the empty caller of its thread: got %+v, %v", got, err)
	}
	if got, err := s.ThreadGet(ctx, "alice", th.ID); err != nil || got.ID != th.ID {
		t.Fatalf("ThreadGet after refused writes: got %+v, %v; want the thread", got, err)
	}
}

// contractThreadList: most recently updated first, ties by id, paged by
// the last thread's cursor with nothing skipped or repeated; only the
// caller's.
func contractThreadList(t *testing.T, s thread.Store) {
	ctx := context.Background()
	base := now().Add(-time.Hour)
	var want []uuid.UUID
	for i := range 4 {
		at := base.Add(time.Duration(i) * time.Second)
		if i == 3 {
			at = base.Add(2 * time.Second) // a tie with the third
		}
		want = append(want, newThread(t, s, "alice", at).ID)
		newThread(t, s, "bob", at)
	}
	want = append(want, newThread(t, s, "alice", base.Add(10*time.Second)).ID)
	// Newest first; the tied pair by id, highest first.
	tied := []uuid.UUID{want[2], want[3]}
	slices.SortFunc(tied, func(a, b uuid.UUID) int { return slices.Compare(b[:], a[:]) })
	want = []uuid.UUID{want[4], tied[0], tied[1], want[1], want[0]}

	all, err := s.ThreadList(ctx, "alice", 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(all); !slices.Equal(got, want) {
		t.Fatalf("ThreadList: got %v, want %v", got, want)
	}
	var got []uuid.UUID
	var after *thread.ThreadCursor
	for range len(want) {
		page, err := s.ThreadList(ctx, "alice", 2, after)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		if len(page) > 2 {
			t.Fatalf("ThreadList limit 2: got %d threads", len(page))
		}
		got = append(got, ids(page)...)
		last := page[len(page)-1]
		after = &thread.ThreadCursor{UpdatedAt: last.UpdatedAt, ID: last.ID}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("ThreadList by pages of 2: got %v, want %v", got, want)
	}
	if page, err := s.ThreadList(ctx, "carol", 10, nil); err != nil || len(page) != 0 {
		t.Fatalf("ThreadList of a caller with none: got %d (%v), want none", len(page), err)
	}
}

func ids(ts []*thread.Thread) []uuid.UUID {
	out := make([]uuid.UUID, len(ts))
	for i, t := range ts {
		out[i] = t.ID
	}
	return out
}

func contractThreadUpdate(t *testing.T, s thread.Store) {
	ctx := context.Background()
	th := newThread(t, s, "alice", now().Add(-time.Hour))
	newer := newThread(t, s, "alice", now().Add(-time.Minute))
	if list, err := s.ThreadList(ctx, "alice", 1, nil); err != nil || len(list) != 1 || list[0].ID != newer.ID {
		t.Fatalf("ThreadList before ThreadUpdate: got %v, %v; want the newer thread first", list, err)
	}
	title := "renamed"
	got, err := s.ThreadUpdate(ctx, "alice", th.ID, thread.ThreadUpdate{Title: &title})
	if err != nil || got.Title == nil || *got.Title != title {
		t.Fatalf("ThreadUpdate title: got %+v, %v", got, err)
	}
	if got.UpdatedAt.Before(th.UpdatedAt) {
		t.Fatalf("ThreadUpdate: updated_at went back from %v to %v", th.UpdatedAt, got.UpdatedAt)
	}
	got, err = s.ThreadUpdate(ctx, "alice", th.ID, thread.ThreadUpdate{Metadata: []byte(`{"k":"v"}`)})
	if err != nil || got.Title == nil || *got.Title != title || string(got.Metadata) != `{"k": "v"}` && string(got.Metadata) != `{"k":"v"}` {
		t.Fatalf("ThreadUpdate metadata: got %+v (metadata %s), %v; want the title kept and the metadata set", got, got.Metadata, err)
	}
	// An update is an update: the thread comes first in the list.
	if list, err := s.ThreadList(ctx, "alice", 1, nil); err != nil || len(list) != 1 || list[0].ID != th.ID {
		t.Fatalf("ThreadList after ThreadUpdate: got %v, %v; want the updated thread first", list, err)
	}
	read, err := s.ThreadGet(ctx, "alice", th.ID)
	if err != nil || read.Title == nil || *read.Title != title || len(read.Metadata) == 0 {
		t.Fatalf("ThreadGet after ThreadUpdate: got %+v, %v", read, err)
	}
}

func contractThreadDelete(t *testing.T, s thread.Store) {
	ctx := context.Background()
	th := newThread(t, s, "alice", now())
	done := start(t, s, th, uuid.Nil)
	finish(t, s, th, done, "ok")
	running := start(t, s, th, done.MessageID)
	other := newThread(t, s, "alice", now())
	kept := start(t, s, other, uuid.Nil)

	if err := s.ThreadDelete(ctx, "alice", th.ID); err != nil {
		t.Fatalf("ThreadDelete: %v", err)
	}
	_, err := s.ThreadGet(ctx, "alice", th.ID)
	wantCode(t, "ThreadGet after ThreadDelete", err, errcode.NotFound)
	wantCode(t, "ThreadDelete again", s.ThreadDelete(ctx, "alice", th.ID), errcode.NotFound)
	for _, r := range []*thread.Run{done, running} {
		_, err := s.RunGet(ctx, th.ID, r.ID)
		wantCode(t, "RunGet of a deleted thread's run", err, errcode.NotFound)
		checkLog(t, s, r.ID, 0, nil)
	}
	_, err = s.RunActive(ctx, th.ID)
	wantCode(t, "RunActive of a deleted thread", err, errcode.NotFound)
	wantLost(t, "RunFinish of a deleted thread's run", s.RunFinish(ctx, ending(running, "late")), running.ID)
	err = s.RunEventsAppend(ctx, []thread.Segment{{RunID: running.ID, Records: tokens(2, "late")}})
	wantLost(t, "RunEventsAppend to a deleted thread's run", err, running.ID)
	if _, lost, err := s.RunLeaseRenew(ctx, []thread.RunClaim{{RunID: running.ID}}, now().Add(time.Hour)); err != nil || !sameIDs(lost, []uuid.UUID{running.ID}) {
		t.Fatalf("RunLeaseRenew of a deleted thread's run: lost %v, %v; want it lost", lost, err)
	}
	if r, err := s.RunGet(ctx, other.ID, kept.ID); err != nil || r.Status != thread.RunRunning {
		t.Fatalf("another thread's run after ThreadDelete: got %+v, %v; want it running", r, err)
	}
}

// contractChildThreads: a sub-agent's thread, created alone or by its
// first run, reads back with its parent and depth; the list leaves it
// out; deleting the parent deletes it and its own children.
func contractChildThreads(t *testing.T, s thread.Store) {
	ctx := context.Background()
	parent := newThread(t, s, "alice", now())
	link := &thread.ThreadParent{ThreadID: parent.ID, RunID: uuid.New(), MessageID: uuid.New(), ToolCallID: "call_1"}
	child := &thread.Thread{ID: uuid.New(), Caller: "alice", CreatedAt: now(), UpdatedAt: now(), Parent: link, Depth: 1}
	orphan := &thread.Thread{ID: uuid.New(), Caller: "alice", CreatedAt: now(), UpdatedAt: now(), Depth: 1,
		Parent: &thread.ThreadParent{ThreadID: uuid.New(), RunID: uuid.New(), MessageID: uuid.New(), ToolCallID: "x"}}
	_, _, err := s.ThreadCreate(ctx, orphan)
	wantCode(t, "ThreadCreate of a child whose parent does not exist", err, errcode.NotFound)
	in, first := turn(orphan, uuid.Nil, now().Add(time.Hour))
	in.Create = orphan
	_, err = s.RunCreate(ctx, in, first)
	wantCode(t, "RunCreate creating a child whose parent does not exist", err, errcode.NotFound)
	if _, created, err := s.ThreadCreate(ctx, child); err != nil || !created {
		t.Fatalf("ThreadCreate of a child: %v (created %v)", err, created)
	}
	grand := &thread.Thread{ID: uuid.New(), Caller: "alice", CreatedAt: now(), UpdatedAt: now(), Depth: 2,
		Parent: &thread.ThreadParent{ThreadID: child.ID, RunID: uuid.New(), MessageID: uuid.New(), ToolCallID: "call_2"}}
	in, first = turn(grand, uuid.Nil, now().Add(time.Hour))
	in.Create = grand
	if _, err := s.RunCreate(ctx, in, first); err != nil {
		t.Fatalf("RunCreate creating a grandchild: %v", err)
	}
	for _, want := range []*thread.Thread{child, grand} {
		got, err := s.ThreadGet(ctx, "alice", want.ID)
		if err != nil || got.Parent == nil || *got.Parent != *want.Parent || got.Depth != want.Depth {
			t.Fatalf("ThreadGet of a child: got %+v (%v), want parent %+v depth %d", got, err, want.Parent, want.Depth)
		}
	}
	if got, err := s.ThreadGet(ctx, "alice", parent.ID); err != nil || got.Parent != nil || got.Depth != 0 {
		t.Fatalf("ThreadGet of the parent: got %+v (%v), want no parent", got, err)
	}
	list, err := s.ThreadList(ctx, "alice", 10, nil)
	if err != nil || len(list) != 1 || list[0].ID != parent.ID {
		t.Fatalf("ThreadList: got %v (%v), want the parent alone", ids(list), err)
	}
	if err := s.ThreadDelete(ctx, "alice", parent.ID); err != nil {
		t.Fatal(err)
	}
	for _, id := range []uuid.UUID{child.ID, grand.ID} {
		_, err := s.ThreadGet(ctx, "alice", id)
		wantCode(t, "ThreadGet of a deleted parent's child", err, errcode.NotFound)
	}
}

// contractThreadSetHead: the head is the client's view state, stored as
// given (no message check).
func contractThreadSetHead(t *testing.T, s thread.Store) {
	ctx := context.Background()
	th := newThread(t, s, "alice", now())
	r := start(t, s, th, uuid.Nil)
	finish(t, s, th, r, "ok")
	for _, head := range []uuid.UUID{r.UserMessageID, uuid.New(), uuid.Nil} {
		if err := s.ThreadSetHead(ctx, "alice", th.ID, head); err != nil {
			t.Fatalf("ThreadSetHead %s: %v", head, err)
		}
		if got, err := s.ThreadGet(ctx, "alice", th.ID); err != nil || got.HeadID != head {
			t.Fatalf("ThreadGet after ThreadSetHead %s: got %+v, %v", head, got, err)
		}
	}
}

func contractThreadRead(t *testing.T, s thread.Store) {
	ctx := context.Background()
	th := newThread(t, s, "alice", now())
	got, nodes, active, err := s.ThreadRead(ctx, "alice", th.ID, 0)
	if err != nil || got.ID != th.ID || len(nodes) != 0 || active != nil {
		t.Fatalf("ThreadRead of a new thread: got %+v, %d nodes, run %v, %v", got, len(nodes), active, err)
	}
	r := start(t, s, th, uuid.Nil)
	got, nodes, active, err = s.ThreadRead(ctx, "alice", th.ID, 0)
	if err != nil || got.LastSeq != 1 || len(nodes) != 1 || nodes[0].ID != r.UserMessageID || active == nil || active.ID != r.ID {
		t.Fatalf("ThreadRead during a run: got %+v, %d nodes, run %v, %v; want the user message and the run", got, len(nodes), active, err)
	}
	finish(t, s, th, r, "ok")
	_, nodes, active, err = s.ThreadRead(ctx, "alice", th.ID, 1)
	if err != nil || len(nodes) != 1 || nodes[0].ID != r.MessageID || nodes[0].Seq != 2 || active != nil {
		t.Fatalf("ThreadRead after 1, run ended: got %d nodes, run %v, %v; want the reply alone, no run", len(nodes), active, err)
	}
	all, err := s.CheckpointsAfter(ctx, th.ID, 0)
	if err != nil || len(all) != 2 || all[0].Seq != 1 || all[1].Seq != 2 {
		t.Fatalf("CheckpointsAfter 0: got %v, %v; want seq 1 and 2", all, err)
	}
}

func contractRunCreate(t *testing.T, s thread.Store) {
	ctx := context.Background()
	th := newThread(t, s, "alice", now())
	in, first := turn(th, uuid.Nil, now().Add(time.Minute))
	r, err := s.RunCreate(ctx, in, first)
	if err != nil || r.ID != in.Run.ID || r.Status != thread.RunRunning || r.Claim != 0 || r.LastSequence != 1 {
		t.Fatalf("RunCreate: got %+v, %v; want the run running, claim 0, sequence 1", r, err)
	}
	got, err := s.ThreadGet(ctx, "alice", th.ID)
	if err != nil || got.LastSeq != r.TreeSeq || got.HeadID != r.MessageID {
		t.Fatalf("thread after RunCreate: got %+v, %v; want last_seq %d, head at the reply", got, err, r.TreeSeq)
	}
	checkLog(t, s, r.ID, 0, []thread.Record{first})

	// A run that creates its thread.
	at := now()
	nt := &thread.Thread{ID: uuid.New(), Caller: "alice", CreatedAt: at, UpdatedAt: at}
	in, first = turn(nt, uuid.Nil, at.Add(time.Minute))
	in.Create = nt
	if _, err := s.RunCreate(ctx, in, first); err != nil {
		t.Fatalf("RunCreate creating its thread: %v", err)
	}
	if got, err := s.ThreadGet(ctx, "alice", nt.ID); err != nil || got.LastSeq != 1 {
		t.Fatalf("thread a run created: got %+v, %v", got, err)
	}
	// Create leaves another caller's thread as it is: not_found.
	taken := &thread.Thread{ID: nt.ID, Caller: "mallory", CreatedAt: at, UpdatedAt: at}
	in, first = turn(taken, uuid.Nil, at.Add(time.Minute))
	in.Create = taken
	_, err = s.RunCreate(ctx, in, first)
	wantCode(t, "RunCreate creating another caller's thread", err, errcode.NotFound)
}

// contractRunCreateAll: starts as RunCreate, all or nothing.
func contractRunCreateAll(t *testing.T, s thread.Store) {
	ctx := context.Background()
	busy := newThread(t, s, "alice", now())
	r := start(t, s, busy, uuid.Nil)
	a, b := newThread(t, s, "alice", now()), newThread(t, s, "alice", now())
	inA, firstA := turn(a, uuid.Nil, now().Add(time.Minute))
	inBusy, firstBusy := turn(busy, r.UserMessageID, now().Add(time.Minute))
	err := s.RunCreateAll(ctx, []thread.RunCreate{inA, inBusy}, []thread.Record{firstA, firstBusy})
	if e := wantCode(t, "RunCreateAll with a busy thread", err, errcode.RunInProgress); e.RunID != r.ID && e.RunID != uuid.Nil {
		t.Fatalf("run_in_progress names run %s, want %s", e.RunID, r.ID)
	}
	if got, err := s.ThreadGet(ctx, "alice", a.ID); err != nil || got.LastSeq != 0 {
		t.Fatalf("thread after a refused RunCreateAll: got %+v, %v; want nothing written", got, err)
	}
	_, err = s.RunActive(ctx, a.ID)
	wantCode(t, "RunActive after a refused RunCreateAll", err, errcode.NotFound)

	// Two starts on one thread: the second finds the first running.
	inA2, firstA2 := turn(a, uuid.Nil, now().Add(time.Minute))
	err = s.RunCreateAll(ctx, []thread.RunCreate{inA, inA2}, []thread.Record{firstA, firstA2})
	if e := wantCode(t, "RunCreateAll with two starts on one thread", err, errcode.RunInProgress); e.RunID != inA.Run.ID {
		t.Fatalf("run_in_progress names run %s, want the first start's %s", e.RunID, inA.Run.ID)
	}
	if got, err := s.ThreadGet(ctx, "alice", a.ID); err != nil || got.LastSeq != 0 {
		t.Fatalf("thread after a refused RunCreateAll: got %+v, %v; want nothing written", got, err)
	}

	inB, firstB := turn(b, uuid.Nil, now().Add(time.Minute))
	if err := s.RunCreateAll(ctx, []thread.RunCreate{inA, inB}, []thread.Record{firstA, firstB}); err != nil {
		t.Fatalf("RunCreateAll: %v", err)
	}
	for _, in := range []thread.RunCreate{inA, inB} {
		got, err := s.RunActive(ctx, in.Thread)
		if err != nil || got.ID != in.Run.ID {
			t.Fatalf("RunActive after RunCreateAll: got %+v, %v; want run %s", got, err, in.Run.ID)
		}
		if th, err := s.ThreadGet(ctx, "alice", in.Thread); err != nil || th.LastSeq != 1 || th.HeadID != in.Run.MessageID {
			t.Fatalf("thread after RunCreateAll: got %+v, %v", th, err)
		}
	}
}

// contractRunLogPurge: purging changes no log a reader sees, of a running
// or an ended run, and with no run running leaves nothing to free later.
func contractRunLogPurge(t *testing.T, s thread.Store) {
	ctx := context.Background()
	th := newThread(t, s, "alice", now())
	ended := start(t, s, th, uuid.Nil)
	if err := s.RunEventsAppend(ctx, []thread.Segment{{RunID: ended.ID, Records: tokens(2, "a", "b")}}); err != nil {
		t.Fatal(err)
	}
	fin := finish(t, s, th, ended, "a", "b")
	running := start(t, s, newThread(t, s, "alice", now()), uuid.Nil)
	if err := s.RunEventsAppend(ctx, []thread.Segment{{RunID: running.ID, Records: tokens(2, "x", "y")}}); err != nil {
		t.Fatal(err)
	}
	live := append([]thread.Record{{Seq: 1, Kind: thread.KindSnapshot, Status: thread.RunRunning, TreeSeq: 1}}, tokens(2, "x", "y")...)
	// While a run runs, what it needs stays (more may say so).
	for range 3 {
		if _, err := s.RunLogPurge(ctx); err != nil {
			t.Fatalf("RunLogPurge: %v", err)
		}
	}
	checkLog(t, s, ended.ID, 0, fin.Records)
	checkLog(t, s, running.ID, 0, live)
	if err := s.RunEventsAppend(ctx, []thread.Segment{{RunID: running.ID, Records: tokens(4, "z")}}); err != nil {
		t.Fatalf("RunEventsAppend after RunLogPurge: %v", err)
	}
	checkLog(t, s, running.ID, 3, tokens(4, "z"))
	// Once no run runs, one purge frees everything.
	th2 := &thread.Thread{ID: running.ThreadID, LastSeq: 1}
	fin2 := finish(t, s, th2, running, "x", "y", "z")
	if more, err := s.RunLogPurge(ctx); err != nil || more {
		t.Fatalf("RunLogPurge with no run running: more %v, %v; want nothing left", more, err)
	}
	checkLog(t, s, ended.ID, 0, fin.Records)
	checkLog(t, s, running.ID, 0, fin2.Records)
}

func contractRunCreateRefusals(t *testing.T, s thread.Store) {
	ctx := context.Background()
	th := newThread(t, s, "alice", now())
	stale := *th
	r := start(t, s, th, uuid.Nil)

	in, first := turn(th, r.UserMessageID, now().Add(time.Minute))
	_, err := s.RunCreate(ctx, in, first)
	e := wantCode(t, "RunCreate during a run", err, errcode.RunInProgress)
	if e.RunID != r.ID {
		t.Fatalf("run_in_progress names run %s, want %s", e.RunID, r.ID)
	}
	finish(t, s, th, r, "ok")

	foreign := *th
	foreign.Caller = "mallory"
	in, first = turn(&foreign, r.MessageID, now().Add(time.Minute))
	_, err = s.RunCreate(ctx, in, first)
	wantCode(t, "RunCreate on another caller's thread", err, errcode.NotFound)
	unknown := *th
	unknown.ID = uuid.New()
	in, first = turn(&unknown, uuid.Nil, now().Add(time.Minute))
	_, err = s.RunCreate(ctx, in, first)
	wantCode(t, "RunCreate on an unknown thread", err, errcode.NotFound)

	in, first = turn(th, r.MessageID, now().Add(time.Minute))
	in.User.ID, in.Run.UserMessageID, in.Run.ParentID = r.UserMessageID, r.UserMessageID, r.UserMessageID
	_, err = s.RunCreate(ctx, in, first)
	wantCode(t, "RunCreate reusing a user message id", err, errcode.Conflict)

	in, first = turn(th, uuid.New(), now().Add(time.Minute))
	_, err = s.RunCreate(ctx, in, first)
	wantCode(t, "RunCreate under a parent outside the thread", err, errcode.InvalidFork)

	in, first = turn(&stale, uuid.Nil, now().Add(time.Minute))
	_, err = s.RunCreate(ctx, in, first)
	wantCode(t, "RunCreate on a thread that grew past its TreeSeq", err, errcode.Conflict)

	// Nothing of the refused starts was written.
	if got, err := s.ThreadGet(ctx, "alice", th.ID); err != nil || got.LastSeq != 2 || got.HeadID != r.MessageID {
		t.Fatalf("thread after refused starts: got %+v, %v; want it as the finished run left it", got, err)
	}
	if nodes, err := s.CheckpointsAfter(ctx, th.ID, 0); err != nil || len(nodes) != 2 {
		t.Fatalf("checkpoints after refused starts: got %d, %v; want 2", len(nodes), err)
	}
	if _, err := s.RunActive(ctx, th.ID); errcode.Of(err) != errcode.NotFound {
		t.Fatalf("RunActive after refused starts: got %v, want not_found", err)
	}
}

func contractRunComplete(t *testing.T, s thread.Store) {
	ctx := context.Background()
	th := newThread(t, s, "alice", now())
	in, _ := turn(th, uuid.Nil, now().Add(time.Minute))
	fin := ending(&in.Run, "a", "b")
	fin.Title = "hello"
	if err := s.RunComplete(ctx, in, fin); err != nil {
		t.Fatalf("RunComplete: %v", err)
	}
	r, err := s.RunGet(ctx, th.ID, in.Run.ID)
	if err != nil || r.Status != thread.RunSucceeded || r.FinishedAt == nil || r.LastSequence != int64(len(fin.Records)) || r.Owner != "" {
		t.Fatalf("RunGet after RunComplete: got %+v, %v; want succeeded, ended, sequence %d, no owner", r, err, len(fin.Records))
	}
	got, err := s.ThreadGet(ctx, "alice", th.ID)
	if err != nil || got.LastSeq != 2 || got.HeadID != in.Run.MessageID || got.Title == nil || *got.Title != "hello" {
		t.Fatalf("thread after RunComplete: got %+v, %v; want last_seq 2, head at the reply, title hello", got, err)
	}
	checkLog(t, s, in.Run.ID, 0, fin.Records)
	if _, err := s.RunActive(ctx, th.ID); errcode.Of(err) != errcode.NotFound {
		t.Fatalf("RunActive after RunComplete: got %v, want not_found", err)
	}
	th.LastSeq = 2

	// Errors as RunCreate.
	running := start(t, s, th, in.Run.MessageID)
	in, _ = turn(th, running.UserMessageID, now().Add(time.Minute))
	err = s.RunComplete(ctx, in, ending(&in.Run, "x"))
	if e := wantCode(t, "RunComplete during a run", err, errcode.RunInProgress); e.RunID != running.ID {
		t.Fatalf("run_in_progress names run %s, want %s", e.RunID, running.ID)
	}
	finish(t, s, th, running, "ok")
	in, _ = turn(th, uuid.New(), now().Add(time.Minute))
	wantCode(t, "RunComplete under a parent outside the thread", s.RunComplete(ctx, in, ending(&in.Run, "x")), errcode.InvalidFork)
	in, _ = turn(th, running.MessageID, now().Add(time.Minute))
	in.Run.TreeSeq--
	in.User.Seq--
	wantCode(t, "RunComplete on a thread that grew", s.RunComplete(ctx, in, ending(&in.Run, "x")), errcode.Conflict)
}

func contractRunLookups(t *testing.T, s thread.Store) {
	ctx := context.Background()
	th := newThread(t, s, "alice", now())
	r := start(t, s, th, uuid.Nil)
	for name, get := range map[string]func() (*thread.Run, error){
		"RunGet":           func() (*thread.Run, error) { return s.RunGet(ctx, th.ID, r.ID) },
		"RunActive":        func() (*thread.Run, error) { return s.RunActive(ctx, th.ID) },
		"RunByUserMessage": func() (*thread.Run, error) { return s.RunByUserMessage(ctx, th.ID, r.UserMessageID) },
	} {
		got, err := get()
		if err != nil || got.ID != r.ID || got.Status != thread.RunRunning || got.MessageID != r.MessageID || got.TreeSeq != r.TreeSeq {
			t.Fatalf("%s: got %+v, %v; want run %s running", name, got, err, r.ID)
		}
	}
	other := newThread(t, s, "alice", now())
	_, err := s.RunGet(ctx, other.ID, r.ID)
	wantCode(t, "RunGet under another thread", err, errcode.NotFound)
	_, err = s.RunGet(ctx, th.ID, uuid.New())
	wantCode(t, "RunGet of an unknown run", err, errcode.NotFound)
	_, err = s.RunByUserMessage(ctx, th.ID, uuid.New())
	wantCode(t, "RunByUserMessage of an unknown message", err, errcode.NotFound)
	_, err = s.RunActive(ctx, other.ID)
	wantCode(t, "RunActive of an idle thread", err, errcode.NotFound)

	finish(t, s, th, r, "o", "k")
	got, err := s.RunGet(ctx, th.ID, r.ID)
	if err != nil || got.Status != thread.RunSucceeded || got.LastSequence != 4 || got.FinishedAt == nil {
		t.Fatalf("RunGet of an ended run: got %+v, %v; want succeeded, sequence 4 exact", got, err)
	}
	if got, err := s.RunByUserMessage(ctx, th.ID, r.UserMessageID); err != nil || got.ID != r.ID {
		t.Fatalf("RunByUserMessage of an ended run: got %+v, %v", got, err)
	}
	_, err = s.RunActive(ctx, th.ID)
	wantCode(t, "RunActive after the run ended", err, errcode.NotFound)
}

func contractRunEvents(t *testing.T, s thread.Store) {
	ctx := context.Background()
	th := newThread(t, s, "alice", now())
	r := start(t, s, th, uuid.Nil)
	th2 := newThread(t, s, "alice", now())
	r2 := start(t, s, th2, uuid.Nil)
	first := thread.Record{Seq: 1, Kind: thread.KindSnapshot, Status: thread.RunRunning, TreeSeq: 1}
	want := append([]thread.Record{first}, tokens(2, "a", "b", "c")...)
	if err := s.RunEventsAppend(ctx, []thread.Segment{{RunID: r.ID, Records: want[1:3]}, {RunID: r2.ID, Records: tokens(2, "x")}}); err != nil {
		t.Fatalf("RunEventsAppend of two runs: %v", err)
	}
	if err := s.RunEventsAppend(ctx, []thread.Segment{{RunID: r.ID, Records: want[3:]}}); err != nil {
		t.Fatalf("RunEventsAppend: %v", err)
	}
	for after := range int64(len(want) + 1) {
		checkLog(t, s, r.ID, after, want[after:])
	}
	checkLog(t, s, r2.ID, 0, append([]thread.Record{first}, tokens(2, "x")...))
	checkLog(t, s, uuid.New(), 0, nil)

	// The end replaces the log with the run's whole log.
	fin := finish(t, s, th, r, "a", "b", "c")
	for after := range int64(len(fin.Records) + 1) {
		checkLog(t, s, r.ID, after, fin.Records[after:])
	}
}

// contractRunEventsPage: pages cut by RecordSize, at least one record, in
// order, with more set while records follow; running and ended runs alike.
func contractRunEventsPage(t *testing.T, s thread.Store) {
	ctx := context.Background()
	th := newThread(t, s, "alice", now())
	r := start(t, s, th, uuid.Nil)
	words := []string{"alpha", "beta", "gamma", "delta", "epsilon"}
	if err := s.RunEventsAppend(ctx, []thread.Segment{{RunID: r.ID, Records: tokens(2, words...)}}); err != nil {
		t.Fatal(err)
	}
	check := func(when string, want []thread.Record) {
		t.Helper()
		for _, maxBytes := range []int{1, thread.RecordSize(&want[0]) + thread.RecordSize(&want[1]), 1 << 20} {
			var got []thread.Record
			after := int64(0)
			for range len(want) + 1 {
				page, more, err := s.RunEventsPage(ctx, r.ID, after, maxBytes)
				if err != nil {
					t.Fatalf("%s: RunEventsPage(%d, %d): %v", when, after, maxBytes, err)
				}
				if len(page) == 0 && more {
					t.Fatalf("%s: RunEventsPage(%d, %d): an empty page with more", when, after, maxBytes)
				}
				size := 0
				for i := range page {
					size += thread.RecordSize(&page[i])
				}
				if len(page) > 1 && size > maxBytes {
					t.Fatalf("%s: RunEventsPage(%d, %d): %d records of %d bytes", when, after, maxBytes, len(page), size)
				}
				if want := after+int64(len(page)) < int64(len(want)); more != want {
					t.Fatalf("%s: RunEventsPage(%d, %d): more %v after %d records, want %v", when, after, maxBytes, more, len(page), want)
				}
				got = append(got, page...)
				if !more {
					break
				}
				after = page[len(page)-1].Seq
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("%s: pages of %d bytes: got %v, want %v", when, maxBytes, got, want)
			}
		}
	}
	if page, more, err := s.RunEventsPage(ctx, uuid.New(), 0, 1<<20); err != nil || len(page) != 0 || more {
		t.Fatalf("RunEventsPage of an unknown run: got %v, more %v, %v; want nothing", page, more, err)
	}
	all, err := s.RunEventsAfter(ctx, r.ID, 0)
	if err != nil || len(all) != 1+len(words) {
		t.Fatalf("RunEventsAfter: got %d records, %v", len(all), err)
	}
	check("running", all)
	fin := finish(t, s, th, r, words...)
	check("ended", fin.Records)
}

// contractClaimLost: once RunClaimExpired took a run, the old claim's
// writes write nothing and name the run; the new claim's succeed.
func contractClaimLost(t *testing.T, s thread.Store) {
	ctx := context.Background()
	th := newThread(t, s, "alice", now())
	r := startLeased(t, s, th, uuid.Nil, now().Add(-time.Minute))
	th2 := newThread(t, s, "alice", now())
	held := start(t, s, th2, uuid.Nil)
	claimed, err := s.RunClaimExpired(ctx, "b", now(), now().Add(time.Minute), 10)
	if err != nil || len(claimed) != 1 || claimed[0].ID != r.ID || claimed[0].Claim != 1 {
		t.Fatalf("RunClaimExpired: got %v, %v; want run %s at claim 1", claimed, err, r.ID)
	}
	err = s.RunEventsAppend(ctx, []thread.Segment{{RunID: r.ID, Claim: 0, Records: tokens(2, "old")}, {RunID: held.ID, Records: tokens(2, "held")}})
	wantLost(t, "RunEventsAppend under the old claim", err, r.ID)
	checkLog(t, s, r.ID, 1, nil)
	checkLog(t, s, held.ID, 1, nil) // all or nothing
	if err := s.RunEventsAppend(ctx, []thread.Segment{{RunID: r.ID, Claim: 1, Records: tokens(2, "new")}}); err != nil {
		t.Fatalf("RunEventsAppend under the new claim: %v", err)
	}
	checkLog(t, s, r.ID, 1, tokens(2, "new"))
	_, lost, err := s.RunLeaseRenew(ctx, []thread.RunClaim{{RunID: r.ID, Claim: 0}}, now().Add(time.Hour))
	if err != nil || !sameIDs(lost, []uuid.UUID{r.ID}) {
		t.Fatalf("RunLeaseRenew under the old claim: lost %v, %v; want %s", lost, err, r.ID)
	}
	old := ending(r, "old")
	wantLost(t, "RunFinish under the old claim", s.RunFinish(ctx, old), r.ID)
	if got, err := s.RunGet(ctx, th.ID, r.ID); err != nil || got.Status != thread.RunRunning || got.Owner != "b" || got.Claim != 1 {
		t.Fatalf("run after the old claim's writes: got %+v, %v; want running under b's claim 1", got, err)
	}
	next := *r
	next.Claim = 1
	fin := ending(&next, "new")
	if err := s.RunFinish(ctx, fin); err != nil {
		t.Fatalf("RunFinish under the new claim: %v", err)
	}
}

func contractRunFinish(t *testing.T, s thread.Store) {
	ctx := context.Background()
	th := newThread(t, s, "alice", now())
	r := start(t, s, th, uuid.Nil)
	fin := ending(r, "hel", "lo")
	fin.Title = "greeting"
	steps := []thread.StepUsage{{From: 2, PromptTokens: 1, CompletionTokens: 1, FinishReason: "tool_call"}, {From: 3, PromptTokens: 2, CompletionTokens: 1}}
	fin.Usage = &thread.Usage{PromptTokens: 3, CompletionTokens: 2, Steps: steps}
	if err := s.RunFinish(ctx, fin); err != nil {
		t.Fatalf("RunFinish: %v", err)
	}
	th.LastSeq = fin.Assistant.Seq
	got, err := s.RunGet(ctx, th.ID, r.ID)
	if err != nil || got.Status != thread.RunSucceeded || got.FinishedAt == nil || got.Owner != "" || got.Usage == nil || got.Usage.CompletionTokens != 2 {
		t.Fatalf("RunGet after RunFinish: got %+v, %v", got, err)
	}
	if fmt.Sprint(got.Usage.Steps) != fmt.Sprint(steps) {
		t.Fatalf("RunGet after RunFinish: steps' usage %+v, want %+v", got.Usage.Steps, steps)
	}
	gt, nodes, active, err := s.ThreadRead(ctx, "alice", th.ID, 0)
	if err != nil || gt.LastSeq != 2 || gt.HeadID != r.MessageID || gt.Title == nil || *gt.Title != "greeting" || len(nodes) != 2 ||
		nodes[1].Text() != "hello" || active != nil {
		t.Fatalf("thread after RunFinish: got %+v, %d nodes, run %v, %v", gt, len(nodes), active, err)
	}
	checkLog(t, s, r.ID, 0, fin.Records)
	wantLost(t, "RunFinish again", s.RunFinish(ctx, fin), r.ID)
	err = s.RunEventsAppend(ctx, []thread.Segment{{RunID: r.ID, Records: tokens(int64(len(fin.Records)+1), "late")}})
	wantLost(t, "RunEventsAppend to an ended run", err, r.ID)
	checkLog(t, s, r.ID, 0, fin.Records)
	// A title is kept once set.
	r2 := start(t, s, th, r.MessageID)
	fin2 := ending(r2, "again")
	fin2.Title = "other"
	if err := s.RunFinish(ctx, fin2); err != nil {
		t.Fatal(err)
	}
	th.LastSeq = fin2.Assistant.Seq
	if gt, err := s.ThreadGet(ctx, "alice", th.ID); err != nil || *gt.Title != "greeting" {
		t.Fatalf("title after a second RunFinish: got %+v, %v; want greeting kept", gt, err)
	}
}

func contractRunFinishAll(t *testing.T, s thread.Store) {
	ctx := context.Background()
	var ths []*thread.Thread
	var runs []*thread.Run
	for range 3 {
		th := newThread(t, s, "alice", now())
		ths = append(ths, th)
		runs = append(runs, start(t, s, th, uuid.Nil))
	}
	finish(t, s, ths[2], runs[2], "done")
	// All or nothing: the ended run refuses, and the others stay running.
	err := s.RunFinishAll(ctx, []thread.RunFinish{ending(runs[0], "a"), ending(runs[2], "c"), ending(runs[1], "b")})
	wantLost(t, "RunFinishAll with an ended run", err, runs[2].ID)
	for _, r := range runs[:2] {
		if got, err := s.RunGet(ctx, r.ThreadID, r.ID); err != nil || got.Status != thread.RunRunning {
			t.Fatalf("run after a refused RunFinishAll: got %+v, %v; want running", got, err)
		}
	}
	if err := s.RunFinishAll(ctx, []thread.RunFinish{ending(runs[0], "a"), ending(runs[1], "b")}); err != nil {
		t.Fatalf("RunFinishAll: %v", err)
	}
	for i, r := range runs[:2] {
		got, err := s.RunGet(ctx, r.ThreadID, r.ID)
		if err != nil || got.Status != thread.RunSucceeded || got.FinishedAt == nil {
			t.Fatalf("run %d after RunFinishAll: got %+v, %v; want succeeded", i, got, err)
		}
		if th, err := s.ThreadGet(ctx, "alice", r.ThreadID); err != nil || th.LastSeq != 2 || th.HeadID != r.MessageID {
			t.Fatalf("thread %d after RunFinishAll: got %+v, %v", i, th, err)
		}
	}
}

func contractRunLeaseRenew(t *testing.T, s thread.Store) {
	ctx := context.Background()
	var runs []*thread.Run
	for range 3 {
		runs = append(runs, start(t, s, newThread(t, s, "alice", now()), uuid.Nil))
	}
	if err := s.RunRequestCancel(ctx, runs[1].ID); err != nil {
		t.Fatalf("RunRequestCancel: %v", err)
	}
	th := &thread.Thread{ID: runs[2].ThreadID, LastSeq: 1}
	finish(t, s, th, runs[2], "done")
	claims := []thread.RunClaim{{RunID: runs[0].ID}, {RunID: runs[1].ID}, {RunID: runs[2].ID}, {RunID: uuid.New()}}
	until := now().Add(time.Hour)
	cancels, lost, err := s.RunLeaseRenew(ctx, claims, until)
	if err != nil || !sameIDs(cancels, []uuid.UUID{runs[1].ID}) || !sameIDs(lost, []uuid.UUID{runs[2].ID, claims[3].RunID}) {
		t.Fatalf("RunLeaseRenew: cancels %v, lost %v, %v; want cancels [%s], lost the ended and the unknown run", cancels, lost, err, runs[1].ID)
	}
	for _, r := range runs[:2] {
		if got, err := s.RunGet(ctx, r.ThreadID, r.ID); err != nil || !got.LeaseUntil.Equal(until) {
			t.Fatalf("lease after RunLeaseRenew: got %+v, %v; want until %v", got, err, until)
		}
	}
	// Renewed leases are not expired.
	if got, err := s.RunClaimExpired(ctx, "b", now().Add(time.Minute), now().Add(2*time.Hour), 10); err != nil || len(got) != 0 {
		t.Fatalf("RunClaimExpired after renewal: got %v, %v; want none", got, err)
	}
}

func contractRunRequestCancel(t *testing.T, s thread.Store) {
	ctx := context.Background()
	th := newThread(t, s, "alice", now())
	r := start(t, s, th, uuid.Nil)
	if err := s.RunRequestCancel(ctx, r.ID); err != nil {
		t.Fatalf("RunRequestCancel of a running run: %v", err)
	}
	if err := s.RunRequestCancel(ctx, r.ID); err != nil {
		t.Fatalf("RunRequestCancel again: %v", err)
	}
	finish(t, s, th, r, "ok")
	wantCode(t, "RunRequestCancel of an ended run", s.RunRequestCancel(ctx, r.ID), errcode.Conflict)
}

func contractRunClaimExpired(t *testing.T, s thread.Store) {
	ctx := context.Background()
	past := now().Add(-time.Minute)
	expired := map[uuid.UUID]bool{}
	for range 3 {
		expired[startLeased(t, s, newThread(t, s, "alice", now()), uuid.Nil, past).ID] = true
	}
	live := start(t, s, newThread(t, s, "alice", now()), uuid.Nil)
	th := newThread(t, s, "alice", now())
	ended := startLeased(t, s, th, uuid.Nil, past)
	finish(t, s, th, ended, "done")

	until := now().Add(time.Hour)
	seen := map[uuid.UUID]bool{}
	for i, want := range []int{2, 1, 0} {
		got, err := s.RunClaimExpired(ctx, "recoverer", now(), until, 2)
		if err != nil || len(got) != want {
			t.Fatalf("RunClaimExpired %d, limit 2: got %d runs, %v; want %d", i, len(got), err, want)
		}
		for _, r := range got {
			if !expired[r.ID] || seen[r.ID] {
				t.Fatalf("RunClaimExpired %d: took run %s, want only expired runs not yet taken", i, r.ID)
			}
			seen[r.ID] = true
			if r.Owner != "recoverer" || r.Claim != 1 || !r.LeaseUntil.Equal(until) || r.Status != thread.RunRunning {
				t.Fatalf("RunClaimExpired %d: got %+v; want owner recoverer, claim 1, lease %v, running", i, r, until)
			}
			if got, err := s.RunGet(ctx, r.ThreadID, r.ID); err != nil || got.Owner != "recoverer" || got.Claim != 1 {
				t.Fatalf("RunGet of a claimed run: got %+v, %v", got, err)
			}
		}
	}
	if got, err := s.RunGet(ctx, live.ThreadID, live.ID); err != nil || got.Owner != "test" || got.Claim != 0 {
		t.Fatalf("run with a live lease: got %+v, %v; want untouched", got, err)
	}
}
