package telemetry_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/lens"
	"github.com/gymlens/gymlens/telemetry"
	"github.com/gymlens/gymlens/telemetry/metrics"
)

func enable(t *testing.T, extra map[string]string) {
	t.Helper()
	clearEnv(t)
	t.Setenv("NEMO_GYM_OTEL_ENABLED", "true")
	t.Setenv("NEMO_GYM_OTEL_EXPORTER", "none")
	for k, v := range extra {
		t.Setenv(k, v)
	}
	telemetry.ResetForTesting()
	t.Cleanup(telemetry.ResetForTesting)
}

func TestInitDisabledByDefault(t *testing.T) {
	clearEnv(t)
	telemetry.ResetForTesting()
	t.Cleanup(telemetry.ResetForTesting)
	h, err := telemetry.Init(telemetry.InitOptions{ServerName: "a", ServerType: contract.ServerTypeAgent})
	if h != nil || err != nil || telemetry.Get() != nil {
		t.Fatalf("Init with nothing set = %v, %v", h, err)
	}
	if lens.Enabled(telemetry.GroupServer) {
		t.Fatal("gate open while disabled")
	}
	if telemetry.Role() != contract.ServerTypeAgent {
		t.Fatalf("role %q", telemetry.Role())
	}
}

func TestInitFallbackPrefixAndPrimaryWins(t *testing.T) {
	clearEnv(t)
	telemetry.ResetForTesting()
	t.Cleanup(telemetry.ResetForTesting)
	t.Setenv("NEMO_LENS_ENABLED", "1")
	t.Setenv("NEMO_LENS_EXPORTER", "none")
	t.Setenv("NEMO_LENS_SPAN_GROUPS", "all")
	t.Setenv("NEMO_GYM_OTEL_SPAN_GROUPS", "verify")
	exp := tracetest.NewInMemoryExporter()
	h, err := telemetry.Init(telemetry.InitOptions{ServerType: contract.ServerTypeResources, SpanExporter: exp})
	if err != nil || !h.IsExporting() {
		t.Fatalf("fallback ENABLED not honoured: %v %v", h, err)
	}
	if got := strings.Join(h.SpanGroups(), ","); got != "verify" {
		t.Fatalf("groups %q: the primary prefix must beat the fallback", got)
	}
	if !lens.Enabled(telemetry.GroupVerify) || lens.Enabled(telemetry.GroupServer) {
		t.Fatal("gate does not match the resolved groups")
	}
}

// A span processor given to Init sits next to the configured exporter:
// it sees the span start and end, and the exporter still receives it.
func TestInitSpanProcessors(t *testing.T) {
	enable(t, nil)
	exp := tracetest.NewInMemoryExporter()
	proc := tracetest.NewSpanRecorder()
	h, err := telemetry.Init(telemetry.InitOptions{ServerType: contract.ServerTypeResources,
		SpanExporter: exp, SpanProcessors: []sdktrace.SpanProcessor{proc}})
	if err != nil {
		t.Fatal(err)
	}
	_, span := h.Tracer().Start(context.Background(), "user-span")
	span.End()
	if err := h.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	started, ended := proc.Started(), proc.Ended()
	if len(started) != 1 || started[0].Name() != "user-span" || len(ended) != 1 || ended[0].Name() != "user-span" {
		t.Fatalf("processor saw %d spans start, %d end; want user-span once each", len(started), len(ended))
	}
	if got := exp.GetSpans(); len(got) != 1 || got[0].Name != "user-span" {
		t.Fatalf("exporter got %d spans, want user-span alone", len(got))
	}
}

func TestInitBadConfigurationTurnsTelemetryOff(t *testing.T) {
	for name, env := range map[string]map[string]string{
		"bad bool":     {"NEMO_GYM_OTEL_TRACES_ENABLED": "sometimes"},
		"bad int":      {"NEMO_GYM_OTEL_EXPORT_RANK": "last"},
		"bad float":    {"NEMO_GYM_OTEL_EXPORT_SAMPLE_RATE": "lots"},
		"bad group":    {"NEMO_GYM_OTEL_SPAN_GROUPS": "default,everything"},
		"bad interval": {"OTEL_METRIC_EXPORT_INTERVAL": "10s"},
		"bad enabled":  {"NEMO_GYM_OTEL_ENABLED": "y"},
	} {
		t.Run(name, func(t *testing.T) {
			enable(t, env)
			h, err := telemetry.Init(telemetry.InitOptions{ServerType: contract.ServerTypeResources, MetricReader: sdkmetric.NewManualReader()})
			if h != nil || err == nil {
				t.Fatalf("Init = %v, %v; want nil and an error", h, err)
			}
			for k, v := range env {
				if !strings.Contains(err.Error(), k) || !strings.Contains(err.Error(), v) {
					t.Errorf("error %q does not name %s and %q", err, k, v)
				}
			}
			if telemetry.Instruments() != nil || lens.Enabled(telemetry.GroupServer) {
				t.Fatal("telemetry partly on after a bad configuration")
			}
			metrics.RecordVerify(1, true) // must not panic
		})
	}
}

