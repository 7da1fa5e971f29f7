package lens_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/lens"
)

// memPipeline is an enabled set-up whose spans land in memory and whose
// metrics are collected on demand.
type memPipeline struct {
	h      *lens.Handle
	spans  *tracetest.InMemoryExporter
	reader *sdkmetric.ManualReader
}

// setupInMemory loads the configuration from vars (on top of enabledVars)
// and sets up telemetry with an in-memory span exporter and a manual
// metric reader.
func setupInMemory(t *testing.T, vars map[string]string, opts lens.Options) memPipeline {
	t.Helper()
	cfg := mustLoad(t, enabledVars(vars))
	p := memPipeline{spans: tracetest.NewInMemoryExporter(), reader: sdkmetric.NewManualReader()}
	opts.SpanExporter, opts.MetricReader = p.spans, p.reader
	p.h = mustSetup(t, cfg, opts)
	return p
}

// finishedSpans flushes the batch processor and returns what was exported.
// (InMemoryExporter forgets its spans on Shutdown, so read before that.)
func (p memPipeline) finishedSpans(t *testing.T) tracetest.SpanStubs {
	t.Helper()
	if err := p.h.ForceFlush(context.Background()); err != nil {
		t.Fatalf("ForceFlush: %v", err)
	}
	return p.spans.GetSpans()
}

// collect returns the metric named name from one collection, or fails.
func (p memPipeline) collect(t *testing.T, name string) metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := p.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("Collect: %v", err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				if sm.Scope.Name != contract.MeterScope {
					t.Errorf("metric %s in scope %q, want %q", name, sm.Scope.Name, contract.MeterScope)
				}
				return m
			}
		}
	}
	t.Fatalf("metric %s not collected (got %+v)", name, rm.ScopeMetrics)
	return metricdata.Metrics{}
}

func resourceValue(t *testing.T, h *lens.Handle, key string) (attribute.Value, bool) {
	t.Helper()
	res := h.Resource()
	if res == nil {
		t.Fatal("Resource() is nil")
	}
	return res.Set().Value(attribute.Key(key))
}

func TestSetupDisabledConfig(t *testing.T) {
	isolateTelemetry(t)
	cfg := mustLoad(t, map[string]string{"NEMO_GYM_OTEL_SPAN_GROUPS": "all"}) // ENABLED defaults to false
	exp := tracetest.NewInMemoryExporter()
	h, err := lens.Setup(context.Background(), cfg, lens.Options{SpanExporter: exp})
	if err != nil {
		t.Fatalf("Setup(disabled): %v", err)
	}
	if h == nil {
		t.Fatal("Setup(disabled) returned a nil handle")
	}
	if h.IsExporting() || h.TracesExporting() || h.MetricsExporting() {
		t.Error("disabled handle claims to export")
	}
	if _, ok := h.Tracer().(tracenoop.Tracer); !ok {
		t.Errorf("Tracer() is %T, want a no-op tracer", h.Tracer())
	}
	if _, ok := h.Meter().(metricnoop.Meter); !ok {
		t.Errorf("Meter() is %T, want a no-op meter", h.Meter())
	}
	if lens.EnabledGroups() != 0 || lens.Enabled(lens.GroupJob) {
		t.Errorf("gate %b open for a disabled configuration", lens.EnabledGroups())
	}
	if h.PrometheusAddr() != "" || h.Resource() != nil || len(h.SpanGroups()) != 0 {
		t.Errorf("disabled handle has prometheus %q, resource %v, groups %v", h.PrometheusAddr(), h.Resource(), h.SpanGroups())
	}
	if h.Config().Enabled || h.Config().SpanGroups != "all" {
		t.Errorf("Config() = %+v, want the configuration passed in", h.Config())
	}
	if lens.Current() != nil {
		t.Error("a disabled Setup became the live handle")
	}
	_, span := lens.Start(context.Background(), lens.GroupJob, "never")
	lens.End(span, nil)
	if err := h.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(exp.GetSpans()); n != 0 {
		t.Errorf("disabled set-up exported %d spans", n)
	}
	if err := h.Shutdown(context.Background()); err != nil {
		t.Errorf("Shutdown of a disabled handle: %v", err)
	}
	// A disabled set-up does not use up the process's one enabled Setup.
	h2, err := lens.Setup(context.Background(), mustLoad(t, enabledVars(nil)), lens.Options{SpanExporter: exp})
	if err != nil || !h2.IsExporting() {
		t.Fatalf("enabled Setup after a disabled one: exporting=%v err=%v", h2.IsExporting(), err)
	}
}

