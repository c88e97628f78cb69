package commit

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
)

// published is what a test group commit handed to publish, and what the
// writer had durable then.
type published struct {
	key     string
	recs    []int
	durable []int
}

// TestGroupCommit: records of a run whose start is committed are written
// and then published, durable first; records added before the start is
// committed wait for it; a run whose claim the store refuses is dropped
// from the commit (its lost callback is called, nothing of it is
// published, Stop hands its records back) while the others are written.
func TestGroupCommit(t *testing.T) {
	t.Parallel()
	idA, idB := uuid.New(), uuid.New()
	var mu sync.Mutex
	var writes [][]string // the keys of each write
	write := func(_ context.Context, segs []Segment[int, string]) ([]uuid.UUID, error) {
		var keys []string
		for _, s := range segs {
			keys = append(keys, s.Key)
			if s.Key == "b" {
				return []uuid.UUID{idB}, errors.New("claim lost")
			}
		}
		mu.Lock()
		writes = append(writes, keys)
		mu.Unlock()
		return nil, nil
	}
	pubs := make(chan published, 10)
	publish := func(w *LogWriter[int, string], recs []int, _ time.Time) {
		durable, _ := w.After(0)
		pubs <- published{w.Key, slices.Clone(recs), slices.Clone(durable)}
	}
	c := NewGroupCommit(write, publish, nil, slog.Default())
	c.Start()
	defer c.Stop()
	lost := make(chan struct{})
	a := c.Writer(idA, "a", 1, nil)
	b := c.Writer(idB, "b", 1, func() { close(lost) })

	a.Add(2) // waits for the start
	if !a.ClaimStart(StartCommitting) || a.ClaimStart(StartMerged) {
		t.Fatal("ClaimStart: got a second claim of one start, want only the first")
	}
	a.Started(true)
	next := func() published {
		t.Helper()
		select {
		case p := <-pubs:
			return p
		case <-time.After(30 * time.Second):
			t.Fatal("nothing published after 30 s")
		}
		return published{}
	}
	if p := next(); p.key != "a" || !slices.Equal(p.recs, []int{2}) || !slices.Equal(p.durable, []int{1, 2}) {
		t.Fatalf("published: got %+v, want a's [2] with [1 2] durable", p)
	}

	b.ClaimStart(StartCommitting)
	b.Started(true)
	b.Add(2)
	select {
	case <-lost:
	case <-time.After(30 * time.Second):
		t.Fatal("the lost run's callback was never called")
	}
	a.Add(3)
	if p := next(); p.key != "a" || !slices.Equal(p.recs, []int{3}) {
		t.Fatalf("published after the lost run: got %+v, want a's [3]", p)
	}
	if tail := a.Stop(); len(tail) != 0 {
		t.Errorf("a's records not durable at Stop: got %v, want none", tail)
	}
	if tail := b.Stop(); !slices.Equal(tail, []int{2}) {
		t.Errorf("the lost run's records at Stop: got %v, want [2]", tail)
	}
	if !b.Committed() || !a.Live() {
		t.Errorf("got committed %v, live %v, want both true", b.Committed(), a.Live())
	}
	a.End([]int{1, 2, 3, 4})
	if recs, ended := a.After(2); !ended || !slices.Equal(recs, []int{3, 4}) {
		t.Errorf("After(2) once ended: got %v %v, want [3 4] true", recs, ended)
	}
	select {
	case p := <-pubs:
		t.Errorf("published after the runs stopped: got %+v, want nothing", p)
	default:
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.EqualFunc(writes, [][]string{{"a"}, {"a"}}, slices.Equal) {
		t.Errorf("writes: got %v, want [[a] [a]]", writes)
	}
}
