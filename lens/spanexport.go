package lens

import (
	"context"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/gymlens/gymlens/lens/internal/fileexport"
	"github.com/gymlens/gymlens/lens/internal/tracer"
)

// spanExporter is where a batcher sends its batches of ended spans.
type spanExporter interface {
	export(ctx context.Context, spans []*tracer.Span) error
	shutdown(ctx context.Context) error
}

// fileSpans writes spans to a run-directory file or the console, encoding
// them in place.
type fileSpans struct{ e *fileexport.SpanExporter }

func (f fileSpans) export(ctx context.Context, spans []*tracer.Span) error {
	return f.e.ExportLensSpans(ctx, spans)
}

func (f fileSpans) shutdown(ctx context.Context) error { return f.e.Shutdown(ctx) }

// sdkSpans feeds an exporter written for the OpenTelemetry SDK (OTLP, or
// one a caller passed in Options.SpanExporter): each span is turned into
// the SDK's read-only form on the export goroutine, off the request path.
type sdkSpans struct{ e sdktrace.SpanExporter }

func (s sdkSpans) export(ctx context.Context, spans []*tracer.Span) error {
	ro := make([]sdktrace.ReadOnlySpan, len(spans))
	for i, sp := range spans {
		ro[i] = sp.Snapshot()
	}
	return s.e.ExportSpans(ctx, ro)
}

func (s sdkSpans) shutdown(ctx context.Context) error { return s.e.Shutdown(ctx) }

// abortable ends an export in flight once abort is done, so a shutdown
// bounded by a context really ends with it.
type abortable struct {
	spanExporter
	abort context.Context
}

func (a abortable) export(ctx context.Context, spans []*tracer.Span) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(a.abort, cancel)
	defer stop()
	return a.spanExporter.export(ctx, spans)
}
