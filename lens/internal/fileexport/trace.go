package fileexport

import (
	"context"
	"sync"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/gymlens/gymlens/internal/telfile"
	"github.com/gymlens/gymlens/lens/internal/tracer"
)

// SpanExporter writes the ended spans of lens's tracer to a sink, reading
// them in place (ExportSpans). It is deliberately not an
// sdktrace.SpanExporter: lens's tracer is the only source of spans, and
// lens itself turns its spans into SDK snapshots for a caller's exporter
// written for the SDK, so this one needs to know a single span type.
type SpanExporter struct {
	exporterBase
	bufMu sync.Mutex // exports may overlap (two batcher workers, a flush)
	buf   []byte     // reused for every export, never above writeChunk plus one span
}

// writeChunk is how much encoded output an export gathers before it hands
// it to the sink. A batch is written in pieces of about this size, each
// ending at a line boundary, so the buffer stays small and is kept across
// exports: a buffer sized for a whole batch (2048 spans, about a megabyte)
// taken from a sync.Pool was dropped at every GC and regrown by append,
// which made encoding allocate about 800 bytes per span.
const writeChunk = 64 << 10

// SpanExporter returns an exporter that writes finished spans to the sink.
// Shutting it down stops only this exporter.
func (s *Sink) SpanExporter() *SpanExporter {
	return &SpanExporter{exporterBase: exporterBase{sink: s}}
}

// ExportSpans encodes a batch of ended spans and appends it to the
// sink, in writes of whole lines.
func (e *SpanExporter) ExportSpans(ctx context.Context, spans []*tracer.Span) error {
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

// spanRecord is the reflective form of a span line. The exporter writes
// appendSpan's direct encoding; tests hold the two to the same output.
func spanRecord(sp *tracer.Span) *telfile.Span {
	sc := sp.SpanContext()
	rec := &telfile.Span{
		TraceID:    sc.TraceID().String(),
		SpanID:     sc.SpanID().String(),
		Name:       sp.Name(),
		Kind:       spanKind(sp.SpanKind()),
		StartNS:    unixNanos(sp.StartTime()),
		EndNS:      unixNanos(sp.EndTime()),
		Attributes: attrMap(sp.Attributes()),
		Scope:      sp.InstrumentationScope().Name,
	}
	if p := sp.Parent(); p.SpanID().IsValid() {
		rec.ParentSpanID = p.SpanID().String()
		rec.ParentRemote = p.IsRemote()
	}
	st := sp.Status()
	switch st.Code {
	case codes.Ok:
		rec.Status = telfile.StatusOK
	case codes.Error:
		rec.Status = telfile.StatusError
		rec.StatusMessage = st.Description
	default:
		rec.Status = telfile.StatusUnset
	}
	if evs := sp.Events(); len(evs) > 0 {
		rec.Events = make([]telfile.Event, len(evs))
		for i, ev := range evs {
			rec.Events[i] = telfile.Event{
				Name:       ev.Name,
				TimeNS:     unixNanos(ev.Time),
				Attributes: attrMap(ev.Attributes),
			}
		}
	}
	for _, l := range sp.Links() {
		link := telfile.Link{TraceID: l.SpanContext.TraceID().String(), SpanID: l.SpanContext.SpanID().String()}
		if len(l.Attributes) > 0 {
			link.Attributes = attrMap(l.Attributes)
		}
		rec.Links = append(rec.Links, link)
	}
	return rec
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
		// The tracer already maps "unspecified" to internal; anything
		// else unknown is written as internal too.
		return telfile.KindInternal
	}
}
