package engine_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/threadline/threadline/model/tool"
	"github.com/threadline/threadline/store"
	"github.com/threadline/threadline/store/pgtest"
	"github.com/threadline/threadline/stream"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/engine"
)

// BenchmarkSubagentFanOut is a run that delegates to ten sub-agents at
// once, each streaming 40 words, 5 ms apart (paced) or at once (burst),
// on Postgres. events/s is the
// parent stream's events over the run's wall time; p50-ms and p99-ms
// (paced only) the delay of a child's event from its arrival at a follower of the
// child run (it is committed then) to its arrival, as a subagent event,
// at a follower of the parent run (one more group commit).
func BenchmarkSubagentFanOut(b *testing.B) {
	for _, kind := range []string{"paced", "burst"} {
		b.Run(kind, func(b *testing.B) { benchFanOut(b, kind) })
	}
}

func benchFanOut(b *testing.B, kind string) {
	pool := pgtest.Pool(b)
	st := store.New(pool)
	m := newSubModel(0)
	svc := engine.New(st, stream.New[thread.Event](4096), models{m: m}, st,
		engine.Config{Tools: tool.NewRegistry(0), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	svc.Start()
	b.Cleanup(func() { svc.Shutdown(context.Background()) })
	go func() { // the model's start notes are not read here
		for range m.started {
		}
	}()
	tasks := make([]string, 10)
	for i := range tasks {
		tasks[i] = fmt.Sprintf("%s:%d", kind, i)
	}
	prompt := "fan:" + strings.Join(tasks, ",")
	var delays []time.Duration
	var events int
	var wall time.Duration
	b.ResetTimer()
	for range b.N {
		n, d, w := fanOutOnce(b, svc, prompt)
		events, wall = events+n, wall+w
		delays = append(delays, d...)
	}
	b.StopTimer()
	b.ReportMetric(float64(events)/wall.Seconds(), "events/s")
	if kind == "burst" {
		// A burst child ends before a follower of it can be live: the
		// delays are measured on paced children only.
		return
	}
	slices.Sort(delays)
	if len(delays) == 0 {
		b.Fatal("no child event was measured")
	}
	b.ReportMetric(ms(delays[len(delays)/2]), "p50-ms")
	b.ReportMetric(ms(delays[len(delays)*99/100]), "p99-ms")
	b.ReportMetric(0, "ns/op")
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// childKey names one event of one child run.
type childKey struct {
	run uuid.UUID
	seq int64
}

// fanOutOnce runs the fan-out once: it returns the parent stream's event
// count, the measured delays and the run's wall time.
func fanOutOnce(b *testing.B, svc *engine.Service, prompt string) (int, []time.Duration, time.Duration) {
	ctx := context.Background()
	start := time.Now()
	r, _, err := svc.StartRun(ctx, "local", uuid.New(), thread.RunRequest{Message: msg(prompt)})
	if err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	atChild := map[childKey]time.Time{}
	from := map[uuid.UUID]int64{} // each child's first sequence its follower got live
	atParent := map[childKey]time.Time{}
	var wg sync.WaitGroup
	var n int
	err = svc.FollowRun(ctx, "local", r, 0, func(ev thread.Event, _ bool) error {
		now := time.Now()
		n++
		if ev.Type != thread.KindSubagent {
			return nil
		}
		k := childKey{ev.Sub.RunID, ev.Sub.Event.Sequence}
		mu.Lock()
		defer mu.Unlock()
		atParent[k] = now
		if _, ok := from[k.run]; ok {
			return nil
		}
		from[k.run] = k.seq + 3 // what the catch-up read gives is not live
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = svc.Follow(ctx, "local", ev.Sub.ThreadID, k.run, k.seq, func(cev thread.Event, _ bool) error {
				t := time.Now()
				mu.Lock()
				atChild[childKey{k.run, cev.Sequence}] = t
				mu.Unlock()
				return nil
			})
		}()
		return nil
	})
	wall := time.Since(start)
	if err != nil {
		b.Fatal(err)
	}
	wg.Wait()
	var out []time.Duration
	for k, c := range atChild {
		if p, ok := atParent[k]; ok && k.seq >= from[k.run] {
			out = append(out, max(p.Sub(c), 0)) // the two followers race: the parent's may be first
		}
	}
	return n, out, wall
}
