package metrics_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/gymlens/gymlens/contract"
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
	// A reader lens builds itself, as every process of a fleet has: the
	// contract's histograms and counters on lens's own aggregation. (A
	// caller's MetricReader would put them on the SDK's instruments.)
	b.Setenv("NEMO_GYM_OTEL_ENABLED", "1")
	b.Setenv("NEMO_GYM_OTEL_EXPORTER", "prometheus")
	b.Setenv("NEMO_GYM_OTEL_PROMETHEUS_ADDR", "127.0.0.1:0")
	b.Setenv("NEMO_GYM_OTEL_TRACES_ENABLED", "0")
	if _, err := telemetry.Init(telemetry.InitOptions{ServerType: role}); err != nil {
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
			benchInit(b, on, contract.ServerTypeResources)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				metrics.RecordVerify(time.Duration(i&1023)*time.Millisecond, i&3 != 0)
			}
		})
		b.Run(name+"/parallel", func(b *testing.B) {
			benchInit(b, on, contract.ServerTypeResources)
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
			benchInit(b, on, contract.ServerTypeAgent)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				metrics.RecordRolloutDuration(time.Duration(i&1023) * time.Millisecond)
			}
		})
		b.Run(name+"/parallel", func(b *testing.B) {
			benchInit(b, on, contract.ServerTypeAgent)
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
			benchInit(b, on, contract.ServerTypeAgent)
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
			benchInit(b, on, contract.ServerTypeOrchestrator)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				_ = metrics.RecordActiveServers(i & 7)
			}
		})
		b.Run(name+"/parallel", func(b *testing.B) {
			benchInit(b, on, contract.ServerTypeOrchestrator)
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
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "peer_duration_ms", Buckets: contract.DefaultBucketsMS})
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

// bareMeter is a meter on a provider of its own with a manual reader, set
// up as telemetry.Init sets up the process's, for the bare-SDK peers.
func bareMeter(b *testing.B) metric.Meter {
	b.Helper()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	b.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	return mp.Meter(contract.MeterScope)
}

// bareOpts are the record and add options of one precomputed attribute
// set, passed as a prebuilt slice: the cheapest way to call the SDK.
func bareOpts(kvs ...attribute.KeyValue) ([]metric.RecordOption, []metric.AddOption) {
	o := metric.WithAttributeSet(attribute.NewSet(kvs...))
	return []metric.RecordOption{o}, []metric.AddOption{o}
}

func mustF64Hist(b *testing.B, m metric.Meter, name string, opts ...metric.Float64HistogramOption) metric.Float64Histogram {
	b.Helper()
	h, err := m.Float64Histogram(name, opts...)
	if err != nil {
		b.Fatal(err)
	}
	return h
}

func mustI64Hist(b *testing.B, m metric.Meter, name string, opts ...metric.Int64HistogramOption) metric.Int64Histogram {
	b.Helper()
	h, err := m.Int64Histogram(name, opts...)
	if err != nil {
		b.Fatal(err)
	}
	return h
}

func mustCounter(b *testing.B, m metric.Meter, name string) metric.Int64Counter {
	b.Helper()
	c, err := m.Int64Counter(name)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// benchRecorder runs one recorder with telemetry on next to its bare-SDK
// peer (same instruments, kinds and attribute sets, recorded directly), as
// sub-benchmarks of one benchmark: on, bare. Both go through a func value,
// alike; the off path is measured without one, in BenchmarkAttributedOff.
func benchRecorder(b *testing.B, role string, record func(i int), bare func(b *testing.B) func(i int)) {
	b.Run("on", func(b *testing.B) {
		benchInit(b, true, role)
		record(0) // build the attribute set outside the loop
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			record(i)
		}
	})
	b.Run("bare", func(b *testing.B) {
		fn := bare(b)
		fn(0)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			fn(i)
		}
	})
}

func BenchmarkAttributedRollout(b *testing.B) {
	benchRecorder(b, contract.ServerTypeAgent,
		func(i int) { metrics.RecordRollout(time.Duration(i&1023)*time.Millisecond, i&3 != 0) },
		func(b *testing.B) func(int) {
			m := bareMeter(b)
			h := mustF64Hist(b, m, "peer.duration_ms", metric.WithUnit("ms"))
			c := mustCounter(b, m, "peer.completed_total")
			_, ok := bareOpts(attribute.String(contract.AttrRolloutOutcome, contract.OutcomeSuccess))
			_, fail := bareOpts(attribute.String(contract.AttrRolloutOutcome, contract.OutcomeFailure))
			ctx := context.Background()
			return func(i int) {
				h.Record(ctx, float64(i&1023))
				if i&3 != 0 {
					c.Add(ctx, 1, ok...)
				} else {
					c.Add(ctx, 1, fail...)
				}
			}
		})
}

