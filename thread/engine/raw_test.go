package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/store"
	"github.com/threadline/threadline/store/pgtest"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/engine"
)

// gate holds every append of the real store until open is closed, and
// tells of each call and its answer.
type gate struct {
	sink    thread.RawStore
	open    chan struct{}
	entered chan struct{}
	answers chan error
}

func newGate(sink thread.RawStore) *gate {
	return &gate{sink: sink, open: make(chan struct{}), entered: make(chan struct{}, 1000), answers: make(chan error, 1000)}
}

// RunRawAppendAll implements thread.RawStore; the answer it tells of is
// the first append's (the tests write one run at a time).
func (g *gate) RunRawAppendAll(ctx context.Context, apps []thread.RawAppend) ([]error, error) {
	g.entered <- struct{}{}
	select {
	case <-g.open:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	errs, err := g.sink.RunRawAppendAll(ctx, apps)
	if err == nil {
		g.answers <- errs[0]
	} else {
		g.answers <- err
	}
	return errs, err
}

func wait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s never happened", what)
	}
}

// newThread creates a thread of the caller local in st.
func newThread(t *testing.T, st *store.Store) *thread.Thread {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Microsecond)
	th, _, err := st.ThreadCreate(context.Background(), &thread.Thread{ID: uuid.New(), Caller: "local", CreatedAt: now, UpdatedAt: now})
	if err != nil {
		t.Fatalf("ThreadCreate: %v", err)
	}
	return th
}

// newRun starts a run on a new thread of the caller local and returns
// both ids.
func newRun(t *testing.T, st *store.Store) (threadID, runID uuid.UUID) {
	t.Helper()
	th := newThread(t, st)
	runID = uuid.New()
	startRunAs(t, st, th, runID)
	return th.ID, runID
}

func rawSummary(recs []thread.RawRecord) string {
	var out []string
	for _, r := range recs {
		out = append(out, fmt.Sprintf("%d %s/%s %s", r.Sequence, r.Source, r.Kind, r.Data))
	}
	return strings.Join(out, "\n")
}

