package runner

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/threadline/threadline/checkpoint/errcode"
	"github.com/threadline/threadline/thread"
)

// Runs as OpenTelemetry spans, after the GenAI semantic conventions of
// semconv v1.41.0 (https://opentelemetry.io/docs/specs/semconv/gen-ai/):
// a run is one "invoke_agent threadline" span; each model call (a chat
// model's reply, an agent's step) a "chat {model}" child of it; each tool
// call an "execute_tool {tool}" child of the step that asked for it
// (parallel calls are siblings), or of the run for the calls a
// continuation runs before its first step. Without a tracer every span is
// the noop tracer's: nothing is allocated and no attribute is built.

// agentName names Threadline's own agent loop in its spans.
const agentName = "threadline"

// Threadline's own span attributes.
const (
	attrRunID     = attribute.Key("threadline.run_id")
	attrThreadID  = attribute.Key("threadline.thread_id")
	attrRunStatus = attribute.Key("threadline.run.status")
)

// noSpan is the noop tracer's span, what every span is without a tracer:
// it records nothing, and starting it costs nothing (no context is made).
var noSpan = func() trace.Span {
	_, span := noop.NewTracerProvider().Tracer("").Start(context.Background(), "")
	return span
}()

// start starts a span of kind named name under ctx's span.
func (s *Runner) start(ctx context.Context, name string, kind trace.SpanKind) (context.Context, trace.Span) {
	if s.cfg.Tracer == nil {
		return ctx, noSpan
	}
	return s.cfg.Tracer.Start(ctx, name, trace.WithSpanKind(kind))
}

// startRunSpan starts run r's invoke_agent span.
func (s *Runner) startRunSpan(ctx context.Context, r *thread.Run) (context.Context, trace.Span) {
	ctx, span := s.start(ctx, "invoke_agent "+agentName, trace.SpanKindInternal)
	if span.IsRecording() {
		provider, reqModel := modelParts(r.Model)
		span.SetAttributes(semconv.GenAIOperationNameInvokeAgent, semconv.GenAIAgentName(agentName),
			semconv.GenAIProviderNameKey.String(provider), semconv.GenAIRequestModel(reqModel),
			semconv.GenAIConversationID(r.ThreadID.String()),
			attrRunID.String(r.ID.String()), attrThreadID.String(r.ThreadID.String()))
	}
	return ctx, span
}

// endRunSpan sets how the run ended on its span: its status, usage and
// error (error.type is the run's error code).
func endRunSpan(span trace.Span, status thread.RunStatus, res thread.ModelResult, runErr *thread.RunError) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attrRunStatus.String(string(status)),
		semconv.GenAIUsageInputTokens(res.PromptTokens), semconv.GenAIUsageOutputTokens(res.CompletionTokens))
	if res.Model != "" {
		span.SetAttributes(semconv.GenAIResponseModel(res.Model))
	}
	if runErr != nil {
		spanError(span, string(runErr.Code), runErr.Message)
	}
}

// failRunSpan marks a run span whose run ended without its end being its
// own to write (errType says why).
func failRunSpan(span trace.Span, errType, msg string) {
	if span.IsRecording() {
		spanError(span, errType, msg)
	}
}

// startChatSpan starts the span of one model call of run r.
func (s *Runner) startChatSpan(ctx context.Context, r *thread.Run) (context.Context, trace.Span) {
	if s.cfg.Tracer == nil {
		return ctx, noSpan
	}
	provider, reqModel := modelParts(r.Model)
	ctx, span := s.start(ctx, "chat "+reqModel, trace.SpanKindClient)
	if span.IsRecording() {
		span.SetAttributes(semconv.GenAIOperationNameChat, semconv.GenAIProviderNameKey.String(provider),
			semconv.GenAIRequestModel(reqModel), semconv.GenAIConversationID(r.ThreadID.String()),
			attrRunID.String(r.ID.String()), attrThreadID.String(r.ThreadID.String()))
	}
	return ctx, span
}

// endChatSpan ends a model call's span with its usage, finish reason and
// error. A call stopped by the run's cancel is not an error.
func endChatSpan(ctx context.Context, span trace.Span, res thread.ModelResult, err error) {
	defer span.End()
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(semconv.GenAIUsageInputTokens(res.PromptTokens), semconv.GenAIUsageOutputTokens(res.CompletionTokens))
	if res.Model != "" {
		span.SetAttributes(semconv.GenAIResponseModel(res.Model))
	}
	switch {
	case err != nil && ctx.Err() != nil:
		span.SetAttributes(semconv.GenAIResponseFinishReasons("cancelled"))
	case err != nil:
		errType, msg := string(errcode.ModelError), err.Error()
		if e, ok := errcode.As(err); ok {
			errType, msg = string(e.Code), e.Message
		}
		spanError(span, errType, msg)
	default:
		span.SetAttributes(semconv.GenAIResponseFinishReasons(stepFinishReason(res)))
	}
}

// startToolSpan starts the span of one server tool call.
func (s *Runner) startToolSpan(ctx context.Context, c pendingCall) (context.Context, trace.Span) {
	if s.cfg.Tracer == nil {
		return ctx, noSpan
	}
	ctx, span := s.start(ctx, "execute_tool "+c.name, trace.SpanKindInternal)
	if span.IsRecording() {
		span.SetAttributes(semconv.GenAIOperationNameExecuteTool, semconv.GenAIToolName(c.name),
			semconv.GenAIToolCallID(c.id), semconv.GenAIToolTypeKey.String("function"))
	}
	return ctx, span
}

// endToolSpan ends a tool call's span: a result the tool marked as an
// error is an error of type tool_error (its value, which is content, is
// not recorded); a call the run's cancel stopped is not.
func endToolSpan(ctx context.Context, span trace.Span, res thread.ToolOutput) {
	if res.IsError && ctx.Err() == nil && span.IsRecording() {
		spanError(span, "tool_error", "the tool answered with an error")
	}
	span.End()
}

func spanError(span trace.Span, errType, msg string) {
	span.SetAttributes(semconv.ErrorTypeKey.String(errType))
	span.SetStatus(codes.Error, msg)
}

// modelParts splits a model name as runs name it ("openai:gpt-4o") into
// its provider and the provider's model name; a name without a provider
// (the built-in models, a models file's own names) is Threadline's.
func modelParts(name string) (provider, model string) {
	p, m, ok := strings.Cut(name, ":")
	if !ok {
		return agentName, name
	}
	switch p {
	case "openai":
		return semconv.GenAIProviderNameOpenAI.Value.AsString(), m
	case "anthropic":
		return semconv.GenAIProviderNameAnthropic.Value.AsString(), m
	case "builtin":
		return agentName, m
	case "googleai":
		return semconv.GenAIProviderNameGCPGemini.Value.AsString(), m
	}
	return p, m
}

// stepFinishReason is how a step that returned ended, in the conventions'
// spelling: a step that stopped with calls to run called tools, whatever
// stop its model named.
func stepFinishReason(res thread.ModelResult) string {
	if len(res.ToolCalls) > 0 && (res.StopReason == thread.StopDone || res.StopReason == "") {
		return "tool_call"
	}
	return finishReason(res.StopReason)
}

// finishReason is a step's stop reason in the conventions' spelling.
func finishReason(stop string) string {
	switch stop {
	case thread.StopToolCalls:
		return "tool_call"
	case thread.StopContentFilter:
		return "content_filter"
	case "":
		return thread.StopDone
	}
	return stop
}
