package gym_test

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/lens"
	"github.com/gymlens/gymlens/lens/instruments/gym"
)

func newMeter(t testing.TB) (*sdkmetric.ManualReader, *gym.Instruments) {
	t.Helper()
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	ins, err := gym.New(lens.OnMeter(mp.Meter("test")))
	if err != nil {
		t.Fatal(err)
	}
	return r, ins
}

func names(t *testing.T, r *sdkmetric.ManualReader) map[string]metricdata.Aggregation {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

func TestRecordRefusesInvalidValues(t *testing.T) {
	r, ins := newMeter(t)
	ctx := context.Background()
	for _, m := range []gym.Measurement{
		{Kind: gym.KindVerify, Value: math.NaN()},
		{Kind: gym.KindVerify, Value: math.Inf(1)},
		{Kind: gym.KindRollout, Value: math.Inf(-1)},
		{Kind: gym.KindRolloutDuration, Value: -1},
		{Kind: gym.KindServersActive, Value: 1e300},
		{Kind: 0, Value: 1},
		{Kind: 99, Value: 1},
	} {
		if err := ins.Record(ctx, m); !errors.Is(err, gym.ErrInvalidValue) {
			t.Errorf("%+v: err %v", m, err)
		}
	}
	got := names(t, r)
	// The process tree gauges are observed at every collection.
	delete(got, contract.ProcessTreeMemoryUsed)
	delete(got, contract.ProcessTreeCPUPercent)
	if len(got) != 0 {
		t.Fatalf("invalid measurements produced %v", got)
	}
	var nilIns *gym.Instruments
	if err := nilIns.Record(ctx, gym.Measurement{Kind: gym.KindVerify, Value: 1}); err != nil {
		t.Fatal(err)
	}
}

func TestNewTwiceOnOneMeterShareInstruments(t *testing.T) {
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	defer mp.Shutdown(context.Background())
	m := mp.Meter("test")
	var wg sync.WaitGroup
	ins := make([]*gym.Instruments, 8)
	for i := range ins {
		wg.Go(func() {
			var err error
			if ins[i], err = gym.New(lens.OnMeter(m)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for _, in := range ins {
		_ = in.Record(context.Background(), gym.Measurement{Kind: gym.KindRolloutDuration, Value: 10})
	}
	got := names(t, r)
	h := got[contract.RolloutDuration].(metricdata.Histogram[float64])
	if len(h.DataPoints) != 1 || h.DataPoints[0].Count != 8 {
		t.Fatalf("concurrent New did not share one histogram: %+v", h.DataPoints)
	}
}

func TestCloseStopsObservation(t *testing.T) {
	r, ins := newMeter(t)
	_ = ins.Record(context.Background(), gym.Measurement{Kind: gym.KindVerify, Value: 1, Succeeded: true})
	if _, ok := names(t, r)[contract.VerifySuccessRate]; !ok {
		t.Fatal("no success rate before Close")
	}
	if err := ins.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := names(t, r)[contract.VerifySuccessRate]; ok {
		t.Fatal("success rate still observed after Close")
	}
}
