package fileexport

import (
	"encoding/hex"
	"math"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/gymlens/gymlens/internal/jsonstr"
	"github.com/gymlens/gymlens/lens/telfile"
)

// Spans are by far the most frequent record, too frequent to encode
// through reflection (docs/performance.md compares the two). appendSpan
// writes the same line as telfile.Span's JSON form directly from the
// finished span: no intermediate map, no reflection, a handful of appends.
// The tests parse its output with the telfile reader, which keeps the two
// in step.

// appendSpan appends one span line, newline included, reading the ended
// span through its accessors.
func appendSpan(b []byte, sp sdktrace.ReadOnlySpan) []byte {
	sc := sp.SpanContext()
	b = append(b, `{"type":"span","trace_id":"`...)
	tid := sc.TraceID()
	b = hex.AppendEncode(b, tid[:])
	b = append(b, `","span_id":"`...)
	sid := sc.SpanID()
	b = hex.AppendEncode(b, sid[:])
	b = append(b, '"')
	if p := sp.Parent(); p.SpanID().IsValid() {
		psid := p.SpanID()
		b = append(b, `,"parent_span_id":"`...)
		b = hex.AppendEncode(b, psid[:])
		b = append(b, '"')
		if p.IsRemote() {
			b = append(b, `,"parent_remote":true`...)
		}
	}
	b = append(b, `,"name":`...)
	b = jsonstr.AppendNoHTMLEscape(b, sp.Name())
	b = append(b, `,"kind":"`...)
	b = append(b, spanKind(sp.SpanKind())...)
	b = append(b, `","start_ns":`...)
	b = strconv.AppendInt(b, unixNanos(sp.StartTime()), 10)
	b = append(b, `,"end_ns":`...)
	b = strconv.AppendInt(b, unixNanos(sp.EndTime()), 10)
	st := sp.Status()
	switch st.Code {
	case codes.Ok:
		b = append(b, `,"status":"`+telfile.StatusOK+`"`...)
	case codes.Error:
		b = append(b, `,"status":"`+telfile.StatusError+`"`...)
		if st.Description != "" {
			b = append(b, `,"status_message":`...)
			b = jsonstr.AppendNoHTMLEscape(b, st.Description)
		}
	default:
		b = append(b, `,"status":"`+telfile.StatusUnset+`"`...)
	}
	b = append(b, `,"attributes":`...)
	b = appendAttrs(b, sp.Attributes())
	if evs := sp.Events(); len(evs) > 0 {
		b = append(b, `,"events":[`...)
		for i, ev := range evs {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"name":`...)
			b = jsonstr.AppendNoHTMLEscape(b, ev.Name)
			b = append(b, `,"time_ns":`...)
			b = strconv.AppendInt(b, unixNanos(ev.Time), 10)
			b = append(b, `,"attributes":`...)
			b = appendAttrs(b, ev.Attributes)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if links := sp.Links(); len(links) > 0 {
		b = append(b, `,"links":[`...)
		for i, l := range links {
			if i > 0 {
				b = append(b, ',')
			}
			ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
			b = append(b, `{"trace_id":"`...)
			b = hex.AppendEncode(b, ltid[:])
			b = append(b, `","span_id":"`...)
			b = hex.AppendEncode(b, lsid[:])
			b = append(b, '"')
			if len(l.Attributes) > 0 {
				b = append(b, `,"attributes":`...)
				b = appendAttrs(b, l.Attributes)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = append(b, `,"scope":`...)
	b = jsonstr.AppendNoHTMLEscape(b, sp.InstrumentationScope().Name)
	return append(b, "}\n"...)
}

// appendAttrs writes an attribute object as given. A span's attribute
// keys are unique (the SDK sees to it); event and link attributes are
// written as the caller set them, a repeated key included, which JSON
// readers resolve to the last value.
func appendAttrs(b []byte, kvs []attribute.KeyValue) []byte {
	b = append(b, '{')
	for i, kv := range kvs {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonstr.AppendNoHTMLEscape(b, string(kv.Key))
		b = append(b, ':')
		b = appendValue(b, kv.Value)
	}
	return append(b, '}')
}

func appendValue(b []byte, v attribute.Value) []byte {
	switch v.Type() {
	case attribute.STRING:
		return jsonstr.AppendNoHTMLEscape(b, v.AsString())
	case attribute.INT64:
		return strconv.AppendInt(b, v.AsInt64(), 10)
	case attribute.BOOL:
		return strconv.AppendBool(b, v.AsBool())
	case attribute.FLOAT64:
		return appendFloat(b, v.AsFloat64())
	case attribute.STRINGSLICE:
		return appendArray(b, v.AsStringSlice(), jsonstr.AppendNoHTMLEscape)
	case attribute.INT64SLICE:
		return appendArray(b, v.AsInt64Slice(), appendInt)
	case attribute.FLOAT64SLICE:
		return appendArray(b, v.AsFloat64Slice(), appendFloat)
	case attribute.BOOLSLICE:
		return appendArray(b, v.AsBoolSlice(), strconv.AppendBool)
	}
	// The rarer kinds take the general path.
	raw, err := telfile.MarshalValue(attrValue(v))
	if err != nil {
		return append(b, "null"...)
	}
	return append(b, raw...)
}

func appendFloat(b []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(b, `"+Inf"`...)
	case math.IsInf(f, -1):
		return append(b, `"-Inf"`...)
	}
	return strconv.AppendFloat(b, f, 'g', -1, 64)
}

// appendArray appends xs as a JSON array, each element by elem.
func appendArray[T any](b []byte, xs []T, elem func([]byte, T) []byte) []byte {
	b = append(b, '[')
	for i, x := range xs {
		if i > 0 {
			b = append(b, ',')
		}
		b = elem(b, x)
	}
	return append(b, ']')
}

func appendInt(b []byte, n int64) []byte { return strconv.AppendInt(b, n, 10) }
