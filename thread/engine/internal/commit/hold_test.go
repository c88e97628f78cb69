package commit

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
)

// holdSetup starts a group commit with hold whose writes are recorded,
// and one run's writer whose start is committed.
func holdSetup(t *testing.T, hold time.Duration) (*LogWriter[int, string], func() [][]int, chan []int) {
	t.Helper()
	var mu sync.Mutex
	var writes [][]int
	write := func(_ context.Context, segs []Segment[int, string]) ([]uuid.UUID, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range segs {
			writes = append(writes, slices.Clone(s.Records))
		}
		return nil, nil
	}
	pubs := make(chan []int, 100)
	publish := func(_ *LogWriter[int, string], recs []int, _ time.Time) { pubs <- slices.Clone(recs) }
	c := NewGroupCommit(write, publish, nil, slog.Default())
	c.SetCoalesce(Coalesce{Hold: hold})
	c.Start()
	t.Cleanup(c.Stop)
	w := c.Writer(uuid.New(), "a", 1, nil)
	w.ClaimStart(StartCommitting)
	w.Started(true)
	got := func() [][]int {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(writes)
	}
	return w, got, pubs
}

// nextPub waits for the next publish.
func nextPub(t *testing.T, pubs chan []int) []int {
	t.Helper()
	select {
	case p := <-pubs:
		return p
	case <-time.After(30 * time.Second):
		t.Fatal("nothing published after 30 s")
	}
	return nil
}

// TestHoldPairs: with a hold (here an hour), a record added with AddSoon
// goes out at once when the run's last commit is a hold old (its first),
// else waits for the next record and goes out with it; a record added with
// Add, or Stop, sends a waiting one at once.
func TestHoldPairs(t *testing.T) {
	t.Parallel()
	w, writes, pubs := holdSetup(t, time.Hour)
	w.AddSoon(2) // the run's first commit since its start: not held
	if got := nextPub(t, pubs); !slices.Equal(got, []int{2}) {
		t.Fatalf("first publish: got %v, want [2]", got)
	}
	w.AddSoon(3)
	select {
	case p := <-pubs:
		t.Fatalf("published %v alone within the hold, want it to wait for the next record", p)
	case <-time.After(50 * time.Millisecond):
	}
	w.AddSoon(4)
	if got := nextPub(t, pubs); !slices.Equal(got, []int{3, 4}) {
		t.Fatalf("publish of a pair: got %v, want [3 4] together", got)
	}
	w.AddSoon(5)
	w.Add(6)
	if got := nextPub(t, pubs); !slices.Equal(got, []int{5, 6}) {
		t.Fatalf("publish after Add: got %v, want [5 6] together", got)
	}
	w.AddSoon(7)
	if tail := w.Stop(); len(tail) != 0 {
		t.Fatalf("Stop: got %v not durable, want everything written", tail)
	}
	if got := nextPub(t, pubs); !slices.Equal(got, []int{7}) {
		t.Fatalf("publish at Stop: got %v, want [7]", got)
	}
	want := [][]int{{2}, {3, 4}, {5, 6}, {7}}
	if got := writes(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("writes: got %v, want %v", got, want)
	}
}

// TestHoldLoneRecord: a held record with no next one goes out by itself
// once the hold has passed.
func TestHoldLoneRecord(t *testing.T) {
	t.Parallel()
	w, _, pubs := holdSetup(t, 20*time.Millisecond)
	w.AddSoon(2)
	w.AddSoon(3) // the last commit is recent: 3 waits for a next record
	var got []int
	for len(got) < 2 {
		got = append(got, nextPub(t, pubs)...)
	}
	if !slices.Equal(got, []int{2, 3}) {
		t.Fatalf("published: got %v, want [2 3]", got)
	}
	if tail := w.Stop(); len(tail) != 0 {
		t.Fatalf("Stop: got %v not durable, want none", tail)
	}
}

