package server

import (
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/trace"

	"github.com/gymlens/gymlens/lens"
)

// HeaderTraceResponse is the W3C Trace Context Level 2 response header,
// "00-<trace id>-<span id>-<flags>", in its canonical spelling: an agent
// answers /run with it, so a caller with no telemetry of its own still
// learns the rollout's trace id, and the rollout collector records that id.
const HeaderTraceResponse = "Traceresponse"

// SetTraceResponse sets h's traceresponse header to sc (lens.TraceparentValue),
// when sc is valid and this process's own. A remote span context, the
// caller's, is left out: the answer then comes from a process that recorded
// no span of the trace (it was sampled out, or its span groups are off), and
// the header would only repeat the caller's own traceparent.
func SetTraceResponse(h http.Header, sc trace.SpanContext) {
	if h == nil || !sc.IsValid() || sc.IsRemote() {
		return
	}
	h[HeaderTraceResponse] = []string{lens.TraceparentValue(sc)}
}

// TraceResponseID returns the trace id of h's traceresponse header, and
// whether the header holds a valid one: a two-digit version other than
// ff, then the trace id (not all zeros); version 00 has exactly four
// fields, a later version at least four.
func TraceResponseID(h http.Header) (trace.TraceID, bool) {
	v := strings.TrimSpace(h.Get(HeaderTraceResponse))
	version, rest, ok := strings.Cut(v, "-")
	if !ok || len(version) != 2 || version == "ff" {
		return trace.TraceID{}, false
	}
	hexID, rest, ok := strings.Cut(rest, "-")
	if !ok {
		return trace.TraceID{}, false
	}
	_, rest, ok = strings.Cut(rest, "-") // the span id
	if !ok {
		return trace.TraceID{}, false
	}
	if version == "00" && strings.Contains(rest, "-") {
		return trace.TraceID{}, false
	}
	id, err := trace.TraceIDFromHex(hexID)
	if err != nil || !id.IsValid() {
		return trace.TraceID{}, false
	}
	return id, true
}
