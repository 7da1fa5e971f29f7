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
// error handler. Injection is the SDK propagator's.
type requestBaggage struct{ propagation.Baggage }

var _ propagation.TextMapPropagator = requestBaggage{}

// Extract returns ctx with the baggage of carrier's well-formed baggage
// headers; ctx unchanged when there is none.
func (requestBaggage) Extract(ctx context.Context, carrier propagation.TextMapCarrier) context.Context {
	var values []string
	if vg, ok := carrier.(propagation.ValuesGetter); ok {
		values = vg.Values("baggage")
	} else if v := carrier.Get("baggage"); v != "" {
		values = []string{v}
	}
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