// TestHoldRunsOut: a steady stream of records faster than the hold goes
// out in fewer writes than records, each record written and published
// once, in order.
func TestHoldRunsOut(t *testing.T) {
	t.Parallel()
	w, writes, pubs := holdSetup(t, 50*time.Millisecond)
	const n = 40
	for i := 2; i < 2+n; i++ {
		w.AddSoon(i)
		time.Sleep(time.Millisecond)
	}
	var got []int
	for len(got) < n {
		got = append(got, nextPub(t, pubs)...)
	}
	want := make([]int, 0, n)
	for i := 2; i < 2+n; i++ {
		want = append(want, i)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("published: got %v, want %v once each, in order", got, want)
	}
	if k := len(writes()); k >= n {
		t.Fatalf("%d records in %d writes, want fewer writes than records", n, k)
	}
	if tail := w.Stop(); len(tail) != 0 {
		t.Fatalf("Stop: got %v not durable, want none", tail)
	}
}

// TestNoHold: without a hold AddSoon is Add: no record waits for another
// (each is published before the next is added).
func TestNoHold(t *testing.T) {
	t.Parallel()
	w, _, pubs := holdSetup(t, 0)
	for i := 2; i < 6; i++ {
		w.AddSoon(i)
		if got := nextPub(t, pubs); !slices.Equal(got, []int{i}) {
			t.Fatalf("publish: got %v, want [%d]", got, i)
		}
	}
	w.Stop()
}

// coalesceSetup starts a group commit with co whose writes always succeed;
// start starts a run's writer with its start committed, and pubs gets
// what each commit publishes.
func coalesceSetup(t *testing.T, co Coalesce) (start func(key string) *LogWriter[int, string], pubs chan []int) {
	t.Helper()
	pubs = make(chan []int, 100)
	write := func(context.Context, []Segment[int, string]) ([]uuid.UUID, error) { return nil, nil }
	publish := func(_ *LogWriter[int, string], recs []int, _ time.Time) { pubs <- slices.Clone(recs) }
	c := NewGroupCommit(write, publish, nil, slog.Default())
	c.SetCoalesce(co)
	c.Start()
	t.Cleanup(c.Stop)
	start = func(key string) *LogWriter[int, string] {
		w := c.Writer(uuid.New(), key, 1, nil)
		w.ClaimStart(StartCommitting)
		w.Started(true)
		return w
	}
	return start, pubs
}

// wantPub fails the test unless the next publish holds want.
func wantPub(t *testing.T, pubs chan []int, what string, want ...int) {
	t.Helper()
	if got := nextPub(t, pubs); !slices.Equal(got, want) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

// quiet fails the test if anything is published within 50 ms.
func quiet(t *testing.T, pubs chan []int, want string) {
	t.Helper()
	select {
	case p := <-pubs:
		t.Fatalf("published %v: %s", p, want)
	case <-time.After(50 * time.Millisecond):
	}
}

// TestHoldFrom: a hold that applies from two streaming runs holds nothing
// while one streams, and holds once a second one's start is committed.
func TestHoldFrom(t *testing.T) {
	t.Parallel()
	start, pubs := coalesceSetup(t, Coalesce{Hold: time.Hour, From: 2})
	a := start("a")
	for i := 2; i < 5; i++ {
		a.AddSoon(i)
		wantPub(t, pubs, "one run streaming: at once", i)
	}
	b := start("b")
	a.AddSoon(5)
	quiet(t, pubs, "two runs streaming: want it held for the next record")
	a.AddSoon(6)
	wantPub(t, pubs, "two runs streaming", 5, 6)
	b.Stop()
	a.AddSoon(7) // one streams again: at once
	wantPub(t, pubs, "after the second stopped", 7)
	a.Stop()
}

// TestCommitPace: a pace (here an hour) that applies from two streaming
// runs lets a commit begin right after the last while one run streams;
// once two do, the next commit waits for the pace, and begins as soon as
// one of them stops.
func TestCommitPace(t *testing.T) {
	t.Parallel()
	start, pubs := coalesceSetup(t, Coalesce{Pace: time.Hour, From: 2})
	a := start("a")
	for i := 2; i < 4; i++ {
		a.Add(i)
		wantPub(t, pubs, "one run streaming: at once", i)
	}
	b := start("b")
	a.Add(4)
	quiet(t, pubs, "two runs streaming: want it to wait for the pace")
	a.Add(5)
	b.Stop() // one streams again: the commit goes at once, with both records
	wantPub(t, pubs, "after the second stopped", 4, 5)
	a.Stop()
}
