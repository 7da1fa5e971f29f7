package otlpenc

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/gymlens/gymlens/lens/internal/tracer"
)

// capture is an OTLP trace client that keeps a copy of what it is asked
// to send: the SDK exporter's mapping, taken as the reference.
type capture struct {
	mu  sync.Mutex
	got []*tracepb.ResourceSpans
}

func (c *capture) Start(context.Context) error { return nil }
func (c *capture) Stop(context.Context) error  { return nil }
func (c *capture) UploadTraces(_ context.Context, rs []*tracepb.ResourceSpans) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = nil
	for _, r := range rs {
		c.got = append(c.got, proto.Clone(r).(*tracepb.ResourceSpans))
	}
	return nil
}

type collect []*tracer.Span

func (c *collect) OnEnd(s *tracer.Span) { *c = append(*c, s) }

// batch starts and ends spans covering what the mapping has to handle:
// every attribute kind, two scopes, remote and local parents, events,
// links with attributes and trace state, statuses, over-limit drops.
func batch(t *testing.T, variant int) []*tracer.Span {
	t.Helper()
	var c collect
	res := resource.NewSchemaless(attribute.String("service.name", "enc"), attribute.Int("n", variant))
	p := tracer.NewProvider(res, &c)
	main := p.Tracer("main", trace.WithInstrumentationVersion("1"), trace.WithSchemaURL("https://s"))
	other := p.Tracer("other", trace.WithInstrumentationAttributes(attribute.String("lib", "x")))
	ts, err := trace.ParseTraceState("vendor=v")
	if err != nil {
		t.Fatal(err)
	}
	remote := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{byte(variant + 1), 2}, SpanID: trace.SpanID{3},
		TraceFlags: trace.FlagsSampled, TraceState: ts, Remote: true})
	t0 := time.Unix(1700000000, int64(variant))

	ctx, root := main.Start(trace.ContextWithRemoteSpanContext(context.Background(), remote), fmt.Sprint("root", variant),
		trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(t0),
		trace.WithAttributes(
			attribute.String("s", "v"), attribute.Int64("i", -7), attribute.Float64("f", math.Inf(1)), attribute.Bool("b", true),
			attribute.StringSlice("ss", []string{"a", ""}), attribute.Int64Slice("is", []int64{1, 2}),
			attribute.Float64Slice("fs", []float64{0.5}), attribute.BoolSlice("bs", []bool{true, false}),
		),
		trace.WithLinks(trace.Link{SpanContext: remote, Attributes: []attribute.KeyValue{attribute.String("why", "job")}}))
	root.AddEvent("retry", trace.WithTimestamp(t0.Add(time.Millisecond)), trace.WithAttributes(attribute.Int("n", 1)))
	root.RecordError(errors.New("boom"), trace.WithTimestamp(t0.Add(2*time.Millisecond)))
	root.SetStatus(codes.Error, "boom")

	_, child := other.Start(ctx, "child", trace.WithSpanKind(trace.SpanKindClient), trace.WithTimestamp(t0))
	child.SetStatus(codes.Ok, "")
	child.End(trace.WithTimestamp(t0.Add(3 * time.Millisecond)))

	_, bare := main.Start(context.Background(), "bare", trace.WithTimestamp(t0))
	for i := range tracer.MaxAttributes + variant + 1 {
		bare.SetAttributes(attribute.Int(fmt.Sprint("k", i), i))
	}
	bare.End(trace.WithTimestamp(t0.Add(time.Second)))
	for range variant {
		_, extra := other.Start(ctx, "extra", trace.WithSpanKind(trace.SpanKindProducer), trace.WithTimestamp(t0))
		extra.End(trace.WithTimestamp(t0))
	}
	root.End(trace.WithTimestamp(t0.Add(5 * time.Millisecond)))
	return c
}

