package engine_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/google/uuid"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/threadline/threadline/model/builtin"
	"github.com/threadline/threadline/model/tool"
	"github.com/threadline/threadline/store"
	"github.com/threadline/threadline/store/pgtest"
	"github.com/threadline/threadline/stream"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/engine"
	"github.com/threadline/threadline/thread/threadtest"
)

// discard is a span exporter that drops what it is sent.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// tracers are the benchmarks' two cases: no tracer (the noop one), and
// the SDK's tracer provider with a batch processor, as cmd/threadline
// builds it, whose exporter drops the spans.
func tracers(b *testing.B) map[string]engine.Config {
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discard{}))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	return map[string]engine.Config{
		"traces=off": {Logger: quiet},
		"traces=on":  {Logger: quiet, Tracer: tp.Tracer("bench")},
	}
}

// BenchmarkTurnTraced is BenchmarkTurn's 200-token turn at the end of a
// thread of 10 turns on Postgres, with traces off and on: a run's
// invoke_agent and chat spans.
func BenchmarkTurnTraced(b *testing.B) {
	for _, name := range []string{"traces=off", "traces=on"} {
		b.Run(name, func(b *testing.B) {
			cfg := tracers(b)[name]
			st := store.New(pgtest.Pool(b))
			svc := engine.New(st, stream.New[thread.Event](1024), builtinModels{builtin.NewBuiltin(200, 0)}, st, cfg)
			svc.Start()
			b.Cleanup(func() { svc.Shutdown(context.Background()) })
			tid := uuid.New()
			var leaf uuid.UUID
			for range 10 {
				leaf, _ = turn(b, svc, tid, leaf)
			}
			b.ReportAllocs()
			b.ResetTimer()
			tokens := 0
			for b.Loop() {
				_, n := turn(b, svc, tid, leaf)
				tokens += n
			}
			b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}

// BenchmarkAgentTraced is an agent run of seven tool steps and a last one
// (eight chat spans and seven execute_tool spans when on) on the
// in-memory store, where the spans' cost is not hidden by Postgres.
func BenchmarkAgentTraced(b *testing.B) {
	for _, name := range []string{"traces=off", "traces=on"} {
		b.Run(name, func(b *testing.B) {
			m := &stepClock{toolSteps: 7}
			reg := tool.NewRegistry(0)
			if err := reg.Add(m.noop()); err != nil {
				b.Fatal(err)
			}
			cfg := tracers(b)[name]
			cfg.Tools, cfg.StartLinger = reg, -1
			svc := engine.New(threadtest.New(), stream.New[thread.Event](1024), models{m: m}, nil, cfg)
			svc.Start()
			b.Cleanup(func() { svc.Shutdown(context.Background()) })
			b.ReportAllocs()
			tokens := 0
			for b.Loop() {
				m.mu.Lock()
				m.starts, m.returns = m.starts[:0], m.returns[:0]
				m.mu.Unlock()
				r, _, err := svc.StartRun(context.Background(), "local", uuid.New(), thread.RunRequest{Message: msg("go")})
				if err != nil {
					b.Fatal(err)
				}
				if err := svc.FollowRun(context.Background(), "local", r, 0, func(ev thread.Event, _ bool) error {
					if ev.Type == thread.KindToken {
						tokens++
					}
					return nil
				}); err != nil {
					b.Fatal(fmt.Errorf("follow: %w", err))
				}
			}
			b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}
