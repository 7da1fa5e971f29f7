package lens_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/lens"
	"github.com/gymlens/gymlens/lens/telfile"
)

// readTelemetry parses a telemetry file (or console output) back into records.
func readTelemetry(t *testing.T, path string, data []byte) []telfile.Record {
	t.Helper()
	var recs []telfile.Record
	collect := func(r telfile.Record) error { recs = append(recs, r); return nil }
	var err error
	if path != "" {
		err = telfile.ReadFile(path, collect)
	} else {
		err = telfile.Read(bytes.NewReader(data), collect)
	}
	if err != nil {
		t.Fatalf("reading telemetry back: %v", err)
	}
	return recs
}

func spansByName(recs []telfile.Record) map[string]*telfile.Span {
	out := map[string]*telfile.Span{}
	for _, r := range recs {
		if r.Span != nil {
			out[r.Span.Name] = r.Span
		}
	}
	return out
}

func metricByName(recs []telfile.Record, name string) *telfile.Metric {
	var last *telfile.Metric
	for _, r := range recs {
		if r.Metric != nil && r.Metric.Name == name {
			last = r.Metric
		}
	}
	return last
}

// emitSampleTelemetry records a root span, a failing child, a span in a
// group that is off, and a counter, all through the public lens API.
func emitSampleTelemetry(t *testing.T, h *lens.Handle) {
	t.Helper()
	ctx, root := lens.Start(context.Background(), lens.GroupJob, "job.run")
	cctx, child := lens.Start(ctx, lens.GroupStep, "train.step")
	_, off := lens.Start(cctx, lens.GroupEvaluate, "evaluate.off")
	lens.End(off, nil)
	lens.SetAttributes(child, map[string]any{"step": 7, "prompt": "secret words"})
	lens.End(child, errors.New("step failed"))
	lens.End(root, nil)

	counter, err := h.Meter().Int64Counter("lens_test.items", metric.WithUnit("{item}"))
	if err != nil {
		t.Fatal(err)
	}
	counter.Add(ctx, 3, metric.WithAttributes(attribute.String("kind", "a")))
	counter.Add(ctx, 4, metric.WithAttributes(attribute.String("kind", "a")))
}

func checkSampleTelemetry(t *testing.T, recs []telfile.Record, service string) {
	t.Helper()
	if len(recs) == 0 || recs[0].Resource == nil {
		t.Fatalf("first record is not a resource header: %+v", recs)
	}
	if got := recs[0].Resource.Attributes["service.name"]; got != service {
		t.Errorf("header service.name = %v, want %q", got, service)
	}
	if recs[0].Resource.Format != telfile.FormatVersion {
		t.Errorf("header format %d", recs[0].Resource.Format)
	}
	spans := spansByName(recs)
	root, child := spans["job.run"], spans["train.step"]
	if root == nil || child == nil {
		t.Fatalf("spans written: %v", spans)
	}
	if _, ok := spans["evaluate.off"]; ok {
		t.Error("span of a disabled group was written")
	}
	if len(spans) != 2 {
		t.Errorf("wrote %d spans, want 2", len(spans))
	}
	if !root.IsRoot() || root.Status != telfile.StatusUnset {
		t.Errorf("root span: parent %q status %q", root.ParentSpanID, root.Status)
	}
	if child.ParentSpanID != root.SpanID || child.TraceID != root.TraceID {
		t.Errorf("child parent=%s trace=%s, want parent=%s trace=%s", child.ParentSpanID, child.TraceID, root.SpanID, root.TraceID)
	}
	if child.Status != telfile.StatusError || child.StatusMessage != "step failed" {
		t.Errorf("child status %q %q", child.Status, child.StatusMessage)
	}
	if child.Attributes["prompt"] != lens.Redacted || child.Attributes["step"] != float64(7) {
		t.Errorf("child attributes %v", child.Attributes)
	}
	if child.Scope != contract.TracerScope {
		t.Errorf("span scope %q", child.Scope)
	}
	m := metricByName(recs, "lens_test.items")
	if m == nil {
		t.Fatal("metric lens_test.items not written")
	}
	if m.Kind != telfile.MetricSum || !m.Monotonic || m.Unit != "{item}" || m.Scope != contract.MeterScope {
		t.Errorf("metric %+v", m)
	}
	if len(m.Points) != 1 || m.Points[0].Attributes["kind"] != "a" {
		t.Fatalf("metric points %+v", m.Points)
	}
	if v, ok := m.Points[0].Value.Int64(); !ok || v != 7 {
		t.Errorf("metric value %s, want 7", m.Points[0].Value)
	}
}