func TestNilHandleIsSafe(t *testing.T) {
	var h *lens.Handle
	if h.IsExporting() || h.TracesExporting() || h.MetricsExporting() {
		t.Error("nil handle claims to export")
	}
	if _, ok := h.Tracer().(tracenoop.Tracer); !ok {
		t.Errorf("nil Tracer() is %T", h.Tracer())
	}
	if _, ok := h.Meter().(metricnoop.Meter); !ok {
		t.Errorf("nil Meter() is %T", h.Meter())
	}
	_, span := h.Tracer().Start(context.Background(), "x")
	if span.IsRecording() {
		t.Error("nil handle's tracer records")
	}
	c, err := h.Meter().Int64Counter("x")
	if err != nil {
		t.Fatal(err)
	}
	c.Add(context.Background(), 1)
	if h.Config().Enabled || h.SpanGroups() != nil || h.Resource() != nil || h.PrometheusAddr() != "" {
		t.Error("nil handle returns non-zero values")
	}
	if h.LoggerProvider() == nil {
		t.Error("nil LoggerProvider()")
	}
	if err := h.ForceFlush(context.Background()); err != nil {
		t.Errorf("nil ForceFlush: %v", err)
	}
	if err := h.Shutdown(context.Background()); err != nil {
		t.Errorf("nil Shutdown: %v", err)
	}
}

