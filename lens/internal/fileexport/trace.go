package fileexport

import (
	"context"
	"sync"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/gymlens/gymlens/lens/telfile"
)

// SpanExporter is an sdktrace.SpanExporter that writes ended spans to a
// sink, one line each, encoding them straight from their read-only form.
type SpanExporter struct {
	exporterBase
	bufMu sync.Mutex // exports may overlap (the batch processor and a flush)
	buf   []byte     // reused for every export, never above writeChunk plus one span
}

// writeChunk is how much encoded output an export gathers before it hands
// it to the sink. A batch is written in pieces of about this size, each
// ending at a line boundary, so the buffer stays small and is kept across
// exports: a buffer sized for a whole batch taken from a sync.Pool would be
// dropped at every GC and regrown by append, so encoding would allocate
// again for every batch.
const writeChunk = 64 << 10

var _ sdktrace.SpanExporter = (*SpanExporter)(nil)

// SpanExporter returns an exporter that writes finished spans to the sink.
// Shutting it down stops only this exporter.
func (s *Sink) SpanExporter() *SpanExporter {
	return &SpanExporter{exporterBase: exporterBase{sink: s}}
}

// ExportSpans encodes a batch of ended spans and appends it to the
// sink, in writes of whole lines.
func (e *SpanExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if e.stopped() || len(spans) == 0 {
		return nil
	}
	e.bufMu.Lock()
	defer e.bufMu.Unlock()
	if e.buf == nil {
		e.buf = make([]byte, 0, writeChunk+4<<10)
	}
	b := e.buf[:0]
	for _, sp := range spans {
		b = appendSpan(b, sp)
		if len(b) >= writeChunk {
			if err := e.sink.write(b); err != nil {
				e.buf = b[:0]
				return err
			}
			b = b[:0]
		}
	}
	err := e.sink.write(b)
	e.buf = b[:0]
	return err
}

func spanKind(k trace.SpanKind) string {
	switch k {
	case trace.SpanKindServer:
		return telfile.KindServer
	case trace.SpanKindClient:
		return telfile.KindClient
	case trace.SpanKindProducer:
		return telfile.KindProducer
	case trace.SpanKindConsumer:
		return telfile.KindConsumer
	default:
		// The SDK already maps "unspecified" to internal; anything
		// else unknown is written as internal too.
		return telfile.KindInternal
	}
}
