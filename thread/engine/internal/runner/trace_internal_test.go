package runner

import (
	"context"
	"testing"

	"github.com/google/uuid"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/threadline/threadline/thread"
)

type dropSpans struct{}

func (dropSpans) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (dropSpans) Shutdown(context.Context) error                             { return nil }

// BenchmarkRunSpans is the spans of one agent run of one step with two
// tool calls (invoke_agent, chat, two execute_tool) alone: with traces off
// it allocates nothing.
func BenchmarkRunSpans(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(dropSpans{}))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	r := &thread.Run{ID: uuid.New(), ThreadID: uuid.New(), Model: "openai:gpt-4o"}
	for name, cfg := range map[string]Config{"traces=off": {}, "traces=on": {Tracer: tp.Tracer("bench")}} {
		b.Run(name, func(b *testing.B) {
			s := &Runner{cfg: cfg}
			b.ReportAllocs()
			for b.Loop() {
				ctx, run := s.startRunSpan(context.Background(), r)
				sctx, chat := s.startChatSpan(ctx, r)
				endChatSpan(ctx, chat, thread.ModelResult{PromptTokens: 10, CompletionTokens: 20, StopReason: thread.StopToolCalls}, nil)
				for _, c := range []pendingCall{{id: "c1", name: "calculator"}, {id: "c2", name: "clock"}} {
					_, span := s.startToolSpan(sctx, c)
					endToolSpan(sctx, span, thread.ToolOutput{})
				}
				endRunSpan(run, thread.RunSucceeded, thread.ModelResult{PromptTokens: 10, CompletionTokens: 20}, nil)
				run.End()
			}
		})
	}
}
