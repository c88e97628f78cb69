package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/store"
	"github.com/threadline/threadline/store/pgtest"
	"github.com/threadline/threadline/thread"
)

func setup(t testing.TB) (*store.Store, *pgxpool.Pool) {
	t.Helper()
	pool := pgtest.Pool(t)
	return store.New(pool), pool
}

// acquire is a connection to a fresh test database, for session settings
// that must not leak into a pool; it is released when the test ends.
func acquire(t *testing.T) *pgxpool.Conn {
	t.Helper()
	_, pool := setup(t)
	conn, err := pool.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Release)
	return conn
}

func newThread(t testing.TB, s *store.Store, caller string) *thread.Thread {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Microsecond)
	th, created, err := s.ThreadCreate(context.Background(), &thread.Thread{ID: uuid.New(), Caller: caller, CreatedAt: now, UpdatedAt: now})
	if err != nil || !created {
		t.Fatalf("ThreadCreate: created %v, err %v", created, err)
	}
	return th
}

func text(s string) []checkpoint.Part { return []checkpoint.Part{{Type: "text", Text: s}} }

// chain appends n alternating user/assistant messages under parent.
func chain(t testing.TB, s *store.Store, th uuid.UUID, parent uuid.UUID, n int) []*checkpoint.Node {
	t.Helper()
	var out []*checkpoint.Node
	for i := 0; i < n; i++ {
		role := checkpoint.RoleUser
		var st *checkpoint.Status
		if i%2 == 1 {
			role, st = checkpoint.RoleAssistant, &checkpoint.Status{Type: "complete", Reason: "stop"}
		}
		nd := &checkpoint.Node{ID: uuid.New(), ParentID: parent, Role: role, Status: st, Content: text(fmt.Sprintf("message %d", i))}
		if err := s.CheckpointAppend(context.Background(), th, nd); err != nil {
			t.Fatalf("CheckpointAppend %d: %v", i, err)
		}
		parent = nd.ID
		out = append(out, nd)
	}
	return out
}

func TestMigrationsUpDownUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.New(t)
	for i, step := range []func(context.Context, string) error{store.MigrateDown, store.MigrateUp, store.MigrateDown, store.MigrateUp} {
		if err := step(ctx, url); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	v, dirty, err := store.MigrateVersion(ctx, url)
	if err != nil || dirty || v < 2 {
		t.Fatalf("version: got %d dirty %v err %v, want >= 2 clean", v, dirty, err)
	}
}

func TestCheckpointsAreImmutable(t *testing.T) {
	t.Parallel()
	s, pool := setup(t)
	ctx := context.Background()
	th := newThread(t, s, "alice")
	nodes := chain(t, s, th.ID, uuid.Nil, 2)
	for _, q := range []string{
		`UPDATE checkpoints SET content = '[]' WHERE id = $1`,
		`DELETE FROM checkpoints WHERE id = $1`,
	} {
		_, err := pool.Exec(ctx, q, nodes[1].ID)
		if err == nil || !strings.Contains(err.Error(), "immutable") {
			t.Errorf("%s: got %v, want an immutability error", q, err)
		}
	}
	if _, err := pool.Exec(ctx, `TRUNCATE checkpoints CASCADE`); err == nil {
		t.Errorf("TRUNCATE checkpoints: got nil error, want refusal")
	}
	got, err := s.CheckpointsAfter(ctx, th.ID, 0)
	if err != nil || len(got) != 2 || got[1].Text() != "message 1" {
		t.Fatalf("after refused writes: got %d nodes (%v), want the 2 unchanged", len(got), err)
	}
	// Deleting the whole thread still removes everything in it.
	if err := s.ThreadDelete(ctx, "alice", th.ID); err != nil {
		t.Fatalf("ThreadDelete: %v", err)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM checkpoints WHERE thread_id = $1`, th.ID).Scan(&n); err != nil || n != 0 {
		t.Fatalf("checkpoints left after thread delete: got %d (%v), want 0", n, err)
	}
}

// TestThreadDeleteRemovesRunLogs: deleting a thread deletes its runs and
// their event logs, live and compacted, and nothing of other threads; the
// deleted live run's group-commit row is purged, the other's kept.
func TestThreadDeleteRemovesRunLogs(t *testing.T) {
	t.Parallel()
	s, pool := setup(t)
	ctx := context.Background()
	count := func(runID uuid.UUID) (rows, recs int) {
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM run_events WHERE run_id = $1`, runID).Scan(&rows); err != nil {
			t.Fatal(err)
		}
		got, err := s.RunEventsAfter(ctx, runID, 0)
		if err != nil {
			t.Fatal(err)
		}
		return rows, len(got)
	}
	var live, done [2]uuid.UUID
	var threads [2]*thread.Thread
	for i := range threads {
		th := newThread(t, s, "alice")
		in, fin := benchTurn(th, uuid.Nil)
		if err := s.RunComplete(ctx, in, fin); err != nil {
			t.Fatal(err)
		}
		th.LastSeq = fin.Assistant.Seq
		r, err := startRun(t, s, th, fin.Assistant.ID)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.RunEventsAppend(ctx, []thread.Segment{{RunID: r.ID, Records: tokens(2, 3)}}); err != nil {
			t.Fatal(err)
		}
		threads[i], done[i], live[i] = th, fin.Run.ID, r.ID
		if dr, drecs := count(done[i]); dr != 1 || drecs != len(fin.Records) {
			t.Fatalf("thread %d, ended run: %d rows, %d records, want 1 and %d", i, dr, drecs, len(fin.Records))
		}
		if lr, lrecs := count(live[i]); lr != 1 || lrecs != 4 {
			t.Fatalf("thread %d, live run: %d rows, %d records, want 1 (its start) and 4", i, lr, lrecs)
		}
	}
	if err := s.ThreadDelete(ctx, "alice", threads[0].ID); err != nil {
		t.Fatal(err)
	}
	for _, id := range []uuid.UUID{done[0], live[0]} {
		if rows, recs := count(id); rows != 0 || recs != 0 {
			t.Errorf("deleted thread's run: %d rows, %d records left, want 0 and 0", rows, recs)
		}
	}
	if rows, recs := count(live[1]); rows != 1 || recs != 4 {
		t.Errorf("other thread's live run: %d rows, %d records, want 1 and 4", rows, recs)
	}
	more, err := s.RunLogPurge(ctx)
	var logRows int
	if err == nil {
		err = pool.QueryRow(ctx, `SELECT count(*) FROM run_log`).Scan(&logRows)
	}
	if err != nil || !more || logRows != 1 {
		t.Errorf("purge: got more %v, %d run_log rows (%v), want true and 1 (the live run's)", more, logRows, err)
	}
	if rows, recs := count(live[1]); rows != 1 || recs != 4 {
		t.Errorf("other thread's live run after the purge: %d rows, %d records, want 1 and 4", rows, recs)
	}
}

// TestRunLogPurge: group commits shared by two runs are read back per run
// from any sequence, and purged only once no running run needs them.
func TestRunLogPurge(t *testing.T) {
	t.Parallel()
	s, pool := setup(t)
	ctx := context.Background()
	purge := func(wantMore bool, wantRows int) {
		t.Helper()
		more, err := s.RunLogPurge(ctx)
		rows, _ := logRows(t, pool, uuid.Nil)
		if err != nil || more != wantMore || rows != wantRows {
			t.Fatalf("purge: got more %v, %d rows (%v), want %v and %d", more, rows, err, wantMore, wantRows)
		}
	}
	snap := thread.Record{Seq: 1, Kind: thread.KindSnapshot, Status: thread.RunRunning, TreeSeq: 1}
	thA, a := startThreadRun(t, s)
	commit := func(segs ...thread.Segment) {
		t.Helper()
		if err := s.RunEventsAppend(ctx, segs); err != nil {
			t.Fatal(err)
		}
	}
	commit(thread.Segment{RunID: a.ID, Records: tokens(2, 3)})
	thB, b := startThreadRun(t, s) // after A's first commit: B never needs it
	commit(thread.Segment{RunID: a.ID, Records: tokens(5, 2)}, thread.Segment{RunID: b.ID, Records: tokens(2, 4)})
	commit(thread.Segment{RunID: b.ID, Records: tokens(6, 1)}, thread.Segment{RunID: a.ID})
	wantA := append([]thread.Record{snap}, tokens(2, 5)...)
	wantB := append([]thread.Record{snap}, tokens(2, 5)...)
	checkLog(t, s, a.ID, "A", wantA)
	checkLog(t, s, b.ID, "B", wantB)
	purge(true, 3) // A runs and needs all three
	wantA = finishRun(t, s, thA, a, wantA)
	purge(true, 2) // B still needs the last two
	checkLog(t, s, a.ID, "A after its end", wantA)
	checkLog(t, s, b.ID, "B after A's end", wantB)
	wantB = finishRun(t, s, thB, b, wantB)
	purge(false, 0)
	checkLog(t, s, a.ID, "A after both ends", wantA)
	checkLog(t, s, b.ID, "B after both ends", wantB)
}

