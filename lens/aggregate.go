package lens

import (
	"context"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/sdk/instrumentation"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/lens/internal/agg"
)

// Number is what a Histogram records.
type Number interface{ int64 | float64 }

// Histogram is a synchronous explicit-bucket histogram of the metric
// contract. Bind it to an attribute set once, then record through the
// bound value: in a process whose metric readers lens built with the
// default aggregation and temporality (see ownAggregation), the
// measurements go to lens's own aggregation, a bucket search and a few
// atomic additions, which reaches the same readers as an SDK Producer and
// exports the same points; otherwise to the SDK's instrument with the
// bound set. The zero Histogram records nothing.
type Histogram[N Number] struct {
	sdk  sdkHistogram[N]
	fast *agg.Histogram[N]
}

// sdkHistogram is what metric.Float64Histogram and metric.Int64Histogram
// have in common.
type sdkHistogram[N Number] interface {
	Record(context.Context, N, ...metric.RecordOption)
}

// BoundHistogram is a Histogram bound to one attribute set.
type BoundHistogram[N Number] struct {
	sdk  sdkHistogram[N]
	opts []metric.RecordOption
	fast *agg.HistSeries[N]
}

// Bind returns h bound to set. Binding hashes the set: bind once per set
// and keep the result.
func (h Histogram[N]) Bind(set attribute.Set) BoundHistogram[N] {
	switch {
	case h.fast != nil:
		return BoundHistogram[N]{fast: h.fast.Series(set)}
	case h.sdk != nil:
		return BoundHistogram[N]{sdk: h.sdk, opts: []metric.RecordOption{metric.WithAttributeSet(set)}}
	}
	return BoundHistogram[N]{}
}

// Record records v.
func (b BoundHistogram[N]) Record(v N) {
	if b.fast != nil {
		b.fast.Record(v)
	} else if b.sdk != nil {
		b.sdk.Record(context.Background(), v, b.opts...)
	}
}

// Counter is a synchronous monotonic int64 counter of the metric
// contract, recorded like a Histogram. The zero Counter counts nothing.
type Counter struct {
	sdk  metric.Int64Counter
	fast *agg.Counter
}

// BoundCounter is a Counter bound to one attribute set.
type BoundCounter struct {
	sdk  metric.Int64Counter
	opts []metric.AddOption
	fast *agg.CounterSeries
}

// Bind returns c bound to set; bind once per set and keep the result.
func (c Counter) Bind(set attribute.Set) BoundCounter {
	switch {
	case c.fast != nil:
		return BoundCounter{fast: c.fast.Series(set)}
	case c.sdk != nil:
		return BoundCounter{sdk: c.sdk, opts: []metric.AddOption{metric.WithAttributeSet(set)}}
	}
	return BoundCounter{}
}

// Add adds v (not negative).
func (b BoundCounter) Add(v int64) {
	if b.fast != nil {
		b.fast.Add(v)
	} else if b.sdk != nil {
		b.sdk.Add(context.Background(), v, b.opts...)
	}
}

// Instrumenter creates the contract's synchronous histograms and counters:
// on lens's own aggregation where the process's configuration allows it,
// as SDK instruments on its meter otherwise.
type Instrumenter struct {
	meter metric.Meter
	agg   *agg.Registry
}

// OnMeter returns an Instrumenter whose instruments are the SDK's, on m
// (for a caller's own meter provider, as tests have).
func OnMeter(m metric.Meter) Instrumenter { return Instrumenter{meter: m} }

// Instrumenter returns the process's Instrumenter: its Meter, and lens's
// own aggregation when that applies. With metrics off its instruments
// record nothing.
func (h *Handle) Instrumenter() Instrumenter {
	if h == nil {
		return Instrumenter{meter: noopMeter}
	}
	return Instrumenter{meter: h.Meter(), agg: h.agg}
}

// Meter is the meter the Instrumenter's SDK instruments (and every
// asynchronous one) belong on.
func (i Instrumenter) Meter() metric.Meter {
	if i.meter == nil {
		return noopMeter
	}
	return i.meter
}

// Float64Histogram creates the histogram the contract names name.
// The contract's boundaries nil are the SDK's default buckets.
func (i Instrumenter) Float64Histogram(name string) (Histogram[float64], error) {
	in := contract.MustLookup(name)
	if i.agg != nil {
		return Histogram[float64]{fast: i.agg.Float64Histogram(desc(in), bounds(in))}, nil
	}
	hist, err := i.Meter().Float64Histogram(in.Name, histogramOptions[metric.Float64HistogramOption](in)...)
	if err != nil {
		return Histogram[float64]{}, err
	}
	return Histogram[float64]{sdk: hist}, nil
}

