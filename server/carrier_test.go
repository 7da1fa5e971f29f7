package server

import (
	"context"
	"net/http"
	"testing"

	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// TestHeaderCarrierRoundTrip: what the propagators write through
// headerCarrier is an ordinary canonical header on the wire, and reads back.
func TestHeaderCarrierRoundTrip(t *testing.T) {
	prop := propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 2}, SpanID: trace.SpanID{3}, TraceFlags: trace.FlagsSampled})
	m, err := baggage.NewMemberRaw("nemo.gym.rollout.id", "r-1")
	if err != nil {
		t.Fatal(err)
	}
	b, err := baggage.New(m)
	if err != nil {
		t.Fatal(err)
	}
	ctx := baggage.ContextWithBaggage(trace.ContextWithSpanContext(context.Background(), sc), b)

	h := http.Header{}
	prop.Inject(ctx, headerCarrier(h))
	if got, want := h.Get("traceparent"), "00-01020000000000000000000000000000-0300000000000000-01"; got != want {
		t.Errorf("traceparent on the wire %q, want %q", got, want)
	}
	if got := h.Get("Baggage"); got != "nemo.gym.rollout.id=r-1" {
		t.Errorf("baggage on the wire %q", got)
	}
	for k := range h {
		if k != http.CanonicalHeaderKey(k) {
			t.Errorf("header key %q is not canonical", k)
		}
	}

	back := prop.Extract(context.Background(), headerCarrier(h))
	if got := trace.SpanContextFromContext(back); got.TraceID() != sc.TraceID() || got.SpanID() != sc.SpanID() || !got.IsRemote() {
		t.Errorf("extracted %v, want %v (remote)", got, sc)
	}
	if v := baggage.FromContext(back).Member("nemo.gym.rollout.id").Value(); v != "r-1" {
		t.Errorf("extracted baggage value %q", v)
	}

	// Any other key goes through http.Header as usual.
	headerCarrier(h).Set("x-other", "v")
	if h.Get("X-Other") != "v" || headerCarrier(h).Get("x-other") != "v" {
		t.Errorf("other header: %v", h)
	}
}
