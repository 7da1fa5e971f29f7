package fileexport

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"os"
	"reflect"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/gymlens/gymlens/internal/jsonstr"
	"github.com/gymlens/gymlens/lens/telfile"
)

var tricky = []string{
	"", "plain", `quote " and \ backslash`, "line\nbreak\r\ttab", "ctrl \x00\x01\x1f\x7f",
	"unicode ünï ✓ 😀", "bad utf8 \xff\xfe end", "<html>&amp;</html>", "\u2028\u2029",
}

// lensSpans builds one ended span per tricky string, the string used as
// name, scope, attribute key and value, event name, link attribute and
// status description. Between them they carry every kind, every scalar and
// slice attribute type (NaN and infinities among the floats), roots and
// remote parents, Ok, Error and unset status, events and links. A root's
// trace id and every span id are random; everything else is fixed.
func lensSpans(tb testing.TB) []sdktrace.ReadOnlySpan {
	tb.Helper()
	var got []sdktrace.ReadOnlySpan
	p := newTestProvider(collectLens(func(s sdktrace.ReadOnlySpan) { got = append(got, s) }))
	tid := trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: trace.SpanID{9, 9}, TraceFlags: trace.FlagsSampled, Remote: true})
	t0 := time.Unix(1700000000, 123456789)
	for i, s := range tricky {
		ctx := context.Background()
		opts := []trace.SpanStartOption{
			trace.WithSpanKind(trace.SpanKind(i % 6)), // 0, unspecified, is written as internal
			trace.WithTimestamp(t0),
			trace.WithAttributes(
				attribute.String("s"+s, s),
				attribute.Int64("i", int64(i)-3),
				attribute.Float64("f", []float64{0.5, math.NaN(), math.Inf(1), math.Inf(-1), 1e21, -0.0, 3}[i%7]),
				attribute.Bool("b", i%2 == 0),
				attribute.StringSlice("ss", []string{s, "x"}),
				attribute.Int64Slice("is", []int64{1, 2}),
				attribute.Float64Slice("fs", []float64{1.5, math.NaN()}),
				attribute.BoolSlice("bs", []bool{true}),
			),
		}
		if i%2 == 1 {
			ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
			opts = append(opts, trace.WithLinks(
				trace.Link{SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{7}, SpanID: trace.SpanID{8}})},
				trace.Link{SpanContext: parent, Attributes: []attribute.KeyValue{attribute.String("why", s)}},
			))
		}
		_, sp := p.Tracer(s).Start(ctx, s, opts...)
		if i%2 == 1 {
			sp.AddEvent(s, trace.WithTimestamp(t0), trace.WithAttributes(attribute.String("k", s)))
			sp.SetStatus(codes.Error, s)
		} else if i%4 == 0 {
			sp.SetStatus(codes.Ok, "")
		}
		sp.End(trace.WithTimestamp(t0.Add(time.Duration(i) * time.Millisecond)))
		if len(got) != i+1 {
			tb.Fatalf("span %d was not handed over at End", i)
		}
	}
	return got
}

// The direct encoder must produce exactly what the reflective one does, as
// the telfile reader sees it.
func TestAppendSpanMatchesReflectiveEncoding(t *testing.T) {
	for i, sp := range append(lensSpans(t), goldenSpans(t)...) {
		fast := appendSpan(nil, sp)
		if !json.Valid(bytes.TrimSpace(fast)) {
			t.Fatalf("span %d: invalid JSON %s", i, fast)
		}
		slow, err := telfile.AppendLine(nil, spanRecord(sp))
		if err != nil {
			t.Fatal(err)
		}
		a, b := parseOne(t, fast), parseOne(t, slow)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("span %d differs:\nfast %s\nslow %s", i, fast, slow)
		}
	}
}

func parseOne(t *testing.T, line []byte) *telfile.Span {
	t.Helper()
	var sp *telfile.Span
	if err := telfile.Read(bytes.NewReader(line), func(r telfile.Record) error { sp = r.Span; return nil }); err != nil {
		t.Fatalf("%v in %s", err, line)
	}
	return sp
}

// BenchmarkEncodeSpan encodes one span with a remote parent, an event, two
// links and an error status, both ways.
func BenchmarkEncodeSpan(b *testing.B) {
	sp := lensSpans(b)[1]
	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			buf = appendSpan(buf[:0], sp)
		}
	})
	b.Run("reflective", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			buf, _ = telfile.AppendLine(buf[:0], spanRecord(sp))
		}
	})
}