// Int64Histogram creates the int64 histogram the contract names name.
func (i Instrumenter) Int64Histogram(name string) (Histogram[int64], error) {
	in := contract.MustLookup(name)
	if i.agg != nil {
		return Histogram[int64]{fast: i.agg.Int64Histogram(desc(in), bounds(in))}, nil
	}
	hist, err := i.Meter().Int64Histogram(in.Name, histogramOptions[metric.Int64HistogramOption](in)...)
	if err != nil {
		return Histogram[int64]{}, err
	}
	return Histogram[int64]{sdk: hist}, nil
}

// Int64Counter creates the counter the contract names name.
func (i Instrumenter) Int64Counter(name string) (Counter, error) {
	in := contract.MustLookup(name)
	if i.agg != nil {
		return Counter{fast: i.agg.Int64Counter(desc(in))}, nil
	}
	c, err := i.Meter().Int64Counter(in.Name, metric.WithDescription(in.Description), metric.WithUnit(in.Unit))
	if err != nil {
		return Counter{}, err
	}
	return Counter{sdk: c}, nil
}

// histogramOptions are the SDK options of the contract's histogram in,
// as O (metric.Float64HistogramOption or metric.Int64HistogramOption):
// its description, its unit unless none, its boundaries unless the
// reader's default.
func histogramOptions[O any](in contract.Instrument) []O {
	// Each option below is both a Float64HistogramOption and an
	// Int64HistogramOption; the assertion picks the one O names.
	opts := []any{metric.WithDescription(in.Description)}
	if in.Unit != "" {
		opts = append(opts, metric.WithUnit(in.Unit))
	}
	if in.Boundaries != nil {
		opts = append(opts, metric.WithExplicitBucketBoundaries(in.Boundaries...))
	}
	out := make([]O, len(opts))
	for i, o := range opts {
		out[i] = o.(O)
	}
	return out
}

func desc(in contract.Instrument) agg.Desc {
	return agg.Desc{Name: in.Name, Description: in.Description, Unit: in.Unit}
}

func bounds(in contract.Instrument) []float64 {
	if in.Boundaries != nil {
		return in.Boundaries
	}
	return contract.DefaultBucketsMS
}

// Variables the SDK's OTLP exporters and metric SDK read themselves; each
// one set to other than its default asks for what lens's aggregation does
// not do.
const (
	envTemporality    = "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE" // cumulative (default), delta, lowmemory
	envExemplarFilter = "OTEL_METRICS_EXEMPLAR_FILTER"                      // trace_based (default), always_on, always_off
)

// ownAggregation decides whether the contract's synchronous histograms and
// counters are aggregated by lens (nil reason) or by the SDK (the reason):
// lens's aggregation is cumulative, explicit-bucket, without views or
// exemplars, and reaches only the readers lens builds.
func ownAggregation(cfg Config, opts Options, env func(string) string) string {
	switch {
	case opts.MetricReader != nil:
		return "the caller's metric reader"
	case cfg.HistogramAggregation == HistogramBase2Exponential:
		return KeyHistogramAggregation + "=" + HistogramBase2Exponential
	case cfg.HistogramBoundariesMS != nil:
		return KeyHistogramBoundaries
	}
	if t := strings.ToLower(strings.TrimSpace(env(envTemporality))); t != "" && t != "cumulative" {
		return envTemporality + "=" + t
	}
	// Records pass no span context, so trace_based keeps no exemplar;
	// always_on would keep one per bucket.
	if f := strings.ToLower(strings.TrimSpace(env(envExemplarFilter))); f == "always_on" {
		return envExemplarFilter + "=" + f
	}
	return ""
}

// newAggregation returns the registry for the contract's scope when
// ownAggregation allows it.
func newAggregation(cfg Config, opts Options) *agg.Registry {
	if ownAggregation(cfg, opts, os.Getenv) != "" {
		return nil
	}
	return agg.NewRegistry(instrumentation.Scope{Name: contract.MeterScope})
}

// DescribeMetricAggregation says what aggregates the contract's
// synchronous histograms and counters in a process configured by cfg
// with the readers lens builds (getenv reads the variables the SDK reads
// itself): "lens", or "sdk" and why. gymlens telemetry check prints it.
func DescribeMetricAggregation(cfg Config, getenv func(string) string) string {
	if why := ownAggregation(cfg, Options{}, getenv); why != "" {
		return "sdk (" + why + ")"
	}
	return "lens"
}
