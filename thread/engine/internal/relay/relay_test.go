package relay

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/checkpoint/errcode"
)

// testWake is a run's wake-up subscription that the test fires.
type testWake struct {
	ch     chan struct{}
	closed chan struct{}
	once   sync.Once
}

func (w *testWake) C() <-chan struct{} { return w.ch }
func (w *testWake) Close()             { w.once.Do(func() { close(w.closed) }) }

// testLog is a run's log as a reader reads it: reads answers what the
// reader asked for, and each read is told on asked.
type testLog struct {
	mu    sync.Mutex
	recs  []string
	ended bool
	gone  bool
	asked chan int64 // the after of each read
}

func (l *testLog) append(rec string, ended bool) {
	l.mu.Lock()
	l.recs = append(l.recs, rec)
	l.ended = ended
	l.mu.Unlock()
}

func (l *testLog) read(_ context.Context, after int64) ([]string, int64, bool, error) {
	l.asked <- after
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gone {
		return nil, after, false, errcode.New(errcode.NotFound, "run not found")
	}
	if after >= int64(len(l.recs)) {
		return nil, after, l.ended, nil
	}
	return slices.Clone(l.recs[after:]), int64(len(l.recs)), l.ended, nil
}

// newTestRelay returns a started relay whose readers poll only after an
// hour, with a wake-up per run that the test fires.
func newTestRelay(t *testing.T) (*Relay[string], func(uuid.UUID) *testWake) {
	t.Helper()
	var mu sync.Mutex
	wakes := map[uuid.UUID]*testWake{}
	get := func(id uuid.UUID) *testWake {
		mu.Lock()
		defer mu.Unlock()
		if wakes[id] == nil {
			wakes[id] = &testWake{ch: make(chan struct{}, 1), closed: make(chan struct{})}
		}
		return wakes[id]
	}
	rl := NewRelay[string](16, func(id uuid.UUID) Wake { return get(id) }, time.Hour, time.Millisecond, slog.Default())
	rl.Start()
	t.Cleanup(rl.Stop)
	return rl, get
}

func recv(t *testing.T, s *RelaySub[string]) []string {
	t.Helper()
	select {
	case evs, ok := <-s.C():
		if !ok {
			t.Fatal("subscription closed, want events")
		}
		return evs
	case <-time.After(30 * time.Second):
		t.Fatal("no events after 30 s")
	}
	return nil
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s never happened", what)
	}
}

// TestRelayOneReader: the followers of a run share one reader, which reads
// from where the first follower's seed says, once per wake-up, and
// publishes to all of them; it stops, closing its wake-up subscription,
// when the last follower leaves.
func TestRelayOneReader(t *testing.T) {
	t.Parallel()
	rl, wakeOf := newTestRelay(t)
	id := uuid.New()
	log := &testLog{recs: []string{"a"}, asked: make(chan int64, 100)}
	subs := make([]*RelaySub[string], 3)
	for i := range subs {
		if subs[i] = rl.Subscribe(id, log.read); subs[i] == nil {
			t.Fatal("Subscribe on a started relay: got nil")
		}
	}
	if n := rl.Readers(); n != 1 {
		t.Fatalf("readers: got %d, want 1", n)
	}
	subs[0].Seed(1) // the first follower read "a" from the log
	subs[1].Seed(0) // a later seed does not move the reader
	for i, rec := range []string{"b", "c"} {
		log.append(rec, false)
		wakeOf(id).ch <- struct{}{}
		if after := <-log.asked; after != int64(i+1) {
			t.Fatalf("read %d: got after %d, want %d", i, after, i+1)
		}
		for j, s := range subs {
			if got := recv(t, s); !slices.Equal(got, []string{rec}) {
				t.Fatalf("follower %d: got %v, want [%s]", j, got, rec)
			}
		}
	}
	for _, s := range subs {
		s.Close()
	}
	waitClosed(t, wakeOf(id).closed, "the wake-up subscription's close")
	if n := rl.Readers(); n != 0 {
		t.Fatalf("readers after the last follower left: got %d, want 0", n)
	}
	if n := len(log.asked); n != 0 {
		t.Fatalf("reads besides one per wake-up: got %d, want 0", n)
	}
}

// TestRelayReaderEnds: a reader whose run ended, or whose run is gone,
// leaves the relay and closes its followers' subscriptions; a stopped
// relay takes no followers.
func TestRelayReaderEnds(t *testing.T) {
	t.Parallel()
	for _, gone := range []bool{false, true} {
		t.Run(fmt.Sprintf("gone=%v", gone), func(t *testing.T) {
			t.Parallel()
			rl, wakeOf := newTestRelay(t)
			id := uuid.New()
			log := &testLog{asked: make(chan int64, 100)}
			s := rl.Subscribe(id, log.read)
			s.Seed(0)
			if gone {
				log.mu.Lock()
				log.gone = true
				log.mu.Unlock()
			} else {
				log.append("final", true)
			}
			wakeOf(id).ch <- struct{}{}
			var got []string
			for evs := range s.C() {
				got = append(got, evs...)
			}
			if want := []string{"final"}; gone {
				if len(got) != 0 {
					t.Fatalf("events of a run gone: got %v, want none", got)
				}
			} else if !slices.Equal(got, want) {
				t.Fatalf("events: got %v, want %v", got, want)
			}
			waitClosed(t, wakeOf(id).closed, "the wake-up subscription's close")
			if n := rl.Readers(); n != 0 {
				t.Fatalf("readers after the run ended: got %d, want 0", n)
			}
			s.Close()
			rl.Stop()
			if s := rl.Subscribe(id, log.read); s != nil {
				t.Fatal("Subscribe on a stopped relay: got a subscription, want nil")
			}
		})
	}
}
