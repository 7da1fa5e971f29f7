package metrics_test

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/lens/telfile"
	"github.com/gymlens/gymlens/telemetry"
	"github.com/gymlens/gymlens/telemetry/metrics"
)

// initMetrics enables telemetry for this process with a manual reader, so
// the test reads exactly what an exporter would receive.
func initMetrics(t *testing.T, serverType string) *sdkmetric.ManualReader {
	t.Helper()
	t.Setenv("NEMO_GYM_OTEL_ENABLED", "1")
	t.Setenv("NEMO_GYM_OTEL_EXPORTER", "none")
	reader := sdkmetric.NewManualReader()
	t.Cleanup(telemetry.ResetForTesting)
	h, err := telemetry.Init(telemetry.InitOptions{ServerName: "t", ServerType: serverType, MetricReader: reader})
	if err != nil || !h.IsExporting() {
		t.Fatalf("Init: handle exporting=%v err=%v", h.IsExporting(), err)
	}
	return reader
}

func collect(t *testing.T, r *sdkmetric.ManualReader) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("collect: %v", err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

func histogram(t *testing.T, m metricdata.Metrics) metricdata.HistogramDataPoint[float64] {
	t.Helper()
	h, ok := m.Data.(metricdata.Histogram[float64])
	if !ok || len(h.DataPoints) != 1 {
		t.Fatalf("%s: want one float64 histogram point, got %T %+v", m.Name, m.Data, m.Data)
	}
	return h.DataPoints[0]
}

func gaugeValue(t *testing.T, m metricdata.Metrics) float64 {
	t.Helper()
	switch g := m.Data.(type) {
	case metricdata.Gauge[float64]:
		if len(g.DataPoints) != 1 {
			t.Fatalf("%s: %d points", m.Name, len(g.DataPoints))
		}
		return g.DataPoints[0].Value
	case metricdata.Gauge[int64]:
		if len(g.DataPoints) != 1 {
			t.Fatalf("%s: %d points", m.Name, len(g.DataPoints))
		}
		return float64(g.DataPoints[0].Value)
	}
	t.Fatalf("%s: not a gauge: %T", m.Name, m.Data)
	return 0
}

func counterByOutcome(t *testing.T, m metricdata.Metrics, key string) map[string]int64 {
	t.Helper()
	s, ok := m.Data.(metricdata.Sum[int64])
	if !ok || !s.IsMonotonic {
		t.Fatalf("%s: want monotonic int64 sum, got %T", m.Name, m.Data)
	}
	out := map[string]int64{}
	for _, p := range s.DataPoints {
		v, _ := p.Attributes.Value(attributeKey(key))
		out[v.AsString()] = p.Value
	}
	return out
}

func TestOffPathRecordsNothingAndNeverFails(t *testing.T) {
	telemetry.ResetForTesting()
	t.Cleanup(telemetry.ResetForTesting)
	// Nothing initialised: every recorder is a silent no-op.
	metrics.RecordRolloutDuration(time.Second)
	metrics.RecordRollout(time.Second, false)
	metrics.RecordVerify(time.Second, true)
	metrics.RecordModelCall(contract.DialectResponses, "m", time.Second, time.Millisecond)
	metrics.RecordHTTPTimeout(true)
	metrics.RecordHTTPRetry(contract.RetryTimeout)
	metrics.RecordAgentTurns("a", 2)
	metrics.RecordAgentTurn("a", time.Second)
	metrics.RecordToolCall("t", "s", time.Second)
	metrics.RecordGenAI(metrics.GenAICall{Operation: contract.GenAIOperationChat, Duration: time.Second})
	metrics.ResetVerifyTallyForTesting()
	if err := metrics.RecordActiveServers(3); !errors.Is(err, metrics.ErrNotOrchestrator) {
		t.Fatalf("RecordActiveServers before Init: %v, want ErrNotOrchestrator", err)
	}

	// Disabled explicitly: Init says so with (nil, nil).
	t.Setenv("NEMO_GYM_OTEL_ENABLED", "off")
	h, err := telemetry.Init(telemetry.InitOptions{ServerType: contract.ServerTypeOrchestrator})
	if h != nil || err != nil {
		t.Fatalf("disabled Init = %v, %v; want nil, nil", h, err)
	}
	if telemetry.Instruments() != nil {
		t.Fatal("instruments exist while disabled")
	}
	// The orchestrator with telemetry off: allowed, records nothing.
	if err := metrics.RecordActiveServers(3); err != nil {
		t.Fatalf("orchestrator RecordActiveServers while off: %v", err)
	}
}

func TestNonExportingProcessRecordsNothing(t *testing.T) {
	t.Setenv("NEMO_GYM_OTEL_ENABLED", "1")
	t.Setenv("NEMO_GYM_OTEL_EXPORTER", "none")
	t.Setenv("NEMO_GYM_OTEL_EXPORT_STRATEGY", "single_rank")
	t.Setenv("NEMO_GYM_OTEL_EXPORT_RANK", "1")
	reader := sdkmetric.NewManualReader()
	t.Cleanup(telemetry.ResetForTesting)
	h, err := telemetry.Init(telemetry.InitOptions{ServerType: contract.ServerTypeResources, Rank: 0, WorldSize: 2, MetricReader: reader})
	if err != nil {
		t.Fatal(err)
	}
	if h.IsExporting() || telemetry.Instruments() != nil {
		t.Fatalf("rank 0 of 2 under single_rank(1) exports")
	}
	metrics.RecordVerify(time.Millisecond, true)
	// The reader was never attached to a provider: nothing could reach it.
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err == nil {
		t.Fatalf("reader of a non-exporting process is attached: %+v", rm)
	}
}

func TestInstrumentsNamesUnitsBucketsAndValues(t *testing.T) {
	reader := initMetrics(t, contract.ServerTypeOrchestrator)
	metrics.RecordRolloutDuration(1500 * time.Millisecond)
	metrics.RecordRollout(200*time.Millisecond, false)
	metrics.RecordVerify(40*time.Millisecond, true)
	if err := metrics.RecordActiveServers(3); err != nil {
		t.Fatal(err)
	}
	got := collect(t, reader)

	for name, unit := range map[string]string{
		contract.RolloutDuration:   "ms",
		contract.VerifyDuration:    "ms",
		contract.VerifySuccessRate: "", // upstream sets no unit
		contract.ServersActive:     "", // upstream sets no unit
		contract.VerifyCalls:       "{call}",
		contract.RolloutCompleted:  "1",
	} {
		m, ok := got[name]
		if !ok {
			t.Fatalf("%s not exported; got %v", name, keys(got))
		}
		if m.Unit != unit {
			t.Errorf("%s unit %q, want %q", name, m.Unit, unit)
		}
	}
	rollout := histogram(t, got[contract.RolloutDuration])
	if rollout.Count != 2 || rollout.Sum != 1700 {
		t.Errorf("rollout histogram count=%d sum=%v, want 2 and 1700", rollout.Count, rollout.Sum)
	}
	// Upstream sets no boundaries, so the OpenTelemetry default explicit
	// buckets apply; the literal is the contract, DefaultBucketsMS states it.
	want := []float64{0, 5, 10, 25, 50, 75, 100, 250, 500, 750, 1000, 2500, 5000, 7500, 10000}
	if !slices.Equal(rollout.Bounds, want) {
		t.Errorf("bounds %v, want %v", rollout.Bounds, want)
	}
	if !slices.Equal(contract.DefaultBucketsMS, want) {
		t.Errorf("DefaultBucketsMS = %v, want %v", contract.DefaultBucketsMS, want)
	}
	// 200 ms lands in (100,250], 1500 ms in (1000,2500].
	if rollout.BucketCounts[7] != 1 || rollout.BucketCounts[11] != 1 {
		t.Errorf("bucket counts %v", rollout.BucketCounts)
	}
	verify := histogram(t, got[contract.VerifyDuration])
	if verify.Count != 1 || verify.Sum != 40 || !slices.Equal(verify.Bounds, want) {
		t.Errorf("verify histogram %+v", verify)
	}
	if v := gaugeValue(t, got[contract.VerifySuccessRate]); v != 1 {
		t.Errorf("success rate %v, want 1", v)
	}
	if v := gaugeValue(t, got[contract.ServersActive]); v != 3 {
		t.Errorf("servers.active %v, want 3", v)
	}
	if c := counterByOutcome(t, got[contract.RolloutCompleted], contract.AttrRolloutOutcome); c["failure"] != 1 || c["success"] != 0 {
		t.Errorf("rollout calls %v", c)
	}
	// Every gym instrument carries no attributes, except the two counters'
	// outcome.
	for _, name := range []string{contract.RolloutDuration, contract.VerifyDuration} {
		if p := histogram(t, got[name]); p.Attributes.Len() != 0 {
			t.Errorf("%s has attributes %v", name, p.Attributes)
		}
	}
	// Emitted names are a subset of the declared ones (besides the Go
	// runtime's, in their own scope), and the deliberately unused
	// histogram is never emitted.
	for name := range got {
		if _, ok := contract.Lookup(name); !ok && !strings.HasPrefix(name, "go.") {
			t.Errorf("emitted undeclared metric %q", name)
		}
	}
	if _, ok := got[contract.ServerRequestDuration]; ok {
		t.Errorf("%s was emitted", contract.ServerRequestDuration)
	}
}

func TestSuccessRateIsCumulativeFraction(t *testing.T) {
	reader := initMetrics(t, contract.ServerTypeResources)
	if _, ok := collect(t, reader)[contract.VerifySuccessRate]; ok {
		t.Fatal("success rate has a data point before any verification")
	}
	metrics.RecordVerify(time.Millisecond, false)
	got := collect(t, reader)
	if v := gaugeValue(t, got[contract.VerifySuccessRate]); v != 0 {
		t.Fatalf("failure first: rate %v, want 0", v)
	}
	metrics.ResetVerifyTallyForTesting()
	for range 3 {
		metrics.RecordVerify(time.Millisecond, true)
	}
	metrics.RecordVerify(time.Millisecond, false)
	got = collect(t, reader)
	if v := gaugeValue(t, got[contract.VerifySuccessRate]); v != 0.75 {
		t.Fatalf("3 successes + 1 failure: rate %v, want 0.75", v)
	}
	if c := counterByOutcome(t, got[contract.VerifyCalls], contract.AttrVerifyOutcome); c["success"] != 3 || c["failure"] != 1 {
		t.Fatalf("verify calls %v, want success 3 failure 1", c)
	}
}

func TestSuccessRateNeverAboveOneUnderConcurrency(t *testing.T) {
	reader := initMetrics(t, contract.ServerTypeResources)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var maxSeen float64
	var collectErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			var rm metricdata.ResourceMetrics
			if err := reader.Collect(context.Background(), &rm); err != nil {
				collectErr = err
				return
			}
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					if g, ok := m.Data.(metricdata.Gauge[float64]); ok && m.Name == contract.VerifySuccessRate {
						maxSeen = math.Max(maxSeen, g.DataPoints[0].Value)
					}
				}
			}
		}
	}()
	const workers, each = 8, 2000
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				metrics.RecordVerify(time.Millisecond, (i+w)%4 != 0)
			}
		})
	}
	wg.Wait()
	close(stop)
	<-done
	if collectErr != nil {
		t.Fatal(collectErr)
	}
	if maxSeen > 1 {
		t.Fatalf("success rate reached %v", maxSeen)
	}
	got := collect(t, reader)
	c := counterByOutcome(t, got[contract.VerifyCalls], contract.AttrVerifyOutcome)
	if c["success"]+c["failure"] != workers*each || c["failure"] != workers*each/4 {
		t.Fatalf("lost counts under concurrency: %v", c)
	}
	if v := gaugeValue(t, got[contract.VerifySuccessRate]); v != 0.75 {
		t.Fatalf("final rate %v, want 0.75", v)
	}
}