// startThreadRun starts a run on a new thread of alice's.
func startThreadRun(t testing.TB, s *store.Store) (*thread.Thread, *thread.Run) {
	t.Helper()
	th := newThread(t, s, "alice")
	r, err := startRun(t, s, th, uuid.Nil)
	if err != nil {
		t.Fatal(err)
	}
	return th, r
}

// checkLog reads run's log after every sequence from 0 to its last and
// compares it with want; when says which read in a failure.
func checkLog(t testing.TB, s *store.Store, run uuid.UUID, when string, want []thread.Record) {
	t.Helper()
	for after := int64(0); after <= int64(len(want)); after++ {
		got, err := s.RunEventsAfter(context.Background(), run, after)
		if err != nil || fmt.Sprint(got) != fmt.Sprint(want[after:]) {
			t.Fatalf("%s, log after %d: got %v (%v), want %v", when, after, got, err, want[after:])
		}
	}
}

// finishRun ends run r of th as succeeded, its reply the tokens of recs
// (its start snapshot, then tokens of " abcd"), and returns its whole log:
// recs and the end snapshot.
func finishRun(t testing.TB, s *store.Store, th *thread.Thread, r *thread.Run, recs []thread.Record) []thread.Record {
	t.Helper()
	all := append(append([]thread.Record{}, recs...), thread.Record{Seq: int64(len(recs) + 1), Kind: thread.KindSnapshot, Status: thread.RunSucceeded, TreeSeq: 2})
	asst := checkpoint.Node{ID: r.MessageID, ThreadID: th.ID, ParentID: r.ParentID, Seq: 2, Role: checkpoint.RoleAssistant,
		Content: text(strings.Repeat(" abcd", len(recs)-1)), Status: &checkpoint.Status{Type: "complete", Reason: "stop"}, RunID: r.ID, CreatedAt: r.CreatedAt}
	if err := s.RunFinish(context.Background(), thread.RunFinish{Run: r, Status: thread.RunSucceeded, Assistant: asst, Records: all, Model: "builtin"}); err != nil {
		t.Fatal(err)
	}
	return all
}

// logRows counts the shared run_log rows, and run's own rows in
// run_events.
func logRows(t testing.TB, pool *pgxpool.Pool, run uuid.UUID) (shared, own int) {
	t.Helper()
	ctx := context.Background()
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM run_log`).Scan(&shared); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM run_events WHERE run_id = $1`, run).Scan(&own); err != nil {
		t.Fatal(err)
	}
	return shared, own
}

