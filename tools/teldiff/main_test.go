package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	colmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

func str(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}

// side describes one synthetic recording.
type side struct {
	lang, scope, spanScope, unit string
	bounds                       []float64
	port                         string
	extraAttr                    bool
	traceID                      []byte
}

func recording(t *testing.T, s side) string {
	t.Helper()
	res := &resourcepb.Resource{Attributes: []*commonpb.KeyValue{
		str("service.name", "nemo-gym/string_match"), str("telemetry.sdk.language", s.lang), str("process.pid", s.port)}}
	attrs := []*commonpb.KeyValue{str("http.route", "/verify"), str("server.port", s.port)}
	if s.extraAttr {
		attrs = append(attrs, str("only.here", "x"))
	}
	metrics := &colmetrics.ExportMetricsServiceRequest{ResourceMetrics: []*metricspb.ResourceMetrics{{
		Resource: res,
		ScopeMetrics: []*metricspb.ScopeMetrics{{Scope: &commonpb.InstrumentationScope{Name: s.scope}, Metrics: []*metricspb.Metric{
			{Name: "gym.verify.duration_ms", Unit: s.unit, Data: &metricspb.Metric_Histogram{Histogram: &metricspb.Histogram{
				AggregationTemporality: metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE,
				DataPoints:             []*metricspb.HistogramDataPoint{{ExplicitBounds: s.bounds, Attributes: attrs}}}}},
			{Name: "gym.verify.calls", Unit: "{call}", Data: &metricspb.Metric_Sum{Sum: &metricspb.Sum{IsMonotonic: true,
				AggregationTemporality: metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE,
				DataPoints:             []*metricspb.NumberDataPoint{{Value: &metricspb.NumberDataPoint_AsInt{AsInt: 3}}}}}},
		}}},
	}}}
	traces := &coltrace.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		Resource: res,
		ScopeSpans: []*tracepb.ScopeSpans{{Scope: &commonpb.InstrumentationScope{Name: s.spanScope}, Spans: []*tracepb.Span{
			{Name: "POST /verify", Kind: tracepb.Span_SPAN_KIND_SERVER, TraceId: s.traceID, Attributes: attrs},
		}}},
	}}}
	var b strings.Builder
	for _, l := range []struct {
		signal string
		msg    proto.Message
	}{{"metrics", metrics}, {"traces", traces}} {
		body, err := protojson.Marshal(l.msg)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(`{"signal":"` + l.signal + `","request":` + string(body) + "}\n")
	}
	return b.String()
}

