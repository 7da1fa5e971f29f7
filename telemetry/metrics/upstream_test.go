package metrics_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/gymlens/gymlens/lens/instruments/gym"
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
	reader := initMetrics(t, telemetry.ServerTypeOrchestrator)
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
			for _, name := range []string{gym.RolloutDurationName, gym.VerifyDurationName} {
				p := histogram(t, got[name])
				if !slices.Equal(p.Bounds, otelDefaultBucketsMS) {
					t.Errorf("%s bounds %v, want the OpenTelemetry default %v", name, p.Bounds, otelDefaultBucketsMS)
				}
				if got[name].Unit != "ms" {
					t.Errorf("%s unit %q, want ms", name, got[name].Unit)
				}
			}
			// 20 s overflows the 10 s top bucket; 7 ms lands in (5, 10].
			if c := histogram(t, got[gym.RolloutDurationName]).BucketCounts; c[len(c)-1] != 1 {
				t.Errorf("rollout bucket counts %v, want the 20 s rollout in the overflow bucket", c)
			}
			if c := histogram(t, got[gym.VerifyDurationName]).BucketCounts; c[2] != 1 {
				t.Errorf("verify bucket counts %v, want the 7 ms verification in (5, 10]", c)
			}
			for _, name := range []string{gym.VerifySuccessRateName, gym.ServersActiveName} {
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
		for name, want := range map[string]float64{gym.RolloutDurationName: 20000, gym.VerifyDurationName: 7} {
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
		if v := gaugeValue(t, got[gym.ServersActiveName]); v != 2 {
			t.Errorf("servers.active %v, want 2", v)
		}
		if v := gaugeValue(t, got[gym.VerifySuccessRateName]); v != 0 {
			t.Errorf("success rate %v, want 0", v)
		}
	})

	t.Run("unknown value", func(t *testing.T) {
		t.Setenv("NEMO_GYM_OTEL_ENABLED", "1")
		t.Setenv("NEMO_GYM_OTEL_EXPORTER", "none")
		t.Setenv(histogramAggregationVar, "exponential")
		t.Cleanup(telemetry.ResetForTesting)
		_, err := telemetry.Init(telemetry.InitOptions{ServerName: "t", ServerType: telemetry.ServerTypeOrchestrator})
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
