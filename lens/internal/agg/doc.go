// Package agg aggregates lens's hot synchronous instruments (explicit-bucket
// histograms and monotonic counters, cumulative) itself and hands the result
// to the OpenTelemetry SDK's readers as an sdkmetric.Producer.
//
// The SDK's synchronous Record normalises and hashes the attribute set on
// every measurement. Here a caller binds a series to its attribute set once
// (Histogram.Series, Counter.Series) and a measurement is a bucket search
// and a few atomic additions on that series: no lock, no allocation, no
// attribute work. What the readers export is the SDK's own shape
// (metricdata.Histogram, metricdata.Sum, cumulative), so every exporter
// (OTLP, Prometheus, console, file) writes the same points as it would for
// an SDK instrument with the same records.
//
// It covers only what lens configures by default: no views, no exemplars,
// cumulative temporality. lens falls back to the SDK's instruments when the
// configuration asks for more (see lens's Aggregator).
package agg
