package fileexport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	otellog "go.opentelemetry.io/otel/log"
	"go.opentelemetry.io/otel/metric"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	"go.opentelemetry.io/otel/trace"

	"github.com/gymlens/gymlens/lens/telfile"
)

func testResource() *resource.Resource {
	return resource.NewSchemaless(
		attribute.String("service.name", "gymlens-test"),
		attribute.Int("test.shard", 3),
	)
}

// parse reads every record back and fails the test on any error.
func parse(t *testing.T, data []byte) []telfile.Record {
	t.Helper()
	var recs []telfile.Record
	if err := telfile.Read(bytes.NewReader(data), func(r telfile.Record) error {
		recs = append(recs, r)
		return nil
	}); err != nil {
		t.Fatalf("reading back: %v\n%s", err, data)
	}
	return recs
}

func ofType(recs []telfile.Record, typ string) []telfile.Record {
	var out []telfile.Record
	for _, r := range recs {
		if r.Type == typ {
			out = append(out, r)
		}
	}
	return out
}

// exportAtEnd is a tracer processor that exports each span the moment it
// ends, one export (and one line) per End, in the order spans end.
type exportAtEnd struct {
	endOnly
	tb  testing.TB
	exp *SpanExporter
}

func (p exportAtEnd) OnEnd(s sdktrace.ReadOnlySpan) {
	if err := p.exp.ExportSpans(context.Background(), []sdktrace.ReadOnlySpan{testSpan(s)}); err != nil {
		p.tb.Errorf("exporting %q: %v", s.Name(), err)
	}
}

// batchOf is a tracer processor that exports spans in batches of n from
// whichever goroutine fills one, so that exports overlap each other as
// they may under a batch processor and a flush running together.
type batchOf struct {
	endOnly
	tb  testing.TB
	exp *SpanExporter
	n   int

	mu      sync.Mutex
	pending []sdktrace.ReadOnlySpan
}

func (b *batchOf) OnEnd(s sdktrace.ReadOnlySpan) {
	b.mu.Lock()
	b.pending = append(b.pending, testSpan(s))
	var full []sdktrace.ReadOnlySpan
	if len(b.pending) >= b.n {
		full, b.pending = b.pending, nil
	}
	b.mu.Unlock()
	if full != nil {
		b.export(full)
	}
}

// flush exports what is left over, a batch shorter than n.
func (b *batchOf) flush() {
	b.mu.Lock()
	rest := b.pending
	b.pending = nil
	b.mu.Unlock()
	b.export(rest)
}

func (b *batchOf) export(spans []sdktrace.ReadOnlySpan) {
	if err := b.exp.ExportSpans(context.Background(), spans); err != nil {
		b.tb.Errorf("exporting %d spans: %v", len(spans), err)
	}
}

