package fileexport

import (
	"context"
	"sync"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/gymlens/gymlens/internal/telfile"
)

type spanExporter struct{ exporterBase }

var _ sdktrace.SpanExporter = (*spanExporter)(nil)

// SpanExporter returns an exporter that writes finished spans to the sink.
// Use it with sdktrace.WithBatcher or sdktrace.WithSyncer. Shutting it down
// stops only this exporter.
func (s *Sink) SpanExporter() sdktrace.SpanExporter {
	return &spanExporter{exporterBase{sink: s}}
}

// ExportSpans encodes the batch and appends it to the sink in one write.
func (e *spanExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if e.stopped() || len(spans) == 0 {
		return nil
	}
	buf := batchBuffers.Get().(*[]byte)
	b := (*buf)[:0]
	for _, sp := range spans {
		b = appendSpan(b, sp)
	}
	err := e.sink.write(b)
	*buf = b
	batchBuffers.Put(buf)
	return err
}

// batchBuffers recycles the byte slices batches are encoded into.
var batchBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

// spanRecord is the reflective form of a span line. The exporter writes
// appendSpan's direct encoding; tests hold the two to the same output.
func spanRecord(sp sdktrace.ReadOnlySpan) *telfile.Span {
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
		// The SDK already maps "unspecified" to internal.
		return telfile.KindInternal
	}
}