func writeRecording(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func findRow(t *testing.T, rows []Row, section, item string) Row {
	t.Helper()
	for _, r := range rows {
		if r.Section == section && r.Item == item {
			return r
		}
	}
	t.Fatalf("no row %s %s in %+v", section, item, rows)
	return Row{}
}

func TestCompareSameShapes(t *testing.T) {
	trace := bytes.Repeat([]byte{0xab}, 16)
	bounds := []float64{0, 5, 10}
	g := recording(t, side{lang: "go", scope: "nemo.lens", spanScope: "nemo.gym", unit: "ms", bounds: bounds, port: "1", traceID: trace})
	u := recording(t, side{lang: "python", scope: "nemo.lens", spanScope: "nemo.gym", unit: "ms", bounds: bounds, port: "2", traceID: trace})
	var out, errOut bytes.Buffer
	if code := run([]string{"-json", "-trace-id", strings.Repeat("AB", 16), writeRecording(t, "g", g), writeRecording(t, "u", u)}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var d struct {
		Gymlens, Upstream *Summary
		Rows              []Row
	}
	if err := json.Unmarshal(out.Bytes(), &d); err != nil {
		t.Fatal(err)
	}
	// Ports differ (1 vs 2) but are run-dependent, so the verdict is same.
	for _, c := range []struct{ section, item, verdict string }{
		{"metric", "gym.verify.duration_ms", Same},
		{"metric", "gym.verify.calls", Same},
		{"span", "POST /verify", Same},
		{"resource", "service.name", Same},
		{"resource", "process.pid", Same},
		{"resource", "telemetry.sdk.language", "differs: go vs python"},
		{"scope (metrics)", "nemo.lens", Same},
		{"traceparent", strings.Repeat("ab", 16), Same},
	} {
		if r := findRow(t, d.Rows, c.section, c.item); r.Verdict != c.verdict {
			t.Errorf("%s %s: verdict %q, want %q", c.section, c.item, r.Verdict, c.verdict)
		}
	}
	// Prometheus names, as the OpenTelemetry Prometheus exporter makes them.
	r := findRow(t, d.Rows, "prometheus", "gym.verify.duration_ms")
	want := "gym_verify_duration_ms_milliseconds_bucket gym_verify_duration_ms_milliseconds_count gym_verify_duration_ms_milliseconds_sum {http_route,le,otel_scope_name,otel_scope_schema_url,otel_scope_version,server_port}"
	if r.Gymlens != want || r.Verdict != Same {
		t.Errorf("prometheus row %+v, want gymlens %q and same", r, want)
	}
	if r := findRow(t, d.Rows, "prometheus", "gym.verify.calls"); !strings.HasPrefix(r.Gymlens, "gym_verify_calls_total {") {
		t.Errorf("counter series %q, want gym_verify_calls_total", r.Gymlens)
	}
	if m := d.Gymlens.Metrics["gym.verify.duration_ms"]; !slices.Equal(m.Bounds, []string{"0,5,10"}) || m.Points != 1 {
		t.Errorf("summary of the histogram: %+v", m)
	}
}

func TestCompareFindsEachDifference(t *testing.T) {
	g := recording(t, side{lang: "go", scope: "nemo.lens", spanScope: "nemo.gym", unit: "ms", bounds: []float64{0, 5}, port: "1",
		traceID: bytes.Repeat([]byte{1}, 16)})
	u := recording(t, side{lang: "python", scope: "opentelemetry.instrumentation.fastapi", spanScope: "nemo.lens.helpers", unit: "s",
		bounds: []float64{0, 10}, port: "2", extraAttr: true, traceID: bytes.Repeat([]byte{2}, 16)})
	gs, err := ReadRecording(strings.NewReader(g))
	if err != nil {
		t.Fatal(err)
	}
	us, err := ReadRecording(strings.NewReader(u))
	if err != nil {
		t.Fatal(err)
	}
	rows := Compare(gs, us, strings.Repeat("01", 16))
	v := findRow(t, rows, "metric", "gym.verify.duration_ms").Verdict
	for _, part := range []string{"unit [ms] vs [s]", "bounds [0,5] vs [0,10]", "scope [nemo.lens] vs [opentelemetry.instrumentation.fastapi]", "attrs only upstream: only.here"} {
		if !strings.Contains(v, part) {
			t.Errorf("metric verdict %q lacks %q", v, part)
		}
	}
	if v := findRow(t, rows, "span", "POST /verify").Verdict; !strings.Contains(v, "scope [nemo.gym] vs [nemo.lens.helpers]") {
		t.Errorf("span verdict %q", v)
	}
	if v := findRow(t, rows, "prometheus", "gym.verify.duration_ms").Verdict; !strings.HasPrefix(v, "differs: gym_verify_duration_ms_milliseconds_bucket") {
		t.Errorf("prometheus verdict %q", v)
	}
	if r := findRow(t, rows, "scope (metrics)", "nemo.lens"); r.Verdict != OnlyGymlens {
		t.Errorf("scope row %+v", r)
	}
	if r := findRow(t, rows, "scope (metrics)", "opentelemetry.instrumentation.fastapi"); r.Verdict != OnlyUpstream {
		t.Errorf("scope row %+v", r)
	}
	if r := findRow(t, rows, "traceparent", strings.Repeat("01", 16)); r.Upstream != "(none)" || !strings.HasPrefix(r.Verdict, "differs") {
		t.Errorf("trace row %+v", r)
	}
	var md bytes.Buffer
	if err := WriteMarkdown(&md, rows); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(md.String(), "\n"); lines != len(rows)+2 {
		t.Errorf("%d table lines for %d rows", lines, len(rows))
	}
}

func TestBadInput(t *testing.T) {
	var out, errOut bytes.Buffer
	for _, args := range [][]string{{}, {"one"}, {"-nope", "a", "b"}} {
		if code := run(args, &out, &errOut); code != 2 {
			t.Errorf("teldiff %v: exit %d, want 2", args, code)
		}
	}
	good := writeRecording(t, "g", recording(t, side{lang: "go", scope: "s", spanScope: "s", unit: "ms", port: "1"}))
	for _, bad := range []string{"not json\n", `{"signal":"profiles","request":{}}` + "\n", `{"signal":"traces","request":{"resourceSpans":3}}` + "\n"} {
		if code := run([]string{good, writeRecording(t, "bad", bad)}, &out, &errOut); code != 1 {
			t.Errorf("recording %q: exit %d, want 1", bad, code)
		}
	}
	if code := run([]string{good, filepath.Join(t.TempDir(), "missing")}, &out, &errOut); code != 1 {
		t.Errorf("missing recording: exit %d, want 1", code)
	}
}