func TestServersActiveIsLastValueAndOrchestratorOnly(t *testing.T) {
	reader := initMetrics(t, contract.ServerTypeOrchestrator)
	for _, n := range []int{3, 2, 0} {
		if err := metrics.RecordActiveServers(n); err != nil {
			t.Fatal(err)
		}
	}
	if v := gaugeValue(t, collect(t, reader)[contract.ServersActive]); v != 0 {
		t.Fatalf("servers.active %v, want the last value 0", v)
	}
	if err := metrics.RecordActiveServers(-1); err == nil {
		t.Fatal("negative count accepted")
	}
	if v := gaugeValue(t, collect(t, reader)[contract.ServersActive]); v != 0 {
		t.Fatalf("negative count changed the gauge to %v", v)
	}
}

func TestServersActiveRefusedOutsideOrchestrator(t *testing.T) {
	for _, role := range []string{contract.ServerTypeResources, contract.ServerTypeAgent, contract.ServerTypeModel, ""} {
		t.Run("role="+role, func(t *testing.T) {
			reader := initMetrics(t, role)
			if err := metrics.RecordActiveServers(4); !errors.Is(err, metrics.ErrNotOrchestrator) {
				t.Fatalf("got %v, want ErrNotOrchestrator", err)
			}
			if _, ok := collect(t, reader)[contract.ServersActive]; ok {
				t.Fatal("refused call recorded a value")
			}
		})
	}
}