func TestSpans(t *testing.T) {
	var buf bytes.Buffer
	sink := NewSink(&buf, testResource())
	tr := newTestProvider(exportAtEnd{tb: t, exp: sink.SpanExporter()}).Tracer("gymlens/test")

	ctx, root := tr.Start(context.Background(), "session", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(
			attribute.String("user", "ana"),
			attribute.Int64("reps", 12),
			attribute.Float64("load", 62.5),
			attribute.Float64("ratio", math.NaN()),
			attribute.Bool("warmup", false),
			attribute.StringSlice("tags", []string{"legs", "heavy"}),
			attribute.Float64Slice("splits", []float64{1.5, math.Inf(1)}),
			attribute.Int64Slice("sets", []int64{5, 5, 3}),
			attribute.BoolSlice("done", []bool{true, false}),
		))
	_, child := tr.Start(ctx, "squat", trace.WithSpanKind(trace.SpanKindClient))
	child.AddEvent("rep", trace.WithAttributes(attribute.Int("n", 1)))
	child.SetStatus(codes.Error, "form broke")
	child.End()
	root.SetStatus(codes.Ok, "")
	root.End()

	recs := parse(t, buf.Bytes())
	if len(recs) != 3 || recs[0].Type != telfile.TypeResource {
		t.Fatalf("got %d records, first %q; want header + 2 spans", len(recs), recs[0].Type)
	}
	hdr := recs[0].Resource
	if hdr.Format != telfile.FormatVersion || hdr.Attributes["service.name"] != "gymlens-test" || hdr.Attributes["test.shard"] != float64(3) {
		t.Errorf("header = %+v", hdr)
	}
	if hdr.TimeNS == 0 {
		t.Error("header has no time")
	}

	// The child ends first, so it is exported first.
	c, r := recs[1].Span, recs[2].Span
	if c == nil || r == nil || c.Name != "squat" || r.Name != "session" {
		t.Fatalf("unexpected spans: %+v %+v", recs[1], recs[2])
	}
	rsc, csc := root.SpanContext(), child.SpanContext()
	if r.TraceID != rsc.TraceID().String() || c.TraceID != r.TraceID || len(r.TraceID) != 32 {
		t.Errorf("trace ids: root %s child %s", r.TraceID, c.TraceID)
	}
	if r.SpanID != rsc.SpanID().String() || c.SpanID != csc.SpanID().String() || len(c.SpanID) != 16 {
		t.Errorf("span ids: root %s child %s", r.SpanID, c.SpanID)
	}
	if !r.IsRoot() || r.ParentRemote || c.ParentSpanID != r.SpanID || c.ParentRemote {
		t.Errorf("parents: root %q child %q", r.ParentSpanID, c.ParentSpanID)
	}
	if r.Kind != telfile.KindServer || c.Kind != telfile.KindClient {
		t.Errorf("kinds: %s %s", r.Kind, c.Kind)
	}
	if r.Status != telfile.StatusOK || c.Status != telfile.StatusError || c.StatusMessage != "form broke" {
		t.Errorf("status: root %s, child %s %q", r.Status, c.Status, c.StatusMessage)
	}
	if r.Scope != "gymlens/test" {
		t.Errorf("scope %q", r.Scope)
	}
	if r.Duration() <= 0 || r.StartNS > c.StartNS || r.EndNS < c.EndNS {
		t.Errorf("times: root %d-%d child %d-%d", r.StartNS, r.EndNS, c.StartNS, c.EndNS)
	}
	want := map[string]string{
		"user": `ana`, "reps": `12`, "load": `62.5`, "ratio": `NaN`, "warmup": `false`,
		"tags": `[legs heavy]`, "splits": `[1.5 +Inf]`, "sets": `[5 5 3]`, "done": `[true false]`,
	}
	for k, v := range want {
		if got := fmt.Sprint(r.Attributes[k]); got != v {
			t.Errorf("attribute %s = %s, want %s", k, got, v)
		}
	}
	if len(c.Events) != 1 || c.Events[0].Name != "rep" || c.Events[0].Attributes["n"] != float64(1) || c.Events[0].TimeNS < c.StartNS {
		t.Errorf("events = %+v", c.Events)
	}
	if len(r.Events) != 0 {
		t.Errorf("root has events %+v", r.Events)
	}
}

func TestRemoteParent(t *testing.T) {
	var buf bytes.Buffer
	sink := NewSink(&buf, nil)
	tp := newTestProvider(exportAtEnd{tb: t, exp: sink.SpanExporter()})
	remote := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{1, 2, 3},
		SpanID:     trace.SpanID{4, 5, 6},
		TraceFlags: trace.FlagsSampled,
		Remote:     true,
	})
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), remote)
	_, sp := tp.Tracer("t").Start(ctx, "handler")
	sp.End()

	recs := parse(t, buf.Bytes())
	s := recs[1].Span
	if s.TraceID != remote.TraceID().String() || s.ParentSpanID != remote.SpanID().String() || !s.ParentRemote || s.Kind != telfile.KindInternal {
		t.Errorf("span = %+v", s)
	}
	if len(recs[0].Resource.Attributes) != 0 {
		t.Errorf("nil resource gave attributes %v", recs[0].Resource.Attributes)
	}
}

