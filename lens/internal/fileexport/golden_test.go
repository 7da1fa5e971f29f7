package fileexport

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/spans.golden from the current encoder")

// goldenSpans builds the spans the golden file pins beyond lensSpans: a
// fleet-shaped SERVER span (remote parent, five attributes) with a CLIENT
// child under it, and a span made of odd cases: non-ASCII and invalid
// UTF-8 in every string, events (a recorded error among them, one with a
// repeated key), links with and without attributes, an error status, and
// the attribute kinds that take the encoder's general path.
func goldenSpans(tb testing.TB) []sdktrace.ReadOnlySpan {
	tb.Helper()
	var got []sdktrace.ReadOnlySpan
	p := newTestProvider(collectLens(func(s sdktrace.ReadOnlySpan) { got = append(got, s) }))
	t0 := time.Unix(1700000000, 123456789)
	at := func(ms int) trace.SpanEventOption {
		return trace.WithTimestamp(t0.Add(time.Duration(ms) * time.Millisecond))
	}

	remote := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6}, TraceFlags: trace.FlagsSampled, Remote: true})
	tr := p.Tracer("gymlens/test")
	ctx, srv := tr.Start(trace.ContextWithRemoteSpanContext(context.Background(), remote), "POST /verify",
		trace.WithSpanKind(trace.SpanKindServer), at(0),
		trace.WithAttributes(attribute.String("url.scheme", "http"), attribute.String("http.route", "/verify"),
			attribute.String("http.request.method", "POST")))
	srv.SetAttributes(attribute.String("url.path", "/verify"), attribute.Int("http.response.status_code", 200))
	_, cl := tr.Start(ctx, "GET", trace.WithSpanKind(trace.SpanKindClient), at(1),
		trace.WithAttributes(attribute.String("server.address", "upstream"), attribute.Int("server.port", 8080)))
	cl.SetStatus(codes.Ok, "")
	cl.End(at(5))
	srv.End(at(9))

	linked := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{0xab}, SpanID: trace.SpanID{0xcd}})
	_, odd := p.Tracer("gymlens/ödd \xff").Start(context.Background(), "résumé \xc3\x28 ✓ \u2028 \x00",
		trace.WithSpanKind(trace.SpanKindProducer), at(0),
		trace.WithLinks(trace.Link{SpanContext: linked}))
	odd.SetAttributes(
		attribute.String("naïve \xfe", "ünï\tcode \xff"),
		attribute.Int64("min", math.MinInt64),
		attribute.Float64("neg0", math.Copysign(0, -1)),
		attribute.Float64("big", 1e21),
		attribute.Float64("small", 5e-324),
		attribute.Float64Slice("nonfinite", []float64{math.NaN(), math.Inf(1), math.Inf(-1)}),
		attribute.StringSlice("strs", []string{"a\"b", "\xff", ""}),
		attribute.ByteSlice("raw", []byte{0xff, 0x00}),
		attribute.Slice("mixed", attribute.IntValue(1), attribute.StringValue("x\xff"), attribute.Float64Value(math.NaN())),
		attribute.Map("obj", attribute.Bool("b", true), attribute.Float64("inf", math.Inf(-1))),
		attribute.KeyValue{Key: "empty"},
	)
	odd.AddEvent("rêp \x1f", at(2), trace.WithAttributes(attribute.String("k", "first"), attribute.String("k", "last ✓")))
	odd.AddEvent("bare", at(3))
	odd.RecordError(errors.New("bad \xff form"), at(4))
	odd.AddLink(trace.Link{SpanContext: remote, Attributes: []attribute.KeyValue{attribute.String("why", "retry ü")}})
	odd.SetStatus(codes.Error, "broke: ü \xfe \"quoted\"")
	odd.End(at(7))

	_, done := p.Tracer("").Start(context.Background(), "", trace.WithSpanKind(trace.SpanKindConsumer), at(0))
	done.End(at(0))
	return got
}

// TestSpanLinesGolden pins the exact bytes the exporter writes for a set of
// spans, so a change to the encoder that a reader would not notice (field
// order, number and string formatting) still shows. The spans' random ids
// are replaced by stable placeholders before the comparison. Run with
// -update to rewrite the file after a deliberate format change.
func TestSpanLinesGolden(t *testing.T) {
	spans := append(goldenSpans(t), lensSpans(t)...)
	var buf bytes.Buffer
	if err := NewSink(&buf, nil).SpanExporter().ExportSpans(context.Background(), spans); err != nil {
		t.Fatal(err)
	}
	_, lines, ok := bytes.Cut(buf.Bytes(), []byte("\n")) // drop the resource line, which holds the time
	if !ok {
		t.Fatalf("no resource line in %q", buf.Bytes())
	}
	var pairs []string
	seen := map[string]bool{}
	for i, sp := range spans {
		sc := sp.SpanContext()
		for _, id := range []struct{ hex, name string }{
			{sc.TraceID().String(), fmt.Sprintf("<trace %d>", i)},
			{sc.SpanID().String(), fmt.Sprintf("<span %d>", i)},
		} {
			if !seen[id.hex] {
				seen[id.hex] = true
				pairs = append(pairs, id.hex, id.name)
			}
		}
	}
	for i := 0; i < len(pairs); i += 2 {
		lines = bytes.ReplaceAll(lines, []byte(pairs[i]), []byte(pairs[i+1]))
	}

	path := filepath.Join("testdata", "spans.golden")
	if *updateGolden {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, lines, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(lines, want) {
		gl, wl := bytes.Split(lines, []byte("\n")), bytes.Split(want, []byte("\n"))
		for i := range max(len(gl), len(wl)) {
			var g, w []byte
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if !bytes.Equal(g, w) {
				t.Errorf("line %d:\ngot  %s\nwant %s", i+1, g, w)
			}
		}
	}
}
