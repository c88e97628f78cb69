package engine_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/checkpoint"
	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/store"
	"github.com/threadline/threadline/store/pgtest"
	"github.com/threadline/threadline/stream"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/engine"
)

var _ thread.Store = (*store.Store)(nil)
var _ thread.Hub = (*stream.Hub[thread.Event])(nil)

// recorder is a model that answers "reply N" and records what it saw, so a
// test can check the exact messages a run sends to the model.
type recorder struct {
	mu   sync.Mutex
	seen [][]thread.ModelMessage
}

func (r *recorder) Stream(ctx context.Context, req thread.ModelRequest, onDelta func(thread.Delta) error) (thread.ModelResult, error) {
	on := textSink(onDelta)
	r.mu.Lock()
	r.seen = append(r.seen, req.Messages)
	n := len(r.seen)
	r.mu.Unlock()
	for _, tok := range []string{"reply", " ", string(rune('0' + n))} {
		if err := on(tok); err != nil {
			return thread.ModelResult{}, err
		}
	}
	return thread.ModelResult{Model: "recorder", StopReason: "stop"}, nil
}

func (r *recorder) last() []thread.ModelMessage {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen[len(r.seen)-1]
}

type models struct {
	m      thread.Model
	budget int
}

func (m models) Resolve(name string) (thread.Model, string, error) {
	if name != "" && name != "recorder" {
		return nil, "", errcode.New(errcode.Invalid, "unknown model %q; models: recorder", name)
	}
	return m.m, "recorder", nil
}
func (m models) List() []thread.ModelInfo { return []thread.ModelInfo{{Name: "recorder"}} }
func (m models) ContextBudget(string) int { return m.budget }

func setup(t *testing.T, budget int) (*engine.Service, *recorder) {
	t.Helper()
	st := store.New(pgtest.Pool(t))
	rec := &recorder{}
	svc := engine.New(st, stream.New[thread.Event](64), models{m: rec, budget: budget}, st, engine.Config{})
	svc.Start()
	shutdownAtCleanup(t, svc)
	return svc, rec
}

// run starts a run and drains it, returning the final snapshot.
func run(t *testing.T, svc *engine.Service, tid uuid.UUID, req thread.RunRequest) *thread.Snapshot {
	t.Helper()
	ctx := context.Background()
	r, _, err := svc.StartRun(ctx, "local", tid, req)
	if err != nil {
		t.Fatalf("StartRun: %v", err)
	}
	var final *thread.Snapshot
	err = svc.FollowRun(ctx, "local", r, 0, func(ev thread.Event, _ bool) error {
		if ev.Final() {
			final = ev.Snapshot
		}
		return nil
	})
	if err != nil || final == nil {
		t.Fatalf("FollowRun: final %v err %v", final, err)
	}
	return final
}

func msg(text string) *thread.UserMessage {
	return &thread.UserMessage{Content: []checkpoint.Part{{Type: "text", Text: text}}}
}

func texts(ms []thread.ModelMessage) string {
	var out []string
	for _, m := range ms {
		var s string
		for _, p := range m.Parts {
			s += p.Text
		}
		out = append(out, string(m.Role)+":"+s)
	}
	return strings.Join(out, " | ")
}

func leaf(s *thread.Snapshot) *checkpoint.Node {
	path := s.View().Path(s.Head)
	return &path[len(path)-1]
}

// TestModelSeesPathToForkPoint checks the exact messages the model receives
// for a new message, a regenerate and an edit, with the system message first.
func TestModelSeesPathToForkPoint(t *testing.T) {
	t.Parallel()
	svc, rec := setup(t, 0)
	tid := uuid.New()
	sys := thread.RunConfig{System: "be brief"}
	s1 := run(t, svc, tid, thread.RunRequest{Message: msg("q1"), Config: sys})
	a1 := leaf(s1)
	if got, want := texts(rec.last()), "system:be brief | user:q1"; got != want {
		t.Fatalf("turn 1: model saw %q, want %q", got, want)
	}
	s2 := run(t, svc, tid, thread.RunRequest{Message: msg("q2"), ParentID: a1.ID})
	a2 := leaf(s2)
	if got, want := texts(rec.last()), "user:q1 | assistant:reply 1 | user:q2"; got != want {
		t.Fatalf("turn 2: model saw %q, want %q", got, want)
	}
	// Regenerate the second reply: same path, ending at q2.
	run(t, svc, tid, thread.RunRequest{ParentID: a2.ParentID, SourceID: a2.ID})
	if got, want := texts(rec.last()), "user:q1 | assistant:reply 1 | user:q2"; got != want {
		t.Fatalf("regenerate: model saw %q, want %q", got, want)
	}
	// Edit q2: the edited text replaces it; the old branch is not seen.
	s4 := run(t, svc, tid, thread.RunRequest{Message: msg("q2 edited"), ParentID: a1.ID, SourceID: a2.ParentID})
	if got, want := texts(rec.last()), "user:q1 | assistant:reply 1 | user:q2 edited"; got != want {
		t.Fatalf("edit: model saw %q, want %q", got, want)
	}
	if n := s4.Tree.Len(); n != 7 {
		t.Fatalf("tree after 4 runs: %d nodes, want 7", n)
	}
}

