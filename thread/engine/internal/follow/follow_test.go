package follow

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/stream"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/engine/internal/runlog"
	"github.com/threadline/threadline/thread/engine/internal/trees"
	"github.com/threadline/threadline/thread/threadtest"
	"github.com/threadline/threadline/thread/threadtest/wait"
)

// local is a Local with no runs of this process but the first
// subscriptions it was given.
type local struct {
	mu     sync.Mutex
	firsts map[uuid.UUID]stream.Subscription[thread.Event]
}

func (l *local) Runs(uuid.UUID) bool { return false }

func (l *local) Log(uuid.UUID, int64) ([]thread.Record, bool, bool) { return nil, false, false }

func (l *local) First(id uuid.UUID) stream.Subscription[thread.Event] {
	l.mu.Lock()
	defer l.mu.Unlock()
	sub := l.firsts[id]
	delete(l.firsts, id)
	return sub
}

type fixture struct {
	st      *threadtest.Store
	hub     *stream.Hub[thread.Event]
	local   *local
	drained chan struct{}
	f       *Follower
}

func setup(t *testing.T) *fixture {
	t.Helper()
	st, hub := threadtest.New(), stream.New[thread.Event](64)
	x := &fixture{st: st, hub: hub, local: &local{firsts: map[uuid.UUID]stream.Subscription[thread.Event]{}}, drained: make(chan struct{})}
	x.f = &Follower{Store: st, Hub: hub, Trees: trees.New(st, 16), Local: x.local,
		RetryMin: time.Millisecond, RetryMax: 10 * time.Millisecond, PageBytes: 1 << 20, Drained: x.drained}
	return x
}

