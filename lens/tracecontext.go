package lens

import (
	"context"
	"encoding/hex"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
	"go.opentelemetry.io/otel/trace/noop"
)

// The W3C Trace Context headers: the names propagators use, and their
// canonical spelling as keys of an http.Header.
const (
	traceparentKey       = "traceparent"
	traceparentCanonical = "Traceparent"
	tracestateKey        = "tracestate"
	tracestateCanonical  = "Tracestate"
)

// traceparentLen is the length of a version-00 traceparent value:
// "00-" 32 hex digits "-" 16 hex digits "-" 2 hex digits.
const traceparentLen = 55

// traceContext is the W3C Trace Context propagator lens installs. What it
// injects and extracts is what the SDK's propagation.TraceContext does,
// value for value; it differs in what that costs on the path every hop of
// a fleet takes:
//
//   - an http.Header carrier (propagation.HeaderCarrier) is read and
//     written under the canonical header names, with no canonicalisation
//     (and its allocation) per call;
//   - a version-00 traceparent with no tracestate, the only kind a fleet
//     sends, is parsed here, and the incoming value is kept beside the span
//     context (forwardSpan). A call made under that context, with no span
//     of this process in between (a trace the sampler dropped, or a group
//     that is off), sends the same value on, which is the one the SDK would
//     format, without formatting it or allocating for it;
//   - any other value (a later version, a tracestate) goes to the SDK's
//     propagator.
type traceContext struct{}

var _ propagation.TextMapPropagator = traceContext{}

// Fields returns the headers the propagator reads and writes.
func (traceContext) Fields() []string { return []string{traceparentKey, tracestateKey} }

// Extract returns ctx with the remote span context of carrier's
// traceparent (and tracestate) header; ctx unchanged when there is none or
// it is not valid.
func (traceContext) Extract(ctx context.Context, carrier propagation.TextMapCarrier) context.Context {
	tp := headerValues(carrier, traceparentKey, traceparentCanonical)
	if len(tp) == 0 || tp[0] == "" {
		return ctx
	}
	if ts := headerValues(carrier, tracestateKey, tracestateCanonical); len(ts) == 0 || ts[0] == "" {
		if sc, ok := parseTraceparent(tp[0]); ok {
			// The three-index slice keeps an Add to the outgoing header
			// from writing into the incoming request's array.
			return trace.ContextWithSpan(ctx, &forwardSpan{sc: sc, header: tp[:1:1]})
		}
	}
	return propagation.TraceContext{}.Extract(ctx, carrier)
}

// Inject sets carrier's traceparent (and tracestate) header from ctx's
// span context, when it is valid.
func (traceContext) Inject(ctx context.Context, carrier propagation.TextMapCarrier) {
	span := trace.SpanFromContext(ctx)
	if f, ok := span.(*forwardSpan); ok {
		setHeader(carrier, traceparentKey, traceparentCanonical, f.header)
		return
	}
	sc := span.SpanContext()
	if !sc.IsValid() {
		return
	}
	if ts := sc.TraceState().String(); ts != "" {
		setHeader(carrier, tracestateKey, tracestateCanonical, []string{ts})
	}
	setHeader(carrier, traceparentKey, traceparentCanonical, []string{TraceparentValue(sc)})
}

// forwardSpan is the span a request's extracted context carries: the
// caller's span context, not recording, as the SDK's remote span context
// (trace.ContextWithRemoteSpanContext) is, plus the traceparent value it
// came in, which Inject sends on unchanged.
type forwardSpan struct {
	embedded.Span
	sc     trace.SpanContext
	header []string // the incoming traceparent value, which TraceparentValue(sc) equals
}

var _ trace.Span = (*forwardSpan)(nil)

// SpanContext returns the caller's span context.
func (s *forwardSpan) SpanContext() trace.SpanContext { return s.sc }

// IsRecording is false: nothing of this process is recorded on it.
func (*forwardSpan) IsRecording() bool { return false }

// End does nothing, as every other method that would record.
func (*forwardSpan) End(...trace.SpanEndOption) {}

// AddEvent does nothing.
func (*forwardSpan) AddEvent(string, ...trace.EventOption) {}

