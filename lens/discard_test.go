package lens_test

import (
	"context"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// discard is a span exporter that drops everything.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }
