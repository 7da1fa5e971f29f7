package metrics_test

import (
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/telemetry"
	"github.com/gymlens/gymlens/telemetry/metrics"
)

// otelDefaultBucketsMS are the OpenTelemetry default explicit buckets, which
// NeMo Gym's gym.* histograms export because they set no boundaries.
var otelDefaultBucketsMS = []float64{0, 5, 10, 25, 50, 75, 100, 250, 500, 750, 1000, 2500, 5000, 7500, 10000}

const histogramAggregationVar = "OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION"

// recordAll records one of everything into the instruments of a process
// set up by initMetrics and returns what a collection exports.
func recordAll(t *testing.T) map[string]metricdata.Metrics {
	t.Helper()
	reader := initMetrics(t, contract.ServerTypeOrchestrator)
	metrics.RecordRollout(20*time.Second, true)
	metrics.RecordVerify(7*time.Millisecond, false)
	if err := metrics.RecordActiveServers(2); err != nil {
		t.Fatal(err)
	}
	return collect(t, reader)
}

// The facts of the upstream contract this slice holds, as a real SDK
// pipeline exports them.
func TestUpstreamHistogramsAndUnits(t *testing.T) {
	for _, env := range []string{"", "explicit_bucket_histogram", "EXPLICIT_BUCKET_HISTOGRAM"} {
		t.Run("explicit/"+env, func(t *testing.T) {
			if env != "" {
				t.Setenv(histogramAggregationVar, env)
			}
			got := recordAll(t)
			for _, name := range []string{contract.RolloutDuration, contract.VerifyDuration} {
				p := histogram(t, got[name])
				if !slices.Equal(p.Bounds, otelDefaultBucketsMS) {
					t.Errorf("%s bounds %v, want the OpenTelemetry default %v", name, p.Bounds, otelDefaultBucketsMS)
				}
				if got[name].Unit != "ms" {
					t.Errorf("%s unit %q, want ms", name, got[name].Unit)
				}
			}
			// 20 s overflows the 10 s top bucket; 7 ms lands in (5, 10].
			if c := histogram(t, got[contract.RolloutDuration]).BucketCounts; c[len(c)-1] != 1 {
				t.Errorf("rollout bucket counts %v, want the 20 s rollout in the overflow bucket", c)
			}
			if c := histogram(t, got[contract.VerifyDuration]).BucketCounts; c[2] != 1 {
				t.Errorf("verify bucket counts %v, want the 7 ms verification in (5, 10]", c)
			}
			for _, name := range []string{contract.VerifySuccessRate, contract.ServersActive} {
				m, ok := got[name]
				if !ok {
					t.Fatalf("%s not exported", name)
				}
				if m.Unit != "" {
					t.Errorf("%s unit %q, want none (upstream sets none)", name, m.Unit)
				}
			}
		})
	}

	t.Run("base2_exponential_bucket_histogram", func(t *testing.T) {
		t.Setenv(histogramAggregationVar, "base2_exponential_bucket_histogram")
		got := recordAll(t)
		for name, want := range map[string]float64{contract.RolloutDuration: 20000, contract.VerifyDuration: 7} {
			m := got[name]
			h, ok := m.Data.(metricdata.ExponentialHistogram[float64])
			if !ok || len(h.DataPoints) != 1 {
				t.Fatalf("%s: want one exponential histogram point, got %T %+v", name, m.Data, m.Data)
			}
			p := h.DataPoints[0]
			if p.Count != 1 || p.Sum != want || p.Scale > 20 || p.Scale < -10 {
				t.Errorf("%s: count=%d sum=%v scale=%d, want 1, %v and a scale in [-10, 20]", name, p.Count, p.Sum, p.Scale, want)
			}
			if max, ok := p.Max.Value(); !ok || max != want {
				t.Errorf("%s max %v (%v), want %v", name, max, ok, want)
			}
			if m.Unit != "ms" {
				t.Errorf("%s unit %q, want ms", name, m.Unit)
			}
		}
		// The view touches only histograms: the gauges are gauges still.
		if v := gaugeValue(t, got[contract.ServersActive]); v != 2 {
			t.Errorf("servers.active %v, want 2", v)
		}
		if v := gaugeValue(t, got[contract.VerifySuccessRate]); v != 0 {
			t.Errorf("success rate %v, want 0", v)
		}
	})

	t.Run("unknown value", func(t *testing.T) {
		t.Setenv("NEMO_GYM_OTEL_ENABLED", "1")
		t.Setenv("NEMO_GYM_OTEL_EXPORTER", "none")
		t.Setenv(histogramAggregationVar, "exponential")
		t.Cleanup(telemetry.ResetForTesting)
		_, err := telemetry.Init(telemetry.InitOptions{ServerName: "t", ServerType: contract.ServerTypeOrchestrator})
		if err == nil {
			t.Fatal("Init accepted an unknown histogram aggregation")
		}
		for _, want := range []string{histogramAggregationVar, `"exponential"`} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not name %s", err, want)
			}
		}
	})
}