func TestSetupEnabledPipeline(t *testing.T) {
	groups := lens.NewGroupSet()
	verify := lens.FirstCustomGroup
	if err := groups.Define("verify", verify); err != nil {
		t.Fatal(err)
	}
	if err := groups.Define("last_bit", lens.MaxGroups-1); err != nil {
		t.Fatal(err)
	}
	p := setupInMemory(t, map[string]string{
		"NEMO_GYM_OTEL_SPAN_GROUPS": " Job, VERIFY ,last_bit",
		"OTEL_SERVICE_NAME":         "ignored-group-name",
	}, lens.Options{
		Groups:      groups,
		ServiceName: "nemo-gym/math_server",
		Attributes:  []attribute.KeyValue{attribute.String("nemo.gym.run.id", "run-42")},
	})
	h := p.h
	if !h.IsExporting() || !h.TracesExporting() || !h.MetricsExporting() {
		t.Fatalf("exporting=%v traces=%v metrics=%v", h.IsExporting(), h.TracesExporting(), h.MetricsExporting())
	}
	if lens.Current() != h {
		t.Error("Current() is not the new handle")
	}
	want := map[lens.SpanGroup]bool{lens.GroupJob: true, verify: true, lens.MaxGroups - 1: true}
	for g := range lens.SpanGroup(255) {
		if got := lens.Enabled(g); got != want[g] {
			t.Errorf("Enabled(%d) = %v, want %v", g, got, want[g])
		}
	}
	if got := lens.EnabledGroups(); got != maskOf(lens.GroupJob, verify, lens.MaxGroups-1) {
		t.Errorf("EnabledGroups() = %b", got)
	}
	if got := h.SpanGroups(); !slices.Equal(got, []string{"job", "last_bit", "verify"}) {
		t.Errorf("SpanGroups() = %v", got)
	}

	if v, ok := resourceValue(t, h, "service.name"); !ok || v.AsString() != "nemo-gym/math_server" {
		t.Errorf("service.name = %v, %v; want Options.ServiceName", v.Emit(), ok)
	}
	// Without a run id there is no service.instance.id, as in nemo-lens
	// (TestResourceRunID covers the one with a run id).
	if id, ok := resourceValue(t, h, "service.instance.id"); ok {
		t.Errorf("service.instance.id = %q without a RUN_ID, want none", id.AsString())
	}
	if v, ok := resourceValue(t, h, "nemo.gym.run.id"); !ok || v.AsString() != "run-42" {
		t.Errorf("extra resource attribute = %v, %v", v.Emit(), ok)
	}

	// The tracer records and exports with the resource attached.
	ctx, span := h.Tracer().Start(context.Background(), "direct")
	if !span.IsRecording() {
		t.Fatal("tracer of an exporting handle does not record")
	}
	// Trace context propagation is installed globally.
	carrier := propagation.MapCarrier{}
	otel.GetTextMapPropagator().Inject(ctx, carrier)
	if tp := carrier.Get("traceparent"); !strings.Contains(tp, span.SpanContext().TraceID().String()) {
		t.Errorf("traceparent %q does not carry the trace id", tp)
	}
	span.End()
	spans := p.finishedSpans(t)
	if len(spans) != 1 || spans[0].Name != "direct" {
		t.Fatalf("exported spans %v", spans)
	}
	if v, _ := spans[0].Resource.Set().Value("service.name"); v.AsString() != "nemo-gym/math_server" {
		t.Errorf("span resource service.name = %q", v.AsString())
	}
	if spans[0].InstrumentationScope.Name != contract.TracerScope {
		t.Errorf("span scope %q, want %q", spans[0].InstrumentationScope.Name, contract.TracerScope)
	}
	// The global provider is the handle's.
	_, gspan := otel.Tracer("other").Start(context.Background(), "global")
	if !gspan.IsRecording() {
		t.Error("global tracer provider not installed")
	}
	gspan.End()

	// The meter records into the configured reader.
	counter, err := h.Meter().Int64Counter("lens_test.setup.items")
	if err != nil {
		t.Fatal(err)
	}
	counter.Add(context.Background(), 2)
	counter.Add(context.Background(), 3)
	m := p.collect(t, "lens_test.setup.items")
	sum, ok := m.Data.(metricdata.Sum[int64])
	if !ok || len(sum.DataPoints) != 1 || sum.DataPoints[0].Value != 5 || !sum.IsMonotonic {
		t.Errorf("collected %+v, want a monotonic sum of 5", m.Data)
	}
}

func TestSetupTracesDisabledKeepsMetrics(t *testing.T) {
	p := setupInMemory(t, map[string]string{"NEMO_GYM_OTEL_TRACES_ENABLED": "false"}, lens.Options{})
	if !p.h.IsExporting() || p.h.TracesExporting() || !p.h.MetricsExporting() {
		t.Fatalf("exporting=%v traces=%v metrics=%v", p.h.IsExporting(), p.h.TracesExporting(), p.h.MetricsExporting())
	}
	// No spans are recorded, so every site stays a bare gate check.
	if lens.Enabled(lens.GroupJob) || lens.EnabledGroups() != 0 {
		t.Fatal("gate open although no span is recorded")
	}
	_, span := lens.Start(context.Background(), lens.GroupJob, "no-traces")
	if span.IsRecording() {
		t.Error("span recorded with TRACES_ENABLED=false")
	}
	span.End()
	if n := len(p.finishedSpans(t)); n != 0 {
		t.Errorf("%d spans exported with TRACES_ENABLED=false", n)
	}
}