func TestMetrics(t *testing.T) {
	var buf bytes.Buffer
	sink := NewSink(&buf, testResource())
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(
		sdkmetric.NewPeriodicReader(sink.MetricExporter(), sdkmetric.WithInterval(time.Hour))))
	m := mp.Meter("gymlens/metrics")
	ctx := context.Background()

	counter, _ := m.Int64Counter("reps", metric.WithUnit("{rep}"))
	counter.Add(ctx, 3, metric.WithAttributes(attribute.String("exercise", "squat")))
	counter.Add(ctx, 4, metric.WithAttributes(attribute.String("exercise", "squat")))
	counter.Add(ctx, 1, metric.WithAttributes(attribute.String("exercise", "bench")))

	hist, _ := m.Float64Histogram("rest", metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(30, 60, 120))
	for _, v := range []float64{20, 45, 50, 200} {
		hist.Record(ctx, v)
	}

	gauge, _ := m.Float64Gauge("bodyweight", metric.WithUnit("kg"))
	gauge.Record(ctx, 81.5)

	// An instrument with no measurements must not produce a line.
	_, _ = m.Int64UpDownCounter("unused")

	if err := mp.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	recs := parse(t, buf.Bytes())
	if recs[0].Type != telfile.TypeResource || len(ofType(recs, telfile.TypeResource)) != 1 {
		t.Fatalf("header missing or repeated")
	}
	metrics := map[string]*telfile.Metric{}
	for _, r := range ofType(recs, telfile.TypeMetric) {
		metrics[r.Metric.Name] = r.Metric
	}
	if len(metrics) != 3 {
		t.Fatalf("got metrics %v, want reps, rest, bodyweight", metrics)
	}

	c := metrics["reps"]
	if c.Kind != telfile.MetricSum || !c.Monotonic || c.Temporality != telfile.TemporalityCumulative || c.Unit != "{rep}" || c.Scope != "gymlens/metrics" {
		t.Errorf("counter = %+v", c)
	}
	byEx := map[any]telfile.Number{}
	for _, p := range c.Points {
		byEx[p.Attributes["exercise"]] = p.Value
		if p.StartNS == 0 || p.TimeNS < p.StartNS {
			t.Errorf("counter point times %d..%d", p.StartNS, p.TimeNS)
		}
	}
	if v, ok := byEx["squat"].Int64(); !ok || v != 7 {
		t.Errorf("squat = %q", byEx["squat"])
	}
	if v, ok := byEx["bench"].Int64(); !ok || v != 1 {
		t.Errorf("bench = %q", byEx["bench"])
	}

	h := metrics["rest"]
	if h.Kind != telfile.MetricHistogram || h.Temporality != telfile.TemporalityCumulative || len(h.Points) != 1 {
		t.Fatalf("histogram = %+v", h)
	}
	hp := h.Points[0]
	if hp.Count != 4 || hp.Sum.Float64() != 315 {
		t.Errorf("histogram count %d sum %s", hp.Count, hp.Sum)
	}
	if fmt.Sprint(hp.Bounds) != "[30 60 120]" || fmt.Sprint(hp.Counts) != "[1 2 0 1]" {
		t.Errorf("bounds %v counts %v", hp.Bounds, hp.Counts)
	}
	if hp.Min == nil || hp.Min.Float64() != 20 || hp.Max == nil || hp.Max.Float64() != 200 {
		t.Errorf("min %v max %v", hp.Min, hp.Max)
	}

	g := metrics["bodyweight"]
	if g.Kind != telfile.MetricGauge || g.Temporality != "" || len(g.Points) != 1 || g.Points[0].Value.Float64() != 81.5 {
		t.Errorf("gauge = %+v", g)
	}
	if err := mp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestLogs(t *testing.T) {
	var buf bytes.Buffer
	sink := NewSink(&buf, testResource())
	lp := sdklog.NewLoggerProvider(sdklog.WithProcessor(sdklog.NewSimpleProcessor(sink.LogExporter())))
	tp := newTestProvider() // spans only need valid IDs here
	logger := lp.Logger("gymlens/log")

	ctx, span := tp.Tracer("t").Start(context.Background(), "op")
	var r otellog.Record
	r.SetTimestamp(time.Unix(100, 5))
	r.SetSeverity(otellog.SeverityWarn)
	r.SetBody(attribute.StringValue("knee angle out of range"))
	r.AddAttributes(attribute.Float64("angle", 97.5), attribute.String("side", "left"))
	logger.Emit(ctx, r)
	span.End()

	var r2 otellog.Record
	r2.SetSeverity(otellog.SeverityInfo)
	r2.SetSeverityText("notice")
	r2.SetBody(attribute.Int64Value(42))
	logger.Emit(context.Background(), r2)

	if err := lp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	logs := ofType(parse(t, buf.Bytes()), telfile.TypeLog)
	if len(logs) != 2 {
		t.Fatalf("got %d logs", len(logs))
	}
	l := logs[0].Log
	sc := span.SpanContext()
	if l.TraceID != sc.TraceID().String() || l.SpanID != sc.SpanID().String() {
		t.Errorf("correlation: %s/%s, want %s/%s", l.TraceID, l.SpanID, sc.TraceID(), sc.SpanID())
	}
	if l.Severity != "WARN" || l.SeverityNumber != 13 || l.Body != "knee angle out of range" || l.Scope != "gymlens/log" {
		t.Errorf("log = %+v", l)
	}
	if l.TimeNS != time.Unix(100, 5).UnixNano() || l.ObservedNS == 0 {
		t.Errorf("times %d %d", l.TimeNS, l.ObservedNS)
	}
	if l.Attributes["angle"] != 97.5 || l.Attributes["side"] != "left" {
		t.Errorf("attributes %v", l.Attributes)
	}
	l2 := logs[1].Log
	if l2.Severity != "notice" || l2.SeverityNumber != 9 || l2.Body != "42" || l2.TraceID != "" || l2.SpanID != "" || l2.TimeNS != 0 {
		t.Errorf("second log = %+v", l2)
	}
}

