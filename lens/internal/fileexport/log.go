package fileexport

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	sdklog "go.opentelemetry.io/otel/sdk/log"

	"github.com/gymlens/gymlens/lens/telfile"
)

type logExporter struct{ exporterBase }

var _ sdklog.Exporter = (*logExporter)(nil)

// LogExporter returns an exporter that writes log records to the sink. Use it
// with sdklog.NewSimpleProcessor or sdklog.NewBatchProcessor. Records emitted
// inside a span carry its trace and span IDs. Shutting it down stops only
// this exporter.
func (s *Sink) LogExporter() sdklog.Exporter {
	return &logExporter{exporterBase{sink: s}}
}

// Export encodes the records and appends them to the sink in one write.
func (e *logExporter) Export(ctx context.Context, records []sdklog.Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if e.stopped() || len(records) == 0 {
		return nil
	}
	var enc encoder
	for i := range records {
		enc.add(logRecord(&records[i]))
	}
	return enc.flushTo(e.sink)
}

func logRecord(r *sdklog.Record) *telfile.Log {
	sev := r.Severity()
	text := r.SeverityText()
	if text == "" {
		text = sev.String() // "INFO", "WARN2", ...; "UNDEFINED" for 0
	}
	attrs := make(map[string]any, r.AttributesLen())
	r.WalkAttributes(func(kv attribute.KeyValue) bool {
		attrs[string(kv.Key)] = attrValue(kv.Value)
		return true
	})
	rec := &telfile.Log{
		TimeNS:         unixNanos(r.Timestamp()),
		ObservedNS:     unixNanos(r.ObservedTimestamp()),
		Severity:       text,
		SeverityNumber: int(sev),
		EventName:      r.EventName(),
		Body:           r.Body().String(),
		Attributes:     attrs,
		Scope:          r.InstrumentationScope().Name,
	}
	if id := r.TraceID(); id.IsValid() {
		rec.TraceID = id.String()
	}
	if id := r.SpanID(); id.IsValid() {
		rec.SpanID = id.String()
	}
	return rec
}
