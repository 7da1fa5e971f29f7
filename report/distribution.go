package report

import (
	"math"
	"time"
)

// PercentileSource says where a Distribution's percentiles come from.
type PercentileSource uint8

// The sources, in the order Distribution prefers them.
const (
	// FromNothing: neither spans nor a usable histogram were exported.
	FromNothing PercentileSource = iota
	// FromSpans: the exact durations of the exported spans.
	FromSpans
	// FromBuckets: an estimate from the histogram's buckets, used when no
	// span of the name was exported (spans sampled away, or sent to a
	// collector rather than to the run directory).
	FromBuckets
)

// ReportQuantiles are the percentiles gymlens report shows, as fractions.
var ReportQuantiles = [3]float64{0.5, 0.9, 0.99}

// Distribution is the duration distribution of one operation (a rollout,
// a verification), as the spans and the histogram of the run tell it.
type Distribution struct {
	// Metric is the duration histogram's name, SpanName the span's.
	Metric, SpanName string
	// Spans are the durations of every span named SpanName, in increasing
	// order (agents' spans only, when asked for).
	Spans []time.Duration
	// Histogram is the merged last export of Metric, nil when it was not
	// exported; HistogramErr says why the streams could not be merged.
	Histogram    *Histogram
	HistogramErr error
	// Source is where Quantiles and Max come from: the spans when there
	// are any, else the histogram's buckets.
	Source PercentileSource
	// Quantiles are the ReportQuantiles in milliseconds, Max the largest
	// value; NaN when unknown (Max of a histogram without min and max).
	Quantiles [3]float64
	Max       float64
	// Buckets holds, for an estimate (Source FromBuckets), the index of
	// the bucket each quantile lies in: the estimate is only known to be
	// somewhere in that bucket's range.
	Buckets [3]int
}

// Distribution gathers the distribution of spanName spans and the metric
// histogram, and takes its percentiles from the spans, exact, when any
// were exported, and from the histogram's buckets only when none were.
// With agentsOnly set, only agents' spans count (see SpanDurations). The
// bucket boundaries are the histogram's own, as exported.
func (r *Run) Distribution(metric, spanName string, agentsOnly bool) Distribution {
	d := Distribution{Metric: metric, SpanName: spanName, Max: math.NaN()}
	for i := range d.Quantiles {
		d.Quantiles[i], d.Buckets[i] = math.NaN(), -1
	}
	d.Spans = r.SpanDurations(spanName, agentsOnly)
	d.Histogram, d.HistogramErr = r.LastHistogram(metric)
	h := d.Histogram
	switch {
	case len(d.Spans) > 0:
		d.Source = FromSpans
		for i, q := range ReportQuantiles {
			d.Quantiles[i] = durationMS(DurationQuantile(d.Spans, q))
		}
		d.Max = durationMS(d.Spans[len(d.Spans)-1])
	case d.HistogramErr == nil && h != nil && h.Count > 0 && len(h.Counts) > 0:
		d.Source = FromBuckets
		for i, q := range ReportQuantiles {
			d.Quantiles[i], d.Buckets[i] = h.quantileBucket(q)
		}
		if h.HasMinMax {
			d.Max = h.Max
		}
	}
	return d
}

// HistogramCount is the number of values the histogram holds, 0 when it
// was not exported.
func (d Distribution) HistogramCount() uint64 {
	if d.Histogram == nil {
		return 0
	}
	return d.Histogram.Count
}

func durationMS(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
