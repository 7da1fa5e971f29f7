package tracer

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// sdkDiscard is an SDK span processor that drops every span.
type sdkDiscard struct{}

func (sdkDiscard) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (sdkDiscard) OnEnd(sdktrace.ReadOnlySpan)                     {}
func (sdkDiscard) Shutdown(context.Context) error                  { return nil }
func (sdkDiscard) ForceFlush(context.Context) error                { return nil }

// discard is a lens processor that drops every span.
type discard struct{}

func (discard) OnEnd(*Span) {}

// serverAttrs are the attributes a fleet SERVER span carries.
var serverAttrs = []attribute.KeyValue{
	attribute.String("url.scheme", "http"),
	attribute.String("http.route", "/verify"),
	attribute.String("http.request.method", "POST"),
	attribute.String("url.path", "/verify"),
	attribute.Int("http.response.status_code", 200),
}

// BenchmarkSpan is one SERVER span's life as the ingress lives it: start
// under a remote parent, five attributes, end, handed to a processor that
// drops it. The peer is the OpenTelemetry SDK's tracer with the sampler
// lens used (parent-based, always on).
func BenchmarkSpan(b *testing.B) {
	parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2},
		TraceFlags: trace.FlagsSampled, Remote: true})
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), parent)
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)}
	run := func(b *testing.B, tr trace.Tracer) {
		b.ReportAllocs()
		for b.Loop() {
			_, s := tr.Start(ctx, "POST /verify", opts...)
			s.SetAttributes(serverAttrs...)
			s.End()
		}
	}
	b.Run("peer/sdk", func(b *testing.B) {
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sdkDiscard{}),
			sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())))
		run(b, tp.Tracer("bench"))
	})
	b.Run("lens", func(b *testing.B) {
		run(b, NewProvider(nil, discard{}).Tracer("bench"))
	})
}
