package lens_test

import (
	"context"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/gymlens/gymlens/internal/testenv"
	"github.com/gymlens/gymlens/lens"
)

var sink bool

// BenchmarkGate measures the span-group gate next to its floor, a plain
// atomic load.
func BenchmarkGate(b *testing.B) {
	var word atomic.Uint64
	b.Run("floor-atomic-load", func(b *testing.B) {
		for b.Loop() {
			sink = word.Load()&(1<<3) != 0
		}
	})
	b.Run("off", func(b *testing.B) {
		lens.ResetForTesting()
		for b.Loop() {
			sink = lens.Enabled(lens.GroupStep)
		}
	})
	b.Run("on", func(b *testing.B) {
		setupGroups(b, "all")
		for b.Loop() {
			sink = lens.Enabled(lens.GroupStep)
		}
	})
}

// BenchmarkDisabledSite is an instrumentation site written the way the code
// base writes them: everything behind the gate.
func BenchmarkDisabledSite(b *testing.B) {
	lens.ResetForTesting()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		var span trace.Span
		if lens.Enabled(lens.GroupStep) {
			ctx, span = lens.Start(ctx, lens.GroupStep, "step")
			span.End()
		}
	}
	_ = ctx
}

// BenchmarkStartOff measures lens.Start with its group off (the helper's
// own gate plus returning the non-recording span).
func BenchmarkStartOff(b *testing.B) {
	lens.ResetForTesting()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_, span := lens.Start(ctx, lens.GroupStep, "step")
		span.End()
	}
}

func setupGroups(b *testing.B, spec string) {
	b.Helper()
	lens.ResetForTesting()
	b.Cleanup(lens.ResetForTesting)
	cfg, err := lens.LoadConfig(lens.LoadOptions{Lookup: testenv.Lookup(map[string]string{
		"NEMO_GYM_OTEL_ENABLED": "1", "NEMO_GYM_OTEL_SPAN_GROUPS": spec,
		"NEMO_GYM_OTEL_EXPORTER": "none", "NEMO_GYM_OTEL_METRICS_ENABLED": "0"})})
	if err != nil {
		b.Fatal(err)
	}
	h, err := lens.Setup(context.Background(), cfg, lens.Options{SpanExporter: discard{}})
	if err != nil {
		b.Fatal(err)
	}
	if !h.IsExporting() {
		b.Fatal("not exporting")
	}
}