func TestRichAttributeKinds(t *testing.T) {
	got := attrMap([]attribute.KeyValue{
		attribute.ByteSlice("raw", []byte{0xff, 0x00}),
		attribute.Slice("mixed", attribute.IntValue(1), attribute.StringValue("x")),
		attribute.Map("obj", attribute.Bool("b", true), attribute.Float64("inf", math.Inf(-1))),
		{Key: "none"},
	})
	if got["raw"] != "/wA=" {
		t.Errorf("bytes = %v", got["raw"])
	}
	if fmt.Sprint(got["mixed"]) != "[1 x]" {
		t.Errorf("slice = %v", got["mixed"])
	}
	if fmt.Sprint(got["obj"]) != "map[b:true inf:-Inf]" {
		t.Errorf("map = %v", got["obj"])
	}
	if v, ok := got["none"]; !ok || v != nil {
		t.Errorf("empty = %v, %v", v, ok)
	}
	if _, err := telfile.AppendLine(nil, telfile.Log{Attributes: got}); err != nil {
		t.Errorf("not encodable: %v", err)
	}
}

func TestShutdownIsPerExporter(t *testing.T) {
	var buf bytes.Buffer
	sink := NewSink(&buf, nil)
	spans := sink.SpanExporter()
	logs := sink.LogExporter()
	ctx := context.Background()

	if err := logs.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := logs.Shutdown(ctx); err != nil {
		t.Fatalf("second shutdown: %v", err)
	}
	var rec sdklog.Record
	rec.SetBody(attribute.StringValue("dropped"))
	if err := logs.Export(ctx, []sdklog.Record{rec}); err != nil {
		t.Errorf("export after shutdown = %v, want nil", err)
	}
	if err := logs.ForceFlush(ctx); err != nil {
		t.Errorf("flush after shutdown = %v", err)
	}
	if buf.Len() != 0 {
		t.Fatalf("stopped exporter wrote %q", buf.String())
	}

	tp := newTestProvider(exportAtEnd{tb: t, exp: spans})
	_, sp := tp.Tracer("t").Start(ctx, "still-works")
	sp.End()
	recs := parse(t, buf.Bytes())
	if len(recs) != 2 || recs[1].Span.Name != "still-works" {
		t.Errorf("records after another exporter's shutdown: %+v", recs)
	}
}

