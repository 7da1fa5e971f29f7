package server

import (
	"encoding/hex"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/trace"
)

// HeaderTraceResponse is the W3C Trace Context Level 2 response header,
// "00-<trace id>-<span id>-<flags>", in its canonical spelling: an agent
// answers /run with it, so a caller with no telemetry of its own still
// learns the rollout's trace id, and the rollout collector records that id.
const HeaderTraceResponse = "Traceresponse"

// traceResponseLen is the length of a version-00 traceresponse value.
const traceResponseLen = 2 + 1 + 32 + 1 + 16 + 1 + 2

// SetTraceResponse sets h's traceresponse header to sc, when sc is valid.
// The value is built in one allocation.
func SetTraceResponse(h http.Header, sc trace.SpanContext) {
	if h == nil || !sc.IsValid() {
		return
	}
	var b [traceResponseLen]byte
	tid, sid := sc.TraceID(), sc.SpanID()
	b[0], b[1], b[2] = '0', '0', '-'
	hex.Encode(b[3:35], tid[:])
	b[35] = '-'
	hex.Encode(b[36:52], sid[:])
	b[52] = '-'
	hex.Encode(b[53:55], []byte{byte(sc.TraceFlags())})
	h[HeaderTraceResponse] = []string{string(b[:])}
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
