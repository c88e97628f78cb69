package engine_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/stream"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/engine"
	"github.com/threadline/threadline/thread/threadtest"
	twait "github.com/threadline/threadline/thread/threadtest/wait"
)

// The relay (relay.go) on the in-memory store: one process runs a run,
// another serves its followers with one reader of the log per run, woken
// by wake-ups as the store would send them on every commit.

// fakeWakeups is thread.Wakeups for processes on one fake store: poke
// wakes a run's subscribers, as a commit's NOTIFY does.
type fakeWakeups struct {
	mu   sync.Mutex
	runs map[uuid.UUID]map[*fakeWake]struct{}
}

type fakeWake struct {
	w  *fakeWakeups
	id uuid.UUID
	ch chan struct{}
}

func (w *fakeWake) C() <-chan struct{} { return w.ch }

func (w *fakeWake) Close() {
	w.w.mu.Lock()
	defer w.w.mu.Unlock()
	delete(w.w.runs[w.id], w)
}

func (w *fakeWakeups) WakeRun(id uuid.UUID) thread.Wake {
	w.mu.Lock()
	defer w.mu.Unlock()
	fw := &fakeWake{w: w, id: id, ch: make(chan struct{}, 1)}
	if w.runs[id] == nil {
		w.runs[id] = map[*fakeWake]struct{}{}
	}
	w.runs[id][fw] = struct{}{}
	return fw
}

// Changes is not used here (Watch is not run).
func (w *fakeWakeups) Changes() thread.Changes { return noChanges{} }

type noChanges struct{}

func (noChanges) C() <-chan thread.Change { return nil }
func (noChanges) Close()                  {}

func (w *fakeWakeups) poke(id uuid.UUID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for fw := range w.runs[id] {
		select {
		case fw.ch <- struct{}{}:
		default:
		}
	}
}

// open is how many wake-up subscriptions are open.
func (w *fakeWakeups) open() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, ws := range w.runs {
		n += len(ws)
	}
	return n
}

// wakingStore wakes a run's subscribers after every write to its log and
// counts the reads of each run's log.
type wakingStore struct {
	*threadtest.Store
	w     *fakeWakeups
	wakes atomic.Int64
	mu    sync.Mutex
	reads map[uuid.UUID]int
}

func (s *wakingStore) wake(id uuid.UUID) {
	s.wakes.Add(1)
	s.w.poke(id)
}

func (s *wakingStore) RunEventsAppend(ctx context.Context, segs []thread.Segment) error {
	err := s.Store.RunEventsAppend(ctx, segs)
	if err == nil {
		for _, sg := range segs {
			s.wake(sg.RunID)
		}
	}
	return err
}

func (s *wakingStore) RunFinish(ctx context.Context, in thread.RunFinish) error {
	err := s.Store.RunFinish(ctx, in)
	if err == nil {
		s.wake(in.Run.ID)
	}
	return err
}

func (s *wakingStore) RunFinishAll(ctx context.Context, ins []thread.RunFinish) error {
	err := s.Store.RunFinishAll(ctx, ins)
	if err == nil {
		for _, in := range ins {
			s.wake(in.Run.ID)
		}
	}
	return err
}

func (s *wakingStore) RunEventsAfter(ctx context.Context, runID uuid.UUID, after int64) ([]thread.Record, error) {
	s.mu.Lock()
	s.reads[runID]++
	s.mu.Unlock()
	return s.Store.RunEventsAfter(ctx, runID, after)
}

func (s *wakingStore) readsOf(id uuid.UUID) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads[id]
}

// relayBound bounds a wait only a broken relay exceeds.
const relayBound = 10 * time.Second

// relaySetup returns an owning process running m and a following process
// with wake-ups, on one store.
func relaySetup(t *testing.T, m thread.Model, follower engine.Config) (owner, other *engine.Service, st *wakingStore, w *fakeWakeups) {
	t.Helper()
	return relaySetupFail(t, m, follower, nil)
}