func BenchmarkAttributedModelCall(b *testing.B) {
	benchRecorder(b, contract.ServerTypeAgent,
		func(i int) {
			metrics.RecordModelCall(contract.DialectResponses, "policy_model", time.Duration(i&1023)*time.Millisecond, time.Duration(i&127)*time.Millisecond)
		},
		func(b *testing.B) func(int) {
			m := bareMeter(b)
			total := mustF64Hist(b, m, "peer.call_ms", metric.WithUnit("ms"))
			first := mustF64Hist(b, m, "peer.ttfb_ms", metric.WithUnit("ms"))
			rec, _ := bareOpts(attribute.String(contract.AttrModelDialect, contract.DialectResponses),
				attribute.String(contract.AttrServerName, "policy_model"))
			ctx := context.Background()
			return func(i int) {
				total.Record(ctx, float64(i&1023), rec...)
				first.Record(ctx, float64(i&127), rec...)
			}
		})
}

func BenchmarkAttributedHTTPTimeout(b *testing.B) {
	benchRecorder(b, contract.ServerTypeAgent,
		func(i int) { metrics.RecordHTTPTimeout(i&1 == 0) },
		func(b *testing.B) func(int) {
			c := mustCounter(b, bareMeter(b), "peer.timeout_total")
			_, in := bareOpts(attribute.Bool(contract.AttrHTTPInternal, true))
			_, ex := bareOpts(attribute.Bool(contract.AttrHTTPInternal, false))
			ctx := context.Background()
			return func(i int) {
				if i&1 == 0 {
					c.Add(ctx, 1, in...)
				} else {
					c.Add(ctx, 1, ex...)
				}
			}
		})
}

func BenchmarkAttributedHTTPRetry(b *testing.B) {
	benchRecorder(b, contract.ServerTypeAgent,
		func(int) { metrics.RecordHTTPRetry(contract.RetryServerDisconnected) },
		func(b *testing.B) func(int) {
			c := mustCounter(b, bareMeter(b), "peer.retry_total")
			_, add := bareOpts(attribute.String(contract.AttrHTTPRetryReason, contract.RetryServerDisconnected))
			ctx := context.Background()
			return func(int) { c.Add(ctx, 1, add...) }
		})
}

func BenchmarkAttributedAgentTurns(b *testing.B) {
	benchRecorder(b, contract.ServerTypeAgent,
		func(i int) { metrics.RecordAgentTurns("simple_agent", i&15) },
		func(b *testing.B) func(int) {
			h := mustF64Hist(b, bareMeter(b), "peer.turn_count", metric.WithUnit("1"))
			rec, _ := bareOpts(attribute.String(contract.AttrAgentName, "simple_agent"))
			ctx := context.Background()
			return func(i int) { h.Record(ctx, float64(i&15), rec...) }
		})
}

func BenchmarkAttributedAgentTurn(b *testing.B) {
	benchRecorder(b, contract.ServerTypeAgent,
		func(i int) { metrics.RecordAgentTurn("simple_agent", time.Duration(i&1023)*time.Millisecond) },
		func(b *testing.B) func(int) {
			h := mustF64Hist(b, bareMeter(b), "peer.turn_ms", metric.WithUnit("ms"))
			rec, _ := bareOpts(attribute.String(contract.AttrAgentName, "simple_agent"))
			ctx := context.Background()
			return func(i int) { h.Record(ctx, float64(i&1023), rec...) }
		})
}

func BenchmarkAttributedToolCall(b *testing.B) {
	benchRecorder(b, contract.ServerTypeResources,
		func(i int) { metrics.RecordToolCall("get_weather", "weather", time.Duration(i&1023)*time.Millisecond) },
		func(b *testing.B) func(int) {
			h := mustF64Hist(b, bareMeter(b), "peer.tool_ms", metric.WithUnit("ms"))
			rec, _ := bareOpts(attribute.String(contract.AttrToolName, "get_weather"), attribute.String(contract.AttrServerName, "weather"))
			ctx := context.Background()
			return func(i int) { h.Record(ctx, float64(i&1023), rec...) }
		})
}