// start writes a run's start (a user message on a new thread) to the store.
func (x *fixture) start(t *testing.T) *thread.Run {
	t.Helper()
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Microsecond)
	th, _, err := x.st.ThreadCreate(ctx, &thread.Thread{ID: uuid.New(), Caller: "alice", CreatedAt: now, UpdatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	user := &checkpoint.Node{ID: uuid.New(), ThreadID: th.ID, Role: checkpoint.RoleUser, Seq: 1, CreatedAt: now,
		Content: []checkpoint.Part{{Type: checkpoint.PartText, Text: "hi"}}}
	r := thread.Run{ID: uuid.New(), ThreadID: th.ID, Status: thread.RunRunning, UserMessageID: user.ID, ParentID: user.ID,
		MessageID: uuid.New(), Model: "m", Owner: "other", LeaseUntil: now.Add(time.Minute), TreeSeq: 1, CreatedAt: now}
	user.RunID = r.ID
	got, err := x.st.RunCreate(ctx, thread.RunCreate{Caller: "alice", Thread: th.ID, User: user, Run: r}, runlog.FirstRecord(&r))
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// finish ends r in the store with one token per word.
func (x *fixture) finish(t *testing.T, r *thread.Run, words ...string) {
	t.Helper()
	recs := []thread.Record{runlog.FirstRecord(r)}
	text := ""
	for _, w := range words {
		recs = append(recs, thread.Record{Seq: int64(len(recs) + 1), Kind: thread.KindToken, Text: w})
		text += w
	}
	recs = append(recs, thread.Record{Seq: int64(len(recs) + 1), Kind: thread.KindSnapshot, Status: thread.RunSucceeded, TreeSeq: 2})
	asst := checkpoint.Node{ID: r.MessageID, ThreadID: r.ThreadID, ParentID: r.ParentID, Seq: 2, Role: checkpoint.RoleAssistant,
		Content: []checkpoint.Part{{Type: checkpoint.PartText, Text: text}}, Status: &checkpoint.Status{Type: "complete", Reason: "stop"},
		RunID: r.ID, CreatedAt: r.CreatedAt}
	if err := x.st.RunFinish(context.Background(), thread.RunFinish{Run: r, Status: thread.RunSucceeded, Assistant: asst, Records: recs, Model: "m"}); err != nil {
		t.Fatal(err)
	}
}

// follow follows r after sequence after and returns the events and the error.
func (x *fixture) follow(ctx context.Context, r *thread.Run, after int64) ([]thread.Event, error) {
	var got []thread.Event
	err := x.f.Follow(ctx, "alice", r, after, func(ev thread.Event, _ bool) error {
		got = append(got, ev)
		return nil
	})
	return got, err
}

func kinds(evs []thread.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = string(ev.Type) + ":" + ev.Text
	}
	return out
}

func same(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestFollowReplay: a finished run is replayed from the store's log,
// from the start or after a sequence, up to its final snapshot, which
// shows the reply.
func TestFollowReplay(t *testing.T) {
	t.Parallel()
	tests := []struct {
		after int64
		want  []string
	}{
		{0, []string{"snapshot:", "token:a", "token:b", "snapshot:"}},
		{2, []string{"token:b", "snapshot:"}},
		{4, nil},
	}
	for _, tt := range tests {
		x := setup(t)
		r := x.start(t)
		x.finish(t, r, "a", "b")
		got, err := x.follow(context.Background(), r, tt.after)
		if err != nil {
			t.Fatalf("after %d: %v", tt.after, err)
		}
		if !same(kinds(got), tt.want) {
			t.Fatalf("after %d: got %v, want %v", tt.after, kinds(got), tt.want)
		}
		if n := len(got); n > 0 && (!got[n-1].Final() || got[n-1].Snapshot.Tree.Len() != 2) {
			t.Fatalf("after %d: the last event is not the final snapshot with the reply: %+v", tt.after, got[n-1])
		}
	}
}

// TestFollowLive: a run that goes on is read from the log, then followed
// live through the hub until its final snapshot; an event published
// twice (in the log and live) is emitted once.
func TestFollowLive(t *testing.T) {
	t.Parallel()
	x := setup(t)
	r := x.start(t)
	type result struct {
		evs []thread.Event
		err error
	}
	done := make(chan result, 1)
	go func() {
		evs, err := x.follow(context.Background(), r, 0)
		done <- result{evs, err}
	}()
	wait.Eventually(t, 5*time.Second, func() bool { return x.hub.Subscribers(r.ID) > 0 }, "the follow never subscribed")
	final := thread.Event{Type: thread.KindSnapshot, RunID: r.ID, Sequence: 3,
		Snapshot: &thread.Snapshot{ThreadID: r.ThreadID, RunStatus: thread.RunSucceeded, Tree: &checkpoint.Tree{}}}
	x.hub.Publish(r.ID, thread.Event{Type: thread.KindSnapshot, RunID: r.ID, Sequence: 1, Snapshot: &thread.Snapshot{}},
		thread.Event{Type: thread.KindToken, RunID: r.ID, Sequence: 2, Text: "a"}, final)
	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	if want := []string{"snapshot:", "token:a", "snapshot:"}; !same(kinds(res.evs), want) {
		t.Fatalf("got %v, want %v", kinds(res.evs), want)
	}
}

// TestFollowFirst: a follow from the start claims the run's first
// subscription (made before its first event) and reads nothing of the
// store: here the store does not know the run at all.
func TestFollowFirst(t *testing.T) {
	t.Parallel()
	x := setup(t)
	r := &thread.Run{ID: uuid.New(), ThreadID: uuid.New()}
	x.local.firsts[r.ID] = x.hub.Subscribe(r.ID)
	x.hub.Publish(r.ID, thread.Event{Type: thread.KindToken, RunID: r.ID, Sequence: 1, Text: "a"},
		thread.Event{Type: thread.KindSnapshot, RunID: r.ID, Sequence: 2, Snapshot: &thread.Snapshot{RunStatus: thread.RunSucceeded}})
	got, err := x.follow(context.Background(), r, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"token:a", "snapshot:"}; !same(kinds(got), want) {
		t.Fatalf("got %v, want %v", kinds(got), want)
	}
	if x.local.First(r.ID) != nil {
		t.Fatal("the first subscription was not claimed")
	}
}

// TestFollowDrained: once the service has drained, a follow of a run
// that goes on elsewhere ends with ErrShuttingDown after what the log
// holds.
func TestFollowDrained(t *testing.T) {
	t.Parallel()
	x := setup(t)
	r := x.start(t)
	close(x.drained)
	got, err := x.follow(context.Background(), r, 0)
	if !errors.Is(err, runlog.ErrShuttingDown) {
		t.Fatalf("got %v, want ErrShuttingDown", err)
	}
	if want := []string{"snapshot:"}; !same(kinds(got), want) {
		t.Fatalf("got %v, want %v", kinds(got), want)
	}
}

// TestFollowGone: a run whose thread is deleted during the follow ends
// with an error event not_found after the last event, and no error.
func TestFollowGone(t *testing.T) {
	t.Parallel()
	x := setup(t)
	r := x.start(t)
	done := make(chan []thread.Event, 1)
	first := make(chan struct{})
	go func() {
		var got []thread.Event
		err := x.f.Follow(context.Background(), "alice", r, 0, func(ev thread.Event, _ bool) error {
			if got = append(got, ev); len(got) == 1 {
				close(first)
			}
			return nil
		})
		if err != nil {
			t.Error(err)
		}
		done <- got
	}()
	// The first snapshot delivered and the follow subscribed: only then is
	// the thread deleted (a subscription alone may precede the replay's read).
	select {
	case <-first:
	case <-time.After(5 * time.Second):
		t.Fatal("the follow delivered nothing")
	}
	wait.Eventually(t, 5*time.Second, func() bool { return x.hub.Subscribers(r.ID) > 0 }, "the follow never subscribed")
	if err := x.st.ThreadDelete(context.Background(), "alice", r.ThreadID); err != nil {
		t.Fatal(err)
	}
	x.hub.End(r.ID) // the live side ends: the follow reads the log again
	got := <-done
	if n := len(got); n != 2 || got[1].Type != thread.KindError || got[1].Code != errcode.NotFound || got[1].Sequence != 2 {
		t.Fatalf("got %+v, want the first snapshot then an error event not_found", got)
	}
}