func TestSetupSecondCallFails(t *testing.T) {
	p := setupInMemory(t, nil, lens.Options{})
	before := lens.EnabledGroups()
	cfg := mustLoad(t, enabledVars(map[string]string{"NEMO_GYM_OTEL_SPAN_GROUPS": "all"}))
	h2, err := lens.Setup(context.Background(), cfg, lens.Options{SpanExporter: tracetest.NewInMemoryExporter()})
	if !errors.Is(err, lens.ErrAlreadySetUp) || h2 != nil {
		t.Fatalf("second Setup = %v, %v; want nil, ErrAlreadySetUp", h2, err)
	}
	if lens.Current() != p.h || lens.EnabledGroups() != before {
		t.Error("a failed second Setup changed the live state")
	}
	// Shutting down does not free the process for another Setup...
	if err := p.h.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := lens.Setup(context.Background(), cfg, lens.Options{SpanExporter: tracetest.NewInMemoryExporter()}); !errors.Is(err, lens.ErrAlreadySetUp) {
		t.Errorf("Setup after Shutdown = %v, want ErrAlreadySetUp", err)
	}
	// ...but ResetForTesting does.
	lens.ResetForTesting()
	h3, err := lens.Setup(context.Background(), cfg, lens.Options{SpanExporter: tracetest.NewInMemoryExporter()})
	if err != nil || !h3.IsExporting() {
		t.Fatalf("Setup after ResetForTesting: %v", err)
	}
}

var errReaderShutdown = errors.New("reader shutdown failed on purpose")

// countingReader is a manual reader whose Shutdown is counted and fails.
type countingReader struct {
	*sdkmetric.ManualReader
	shutdowns atomic.Int32
}

func (r *countingReader) Shutdown(ctx context.Context) error {
	r.shutdowns.Add(1)
	_ = r.ManualReader.Shutdown(ctx)
	return errReaderShutdown
}

func TestShutdownIsIdempotent(t *testing.T) {
	reader := &countingReader{ManualReader: sdkmetric.NewManualReader()}
	exp := tracetest.NewInMemoryExporter()
	h := mustSetup(t, mustLoad(t, enabledVars(nil)), lens.Options{SpanExporter: exp, MetricReader: reader})
	if !lens.Enabled(lens.GroupJob) {
		t.Fatal("gate closed after Setup")
	}
	_, span := lens.Start(context.Background(), lens.GroupJob, "before-shutdown")
	lens.End(span, nil)

	first := h.Shutdown(context.Background())
	if !errors.Is(first, errReaderShutdown) {
		t.Fatalf("Shutdown = %v, want the reader's error", first)
	}
	if !strings.Contains(first.Error(), "metrics") {
		t.Errorf("Shutdown error %q does not say which signal failed", first)
	}
	second := h.Shutdown(context.Background())
	if second != first {
		t.Errorf("second Shutdown = %v, want the first result %v", second, first)
	}
	if n := reader.shutdowns.Load(); n != 1 {
		t.Errorf("reader shut down %d times, want 1", n)
	}
	if lens.EnabledGroups() != 0 || lens.Enabled(lens.GroupJob) {
		t.Errorf("gate %b still open after Shutdown", lens.EnabledGroups())
	}
	if lens.Current() != nil {
		t.Error("Current() still set after Shutdown")
	}
	_, after := lens.Start(context.Background(), lens.GroupJob, "after-shutdown")
	if after.IsRecording() {
		t.Error("lens.Start records after Shutdown")
	}
	_, gspan := otel.Tracer("x").Start(context.Background(), "global-after")
	if gspan.IsRecording() {
		t.Error("global tracer provider still records after Shutdown")
	}
}

