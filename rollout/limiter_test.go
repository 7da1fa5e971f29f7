package rollout_test

import (
	"context"
	"runtime"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/dataset"
	"github.com/gymlens/gymlens/internal/testenv"
	"github.com/gymlens/gymlens/rollout"
	"github.com/gymlens/gymlens/telemetry"
)

// siteValue returns the point of instrument name for the rollout
// collection site, from a collection of r.
func siteValue(t *testing.T, r *sdkmetric.ManualReader, name string) (int64, bool) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	want := attribute.NewSet(attribute.String(contract.AttrConcurrencySite, contract.SiteRolloutCollection))
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					if p.Attributes.Equals(&want) {
						return p.Value, true
					}
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					if p.Attributes.Equals(&want) {
						return p.Value, true
					}
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					if p.Attributes.Equals(&want) {
						return int64(p.Count), true
					}
				}
			default:
				t.Fatalf("%s: unexpected %T", name, m.Data)
			}
		}
	}
	return 0, false
}

// The collection driver bounds its rollouts in flight with a limiter of
// the rollout_collection site: while the agent holds every slot the
// gauges say so, and every rollout's admission is recorded.
func TestCollectRecordsConcurrencyMetrics(t *testing.T) {
	testenv.ClearTelemetry(t)
	t.Setenv("NEMO_GYM_OTEL_ENABLED", "1")
	t.Setenv("NEMO_GYM_OTEL_EXPORTER", "none")
	telemetry.ResetForTesting()
	t.Cleanup(telemetry.ResetForTesting)
	reader := sdkmetric.NewManualReader()
	if h, err := telemetry.Init(telemetry.InitOptions{ServerName: "collector", MetricReader: reader}); err != nil || !h.MetricsExporting() {
		t.Fatalf("Init: %v, %v", h, err)
	}

	const limit, n = 2, 5
	hold := make(chan struct{})
	agent := startAgent(t, func(ctx context.Context, c call) answer {
		select {
		case <-hold:
		case <-ctx.Done():
		}
		return answer{}
	})
	opts := options(agent, outPath(t))
	opts.Concurrency = limit
	type result struct {
		sum rollout.Summary
		err error
	}
	done := make(chan result, 1)
	go func() {
		sum, err := rollout.Collect(context.Background(), dataset.Arithmetic(n, 3), opts)
		done <- result{sum, err}
	}()
	// Wait until both slots are taken and the next rollout waits for one.
	for {
		depth, _ := siteValue(t, reader, contract.ConcurrencyQueueDepth)
		if agent.inFlight.Load() == limit && depth == 1 {
			break
		}
		runtime.Gosched()
	}
	for name, want := range map[string]int64{
		contract.ConcurrencyLimit:      limit,
		contract.ConcurrencyActive:     limit,
		contract.ConcurrencyAvailable:  0,
		contract.ConcurrencyQueueDepth: 1,
		contract.ConcurrencyQueueWait:  limit, // the two admitted so far
	} {
		if got, ok := siteValue(t, reader, name); !ok || got != want {
			t.Errorf("%s{site=%s} = %d (%v), want %d", name, contract.SiteRolloutCollection, got, ok, want)
		}
	}
	close(hold)
	res := <-done
	if res.err != nil || res.sum.Succeeded != n {
		t.Fatalf("Collect: %+v, %v", res.sum, res.err)
	}
	if peak := agent.maxInFlight.Load(); peak != limit {
		t.Errorf("peak in flight %d, want %d", peak, limit)
	}
	if got, ok := siteValue(t, reader, contract.ConcurrencyQueueWait); !ok || got != n {
		t.Errorf("queue wait count %d (%v), want one per rollout: %d", got, ok, n)
	}
	if got, ok := siteValue(t, reader, contract.ConcurrencyAdmissionCanc); ok {
		t.Errorf("admission cancelled %d in a run nobody cancelled", got)
	}
}