func sdkMapping(t *testing.T, spans []*tracer.Span) []*tracepb.ResourceSpans {
	t.Helper()
	c := &capture{}
	exp, err := otlptrace.New(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	ro := make([]sdktrace.ReadOnlySpan, len(spans))
	for i, s := range spans {
		ro[i] = s.Snapshot()
	}
	if err := exp.ExportSpans(context.Background(), ro); err != nil {
		t.Fatal(err)
	}
	// One deliberate difference: the SDK exporter leaves a link's trace
	// state out; the encoder sends it, as the protocol has a field for it.
	for _, rs := range c.got {
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				for _, l := range sp.Links {
					for _, s := range spans {
						for _, sl := range s.Links() {
							if [16]byte(l.TraceId) == sl.SpanContext.TraceID() && [8]byte(l.SpanId) == sl.SpanContext.SpanID() {
								l.TraceState = sl.SpanContext.TraceState().String()
							}
						}
					}
				}
			}
		}
	}
	return c.got
}

func same(t *testing.T, what string, got, want []*tracepb.ResourceSpans) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d resource groups, the SDK exporter sends %d", what, len(got), len(want))
	}
	for i := range got {
		if !proto.Equal(got[i], want[i]) {
			t.Errorf("%s: resource group %d differs from the SDK exporter's\n got %v\nwant %v", what, i, got[i], want[i])
		}
	}
}

// The mapping must be the SDK exporter's, message for message, also when
// the encoder reuses the objects of a previous, different batch.
func TestEncodeMatchesTheSDKExporter(t *testing.T) {
	var e Encoder
	a, b := batch(t, 0), batch(t, 3)
	wantA, wantB := sdkMapping(t, a), sdkMapping(t, b)
	same(t, "first batch", e.Encode(a), wantA)
	same(t, "second batch, reusing the first's objects", e.Encode(b), wantB)
	same(t, "first batch again", e.Encode(a), wantA)
	if got := e.Encode(nil); len(got) != 0 {
		t.Errorf("empty batch: %d resource groups", len(got))
	}
}

func TestEncodeReusesItsObjects(t *testing.T) {
	var e Encoder
	spans := batch(t, 1)
	e.Encode(spans)
	allocs := testing.AllocsPerRun(20, func() { e.Encode(spans) })
	// The error event's attributes and the slice closures are all that may
	// allocate; a span's own objects do not.
	if allocs > 10 {
		t.Errorf("%.0f allocations per Encode of %d spans once warm", allocs, len(spans))
	}
}

func BenchmarkEncode(b *testing.B) {
	var c collect
	p := tracer.NewProvider(resource.NewSchemaless(attribute.String("service.name", "bench")), &c)
	tr := p.Tracer("bench")
	parent := trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled, Remote: true}))
	for range 1024 {
		_, s := tr.Start(parent, "POST /verify", trace.WithSpanKind(trace.SpanKindServer))
		s.SetAttributes(attribute.String("url.scheme", "http"), attribute.String("http.route", "/verify"),
			attribute.String("http.request.method", "POST"), attribute.String("url.path", "/verify"),
			attribute.Int("http.response.status_code", 200))
		s.End()
	}
	spans := []*tracer.Span(c)
	b.Run("peer/sdk-exporter", func(b *testing.B) {
		exp, err := otlptrace.New(context.Background(), &discardClient{})
		if err != nil {
			b.Fatal(err)
		}
		ro := make([]sdktrace.ReadOnlySpan, len(spans))
		b.ReportAllocs()
		for b.Loop() {
			for i, s := range spans {
				ro[i] = s.Snapshot()
			}
			_ = exp.ExportSpans(context.Background(), ro)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(spans)), "ns/span")
	})
	b.Run("encoder", func(b *testing.B) {
		var e Encoder
		c := &discardClient{}
		b.ReportAllocs()
		for b.Loop() {
			_ = c.UploadTraces(context.Background(), e.Encode(spans))
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(spans)), "ns/span")
	})
}

// discardClient marshals what it is given, as the real clients do, and
// drops it.
type discardClient struct{}

func (*discardClient) Start(context.Context) error { return nil }
func (*discardClient) Stop(context.Context) error  { return nil }
func (*discardClient) UploadTraces(_ context.Context, rs []*tracepb.ResourceSpans) error {
	for _, r := range rs {
		if _, err := proto.Marshal(r); err != nil {
			return err
		}
	}
	return nil
}
