package otlpenc

import (
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/gymlens/gymlens/lens/internal/tracer"
)

// Encoder maps batches of spans to OTLP protobuf. The result of Encode is
// valid until the next call; an Encoder is not safe for concurrent use
// (keep one per export in flight).
type Encoder struct {
	groups []group
	out    []*tracepb.ResourceSpans

	// Reused protobuf objects, handed out in order and taken back, all
	// at once, by the next Encode.
	resources slab[tracepb.ResourceSpans]
	scopes    slab[tracepb.ScopeSpans]
	spans     slab[tracepb.Span]
	statuses  slab[tracepb.Status]
	events    slab[tracepb.Span_Event]
	links     slab[tracepb.Span_Link]
	kvs       slab[commonpb.KeyValue]
	values    slab[commonpb.AnyValue]
	strs      slab[commonpb.AnyValue_StringValue]
	ints      slab[commonpb.AnyValue_IntValue]
	doubles   slab[commonpb.AnyValue_DoubleValue]
	bools     slab[commonpb.AnyValue_BoolValue]
	arrays    slab[commonpb.AnyValue_ArrayValue]
	arrayVals slab[commonpb.ArrayValue]
	bytes     slab[commonpb.AnyValue_BytesValue]
	kvlists   slab[commonpb.AnyValue_KvlistValue]
	kvlistVal slab[commonpb.KeyValueList]
	ids       []byte // backing for trace and span ids

	// The resource and scope protobufs change rarely: kept per pointer
	// and scope, rebuilt only for a new one.
	resCache   map[*resource.Resource]*resourcepb.Resource
	scopeCache map[instrumentation.Scope]*commonpb.InstrumentationScope
}

// group is the spans of one resource and scope.
type group struct {
	res   *resource.Resource
	scope instrumentation.Scope
	rs    *tracepb.ResourceSpans
	ss    *tracepb.ScopeSpans
}

// slab hands out reusable objects of one type.
type slab[T any] struct {
	items []*T
	n     int
}

// next returns an object to fill: a new one, or one handed out before the
// last reset, holding whatever was set then (callers set every field they
// use).
func (s *slab[T]) next() *T {
	if s.n == len(s.items) {
		s.items = append(s.items, new(T))
	} else if s.items[s.n] == nil {
		s.items[s.n] = new(T)
	}
	p := s.items[s.n]
	s.n++
	return p
}

// release lets go of the objects the last batch did not use, which may
// still point at an earlier batch's strings and slices.
func (s *slab[T]) release() { clear(s.items[s.n:]) }

func (s *slab[T]) reset() { s.n = 0 }

// Encode maps spans, grouped by resource and instrumentation scope. The
// slices and messages it returns are reused by the next call.
func (e *Encoder) Encode(spans []*tracer.Span) []*tracepb.ResourceSpans {
	e.reset()
	for _, s := range spans {
		ss := e.scopeSpans(s.Resource(), s.InstrumentationScope())
		ss.Spans = append(ss.Spans, e.span(s))
	}
	e.release()
	return e.out
}

func (e *Encoder) release() {
	for _, s := range e.slabs() {
		s.release()
	}
}

// slabs lists every object slab, for reset and release to walk alike.
func (e *Encoder) slabs() []interface {
	reset()
	release()
} {
	return []interface {
		reset()
		release()
	}{&e.resources, &e.scopes, &e.spans, &e.statuses, &e.events,
		&e.links, &e.kvs, &e.values, &e.strs, &e.ints, &e.doubles, &e.bools, &e.arrays, &e.arrayVals,
		&e.bytes, &e.kvlists, &e.kvlistVal}
}

func (e *Encoder) reset() {
	for _, g := range e.groups {
		clear(g.ss.Spans) // let the previous batch's spans go
	}
	e.groups = e.groups[:0]
	clear(e.out)
	e.out = e.out[:0]
	for _, s := range e.slabs() {
		s.reset()
	}
	e.ids = e.ids[:0]
}

// scopeSpans returns the ScopeSpans for a resource and scope, adding it
// (and its ResourceSpans) on first sight in this batch.
func (e *Encoder) scopeSpans(res *resource.Resource, scope instrumentation.Scope) *tracepb.ScopeSpans {
	for _, g := range e.groups {
		if g.res == res && g.scope.Name == scope.Name && g.scope.Version == scope.Version &&
			g.scope.SchemaURL == scope.SchemaURL && g.scope.Attributes.Equals(&scope.Attributes) {
			return g.ss
		}
	}
	ss := e.scopes.next()
	ss.Scope, ss.SchemaUrl, ss.Spans = e.scope(scope), text(scope.SchemaURL), ss.Spans[:0]
	for _, g := range e.groups {
		if g.res == res {
			g.rs.ScopeSpans = append(g.rs.ScopeSpans, ss)
			e.groups = append(e.groups, group{res: res, scope: scope, rs: g.rs, ss: ss})
			return ss
		}
	}
	rs := e.resources.next()
	rs.Resource, rs.SchemaUrl = e.resource(res), text(res.SchemaURL())
	rs.ScopeSpans = append(rs.ScopeSpans[:0], ss)
	e.out = append(e.out, rs)
	e.groups = append(e.groups, group{res: res, scope: scope, rs: rs, ss: ss})
	return ss
}

