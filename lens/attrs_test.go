package lens_test

import (
	"context"
	"fmt"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/gymlens/gymlens/lens"
)

// recordingTracer is a tracer of a real SDK provider whose ended spans land
// in the returned recorder.
func recordingTracer(t testing.TB, opts ...sdktrace.TracerProviderOption) (trace.Tracer, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(append(opts, sdktrace.WithSpanProcessor(rec))...)
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp.Tracer("attrs-test"), rec
}

func TestAttrsReachTheSpanInOrder(t *testing.T) {
	tr, rec := recordingTracer(t)
	_, span := tr.Start(context.Background(), "gathered")
	a := lens.NewAttrs()
	a.Add(attribute.String("a", "1"), attribute.Int("b", 2))
	a.Add()
	a.Add(attribute.Bool("c", true))
	if a.Len() != 3 {
		t.Fatalf("Len = %d after three attributes", a.Len())
	}
	a.SetOn(span)
	span.End()

	ended := rec.Ended()
	if len(ended) != 1 {
		t.Fatalf("%d spans ended, want 1", len(ended))
	}
	got := fmt.Sprint(ended[0].Attributes())
	want := fmt.Sprint([]attribute.KeyValue{attribute.String("a", "1"), attribute.Int("b", 2), attribute.Bool("c", true)})
	if got != want {
		t.Errorf("attributes %s, want %s", got, want)
	}
}

func TestAttrsFromThePoolStartEmpty(t *testing.T) {
	tr, rec := recordingTracer(t)
	// Many rounds, so that a pooled Attrs handed back by SetOn or Release
	// is handed out again (the pool keeps no promise for one round).
	for i := range 200 {
		a := lens.NewAttrs()
		if a.Len() != 0 {
			t.Fatalf("round %d: a pooled Attrs holds %d attributes", i, a.Len())
		}
		a.Add(attribute.Int("round", i))
		switch i % 3 {
		case 0:
			_, span := tr.Start(context.Background(), "r")
			a.SetOn(span)
			span.End()
		case 1:
			a.SetOn(nil) // releases only
		default:
			a.Release()
		}
	}
	for _, s := range rec.Ended() {
		if n := len(s.Attributes()); n != 1 {
			t.Errorf("span with %d attributes, want 1: %v", n, s.Attributes())
		}
	}
	if n := len(rec.Ended()); n != 67 {
		t.Errorf("%d spans ended, want 67", n)
	}
}

func TestAttrsHonourTheSpanLimits(t *testing.T) {
	limits := sdktrace.NewSpanLimits()
	limits.AttributeCountLimit = 4
	tr, rec := recordingTracer(t, sdktrace.WithRawSpanLimits(limits))
	_, span := tr.Start(context.Background(), "limited")
	a := lens.NewAttrs()
	for i := range 40 { // past the pool's capacity as well
		a.Add(attribute.Int(fmt.Sprintf("k%02d", i), i))
	}
	a.SetOn(span)
	span.End()
	s := rec.Ended()[0]
	if n := len(s.Attributes()); n != 4 {
		t.Errorf("%d attributes kept, want the limit 4", n)
	}
	if d := s.DroppedAttributes(); d != 36 {
		t.Errorf("%d attributes dropped, want 36", d)
	}
}

func TestAttrsOnANonRecordingSpan(t *testing.T) {
	tr, rec := recordingTracer(t, sdktrace.WithSampler(sdktrace.NeverSample()))
	_, span := tr.Start(context.Background(), "dropped")
	a := lens.NewAttrs()
	a.Add(attribute.String("k", "v"))
	a.SetOn(span)
	span.End()
	if n := len(rec.Ended()); n != 0 {
		t.Errorf("%d spans ended for a sampled-out trace", n)
	}
}

// BenchmarkSpanAttributes sets a server span's worth of attributes
// (seven) on a real SDK span: in the calls they become known in (the
// baseline), and gathered in an Attrs and set once.
func BenchmarkSpanAttributes(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(discardProcessor{}))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tr := tp.Tracer("attrs-bench")
	kv := []attribute.KeyValue{
		attribute.String("nemo.gym.rollout.id", "r-17"), attribute.String("http.route", "/verify"),
		attribute.String("http.request.method", "POST"), attribute.String("server.address", "127.0.0.1"),
		attribute.Int("server.port", 8000), attribute.String("url.path", "/verify"),
		attribute.Int("http.response.status_code", 200),
	}
	ctx := context.Background()
	b.Run("calls", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, span := tr.Start(ctx, "s")
			span.SetAttributes(kv[0])
			span.SetAttributes(kv[1:5]...)
			span.SetAttributes(kv[5])
			span.SetAttributes(kv[6])
			span.End()
		}
	})
	b.Run("attrs", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, span := tr.Start(ctx, "s")
			a := lens.NewAttrs()
			a.Add(kv[0])
			a.Add(kv[1:5]...)
			a.Add(kv[5])
			a.Add(kv[6])
			a.SetOn(span)
			span.End()
		}
	})
}

// discardProcessor is a span processor that keeps nothing.
type discardProcessor struct{}

func (discardProcessor) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (discardProcessor) OnEnd(sdktrace.ReadOnlySpan)                     {}
func (discardProcessor) Shutdown(context.Context) error                  { return nil }
func (discardProcessor) ForceFlush(context.Context) error                { return nil }
