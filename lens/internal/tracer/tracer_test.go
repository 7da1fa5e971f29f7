package tracer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// collect is a processor that keeps every span it is handed.
type collect struct {
	mu    sync.Mutex
	spans []*Span
}

func (c *collect) OnEnd(s *Span) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.spans = append(c.spans, s)
}

func (c *collect) got() []*Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Span(nil), c.spans...)
}

func newTracer(t *testing.T) (trace.Tracer, *collect, *Provider) {
	t.Helper()
	c := &collect{}
	p := NewProvider(resource.NewSchemaless(attribute.String("service.name", "t")), c)
	return p.Tracer("scope", trace.WithInstrumentationVersion("1.2")), c, p
}

func TestRootAndChildren(t *testing.T) {
	tr, c, p := newTracer(t)
	ctx, root := tr.Start(context.Background(), "root", trace.WithSpanKind(trace.SpanKindServer))
	cctx, child := tr.Start(ctx, "child")
	_, grandchild := tr.Start(cctx, "grandchild", trace.WithSpanKind(trace.SpanKindClient))
	grandchild.End()
	child.End()
	root.End()
	root.End() // a second End changes nothing and is not exported twice

	got := c.got()
	if len(got) != 3 {
		t.Fatalf("%d spans exported, want 3", len(got))
	}
	gc, ch, r := got[0], got[1], got[2]
	if r.Name() != "root" || ch.Name() != "child" || gc.Name() != "grandchild" {
		t.Fatalf("order/names: %s %s %s", gc.Name(), ch.Name(), r.Name())
	}
	rsc := r.SpanContext()
	if !rsc.IsValid() || !rsc.IsSampled() || rsc.IsRemote() || r.Parent().IsValid() {
		t.Errorf("root: sc %v parent %v", rsc, r.Parent())
	}
	if ch.SpanContext().TraceID() != rsc.TraceID() || !ch.Parent().Equal(rsc) {
		t.Errorf("child: trace %s parent %v, want trace %s parent the root", ch.SpanContext().TraceID(), ch.Parent(), rsc.TraceID())
	}
	if !gc.Parent().Equal(ch.SpanContext()) || gc.SpanContext().SpanID() == ch.SpanContext().SpanID() {
		t.Errorf("grandchild parent %v, want %v", gc.Parent(), ch.SpanContext())
	}
	if r.SpanKind() != trace.SpanKindServer || ch.SpanKind() != trace.SpanKindInternal || gc.SpanKind() != trace.SpanKindClient {
		t.Errorf("kinds %v %v %v", r.SpanKind(), ch.SpanKind(), gc.SpanKind())
	}
	if r.StartTime().IsZero() || r.EndTime().Before(r.StartTime()) || r.EndTime().Before(ch.EndTime()) {
		t.Errorf("root times %v..%v, child ended %v", r.StartTime(), r.EndTime(), ch.EndTime())
	}
	if r.IsRecording() {
		t.Error("an ended span still records")
	}
	if s := r.InstrumentationScope(); s.Name != "scope" || s.Version != "1.2" {
		t.Errorf("scope %+v", s)
	}
	if v, ok := r.Resource().Set().Value("service.name"); !ok || v.AsString() != "t" {
		t.Errorf("resource %v", r.Resource())
	}
	if root.TracerProvider() != p || trace.SpanFromContext(ctx) != root {
		t.Error("span's provider or context wrong")
	}
	if p.Tracer("scope", trace.WithInstrumentationVersion("1.2")) != tr || p.Tracer("other") == tr {
		t.Error("Tracer must return the same tracer for the same scope only")
	}
}

