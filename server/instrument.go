package server

import (
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/gymlens/gymlens/lens"
	"github.com/gymlens/gymlens/telemetry"
)

// HealthPath is the liveness endpoint every server has. It is left out of
// traces and metrics: probes would drown the requests that matter.
const HealthPath = "/health"

// instrument wraps the mux once, when the server starts, according to the
// telemetry this process has:
//   - telemetry off: the mux itself, nothing added;
//   - on but not exporting (ruled out by the export strategy): only the
//     incoming trace context is extracted, so calls this process makes stay
//     in the caller's trace;
//   - exporting: otelhttp around the whole mux, so r.Pattern is known when
//     the span is named and http.route is set; spans only when the server
//     group is on, metrics only when metrics are exported.
func instrument(mux http.Handler) http.Handler {
	h := telemetry.Get()
	if h == nil {
		return mux
	}
	if !h.IsExporting() {
		return extractOnly(mux)
	}
	opts := []otelhttp.Option{
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return routeName(r) }),
		otelhttp.WithFilter(func(r *http.Request) bool { return r.URL.Path != HealthPath }),
		otelhttp.WithPropagators(otel.GetTextMapPropagator()),
	}
	if !lens.Enabled(telemetry.GroupServer) {
		opts = append(opts, otelhttp.WithTracerProvider(tracenoop.NewTracerProvider()))
	}
	if !h.MetricsExporting() {
		opts = append(opts, otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()))
	}
	return otelhttp.NewHandler(mux, "server", opts...)
}

func extractOnly(next http.Handler) http.Handler {
	prop := otel.GetTextMapPropagator()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}