func TestSetupStrategyRulesProcessOut(t *testing.T) {
	never := func(lens.ExportContext) bool { return false }
	if err := lens.RegisterExportStrategy("lens_test_never", never); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lens.UnregisterExportStrategy("lens_test_never") })

	cases := []struct {
		name string
		vars map[string]string
		opts lens.Options
	}{
		{"custom never", map[string]string{"NEMO_GYM_OTEL_EXPORT_STRATEGY": "lens_test_never"}, lens.Options{}},
		{"single_rank other rank", map[string]string{"NEMO_GYM_OTEL_EXPORT_STRATEGY": "single_rank", "NEMO_GYM_OTEL_EXPORT_RANK": "0"},
			lens.Options{Rank: 1, WorldSize: 2}},
		{"single_rank default is last", map[string]string{"NEMO_GYM_OTEL_EXPORT_STRATEGY": "single_rank"},
			lens.Options{Rank: 0, WorldSize: 2}},
		{"first_rank_per_node", map[string]string{"NEMO_GYM_OTEL_EXPORT_STRATEGY": "first_rank_per_node"},
			lens.Options{Rank: 3, WorldSize: 4, LocalRank: 1}},
		{"sampled rate 0", map[string]string{"NEMO_GYM_OTEL_EXPORT_STRATEGY": "sampled", "NEMO_GYM_OTEL_EXPORT_SAMPLE_RATE": "0"},
			lens.Options{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			exp := tracetest.NewInMemoryExporter()
			opts := c.opts
			opts.SpanExporter = exp
			h := mustSetup(t, mustLoad(t, enabledVars(c.vars)), opts)
			if h.IsExporting() || h.TracesExporting() || h.MetricsExporting() {
				t.Error("ruled-out process exports")
			}
			if lens.EnabledGroups() != 0 {
				t.Errorf("gate %b open in a ruled-out process", lens.EnabledGroups())
			}
			if _, ok := h.Tracer().(tracenoop.Tracer); !ok {
				t.Errorf("Tracer() is %T", h.Tracer())
			}
			_, span := lens.Start(context.Background(), lens.GroupJob, "x")
			lens.End(span, nil)
			if span.IsRecording() || len(exp.GetSpans()) != 0 {
				t.Error("ruled-out process recorded a span")
			}
			// The process is still claimed.
			if _, err := lens.Setup(context.Background(), mustLoad(t, enabledVars(nil)), opts); !errors.Is(err, lens.ErrAlreadySetUp) {
				t.Errorf("second Setup = %v, want ErrAlreadySetUp", err)
			}
		})
	}
}

func TestSetupLocalRankFromEnvironment(t *testing.T) {
	vars := map[string]string{"NEMO_GYM_OTEL_EXPORT_STRATEGY": "first_rank_per_node"}
	h := mustSetup(t, mustLoad(t, enabledVars(vars)), lens.Options{Rank: 1, WorldSize: 2, SpanExporter: tracetest.NewInMemoryExporter()})
	if !h.IsExporting() {
		t.Error("local rank 0 (no LOCAL_RANK) does not export under first_rank_per_node")
	}
	lens.ResetForTesting()
	t.Setenv("LOCAL_RANK", "1")
	h, err := lens.Setup(context.Background(), mustLoad(t, enabledVars(vars)), lens.Options{Rank: 1, WorldSize: 2, SpanExporter: tracetest.NewInMemoryExporter()})
	if err != nil {
		t.Fatal(err)
	}
	if h.IsExporting() {
		t.Error("LOCAL_RANK=1 exports under first_rank_per_node")
	}
}