func TestRemoteParents(t *testing.T) {
	tr, c, _ := newTracer(t)
	ts, err := trace.ParseTraceState("vendor=x")
	if err != nil {
		t.Fatal(err)
	}
	sampled := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2},
		TraceFlags: trace.FlagsSampled, TraceState: ts, Remote: true})
	_, s := tr.Start(trace.ContextWithRemoteSpanContext(context.Background(), sampled), "in")
	s.End()

	// An unsampled caller: nothing is recorded or exported, but the span
	// has an identity of its own in the caller's trace, unsampled, so the
	// decision flows on downstream.
	unsampled := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{3}, SpanID: trace.SpanID{4}, Remote: true})
	uctx, u := tr.Start(trace.ContextWithRemoteSpanContext(context.Background(), unsampled), "quiet")
	_, uchild := tr.Start(uctx, "quiet child")
	u.SetAttributes(attribute.String("k", "v"))
	u.AddEvent("e")
	u.RecordError(errors.New("x"))
	u.SetStatus(codes.Error, "x")
	u.SetName("renamed")
	u.AddLink(trace.Link{SpanContext: sampled})
	uchild.End()
	u.End()
	usc := u.SpanContext()
	if u.IsRecording() || usc.IsSampled() || usc.TraceID() != unsampled.TraceID() || !usc.SpanID().IsValid() || usc.SpanID() == unsampled.SpanID() {
		t.Errorf("unsampled child: recording %v, sc %v", u.IsRecording(), usc)
	}
	if uchild.SpanContext().TraceID() != unsampled.TraceID() || uchild.SpanContext().IsSampled() {
		t.Errorf("grandchild of an unsampled trace: %v", uchild.SpanContext())
	}

	// WithNewRoot ignores the caller.
	_, fresh := tr.Start(trace.ContextWithRemoteSpanContext(context.Background(), unsampled), "fresh", trace.WithNewRoot())
	fresh.End()

	got := c.got()
	if len(got) != 2 {
		t.Fatalf("%d spans exported, want 2 (the unsampled ones record nothing)", len(got))
	}
	in := got[0]
	if !in.Parent().Equal(sampled) || !in.Parent().IsRemote() || in.SpanContext().TraceID() != sampled.TraceID() ||
		in.SpanContext().TraceState().Get("vendor") != "x" || in.SpanContext().IsRemote() {
		t.Errorf("child of a remote parent: parent %v sc %v", in.Parent(), in.SpanContext())
	}
	if f := got[1]; f.Parent().IsValid() || f.SpanContext().TraceID() == unsampled.TraceID() || !f.SpanContext().IsSampled() {
		t.Errorf("new root: parent %v sc %v", f.Parent(), f.SpanContext())
	}
}

func TestAttributes(t *testing.T) {
	tr, c, _ := newTracer(t)
	_, s := tr.Start(context.Background(), "a", trace.WithAttributes(attribute.String("k", "start"), attribute.Int("n", 1)))
	s.SetAttributes(attribute.String("k", "later"), attribute.KeyValue{}, attribute.Bool("b", true))
	many := make([]attribute.KeyValue, 0, MaxAttributes+10)
	for i := range MaxAttributes + 10 {
		many = append(many, attribute.Int(fmt.Sprintf("m%03d", i), i))
	}
	s.SetAttributes(many...)
	s.SetAttributes(attribute.String("k", "last")) // an update at the limit still applies
	s.End()
	s.SetAttributes(attribute.String("after", "end"))

	sp := c.got()[0]
	attrs := sp.Attributes()
	if len(attrs) != MaxAttributes {
		t.Fatalf("%d attributes, want the limit %d", len(attrs), MaxAttributes)
	}
	set := attribute.NewSet(attrs...)
	if set.Len() != len(attrs) {
		t.Error("duplicate keys exported")
	}
	if v, _ := set.Value("k"); v.AsString() != "last" {
		t.Errorf("k = %q, want the last value set", v.AsString())
	}
	if v, _ := set.Value("n"); v.AsInt64() != 1 {
		t.Errorf("n = %v", v)
	}
	if set.HasValue("after") {
		t.Error("an attribute set after End was kept")
	}
	// 3 start+set keys (k, n, b) + 125 of the 138 "m" ones fit; the empty
	// key and 13 "m" ones are dropped.
	if da, _, _ := sp.Dropped(); da != 1+13 {
		t.Errorf("dropped attributes %d, want 14", da)
	}
}

type codedError struct{ code int }

func (e *codedError) Error() string { return fmt.Sprintf("code %d", e.code) }

