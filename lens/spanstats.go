package lens

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/lens/internal/fileexport"
)

// spanStatsWriteTimeout bounds the write of the span accounting.
const spanStatsWriteTimeout = time.Second

// writeSpanStats makes the process's span losses visible to its run: once
// the tracer provider has shut down, it logs every exporter's losses and
// appends its account (contract.SDKSpanProcessed and SDKSpanExported) to
// the file FILE_PATH names, through the file exporter's sink when that is
// in use, else through a sink of its own. It writes to the file whatever
// the exporter, because that is where the run reads it: the record of what
// a dead collector swallowed cannot go to that collector. Without a
// FILE_PATH the log line is all there is.
func (h *Handle) writeSpanStats(ctx context.Context) error {
	stats := h.SpanStats()
	if len(stats) == 0 {
		return nil
	}
	for _, s := range stats {
		if s.Lost() > 0 && h.warn != nil {
			h.warn.Warn("telemetry lost spans", "exporter", s.Exporter, "lost", s.Lost(), "of", s.Ended,
				"queue_full", s.QueueFull, "export_failed", s.ExportFailed, "unflushed", s.Unflushed)
		}
	}
	sink := h.file
	if sink == nil {
		if h.cfg.FilePath == "" {
			return nil
		}
		var err error
		if sink, err = fileexport.OpenFile(h.cfg.FilePath, h.res); err != nil {
			return fmt.Errorf("lens: write span accounting: %w", err)
		}
		defer sink.Close()
	}
	// A local write, and the one record of what was lost: it must be
	// made even when a collector that never answered used up ctx.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), spanStatsWriteTimeout)
	defer cancel()
	if err := sink.MetricExporter().Export(wctx, spanStatsMetrics(h.start, time.Now(), stats)); err != nil {
		return fmt.Errorf("lens: write span accounting: %w", err)
	}
	return nil
}

// spanStatsMetrics renders the accounts as the two cumulative counters of
// the contract, one point per exporter and outcome. The sink puts its own
// resource header in front.
func spanStatsMetrics(start, now time.Time, stats []SpanStats) *metricdata.ResourceMetrics {
	var processed, exported []metricdata.DataPoint[int64]
	point := func(s SpanStats, ctype string, v uint64, errType string) metricdata.DataPoint[int64] {
		kvs := []attribute.KeyValue{
			attribute.String(contract.AttrComponentName, s.Exporter),
			attribute.String(contract.AttrComponentType, ctype),
		}
		if errType != "" {
			kvs = append(kvs, attribute.String(contract.AttrErrorType, errType))
		}
		return metricdata.DataPoint[int64]{Attributes: attribute.NewSet(kvs...), StartTime: start, Time: now, Value: int64(v)}
	}
	for _, s := range stats {
		const proc = "batching_span_processor"
		processed = append(processed,
			point(s, proc, s.Exported+s.ExportFailed, ""),
			point(s, proc, s.QueueFull, contract.SpanLossQueueFull),
			point(s, proc, s.Unflushed, contract.SpanLossUnflushed))
		exported = append(exported,
			point(s, s.ComponentType, s.Exported, ""),
			point(s, s.ComponentType, s.ExportFailed, contract.SpanLossExportFailed))
	}
	sum := func(name, desc string, dps []metricdata.DataPoint[int64]) metricdata.Metrics {
		return metricdata.Metrics{Name: name, Description: desc, Unit: "{span}",
			Data: metricdata.Sum[int64]{Temporality: metricdata.CumulativeTemporality, IsMonotonic: true, DataPoints: dps}}
	}
	rm := &metricdata.ResourceMetrics{ScopeMetrics: []metricdata.ScopeMetrics{{
		Scope: instrumentation.Scope{Name: contract.MeterScope},
		Metrics: []metricdata.Metrics{
			sum(contract.SDKSpanProcessed, "Spans handed to a batch span processor, by outcome.", processed),
			sum(contract.SDKSpanExported, "Spans handed to an exporter, by outcome.", exported),
		},
	}}}
	return rm
}

// spanLimits are the SDK's span limits as it reads them from the process
// environment. Where that sets no attribute value length limit, the limit
// is lens's (see KeyAttributeValueLengthLimit; DefaultAttributeValueLengthLimit
// unless configured) in place of the SDK's default, which is none. In a
// process whose configuration comes from its environment both read the
// same variables and agree.
func spanLimits(cfg Config) sdktrace.SpanLimits {
	l := sdktrace.NewSpanLimits()
	for _, key := range []string{KeySpanAttributeValueLengthLimit, KeyAttributeValueLengthLimit} {
		if v, ok := os.LookupEnv(key); ok && strings.TrimSpace(v) != "" {
			return l
		}
	}
	l.AttributeValueLengthLimit = cfg.AttributeValueLengthLimit
	if l.AttributeValueLengthLimit == 0 {
		// A Config built by hand: the default.
		l.AttributeValueLengthLimit = DefaultAttributeValueLengthLimit
	}
	return l
}