// upstreamInstrument is one row of the upstream contract, as facts: NeMo
// Gym's attributed-instruments catalogue (counters unit 1, durations ms,
// gauges of counts 1) and the GenAI semantic conventions' two histograms.
type upstreamInstrument struct {
	name string
	// kind: "histogram", "counter", "updown" or "gauge"; attrs sorted.
	kind  string
	unit  string
	attrs []string
}

var upstreamCatalogue = []upstreamInstrument{
	{"gym.rollout.completed_total", "counter", "1", []string{"nemo.gym.rollout.outcome"}},
	{"gym.concurrency.queue_wait_duration_ms", "histogram", "ms", []string{"nemo.gym.concurrency.site"}},
	{"gym.concurrency.limit", "gauge", "1", []string{"nemo.gym.concurrency.site"}},
	{"gym.concurrency.active", "updown", "1", []string{"nemo.gym.concurrency.site"}},
	{"gym.concurrency.available", "updown", "1", []string{"nemo.gym.concurrency.site"}},
	{"gym.concurrency.queue_depth", "updown", "1", []string{"nemo.gym.concurrency.site"}},
	{"gym.concurrency.admission_cancelled_total", "counter", "1", []string{"nemo.gym.concurrency.site"}},
	{"gym.model.call_duration_ms", "histogram", "ms", []string{"nemo.gym.model.dialect", "nemo.gym.server.name"}},
	{"gym.model.time_to_first_byte_ms", "histogram", "ms", []string{"nemo.gym.model.dialect", "nemo.gym.server.name"}},
	{"gym.http.timeout_total", "counter", "1", []string{"nemo.gym.http.internal"}},
	{"gym.http.retry_total", "counter", "1", []string{"nemo.gym.http.retry_reason"}},
	{"gym.agent.turn_count", "histogram", "1", []string{"nemo.gym.agent.name"}},
	{"gym.agent.turn_duration_ms", "histogram", "ms", []string{"nemo.gym.agent.name"}},
	{"gym.tool.call_duration_ms", "histogram", "ms", []string{"nemo.gym.server.name", "nemo.gym.tool.name"}},
	{"gym.process_tree.memory_used_mib", "gauge", "MiBy", nil},
	{"gym.process_tree.cpu_percent", "gauge", "%", nil},
	{"gen_ai.client.operation.duration", "histogram", "s", []string{"error.type", "gen_ai.operation.name",
		"gen_ai.provider.name", "gen_ai.request.model", "gen_ai.response.model", "server.address", "server.port"}},
	{"gen_ai.client.token.usage", "histogram", "{token}", []string{"gen_ai.operation.name", "gen_ai.provider.name",
		"gen_ai.request.model", "gen_ai.response.model", "gen_ai.token.type", "server.address", "server.port"}},
}

