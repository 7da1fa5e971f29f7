package lens

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
)

// maxBaggageBytes is the W3C Baggage limit on all of a request's baggage
// headers together.
const maxBaggageBytes = 8192

// requestBaggage is the W3C baggage propagator with its own reading of
// incoming headers. The SDK's propagator reports a malformed or oversized
// baggage header to the global error handler, which lens points at its
// export-error warning: a client's bad header then read as a telemetry
// export failure. Here such a header is what it is, a property of one
// incoming request: its bad members are dropped (all of it when it is
// over the W3C limits), a debug line says why, and nothing reaches the
// error handler. What it injects is what the SDK's propagator injects,
// written into an http.Header as traceContext writes (setHeader).
type requestBaggage struct{}

// Fields returns the header the propagator reads and writes.
func (requestBaggage) Fields() []string { return []string{baggageKey} }

// The W3C baggage header, as propagators and an http.Header spell it.
const (
	baggageKey       = "baggage"
	baggageCanonical = "Baggage"
)

// Inject sets carrier's baggage header to ctx's baggage, when it has any.
func (requestBaggage) Inject(ctx context.Context, carrier propagation.TextMapCarrier) {
	if v := baggage.FromContext(ctx).String(); v != "" {
		setHeader(carrier, baggageKey, baggageCanonical, []string{v})
	}
}

var _ propagation.TextMapPropagator = requestBaggage{}

// Extract returns ctx with the baggage of carrier's well-formed baggage
// headers; ctx unchanged when there is none.
func (requestBaggage) Extract(ctx context.Context, carrier propagation.TextMapCarrier) context.Context {
	values := headerValues(carrier, baggageKey, baggageCanonical)
	if len(values) == 0 {
		return ctx
	}
	b, err := parseBaggage(values)
	if err != nil {
		slog.Debug("incoming request: baggage dropped", "reason", err, "kept_members", b.Len())
	}
	if b.Len() == 0 {
		return ctx
	}
	return baggage.ContextWithBaggage(ctx, b)
}

// parseBaggage merges the members of every header value that parses; the
// error says what was dropped. Headers over the W3C limits are dropped
// whole.
func parseBaggage(values []string) (baggage.Baggage, error) {
	total := len(values) - 1 // the commas joining them
	for _, v := range values {
		total += len(v)
	}
	if total > maxBaggageBytes {
		return baggage.Baggage{}, fmt.Errorf("baggage headers of %d bytes, over the %d-byte limit", total, maxBaggageBytes)
	}
	var (
		members []baggage.Member
		errs    []error
	)
	for _, v := range values {
		if v == "" {
			continue
		}
		b, err := baggage.Parse(v)
		if err != nil {
			errs = append(errs, err)
		}
		members = append(members, b.Members()...)
	}
	b, err := baggage.New(members...)
	if err != nil {
		return baggage.Baggage{}, errors.Join(append(errs, err)...)
	}
	return b, errors.Join(errs...)
}