// TestRawWriterAppend: records appended as the engine does (provider
// lines, a tool call) are in the store once the writer stops, in order,
// as provider/chunk and tool/call records with their sequences.
func TestRawWriterAppend(t *testing.T) {
	t.Parallel()
	st := store.New(pgtest.Pool(t))
	tid, rid := newRun(t, st)
	w := engine.NewRawWriter(st, nil)
	w.Start()
	var sink thread.RawSink = w
	sink.Append(rid, 2, "provider", json.RawMessage(`"data: {\"delta\":\"hi\"}"`))
	sink.Append(rid, 3, "provider", json.RawMessage(`"data: [DONE]"`))
	sink.Append(rid, 4, "tool", json.RawMessage(`{"tool_call_id":"c1","tool_name":"clock","input":"{}","output":{"unix":1},"is_error":false}`))
	w.Stop()
	sink.Append(rid, 5, "provider", json.RawMessage(`"after Stop"`)) // dropped

	got, err := st.RunRawList(context.Background(), "local", tid, rid, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := `2 provider/chunk "data: {\"delta\":\"hi\"}"` + "\n" +
		`3 provider/chunk "data: [DONE]"` + "\n" +
		`4 tool/call {"tool_call_id":"c1","tool_name":"clock","input":"{}","output":{"unix":1},"is_error":false}`
	if rawSummary(got) != want {
		t.Errorf("records:\ngot  %s\nwant %s", rawSummary(got), want)
	}
	for _, r := range got {
		if r.At.IsZero() {
			t.Errorf("record %d: no time", r.N)
		}
	}
}

// TestRawWriterNeverBlocks: while the store holds a write, adding records
// returns at once; they are all written, in order, once it answers.
func TestRawWriterNeverBlocks(t *testing.T) {
	t.Parallel()
	st := store.New(pgtest.Pool(t))
	tid, rid := newRun(t, st)
	g := newGate(st)
	w := engine.NewRawWriter(g, nil)
	engine.TuneRawWriter(w, time.Millisecond, 64<<20, 20)
	w.Start()
	add := func(i int) { w.Append(rid, int64(i), "provider", json.RawMessage(fmt.Sprintf(`"line %d"`, i))) }
	add(0)
	wait(t, g.entered, "the first write")
	added := make(chan struct{})
	go func() {
		defer close(added)
		for i := 1; i <= 5000; i++ {
			add(i)
		}
	}()
	wait(t, added, "5000 adds while the store holds a write")
	close(g.open)
	w.Stop()
	got, err := st.RunRawList(context.Background(), "local", tid, rid, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for page := got; len(page) == 1000; {
		if page, err = st.RunRawList(context.Background(), "local", tid, rid, page[len(page)-1].N, 0); err != nil {
			t.Fatal(err)
		}
		got = append(got, page...)
	}
	if len(got) != 5001 {
		t.Fatalf("records: got %d, want 5001", len(got))
	}
	for i, r := range got {
		if want := fmt.Sprintf(`"line %d"`, i); r.Sequence != int64(i) || string(r.Data) != want {
			t.Fatalf("record %d: got %d %s, want %d %s", i, r.Sequence, r.Data, i, want)
		}
	}
}

// TestRawWriterBound: records that arrive while the queue is full are
// dropped, and a service/dropped record counts them.
func TestRawWriterBound(t *testing.T) {
	t.Parallel()
	st := store.New(pgtest.Pool(t))
	tid, rid := newRun(t, st)
	g := newGate(st)
	w := engine.NewRawWriter(g, nil)
	engine.TuneRawWriter(w, time.Millisecond, 100, 20)
	w.Start()
	add := func(i int) { w.Append(rid, int64(i), "tool", json.RawMessage(`"12345678"`)) } // 10 bytes of data
	add(0)
	wait(t, g.entered, "the first write") // its 10 bytes stay queued until it is answered
	for i := 1; i <= 20; i++ {
		add(i)
	}
	close(g.open)
	w.Stop()
	got, err := st.RunRawList(context.Background(), "local", tid, rid, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 11 {
		t.Fatalf("records: got %d:\n%s\nwant 10 that fit in 100 bytes and a dropped record", len(got), rawSummary(got))
	}
	last := got[10]
	if last.Source != thread.RawService || last.Kind != thread.RawDropped || last.Sequence != 10 || !strings.HasPrefix(string(last.Data), `{"records":11,`) {
		t.Errorf("last record: got %d %s/%s %s, want sequence 10 service/dropped counting 11 records", last.Sequence, last.Source, last.Kind, last.Data)
	}
}

// startRunAs starts a run with the given id on the caller local's thread,
// as the service's start write does.
func startRunAs(t *testing.T, st *store.Store, th *thread.Thread, id uuid.UUID) {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Microsecond)
	user := &checkpoint.Node{ID: uuid.New(), ThreadID: th.ID, Role: checkpoint.RoleUser,
		Content: []checkpoint.Part{{Type: "text", Text: "hi"}}, Seq: th.LastSeq + 1, CreatedAt: now, RunID: id}
	r := thread.Run{ID: id, ThreadID: th.ID, Status: thread.RunRunning, UserMessageID: user.ID, ParentID: user.ID,
		MessageID: uuid.New(), Model: "recorder", Owner: "test", LeaseUntil: now.Add(time.Minute), TreeSeq: user.Seq, CreatedAt: now}
	if _, err := st.RunCreate(context.Background(), thread.RunCreate{Caller: "local", Thread: th.ID, User: user, Run: r},
		thread.Record{Seq: 1, Kind: thread.KindSnapshot, Status: thread.RunRunning, TreeSeq: r.TreeSeq}); err != nil {
		t.Fatalf("RunCreate: %v", err)
	}
}

// TestRawWriterWaitsForTheRun: records of a run whose start is not yet
// committed are written once it is; those of a run whose thread was
// deleted are dropped after the writer's tries.
func TestRawWriterWaitsForTheRun(t *testing.T) {
	t.Parallel()
	st := store.New(pgtest.Pool(t))
	ctx := context.Background()
	th := newThread(t, st)
	g := newGate(st)
	close(g.open)
	w := engine.NewRawWriter(g, nil)
	engine.TuneRawWriter(w, time.Millisecond, 1<<20, 1<<30)
	w.Start()
	rid := uuid.New()
	w.Append(rid, 1, "provider", json.RawMessage(`"early"`))
	for range 2 {
		wait(t, g.entered, "a write")
		if err := <-g.answers; errcode.Of(err) != errcode.NotFound {
			t.Fatalf("a write for a run not yet there: got %v, want not_found", err)
		}
	}
	startRunAs(t, st, th, rid)
	for {
		wait(t, g.entered, "a write")
		if err := <-g.answers; err == nil {
			break
		} else if errcode.Of(err) != errcode.NotFound {
			t.Fatalf("a write: got %v, want not_found or success", err)
		}
	}
	w.Stop()
	got, err := st.RunRawList(ctx, "local", th.ID, rid, 0, 0)
	if err != nil || rawSummary(got) != `1 provider/chunk "early"` {
		t.Fatalf("records: got %s %v, want the early record", rawSummary(got), err)
	}

	// The thread is deleted: a writer that tries 3 times tries 3 times,
	// then drops the records (the last flush at Stop does not try again).
	if err := st.ThreadDelete(ctx, "local", th.ID); err != nil {
		t.Fatal(err)
	}
	g2 := newGate(st)
	close(g2.open)
	w2 := engine.NewRawWriter(g2, nil)
	engine.TuneRawWriter(w2, time.Millisecond, 1<<20, 3)
	w2.Start()
	w2.Append(rid, 2, "provider", json.RawMessage(`"late"`))
	for range 3 {
		wait(t, g2.entered, "a write of the late record")
		if err := <-g2.answers; errcode.Of(err) != errcode.NotFound {
			t.Fatalf("a write for a deleted run: got %v, want not_found", err)
		}
	}
	w2.Stop()
	if n := len(g2.entered); n != 0 {
		t.Errorf("writes after the third not_found: got %d, want 0", n)
	}
}

// TestRawWriterManyRuns: the records of more runs than one write takes are
// all written at the next flush, each run's in its own log.
func TestRawWriterManyRuns(t *testing.T) {
	t.Parallel()
	st := store.New(pgtest.Pool(t))
	ctx := context.Background()
	const n = 300
	threads := make([]*thread.Thread, n)
	runs := make([]uuid.UUID, n)
	for i := range n {
		th := newThread(t, st)
		threads[i], runs[i] = th, uuid.New()
		startRunAs(t, st, th, runs[i])
	}
	g := newGate(st)
	close(g.open)
	w := engine.NewRawWriter(g, nil)
	engine.TuneRawWriter(w, time.Hour, 64<<20, 20) // only Stop flushes
	w.Start()
	for i, id := range runs {
		w.Append(id, 1, "tool", json.RawMessage(fmt.Sprintf(`{"run":%d}`, i)))
		w.Append(id, 2, "tool", json.RawMessage(fmt.Sprintf(`{"run":%d,"second":true}`, i)))
	}
	w.Stop()
	if calls := len(g.entered); calls != 2 {
		t.Errorf("writes: got %d, want 2 (%d runs, at most 256 a write)", calls, n)
	}
	for i, id := range runs {
		got, err := st.RunRawList(ctx, "local", threads[i].ID, id, 0, 0)
		want := fmt.Sprintf("1 tool/call {\"run\":%d}\n2 tool/call {\"run\":%d,\"second\":true}", i, i)
		if err != nil || rawSummary(got) != want {
			t.Fatalf("run %d: got %q %v, want %q", i, rawSummary(got), err, want)
		}
	}
}
