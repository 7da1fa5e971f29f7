package tracer

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
)

// Limits per span, the SDK's defaults: beyond them attributes, events and
// links are dropped and counted.
const (
	MaxAttributes = 128
	MaxEvents     = 128
	MaxLinks      = 128
)

// inlineAttrs is how many attributes a span holds without a second
// allocation: enough for the spans a fleet starts per request (a SERVER
// span has five, a CLIENT span four), and small enough that a span fits
// a 512-byte allocation.
const inlineAttrs = 5

// Processor receives every recording span once it has ended. OnEnd runs on
// the caller's goroutine and must not block; the span no longer changes
// and may be kept and read from any goroutine.
type Processor interface {
	OnEnd(*Span)
}

// Provider is a trace.TracerProvider whose recording spans go to its
// processors when they end.
type Provider struct {
	embedded.TracerProvider

	res     *resource.Resource
	procs   []Processor
	tracers sync.Map // instrumentation.Scope -> *Tracer
	stopped atomic.Bool
}

var _ trace.TracerProvider = (*Provider)(nil)

// NewProvider returns a provider whose spans carry res and are handed to
// procs when they end. A nil res means an empty resource.
func NewProvider(res *resource.Resource, procs ...Processor) *Provider {
	if res == nil {
		res = resource.Empty()
	}
	return &Provider{res: res, procs: procs}
}

// Tracer returns the tracer for an instrumentation scope, the same one for
// the same name, version, schema URL and attributes.
func (p *Provider) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	cfg := trace.NewTracerConfig(opts...)
	scope := instrumentation.Scope{
		Name:       name,
		Version:    cfg.InstrumentationVersion(),
		SchemaURL:  cfg.SchemaURL(),
		Attributes: cfg.InstrumentationAttributes(),
	}
	key := scopeKey{scope.Name, scope.Version, scope.SchemaURL, scope.Attributes.Equivalent()}
	if t, ok := p.tracers.Load(key); ok {
		return t.(*Tracer)
	}
	t, _ := p.tracers.LoadOrStore(key, &Tracer{p: p, scope: scope})
	return t.(*Tracer)
}

type scopeKey struct {
	name, version, schema string
	attrs                 attribute.Distinct
}

// Stop makes every later span non-recording; spans already started still
// reach the processors when they end. Flushing and shutting down the
// processors is their owner's business.
func (p *Provider) Stop() { p.stopped.Store(true) }

// Tracer starts spans for one instrumentation scope.
type Tracer struct {
	embedded.Tracer

	p     *Provider
	scope instrumentation.Scope
}

var _ trace.Tracer = (*Tracer)(nil)

// Start begins a span that is a child of the span context in ctx, if any
// (unless trace.WithNewRoot is given), and returns a context holding it.
// The span records when it is a root or its parent is sampled.
func (t *Tracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if ctx == nil {
		ctx = context.Background()
	}
	cfg := trace.NewSpanStartConfig(opts...)
	var parent trace.SpanContext
	if !cfg.NewRoot() {
		parent = trace.SpanContextFromContext(ctx)
	}
	var scc trace.SpanContextConfig
	if parent.IsValid() {
		scc.TraceID = parent.TraceID()
		scc.TraceFlags = parent.TraceFlags()
		scc.TraceState = parent.TraceState()
	} else {
		scc.TraceID = newTraceID()
		if !t.p.stopped.Load() {
			// A root after Stop is not sampled: this process exports
			// nothing of it, so the processes it calls need not either.
			scc.TraceFlags = trace.FlagsSampled
		}
	}
	scc.SpanID = newSpanID()
	sc := trace.NewSpanContext(scc)
	if !sc.IsSampled() || t.p.stopped.Load() {
		s := &nonRecording{sc: sc, p: t.p}
		return trace.ContextWithSpan(ctx, s), s
	}
	s := &Span{tracer: t, sc: sc, kind: int8(trace.ValidateSpanKind(cfg.SpanKind())), name: name}
	if parent.IsValid() {
		s.parentID, s.hasParent, s.parentRemote = parent.SpanID(), true, parent.IsRemote()
	}
	if ts := cfg.Timestamp(); !ts.IsZero() {
		s.start = ts
	} else {
		s.start = time.Now()
	}
	s.attrs = s.inline[:0]
	if a := cfg.Attributes(); len(a) > 0 {
		s.addAttrs(a)
	}
	for _, l := range cfg.Links() {
		s.addLink(l)
	}
	return trace.ContextWithSpan(ctx, s), s
}

