package lens

import (
	"context"
	"net/http"
	"reflect"
	"testing"

	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// traceparentCases are headers a propagator meets: what fleets send, and
// every way a value can be off by a little.
var traceparentCases = []struct{ traceparent, tracestate string }{
	{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", ""},
	{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", ""},
	{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-02", ""},
	{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03", ""},
	{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-04", ""}, // reserved flag
	{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"},
	{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "not a tracestate"},
	{"00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01", ""},   // uppercase
	{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", ""},   // zero trace id
	{"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", ""},   // zero span id
	{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x", ""}, // version 00 with more
	{"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x", ""}, // a later version may have more
	{"cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09", ""},
	{"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", ""},
	{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7_01", ""},
	{"00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01", ""},
	{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g", ""},
	{"", "congo=t61rcWkgMzE"},
	{"", ""},
}

// propagateBoth extracts traceparent and tracestate with lens's
// propagator and the SDK's, each from its own http.Header, then injects
// what each extracted into a fresh header. It returns both span contexts
// and both injected headers.
func propagateBoth(traceparent, tracestate string) (ours, sdks trace.SpanContext, ourOut, sdkOut http.Header) {
	in := func() http.Header {
		h := http.Header{}
		if traceparent != "" {
			h.Set("traceparent", traceparent)
		}
		if tracestate != "" {
			h.Set("tracestate", tracestate)
		}
		return h
	}
	ctxOurs := traceContext{}.Extract(context.Background(), propagation.HeaderCarrier(in()))
	ctxSDK := propagation.TraceContext{}.Extract(context.Background(), propagation.HeaderCarrier(in()))
	ourOut, sdkOut = http.Header{}, http.Header{}
	traceContext{}.Inject(ctxOurs, propagation.HeaderCarrier(ourOut))
	propagation.TraceContext{}.Inject(ctxSDK, propagation.HeaderCarrier(sdkOut))
	return trace.SpanContextFromContext(ctxOurs), trace.SpanContextFromContext(ctxSDK), ourOut, sdkOut
}

// TestTraceContextAgreesWithSDK: for every case, lens's propagator extracts
// the span context the SDK's does and injects the same headers.
func TestTraceContextAgreesWithSDK(t *testing.T) {
	for _, c := range traceparentCases {
		ours, sdks, ourOut, sdkOut := propagateBoth(c.traceparent, c.tracestate)
		if !ours.Equal(sdks) {
			t.Errorf("%q, %q: extracted %+v, the SDK %+v", c.traceparent, c.tracestate, ours, sdks)
		}
		if !reflect.DeepEqual(ourOut, sdkOut) {
			t.Errorf("%q, %q: injected %v, the SDK %v", c.traceparent, c.tracestate, ourOut, sdkOut)
		}
	}
}

// FuzzTraceContext: whatever the headers hold, lens's propagator and the
// SDK's agree on what they extract and on what they inject from it.
func FuzzTraceContext(f *testing.F) {
	for _, c := range traceparentCases {
		f.Add(c.traceparent, c.tracestate)
	}
	f.Fuzz(func(t *testing.T, traceparent, tracestate string) {
		ours, sdks, ourOut, sdkOut := propagateBoth(traceparent, tracestate)
		if !ours.Equal(sdks) {
			t.Fatalf("extracted %+v, the SDK %+v", ours, sdks)
		}
		if !reflect.DeepEqual(ourOut, sdkOut) {
			t.Fatalf("injected %v, the SDK %v", ourOut, sdkOut)
		}
	})
}

// TestTraceContextForwardsIncomingValue: a call made under an extracted
// context, with no span in between, sends the incoming value itself; the
// outgoing header does not share the incoming one's storage.
func TestTraceContextForwardsIncomingValue(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"
	in := http.Header{"Traceparent": {tp}}
	ctx := traceContext{}.Extract(context.Background(), propagation.HeaderCarrier(in))
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || !sc.IsRemote() || sc.IsSampled() {
		t.Fatalf("extracted %+v, want a valid remote unsampled span context", sc)
	}
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		t.Error("the extracted span records")
	}
	out := http.Header{}
	traceContext{}.Inject(ctx, propagation.HeaderCarrier(out))
	if got := out.Values("Traceparent"); len(got) != 1 || got[0] != tp {
		t.Fatalf("injected %q, want %q", got, tp)
	}
	out.Add("Traceparent", "x")
	if got := in.Values("Traceparent"); len(got) != 1 || got[0] != tp {
		t.Errorf("adding to the outgoing header changed the incoming one: %q", got)
	}
	if n := testing.AllocsPerRun(100, func() {
		traceContext{}.Inject(ctx, propagation.HeaderCarrier(out))
	}); n != 0 {
		t.Errorf("forwarding the incoming value allocates %v times", n)
	}

	// A span of this process beneath it is what goes on, as the SDK sends.
	child := trace.NewSpanContext(trace.SpanContextConfig{TraceID: sc.TraceID(), SpanID: trace.SpanID{9}})
	out = http.Header{}
	traceContext{}.Inject(trace.ContextWithSpanContext(ctx, child), propagation.HeaderCarrier(out))
	if got, want := out.Get("Traceparent"), "00-4bf92f3577b34da6a3ce929d0e0e4736-0900000000000000-00"; got != want {
		t.Errorf("injected %q under a child span, want %q", got, want)
	}
}

// TestTraceparentValueIsTheSDKs: for every flag byte, TraceparentValue is
// the value the SDK's propagator injects for the same span context.
func TestTraceparentValueIsTheSDKs(t *testing.T) {
	for f := range 256 {
		sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{0xab, 1}, SpanID: trace.SpanID{0xcd, 2},
			TraceFlags: trace.TraceFlags(f)})
		h := http.Header{}
		propagation.TraceContext{}.Inject(trace.ContextWithSpanContext(context.Background(), sc), propagation.HeaderCarrier(h))
		if got, want := TraceparentValue(sc), h.Get("traceparent"); got != want {
			t.Errorf("flags %#x: %q, the SDK %q", f, got, want)
		}
	}
}

// TestPropagatorsOtherCarriers: a carrier that is not an http.Header gets
// the same values through its Get and Set, for both propagators lens
// installs.
func TestPropagatorsOtherCarriers(t *testing.T) {
	prop := propagation.NewCompositeTextMapPropagator(traceContext{}, requestBaggage{})
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 2}, SpanID: trace.SpanID{3},
		TraceFlags: trace.FlagsSampled, Remote: true})
	m, err := baggage.NewMemberRaw("nemo.gym.rollout.id", "r-1")
	if err != nil {
		t.Fatal(err)
	}
	b, err := baggage.New(m)
	if err != nil {
		t.Fatal(err)
	}
	ctx := baggage.ContextWithBaggage(trace.ContextWithRemoteSpanContext(context.Background(), sc), b)
	for name, carrier := range map[string]propagation.TextMapCarrier{
		"map": propagation.MapCarrier{}, "header": propagation.HeaderCarrier(http.Header{}),
	} {
		prop.Inject(ctx, carrier)
		if got, want := carrier.Get("traceparent"), "00-01020000000000000000000000000000-0300000000000000-01"; got != want {
			t.Errorf("%s: traceparent %q, want %q", name, got, want)
		}
		if got := carrier.Get("baggage"); got != "nemo.gym.rollout.id=r-1" {
			t.Errorf("%s: baggage %q", name, got)
		}
		back := prop.Extract(context.Background(), carrier)
		if got := trace.SpanContextFromContext(back); !got.Equal(sc) {
			t.Errorf("%s: extracted %+v, want %+v", name, got, sc)
		}
		if v := baggage.FromContext(back).Member("nemo.gym.rollout.id").Value(); v != "r-1" {
			t.Errorf("%s: extracted baggage value %q", name, v)
		}
	}
	h := http.Header{}
	prop.Inject(ctx, propagation.HeaderCarrier(h))
	for k := range h {
		if k != http.CanonicalHeaderKey(k) {
			t.Errorf("header key %q is not canonical", k)
		}
	}
}

// BenchmarkTraceContext: one extraction from a request's http.Header, and
// one injection into an outgoing one, by the SDK's propagator and lens's;
// "forward" injects under the extracted context itself (a sampled-out
// trace), "format" under a span of this process.
//
//	go test -run '^$' -bench BenchmarkTraceContext -benchmem ./lens/
func BenchmarkTraceContext(b *testing.B) {
	in := http.Header{"Traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"}, "Content-Type": {"application/json"}}
	local := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}})
	for _, p := range []struct {
		name string
		prop propagation.TextMapPropagator
	}{{"sdk", propagation.TraceContext{}}, {"lens", traceContext{}}} {
		b.Run(p.name+"/extract", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if !trace.SpanContextFromContext(p.prop.Extract(context.Background(), propagation.HeaderCarrier(in))).IsValid() {
					b.Fatal("nothing extracted")
				}
			}
		})
		ctx := p.prop.Extract(context.Background(), propagation.HeaderCarrier(in))
		for name, ctx := range map[string]context.Context{"forward": ctx, "format": trace.ContextWithSpanContext(ctx, local)} {
			b.Run(p.name+"/inject-"+name, func(b *testing.B) {
				b.ReportAllocs()
				out := http.Header{}
				for b.Loop() {
					p.prop.Inject(ctx, propagation.HeaderCarrier(out))
				}
			})
		}
	}
}