// BenchmarkExportSpansToFile is the whole cost of exporting one span to a
// run directory, encoding and I/O: batches of 2048 SERVER spans shaped like
// the fleet's (route, method, status, a remote parent) written to a real
// file. Reported per span.
func BenchmarkExportSpansToFile(b *testing.B) {
	f, err := os.CreateTemp(b.TempDir(), "spans-*.jsonl")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	exp := NewSink(f, nil).SpanExporter()
	const batch = 2048
	spans := make([]sdktrace.ReadOnlySpan, 0, batch)
	tp := newTestProvider(collectLens(func(s sdktrace.ReadOnlySpan) { spans = append(spans, s) }))
	parent := trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6}, TraceFlags: trace.FlagsSampled, Remote: true}))
	for range batch {
		_, sp := tp.Tracer("bench").Start(parent, "POST /verify", trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("url.scheme", "http"), attribute.String("http.route", "/verify"),
				attribute.String("http.request.method", "POST")))
		sp.SetAttributes(attribute.String("url.path", "/verify"), attribute.Int("http.response.status_code", 200))
		sp.End()
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i, n := 0, 0; i < b.N; i, n = i+batch, n+1 {
		if err := exp.ExportSpans(ctx, spans[:min(batch, b.N-i)]); err != nil {
			b.Fatal(err)
		}
		if n%32 == 31 {
			// Start again every 30 MB or so, as a fleet's files grow
			// by tens of MB per run: a file of several GB would measure
			// the kernel throttling dirty pages, not the export.
			b.StopTimer()
			if err := f.Truncate(0); err != nil {
				b.Fatal(err)
			}
			if _, err := f.Seek(0, io.SeekStart); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	}
}

func TestExportSpansWritesLines(t *testing.T) {
	var buf bytes.Buffer
	sink := NewSink(&buf, nil)
	spans := lensSpans(t)
	if err := sink.SpanExporter().ExportSpans(context.Background(), spans); err != nil {
		t.Fatal(err)
	}
	var n int
	err := telfile.Read(bytes.NewReader(buf.Bytes()), func(r telfile.Record) error {
		if r.Span == nil {
			return nil // the sink's resource line
		}
		var want string // the name as JSON carries it (bad UTF-8 replaced)
		if n < len(spans) {
			_ = json.Unmarshal(jsonstr.AppendNoHTMLEscape(nil, spans[n].Name()), &want)
		}
		if n >= len(spans) || r.Span.Name != want {
			t.Errorf("record %d: %+v, want span %q", n, r.Span, spans[n].Name())
		}
		n++
		return nil
	})
	if err != nil || n != len(spans) {
		t.Fatalf("read %d of %d spans back: %v", n, len(spans), err)
	}
}

// spanRecord is the reflective form of a span line, built field by field
// as telfile.Span: the reference the direct encoder (appendSpan) is held
// to.
func spanRecord(sp sdktrace.ReadOnlySpan) *telfile.Span {
	sc := sp.SpanContext()
	rec := &telfile.Span{
		TraceID:    sc.TraceID().String(),
		SpanID:     sc.SpanID().String(),
		Name:       sp.Name(),
		Kind:       spanKind(sp.SpanKind()),
		StartNS:    unixNanos(sp.StartTime()),
		EndNS:      unixNanos(sp.EndTime()),
		Attributes: attrMap(sp.Attributes()),
		Scope:      sp.InstrumentationScope().Name,
	}
	if p := sp.Parent(); p.SpanID().IsValid() {
		rec.ParentSpanID = p.SpanID().String()
		rec.ParentRemote = p.IsRemote()
	}
	st := sp.Status()
	switch st.Code {
	case codes.Ok:
		rec.Status = telfile.StatusOK
	case codes.Error:
		rec.Status = telfile.StatusError
		rec.StatusMessage = st.Description
	default:
		rec.Status = telfile.StatusUnset
	}
	if evs := sp.Events(); len(evs) > 0 {
		rec.Events = make([]telfile.Event, len(evs))
		for i, ev := range evs {
			rec.Events[i] = telfile.Event{
				Name:       ev.Name,
				TimeNS:     unixNanos(ev.Time),
				Attributes: attrMap(ev.Attributes),
			}
		}
	}
	for _, l := range sp.Links() {
		link := telfile.Link{TraceID: l.SpanContext.TraceID().String(), SpanID: l.SpanContext.SpanID().String()}
		if len(l.Attributes) > 0 {
			link.Attributes = attrMap(l.Attributes)
		}
		rec.Links = append(rec.Links, link)
	}
	return rec
}

// Every attribute value, whether the direct encoder writes it by hand or
// through the general path, is written as the file writes values
// (telfile.MarshalValue): <, > and & as they are.
func TestValuesNotHTMLEscaped(t *testing.T) {
	for _, kv := range []attribute.KeyValue{
		attribute.String("s", "<a&b>"),
		attribute.StringSlice("ss", []string{"<a&b>", "\u2028"}),
		attribute.Slice("mixed", attribute.StringValue("<a&b>"), attribute.IntValue(1)),
		attribute.Map("obj", attribute.String("k", "<a&b>")),
	} {
		got := appendValue(nil, kv.Value)
		want, err := telfile.MarshalValue(attrValue(kv.Value))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(got, []byte("<a&b>")) || !bytes.Equal(got, want) {
			t.Errorf("%s: wrote %s, want %s", kv.Key, got, want)
		}
	}
}