// newTraceID returns a random, valid trace id. math/rand/v2's top-level
// generator is seeded per thread from the runtime and takes no lock.
func newTraceID() trace.TraceID {
	var id trace.TraceID
	for !id.IsValid() {
		binary.NativeEndian.PutUint64(id[:8], rand.Uint64())
		binary.NativeEndian.PutUint64(id[8:], rand.Uint64())
	}
	return id
}

func newSpanID() trace.SpanID {
	var id trace.SpanID
	for !id.IsValid() {
		binary.NativeEndian.PutUint64(id[:], rand.Uint64())
	}
	return id
}

// Span is a recording span. Until End it is written under its mutex; from
// End on it is read-only, and the accessors without a Set/Add in their
// name (Name, Attributes, Events, ...) are for processors and exporters,
// which only see ended spans.
//
// The layout is kept to one 512-byte allocation: the parent is stored as
// its span id (its trace is the span's own), the end as a duration, and
// what few spans have (events, links, a status description, drop counts)
// behind a pointer.
type Span struct {
	embedded.Span

	tracer   *Tracer
	sc       trace.SpanContext
	start    time.Time
	parentID trace.SpanID

	mu           sync.Mutex
	status       codes.Code
	kind         int8 // a trace.SpanKind
	ended        bool
	hasParent    bool
	parentRemote bool
	name         string
	dur          time.Duration // from start to end
	attrs        []attribute.KeyValue
	more         *extras
	inline       [inlineAttrs]attribute.KeyValue
}

// extras is the part of a span most spans never need.
type extras struct {
	events        []sdktrace.Event
	links         []sdktrace.Link
	statusDesc    string
	droppedAttrs  int
	droppedEvents int
	droppedLinks  int
}

// extra returns s.more, allocating it on first use; s.mu is held (or s is
// not shared yet).
func (s *Span) extra() *extras {
	if s.more == nil {
		s.more = new(extras)
	}
	return s.more
}

var _ trace.Span = (*Span)(nil)

// End ends the span: later calls, and every setter from now on, do
// nothing. trace.WithTimestamp sets the end time.
func (s *Span) End(opts ...trace.SpanEndOption) {
	// From the monotonic clock, so the duration cannot be negative when
	// the wall clock steps.
	dur := time.Since(s.start)
	if len(opts) > 0 {
		cfg := trace.NewSpanEndConfig(opts...)
		if ts := cfg.Timestamp(); !ts.IsZero() {
			dur = ts.Sub(s.start)
		}
	}
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	s.ended = true
	s.dur = dur
	s.mu.Unlock()
	for _, p := range s.tracer.p.procs {
		p.OnEnd(s)
	}
}

// AddEvent records an event on the span.
func (s *Span) AddEvent(name string, opts ...trace.EventOption) {
	cfg := trace.NewEventConfig(opts...)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.addEvent(name, cfg.Timestamp(), cfg.Attributes())
	}
}

// addEvent appends an event; s.mu is held.
func (s *Span) addEvent(name string, ts time.Time, attrs []attribute.KeyValue) {
	ev := sdktrace.Event{Name: name, Time: ts}
	ev.Attributes, ev.DroppedAttributeCount = capped(attrs)
	x := s.extra()
	x.events = keepNewest(x.events, ev, MaxEvents, &x.droppedEvents)
}

// keepNewest appends v to list; at max entries it drops the oldest one
// (and counts it) instead, as the SDK does: on a long span the last events,
// an error recorded just before the end among them, are the ones to keep.
func keepNewest[T any](list []T, v T, max int, dropped *int) []T {
	if len(list) < max {
		return append(list, v)
	}
	*dropped++
	copy(list, list[1:])
	list[len(list)-1] = v
	return list
}