func (e *Encoder) resource(res *resource.Resource) *resourcepb.Resource {
	if r, ok := e.resCache[res]; ok {
		return r
	}
	if e.resCache == nil || len(e.resCache) > 16 {
		e.resCache = map[*resource.Resource]*resourcepb.Resource{}
	}
	r := &resourcepb.Resource{Attributes: ownKeyValues(res.Attributes())}
	e.resCache[res] = r
	return r
}

func (e *Encoder) scope(scope instrumentation.Scope) *commonpb.InstrumentationScope {
	if scope == (instrumentation.Scope{}) {
		return nil // no scope at all: the field is left out
	}
	if s, ok := e.scopeCache[scope]; ok {
		return s
	}
	if e.scopeCache == nil || len(e.scopeCache) > 64 {
		e.scopeCache = map[instrumentation.Scope]*commonpb.InstrumentationScope{}
	}
	s := &commonpb.InstrumentationScope{Name: text(scope.Name), Version: text(scope.Version),
		Attributes: ownKeyValues(scope.Attributes.ToSlice())}
	e.scopeCache[scope] = s
	return s
}

func (e *Encoder) span(s *tracer.Span) *tracepb.Span {
	p := e.spans.next()
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	p.TraceId = e.id(tid[:])
	p.SpanId = e.id(sid[:])
	p.TraceState = ""
	if ts := sc.TraceState(); ts.Len() > 0 {
		p.TraceState = ts.String()
	}
	parent := s.Parent()
	p.ParentSpanId = nil
	if psid := parent.SpanID(); psid.IsValid() {
		p.ParentSpanId = e.id(psid[:])
	}
	p.Flags = flags(sc.TraceFlags(), parent.IsRemote())
	p.Name = text(s.Name())
	p.Kind = kind(s.SpanKind())
	p.StartTimeUnixNano = unixNanos(s.StartTime())
	p.EndTimeUnixNano = unixNanos(s.EndTime())
	p.Attributes = e.keyValues(p.Attributes[:0], s.Attributes())
	da, de, dl := s.Dropped()
	p.DroppedAttributesCount, p.DroppedEventsCount, p.DroppedLinksCount = clamp(da), clamp(de), clamp(dl)
	p.Events = p.Events[:0]
	for _, ev := range s.Events() {
		p.Events = append(p.Events, e.event(ev))
	}
	p.Links = p.Links[:0]
	for _, l := range s.Links() {
		p.Links = append(p.Links, e.link(l))
	}
	st := s.Status()
	ps := e.statuses.next()
	ps.Code, ps.Message = statusCode(st.Code), text(st.Description)
	p.Status = ps
	return p
}

func (e *Encoder) event(ev sdktrace.Event) *tracepb.Span_Event {
	p := e.events.next()
	p.Name = text(ev.Name)
	p.TimeUnixNano = unixNanos(ev.Time)
	p.Attributes = e.keyValues(p.Attributes[:0], ev.Attributes)
	p.DroppedAttributesCount = clamp(ev.DroppedAttributeCount)
	return p
}

func (e *Encoder) link(l sdktrace.Link) *tracepb.Span_Link {
	p := e.links.next()
	tid, sid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
	p.TraceId = e.id(tid[:])
	p.SpanId = e.id(sid[:])
	p.TraceState = ""
	if ts := l.SpanContext.TraceState(); ts.Len() > 0 {
		p.TraceState = ts.String()
	}
	p.Attributes = e.keyValues(p.Attributes[:0], l.Attributes)
	p.DroppedAttributesCount = clamp(l.DroppedAttributeCount)
	p.Flags = flags(l.SpanContext.TraceFlags(), l.SpanContext.IsRemote())
	return p
}

// id copies an id into the encoder's id storage. A full storage is
// replaced rather than grown, so ids handed out before stay intact.
func (e *Encoder) id(b []byte) []byte {
	if cap(e.ids)-len(e.ids) < len(b) {
		e.ids = make([]byte, 0, max(4096, 2*cap(e.ids)))
	}
	start := len(e.ids)
	e.ids = append(e.ids, b...)
	return e.ids[start:len(e.ids):len(e.ids)]
}