func TestFileExporterWritesParsableTelemetry(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run", "telemetry.jsonl") // parent created on demand
	cfg := mustLoad(t, map[string]string{
		"NEMO_GYM_OTEL_ENABLED":     "1",
		"NEMO_GYM_OTEL_EXPORTER":    "file",
		"NEMO_GYM_OTEL_FILE_PATH":   path,
		"NEMO_GYM_OTEL_SPAN_GROUPS": "job,step",
	})
	h := mustSetup(t, cfg, lens.Options{ServiceName: "file-svc"})
	if !h.IsExporting() || !h.TracesExporting() || !h.MetricsExporting() {
		t.Fatal("file exporter set-up does not export")
	}
	emitSampleTelemetry(t, h)
	if err := h.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	recs := readTelemetry(t, path, nil)
	checkSampleTelemetry(t, recs, "file-svc")
	headers := 0
	for _, r := range recs {
		if r.Resource != nil {
			headers++
		}
	}
	if headers != 1 {
		t.Errorf("file holds %d resource headers, want 1 (one sink shared by all signals)", headers)
	}
}

func TestConsoleExporterWritesJSONLines(t *testing.T) {
	var out bytes.Buffer
	cfg := mustLoad(t, map[string]string{
		"NEMO_GYM_OTEL_ENABLED":     "true",
		"NEMO_GYM_OTEL_EXPORTER":    "console",
		"NEMO_GYM_OTEL_SPAN_GROUPS": "job,step",
		"OTEL_SERVICE_NAME":         "console-svc",
	})
	h := mustSetup(t, cfg, lens.Options{Stdout: &out})
	emitSampleTelemetry(t, h)
	if err := h.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	data := out.Bytes()
	if len(data) == 0 || data[len(data)-1] != '\n' {
		t.Fatalf("console output does not end in a newline: %q", data)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	types := map[string]int{}
	for n := 1; sc.Scan(); n++ {
		var obj map[string]any
		if err := json.Unmarshal(sc.Bytes(), &obj); err != nil {
			t.Fatalf("line %d is not one JSON object: %v: %q", n, err, sc.Text())
		}
		typ, _ := obj["type"].(string)
		types[typ]++
	}
	if types["resource"] != 1 || types["span"] != 2 || types["metric"] == 0 {
		t.Errorf("line types %v", types)
	}
	// The service name falls back to OTEL_SERVICE_NAME.
	checkSampleTelemetry(t, readTelemetry(t, "", data), "console-svc")
}

func TestPrometheusExporterServesMetrics(t *testing.T) {
	cfg := mustLoad(t, map[string]string{
		"NEMO_GYM_OTEL_ENABLED":         "on",
		"NEMO_GYM_OTEL_EXPORTER":        "prometheus",
		"NEMO_GYM_OTEL_PROMETHEUS_ADDR": "127.0.0.1:0",
		"NEMO_GYM_OTEL_SPAN_GROUPS":     "job",
	})
	h := mustSetup(t, cfg, lens.Options{})
	addr := h.PrometheusAddr()
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host != "127.0.0.1" || port == "0" || port == "" {
		t.Fatalf("PrometheusAddr() = %q, want the bound loopback address", addr)
	}
	counter, err := h.Meter().Int64Counter("lens_test_requests")
	if err != nil {
		t.Fatal(err)
	}
	counter.Add(context.Background(), 7, metric.WithAttributes(attribute.String("route", "/run")))

	transport := &http.Transport{DisableKeepAlives: true}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport}
	resp, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: status %d, %v", resp.StatusCode, err)
	}
	found := false
	for line := range strings.Lines(string(body)) {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "lens_test_requests_total{") && strings.Contains(line, `route="/run"`) {
			found = true
			if !strings.HasSuffix(line, " 7") {
				t.Errorf("sample %q, want value 7", line)
			}
		}
	}
	if !found {
		t.Fatalf("counter missing from /metrics:\n%s", body)
	}
	if strings.Contains(string(body), "go_goroutines") {
		t.Error("the endpoint exposes the global registry's Go collector; it must use its own registry")
	}

	if err := h.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	conn, err := net.Dial("tcp", addr)
	if err == nil {
		conn.Close()
		t.Fatalf("prometheus port %s still open after Shutdown", addr)
	}
}

func TestPrometheusExporterBindFailureReleasesProcess(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	isolateTelemetry(t)
	// Traces stay off here: see the report on providers leaked by a failed
	// build.
	cfg := mustLoad(t, map[string]string{
		"NEMO_GYM_OTEL_ENABLED":         "1",
		"NEMO_GYM_OTEL_EXPORTER":        "prometheus",
		"NEMO_GYM_OTEL_PROMETHEUS_ADDR": busy.Addr().String(),
		"NEMO_GYM_OTEL_TRACES_ENABLED":  "0",
		"NEMO_GYM_OTEL_SPAN_GROUPS":     "job",
	})
	h, err := lens.Setup(context.Background(), cfg, lens.Options{})
	if err == nil || h != nil {
		t.Fatalf("Setup on a busy port = %v, %v; want an error", h, err)
	}
	if !strings.Contains(err.Error(), busy.Addr().String()) {
		t.Errorf("error %q does not name the address", err)
	}
	if lens.EnabledGroups() != 0 || lens.Current() != nil {
		t.Error("failed Setup left state behind")
	}
	cfg = mustLoad(t, enabledVars(nil))
	if _, err := lens.Setup(context.Background(), cfg, lens.Options{}); err != nil {
		t.Errorf("Setup after a failed build: %v", err)
	}
}