// TestRunLogSpill: a running run's segments in rows older than the spill
// age move to a row of its own, so the shared rows go while it still runs;
// its log reads the same from every sequence before, after and across the
// move, and after its end.
func TestRunLogSpill(t *testing.T) {
	t.Parallel()
	s, pool := setup(t)
	ctx := context.Background()
	th, r := startThreadRun(t, s)
	_, o := startThreadRun(t, s)
	want := []thread.Record{{Seq: 1, Kind: thread.KindSnapshot, Status: thread.RunRunning, TreeSeq: 1}}
	otherSeq := int64(1)
	// commit writes n tokens of r and one of o in one group commit.
	commit := func(n int) {
		t.Helper()
		recs := tokens(int64(len(want)+1), n)
		want = append(want, recs...)
		otherSeq++
		if err := s.RunEventsAppend(ctx, []thread.Segment{{RunID: r.ID, Records: recs}, {RunID: o.ID, Records: tokens(otherSeq, 1)}}); err != nil {
			t.Fatal(err)
		}
	}
	// purge purges once and checks what it reports and the rows left: the
	// shared ones and r's own.
	type purged struct {
		more        bool
		shared, own int
	}
	purge := func(when string, wantP purged) {
		t.Helper()
		more, err := s.RunLogPurge(ctx)
		if err != nil {
			t.Fatalf("%s: purge: %v", when, err)
		}
		got := purged{more: more}
		got.shared, got.own = logRows(t, pool, r.ID)
		if got != wantP {
			t.Fatalf("%s: got more %v, %d shared rows, %d own rows; want %v, %d and %d",
				when, got.more, got.shared, got.own, wantP.more, wantP.shared, wantP.own)
		}
	}
	commit(2)
	commit(3)
	// Rows younger than the spill age stay, and the run pins them.
	purge("purge of young rows", purged{more: true, shared: 2, own: 1})
	store.SetSpillAfter(s, 0)
	purge("spill", purged{more: false, shared: 0, own: 2}) // start, moved
	checkLog(t, s, r.ID, "after a spill", want)
	commit(1)
	checkLog(t, s, r.ID, "after a spill and a commit", want)
	purge("second spill", purged{more: false, shared: 0, own: 3})
	checkLog(t, s, r.ID, "after two spills", want)
	// The other run was spilled too: its log is whole.
	if got, err := s.RunEventsAfter(ctx, o.ID, 1); err != nil || fmt.Sprint(got) != fmt.Sprint(tokens(2, 3)) {
		t.Fatalf("other run: got %v (%v), want its 3 tokens", got, err)
	}
	// A run whose row is locked (its end being written) is not moved, and
	// its rows stay.
	commit(2)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM runs WHERE id = $1 FOR UPDATE`, r.ID); err != nil {
		t.Fatal(err)
	}
	purge("spill while the run is locked", purged{more: true, shared: 1, own: 3})
	_ = tx.Rollback(ctx)
	checkLog(t, s, r.ID, "after a skipped spill", want)
	want = finishRun(t, s, th, r, want)
	checkLog(t, s, r.ID, "after the end", want)
	if _, own := logRows(t, pool, r.ID); own != 1 {
		t.Fatalf("after the end: %d own rows, want 1 (compacted)", own)
	}
}

// TestRunLogSpillRacesFinish: purges that spill run concurrently with runs
// ending; every ended run keeps exactly its compacted row, and its log
// reads back whole.
func TestRunLogSpillRacesFinish(t *testing.T) {
	t.Parallel()
	s, pool := setup(t)
	store.SetSpillAfter(s, 0)
	ctx := context.Background()
	const n = 40
	type started struct {
		th *thread.Thread
		r  *thread.Run
	}
	runs := make([]started, n)
	for i := range runs {
		th, r := startThreadRun(t, s)
		runs[i] = started{th, r}
	}
	done := make(chan struct{})
	purgeErr := make(chan error, 1)
	go func() {
		defer close(purgeErr)
		for {
			select {
			case <-done:
				return
			default:
			}
			if _, err := s.RunLogPurge(ctx); err != nil {
				purgeErr <- err
				return
			}
		}
	}()
	// Round k commits a token for every run still going, then ends run k:
	// spills keep finding new segments of the run being ended.
	logs := make([][]thread.Record, n)
	for i := range logs {
		logs[i] = []thread.Record{{Seq: 1, Kind: thread.KindSnapshot, Status: thread.RunRunning, TreeSeq: 1}}
	}
	for k := range runs {
		var segs []thread.Segment
		for i := k; i < n; i++ {
			tok := tokens(int64(len(logs[i])+1), 1)
			logs[i] = append(logs[i], tok...)
			segs = append(segs, thread.Segment{RunID: runs[i].r.ID, Records: tok})
		}
		if err := s.RunEventsAppend(ctx, segs); err != nil {
			t.Fatal(err)
		}
		logs[k] = finishRun(t, s, runs[k].th, runs[k].r, logs[k])
	}
	close(done)
	if err := <-purgeErr; err != nil {
		t.Fatalf("purge during the runs: %v", err)
	}
	if more, err := s.RunLogPurge(ctx); err != nil || more {
		t.Fatalf("last purge: got more %v (%v), want false", more, err)
	}
	for k, sr := range runs {
		if _, rows := logRows(t, pool, sr.r.ID); rows != 1 {
			t.Fatalf("run %d: %d log rows, want 1 (its compacted log; a spill left behind would be a second)", k, rows)
		}
		got, err := s.RunEventsAfter(ctx, sr.r.ID, 0)
		if err != nil || fmt.Sprint(got) != fmt.Sprint(logs[k]) {
			t.Fatalf("run %d: got %v (%v), want %v", k, got, err, logs[k])
		}
	}
}

func TestParentMustBeInSameThread(t *testing.T) {
	t.Parallel()
	s, pool := setup(t)
	ctx := context.Background()
	a, b := newThread(t, s, "alice"), newThread(t, s, "alice")
	inA := chain(t, s, a.ID, uuid.Nil, 1)
	_, err := pool.Exec(ctx, `INSERT INTO checkpoints (thread_id, id, parent_id, seq, role, content, created_at)
		VALUES ($1, $2, $3, 1, 'assistant', '[]', now())`, b.ID, uuid.New(), inA[0].ID)
	if err == nil || !strings.Contains(err.Error(), "foreign key") {
		t.Fatalf("cross-thread parent by raw SQL: got %v, want a foreign key violation", err)
	}
	err = s.CheckpointAppend(ctx, b.ID, &checkpoint.Node{ID: uuid.New(), ParentID: inA[0].ID, Role: checkpoint.RoleAssistant})
	if errcode.Of(err) != errcode.InvalidFork {
		t.Fatalf("cross-thread parent through the store: got %v, want invalid_fork", err)
	}
}

func TestThreadsBelongToCallers(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	ctx := context.Background()
	th := newThread(t, s, "alice")
	if _, err := s.ThreadGet(ctx, "bob", th.ID); errcode.Of(err) != errcode.NotFound {
		t.Errorf("bob reads alice's thread: got %v, want not_found", err)
	}
	if err := s.ThreadDelete(ctx, "bob", th.ID); errcode.Of(err) != errcode.NotFound {
		t.Errorf("bob deletes alice's thread: got %v, want not_found", err)
	}
	_, _, err := s.ThreadCreate(ctx, &thread.Thread{ID: th.ID, Caller: "bob", CreatedAt: th.CreatedAt, UpdatedAt: th.CreatedAt})
	if errcode.Of(err) != errcode.Conflict {
		t.Errorf("bob creates alice's thread id: got %v, want conflict", err)
	}
	got, created, err := s.ThreadCreate(ctx, &thread.Thread{ID: th.ID, Caller: "alice", CreatedAt: th.CreatedAt, UpdatedAt: th.CreatedAt})
	if err != nil || created || got.ID != th.ID {
		t.Errorf("alice re-creates her thread: got created %v err %v, want the existing one", created, err)
	}
}

func TestThreadListKeyset(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	ctx := context.Background()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var want []uuid.UUID
	for i := 0; i < 7; i++ {
		at := base.Add(time.Duration(i%3) * time.Minute) // ties on updated_at
		id := uuid.New()
		if _, _, err := s.ThreadCreate(ctx, &thread.Thread{ID: id, Caller: "alice", CreatedAt: at, UpdatedAt: at}); err != nil {
			t.Fatal(err)
		}
		want = append(want, id)
	}
	newThread(t, s, "bob")
	var got []uuid.UUID
	var after *thread.ThreadCursor
	for page := 0; page < 10; page++ {
		ts, err := s.ThreadList(ctx, "alice", 3, after)
		if err != nil {
			t.Fatal(err)
		}
		for _, th := range ts {
			got = append(got, th.ID)
		}
		if len(ts) < 3 {
			break
		}
		last := ts[len(ts)-1]
		after = &thread.ThreadCursor{UpdatedAt: last.UpdatedAt, ID: last.ID}
	}
	if len(got) != len(want) {
		t.Fatalf("paged list: got %d threads, want %d", len(got), len(want))
	}
	seen := map[uuid.UUID]bool{}
	for _, id := range got {
		if seen[id] {
			t.Fatalf("thread %s listed twice", id)
		}
		seen[id] = true
	}
}

// TestEmptyCallerIsACaller: the caller "" owns the threads created with
// caller "" and nothing else; no caller skips the ownership check, in any
// method that takes one.
func TestEmptyCallerIsACaller(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	ctx := context.Background()
	tests := []struct{ owner, other string }{
		{"alice", ""},
		{"", "alice"},
	}
	for _, tt := range tests {
		th := newThread(t, s, tt.owner)
		chain(t, s, th.ID, uuid.Nil, 2)
		if got, err := s.ThreadGet(ctx, tt.other, th.ID); errcode.Of(err) != errcode.NotFound {
			t.Errorf("ThreadGet by %q of %q's thread: got %+v, %v; want not_found", tt.other, tt.owner, got, err)
		}
		if got, cps, run, err := s.ThreadRead(ctx, tt.other, th.ID, 0); errcode.Of(err) != errcode.NotFound || cps != nil {
			t.Errorf("ThreadRead by %q of %q's thread: got %+v, %d checkpoints, run %v, %v; want not_found and nothing", tt.other, tt.owner, got, len(cps), run, err)
		}
		title := "mine now"
		if _, err := s.ThreadUpdate(ctx, tt.other, th.ID, thread.ThreadUpdate{Title: &title}); errcode.Of(err) != errcode.NotFound {
			t.Errorf("ThreadUpdate by %q of %q's thread: got %v, want not_found", tt.other, tt.owner, err)
		}
		if err := s.ThreadSetHead(ctx, tt.other, th.ID, uuid.New()); errcode.Of(err) != errcode.NotFound {
			t.Errorf("ThreadSetHead by %q of %q's thread: got %v, want not_found", tt.other, tt.owner, err)
		}
		if err := s.ThreadDelete(ctx, tt.other, th.ID); errcode.Of(err) != errcode.NotFound {
			t.Errorf("ThreadDelete by %q of %q's thread: got %v, want not_found", tt.other, tt.owner, err)
		}
		list, err := s.ThreadList(ctx, tt.other, 100, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, got := range list {
			if got.ID == th.ID || got.Caller != tt.other {
				t.Errorf("ThreadList by %q: got thread %s of %q, want only %q's threads", tt.other, got.ID, got.Caller, tt.other)
			}
		}
		if got, err := s.ThreadGet(ctx, tt.owner, th.ID); err != nil || got.Caller != tt.owner {
			t.Errorf("ThreadGet by the owner %q: got %+v, %v; want the thread", tt.owner, got, err)
		}
		if owner, err := s.ThreadOwner(ctx, th.ID); err != nil || owner != tt.owner {
			t.Errorf("ThreadOwner: got %q, %v; want %q", owner, err, tt.owner)
		}
		// A retried create by another caller is refused, by the owner
		// returns the existing thread.
		if _, _, err := s.ThreadCreate(ctx, &thread.Thread{ID: th.ID, Caller: tt.other, CreatedAt: th.CreatedAt, UpdatedAt: th.CreatedAt}); errcode.Of(err) != errcode.Conflict {
			t.Errorf("ThreadCreate by %q of %q's id: got %v, want conflict", tt.other, tt.owner, err)
		}
		if got, created, err := s.ThreadCreate(ctx, &thread.Thread{ID: th.ID, Caller: tt.owner, CreatedAt: th.CreatedAt, UpdatedAt: th.CreatedAt}); err != nil || created || got.ID != th.ID {
			t.Errorf("ThreadCreate again by the owner %q: got %+v, created %v, %v; want the existing thread", tt.owner, got, created, err)
		}
	}
	if owner, err := s.ThreadOwner(ctx, uuid.New()); errcode.Of(err) != errcode.NotFound {
		t.Errorf("ThreadOwner of an unknown id: got %q, %v; want not_found", owner, err)
	}
}

func startRun(t testing.TB, s *store.Store, th *thread.Thread, parent uuid.UUID) (*thread.Run, error) {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Microsecond)
	user := &checkpoint.Node{ID: uuid.New(), ThreadID: th.ID, ParentID: parent, Role: checkpoint.RoleUser, Content: text("hi"),
		Seq: th.LastSeq + 1, CreatedAt: now}
	r := thread.Run{ID: uuid.New(), ThreadID: th.ID, Status: thread.RunRunning, UserMessageID: user.ID, ParentID: user.ID,
		MessageID: uuid.New(), Model: "builtin", Owner: "test", LeaseUntil: now.Add(time.Minute), TreeSeq: user.Seq, CreatedAt: now}
	user.RunID = r.ID
	return s.RunCreate(context.Background(), thread.RunCreate{Caller: th.Caller, Thread: th.ID, User: user, Run: r},
		thread.Record{Seq: 1, Kind: thread.KindSnapshot, Status: thread.RunRunning, TreeSeq: r.TreeSeq})
}

// startRuns starts n runs, each on a new thread, and returns their ids.
func startRuns(t testing.TB, s *store.Store, n int) []uuid.UUID {
	t.Helper()
	ids := make([]uuid.UUID, n)
	for i := range ids {
		r, err := startRun(t, s, newThread(t, s, "bench"), uuid.Nil)
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = r.ID
	}
	return ids
}

func TestOneRunAtATime(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	th := newThread(t, s, "alice")
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = startRun(t, s, th, uuid.Nil)
		}()
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch code := errcode.Of(err); {
		case err == nil:
			won++
		case code == errcode.RunInProgress, code == errcode.Conflict:
		default:
			t.Errorf("racing RunCreate: got %v, want run_in_progress or conflict", err)
		}
	}
	if won != 1 {
		t.Fatalf("racing RunCreate: %d won, want exactly 1", won)
	}
}

func TestRunLogCompacts(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	ctx := context.Background()
	th, r := startThreadRun(t, s)
	recs := []thread.Record{{Seq: 1, Kind: thread.KindSnapshot, Status: thread.RunRunning, TreeSeq: 1}}
	var reply string
	for i := 2; i <= 41; i++ {
		tok := fmt.Sprintf(" t%02d", i)
		reply += tok
		recs = append(recs, thread.Record{Seq: int64(i), Kind: thread.KindToken, Text: tok})
	}
	// Three live segments.
	for _, seg := range [][]thread.Record{recs[1:2], recs[2:30], recs[30:]} {
		if err := s.RunEventsAppend(ctx, []thread.Segment{{RunID: r.ID, Records: seg}}); err != nil {
			t.Fatal(err)
		}
	}
	live, err := s.RunEventsAfter(ctx, r.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(live) != fmt.Sprint(recs) {
		t.Fatalf("live log: got %v, want %v", live, recs)
	}
	all := append(append([]thread.Record{}, recs...),
		thread.Record{Seq: 42, Kind: thread.KindError, Code: "model_error", Text: "boom"},
		thread.Record{Seq: 43, Kind: thread.KindSnapshot, Status: thread.RunFailed, TreeSeq: 2})
	asst := checkpoint.Node{ID: r.MessageID, ThreadID: th.ID, ParentID: r.ParentID, Seq: 2, Role: checkpoint.RoleAssistant,
		Content: text(reply), Status: &checkpoint.Status{Type: "incomplete", Reason: "error", Error: "boom"}, RunID: r.ID, CreatedAt: r.CreatedAt}
	if err := s.RunFinish(ctx, thread.RunFinish{Run: r, Status: thread.RunFailed, Assistant: asst, Records: all, Model: "builtin",
		Error: &thread.RunError{Code: "model_error", Message: "boom"}}); err != nil {
		t.Fatal(err)
	}
	for _, after := range []int64{0, 1, 20, 41, 42, 43} {
		got, err := s.RunEventsAfter(ctx, r.ID, after)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(all[after:]) {
			t.Fatalf("compacted log after %d: got %v, want %v", after, got, all[after:])
		}
	}
	got, err := s.RunGet(ctx, th.ID, r.ID)
	if err != nil || got.Status != thread.RunFailed || got.LastSequence != 43 || got.Error == nil || got.Error.Code != "model_error" {
		t.Fatalf("RunGet: got %+v (%v)", got, err)
	}
	var lost *thread.ClaimLostError
	if err := s.RunFinish(ctx, thread.RunFinish{Run: r, Status: thread.RunFailed, Assistant: asst, Records: all}); !errors.As(err, &lost) || len(lost.Runs) != 1 || lost.Runs[0] != r.ID {
		t.Fatalf("second RunFinish: got %v, want the claim on %s lost", err, r.ID)
	}
}

func BenchmarkCheckpointAppend(b *testing.B) {
	for _, n := range []int{10, 100, 500} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			s, pool := setup(b)
			th := newThread(b, s, "bench")
			nodes := chain(b, s, th.ID, uuid.Nil, n)
			last := nodes[len(nodes)-1].ID
			ctx := context.Background()
			size := func() int64 {
				var v int64
				if err := pool.QueryRow(ctx, `SELECT pg_total_relation_size('checkpoints')`).Scan(&v); err != nil {
					b.Fatal(err)
				}
				return v
			}
			before := size()
			appended := 0
			b.ResetTimer()
			defer func() {
				if appended > 0 {
					b.ReportMetric(float64(size()-before)/float64(appended), "bytes/msg")
				}
			}()
			for b.Loop() {
				appended++
				// A sibling of the last message: the tree's size stays n+k.
				nd := &checkpoint.Node{ID: uuid.New(), ParentID: last, Role: checkpoint.RoleUser, Content: text(strings.Repeat("x", 64))}
				if err := s.CheckpointAppend(ctx, th.ID, nd); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkCheckpointsLoad(b *testing.B) {
	for _, n := range []int{10, 100, 500} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			s, _ := setup(b)
			th := newThread(b, s, "bench")
			chain(b, s, th.ID, uuid.Nil, 2*n)
			ctx := context.Background()
			b.ResetTimer()
			for b.Loop() {
				nodes, err := s.CheckpointsAfter(ctx, th.ID, 0)
				if err != nil || len(nodes) != 2*n {
					b.Fatalf("got %d nodes (%v)", len(nodes), err)
				}
			}
		})
	}
}

// tokens returns n token records from sequence first.
func tokens(first int64, n int) []thread.Record {
	out := make([]thread.Record, n)
	for i := range out {
		out[i] = thread.Record{Seq: first + int64(i), Kind: thread.KindToken, Text: " abcd"}
	}
	return out
}

// BenchmarkRunEventsAppend is one group commit: runs segments of 8 tokens
// in one statement. ns/token is the log's cost per token.
func BenchmarkRunEventsAppend(b *testing.B) {
	for _, runs := range []int{1, 100, 1000} {
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
					segs[i] = thread.Segment{RunID: id, Records: tokens(next, per)}
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

// BenchmarkRunEventsAfter replays a 200-token run's live log (25 segments)
// from the start and from its middle.
func BenchmarkRunEventsAfter(b *testing.B) {
	s, _ := setup(b)
	ctx := context.Background()
	th := newThread(b, s, "bench")
	r, err := startRun(b, s, th, uuid.Nil)
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < 25; i++ {
		if err := s.RunEventsAppend(ctx, []thread.Segment{{RunID: r.ID, Records: tokens(2+int64(i)*8, 8)}}); err != nil {
			b.Fatal(err)
		}
	}
	for _, after := range []int64{0, 100} {
		b.Run(fmt.Sprintf("after=%d", after), func(b *testing.B) {
			for b.Loop() {
				recs, err := s.RunEventsAfter(ctx, r.ID, after)
				if err != nil || int64(len(recs)) != 201-after {
					b.Fatalf("got %d records (%v), want %d", len(recs), err, 201-after)
				}
			}
		})
	}
}

// BenchmarkRunEventsAfterShared reads one running run's log while 1,000
// runs share the group commit's rows: 200 commits (about 5 s at 1,000
// streams, the most the purge leaves), one token per run each. This is
// what a rejoin to another process, or its 1 s poll, costs.
func BenchmarkRunEventsAfterShared(b *testing.B) {
	s, _ := setup(b)
	ctx := context.Background()
	const runs, commits = 1000, 200
	ids := startRuns(b, s, runs)
	for c := range commits {
		segs := make([]thread.Segment, runs)
		for i, id := range ids {
			segs[i] = thread.Segment{RunID: id, Records: tokens(int64(c)+2, 1)}
		}
		if err := s.RunEventsAppend(ctx, segs); err != nil {
			b.Fatal(err)
		}
	}
	for _, after := range []int64{0, commits} {
		b.Run(fmt.Sprintf("after=%d", after), func(b *testing.B) {
			for b.Loop() {
				recs, err := s.RunEventsAfter(ctx, ids[runs/2], after)
				if err != nil || int64(len(recs)) != commits+1-after {
					b.Fatalf("got %d records (%v), want %d", len(recs), err, commits+1-after)
				}
			}
		})
	}
}

func TestRunCreateGuards(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	th := newThread(t, s, "alice")
	stale := *th
	chain(t, s, th.ID, uuid.Nil, 1) // the thread grows behind stale's back
	if _, err := startRun(t, s, &stale, uuid.Nil); errcode.Of(err) != errcode.Conflict {
		t.Fatalf("RunCreate on a stale tree: got %v, want conflict", err)
	}
	foreign := *th
	foreign.Caller, foreign.LastSeq = "mallory", 1
	if _, err := startRun(t, s, &foreign, uuid.Nil); errcode.Of(err) != errcode.NotFound {
		t.Fatalf("RunCreate on another caller's thread: got %v, want not_found", err)
	}
	fresh := *th
	fresh.LastSeq = 1
	r, err := startRun(t, s, &fresh, uuid.Nil)
	if err != nil {
		t.Fatal(err)
	}
	var e *errcode.Error
	_, err = startRun(t, s, &fresh, uuid.Nil)
	if !errors.As(err, &e) || e.Code != errcode.RunInProgress || e.RunID != r.ID {
		t.Fatalf("second RunCreate: got %v (data %v), want run_in_progress naming %s", err, e, r.ID)
	}
	// Nothing of the refused runs was written.
	nodes, err := s.CheckpointsAfter(context.Background(), th.ID, 0)
	if err != nil || len(nodes) != 2 {
		t.Fatalf("checkpoints after refused runs: got %d (%v), want 2 (one chained, one user message)", len(nodes), err)
	}
}

// BenchmarkRunTurn is a turn's store calls alone, a 200-token reply with
// its compacted log: separate, the start commits alone (RunCreate) and then
// the end (RunFinish), two commits; merged, the end is written in the
// whole run is written at once (RunComplete), one commit.
func BenchmarkRunTurn(b *testing.B) {
	for _, merged := range []bool{false, true} {
		name := "separate"
		if merged {
			name = "merged"
		}
		b.Run(name, func(b *testing.B) {
			s, _ := setup(b)
			ctx := context.Background()
			th := newThread(b, s, "bench")
			parent := uuid.Nil
			var start, end time.Duration
			for b.Loop() {
				t0 := time.Now()
				in, fin := benchTurn(th, parent)
				var err error
				if !merged {
					if _, err = s.RunCreate(ctx, in, fin.Records[0]); err != nil {
						b.Fatal(err)
					}
				}
				t1 := time.Now()
				if merged {
					err = s.RunComplete(ctx, in, fin)
				} else {
					err = s.RunFinish(ctx, fin)
				}
				if err != nil {
					b.Fatal(err)
				}
				start += t1.Sub(t0)
				end += time.Since(t1)
				th.LastSeq = fin.Assistant.Seq
				parent = fin.Assistant.ID
			}
			b.ReportMetric(float64(start.Microseconds())/1000/float64(b.N), "ms/start")
			b.ReportMetric(float64(end.Microseconds())/1000/float64(b.N), "ms/end")
		})
	}
}

// benchTurn is a 200-token turn under parent at the end of th, as the
// service writes it: its start and its end.
func benchTurn(th *thread.Thread, parent uuid.UUID) (thread.RunCreate, thread.RunFinish) {
	now := time.Now().UTC().Truncate(time.Microsecond)
	user := &checkpoint.Node{ID: uuid.New(), ThreadID: th.ID, ParentID: parent, Role: checkpoint.RoleUser, Content: text(strings.Repeat("q", 64)),
		Seq: th.LastSeq + 1, CreatedAt: now}
	r := &thread.Run{ID: uuid.New(), ThreadID: th.ID, Status: thread.RunRunning, UserMessageID: user.ID, ParentID: user.ID,
		MessageID: uuid.New(), Model: "builtin", Owner: "test", LeaseUntil: now.Add(time.Minute), TreeSeq: user.Seq, CreatedAt: now}
	user.RunID = r.ID
	first := thread.Record{Seq: 1, Kind: thread.KindSnapshot, Status: thread.RunRunning, TreeSeq: r.TreeSeq}
	recs := append([]thread.Record{first}, tokens(2, 200)...)
	asst := checkpoint.Node{ID: r.MessageID, ThreadID: th.ID, ParentID: r.ParentID, Seq: r.TreeSeq + 1, Role: checkpoint.RoleAssistant,
		Content: text(strings.Repeat(" abcd", 200)), Status: &checkpoint.Status{Type: "complete", Reason: "stop"}, RunID: r.ID, CreatedAt: r.CreatedAt}
	recs = append(recs, thread.Record{Seq: 202, Kind: thread.KindSnapshot, Status: thread.RunSucceeded, TreeSeq: asst.Seq})
	return thread.RunCreate{Caller: th.Caller, Thread: th.ID, User: user, Run: *r},
		thread.RunFinish{Run: r, Status: thread.RunSucceeded, Assistant: asst, Records: recs, Model: "builtin"}
}

// BenchmarkFirstTurn is the first turn (RunComplete) on a new connection,
// with the connection set up cold (codec and prepared statements only) or
// warmed as the service does (afterConnect).
func BenchmarkFirstTurn(b *testing.B) {
	for _, warmed := range []bool{false, true} {
		b.Run(fmt.Sprintf("warmed=%v", warmed), func(b *testing.B) {
			s0, pool := setup(b)
			ctx := context.Background()
			th := newThread(b, s0, "bench")
			parent := uuid.Nil
			for b.Loop() {
				b.StopTimer()
				cfg := pool.Config().Copy()
				cfg.MaxConns = 1
				if !warmed {
					cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error { store.Ready(ctx, c); return nil }
				}
				p, err := pgxpool.NewWithConfig(ctx, cfg)
				if err == nil {
					err = p.Ping(ctx)
				}
				if err != nil {
					b.Fatal(err)
				}
				in, fin := benchTurn(th, parent)
				b.StartTimer()
				err = store.New(p).RunComplete(ctx, in, fin)
				b.StopTimer()
				p.Close()
				if err != nil {
					b.Fatal(err)
				}
				th.LastSeq = fin.Assistant.Seq
				parent = fin.Assistant.ID
				b.StartTimer()
			}
		})
	}
}

// TestRunWriteGuards: RunCreate and RunComplete check, under the thread's
// lock, what a run's writes need (threadline_run_start; for RunComplete its
// own inserts, with the same errors): a reused message id and a parent
// outside the thread, also for a regenerate, are refused and nothing is
// written; RunComplete writes a run in its final state.
func TestRunWriteGuards(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	ctx := context.Background()
	th := newThread(t, s, "alice")
	nodes := chain(t, s, th.ID, uuid.Nil, 2)
	th.LastSeq = 2
	now := time.Now().UTC().Truncate(time.Microsecond)
	in := func(msgID, parent uuid.UUID) thread.RunCreate {
		user := &checkpoint.Node{ID: msgID, ThreadID: th.ID, ParentID: parent, Role: checkpoint.RoleUser, Content: text("hi"), Seq: 3, CreatedAt: now}
		r := thread.Run{ID: uuid.New(), ThreadID: th.ID, Status: thread.RunRunning, UserMessageID: user.ID, ParentID: user.ID,
			MessageID: uuid.New(), Model: "builtin", Owner: "test", LeaseUntil: now.Add(time.Minute), TreeSeq: 3, CreatedAt: now}
		return thread.RunCreate{Caller: th.Caller, Thread: th.ID, User: user, Run: r}
	}
	for _, c := range []struct {
		name string
		in   thread.RunCreate
		want errcode.Code
	}{
		{"reused message id", in(nodes[0].ID, nodes[1].ID), errcode.Conflict},
		{"parent elsewhere", in(uuid.New(), uuid.New()), errcode.InvalidFork},
	} {
		if _, err := s.RunCreate(ctx, c.in, thread.Record{Seq: 1, Kind: thread.KindSnapshot, Status: thread.RunRunning, TreeSeq: 3}); errcode.Of(err) != c.want {
			t.Errorf("%s: RunCreate: got %v, want %s", c.name, err, c.want)
		}
		fin := thread.RunFinish{Run: &c.in.Run, Status: thread.RunSucceeded, Model: "builtin",
			Assistant: checkpoint.Node{ID: c.in.Run.MessageID, ThreadID: th.ID, ParentID: c.in.Run.ParentID, Seq: 4, Role: checkpoint.RoleAssistant, Content: text(""), CreatedAt: now},
			Records:   []thread.Record{{Seq: 1, Kind: thread.KindSnapshot, Status: thread.RunSucceeded, TreeSeq: 4}}}
		if err := s.RunComplete(ctx, c.in, fin); errcode.Of(err) != c.want {
			t.Errorf("%s: RunComplete: got %v, want %s", c.name, err, c.want)
		}
	}
	// A regenerate (no user message) under a parent outside the thread:
	// RunComplete's reply insert refuses it as the guard would.
	regen := in(uuid.New(), uuid.New())
	regen.User, regen.Run.UserMessageID, regen.Run.TreeSeq = nil, uuid.Nil, 2
	regenFin := thread.RunFinish{Run: &regen.Run, Status: thread.RunSucceeded, Model: "builtin",
		Assistant: checkpoint.Node{ID: regen.Run.MessageID, ThreadID: th.ID, ParentID: regen.Run.ParentID, Seq: 3, Role: checkpoint.RoleAssistant, Content: text(""), CreatedAt: now},
		Records:   []thread.Record{{Seq: 1, Kind: thread.KindSnapshot, Status: thread.RunSucceeded, TreeSeq: 3}}}
	if err := s.RunComplete(ctx, regen, regenFin); errcode.Of(err) != errcode.InvalidFork {
		t.Errorf("regenerate under a parent elsewhere: RunComplete: got %v, want %s", err, errcode.InvalidFork)
	}
	if got, err := s.ThreadGet(ctx, th.Caller, th.ID); err != nil || got.LastSeq != 2 {
		t.Fatalf("thread after the refused writes: got %+v (%v), want last_seq 2 (nothing written)", got, err)
	}
	ok := in(uuid.New(), nodes[1].ID)
	r := ok.Run
	recs := []thread.Record{{Seq: 1, Kind: thread.KindSnapshot, Status: thread.RunRunning, TreeSeq: 3},
		{Seq: 2, Kind: thread.KindToken, Text: "yes"}, {Seq: 3, Kind: thread.KindSnapshot, Status: thread.RunSucceeded, TreeSeq: 4}}
	asst := checkpoint.Node{ID: r.MessageID, ThreadID: th.ID, ParentID: r.ParentID, Seq: 4, Role: checkpoint.RoleAssistant,
		Content: text("yes"), Status: &checkpoint.Status{Type: "complete", Reason: "stop"}, RunID: r.ID, CreatedAt: now}
	if err := s.RunComplete(ctx, ok, thread.RunFinish{Run: &r, Status: thread.RunSucceeded, Assistant: asst, Records: recs, Model: "builtin", Title: "hi"}); err != nil {
		t.Fatal(err)
	}
	got, err := s.RunGet(ctx, th.ID, r.ID)
	if err != nil || got.Status != thread.RunSucceeded || got.LastSequence != 3 || got.FinishedAt == nil || got.Owner != "" {
		t.Fatalf("run after RunComplete: got %+v (%v), want succeeded, ended, sequence 3, no owner", got, err)
	}
	gotTh, err := s.ThreadGet(ctx, th.Caller, th.ID)
	if err != nil || gotTh.LastSeq != 4 || gotTh.HeadID != r.MessageID || gotTh.Title == nil || *gotTh.Title != "hi" {
		t.Fatalf("thread after RunComplete: got %+v (%v), want last_seq 4, head at the reply, title hi", gotTh, err)
	}
	log, err := s.RunEventsAfter(ctx, r.ID, 0)
	if err != nil || fmt.Sprint(log) != fmt.Sprint(recs) {
		t.Fatalf("log after RunComplete: got %v (%v), want %v", log, err, recs)
	}
}

// TestRunCreatesThread: a run's write creates the thread it names
// (RunCreate.Create), leaves an existing thread of the same caller as it
// is, and refuses another caller's with not_found, writing nothing.
func TestRunCreatesThread(t *testing.T) {
	t.Parallel()
	s, pool := setup(t)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Microsecond)
	fresh := &thread.Thread{ID: uuid.New(), Caller: "alice", CreatedAt: now, UpdatedAt: now}
	in, fin := benchTurn(fresh, uuid.Nil)
	in.Create = fresh
	if err := s.RunComplete(ctx, in, fin); err != nil {
		t.Fatalf("RunComplete creating the thread: %v", err)
	}
	th, err := s.ThreadGet(ctx, "alice", fresh.ID)
	if err != nil || th.LastSeq != 2 || !th.CreatedAt.Equal(now) {
		t.Fatalf("created thread: got %+v (%v), want alice's with 2 messages, created at %v", th, err, now)
	}
	// The same caller's existing thread (a concurrent creator won): kept.
	in, fin = benchTurn(th, fin.Assistant.ID)
	in.Create = &thread.Thread{ID: th.ID, Caller: "alice", CreatedAt: now.Add(time.Hour), UpdatedAt: now.Add(time.Hour)}
	if _, err := s.RunCreate(ctx, in, fin.Records[0]); err != nil {
		t.Fatalf("RunCreate on an existing thread with Create set: %v", err)
	}
	if th2, err := s.ThreadGet(ctx, "alice", th.ID); err != nil || !th2.CreatedAt.Equal(now) || th2.LastSeq != 3 {
		t.Fatalf("existing thread: got %+v (%v), want created at %v with 3 messages", th2, err, now)
	}
	// Another caller's id.
	mallory := &thread.Thread{ID: th.ID, Caller: "mallory", LastSeq: 0, CreatedAt: now, UpdatedAt: now}
	in, fin = benchTurn(mallory, uuid.Nil)
	in.Create = mallory
	if err := s.RunComplete(ctx, in, fin); errcode.Of(err) != errcode.NotFound {
		t.Fatalf("RunComplete on another caller's id: got %v, want not_found", err)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM checkpoints WHERE thread_id = $1`, th.ID).Scan(&n); err != nil || n != 3 {
		t.Fatalf("alice's thread after mallory's refused run: %d messages (%v), want 3", n, err)
	}
}