func TestSetupPanickingStrategyIsAnError(t *testing.T) {
	if err := lens.RegisterExportStrategy("lens_test_explodes", func(lens.ExportContext) bool { panic("strategy exploded") }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lens.UnregisterExportStrategy("lens_test_explodes") })
	isolateTelemetry(t)
	cfg := mustLoad(t, enabledVars(map[string]string{"NEMO_GYM_OTEL_EXPORT_STRATEGY": "lens_test_explodes"}))
	var h *lens.Handle
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("Setup panicked: %v", r)
			}
		}()
		h, err = lens.Setup(context.Background(), cfg, lens.Options{SpanExporter: tracetest.NewInMemoryExporter()})
	}()
	if err == nil || h != nil {
		t.Fatalf("Setup = %v, %v; want an error", h, err)
	}
	if !strings.Contains(err.Error(), "lens_test_explodes") || !strings.Contains(err.Error(), "strategy exploded") {
		t.Errorf("error %q does not name the strategy and the panic", err)
	}
	if lens.EnabledGroups() != 0 || lens.Current() != nil {
		t.Error("failed Setup left state behind")
	}
	// The process is not claimed by the failed attempt.
	h, err = lens.Setup(context.Background(), mustLoad(t, enabledVars(nil)), lens.Options{SpanExporter: tracetest.NewInMemoryExporter()})
	if err != nil || !h.IsExporting() {
		t.Fatalf("Setup after a failed one: %v", err)
	}
}

func TestSetupRejectsBadInputs(t *testing.T) {
	cases := []struct {
		name string
		vars map[string]string
		opts lens.Options
		want string
	}{
		{"rank outside world", nil, lens.Options{Rank: 4, WorldSize: 4}, "outside world size"},
		{"negative rank", nil, lens.Options{Rank: -1, WorldSize: 4}, "outside world size"},
		{"unknown span group", map[string]string{"NEMO_GYM_OTEL_SPAN_GROUPS": "job,bogus"}, lens.Options{}, "bogus"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			isolateTelemetry(t)
			opts := c.opts
			opts.SpanExporter = tracetest.NewInMemoryExporter()
			h, err := lens.Setup(context.Background(), mustLoad(t, enabledVars(c.vars)), opts)
			if err == nil || h != nil {
				t.Fatalf("Setup = %v, %v; want an error", h, err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not mention %q", err, c.want)
			}
			if lens.EnabledGroups() != 0 || lens.Current() != nil {
				t.Error("failed Setup left state behind")
			}
			if _, err := lens.Setup(context.Background(), mustLoad(t, enabledVars(nil)), lens.Options{SpanExporter: tracetest.NewInMemoryExporter()}); err != nil {
				t.Errorf("Setup after a rejected one: %v", err)
			}
		})
	}
}

func TestSetupEmptySpanGroupsExportsWithGateClosed(t *testing.T) {
	p := setupInMemory(t, map[string]string{"NEMO_GYM_OTEL_SPAN_GROUPS": " , "}, lens.Options{})
	if !p.h.IsExporting() {
		t.Fatal("an empty group list stopped the process from exporting")
	}
	if lens.EnabledGroups() != 0 || len(p.h.SpanGroups()) != 0 {
		t.Errorf("gate %b groups %v, want none", lens.EnabledGroups(), p.h.SpanGroups())
	}
	// Metrics still flow.
	c, err := p.h.Meter().Int64Counter("lens_test.no_groups")
	if err != nil {
		t.Fatal(err)
	}
	c.Add(context.Background(), 1)
	if m := p.collect(t, "lens_test.no_groups"); m.Data.(metricdata.Sum[int64]).DataPoints[0].Value != 1 {
		t.Errorf("collected %+v", m.Data)
	}
}

func TestSetupExporterNoneDoesNotExport(t *testing.T) {
	h := mustSetup(t, mustLoad(t, enabledVars(map[string]string{"NEMO_GYM_OTEL_EXPORTER": "none"})), lens.Options{})
	if h.IsExporting() || lens.EnabledGroups() != 0 {
		t.Errorf("EXPORTER=none: exporting=%v gate=%b", h.IsExporting(), lens.EnabledGroups())
	}
	if lens.Current() != h {
		t.Error("the non-exporting handle is not live")
	}
	if _, err := lens.Setup(context.Background(), mustLoad(t, enabledVars(nil)), lens.Options{}); !errors.Is(err, lens.ErrAlreadySetUp) {
		t.Errorf("second Setup = %v, want ErrAlreadySetUp", err)
	}
}