func TestEventsErrorsStatusLinks(t *testing.T) {
	tr, c, _ := newTracer(t)
	other := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{5}, SpanID: trace.SpanID{6}})
	at := time.Unix(1700000000, 0)
	_, s := tr.Start(context.Background(), "e", trace.WithLinks(
		trace.Link{SpanContext: other, Attributes: []attribute.KeyValue{attribute.String("why", "job")}},
		trace.Link{}, // invalid: ignored
	), trace.WithTimestamp(at))
	s.AddLink(trace.Link{SpanContext: other})
	s.AddEvent("retry", trace.WithAttributes(attribute.Int("n", 1)), trace.WithTimestamp(at.Add(time.Second)))
	s.RecordError(nil)
	s.RecordError(&codedError{7}, trace.WithStackTrace(true))
	s.RecordError(errors.New("plain"))
	s.SetStatus(codes.Unset, "ignored")
	s.SetStatus(codes.Error, "first")
	s.SetStatus(codes.Error, "second")
	s.SetName("renamed")
	end := at.Add(3 * time.Second)
	s.End(trace.WithTimestamp(end))
	s.SetStatus(codes.Ok, "") // after End: ignored
	s.AddEvent("late")

	sp := c.got()[0]
	if sp.Name() != "renamed" || !sp.StartTime().Equal(at) || !sp.EndTime().Equal(end) {
		t.Errorf("name %q, times %v..%v", sp.Name(), sp.StartTime(), sp.EndTime())
	}
	if st := sp.Status(); st.Code != codes.Error || st.Description != "second" {
		t.Errorf("status %+v, want Error second", st)
	}
	evs := sp.Events()
	if len(evs) != 3 || evs[0].Name != "retry" || !evs[0].Time.Equal(at.Add(time.Second)) {
		t.Fatalf("events %+v", evs)
	}
	e1 := attribute.NewSet(evs[1].Attributes...)
	if v, _ := e1.Value("exception.type"); v.AsString() != "*tracer.codedError" {
		t.Errorf("exception.type %q", v.AsString())
	}
	if v, _ := e1.Value("exception.message"); v.AsString() != "code 7" {
		t.Errorf("exception.message %q", v.AsString())
	}
	if v, _ := e1.Value("exception.stacktrace"); !strings.Contains(v.AsString(), "TestEventsErrorsStatusLinks") {
		t.Errorf("stack trace missing the caller: %q", v.AsString())
	}
	if e2 := attribute.NewSet(evs[2].Attributes...); e2.HasValue("exception.stacktrace") {
		t.Error("stack trace recorded without WithStackTrace")
	}
	links := sp.Links()
	if len(links) != 2 || !links[0].SpanContext.Equal(other) || len(links[0].Attributes) != 1 || !links[1].SpanContext.Equal(other) {
		t.Errorf("links %+v", links)
	}

	// Ok is final.
	_, ok := tr.Start(context.Background(), "ok")
	ok.SetStatus(codes.Ok, "dropped description")
	ok.SetStatus(codes.Error, "too late")
	ok.End()
	if st := c.got()[1].Status(); st.Code != codes.Ok || st.Description != "" {
		t.Errorf("status after Ok then Error: %+v", st)
	}
}

func TestLimitsOnEventsAndLinks(t *testing.T) {
	tr, c, _ := newTracer(t)
	other := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{5}, SpanID: trace.SpanID{6}})
	wide := make([]attribute.KeyValue, MaxAttributes+2)
	for i := range wide {
		wide[i] = attribute.Int(fmt.Sprint("k", i), i)
	}

	// Attributes of one event or link are capped too, and copied.
	_, w := tr.Start(context.Background(), "wide")
	w.AddEvent("wide", trace.WithAttributes(wide...))
	w.AddLink(trace.Link{SpanContext: other, Attributes: wide})
	w.End()
	ws := c.got()[0]
	ev, l := ws.Events()[0], ws.Links()[0]
	if len(ev.Attributes) != MaxAttributes || ev.DroppedAttributeCount != 2 ||
		len(l.Attributes) != MaxAttributes || l.DroppedAttributeCount != 2 {
		t.Errorf("event attributes %d (dropped %d), link attributes %d (dropped %d), want %d and 2",
			len(ev.Attributes), ev.DroppedAttributeCount, len(l.Attributes), l.DroppedAttributeCount, MaxAttributes)
	}
	wide[0] = attribute.String("changed", "later")
	if ev.Attributes[0].Key == "changed" {
		t.Error("the event shares the caller's attribute slice")
	}

	// Past the limit the oldest events and links make room, so an error
	// recorded just before the end is kept.
	_, s := tr.Start(context.Background(), "long")
	for i := range MaxEvents + 2 {
		s.AddEvent(fmt.Sprint("e", i))
	}
	s.RecordError(errors.New("late failure"))
	for i := range MaxLinks + 2 {
		s.AddLink(trace.Link{SpanContext: other, Attributes: []attribute.KeyValue{attribute.Int("i", i)}})
	}
	// An invalid span context is kept when it carries attributes, as the
	// SDK does; a bare one is ignored.
	s.AddLink(trace.Link{Attributes: []attribute.KeyValue{attribute.String("why", "unknown peer")}})
	s.AddLink(trace.Link{})
	s.End()
	sp := c.got()[1]
	_, de, dl := sp.Dropped()
	evs, links := sp.Events(), sp.Links()
	if len(evs) != MaxEvents || de != 3 || len(links) != MaxLinks || dl != 3 {
		t.Fatalf("events %d (dropped %d), links %d (dropped %d)", len(evs), de, len(links), dl)
	}
	if evs[0].Name != "e3" || evs[len(evs)-1].Name != "exception" {
		t.Errorf("events kept from %q to %q, want e3 to exception", evs[0].Name, evs[len(evs)-1].Name)
	}
	if last := links[len(links)-1]; last.SpanContext.IsValid() || len(last.Attributes) != 1 {
		t.Errorf("last link %+v, want the invalid one with its attribute", last)
	}
	if first := links[0]; first.Attributes[0].Value.AsInt64() != 3 {
		t.Errorf("oldest link kept %+v, want i=3", first)
	}
}