// keyValues appends the protobuf form of attrs to dst.
func (e *Encoder) keyValues(dst []*commonpb.KeyValue, attrs []attribute.KeyValue) []*commonpb.KeyValue {
	for _, kv := range attrs {
		p := e.kvs.next()
		p.Key = text(string(kv.Key))
		p.Value = e.value(kv.Value)
		dst = append(dst, p)
	}
	return dst
}

func (e *Encoder) value(v attribute.Value) *commonpb.AnyValue {
	p := e.values.next()
	switch v.Type() {
	case attribute.STRING:
		w := e.strs.next()
		w.StringValue = text(v.AsString())
		p.Value = w
	case attribute.INT64:
		w := e.ints.next()
		w.IntValue = v.AsInt64()
		p.Value = w
	case attribute.FLOAT64:
		w := e.doubles.next()
		w.DoubleValue = v.AsFloat64()
		p.Value = w
	case attribute.BOOL:
		w := e.bools.next()
		w.BoolValue = v.AsBool()
		p.Value = w
	case attribute.BYTESLICE:
		w := e.bytes.next()
		w.BytesValue = v.AsByteSlice()
		p.Value = w
	case attribute.STRINGSLICE:
		p.Value = arrayOf(e, v.AsStringSlice(), attribute.StringValue)
	case attribute.INT64SLICE:
		p.Value = arrayOf(e, v.AsInt64Slice(), attribute.Int64Value)
	case attribute.FLOAT64SLICE:
		p.Value = arrayOf(e, v.AsFloat64Slice(), attribute.Float64Value)
	case attribute.BOOLSLICE:
		p.Value = arrayOf(e, v.AsBoolSlice(), attribute.BoolValue)
	case attribute.SLICE:
		p.Value = arrayOf(e, v.AsSlice(), func(x attribute.Value) attribute.Value { return x })
	case attribute.MAP:
		w := e.kvlists.next()
		l := e.kvlistVal.next()
		l.Values = e.keyValues(l.Values[:0], v.AsMap())
		w.KvlistValue = l
		p.Value = w
	default:
		// An empty value: the protobuf's unset AnyValue.
		p.Value = nil
	}
	return p
}

// arrayOf builds an ArrayValue from a slice attribute, each element
// mapped as a scalar value of its own.
func arrayOf[T any](e *Encoder, elems []T, val func(T) attribute.Value) *commonpb.AnyValue_ArrayValue {
	w := e.arrays.next()
	a := e.arrayVals.next()
	a.Values = a.Values[:0]
	for _, x := range elems {
		a.Values = append(a.Values, e.value(val(x)))
	}
	w.ArrayValue = a
	return w
}

// ownKeyValues maps attributes to protobuf objects of their own, for the
// cached resource and scope messages.
func ownKeyValues(attrs []attribute.KeyValue) []*commonpb.KeyValue {
	var e Encoder
	return e.keyValues(nil, attrs)
}

// text returns s as valid UTF-8, each invalid sequence replaced by U+FFFD.
// Protobuf refuses to marshal a string field that is not UTF-8, and one
// such value (an attribute read from a request, say) would fail the whole
// export and lose every span in it; the SDK exporter has that failure.
func text(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

func flags(tf trace.TraceFlags, remote bool) uint32 {
	f := uint32(tf) | uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK)
	if remote {
		f |= uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK)
	}
	return f
}

func kind(k trace.SpanKind) tracepb.Span_SpanKind {
	switch k {
	case trace.SpanKindInternal:
		return tracepb.Span_SPAN_KIND_INTERNAL
	case trace.SpanKindServer:
		return tracepb.Span_SPAN_KIND_SERVER
	case trace.SpanKindClient:
		return tracepb.Span_SPAN_KIND_CLIENT
	case trace.SpanKindProducer:
		return tracepb.Span_SPAN_KIND_PRODUCER
	case trace.SpanKindConsumer:
		return tracepb.Span_SPAN_KIND_CONSUMER
	}
	return tracepb.Span_SPAN_KIND_UNSPECIFIED
}

func statusCode(c codes.Code) tracepb.Status_StatusCode {
	switch c {
	case codes.Ok:
		return tracepb.Status_STATUS_CODE_OK
	case codes.Error:
		return tracepb.Status_STATUS_CODE_ERROR
	}
	return tracepb.Status_STATUS_CODE_UNSET
}

func unixNanos(t time.Time) uint64 {
	if n := t.UnixNano(); n > 0 {
		return uint64(n)
	}
	return 0
}

func clamp(n int) uint32 {
	if n <= 0 {
		return 0
	}
	return uint32(min(int64(n), math.MaxUint32))
}
