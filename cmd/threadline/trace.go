package main

import (
	"context"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
)

// tracing is the process's trace export: runs' spans go over OTLP/HTTP
// when an OTLP endpoint is set (the SDK's own variables, see
// docs/operations.md "Traces"); otherwise there is no tracer provider and
// the engine records nothing.
type tracing struct {
	tp *sdktrace.TracerProvider // nil: off
}

// tracesOn reports whether getenv names an OTLP endpoint for traces and
// the SDK is not disabled.
func tracesOn(getenv func(string) string) bool {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") || getenv("OTEL_TRACES_EXPORTER") == "none" {
		return false
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// newTracing starts the OTLP/HTTP exporter when tracesOn. The exporter
// reads its endpoint, headers, timeout and compression from the
// environment, the resource OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
// (service.name defaults to threadline), the sampler OTEL_TRACES_SAMPLER.
func newTracing(ctx context.Context, getenv func(string) string) (*tracing, error) {
	if !tracesOn(getenv) {
		return &tracing{}, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	res, err := resource.New(ctx, resource.WithAttributes(semconv.ServiceName("threadline")),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		_ = exp.Shutdown(ctx)
		return nil, fmt.Errorf("trace resource: %w", err)
	}
	return &tracing{tp: sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))}, nil
}

// tracer is the engine's tracer: nil when off.
func (t *tracing) tracer() trace.Tracer {
	if t.tp == nil {
		return nil
	}
	return t.tp.Tracer("github.com/threadline/threadline/thread/engine")
}

// shutdown sends the spans not yet sent and stops the exporter.
func (t *tracing) shutdown(ctx context.Context) error {
	if t.tp == nil {
		return nil
	}
	if err := t.tp.Shutdown(ctx); err != nil {
		return fmt.Errorf("traces: %w", err)
	}
	return nil
}