func TestInitIsIdempotentAndShutdownToo(t *testing.T) {
	enable(t, nil)
	h1, err1 := telemetry.Init(telemetry.InitOptions{ServerType: contract.ServerTypeModel, MetricReader: sdkmetric.NewManualReader()})
	h2, err2 := telemetry.Init(telemetry.InitOptions{ServerType: contract.ServerTypeAgent})
	if err1 != nil || err2 != nil || h1 != h2 || h1 == nil {
		t.Fatalf("second Init: %p %v / %p %v", h1, err1, h2, err2)
	}
	if telemetry.Role() != contract.ServerTypeModel {
		t.Fatalf("second Init changed the role to %q", telemetry.Role())
	}
	if err := telemetry.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := telemetry.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if telemetry.Get() != nil || telemetry.Instruments() != nil || lens.Enabled(telemetry.GroupServer) {
		t.Fatal("telemetry still live after Shutdown")
	}
}

// An empty SPAN_GROUPS is unset, as nemo-lens reads it: the fallback
// prefix applies (and else the default preset). "," names no group.
func TestEmptySpanGroupsFallBack(t *testing.T) {
	enable(t, map[string]string{"NEMO_GYM_OTEL_SPAN_GROUPS": "", "NEMO_LENS_SPAN_GROUPS": "job"})
	h, err := telemetry.Init(telemetry.InitOptions{SpanExporter: tracetest.NewInMemoryExporter()})
	if err != nil || !h.IsExporting() {
		t.Fatalf("%v %v", h, err)
	}
	if g := h.SpanGroups(); len(g) != 1 || g[0] != "job" {
		t.Fatalf("empty SPAN_GROUPS over NEMO_LENS_SPAN_GROUPS=job enabled %v", g)
	}
}

func TestCommaSpanGroupsEnableNone(t *testing.T) {
	enable(t, map[string]string{"NEMO_GYM_OTEL_SPAN_GROUPS": ",", "NEMO_LENS_SPAN_GROUPS": "all"})
	h, err := telemetry.Init(telemetry.InitOptions{SpanExporter: tracetest.NewInMemoryExporter()})
	if err != nil || !h.IsExporting() {
		t.Fatalf("%v %v", h, err)
	}
	if g := h.SpanGroups(); len(g) != 0 || lens.EnabledGroups() != 0 {
		t.Fatalf(`SPAN_GROUPS="," enabled %v`, g)
	}
}

func TestShutdownWithoutInit(t *testing.T) {
	clearEnv(t)
	telemetry.ResetForTesting()
	if err := telemetry.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestInitRejectsUnknownServerType(t *testing.T) {
	enable(t, nil)
	if _, err := telemetry.Init(telemetry.InitOptions{ServerType: "database"}); err == nil || !strings.Contains(err.Error(), "database") {
		t.Fatalf("err = %v", err)
	}
}

func TestResourceAttributes(t *testing.T) {
	for _, perServer := range []bool{true, false} {
		t.Run(map[bool]string{true: "per-server", false: "shared"}[perServer], func(t *testing.T) {
			env := map[string]string{"NEMO_GYM_OTEL_RUN_ID": "run123", "OTEL_SERVICE_NAME": "fleet"}
			if !perServer {
				env["NEMO_GYM_OTEL_SERVICE_NAME_PER_SERVER"] = "no"
			}
			enable(t, env)
			reader := sdkmetric.NewManualReader()
			exp := tracetest.NewInMemoryExporter()
			h, err := telemetry.Init(telemetry.InitOptions{
				ServerName: "arithmetic", ServerType: contract.ServerTypeResources,
				ResourceAttributes: map[string]string{"team": "rl"},
				MetricReader:       reader, SpanExporter: exp,
			})
			if err != nil {
				t.Fatal(err)
			}
			_, span := lens.Start(context.Background(), telemetry.GroupServer, "probe")
			span.End()
			metrics.RecordVerify(1, true)
			if err := h.ForceFlush(context.Background()); err != nil {
				t.Fatal(err)
			}
			var rm metricdata.ResourceMetrics
			if err := reader.Collect(context.Background(), &rm); err != nil {
				t.Fatal(err)
			}
			spans := exp.GetSpans()
			if len(spans) != 1 {
				t.Fatalf("%d spans", len(spans))
			}
			wantName := "fleet/arithmetic"
			if !perServer {
				wantName = "fleet"
			}
			want := map[string]string{
				"service.name": wantName, "nemo.gym.service_group": "fleet",
				"nemo.gym.server.name": "arithmetic", "nemo.gym.server.type": "resources_servers",
				"nemo.gym.version": contract.Version, "nemo.run.id": "run123", "team": "rl",
			}
			for signal, set := range map[string]*attribute.Set{"metrics": rm.Resource.Set(), "traces": spans[0].Resource.Set()} {
				for k, v := range want {
					got, ok := set.Value(attribute.Key(k))
					if !ok || got.AsString() != v {
						t.Errorf("%s resource %s = %q, want %q", signal, k, got.AsString(), v)
					}
				}
				// nemo-lens's instance id: the run id and the rank.
				if id, ok := set.Value("service.instance.id"); !ok || id.AsString() != "run123-rank0" {
					t.Errorf("%s resource service.instance.id = %q, want run123-rank0", signal, id.AsString())
				}
			}
		})
	}
}

func TestDefaultPresetGatesAndMetricsIndependentOfGroups(t *testing.T) {
	enable(t, nil)
	reader := sdkmetric.NewManualReader()
	if _, err := telemetry.Init(telemetry.InitOptions{ServerType: contract.ServerTypeResources, MetricReader: reader,
		SpanExporter: tracetest.NewInMemoryExporter()}); err != nil {
		t.Fatal(err)
	}
	// SPAN_GROUPS unset: the default preset applies. verify is not in it,
	// yet verify metrics are recorded.
	for g, want := range map[lens.SpanGroup]bool{
		telemetry.GroupJob: true, telemetry.GroupServer: true, telemetry.GroupHTTPClient: true,
		telemetry.GroupRollout: true, telemetry.GroupVerify: false, telemetry.GroupModelCall: false,
	} {
		if lens.Enabled(g) != want {
			t.Errorf("Enabled(%d) = %v, want %v", g, !want, want)
		}
	}
	metrics.RecordVerify(5, true)
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			found = found || m.Name == "gym.verify.duration_ms"
		}
	}
	if !found {
		t.Fatal("verify metrics missing under the default preset")
	}
}

