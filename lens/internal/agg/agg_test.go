package agg

import (
	"context"
	"math"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
)

var scope = instrumentation.Scope{Name: "test"}

// collect reads r once and returns the scope's metrics by name.
func collect(t *testing.T, r sdkmetric.Reader) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != scope.Name {
			t.Fatalf("scope %q, want %q", sm.Scope.Name, scope.Name)
		}
		for _, m := range sm.Metrics {
			if _, dup := out[m.Name]; dup {
				t.Fatalf("metric %s twice", m.Name)
			}
			out[m.Name] = m
		}
	}
	return out
}

// The same measurements through the SDK's instruments and through the
// registry's series export the same points: bucket counts, sum, min, max,
// attributes; only the timestamps differ.
func TestSameDataAsTheSDK(t *testing.T) {
	bounds := []float64{0, 5, 10, 25, 50, 100}
	sets := []attribute.Set{
		attribute.NewSet(attribute.String("a", "x"), attribute.Int("n", 1)),
		attribute.NewSet(attribute.String("a", "y")),
		attribute.NewSet(),
	}
	fvals := []float64{0, 0.5, 5, 5.0001, 10, 99.9, 100, 100.1, 1e6, -3, math.Inf(1)}
	ivals := []int64{0, 3, 5, 26, 1000, -7}

	sdkReader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkReader))
	m := mp.Meter(scope.Name)
	fh, _ := m.Float64Histogram("f", metric.WithUnit("ms"), metric.WithDescription("fd"), metric.WithExplicitBucketBoundaries(bounds...))
	ih, _ := m.Int64Histogram("i", metric.WithUnit("{token}"), metric.WithDescription("id"), metric.WithExplicitBucketBoundaries(bounds...))
	c, _ := m.Int64Counter("c", metric.WithUnit("1"), metric.WithDescription("cd"))

	reg := NewRegistry(scope)
	aggReader := sdkmetric.NewManualReader(sdkmetric.WithProducer(reg))
	_ = sdkmetric.NewMeterProvider(sdkmetric.WithReader(aggReader)) // a reader must belong to a provider to collect
	afh := reg.Float64Histogram(Desc{"f", "fd", "ms"}, bounds)
	aih := reg.Int64Histogram(Desc{"i", "id", "{token}"}, bounds)
	ac := reg.Int64Counter(Desc{"c", "cd", "1"})

	for i, set := range sets[:2] { // the third set is bound but never recorded
		for _, v := range fvals[i:] {
			fh.Record(context.Background(), v, metric.WithAttributeSet(set))
			afh.Series(set).Record(v)
		}
		for _, v := range ivals[i:] {
			ih.Record(context.Background(), v, metric.WithAttributeSet(set))
			aih.Series(set).Record(v)
		}
		c.Add(context.Background(), int64(3+i), metric.WithAttributeSet(set))
		ac.Series(set).Add(int64(3 + i))
	}
	afh.Series(sets[2])
	ac.Series(sets[2])

	want, got := collect(t, sdkReader), collect(t, aggReader)
	if len(want) != 3 || len(got) != 3 {
		t.Fatalf("metrics: SDK %d, registry %d, want 3 each", len(want), len(got))
	}
	for name, w := range want {
		metricdatatest.AssertEqual(t, w, got[name], metricdatatest.IgnoreTimestamp())
	}
}

// A NaN is counted in the last bucket and spoils the sum, as in the SDK
// (compared apart: NaN is not equal to itself), and is never min or max.
func TestNaN(t *testing.T) {
	reg := NewRegistry(scope)
	s := reg.Float64Histogram(Desc{Name: "h"}, []float64{1}).Series(attribute.NewSet())
	s.Record(math.NaN())
	s.Record(0.5)
	s.Record(math.NaN())
	sm, _ := reg.Produce(context.Background())
	dp := sm[0].Metrics[0].Data.(metricdata.Histogram[float64]).DataPoints[0]
	mn, _ := dp.Min.Value()
	mx, _ := dp.Max.Value()
	if dp.Count != 3 || dp.BucketCounts[0] != 1 || dp.BucketCounts[1] != 2 || !math.IsNaN(dp.Sum) || mn != 0.5 || mx != 0.5 {
		t.Fatalf("point %+v; want 3 counted, 1 and 2 in the buckets, sum NaN, min = max = 0.5", dp)
	}
}