// relaySetupFail is relaySetup on a store that fails as fail says (set
// before the services start: their loops read the store at once).
func relaySetupFail(t *testing.T, m thread.Model, follower engine.Config, fail func(op string) error) (owner, other *engine.Service, st *wakingStore, w *fakeWakeups) {
	t.Helper()
	w = &fakeWakeups{runs: map[uuid.UUID]map[*fakeWake]struct{}{}}
	st = &wakingStore{Store: threadtest.New(), w: w, reads: map[uuid.UUID]int{}}
	st.Fail = fail
	owner = engine.New(st, stream.New[thread.Event](256), models{m: m}, nil, engine.Config{StartLinger: -1})
	owner.Start()
	follower.Wakeups = w
	other = engine.New(st, stream.New[thread.Event](256), models{m: &recorder{}}, nil, follower)
	other.Start()
	for _, svc := range []*engine.Service{owner, other} {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			svc.Shutdown(ctx)
		})
	}
	return owner, other, st, w
}

// followOn follows a run on svc in the background, like live, with a
// context the test may cancel and fn called before each event is passed
// on.
func followOn(ctx context.Context, svc *engine.Service, tid, runID uuid.UUID, fn func(thread.Event)) (<-chan thread.Event, <-chan error) {
	evs := make(chan thread.Event, 1024)
	done := make(chan error, 1)
	go func() {
		defer close(evs)
		done <- svc.Follow(ctx, "local", tid, runID, 0, func(ev thread.Event, _ bool) error {
			if fn != nil {
				fn(ev)
			}
			evs <- ev
			return nil
		})
	}()
	return evs, done
}

// TestRelayOneReaderPerRun: many followers of a run in a process that
// does not own it get every event, identical to the stored log, and the
// process reads the log once per wake-up, not once per follower.
func TestRelayOneReaderPerRun(t *testing.T) {
	t.Parallel()
	const followers, tokens = 20, 10
	m := newStepper()
	owner, other, st, w := relaySetup(t, m, engine.Config{})
	tid, r := startOn(t, owner)
	type sub struct {
		evs  <-chan thread.Event
		done <-chan error
		seen []thread.Event
	}
	subs := make([]*sub, followers)
	for i := range subs {
		evs, done := followOn(context.Background(), other, tid, r.ID, nil)
		subs[i] = &sub{evs: evs, done: done}
		subs[i].seen = append(subs[i].seen, next(t, evs))
	}
	// Every follower has read the log and waits live.
	readsBefore, wakesBefore := st.readsOf(r.ID), st.wakes.Load()
	for i := range tokens {
		m.toks <- string(rune('a' + i))
		for _, s := range subs {
			s.seen = append(s.seen, next(t, s.evs))
		}
	}
	close(m.toks)
	for _, s := range subs {
		s.seen = append(s.seen, rest(t, s.evs, s.done)...)
	}
	// Every follower has the final event: the reads since they went live
	// are the reader's, each after a wake-up (or a quiet spell, which a
	// slow host may add one of).
	reads, wakes := st.readsOf(r.ID)-readsBefore, int(st.wakes.Load()-wakesBefore)
	if reads > wakes+1 {
		t.Fatalf("log reads in the following process while %d followers were live: got %d, want at most %d (one per wake-up)", followers, reads, wakes+1)
	}
	want := replay(t, st.Store, tid, r.ID)
	for i, s := range subs {
		sameEvents(t, fmt.Sprintf("follower %d against the stored log", i), s.seen, want)
	}
	twait.Eventually(t, relayBound, func() bool { return engine.RelayReaders(other) == 0 && w.open() == 0 }, "waited %v for the reader to stop", relayBound)
}

// TestRelaySlowFollowerDropped: a follower that stops reading does not
// hold up the reader or the other followers; it is dropped and, once it
// reads again, rejoins from its sequence with every event.
func TestRelaySlowFollowerDropped(t *testing.T) {
	t.Parallel()
	m := newStepper()
	owner, other, st, _ := relaySetup(t, m, engine.Config{RelayBuffer: 1})
	tid, r := startOn(t, owner)
	release := make(chan struct{})
	blocked := make(chan struct{})
	var once sync.Once
	slow, slowDone := followOn(context.Background(), other, tid, r.ID, func(ev thread.Event) {
		if ev.Type == thread.KindToken {
			once.Do(func() { close(blocked) })
			<-release
		}
	})
	fast, fastDone := followOn(context.Background(), other, tid, r.ID, nil)
	seen := []thread.Event{next(t, fast)}
	next(t, slow)
	m.toks <- "first"
	seen = append(seen, next(t, fast))
	<-blocked // the slow follower holds its first token
	for _, tok := range []string{"b", "c", "d", "e", "f", "g"} {
		m.toks <- tok
		seen = append(seen, next(t, fast))
	}
	close(m.toks)
	seen = append(seen, rest(t, fast, fastDone)...)
	want := replay(t, st.Store, tid, r.ID)
	sameEvents(t, "the fast follower while the slow one was stuck", seen, want)
	close(release)
	got := append([]thread.Event{want[0]}, rest(t, slow, slowDone)...)
	sameEvents(t, "the slow follower after it read again", got, want)
}