func BenchmarkAttributedGenAI(b *testing.B) {
	call := metrics.GenAICall{Operation: contract.GenAIOperationChat, Provider: "openai", RequestModel: "m",
		ResponseModel: "m", ServerAddress: "127.0.0.1", ServerPort: 8000, InputTokens: 100, OutputTokens: 50}
	benchRecorder(b, contract.ServerTypeAgent,
		func(i int) {
			c := call
			c.Duration = time.Duration(i&1023) * time.Millisecond
			metrics.RecordGenAI(c)
		},
		func(b *testing.B) func(int) {
			m := bareMeter(b)
			dur := mustF64Hist(b, m, "peer.duration", metric.WithUnit("s"),
				metric.WithExplicitBucketBoundaries(contract.GenAIDurationBucketsS...))
			tok := mustI64Hist(b, m, "peer.tokens", metric.WithUnit("{token}"),
				metric.WithExplicitBucketBoundaries(contract.GenAITokenBuckets...))
			common := []attribute.KeyValue{attribute.String(contract.AttrGenAIOperationName, call.Operation),
				attribute.String(contract.AttrGenAIProviderName, call.Provider), attribute.String(contract.AttrGenAIRequestModel, call.RequestModel),
				attribute.String(contract.AttrGenAIResponseModel, call.ResponseModel), attribute.String(contract.AttrServerAddress, call.ServerAddress),
				attribute.Int(contract.AttrServerPort, call.ServerPort)}
			d, _ := bareOpts(common...)
			in, _ := bareOpts(append(slices.Clone(common), attribute.String(contract.AttrGenAITokenType, contract.GenAITokenTypeInput))...)
			out, _ := bareOpts(append(slices.Clone(common), attribute.String(contract.AttrGenAITokenType, contract.GenAITokenTypeOutput))...)
			ctx := context.Background()
			return func(i int) {
				dur.Record(ctx, (time.Duration(i&1023) * time.Millisecond).Seconds(), d...)
				tok.Record(ctx, call.InputTokens, in...)
				tok.Record(ctx, call.OutputTokens, out...)
			}
		})
}

// BenchmarkAttributedLimiter is one uncontended Acquire and Release (a
// free slot: the queue wait recorded is 0 ms); the peer is a bare channel
// semaphore and the SDK histogram record the limiter adds when on.
func BenchmarkAttributedLimiter(b *testing.B) {
	ctx := context.Background()
	for _, on := range []bool{false, true} {
		b.Run(map[bool]string{false: "off", true: "on"}[on], func(b *testing.B) {
			benchInit(b, on, contract.ServerTypeAgent)
			l := metrics.NewLimiter("bench", 4)
			b.ReportAllocs()
			for b.Loop() {
				_ = l.Acquire(ctx)
				l.Release()
			}
		})
	}
	b.Run("bare-semaphore", func(b *testing.B) {
		sem := make(chan struct{}, 4)
		b.ReportAllocs()
		for b.Loop() {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
			}
			<-sem
		}
	})
	b.Run("bare", func(b *testing.B) {
		sem := make(chan struct{}, 4)
		h := mustF64Hist(b, bareMeter(b), "peer.queue_wait_ms", metric.WithUnit("ms"))
		rec, _ := bareOpts(attribute.String(contract.AttrConcurrencySite, "bench"))
		b.ReportAllocs()
		for b.Loop() {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
			}
			h.Record(ctx, 0, rec...)
			<-sem
		}
	})
}

// BenchmarkAttributedOff is every new recorder with telemetry off, called
// directly: the gate check and nothing else. floor-atomic-load is the
// cheapest gate there is, measured in the same run.
func BenchmarkAttributedOff(b *testing.B) {
	benchInit(b, false, contract.ServerTypeAgent)
	var p atomic.Pointer[int]
	b.Run("floor-atomic-load", func(b *testing.B) {
		n := 0
		for b.Loop() {
			if p.Load() != nil {
				n++
			}
		}
		_ = n
	})
	b.Run("RecordRollout", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			metrics.RecordRollout(time.Millisecond, true)
		}
	})
	b.Run("RecordModelCall", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			metrics.RecordModelCall(contract.DialectResponses, "policy_model", time.Second, time.Millisecond)
		}
	})
	b.Run("RecordHTTPTimeout", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			metrics.RecordHTTPTimeout(true)
		}
	})
	b.Run("RecordHTTPRetry", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			metrics.RecordHTTPRetry(contract.RetryTimeout)
		}
	})
	b.Run("RecordAgentTurns", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			metrics.RecordAgentTurns("simple_agent", 3)
		}
	})
	b.Run("RecordAgentTurn", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			metrics.RecordAgentTurn("simple_agent", time.Millisecond)
		}
	})
	b.Run("RecordToolCall", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			metrics.RecordToolCall("get_weather", "weather", time.Millisecond)
		}
	})
	call := metrics.GenAICall{Operation: contract.GenAIOperationChat, Provider: "openai", RequestModel: "m",
		Duration: time.Second, InputTokens: 1, OutputTokens: 1}
	b.Run("RecordGenAI", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			metrics.RecordGenAI(call)
		}
	})
}
