package fileexport

import (
	"context"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/gymlens/gymlens/lens/telfile"
)

type metricExporter struct{ exporterBase }

var _ sdkmetric.Exporter = (*metricExporter)(nil)

// MetricExporter returns an exporter that writes each collection to the sink,
// one line per metric. Use it with sdkmetric.NewPeriodicReader. It asks for
// cumulative temporality and the SDK's default aggregations. Shutting it
// down stops only this exporter.
func (s *Sink) MetricExporter() sdkmetric.Exporter {
	return &metricExporter{exporterBase{sink: s}}
}

// Temporality returns the SDK default (cumulative for every instrument).
func (e *metricExporter) Temporality(k sdkmetric.InstrumentKind) metricdata.Temporality {
	return sdkmetric.DefaultTemporalitySelector(k)
}

// Aggregation returns the SDK default aggregation for the instrument kind.
func (e *metricExporter) Aggregation(k sdkmetric.InstrumentKind) sdkmetric.Aggregation {
	return sdkmetric.DefaultAggregationSelector(k)
}

// Export encodes one collection and appends it to the sink in one write.
// Aggregations the format has no shape for (exponential histograms,
// summaries) and metrics without data points are skipped.
func (e *metricExporter) Export(ctx context.Context, rm *metricdata.ResourceMetrics) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if e.stopped() || rm == nil {
		return nil
	}
	now := time.Now().UnixNano()
	var enc encoder
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			rec := &telfile.Metric{
				TimeNS:      now,
				Scope:       sm.Scope.Name,
				Name:        m.Name,
				Description: m.Description,
				Unit:        m.Unit,
			}
			if !fillMetric(rec, m.Data) || len(rec.Points) == 0 {
				continue
			}
			enc.add(rec)
		}
	}
	return enc.flushTo(e.sink)
}

// fillMetric sets the kind-specific fields of rec from data and reports
// whether the aggregation is one the format represents.
func fillMetric(rec *telfile.Metric, data metricdata.Aggregation) bool {
	switch d := data.(type) {
	case metricdata.Sum[int64]:
		setSum(rec, d.Temporality, d.IsMonotonic)
		rec.Points = valuePoints(d.DataPoints, intNumber)
	case metricdata.Sum[float64]:
		setSum(rec, d.Temporality, d.IsMonotonic)
		rec.Points = valuePoints(d.DataPoints, telfile.FloatNumber)
	case metricdata.Gauge[int64]:
		rec.Kind = telfile.MetricGauge
		rec.Points = valuePoints(d.DataPoints, intNumber)
	case metricdata.Gauge[float64]:
		rec.Kind = telfile.MetricGauge
		rec.Points = valuePoints(d.DataPoints, telfile.FloatNumber)
	case metricdata.Histogram[int64]:
		rec.Kind = telfile.MetricHistogram
		rec.Temporality = temporality(d.Temporality)
		rec.Points = histogramPoints(d.DataPoints, intNumber)
	case metricdata.Histogram[float64]:
		rec.Kind = telfile.MetricHistogram
		rec.Temporality = temporality(d.Temporality)
		rec.Points = histogramPoints(d.DataPoints, telfile.FloatNumber)
	default:
		return false
	}
	return true
}

func intNumber(v int64) telfile.Number { return telfile.IntNumber(v) }

func setSum(rec *telfile.Metric, t metricdata.Temporality, monotonic bool) {
	rec.Kind = telfile.MetricSum
	rec.Temporality = temporality(t)
	rec.Monotonic = monotonic
}

func temporality(t metricdata.Temporality) string {
	if t == metricdata.DeltaTemporality {
		return telfile.TemporalityDelta
	}
	return telfile.TemporalityCumulative
}

func valuePoints[N int64 | float64](dps []metricdata.DataPoint[N], num func(N) telfile.Number) []telfile.Point {
	out := make([]telfile.Point, len(dps))
	for i, dp := range dps {
		out[i] = telfile.Point{
			Attributes: attrSet(dp.Attributes),
			StartNS:    unixNanos(dp.StartTime),
			TimeNS:     unixNanos(dp.Time),
			Value:      num(dp.Value),
		}
	}
	return out
}

func histogramPoints[N int64 | float64](dps []metricdata.HistogramDataPoint[N], num func(N) telfile.Number) []telfile.Point {
	out := make([]telfile.Point, len(dps))
	for i, dp := range dps {
		p := telfile.Point{
			Attributes: attrSet(dp.Attributes),
			StartNS:    unixNanos(dp.StartTime),
			TimeNS:     unixNanos(dp.Time),
			Count:      dp.Count,
			Sum:        num(dp.Sum),
			// Copy: the SDK may reuse these slices after Export returns.
			Bounds: append([]float64{}, dp.Bounds...),
			Counts: append([]uint64{}, dp.BucketCounts...),
		}
		if v, ok := dp.Min.Value(); ok {
			n := num(v)
			p.Min = &n
		}
		if v, ok := dp.Max.Value(); ok {
			n := num(v)
			p.Max = &n
		}
		out[i] = p
	}
	return out
}