// capped returns a copy of attrs cut to MaxAttributes, and how many were
// cut; nil for none.
func capped(attrs []attribute.KeyValue) ([]attribute.KeyValue, int) {
	dropped := 0
	if len(attrs) > MaxAttributes {
		dropped = len(attrs) - MaxAttributes
		attrs = attrs[:MaxAttributes]
	}
	if len(attrs) == 0 {
		return nil, dropped
	}
	return append([]attribute.KeyValue(nil), attrs...), dropped
}

// AddLink links the span to another. A link with an invalid span context
// is kept only if it carries attributes or a trace state, as in the SDK.
func (s *Span) AddLink(l trace.Link) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.addLink(l)
	}
}

// addLink appends a link; s.mu is held (or s is not shared yet).
func (s *Span) addLink(l trace.Link) {
	if !l.SpanContext.IsValid() && len(l.Attributes) == 0 && l.SpanContext.TraceState().Len() == 0 {
		return
	}
	sl := sdktrace.Link{SpanContext: l.SpanContext}
	sl.Attributes, sl.DroppedAttributeCount = capped(l.Attributes)
	x := s.extra()
	x.links = keepNewest(x.links, sl, MaxLinks, &x.droppedLinks)
}

// IsRecording reports whether the span has not ended yet.
func (s *Span) IsRecording() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.ended
}

// RecordError records err as an "exception" event (type and message, and
// the stack with trace.WithStackTrace). A nil err records nothing.
func (s *Span) RecordError(err error, opts ...trace.EventOption) {
	if err == nil {
		return
	}
	cfg := trace.NewEventConfig(opts...)
	attrs := make([]attribute.KeyValue, 0, 3+len(cfg.Attributes()))
	attrs = append(attrs,
		attribute.String("exception.type", typeName(err)),
		attribute.String("exception.message", err.Error()))
	attrs = append(attrs, cfg.Attributes()...)
	if cfg.StackTrace() {
		buf := make([]byte, 4<<10)
		buf = buf[:runtime.Stack(buf, false)]
		attrs = append(attrs, attribute.String("exception.stacktrace", string(buf)))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.addEvent("exception", cfg.Timestamp(), attrs)
	}
}

// typeName names an error's type as the SDK does: package path and name,
// or the type's own spelling for unnamed types (pointers among them).
func typeName(v any) string {
	t := reflect.TypeOf(v)
	if t.PkgPath() == "" && t.Name() == "" {
		return t.String()
	}
	return fmt.Sprintf("%s.%s", t.PkgPath(), t.Name())
}

// SpanContext returns the span's identity.
func (s *Span) SpanContext() trace.SpanContext { return s.sc }

// SetStatus sets the status: Ok is final, Error (with its description)
// replaces Unset or Error, Unset changes nothing.
func (s *Span) SetStatus(code codes.Code, description string) {
	if code == codes.Unset {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended || s.status == codes.Ok {
		return
	}
	s.status = code
	if code == codes.Error && description != "" {
		s.extra().statusDesc = description
	} else if s.more != nil {
		s.more.statusDesc = ""
	}
}

// SetName renames the span.
func (s *Span) SetName(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.name = name
	}
}

// SetAttributes sets attributes; a key already set takes the new value.
// Attributes with an empty key are dropped.
func (s *Span) SetAttributes(kv ...attribute.KeyValue) {
	if len(kv) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.addAttrs(kv)
	}
}

// addAttrs adds attributes, keeping keys unique; s.mu is held (or s is
// not shared yet). Spans carry a handful of attributes, so a linear scan
// beats a map; the comparison of a key set from the same constant is a
// pointer check.
func (s *Span) addAttrs(kvs []attribute.KeyValue) {
next:
	for _, kv := range kvs {
		if !kv.Valid() {
			s.extra().droppedAttrs++
			continue
		}
		for i := range s.attrs {
			if s.attrs[i].Key == kv.Key {
				s.attrs[i] = kv
				continue next
			}
		}
		if len(s.attrs) >= MaxAttributes {
			s.extra().droppedAttrs++
			continue
		}
		s.attrs = append(s.attrs, kv)
	}
}

