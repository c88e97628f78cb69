package runner

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/stream"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/engine/internal/runlog"
	"github.com/threadline/threadline/thread/engine/internal/trees"
	"github.com/threadline/threadline/thread/threadtest"
	"github.com/threadline/threadline/thread/threadtest/wait"
)

// words streams its words, one token each, and waits on gate (if set)
// before the first.
type words struct {
	w    []string
	gate chan struct{}
}

func (m words) Stream(ctx context.Context, _ thread.ModelRequest, on func(thread.Delta) error) (thread.ModelResult, error) {
	if m.gate != nil {
		select {
		case <-m.gate:
		case <-ctx.Done():
			return thread.ModelResult{}, ctx.Err()
		}
	}
	for _, w := range m.w {
		if err := on(thread.Delta{Kind: thread.DeltaText, Text: w}); err != nil {
			return thread.ModelResult{}, err
		}
	}
	return thread.ModelResult{StopReason: "stop"}, nil
}

type fixture struct {
	st     *threadtest.Store
	hub    *stream.Hub[thread.Event]
	active *Registry
	r      *Runner
}

func setup(t *testing.T, linger time.Duration) *fixture {
	t.Helper()
	st, hub := threadtest.New(), stream.New[thread.Event](64)
	x := &fixture{st: st, hub: hub, active: NewRegistry()}
	x.r = New(st, hub, nil, trees.New(st, 16), x.active, nil, Config{Owner: "test", Lease: time.Minute, Now: time.Now,
		StartLinger: linger, RetryMin: time.Millisecond, RetryMax: 10 * time.Millisecond})
	x.r.log = slogDiscard()
	x.r.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		x.r.Drain(ctx)
		x.r.Stop()
	})
	return x
}

// launch launches a run of m answering a new thread's first message and
// returns it with its start's outcome.
func (x *fixture) launch(m thread.Model) (*Active, error) {
	now := time.Now().UTC().Truncate(time.Microsecond)
	th := &thread.Thread{ID: uuid.New(), Caller: "alice", CreatedAt: now, UpdatedAt: now}
	user := &checkpoint.Node{ID: uuid.New(), ThreadID: th.ID, Role: checkpoint.RoleUser, Seq: 1, CreatedAt: now,
		Content: []checkpoint.Part{{Type: checkpoint.PartText, Text: "hi"}}}
	r := &thread.Run{ID: uuid.New(), ThreadID: th.ID, Status: thread.RunRunning, UserMessageID: user.ID, ParentID: user.ID,
		MessageID: uuid.New(), Model: "m", Owner: "test", LeaseUntil: now.Add(time.Minute), TreeSeq: 1, CreatedAt: now}
	user.RunID = r.ID
	tree, _ := (&checkpoint.Tree{}).Append(*user)
	in := thread.RunCreate{Caller: "alice", Thread: th.ID, User: user, Run: *r, Create: th}
	ar, started := x.r.Launch(th, user, r, nil, tree, m, thread.ModelRequest{}, in)
	err := <-started
	if ar != nil {
		ar.Settle(err == nil)
	}
	return ar, err
}

