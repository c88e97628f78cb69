package engine_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"slices"
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

// stepClock is an agent that takes toolSteps steps of five words and a
// call of "noop", then one of five words; it notes when each step starts,
// and the noop tool notes when each call returns.
type stepClock struct {
	toolSteps int
	mu        sync.Mutex
	starts    []time.Time
	returns   []time.Time
}

func (m *stepClock) Stream(ctx context.Context, req thread.ModelRequest, on func(thread.Delta) error) (thread.ModelResult, error) {
	m.mu.Lock()
	m.starts = append(m.starts, time.Now())
	n := len(m.starts)
	m.mu.Unlock()
	for _, w := range []string{"one ", "two ", "three ", "four ", "five "} {
		if err := on(thread.Delta{Kind: thread.DeltaText, Text: w}); err != nil {
			return thread.ModelResult{}, err
		}
	}
	if (n-1)%(m.toolSteps+1) == m.toolSteps {
		return thread.ModelResult{StopReason: thread.StopDone}, nil
	}
	id := uuid.NewString()
	if err := on(thread.Delta{Kind: thread.DeltaToolCallArgs, ToolCallID: id, ToolName: "noop", ArgsText: "{}"}); err != nil {
		return thread.ModelResult{}, err
	}
	return thread.ModelResult{StopReason: thread.StopToolCalls, ToolCalls: []thread.ToolCall{{ID: id, Name: "noop", ArgsText: "{}"}}}, nil
}

func (m *stepClock) noop() tool.Tool {
	return funcTool{"noop", func(context.Context, json.RawMessage) (thread.ToolOutput, error) {
		m.mu.Lock()
		m.returns = append(m.returns, time.Now())
		m.mu.Unlock()
		return tool.ValueResult("ok"), nil
	}}
}

// BenchmarkAgentSteps is a run of seven tool steps and a last one on
// Postgres: overhead-ms is the service's time from a tool's return to the
// next model call (the result logged, the next step's request built),
// tokens/s the run's words over its wall time, stored-B/step the run's
// log and reply bytes per tool step.
func BenchmarkAgentSteps(b *testing.B) {
	const toolSteps = 7
	pool := pgtest.Pool(b)
	st := store.New(pool)
	m := &stepClock{toolSteps: toolSteps}
	reg := tool.NewRegistry(0)
	if err := reg.Add(m.noop()); err != nil {
		b.Fatal(err)
	}
	svc := engine.New(st, stream.New[thread.Event](1024), models{m: m}, st,
		engine.Config{Tools: reg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	svc.Start()
	b.Cleanup(func() { svc.Shutdown(context.Background()) })
	var overhead []time.Duration
	var tokens int
	var wall time.Duration
	var stored int64
	for b.Loop() {
		m.mu.Lock()
		m.starts, m.returns = m.starts[:0], m.returns[:0]
		m.mu.Unlock()
		t0 := time.Now()
		r, _, err := svc.StartRun(context.Background(), "local", uuid.New(), thread.RunRequest{Message: msg("go")})
		if err != nil {
			b.Fatal(err)
		}
		err = svc.FollowRun(context.Background(), "local", r, 0, func(ev thread.Event, _ bool) error {
			if ev.Type == thread.KindToken {
				tokens++
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		wall += time.Since(t0)
		m.mu.Lock()
		for i, ret := range m.returns {
			overhead = append(overhead, m.starts[i+1].Sub(ret))
		}
		m.mu.Unlock()
		var size int64
		if err := pool.QueryRow(context.Background(), `SELECT (SELECT coalesce(sum(length(data)), 0) FROM run_events WHERE run_id = $1)
			+ (SELECT length(content::text) FROM checkpoints WHERE run_id = $1 AND role = 'assistant')`, r.ID).Scan(&size); err != nil {
			b.Fatal(err)
		}
		stored += size
	}
	slices.Sort(overhead)
	q := func(p float64) float64 {
		return float64(overhead[int(p*float64(len(overhead)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(q(0.5), "p50-overhead-ms")
	b.ReportMetric(q(0.99), "p99-overhead-ms")
	b.ReportMetric(float64(tokens)/wall.Seconds(), "tokens/s")
	b.ReportMetric(float64(stored)/float64(b.N*toolSteps), "stored-B/step")
}