// Nothing recorded, nothing produced; a second create of a name returns
// the first instrument.
func TestEmptyAndSameName(t *testing.T) {
	reg := NewRegistry(scope)
	h := reg.Float64Histogram(Desc{Name: "h"}, []float64{1})
	if reg.Float64Histogram(Desc{Name: "h"}, []float64{2}) != h {
		t.Fatal("second create returned a new histogram")
	}
	h.Series(attribute.NewSet())
	sm, err := reg.Produce(context.Background())
	if err != nil || sm != nil {
		t.Fatalf("Produce = %v, %v; want nothing", sm, err)
	}
}

// Past MaxSeries, new sets land in the overflow series.
func TestOverflow(t *testing.T) {
	reg := NewRegistry(scope)
	c := reg.Int64Counter(Desc{Name: "c"})
	for i := range MaxSeries + 5 {
		c.Series(attribute.NewSet(attribute.Int("i", i))).Add(1)
	}
	sm, _ := reg.Produce(context.Background())
	dps := sm[0].Metrics[0].Data.(metricdata.Sum[int64]).DataPoints
	if len(dps) != MaxSeries+1 {
		t.Fatalf("%d series, want %d", len(dps), MaxSeries+1)
	}
	last := dps[len(dps)-1]
	if v, _ := last.Attributes.Value("otel.metric.overflow"); !v.AsBool() || last.Value != 5 {
		t.Fatalf("overflow point %v = %d, want otel.metric.overflow=true and 5", last.Attributes, last.Value)
	}
}

// Concurrent records lose nothing (run with -race).
func TestConcurrentRecords(t *testing.T) {
	reg := NewRegistry(scope)
	s := reg.Float64Histogram(Desc{Name: "h"}, []float64{10}).Series(attribute.NewSet())
	const workers, each = 8, 1000
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				s.Record(float64(w*each + i))
			}
		})
	}
	wg.Wait()
	sm, _ := reg.Produce(context.Background())
	dp := sm[0].Metrics[0].Data.(metricdata.Histogram[float64]).DataPoints[0]
	n := workers * each
	if dp.Count != uint64(n) || dp.Sum != float64(n*(n-1)/2) || dp.BucketCounts[0] != 11 {
		t.Fatalf("count %d sum %v first bucket %d; want %d, %v, 11", dp.Count, dp.Sum, dp.BucketCounts[0], n, float64(n*(n-1)/2))
	}
	if mn, _ := dp.Min.Value(); mn != 0 {
		t.Fatalf("min %v", mn)
	}
	if mx, _ := dp.Max.Value(); mx != float64(n-1) {
		t.Fatalf("max %v", mx)
	}
}

// BenchmarkRecord compares one measurement on a bound series with the
// SDK's Record of the same attribute set, in one run.
func BenchmarkRecord(b *testing.B) {
	set := attribute.NewSet(attribute.String("gen_ai.operation.name", "chat"), attribute.String("gen_ai.provider.name", "openai"),
		attribute.String("gen_ai.request.model", "policy"), attribute.String("server.address", "127.0.0.1"), attribute.Int("server.port", 8000))
	bounds := []float64{0, 5, 10, 25, 50, 75, 100, 250, 500, 750, 1000, 2500, 5000, 7500, 10000}
	b.Run("sdk", func(b *testing.B) {
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		h, _ := mp.Meter("b").Float64Histogram("h", metric.WithExplicitBucketBoundaries(bounds...))
		opts := []metric.RecordOption{metric.WithAttributeSet(set)}
		for i := 0; b.Loop(); i++ {
			h.Record(context.Background(), float64(i%300), opts...)
		}
	})
	b.Run("bound", func(b *testing.B) {
		s := NewRegistry(scope).Float64Histogram(Desc{Name: "h"}, bounds).Series(set)
		for i := 0; b.Loop(); i++ {
			s.Record(float64(i % 300))
		}
	})
}