func TestGateStaysClosedWithoutTraces(t *testing.T) {
	enable(t, map[string]string{"NEMO_GYM_OTEL_SPAN_GROUPS": "all", "NEMO_GYM_OTEL_TRACES_ENABLED": "0"})
	h, err := telemetry.Init(telemetry.InitOptions{ServerType: contract.ServerTypeResources, MetricReader: sdkmetric.NewManualReader()})
	if err != nil || !h.MetricsExporting() {
		t.Fatalf("%v %v", h, err)
	}
	if lens.EnabledGroups() != 0 {
		t.Fatalf("gate open (%b) in a process that records no spans", lens.EnabledGroups())
	}
}

// Repeated Init/Shutdown with every exporter that starts goroutines or
// listeners leaves nothing running (TestMain checks with goleak).
func TestRepeatedInitShutdownLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	for i := range 5 {
		enable(t, map[string]string{
			"NEMO_GYM_OTEL_EXPORTER":        "file,prometheus",
			"NEMO_GYM_OTEL_FILE_PATH":       filepath.Join(dir, fmt.Sprintf("p%d.jsonl", i)),
			"NEMO_GYM_OTEL_PROMETHEUS_ADDR": "127.0.0.1:0",
			"NEMO_GYM_OTEL_LOGS_ENABLED":    "1",
			"NEMO_GYM_OTEL_SPAN_GROUPS":     "all",
		})
		h, err := telemetry.Init(telemetry.InitOptions{ServerName: "leak", ServerType: contract.ServerTypeResources})
		if err != nil || !h.IsExporting() || h.PrometheusAddr() == "" {
			t.Fatalf("round %d: %v %v", i, h, err)
		}
		_, span := lens.Start(context.Background(), telemetry.GroupVerify, "leak.check")
		span.End()
		metrics.RecordVerify(1, true)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = telemetry.Shutdown(ctx)
		cancel()
		if err != nil {
			t.Fatalf("round %d: shutdown: %v", i, err)
		}
		telemetry.ResetForTesting()
	}
}

// A process that exports metrics exports the Go runtime's too, from the
// contrib runtime instrumentation's scope, on the same provider (and so the
// same reader) as the gym instruments.
func TestInitExportsGoRuntimeMetrics(t *testing.T) {
	enable(t, nil)
	reader := sdkmetric.NewManualReader()
	h, err := telemetry.Init(telemetry.InitOptions{ServerName: "a", ServerType: contract.ServerTypeAgent, MetricReader: reader})
	if err != nil || !h.MetricsExporting() {
		t.Fatalf("Init: %v, %v", h, err)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	const runtimeScope = "go.opentelemetry.io/contrib/instrumentation/runtime"
	got := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != runtimeScope {
			continue
		}
		for _, m := range sm.Metrics {
			got[m.Name] = m
		}
	}
	for _, name := range []string{"go.memory.used", "go.memory.allocated", "go.goroutine.count", "go.processor.limit", "go.config.gogc"} {
		if _, ok := got[name]; !ok {
			t.Errorf("%s not exported in scope %s (have %v)", name, runtimeScope, got)
		}
	}
	if m, ok := got["go.memory.used"]; ok {
		s, isSum := m.Data.(metricdata.Sum[int64])
		var total int64
		for _, p := range s.DataPoints {
			total += p.Value
		}
		if !isSum || total <= 0 || m.Unit != "By" {
			t.Errorf("go.memory.used = %+v (unit %q), want a positive byte count", m.Data, m.Unit)
		}
	}
}
