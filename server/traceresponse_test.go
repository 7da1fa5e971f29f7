package server_test

import (
	"net/http"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/gymlens/gymlens/server"
)

func TestTraceResponseRoundTrip(t *testing.T) {
	tid := trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36}
	sid := trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7}
	for _, flags := range []trace.TraceFlags{0, trace.FlagsSampled} {
		h := http.Header{}
		server.SetTraceResponse(h, trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: flags}))
		want := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0" + string("01"[flags])
		if got := h.Get("traceresponse"); got != want {
			t.Errorf("flags %d: traceresponse %q, want %q", flags, got, want)
		}
		if id, ok := server.TraceResponseID(h); !ok || id != tid {
			t.Errorf("flags %d: TraceResponseID = %v, %v; want %v", flags, id, ok, tid)
		}
	}
	h := http.Header{}
	server.SetTraceResponse(h, trace.SpanContext{})
	if len(h) != 0 {
		t.Errorf("an invalid span context set %v", h)
	}
	server.SetTraceResponse(nil, trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid})) // no panic
	// The caller's own span context: the header would repeat its traceparent.
	server.SetTraceResponse(h, trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, Remote: true}))
	if len(h) != 0 {
		t.Errorf("a remote span context set %v", h)
	}
}

func TestTraceResponseIDRules(t *testing.T) {
	const id = "4bf92f3577b34da6a3ce929d0e0e4736"
	for _, c := range []struct {
		value string
		ok    bool
	}{
		{"00-" + id + "-00f067aa0ba902b7-01", true},
		{"  00-" + id + "-00f067aa0ba902b7-00 ", true},
		{"01-" + id + "-00f067aa0ba902b7-01-later", true}, // a later version may add fields
		{"01-" + id + "-00f067aa0ba902b7-", true},
		{"00-" + id + "-00f067aa0ba902b7-01-extra", false}, // version 00 has four
		{"ff-" + id + "-00f067aa0ba902b7-01", false},
		{"0-" + id + "-00f067aa0ba902b7-01", false},
		{"00-" + id + "-00f067aa0ba902b7", false},
		{"00-" + id, false},
		{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", false},
		{"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", false}, // upper case hex
		{"00-4bf92f-00f067aa0ba902b7-01", false},
		{"", false},
	} {
		h := http.Header{}
		if c.value != "" {
			h.Set("traceresponse", c.value)
		}
		got, ok := server.TraceResponseID(h)
		if ok != c.ok || (ok && got.String() != id) {
			t.Errorf("%q: TraceResponseID = %v, %v; want ok %v", c.value, got, ok, c.ok)
		}
	}
}