// Snapshot must carry everything an SDK exporter reads.
func TestSnapshotCarriesTheSpan(t *testing.T) {
	tr, c, _ := newTracer(t)
	parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2},
		TraceFlags: trace.FlagsSampled, Remote: true})
	_, s := tr.Start(trace.ContextWithRemoteSpanContext(context.Background(), parent), "snap",
		trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attribute.String("a", "b")),
		trace.WithLinks(trace.Link{SpanContext: parent}))
	s.AddEvent("ev")
	s.SetStatus(codes.Error, "bad")
	s.End()
	sp := c.got()[0]
	stub := tracetest.SpanStubFromReadOnlySpan(sp.Snapshot())
	want := tracetest.SpanStub{
		Name: "snap", SpanContext: sp.SpanContext(), Parent: parent, SpanKind: trace.SpanKindServer,
		StartTime: sp.StartTime(), EndTime: sp.EndTime(), Attributes: []attribute.KeyValue{attribute.String("a", "b")},
		Events: sp.Events(), Links: []sdktrace.Link{{SpanContext: parent}},
		Status: sdktrace.Status{Code: codes.Error, Description: "bad"}, Resource: sp.Resource(),
		InstrumentationScope:   sp.InstrumentationScope(),
		InstrumentationLibrary: sp.InstrumentationScope(), //nolint:staticcheck // the SDK still fills the deprecated field
	}
	if fmt.Sprint(stub) != fmt.Sprint(want) {
		t.Errorf("snapshot\n got %+v\nwant %+v", stub, want)
	}
}

func TestStopMakesLaterSpansNonRecording(t *testing.T) {
	tr, c, p := newTracer(t)
	_, before := tr.Start(context.Background(), "before")
	p.Stop()
	_, after := tr.Start(context.Background(), "after")
	after.End()
	before.End()
	if after.IsRecording() || !after.SpanContext().IsValid() || after.SpanContext().IsSampled() {
		t.Errorf("root after Stop: recording %v, sc %v (want valid, not sampled)", after.IsRecording(), after.SpanContext())
	}
	if got := c.got(); len(got) != 1 || got[0].Name() != "before" {
		t.Errorf("exported %d spans, want only the one started before Stop", len(got))
	}
}

func TestNilContext(t *testing.T) {
	tr, c, _ := newTracer(t)
	//nolint:staticcheck // a nil context must not panic
	ctx, s := tr.Start(nil, "nil ctx")
	s.End()
	if ctx == nil || len(c.got()) != 1 {
		t.Error("a nil context must give a usable context and a span")
	}
}

// One span written from many goroutines (as a span shared by a handler's
// helpers may be), and ended by several: the race detector watches, and
// exactly one export happens.
func TestConcurrentUse(t *testing.T) {
	tr, c, _ := newTracer(t)
	_, s := tr.Start(context.Background(), "shared")
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				s.SetAttributes(attribute.Int(fmt.Sprintf("g%d", g), i))
				s.AddEvent("tick")
				_ = s.IsRecording()
				if i == 40 {
					s.End()
				}
			}
		})
	}
	wg.Wait()
	if got := c.got(); len(got) != 1 {
		t.Fatalf("%d exports of one span", len(got))
	}
	sp := c.got()[0]
	if n := len(sp.Attributes()); n == 0 || n > 8 {
		t.Errorf("%d attributes, want 1..8 (one key per goroutine)", n)
	}
}

// A span must stay one 512-byte allocation: that is most of what makes
// it cheaper than the SDK's (see the package doc).
func TestSpanSize(t *testing.T) {
	if n := unsafe.Sizeof(Span{}); n > 512 {
		t.Errorf("Span is %d bytes, over the 512-byte size class", n)
	}
}
