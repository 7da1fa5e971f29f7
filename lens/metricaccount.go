package lens

import (
	"context"
	"fmt"
	"sync/atomic"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// countingMetricExporter counts the data points it passes on to its
// exporter, delivered or in a failed export. A periodic reader's final
// export at shutdown runs under the shutdown's context, so a collector
// that never answers makes it fail, and be counted, when the budget ends.
type countingMetricExporter struct {
	sdkmetric.Exporter
	name, ctype      string
	exported, failed atomic.Uint64
}

func (c *countingMetricExporter) Export(ctx context.Context, rm *metricdata.ResourceMetrics) error {
	n := dataPoints(rm)
	if err := c.Exporter.Export(ctx, rm); err != nil {
		c.failed.Add(n)
		return fmt.Errorf("lens: metric export (%d data points lost): %w", n, err)
	}
	c.exported.Add(n)
	return nil
}

// Stats returns the exporter's account so far.
func (c *countingMetricExporter) Stats() MetricStats {
	return MetricStats{Exporter: c.name, ComponentType: c.ctype, Exported: c.exported.Load(), ExportFailed: c.failed.Load()}
}

// dataPoints counts the data points of every metric in rm.
func dataPoints(rm *metricdata.ResourceMetrics) uint64 {
	if rm == nil {
		return 0
	}
	var n int
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Gauge[int64]:
				n += len(d.DataPoints)
			case metricdata.Gauge[float64]:
				n += len(d.DataPoints)
			case metricdata.Sum[int64]:
				n += len(d.DataPoints)
			case metricdata.Sum[float64]:
				n += len(d.DataPoints)
			case metricdata.Histogram[int64]:
				n += len(d.DataPoints)
			case metricdata.Histogram[float64]:
				n += len(d.DataPoints)
			case metricdata.ExponentialHistogram[int64]:
				n += len(d.DataPoints)
			case metricdata.ExponentialHistogram[float64]:
				n += len(d.DataPoints)
			case metricdata.Summary:
				n += len(d.DataPoints)
			}
		}
	}
	return uint64(n)
}

// MetricStats is what became of the metric data points one exporter was
// handed. Every export carries each cumulative point again, so these
// count points per export: a lost export is a gap in the series, which
// the next successful export of a cumulative point closes.
type MetricStats struct {
	// Exporter and ComponentType name the exporter, as in SpanStats.
	Exporter, ComponentType string
	// Exported counts the points of exports that succeeded.
	Exported uint64
	// ExportFailed counts the points of exports that returned an error,
	// the final one at shutdown included.
	ExportFailed uint64
}

// Lost returns how many points never reached their destination.
func (s MetricStats) Lost() uint64 { return s.ExportFailed }