// TracerProvider returns the provider that made the span.
func (s *Span) TracerProvider() trace.TracerProvider { return s.tracer.p }

// Name returns the span's name. For ended spans.
func (s *Span) Name() string { return s.name }

// Parent returns the parent's span context (invalid for a root): its trace,
// flags and trace state are the span's own.
func (s *Span) Parent() trace.SpanContext {
	if !s.hasParent {
		return trace.SpanContext{}
	}
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: s.sc.TraceID(), SpanID: s.parentID,
		TraceFlags: s.sc.TraceFlags(), TraceState: s.sc.TraceState(), Remote: s.parentRemote})
}

// SpanKind returns the span's kind.
func (s *Span) SpanKind() trace.SpanKind { return trace.SpanKind(s.kind) }

// StartTime returns when the span started.
func (s *Span) StartTime() time.Time { return s.start }

// EndTime returns when the span ended. For ended spans.
func (s *Span) EndTime() time.Time { return s.start.Add(s.dur) }

// Attributes returns the span's attributes, keys unique. For ended spans;
// the slice must not be modified.
func (s *Span) Attributes() []attribute.KeyValue { return s.attrs }

// Events returns the span's events. For ended spans.
func (s *Span) Events() []sdktrace.Event {
	if s.more == nil {
		return nil
	}
	return s.more.events
}

// Links returns the span's links. For ended spans.
func (s *Span) Links() []sdktrace.Link {
	if s.more == nil {
		return nil
	}
	return s.more.links
}

// Status returns the span's status. For ended spans.
func (s *Span) Status() sdktrace.Status {
	st := sdktrace.Status{Code: s.status}
	if s.more != nil {
		st.Description = s.more.statusDesc
	}
	return st
}

// InstrumentationScope returns the scope of the tracer that started it.
func (s *Span) InstrumentationScope() instrumentation.Scope { return s.tracer.scope }

// Resource returns the resource of the span's provider.
func (s *Span) Resource() *resource.Resource { return s.tracer.p.res }

// Dropped returns how many attributes, events and links went over the
// limits. For ended spans.
func (s *Span) Dropped() (attrs, events, links int) {
	if s.more == nil {
		return 0, 0, 0
	}
	return s.more.droppedAttrs, s.more.droppedEvents, s.more.droppedLinks
}

// Snapshot returns an ended span in the SDK's read-only form, for
// exporters written for the SDK.
func (s *Span) Snapshot() sdktrace.ReadOnlySpan {
	da, de, dl := s.Dropped()
	return tracetest.SpanStub{
		Name:                 s.name,
		SpanContext:          s.sc,
		Parent:               s.Parent(),
		SpanKind:             s.SpanKind(),
		StartTime:            s.start,
		EndTime:              s.EndTime(),
		Attributes:           s.attrs,
		Events:               s.Events(),
		Links:                s.Links(),
		Status:               s.Status(),
		DroppedAttributes:    da,
		DroppedEvents:        de,
		DroppedLinks:         dl,
		Resource:             s.tracer.p.res,
		InstrumentationScope: s.tracer.scope,
	}.Snapshot()
}

// nonRecording is the span of an unsampled trace: it records nothing but
// carries its own span context, so the trace's identity (and its "not
// sampled" flag) still reaches the calls made under it.
type nonRecording struct {
	embedded.Span

	sc trace.SpanContext
	p  *Provider
}

func (n *nonRecording) End(...trace.SpanEndOption)              {}
func (n *nonRecording) AddEvent(string, ...trace.EventOption)   {}
func (n *nonRecording) AddLink(trace.Link)                      {}
func (n *nonRecording) IsRecording() bool                       { return false }
func (n *nonRecording) RecordError(error, ...trace.EventOption) {}
func (n *nonRecording) SpanContext() trace.SpanContext          { return n.sc }
func (n *nonRecording) SetStatus(codes.Code, string)            {}
func (n *nonRecording) SetName(string)                          {}
func (n *nonRecording) SetAttributes(...attribute.KeyValue)     {}
func (n *nonRecording) TracerProvider() trace.TracerProvider    { return n.p }