func TestContextBudgetTrimsOldest(t *testing.T) {
	t.Parallel()
	svc, rec := setup(t, 120)
	tid := uuid.New()
	var parent uuid.UUID
	for i := 0; i < 6; i++ {
		s := run(t, svc, tid, thread.RunRequest{Message: msg(strings.Repeat(string(rune('a'+i)), 30)), ParentID: parent,
			Config: thread.RunConfig{System: "sys"}})
		parent = leaf(s).ID
	}
	seen := rec.last()
	if seen[0].Role != checkpoint.RoleSystem || seen[0].Parts[0].Text != "sys" {
		t.Fatalf("system message not kept first: %s", texts(seen))
	}
	if last := seen[len(seen)-1]; last.Parts[0].Text != strings.Repeat("f", 30) {
		t.Fatalf("newest message not last: %s", texts(seen))
	}
	if len(seen) >= 12 {
		t.Fatalf("nothing trimmed: the model saw %d messages", len(seen))
	}
	size := 0
	for _, m := range seen[1:] {
		size += 16 + len(m.Parts[0].Text)
	}
	if size > 120 {
		t.Fatalf("trimmed path is %d bytes, over the budget of 120", size)
	}
}

// TestRecoverInterruptedRun simulates a dead owner: a run whose lease lapsed
// is finished from its log as incomplete/other with the text it had logged.
func TestRecoverInterruptedRun(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	st := store.New(pool)
	ctx := context.Background()
	tid := uuid.New()
	now := time.Now().UTC().Truncate(time.Microsecond)
	if _, _, err := st.ThreadCreate(ctx, &thread.Thread{ID: tid, Caller: "local", CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	user := &checkpoint.Node{ID: uuid.New(), ThreadID: tid, Role: checkpoint.RoleUser, Content: []checkpoint.Part{{Type: "text", Text: "q"}}, Seq: 1, CreatedAt: now}
	r := thread.Run{ID: uuid.New(), ThreadID: tid, Status: thread.RunRunning, UserMessageID: user.ID, ParentID: user.ID, MessageID: uuid.New(),
		Model: "recorder", Owner: "dead-process", LeaseUntil: now.Add(-time.Second), TreeSeq: 1, CreatedAt: now}
	if _, err := st.RunCreate(ctx, thread.RunCreate{Caller: "local", Thread: tid, User: user, Run: r},
		thread.Record{Seq: 1, Kind: thread.KindSnapshot, Status: thread.RunRunning, TreeSeq: 1}); err != nil {
		t.Fatal(err)
	}
	if err := st.RunEventsAppend(ctx, []thread.Segment{{RunID: r.ID, Records: []thread.Record{{Seq: 2, Kind: thread.KindToken, Text: "half"}, {Seq: 3, Kind: thread.KindToken, Text: " done"}}}}); err != nil {
		t.Fatal(err)
	}
	svc := engine.New(st, stream.New[thread.Event](64), models{m: &recorder{}}, st, engine.Config{Lease: time.Minute})
	engine.StartWriters(svc) // this test drives recovery by hand
	shutdownAtCleanup(t, svc)
	if n := svc.Recover(ctx); n != 1 {
		t.Fatalf("Recover: got %d runs, want 1", n)
	}
	var evs []thread.Event
	if err := svc.Follow(ctx, "local", tid, r.ID, 0, func(ev thread.Event, _ bool) error { evs = append(evs, ev); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(evs) != 5 || evs[3].Code != errcode.RunInterrupted || !evs[4].Final() || evs[4].Snapshot.RunStatus != thread.RunInterrupted {
		t.Fatalf("recovered log: got %d events, want 5 ending with the run_interrupted error and the interrupted snapshot", len(evs))
	}
	got := evs[4].Snapshot.Tree.Get(r.MessageID)
	if got == nil || got.Text() != "half done" || got.Status.Type != "incomplete" || got.Status.Reason != "other" {
		t.Fatalf("recovered reply: got %+v", got)
	}
	if n := svc.Recover(ctx); n != 0 {
		t.Fatalf("second Recover: got %d, want 0", n)
	}
}