// BenchmarkCommitAfterIdle measures this machine rather than the store: a
// one-row insert and commit after the connection sat idle for a while (the
// idle time is not counted). On a virtual machine, waking an idle CPU and
// flushing the WAL after a pause both cost more than back to back, and a
// chat's turns come seconds apart.
func BenchmarkCommitAfterIdle(b *testing.B) {
	if f := flag.Lookup("test.bench"); f == nil || !strings.Contains(f.Value.String(), "Idle") {
		b.Skip("it sleeps for minutes at the default -benchtime: select it by name, with -benchtime 40x")
	}
	_, pool := setup(b)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `CREATE TABLE idle_probe (x int)`); err != nil {
		b.Fatal(err)
	}
	for _, idle := range []time.Duration{0, time.Millisecond, 20 * time.Millisecond, 200 * time.Millisecond} {
		b.Run(fmt.Sprintf("idle=%v", idle), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				time.Sleep(idle)
				b.StartTimer()
				if _, err := pool.Exec(ctx, `INSERT INTO idle_probe VALUES (1)`); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestRunCreateAll: several starts in one write; one refusal writes none.
func TestRunCreateAll(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	ctx := context.Background()
	var ins []thread.RunCreate
	var firsts []thread.Record
	for range 3 {
		th := newThread(t, s, "alice")
		in, fin := benchTurn(th, uuid.Nil)
		ins, firsts = append(ins, in), append(firsts, fin.Records[0])
	}
	bad := ins[1]
	bad.Run.TreeSeq, bad.User = 7, &checkpoint.Node{ID: uuid.New(), ThreadID: bad.Thread, Role: checkpoint.RoleUser, Content: text("x"), Seq: 7}
	bad.Run.ID, bad.Run.UserMessageID, bad.Run.ParentID = uuid.New(), bad.User.ID, bad.User.ID
	err := s.RunCreateAll(ctx, []thread.RunCreate{ins[0], bad, ins[2]}, firsts)
	if errcode.Of(err) != errcode.Conflict {
		t.Fatalf("RunCreateAll with a stale start: got %v, want conflict", err)
	}
	for _, in := range []thread.RunCreate{ins[0], ins[2]} {
		if _, err := s.RunGet(ctx, in.Thread, in.Run.ID); errcode.Of(err) != errcode.NotFound {
			t.Fatalf("run of a refused batch: got %v, want not_found", err)
		}
	}
	if err := s.RunCreateAll(ctx, ins, firsts); err != nil {
		t.Fatalf("RunCreateAll: %v", err)
	}
	for _, in := range ins {
		if r, err := s.RunGet(ctx, in.Thread, in.Run.ID); err != nil || r.Status != thread.RunRunning || r.LastSequence != 1 {
			t.Fatalf("started run: %+v (%v), want running at sequence 1", r, err)
		}
	}
}

// TestRunCreateAllRefusals: each check of threadline_run_start refuses a
// batch of starts as a whole (nothing of it is written), and the start alone
// then gets its own answer, as the starts batcher retries it.
func TestRunCreateAllRefusals(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	ctx := context.Background()
	start := func() (thread.RunCreate, thread.Record) {
		in, fin := benchTurn(newThread(t, s, "alice"), uuid.Nil)
		return in, fin.Records[0]
	}
	tests := []struct {
		name string
		bad  func() thread.RunCreate
		want errcode.Code // the code the start gets alone
	}{
		{"another caller's thread", func() thread.RunCreate {
			in, _ := start()
			in.Caller = "mallory"
			return in
		}, errcode.NotFound},
		{"unknown thread", func() thread.RunCreate {
			in, _ := start()
			in.Thread, in.Run.ThreadID, in.User.ThreadID = uuid.New(), in.Thread, in.Thread
			return in
		}, errcode.NotFound},
		{"a run in progress", func() thread.RunCreate {
			in, first := start()
			if _, err := s.RunCreate(ctx, in, first); err != nil {
				t.Fatal(err)
			}
			again := in
			again.Run.ID, again.Run.MessageID = uuid.New(), uuid.New()
			again.User = &checkpoint.Node{ID: uuid.New(), ThreadID: in.Thread, Role: checkpoint.RoleUser, Content: text("again"), Seq: 1}
			again.Run.UserMessageID, again.Run.ParentID = again.User.ID, again.User.ID
			return again
		}, errcode.RunInProgress},
		{"a stale end", func() thread.RunCreate {
			in, _ := start()
			in.Run.TreeSeq, in.User.Seq = 7, 7
			return in
		}, errcode.Conflict},
		{"a message id the thread has", func() thread.RunCreate {
			in, _ := start()
			old := &checkpoint.Node{ID: uuid.New(), Role: checkpoint.RoleUser, Content: text("old")}
			if err := s.CheckpointAppend(ctx, in.Thread, old); err != nil {
				t.Fatal(err)
			}
			in.User.ID, in.Run.UserMessageID, in.Run.ParentID = old.ID, old.ID, old.ID
			in.Run.TreeSeq, in.User.Seq = 2, 2
			return in
		}, errcode.Conflict},
		{"a parent outside the thread", func() thread.RunCreate {
			in, _ := start()
			in.User.ParentID = uuid.New()
			return in
		}, errcode.InvalidFork},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in0, f0 := start()
			in2, f2 := start()
			bad := tc.bad()
			f1 := thread.Record{Seq: 1, Kind: thread.KindSnapshot, Status: thread.RunRunning, TreeSeq: bad.Run.TreeSeq}
			if err := s.RunCreateAll(ctx, []thread.RunCreate{in0, bad, in2}, []thread.Record{f0, f1, f2}); err == nil {
				t.Fatalf("RunCreateAll with %s: got nil, want an error", tc.name)
			}
			for _, in := range []thread.RunCreate{in0, bad, in2} {
				if _, err := s.RunGet(ctx, in.Thread, in.Run.ID); errcode.Of(err) != errcode.NotFound {
					t.Errorf("run of the refused batch: got %v, want not_found", err)
				}
			}
			if _, err := s.RunCreate(ctx, bad, f1); errcode.Of(err) != tc.want {
				t.Errorf("the start alone: got %v, want %s", err, tc.want)
			}
			if err := s.RunCreateAll(ctx, []thread.RunCreate{in0, in2}, []thread.Record{f0, f2}); err != nil {
				t.Errorf("the others without it: %v, want nil", err)
			}
		})
	}
	t.Run("two starts on one thread", func(t *testing.T) {
		in, first := start()
		other := in
		other.Run.ID, other.Run.MessageID = uuid.New(), uuid.New()
		other.User = &checkpoint.Node{ID: uuid.New(), ThreadID: in.Thread, Role: checkpoint.RoleUser, Content: text("other"), Seq: 1}
		other.Run.UserMessageID, other.Run.ParentID = other.User.ID, other.User.ID
		if err := s.RunCreateAll(ctx, []thread.RunCreate{in, other}, []thread.Record{first, first}); err == nil {
			t.Fatal("RunCreateAll with two starts on one thread: got nil, want an error")
		}
	})
}

