package metrics_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/gymlens/gymlens/lens/instruments/gym"
	"github.com/gymlens/gymlens/telemetry"
	"github.com/gymlens/gymlens/telemetry/metrics"
)

// The benchmarks below come in pairs: ours next to the peer they are judged
// against, in the same run. scripts/bench-ratios.sh turns them into ratios.

func benchInit(b *testing.B, on bool, role string) {
	b.Helper()
	telemetry.ResetForTesting()
	b.Cleanup(telemetry.ResetForTesting)
	if !on {
		b.Setenv("NEMO_GYM_OTEL_ENABLED", "0")
		if _, err := telemetry.Init(telemetry.InitOptions{ServerType: role}); err != nil {
			b.Fatal(err)
		}
		return
	}
	b.Setenv("NEMO_GYM_OTEL_ENABLED", "1")
	b.Setenv("NEMO_GYM_OTEL_EXPORTER", "none")
	if _, err := telemetry.Init(telemetry.InitOptions{ServerType: role, MetricReader: sdkmetric.NewManualReader()}); err != nil {
		b.Fatal(err)
	}
}

// bareHistogram is the peer: an OTel SDK histogram with the same buckets on
// a meter provider set up the same way, recorded without any wrapper.
func bareHistogram(b *testing.B) metric.Float64Histogram {
	b.Helper()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	b.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	// No boundaries, as the gym histograms: the SDK's default buckets.
	h, err := mp.Meter("peer").Float64Histogram("peer.duration_ms", metric.WithUnit("ms"))
	if err != nil {
		b.Fatal(err)
	}
	return h
}

func BenchmarkPeerBareHistogramRecord(b *testing.B) {
	h := bareHistogram(b)
	ctx := context.Background()
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			h.Record(ctx, float64(i&1023))
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for i := 0; pb.Next(); i++ {
				h.Record(ctx, float64(i&1023))
			}
		})
	})
}

func BenchmarkLimitAtomicAdd(b *testing.B) {
	var n atomic.Uint64
	b.Run("uncontended", func(b *testing.B) {
		for b.Loop() {
			n.Add(1)
		}
	})
	b.Run("contended", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				n.Add(1)
			}
		})
	})
}

func BenchmarkRecordVerify(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := map[bool]string{false: "off", true: "on"}[on]
		b.Run(name+"/serial", func(b *testing.B) {
			benchInit(b, on, telemetry.ServerTypeResources)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				metrics.RecordVerify(time.Duration(i&1023)*time.Millisecond, i&3 != 0)
			}
		})
		b.Run(name+"/parallel", func(b *testing.B) {
			benchInit(b, on, telemetry.ServerTypeResources)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for i := 0; pb.Next(); i++ {
					metrics.RecordVerify(time.Duration(i&1023)*time.Millisecond, i&3 != 0)
				}
			})
		})
	}
}

func BenchmarkRecordRolloutDuration(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := map[bool]string{false: "off", true: "on"}[on]
		b.Run(name+"/serial", func(b *testing.B) {
			benchInit(b, on, telemetry.ServerTypeAgent)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				metrics.RecordRolloutDuration(time.Duration(i&1023) * time.Millisecond)
			}
		})
		b.Run(name+"/parallel", func(b *testing.B) {
			benchInit(b, on, telemetry.ServerTypeAgent)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for i := 0; pb.Next(); i++ {
					metrics.RecordRolloutDuration(time.Duration(i&1023) * time.Millisecond)
				}
			})
		})
	}
}

func BenchmarkRecordRollout(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := map[bool]string{false: "off", true: "on"}[on]
		b.Run(name+"/serial", func(b *testing.B) {
			benchInit(b, on, telemetry.ServerTypeAgent)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				metrics.RecordRollout(time.Duration(i&1023)*time.Millisecond, i&3 != 0)
			}
		})
	}
}

func BenchmarkRecordActiveServers(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := map[bool]string{false: "off", true: "on"}[on]
		b.Run(name+"/serial", func(b *testing.B) {
			benchInit(b, on, telemetry.ServerTypeOrchestrator)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				_ = metrics.RecordActiveServers(i & 7)
			}
		})
		b.Run(name+"/parallel", func(b *testing.B) {
			benchInit(b, on, telemetry.ServerTypeOrchestrator)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for i := 0; pb.Next(); i++ {
					_ = metrics.RecordActiveServers(i & 7)
				}
			})
		})
	}
}

// BenchmarkPeerPrometheusHistogramObserve is the other peer: a
// client_golang histogram with the same buckets.
func BenchmarkPeerPrometheusHistogramObserve(b *testing.B) {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "peer_duration_ms", Buckets: gym.DefaultBucketsMS})
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			h.Observe(float64(i & 1023))
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for i := 0; pb.Next(); i++ {
				h.Observe(float64(i & 1023))
			}
		})
	})
}

// BenchmarkPeerBareGaugeAndCounter are the SDK's synchronous gauge and
// counter, for the instruments the recorders feed.
func BenchmarkPeerBareGaugeAndCounter(b *testing.B) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	b.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	m := mp.Meter("peer")
	g, err := m.Float64Gauge("peer.gauge")
	if err != nil {
		b.Fatal(err)
	}
	c, err := m.Int64Counter("peer.counter")
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.Run("gauge", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			g.Record(ctx, float64(i&7))
		}
	})
	b.Run("counter", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c.Add(ctx, 1)
		}
	})
}
