package lens

import (
	"context"
	"fmt"
	"sync"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/gymlens/gymlens/lens/internal/fileexport"
	"github.com/gymlens/gymlens/lens/internal/otlpenc"
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
	return f.e.ExportSpans(ctx, spans)
}

func (f fileSpans) shutdown(ctx context.Context) error { return f.e.Shutdown(ctx) }

// sdkSpans feeds an exporter written for the OpenTelemetry SDK (one a
// caller passed in Options.SpanExporter): each span is turned into the
// SDK's read-only form on the export goroutine, off the request path.
type sdkSpans struct{ e sdktrace.SpanExporter }

func (s sdkSpans) export(ctx context.Context, spans []*tracer.Span) error {
	ro := make([]sdktrace.ReadOnlySpan, len(spans))
	for i, sp := range spans {
		ro[i] = sp.Snapshot()
	}
	return s.e.ExportSpans(ctx, ro)
}

func (s sdkSpans) shutdown(ctx context.Context) error { return s.e.Shutdown(ctx) }

// otlpSpans sends spans over OTLP through one of the official trace
// clients (gRPC or HTTP: transport, retries, TLS, headers and the OTLP
// environment variables are theirs); the protobuf is mapped by otlpenc.
// Exports may overlap (two batcher workers, a flush), so each takes an
// encoder of its own from a small free list; an encoder keeps its protobuf
// objects for its next export.
type otlpSpans struct {
	client otlptrace.Client
	mu     sync.Mutex
	free   []*otlpenc.Encoder
}

func newOTLPSpans(c otlptrace.Client) *otlpSpans { return &otlpSpans{client: c} }

func (o *otlpSpans) export(ctx context.Context, spans []*tracer.Span) error {
	o.mu.Lock()
	var enc *otlpenc.Encoder
	if n := len(o.free); n > 0 {
		enc, o.free = o.free[n-1], o.free[:n-1]
	} else {
		enc = new(otlpenc.Encoder)
	}
	o.mu.Unlock()
	defer func() {
		o.mu.Lock()
		o.free = append(o.free, enc)
		o.mu.Unlock()
	}()
	rs := enc.Encode(spans)
	if len(rs) == 0 {
		return nil
	}
	if err := o.client.UploadTraces(ctx, rs); err != nil {
		return fmt.Errorf("traces export: %w", err)
	}
	return nil
}

func (o *otlpSpans) shutdown(ctx context.Context) error { return o.client.Stop(ctx) }