var (
	uuidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	timeRE = regexp.MustCompile(`\d{4}-\d\d-\d\dT[0-9:.]+Z`)
)

// TestRunCreateAllWritesAsRunCreate: a batch writes each start exactly as
// RunCreate writes it alone: the thread it creates, the user message, the
// run, the thread's end and head, and the first log record.
func TestRunCreateAllWritesAsRunCreate(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	ctx := context.Background()
	title, temp := "named", 0.5
	// Three shapes: a second turn under an existing reply, a run that
	// creates its thread, and a regenerate (no user message).
	shapes := func() ([]thread.RunCreate, []thread.Record) {
		th := newThread(t, s, "alice")
		in1, fin1 := benchTurn(th, uuid.Nil)
		if err := s.RunComplete(ctx, in1, fin1); err != nil {
			t.Fatal(err)
		}
		th.LastSeq = 2
		second, f2 := benchTurn(th, fin1.Assistant.ID)
		second.User.Attachments = []checkpoint.Attachment{{ID: "att", Type: "file", Name: "a.txt", ContentType: "text/plain", Size: 1}}
		now := time.Now().UTC().Truncate(time.Microsecond)
		nt := &thread.Thread{ID: uuid.New(), Caller: "alice", Title: &title, Metadata: json.RawMessage(`{"k": 1}`), CreatedAt: now, UpdatedAt: now}
		fresh, f3 := benchTurn(nt, uuid.Nil)
		fresh.Create = nt
		th3 := newThread(t, s, "alice")
		in3, fin3 := benchTurn(th3, uuid.Nil)
		if err := s.RunComplete(ctx, in3, fin3); err != nil {
			t.Fatal(err)
		}
		regen := thread.RunCreate{Caller: "alice", Thread: th3.ID, Run: thread.Run{ID: uuid.New(), ThreadID: th3.ID, Status: thread.RunRunning,
			ParentID: in3.User.ID, MessageID: uuid.New(), Model: "m", Config: thread.RunConfig{Temperature: &temp}, Owner: "p",
			LeaseUntil: now.Add(time.Minute), TreeSeq: 2, CreatedAt: now}}
		f4 := thread.Record{Seq: 1, Kind: thread.KindSnapshot, Status: thread.RunRunning, TreeSeq: 2}
		return []thread.RunCreate{second, fresh, regen}, []thread.Record{f2.Records[0], f3.Records[0], f4}
	}
	alone, aloneFirsts := shapes()
	for i, in := range alone {
		if _, err := s.RunCreate(ctx, in, aloneFirsts[i]); err != nil {
			t.Fatalf("RunCreate %d: %v", i, err)
		}
	}
	batch, batchFirsts := shapes()
	if err := s.RunCreateAll(ctx, batch, batchFirsts); err != nil {
		t.Fatalf("RunCreateAll: %v", err)
	}
	// What a start wrote, with its ids replaced by their place in the start.
	written := func(in thread.RunCreate) string {
		th, nodes, active, err := s.ThreadRead(ctx, "alice", in.Thread, 0)
		if err != nil {
			t.Fatal(err)
		}
		evs, err := s.RunEventsAfter(ctx, in.Run.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := json.Marshal([]any{th.Title, th.Metadata, th.LastSeq, th.HeadID, nodes, active, evs})
		// Ids and times differ between the two copies; their places do not.
		names := map[string]string{}
		str := uuidRE.ReplaceAllStringFunc(string(out), func(id string) string {
			if _, ok := names[id]; !ok {
				names[id] = fmt.Sprintf("id%d", len(names))
			}
			return names[id]
		})
		return timeRE.ReplaceAllString(str, "TIME")
	}
	for i := range alone {
		got, want := written(batch[i]), written(alone[i])
		if got != want {
			t.Errorf("start %d written by RunCreateAll:\n%s\nwant, as RunCreate writes it:\n%s", i, got, want)
		}
		in := batch[i]
		r, err := s.RunGet(ctx, in.Thread, in.Run.ID)
		if err != nil || !r.CreatedAt.Equal(in.Run.CreatedAt) || !r.LeaseUntil.Equal(in.Run.LeaseUntil) {
			t.Errorf("start %d: run %+v (%v), want created at %v, leased until %v", i, r, err, in.Run.CreatedAt, in.Run.LeaseUntil)
		}
	}
}

// TestRunFinishAll: several ends in one write; one refusal (a run that
// already ended) writes none of them.
func TestRunFinishAll(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	ctx := context.Background()
	var fins []thread.RunFinish
	for range 3 {
		th := newThread(t, s, "alice")
		in, fin := benchTurn(th, uuid.Nil)
		if _, err := s.RunCreate(ctx, in, fin.Records[0]); err != nil {
			t.Fatal(err)
		}
		fins = append(fins, fin)
	}
	if err := s.RunFinish(ctx, fins[1]); err != nil {
		t.Fatal(err)
	}
	if err := s.RunFinishAll(ctx, fins); !errors.As(err, new(*thread.ClaimLostError)) {
		t.Fatalf("RunFinishAll with an ended run: got %v, want its claim lost", err)
	}
	for _, i := range []int{0, 2} {
		if r, err := s.RunGet(ctx, fins[i].Run.ThreadID, fins[i].Run.ID); err != nil || r.Status != thread.RunRunning {
			t.Fatalf("run %d of a refused batch: %+v (%v), want still running", i, r, err)
		}
	}
	if err := s.RunFinishAll(ctx, []thread.RunFinish{fins[0], fins[2]}); err != nil {
		t.Fatalf("RunFinishAll: %v", err)
	}
	for _, fin := range fins {
		r, err := s.RunGet(ctx, fin.Run.ThreadID, fin.Run.ID)
		if err != nil || r.Status != thread.RunSucceeded || r.LastSequence != int64(len(fin.Records)) {
			t.Fatalf("ended run: %+v (%v), want succeeded at sequence %d", r, err, len(fin.Records))
		}
		log, err := s.RunEventsAfter(ctx, fin.Run.ID, 0)
		if err != nil || fmt.Sprint(log) != fmt.Sprint(fin.Records) {
			t.Fatalf("log after RunFinishAll: got %d records (%v), want the %d written", len(log), err, len(fin.Records))
		}
	}
}

// TestRunLeaseRenewSkipsLocked: a renewal extends the owner's running runs
// and returns those flagged for cancel, and it passes over a run whose row
// another transaction holds instead of waiting for it.
func TestRunLeaseRenewSkipsLocked(t *testing.T) {
	t.Parallel()
	s, pool := setup(t)
	ctx := context.Background()
	var runs []*thread.Run
	for range 2 {
		th := newThread(t, s, "alice")
		in, fin := benchTurn(th, uuid.Nil)
		r, err := s.RunCreate(ctx, in, fin.Records[0])
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	if err := s.RunRequestCancel(ctx, runs[0].ID); err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM runs WHERE id = $1 FOR UPDATE`, runs[1].ID); err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	claims := []thread.RunClaim{{RunID: runs[0].ID}, {RunID: runs[1].ID}}
	cancels, lost, err := s.RunLeaseRenew(rctx, claims, until)
	if err != nil || len(cancels) != 1 || cancels[0] != runs[0].ID || len(lost) != 0 {
		t.Fatalf("renew with a locked run: cancels %v lost %v (%v), want [%s] and none lost, without waiting", cancels, lost, err, runs[0].ID)
	}
	for i, want := range []bool{true, false} {
		r, err := s.RunGet(ctx, runs[i].ThreadID, runs[i].ID)
		if err != nil || r.LeaseUntil.Equal(until) != want {
			t.Fatalf("run %d: lease until %v (%v); renewed: got %v, want %v", i, r.LeaseUntil, err, !want, want)
		}
	}
}

// TestRunningRunLookupUsesThread: "the running run of this thread" (the
// guard of threadline_run_begin, RunActive) is found through the thread,
// even with the generic plan a session caches while the table is empty,
// never by walking every running run.
func TestRunningRunLookupUsesThread(t *testing.T) {
	t.Parallel()
	conn := acquire(t)
	ctx := context.Background()
	for _, q := range []string{`SET plan_cache_mode = force_generic_plan`,
		`PREPARE running_of(uuid) AS SELECT id, message_id FROM runs WHERE thread_id = $1 AND status = 'running'`} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	defer conn.Exec(ctx, `DEALLOCATE running_of; RESET plan_cache_mode`)
	var plan string
	if err := conn.QueryRow(ctx, `EXPLAIN (FORMAT JSON) EXECUTE running_of('00000000-0000-0000-0000-000000000001')`).Scan(&plan); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(plan, `"Index Cond": "(thread_id = $1)"`) || strings.Contains(plan, "runs_lease") {
		t.Fatalf("generic plan of the running-run lookup: got %s, want an index scan on thread_id", plan)
	}
}

// BenchmarkRunFinishAll ends 8 running runs (200-token replies each): one
// at a time (RunFinish: 8 transactions, 8 commits) or together
// (RunFinishAll: one transaction, one commit), as the service's ends
// batcher does when ends arrive while one is being written.
// BenchmarkRunCreateAll: the starts of 64 runs on new threads (each
// creating its thread, as a burst of new conversations does) in one write.
func BenchmarkRunCreateAll(b *testing.B) {
	const n = 64
	s, _ := setup(b)
	ctx := context.Background()
	for b.Loop() {
		b.StopTimer()
		ins, firsts := make([]thread.RunCreate, n), make([]thread.Record, n)
		for i := range n {
			now := time.Now().UTC().Truncate(time.Microsecond)
			th := &thread.Thread{ID: uuid.New(), Caller: "bench", CreatedAt: now, UpdatedAt: now}
			in, fin := benchTurn(th, uuid.Nil)
			in.Create = th
			ins[i], firsts[i] = in, fin.Records[0]
		}
		b.StartTimer()
		if err := s.RunCreateAll(ctx, ins, firsts); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRunFinishAll(b *testing.B) {
	const n = 8
	for _, together := range []bool{false, true} {
		b.Run(fmt.Sprintf("together=%v", together), func(b *testing.B) {
			s, _ := setup(b)
			ctx := context.Background()
			for b.Loop() {
				b.StopTimer()
				ins, firsts, fins := make([]thread.RunCreate, n), make([]thread.Record, n), make([]thread.RunFinish, n)
				for i := range n {
					ins[i], fins[i] = benchTurn(newThread(b, s, "bench"), uuid.Nil)
					firsts[i] = fins[i].Records[0]
				}
				if err := s.RunCreateAll(ctx, ins, firsts); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if together {
					if err := s.RunFinishAll(ctx, fins); err != nil {
						b.Fatal(err)
					}
					continue
				}
				for _, fin := range fins {
					if err := s.RunFinish(ctx, fin); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// TestThreadRead: one round trip returns the caller's thread, its
// checkpoints after a sequence and its running run; nil when none runs;
// not_found, and nothing else, for another caller.
func TestThreadRead(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	ctx := context.Background()
	th := newThread(t, s, "alice")
	nodes := chain(t, s, th.ID, uuid.Nil, 4)
	got, cps, run, err := s.ThreadRead(ctx, "alice", th.ID, 1)
	if err != nil || got.ID != th.ID || got.LastSeq != 4 || len(cps) != 3 || cps[0].ID != nodes[1].ID || run != nil {
		t.Fatalf("ThreadRead after 1: thread %+v, %d checkpoints, run %v (%v); want the thread at 4, checkpoints 2..4, no run", got, len(cps), run, err)
	}
	in, fin := benchTurn(got, nodes[3].ID)
	if _, err := s.RunCreate(ctx, in, fin.Records[0]); err != nil {
		t.Fatal(err)
	}
	got, cps, run, err = s.ThreadRead(ctx, "alice", th.ID, 4)
	if err != nil || got.LastSeq != 5 || len(cps) != 1 || cps[0].ID != in.User.ID || run == nil || run.ID != in.Run.ID || run.Status != thread.RunRunning {
		t.Fatalf("ThreadRead with a run: thread %+v, checkpoints %v, run %+v (%v); want the user message and the running run", got, cps, run, err)
	}
	if got, cps, run, err := s.ThreadRead(ctx, "mallory", th.ID, 0); errcode.Of(err) != errcode.NotFound || got != nil || cps != nil || run != nil {
		t.Fatalf("ThreadRead by another caller: %v, %v, %v (%v); want not_found and nothing", got, cps, run, err)
	}
}

// TestRunGetReturnsJSONErrors: a run row whose config, usage or error
// column is not the JSON its type reads is an error from every run read,
// not a run with the field silently left empty.
func TestRunGetReturnsJSONErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ column, value string }{
		{"config", `[1]`},
		{"usage", `"many"`},
		{"error", `{"code": 7}`},
	}
	for _, tt := range tests {
		t.Run(tt.column, func(t *testing.T) {
			t.Parallel()
			s, pool := setup(t)
			ctx := context.Background()
			th, r := startThreadRun(t, s)
			if _, err := s.RunGet(ctx, th.ID, r.ID); err != nil {
				t.Fatalf("RunGet before: %v", err)
			}
			if _, err := pool.Exec(ctx, `UPDATE runs SET `+tt.column+` = $2::jsonb WHERE id = $1`, r.ID, tt.value); err != nil {
				t.Fatal(err)
			}
			if got, err := s.RunGet(ctx, th.ID, r.ID); err == nil || !strings.Contains(err.Error(), tt.column) {
				t.Errorf("RunGet with %s %s: got %+v, %v; want an error naming the column", tt.column, tt.value, got, err)
			}
			if got, err := s.RunActive(ctx, th.ID); err == nil {
				t.Errorf("RunActive with %s %s: got %+v, want an error", tt.column, tt.value, got)
			}
		})
	}
}

// TestRunEventsAfterFollowsOn: a reader that reads a running run's log
// after every commit, each time after the last sequence it has (as a
// replica's reader of another replica's run does), gets every record once
// and in order, across commits shared with another run, a catch-up from
// further back in between, a spill of the run's rows and the run's end;
// and every read equals a read of the whole log by a store that has never
// read the run.
func TestRunEventsAfterFollowsOn(t *testing.T) {
	t.Parallel()
	s, pool := setup(t)
	fresh := func() *store.Store { return store.New(pool) }
	ctx := context.Background()
	_, r := startThreadRun(t, s)
	o, err := startRun(t, s, newThread(t, s, "bob"), uuid.Nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []thread.Record{{Seq: 1, Kind: thread.KindSnapshot, Status: thread.RunRunning, TreeSeq: r.TreeSeq}}
	var got []thread.Record
	var last int64
	read := func(when string) {
		t.Helper()
		recs, err := s.RunEventsAfter(ctx, r.ID, last)
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		got = append(got, recs...)
		if len(recs) > 0 {
			last = recs[len(recs)-1].Seq
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: read on got %v, want %v", when, got, want)
		}
		whole, err := fresh().RunEventsAfter(ctx, r.ID, 0)
		if err != nil || fmt.Sprint(whole) != fmt.Sprint(want) {
			t.Fatalf("%s: a whole read got %v (%v), want %v", when, whole, err, want)
		}
	}
	otherSeq := int64(2)
	commit := func(n int, shared bool) {
		t.Helper()
		recs := tokens(int64(len(want)+1), n)
		want = append(want, recs...)
		segs := []thread.Segment{{RunID: r.ID, Records: recs}}
		if shared {
			segs = append(segs, thread.Segment{RunID: o.ID, Records: tokens(otherSeq, 1)})
			otherSeq++
		}
		if err := s.RunEventsAppend(ctx, segs); err != nil {
			t.Fatal(err)
		}
	}
	read("before any commit")
	for i := range 6 {
		commit(1+i%3, i%2 == 0)
		read(fmt.Sprintf("after commit %d", i))
		if err := s.RunEventsAppend(ctx, []thread.Segment{{RunID: o.ID, Records: tokens(otherSeq, 1)}}); err != nil {
			t.Fatal(err)
		}
		otherSeq++
		read(fmt.Sprintf("after the other run's commit %d", i))
	}
	// A catch-up from further back, then reading on.
	if back, err := s.RunEventsAfter(ctx, r.ID, 2); err != nil || fmt.Sprint(back) != fmt.Sprint(want[2:]) {
		t.Fatalf("catch-up after 2: got %v (%v), want %v", back, err, want[2:])
	}
	commit(2, true)
	read("after a catch-up and a commit")
	store.SetSpillAfter(s, 0)
	if _, err := s.RunLogPurge(ctx); err != nil {
		t.Fatal(err)
	}
	read("after a spill")
	commit(3, false)
	read("after a spill and a commit")
	if _, err := s.RunLogPurge(ctx); err != nil {
		t.Fatal(err)
	}
	commit(1, true)
	read("after two spills and a commit")
}