// AddLink does nothing.
func (*forwardSpan) AddLink(trace.Link) {}

// RecordError does nothing.
func (*forwardSpan) RecordError(error, ...trace.EventOption) {}

// SetStatus does nothing.
func (*forwardSpan) SetStatus(codes.Code, string) {}

// SetName does nothing.
func (*forwardSpan) SetName(string) {}

// SetAttributes does nothing.
func (*forwardSpan) SetAttributes(...attribute.KeyValue) {}

// TracerProvider is a no-op provider, as a remote span context's is.
func (*forwardSpan) TracerProvider() trace.TracerProvider { return noop.NewTracerProvider() }

// hexValue maps a lowercase hexadecimal digit to its value, anything else
// to 0xff: the W3C format allows lowercase digits only.
var hexValue = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for i, c := range "0123456789abcdef" {
		t[c] = byte(i)
	}
	return t
}()

// parseTraceparent reads a version-00 traceparent value, as the SDK's
// propagator reads one: lowercase hex, no field after the flags, no flag
// but sampled (01) and random (02), a trace id and a span id not all
// zeros. It reports false for anything else, a later version included.
func parseTraceparent(v string) (trace.SpanContext, bool) {
	if len(v) != traceparentLen || v[0] != '0' || v[1] != '0' || v[2] != '-' || v[35] != '-' || v[52] != '-' {
		return trace.SpanContext{}, false
	}
	var scc trace.SpanContextConfig
	bad := decodeHex(scc.TraceID[:], v[3:35]) | decodeHex(scc.SpanID[:], v[36:52])
	var flags [1]byte
	bad |= decodeHex(flags[:], v[53:55])
	if bad&0xf0 != 0 || flags[0] > byte(trace.FlagsSampled|trace.FlagsRandom) {
		return trace.SpanContext{}, false
	}
	scc.TraceFlags, scc.Remote = trace.TraceFlags(flags[0]), true
	sc := trace.NewSpanContext(scc)
	return sc, sc.IsValid()
}

// decodeHex decodes src (2*len(dst) digits) into dst; the result has a
// high bit set when a digit was not lowercase hex.
func decodeHex(dst []byte, src string) byte {
	var bad byte
	for i := range dst {
		hi, lo := hexValue[src[2*i]], hexValue[src[2*i+1]]
		dst[i] = hi<<4 | lo
		bad |= hi | lo
	}
	return bad
}

// TraceparentValue is sc's W3C version-00 value, "00-<trace id>-<span
// id>-<flags>", with the flags the format defines (sampled, random) and no
// other: the traceparent header lens's propagator sends, and the format of
// a traceresponse header too. It is built in one allocation.
func TraceparentValue(sc trace.SpanContext) string {
	var b [traceparentLen]byte
	b[0], b[1], b[2], b[35], b[52] = '0', '0', '-', '-', '-'
	tid, sid := sc.TraceID(), sc.SpanID()
	hex.Encode(b[3:35], tid[:])
	hex.Encode(b[36:52], sid[:])
	hex.Encode(b[53:55], []byte{byte(sc.TraceFlags() & (trace.FlagsSampled | trace.FlagsRandom))})
	return string(b[:])
}

// headerValues returns carrier's values of the header name (key, as
// propagators spell it, canonical as an http.Header keys it): an
// http.Header is read under the canonical key directly, which is where
// http.Header.Get would look after canonicalising key.
func headerValues(carrier propagation.TextMapCarrier, key, canonical string) []string {
	switch c := carrier.(type) {
	case propagation.HeaderCarrier:
		return c[canonical]
	case propagation.ValuesGetter:
		return c.Values(key)
	}
	if v := carrier.Get(key); v != "" {
		return []string{v}
	}
	return nil
}

// setHeader sets carrier's header name to values (values[0] for a carrier
// that takes one string): an http.Header gets the slice under the
// canonical key, as http.Header.Set would store it.
func setHeader(carrier propagation.TextMapCarrier, key, canonical string, values []string) {
	if h, ok := carrier.(propagation.HeaderCarrier); ok {
		h[canonical] = values
		return
	}
	carrier.Set(key, values[0])
}
