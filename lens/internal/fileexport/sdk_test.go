package fileexport

import (
	"context"

	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// unnamedScope stands in for the empty tracer name: the SDK gives an
// unnamed tracer a name of its own, and the tests pin how the encoder
// writes an empty one. testSpan puts the empty name back.
const unnamedScope = "\x00unnamed"

// withScope is an ended span whose scope is replaced.
type withScope struct {
	sdktrace.ReadOnlySpan
	scope instrumentation.Scope
}

func (s withScope) InstrumentationScope() instrumentation.Scope { return s.scope }

// testSpan returns s, with the empty scope name restored where the test
// asked for one.
func testSpan(s sdktrace.ReadOnlySpan) sdktrace.ReadOnlySpan {
	if sc := s.InstrumentationScope(); sc.Name == unnamedScope {
		sc.Name = ""
		return withScope{s, sc}
	}
	return s
}

// testProvider is an SDK tracer provider that samples every span and
// hands the ended ones to procs.
type testProvider struct{ *sdktrace.TracerProvider }

func newTestProvider(procs ...sdktrace.SpanProcessor) testProvider {
	opts := []sdktrace.TracerProviderOption{sdktrace.WithSampler(sdktrace.AlwaysSample())}
	for _, p := range procs {
		opts = append(opts, sdktrace.WithSpanProcessor(p))
	}
	return testProvider{sdktrace.NewTracerProvider(opts...)}
}

// Tracer is the SDK's, except that an empty name stays empty (see
// unnamedScope).
func (p testProvider) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	if name == "" {
		name = unnamedScope
	}
	return p.TracerProvider.Tracer(name, opts...)
}

// endOnly gives a test processor the span-processor methods it ignores.
type endOnly struct{}

func (endOnly) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (endOnly) Shutdown(context.Context) error                  { return nil }
func (endOnly) ForceFlush(context.Context) error                { return nil }

// collectLens is a span processor that hands every ended span to a func.
type collectLens func(sdktrace.ReadOnlySpan)

func (c collectLens) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (c collectLens) OnEnd(s sdktrace.ReadOnlySpan)                   { c(testSpan(s)) }
func (collectLens) Shutdown(context.Context) error                    { return nil }
func (collectLens) ForceFlush(context.Context) error                  { return nil }
