package lens

import (
	"bytes"
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

// accountWriteTimeout bounds the write of the loss accounting.
const accountWriteTimeout = time.Second

// writeAccount makes the process's telemetry losses visible to its run:
// once the providers have shut down, it logs every exporter's losses and
// appends its account of spans (contract.SDKSpanProcessed and
// SDKSpanExported), metric data points (SDKMetricPointExported) and log
// records (SDKLogProcessed and SDKLogExported) to the file FILE_PATH
// names, through the file exporter's sink when that is in use, else
// through a sink of its own. It writes to the file whatever the exporter,
// because that is where the run reads it: the record of what a dead
// collector swallowed cannot go to that collector. Without a FILE_PATH
// the log lines are all there is.
func (h *Handle) writeAccount(ctx context.Context) error {
	spans, points, logs := h.SpanStats(), h.MetricStats(), h.LogStats()
	if len(spans)+len(points)+len(logs) == 0 {
		return nil
	}
	if h.warn != nil {
		for _, s := range spans {
			if s.Lost() > 0 {
				h.warn.Warn("telemetry lost spans", "exporter", s.Exporter, "lost", s.Lost(), "of", s.Ended,
					"queue_full", s.QueueFull, "export_failed", s.ExportFailed, "unflushed", s.Unflushed)
			}
		}
		for _, s := range points {
			if s.Lost() > 0 {
				h.warn.Warn("telemetry lost metric data points", "exporter", s.Exporter, "lost", s.Lost(), "of", s.Exported+s.ExportFailed)
			}
		}
		for _, s := range logs {
			if s.Lost() > 0 {
				h.warn.Warn("telemetry lost log records", "exporter", s.Exporter, "lost", s.Lost(), "of", s.Emitted,
					"queue_full", s.QueueFull, "export_failed", s.ExportFailed, "unflushed", s.Unflushed)
			}
		}
	}
	// A local write, and the one record of what was lost: it must be
	// made even when a collector that never answered used up ctx.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), accountWriteTimeout)
	defer cancel()
	// Encoded once, with a header of its own, for a process that also
	// hands it elsewhere (Account); its records are what the file gets.
	var own bytes.Buffer
	rm := accountMetrics(h.start, time.Now(), spans, points, logs)
	if err := fileexport.NewSink(&own, h.res).MetricExporter().Export(wctx, rm); err != nil {
		return fmt.Errorf("lens: encode telemetry accounting: %w", err)
	}
	h.account.Store(&accountLines{b: own.Bytes()})
	_, records, _ := bytes.Cut(own.Bytes(), []byte{'\n'})
	sink := h.file
	if sink == nil {
		if h.cfg.FilePath == "" {
			return nil
		}
		var err error
		if sink, err = fileexport.OpenFile(h.cfg.FilePath, h.res); err != nil {
			return fmt.Errorf("lens: write telemetry accounting: %w", err)
		}
		defer sink.Close()
	}
	if err := sink.WriteRecords(records); err != nil {
		return fmt.Errorf("lens: write telemetry accounting: %w", err)
	}
	return nil
}

// accountLines holds the account as Account returns it.
type accountLines struct{ b []byte }

// Account returns the process's telemetry account as Shutdown wrote it
// (see writeAccount): telemetry-file lines, a resource header naming the
// process and then the account's records, the records byte for byte
// those appended to the process's telemetry file. It is nil before
// Shutdown, and when the process recorded nothing to account for. A
// server whose file is on another host than its run hands it to the
// head server with it (see the orchestrator's account route).
func (h *Handle) Account() []byte {
	if h == nil {
		return nil
	}
	if a := h.account.Load(); a != nil {
		return a.b
	}
	return nil
}

// accountMetrics renders the accounts as the cumulative counters of the
// contract, one point per exporter and outcome, and only the counters of
// the signals accounted for. The sink puts its own resource header in
// front.
func accountMetrics(start, now time.Time, spans []SpanStats, points []MetricStats, logs []LogStats) *metricdata.ResourceMetrics {
	type counter struct {
		name, desc, unit string
		points           []metricdata.DataPoint[int64]
	}
	var (
		spanProcessed  = counter{contract.SDKSpanProcessed, "Spans handed to a batch span processor, by outcome.", "{span}", nil}
		spanExported   = counter{contract.SDKSpanExported, "Spans handed to an exporter, by outcome.", "{span}", nil}
		pointsExported = counter{contract.SDKMetricPointExported, "Metric data points handed to an exporter, by outcome.", "{data_point}", nil}
		logProcessed   = counter{contract.SDKLogProcessed, "Log records handed to a batch log record processor, by outcome.", "{log_record}", nil}
		logExported    = counter{contract.SDKLogExported, "Log records handed to an exporter, by outcome.", "{log_record}", nil}
	)
	add := func(c *counter, name, ctype string, v uint64, errType string) {
		kvs := []attribute.KeyValue{
			attribute.String(contract.AttrComponentName, name),
			attribute.String(contract.AttrComponentType, ctype),
		}
		if errType != "" {
			kvs = append(kvs, attribute.String(contract.AttrErrorType, errType))
		}
		c.points = append(c.points, metricdata.DataPoint[int64]{Attributes: attribute.NewSet(kvs...), StartTime: start, Time: now, Value: int64(v)})
	}
	for _, s := range spans {
		const proc = "batching_span_processor"
		add(&spanProcessed, s.Exporter, proc, s.Exported+s.ExportFailed, "")
		add(&spanProcessed, s.Exporter, proc, s.QueueFull, contract.SpanLossQueueFull)
		add(&spanProcessed, s.Exporter, proc, s.Unflushed, contract.SpanLossUnflushed)
		add(&spanExported, s.Exporter, s.ComponentType, s.Exported, "")
		add(&spanExported, s.Exporter, s.ComponentType, s.ExportFailed, contract.SpanLossExportFailed)
	}
	for _, s := range points {
		add(&pointsExported, s.Exporter, s.ComponentType, s.Exported, "")
		add(&pointsExported, s.Exporter, s.ComponentType, s.ExportFailed, contract.SpanLossExportFailed)
	}
	for _, s := range logs {
		const proc = "batching_log_processor"
		add(&logProcessed, s.Exporter, proc, s.Exported+s.ExportFailed, "")
		add(&logProcessed, s.Exporter, proc, s.QueueFull, contract.SpanLossQueueFull)
		add(&logProcessed, s.Exporter, proc, s.Unflushed, contract.SpanLossUnflushed)
		add(&logExported, s.Exporter, s.ComponentType, s.Exported, "")
		add(&logExported, s.Exporter, s.ComponentType, s.ExportFailed, contract.SpanLossExportFailed)
	}
	var ms []metricdata.Metrics
	for _, c := range []counter{spanProcessed, spanExported, pointsExported, logProcessed, logExported} {
		if len(c.points) == 0 {
			continue
		}
		ms = append(ms, metricdata.Metrics{Name: c.name, Description: c.desc, Unit: c.unit,
			Data: metricdata.Sum[int64]{Temporality: metricdata.CumulativeTemporality, IsMonotonic: true, DataPoints: c.points}})
	}
	return &metricdata.ResourceMetrics{ScopeMetrics: []metricdata.ScopeMetrics{{
		Scope:   instrumentation.Scope{Name: contract.MeterScope},
		Metrics: ms,
	}}}
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