func TestCancelledContext(t *testing.T) {
	var buf bytes.Buffer
	sink := NewSink(&buf, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var rec sdklog.Record
	exp := sink.LogExporter()
	if err := exp.Export(ctx, []sdklog.Record{rec}); !errors.Is(err, context.Canceled) {
		t.Errorf("Export = %v", err)
	}
	if err := exp.ForceFlush(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("ForceFlush = %v", err)
	}
	if err := sink.MetricExporter().Export(ctx, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("metric Export = %v", err)
	}
	if err := sink.SpanExporter().ExportSpans(ctx, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("ExportSpans = %v", err)
	}
	if buf.Len() != 0 {
		t.Errorf("wrote %q", buf.String())
	}
}

// countingWriter records how many Write calls it received.
type countingWriter struct {
	bytes.Buffer
	writes int
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.writes++
	return w.Buffer.Write(p)
}

// TestOneWritePerBatch: a batch well under writeChunk reaches the writer,
// header included, in a single Write.
func TestOneWritePerBatch(t *testing.T) {
	var w countingWriter
	sink := NewSink(&w, testResource())
	var spans []sdktrace.ReadOnlySpan
	tp := newTestProvider(collectLens(func(s sdktrace.ReadOnlySpan) { spans = append(spans, s) }))
	for i := range 10 {
		_, sp := tp.Tracer("t").Start(context.Background(), fmt.Sprint("s", i))
		sp.End()
	}
	if err := sink.SpanExporter().ExportSpans(context.Background(), spans); err != nil {
		t.Fatal(err)
	}
	if w.writes != 1 {
		t.Errorf("%d writes for header + one batch, want 1", w.writes)
	}
	if n := len(parse(t, w.Bytes())); n != 11 {
		t.Errorf("%d records, want 11", n)
	}
}

func TestConcurrentWriters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nested", "dir", "telemetry.jsonl")
	sink, err := OpenFile(path, testResource())
	if err != nil {
		t.Fatal(err)
	}
	batches := &batchOf{tb: t, exp: sink.SpanExporter(), n: 7}
	tp := newTestProvider(batches)
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(
		sdkmetric.NewPeriodicReader(sink.MetricExporter(), sdkmetric.WithInterval(5*time.Millisecond))))
	lp := sdklog.NewLoggerProvider(sdklog.WithProcessor(sdklog.NewSimpleProcessor(sink.LogExporter())))

	const workers, perWorker = 16, 50
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			tr := tp.Tracer("worker")
			counter, _ := mp.Meter("worker").Int64Counter("ops")
			hist, _ := mp.Meter("worker").Float64Histogram("latency")
			logger := lp.Logger("worker")
			for i := range perWorker {
				spCtx, sp := tr.Start(ctx, "op", trace.WithAttributes(attribute.Int("worker", w), attribute.Int("i", i)))
				counter.Add(spCtx, 1, metric.WithAttributes(attribute.Int("worker", w)))
				hist.Record(spCtx, float64(i))
				if i%10 == 0 {
					var r otellog.Record
					r.SetBody(attribute.StringValue("tick"))
					logger.Emit(spCtx, r)
				}
				sp.End()
			}
		}()
	}
	wg.Wait()
	batches.flush()
	ctx := context.Background()
	for _, err := range []error{mp.Shutdown(ctx), lp.Shutdown(ctx), sink.Close()} {
		if err != nil {
			t.Fatal(err)
		}
	}

	var headers, spans, logs int
	var lastOps int64
	line := 0
	err = telfile.ReadFile(path, func(r telfile.Record) error {
		line++
		switch r.Type {
		case telfile.TypeResource:
			headers++
			if r.Line != 1 {
				t.Errorf("resource header on line %d", r.Line)
			}
		case telfile.TypeSpan:
			spans++
		case telfile.TypeLog:
			logs++
		case telfile.TypeMetric:
			if r.Metric.Name == "ops" {
				var total int64
				for _, p := range r.Metric.Points {
					v, _ := p.Value.Int64()
					total += v
				}
				lastOps = total
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if headers != 1 {
		t.Errorf("%d resource headers, want 1", headers)
	}
	if spans != workers*perWorker {
		t.Errorf("%d spans, want %d", spans, workers*perWorker)
	}
	if logs != workers*perWorker/10 {
		t.Errorf("%d logs, want %d", logs, workers*perWorker/10)
	}
	if lastOps != workers*perWorker {
		t.Errorf("final ops total %d, want %d", lastOps, workers*perWorker)
	}
}

func TestOpenFileAppendsAndCloseIsIdempotent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.jsonl")
	for run := range 2 {
		sink, err := OpenFile(path, resource.NewSchemaless(attribute.Int("run", run)))
		if err != nil {
			t.Fatal(err)
		}
		tp := newTestProvider(exportAtEnd{tb: t, exp: sink.SpanExporter()})
		_, sp := tp.Tracer("t").Start(context.Background(), fmt.Sprint("run-", run))
		sp.End()
		if err := sink.MetricExporter().ForceFlush(context.Background()); err != nil {
			t.Errorf("ForceFlush on file: %v", err)
		}
		if err := sink.Close(); err != nil {
			t.Fatal(err)
		}
		if err := sink.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		// Exports after Close fail loudly instead of vanishing.
		_, sp2 := newTestProvider().Tracer("t").Start(context.Background(), "late")
		sp2.End()
		err = sink.SpanExporter().ExportSpans(context.Background(), []sdktrace.ReadOnlySpan{sp2.(sdktrace.ReadOnlySpan)})
		if !errors.Is(err, ErrClosed) {
			t.Errorf("export after Close = %v, want ErrClosed", err)
		}
	}
	var got []string
	if err := telfile.ReadFile(path, func(r telfile.Record) error {
		switch r.Type {
		case telfile.TypeResource:
			got = append(got, fmt.Sprint("resource:", r.Resource.Attributes["run"]))
		case telfile.TypeSpan:
			got = append(got, "span:"+r.Span.Name)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if want := "[resource:0 span:run-0 resource:1 span:run-1]"; fmt.Sprint(got) != want {
		t.Errorf("file holds %v, want %s", got, want)
	}
}

func TestCloseDoesNotCloseCallerWriter(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "w")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sink := NewSink(f, nil)
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("still open\n"); err != nil {
		t.Errorf("caller's file was closed: %v", err)
	}
}

func TestEmptyBatchesWriteNothing(t *testing.T) {
	var buf bytes.Buffer
	sink := NewSink(&buf, testResource())
	ctx := context.Background()
	_ = sink.SpanExporter().ExportSpans(ctx, nil)
	_ = sink.LogExporter().Export(ctx, nil)
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(sink.MetricExporter())))
	_ = mp.ForceFlush(ctx)
	_ = mp.Shutdown(ctx)
	if buf.Len() != 0 {
		t.Errorf("wrote %q without any data", buf.String())
	}
	if strings.Contains(buf.String(), "resource") {
		t.Error("header written for empty output")
	}
}

// TestLargeBatchWritesWholeLinesInChunks: a batch far larger than
// writeChunk reaches the writer in several writes, each of whole lines, and
// the export buffer is reused rather than regrown per export.
func TestLargeBatchWritesWholeLinesInChunks(t *testing.T) {
	var w countingWriter
	sink := NewSink(&w, testResource())
	exp := sink.SpanExporter()
	const n = 2048
	spans := make([]sdktrace.ReadOnlySpan, 0, n)
	tp := newTestProvider(collectLens(func(s sdktrace.ReadOnlySpan) { spans = append(spans, s) }))
	for i := range n {
		_, sp := tp.Tracer("t").Start(context.Background(), fmt.Sprint("span-", i),
			trace.WithAttributes(attribute.String("padding", strings.Repeat("x", 200))))
		sp.End()
	}
	ctx := context.Background()
	if err := exp.ExportSpans(ctx, spans); err != nil {
		t.Fatal(err)
	}
	if w.Len() < 4*writeChunk {
		t.Fatalf("batch encoded to %d bytes; the test needs several chunks", w.Len())
	}
	if max := w.Len()/writeChunk + 1; w.writes < 2 || w.writes > max {
		t.Errorf("%d writes for %d bytes, want between 2 and %d", w.writes, w.Len(), max)
	}
	if got := len(ofType(parse(t, w.Bytes()), telfile.TypeSpan)); got != n {
		t.Errorf("%d spans read back, want %d", got, n)
	}
	// Later exports reuse the buffer: a 2048-span batch costs about the
	// encoder's own few small allocations per span, not a regrown megabyte.
	allocs := testing.AllocsPerRun(5, func() {
		if err := exp.ExportSpans(ctx, spans); err != nil {
			t.Fatal(err)
		}
	})
	if perSpan := allocs / n; perSpan > 6 {
		t.Errorf("%.1f allocations per span exported", perSpan)
	}
}