// TestRelayReaderStopsWithFollowers: a reader stops, and gives up its
// wake-ups, when its last follower leaves while the run goes on; a new
// follower then starts another and gets the run from its sequence.
func TestRelayReaderStopsWithFollowers(t *testing.T) {
	t.Parallel()
	m := newStepper()
	owner, other, st, w := relaySetup(t, m, engine.Config{})
	tid, r := startOn(t, owner)
	ctx, cancel := context.WithCancel(context.Background())
	evs, done := followOn(ctx, other, tid, r.ID, nil)
	next(t, evs)
	m.toks <- "a"
	next(t, evs)
	if n := engine.RelayReaders(other); n != 1 {
		t.Fatalf("readers with a follower: got %d, want 1", n)
	}
	cancel()
	for range evs {
	}
	if err := <-done; err != context.Canceled {
		t.Fatalf("follow after cancel: got %v, want %v", err, context.Canceled)
	}
	twait.Eventually(t, relayBound, func() bool { return engine.RelayReaders(other) == 0 && w.open() == 0 }, "waited %v for the reader to stop", relayBound)
	m.toks <- "b"
	again, againDone := followOn(context.Background(), other, tid, r.ID, nil)
	got := []thread.Event{next(t, again), next(t, again), next(t, again)}
	m.toks <- "c"
	close(m.toks)
	got = append(got, rest(t, again, againDone)...)
	sameEvents(t, "a new follower", got, replay(t, st.Store, tid, r.ID))
}

// TestRelayThreadDeleted: when another process deletes the thread of a
// run followed here, the reader's next read finds the run gone: it stops,
// and its followers' streams end with an error event not_found.
func TestRelayThreadDeleted(t *testing.T) {
	t.Parallel()
	m := newStepper()
	owner, other, st, w := relaySetup(t, m, engine.Config{})
	tid, r := startOn(t, owner)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	evs, done := followOn(ctx, other, tid, r.ID, nil)
	next(t, evs)
	m.toks <- "a"
	next(t, evs)
	if err := st.Store.ThreadDelete(context.Background(), "local", tid); err != nil {
		t.Fatal(err)
	}
	w.poke(r.ID) // the delete's NOTIFY
	var last thread.Event
	for ev := range evs {
		last = ev
	}
	if err := <-done; err != nil {
		t.Fatalf("follow of a deleted run: got %v, want nil after its not_found event", err)
	}
	if last.Type != thread.KindError || last.Code != errcode.NotFound || last.Sequence != 3 {
		t.Fatalf("the follower's last event: got %+v, want an error not_found at sequence 3", last)
	}
	twait.Eventually(t, relayBound, func() bool { return engine.RelayReaders(other) == 0 && w.open() == 0 }, "waited %v for the reader to stop", relayBound)
	close(m.toks)
}

// TestRelayReadRetried: a read of the log that fails is tried again, and
// the followers get every event once it succeeds.
func TestRelayReadRetried(t *testing.T) {
	t.Parallel()
	m := newStepper()
	var failures atomic.Int64
	failed := make(chan struct{}, 16)
	fail := func(op string) error {
		if op == "RunEventsAfter" && failures.Add(-1) >= 0 {
			failed <- struct{}{}
			return errInjected
		}
		return nil
	}
	owner, other, st, _ := relaySetupFail(t, m, engine.Config{RetryMin: time.Millisecond, RetryMax: 10 * time.Millisecond}, fail)
	tid, r := startOn(t, owner)
	evs, done := followOn(context.Background(), other, tid, r.ID, nil)
	seen := []thread.Event{next(t, evs)}
	failures.Store(3)
	m.toks <- "after failed reads"
	for range 3 {
		<-failed
	}
	seen = append(seen, next(t, evs))
	close(m.toks)
	seen = append(seen, rest(t, evs, done)...)
	sameEvents(t, "a follower whose reader's reads failed", seen, replay(t, st.Store, tid, r.ID))
}