// TestRunWrittenWhole: a run that ends within its start linger is
// written whole, its log and its reply in the store, and its events
// published on the hub in order.
func TestRunWrittenWhole(t *testing.T) {
	t.Parallel()
	x := setup(t, time.Hour)
	ar, err := x.launch(words{w: []string{"a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	<-ar.Done()
	r := ar.Run()
	got, err := x.st.RunGet(context.Background(), r.ThreadID, r.ID)
	if err != nil || got.Status != thread.RunSucceeded {
		t.Fatalf("stored run: got %+v (%v), want succeeded", got, err)
	}
	recs, err := x.st.RunEventsAfter(context.Background(), r.ID, 0)
	if err != nil || len(recs) != 4 || recs[1].Text != "a" || recs[2].Text != "b" || recs[3].Status != thread.RunSucceeded {
		t.Fatalf("stored log: got %+v (%v), want the first snapshot, a, b and the final snapshot", recs, err)
	}
	nodes, _ := x.st.CheckpointsAfter(context.Background(), r.ThreadID, 0)
	if len(nodes) != 2 || nodes[1].Text() != "ab" {
		t.Fatalf("stored thread: got %+v, want the question and the reply ab", nodes)
	}
}

// TestRunStreamsAfterLinger: a run still running when its linger ends
// commits its start alone (the caller hears of it then), publishes its
// first snapshot and its tokens as they commit, and its end last.
func TestRunStreamsAfterLinger(t *testing.T) {
	t.Parallel()
	x := setup(t, -1)
	gate := make(chan struct{})
	m := words{w: []string{"a"}, gate: gate}
	ar, err := x.launch(m)
	if err != nil {
		t.Fatal(err)
	}
	r := ar.Run()
	if got, err := x.st.RunGet(context.Background(), r.ThreadID, r.ID); err != nil || got.Status != thread.RunRunning {
		t.Fatalf("before the model answered: got %+v (%v), want the run stored running", got, err)
	}
	if !ar.Live() || x.active.Find("alice", r.ThreadID, r.ID) == nil {
		t.Fatal("a running run with a durable start is not found in memory")
	}
	sub := x.hub.Subscribe(r.ID)
	defer sub.Close()
	close(gate)
	var seen []thread.Event
	for b := range sub.C() {
		seen = append(seen, b...)
	}
	if n := len(seen); n != 2 || seen[0].Text != "a" || !seen[1].Final() {
		t.Fatalf("published after the subscription: got %+v, want the token a and the final snapshot", seen)
	}
	<-ar.Done()
	wait.Eventually(t, 5*time.Second, func() bool { return x.active.Get(r.ID) == nil }, "the run stayed registered")
}

// TestRunCancel: a cancelled run ends cancelled with what it streamed,
// and frees its thread.
func TestRunCancel(t *testing.T) {
	t.Parallel()
	x := setup(t, -1)
	ar, err := x.launch(words{gate: make(chan struct{})})
	if err != nil {
		t.Fatal(err)
	}
	r := ar.Run()
	if !ar.Cancel(thread.RunCancelled) {
		t.Fatal("Cancel of a running run: got false")
	}
	<-ar.Done()
	got, err := x.st.RunGet(context.Background(), r.ThreadID, r.ID)
	if err != nil || got.Status != thread.RunCancelled {
		t.Fatalf("stored run: got %+v (%v), want cancelled", got, err)
	}
	if x.active.OnThread("alice", r.ThreadID) != nil {
		t.Fatal("the thread is still held by the ended run")
	}
}

// TestRecoverEndsExpiredRun: a run whose owner died (its lease lapsed)
// is ended interrupted with the text its log holds.
func TestRecoverEndsExpiredRun(t *testing.T) {
	t.Parallel()
	x := setup(t, -1)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Microsecond)
	th, _, err := x.st.ThreadCreate(ctx, &thread.Thread{ID: uuid.New(), Caller: "alice", CreatedAt: now, UpdatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	user := &checkpoint.Node{ID: uuid.New(), ThreadID: th.ID, Role: checkpoint.RoleUser, Seq: 1, CreatedAt: now}
	r := thread.Run{ID: uuid.New(), ThreadID: th.ID, Status: thread.RunRunning, UserMessageID: user.ID, ParentID: user.ID,
		MessageID: uuid.New(), Model: "m", Owner: "dead", LeaseUntil: now.Add(-time.Second), TreeSeq: 1, CreatedAt: now}
	user.RunID = r.ID
	if _, err := x.st.RunCreate(ctx, thread.RunCreate{Caller: "alice", Thread: th.ID, User: user, Run: r}, runlog.FirstRecord(&r)); err != nil {
		t.Fatal(err)
	}
	if err := x.st.RunEventsAppend(ctx, []thread.Segment{{RunID: r.ID, Records: []thread.Record{{Seq: 2, Kind: thread.KindToken, Text: "half"}}}}); err != nil {
		t.Fatal(err)
	}
	// The lease loop may be recovering it already: either pass ends it.
	x.r.Recover(ctx)
	wait.Eventually(t, 5*time.Second, func() bool {
		got, err := x.st.RunGet(ctx, th.ID, r.ID)
		return err == nil && got.Status == thread.RunInterrupted
	}, "the expired run was not ended interrupted")
	nodes, _ := x.st.CheckpointsAfter(ctx, th.ID, 0)
	if len(nodes) != 2 || nodes[1].Text() != "half" {
		t.Fatalf("stored reply: got %+v, want half", nodes)
	}
}

// TestDrainRefusesRuns: once draining, a launch is refused with
// ErrShuttingDown and nothing is written.
func TestDrainRefusesRuns(t *testing.T) {
	t.Parallel()
	x := setup(t, -1)
	x.r.Drain(context.Background())
	_, err := x.launch(words{w: []string{"a"}})
	if !errors.Is(err, runlog.ErrShuttingDown) {
		t.Fatalf("got %v, want ErrShuttingDown", err)
	}
}

func slogDiscard() *slog.Logger { return slog.New(slog.DiscardHandler) }