// TestSetupBuildFailureStopsStartedProviders covers a failure after the
// tracer provider was built: the provider must be shut down and the global
// one reset, or its batch goroutine leaks and global tracers keep exporting.
func TestSetupBuildFailureStopsStartedProviders(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	isolateTelemetry(t)
	before := goleak.IgnoreCurrent()
	cfg := mustLoad(t, map[string]string{
		"NEMO_GYM_OTEL_ENABLED":         "1",
		"NEMO_GYM_OTEL_EXPORTER":        "prometheus",
		"NEMO_GYM_OTEL_PROMETHEUS_ADDR": busy.Addr().String(),
		"NEMO_GYM_OTEL_SPAN_GROUPS":     "job",
	})
	exp := tracetest.NewInMemoryExporter()
	if _, err := lens.Setup(context.Background(), cfg, lens.Options{SpanExporter: exp}); err == nil {
		t.Fatal("Setup on a busy port succeeded")
	}
	_, span := otel.Tracer("after-failure").Start(context.Background(), "global")
	if span.IsRecording() {
		t.Error("the global tracer provider of a failed Setup still records")
	}
	span.End()
	if err := goleak.Find(before); err != nil {
		t.Errorf("a failed Setup left goroutines running: %v", err)
	}
}

func TestLogsBridgeCarriesTraceContext(t *testing.T) {
	// The previous default logger is a custom one: wrapping the built-in
	// default handler deadlocks (see the report).
	origSlog, origOut, origFlags := slog.Default(), log.Writer(), log.Flags()
	t.Cleanup(func() {
		slog.SetDefault(origSlog)
		log.SetOutput(origOut)
		log.SetFlags(origFlags)
	})
	var prevOut bytes.Buffer
	prev := slog.New(slog.NewTextHandler(&prevOut, nil))
	slog.SetDefault(prev)

	var out bytes.Buffer
	cfg := mustLoad(t, map[string]string{
		"NEMO_GYM_OTEL_ENABLED":         "1",
		"NEMO_GYM_OTEL_EXPORTER":        "console",
		"NEMO_GYM_OTEL_LOGS_ENABLED":    "yes",
		"NEMO_GYM_OTEL_METRICS_ENABLED": "no",
		"NEMO_GYM_OTEL_SPAN_GROUPS":     "job",
	})
	h := mustSetup(t, cfg, lens.Options{Stdout: &out})
	if slog.Default() == prev {
		t.Fatal("Setup with LOGS_ENABLED did not install a bridging default logger")
	}
	ctx, span := lens.Start(context.Background(), lens.GroupJob, "logging-span")
	slog.InfoContext(ctx, "inside the span", "attempt", 2)
	lens.End(span, nil)
	slog.Info("outside any span")
	if err := h.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if slog.Default() != prev {
		t.Error("Shutdown did not restore the previous default logger")
	}
	if !strings.Contains(prevOut.String(), "inside the span") {
		t.Errorf("the previous handler no longer receives records: %q", prevOut.String())
	}

	var inside, outside *telfile.Log
	for _, r := range readTelemetry(t, "", out.Bytes()) {
		if r.Log == nil {
			continue
		}
		switch r.Log.Body {
		case "inside the span":
			inside = r.Log
		case "outside any span":
			outside = r.Log
		}
	}
	if inside == nil || outside == nil {
		t.Fatalf("log lines missing from console output:\n%s", out.String())
	}
	sc := span.SpanContext()
	if inside.TraceID != sc.TraceID().String() || inside.SpanID != sc.SpanID().String() {
		t.Errorf("log carries trace %q span %q, want %s %s", inside.TraceID, inside.SpanID, sc.TraceID(), sc.SpanID())
	}
	if inside.Severity != "INFO" || inside.Attributes["attempt"] != float64(2) {
		t.Errorf("log record %+v", inside)
	}
	if outside.TraceID != "" {
		t.Errorf("log outside a span carries trace %q", outside.TraceID)
	}

	// After Shutdown, records no longer reach the exporter.
	n := out.Len()
	slog.Info("after shutdown")
	if out.Len() != n {
		t.Error("a record logged after Shutdown reached the console exporter")
	}
}

func TestFileExporterWithoutPathFailsSetupClearly(t *testing.T) {
	isolateTelemetry(t)
	cfg := mustLoad(t, map[string]string{
		"NEMO_GYM_OTEL_ENABLED":  "1",
		"NEMO_GYM_OTEL_EXPORTER": "file",
	})
	h, err := lens.Setup(context.Background(), cfg, lens.Options{})
	if err == nil || h != nil || !strings.Contains(err.Error(), "NEMO_GYM_OTEL_FILE_PATH") {
		t.Fatalf("Setup = %v, %v; want an error naming NEMO_GYM_OTEL_FILE_PATH", h, err)
	}
	if lens.EnabledGroups() != 0 || lens.Current() != nil {
		t.Error("failed Setup left state behind")
	}
}