func TestBadDurationsAreDropped(t *testing.T) {
	reader := initMetrics(t, contract.ServerTypeResources)
	metrics.RecordVerify(-time.Second, true)
	metrics.RecordRollout(-1, true)
	metrics.RecordRolloutDuration(-time.Nanosecond)
	got := collect(t, reader)
	for _, name := range []string{contract.VerifyDuration, contract.RolloutDuration, contract.VerifyCalls, contract.RolloutCompleted, contract.VerifySuccessRate} {
		if _, ok := got[name]; ok {
			t.Errorf("%s recorded from a negative duration", name)
		}
	}
}

func TestRecordersAfterShutdownAreNoOps(t *testing.T) {
	initMetrics(t, contract.ServerTypeOrchestrator)
	if err := telemetry.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	metrics.RecordVerify(time.Millisecond, true)
	metrics.RecordRollout(time.Millisecond, true)
	// The role survives shutdown.
	if err := metrics.RecordActiveServers(0); err != nil {
		t.Fatalf("orchestrator after shutdown: %v", err)
	}
}

// The seed deliberately offers no recorder for gym.server.request_duration_ms;
// this pins the package's exported surface.
func TestNoRecorderForServerRequestDuration(t *testing.T) {
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var exported []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		af, err := parser.ParseFile(fset, f, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && ast.IsExported(fd.Name.Name) {
				exported = append(exported, fd.Name.Name)
			}
		}
	}
	slices.Sort(exported)
	want := []string{"NewLimiter", "RecordActiveServers", "RecordAgentTurn", "RecordAgentTurns", "RecordGenAI",
		"RecordHTTPRetry", "RecordHTTPTimeout", "RecordModelCall", "RecordRollout", "RecordRolloutDuration",
		"RecordToolCall", "RecordVerify", "ResetVerifyTallyForTesting"}
	if !slices.Equal(exported, want) {
		t.Fatalf("exported functions %v, want exactly %v", exported, want)
	}
}

func keys(m map[string]metricdata.Metrics) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func attributeKey(k string) attribute.Key { return attribute.Key(k) }

// The last export, made at shutdown, still carries the tallies: a short
// process must not lose its verify counts.
func TestFinalExportAtShutdownCarriesTallies(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.jsonl")
	t.Setenv("NEMO_GYM_OTEL_ENABLED", "1")
	t.Setenv("NEMO_GYM_OTEL_EXPORTER", "file")
	t.Setenv("NEMO_GYM_OTEL_FILE_PATH", path)
	telemetry.ResetForTesting()
	t.Cleanup(telemetry.ResetForTesting)
	if _, err := telemetry.Init(telemetry.InitOptions{ServerType: contract.ServerTypeResources}); err != nil {
		t.Fatal(err)
	}
	metrics.RecordVerify(time.Millisecond, true)
	metrics.RecordVerify(time.Millisecond, false)
	if err := telemetry.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	err := telfile.ReadFile(path, func(r telfile.Record) error {
		if r.Metric != nil {
			found[r.Metric.Name] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{contract.VerifyCalls, contract.VerifySuccessRate, contract.VerifyDuration} {
		if !found[name] {
			t.Errorf("%s missing from the export made at shutdown (have %v)", name, found)
		}
	}
}