// The upstream catalogue as a real SDK pipeline exports it, in the
// meter's scope; gym.rollout.calls is gone.
func TestUpstreamAttributedCatalogue(t *testing.T) {
	reader := initMetrics(t, contract.ServerTypeOrchestrator)
	recordEveryRecorder(t)
	byScope := scoped(t, reader)
	got := byScope[contract.MeterScope]
	for _, want := range upstreamCatalogue {
		t.Run(want.name, func(t *testing.T) {
			if strings.HasPrefix(want.name, "gym.process_tree.") && runtime.GOOS != "linux" {
				t.Skip("the process tree gauges are registered on Linux only")
			}
			m, ok := got[want.name]
			if !ok {
				t.Fatalf("not exported in scope %q", contract.MeterScope)
			}
			if m.Unit != want.unit {
				t.Errorf("unit %q, want %q", m.Unit, want.unit)
			}
			kind := ""
			switch d := m.Data.(type) {
			case metricdata.Histogram[float64], metricdata.Histogram[int64]:
				kind = "histogram"
			case metricdata.Sum[int64]:
				kind = map[bool]string{true: "counter", false: "updown"}[d.IsMonotonic]
			case metricdata.Gauge[int64], metricdata.Gauge[float64]:
				kind = "gauge"
			}
			if kind != want.kind {
				t.Errorf("kind %s (%T), want %s", kind, m.Data, want.kind)
			}
			for _, keys := range pointKeys(t, m) {
				if !slices.Equal(keys, want.attrs) {
					t.Errorf("attribute keys %v, want %v", keys, want.attrs)
				}
			}
			// The contract package says the same.
			in, ok := contract.Lookup(want.name)
			if !ok {
				t.Fatal("not in the contract")
			}
			attrs := slices.Sorted(slices.Values(in.Attrs))
			if in.Unit != want.unit || !slices.Equal(attrs, want.attrs) {
				t.Errorf("contract has unit %q attrs %v", in.Unit, attrs)
			}
		})
	}
	// The advisory boundaries of the GenAI conventions.
	if p := histogram(t, got["gen_ai.client.operation.duration"]); !slices.Equal(p.Bounds,
		[]float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}) {
		t.Errorf("gen_ai.client.operation.duration bounds %v", p.Bounds)
	}
	tokens := got["gen_ai.client.token.usage"].Data.(metricdata.Histogram[int64])
	for _, p := range tokens.DataPoints {
		if !slices.Equal(p.Bounds, []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576,
			4194304, 16777216, 67108864}) {
			t.Errorf("gen_ai.client.token.usage bounds %v", p.Bounds)
		}
	}
	// The attributed duration histograms set no boundaries, as the seed's.
	for _, name := range []string{"gym.concurrency.queue_wait_duration_ms", "gym.model.call_duration_ms",
		"gym.agent.turn_duration_ms", "gym.tool.call_duration_ms"} {
		for _, p := range got[name].Data.(metricdata.Histogram[float64]).DataPoints {
			if !slices.Equal(p.Bounds, otelDefaultBucketsMS) {
				t.Errorf("%s bounds %v, want the OpenTelemetry default", name, p.Bounds)
			}
		}
	}
	for scope, ms := range byScope {
		if _, ok := ms["gym.rollout.calls"]; ok {
			t.Errorf("gym.rollout.calls still exported (scope %q)", scope)
		}
	}
}

// Explicit boundaries, for fleets whose rollouts outgrow the default 10 s
// top bucket: set on the millisecond gym.* histograms only, refused when
// malformed or combined with the exponential aggregation.
func TestHistogramBoundariesSetting(t *testing.T) {
	const key = "NEMO_GYM_OTEL_HISTOGRAM_BOUNDARIES_MS"
	t.Run("set", func(t *testing.T) {
		t.Setenv(key, "100, 1000,60000,3600000")
		reader := initMetrics(t, contract.ServerTypeAgent)
		metrics.RecordRollout(20*time.Second, true)
		metrics.RecordAgentTurns("simple_agent", 3)
		got := collect(t, reader)
		p := histogram(t, got[contract.RolloutDuration])
		if want := []float64{100, 1000, 60000, 3600000}; !slices.Equal(p.Bounds, want) {
			t.Errorf("rollout bounds %v, want %v", p.Bounds, want)
		}
		if c := p.BucketCounts; len(c) != 5 || c[2] != 1 {
			t.Errorf("rollout bucket counts %v, want the 20 s rollout in (1000, 60000]", c)
		}
		// Turns are counted, not timed: they keep the default buckets.
		if b := histogram(t, got[contract.AgentTurnCount]).Bounds; !slices.Equal(b, otelDefaultBucketsMS) {
			t.Errorf("turn count bounds %v, want the SDK defaults", b)
		}
	})
	for name, env := range map[string]map[string]string{
		"not a number":     {key: "100,abc"},
		"not ascending":    {key: "100,100"},
		"infinite":         {key: "1,+Inf"},
		"with exponential": {key: "100,1000", histogramAggregationVar: "base2_exponential_bucket_histogram"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv("NEMO_GYM_OTEL_ENABLED", "1")
			t.Setenv("NEMO_GYM_OTEL_EXPORTER", "none")
			for k, v := range env {
				t.Setenv(k, v)
			}
			t.Cleanup(telemetry.ResetForTesting)
			_, err := telemetry.Init(telemetry.InitOptions{ServerName: "t", ServerType: contract.ServerTypeAgent})
			if err == nil || !strings.Contains(err.Error(), "HISTOGRAM_BOUNDARIES_MS") {
				t.Fatalf("Init error %v, want one naming HISTOGRAM_BOUNDARIES_MS", err)
			}
		})
	}
}
