package server

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/gymlens/gymlens/lens"
	"github.com/gymlens/gymlens/telemetry"
)

// HealthPath is the liveness endpoint every server has. It is left out of
// traces and metrics: probes would drown the requests that matter.
const HealthPath = "/health"

// RequestDurationName is the semantic-convention HTTP server histogram.
const RequestDurationName = "http.server.request.duration"

// requestDurationBuckets are the semantic conventions' advised boundaries,
// in seconds.
var requestDurationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}

// ingressTelemetry is what every route's instrumentation shares: decided
// once, when the server's handler is built.
type ingressTelemetry struct {
	on       bool // telemetry initialised: extract trace context
	tracer   trace.Tracer
	duration metric.Float64Histogram
	prop     propagation.TextMapPropagator
}

func newIngressTelemetry(log *slog.Logger) *ingressTelemetry {
	h := telemetry.Get()
	t := &ingressTelemetry{on: h != nil, prop: otel.GetTextMapPropagator()}
	if !h.IsExporting() {
		return t
	}
	if lens.Enabled(telemetry.GroupServer) {
		t.tracer = h.Tracer()
	}
	if h.MetricsExporting() {
		hist, err := h.Meter().Float64Histogram(RequestDurationName, metric.WithUnit("s"),
			metric.WithDescription("Duration of HTTP server requests."),
			metric.WithExplicitBucketBoundaries(requestDurationBuckets...))
		if err != nil {
			log.Debug("http.server.request.duration unavailable", "err", err)
		} else {
			t.duration = hist
		}
	}
	return t
}

// wrap instruments one route. Everything that does not change between
// requests (span name, start options, metric attribute sets per status) is
// computed here, once, so a request pays for its own data only.
//
// With telemetry off the handler is returned as it is. On but not exporting,
// only the incoming trace context is extracted, so calls this process makes
// stay in the caller's trace.
func (t *ingressTelemetry) wrap(pattern string, next http.Handler) http.Handler {
	if !t.on {
		return next
	}
	// "POST /verify" names both; "/x" only a path (any method); "" is
	// the catch-all, which has no route.
	method, route := "", pattern
	if m, rest, ok := strings.Cut(pattern, " "); ok {
		method, route = m, rest
	}
	in := &ingress{next: next, t: t, method: method, route: route}
	in.spanName = strings.TrimSpace(method + " " + route)
	in.static = []attribute.KeyValue{attribute.String("url.scheme", "http")}
	if route != "" {
		in.static = append(in.static, attribute.String("http.route", route))
	}
	if method != "" {
		in.static = append(in.static, attribute.String("http.request.method", method))
	}
	in.startOpts = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)}
	return in
}

// ingress is one route's instrumentation.
type ingress struct {
	next      http.Handler
	t         *ingressTelemetry
	method    string // "" for the catch-all: taken from the request
	route     string // "" for the catch-all: no http.route
	spanName  string
	startOpts []trace.SpanStartOption
	static    []attribute.KeyValue // the route's span attributes: scheme, route, method
	sets      sync.Map             // status code -> []metric.RecordOption
}

// attrBufs recycles the arrays SERVER span attributes are gathered in.
var attrBufs = sync.Pool{New: func() any { return new([maxServerAttrs]attribute.KeyValue) }}

// maxServerAttrs is how many attributes a SERVER span gets at most: the
// route's static ones, the two per request, and on failure error.type or,
// on the catch-all, the method and its original spelling.
const maxServerAttrs = 8

func (in *ingress) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	t := in.t
	ctx := t.prop.Extract(r.Context(), headerCarrier(r.Header))
	if t.tracer == nil && t.duration == nil {
		in.next.ServeHTTP(w, r.WithContext(ctx))
		return
	}
	start := time.Now()
	var span trace.Span
	var catchAll []attribute.KeyValue // the catch-all route's method attributes
	if t.tracer != nil {
		name := in.spanName
		var method string
		if in.method == "" {
			// Unmatched: the method is client input, so it is normalised
			// like the metric's, and an unknown one does not name spans.
			method = methods[methodIndex(r.Method)]
			name = method
			if method == methods[0] {
				name = "HTTP"
			}
		}
		ctx, span = t.tracer.Start(ctx, name, in.startOpts...)
		if method != "" {
			catchAll = append(catchAll, attribute.String("http.request.method", method))
			if method == methods[0] {
				catchAll = append(catchAll, attribute.String("http.request.method_original", r.Method))
			}
		}
	}
	sw := statusWriters.Get().(*statusWriter)
	sw.ResponseWriter, sw.status = w, 0
	in.next.ServeHTTP(sw, r.WithContext(ctx))
	status := sw.status
	if status == 0 {
		status = http.StatusOK
	}
	sw.ResponseWriter = nil
	statusWriters.Put(sw)

	if span != nil {
		// Every attribute in one call, at the end, gathered in a pooled
		// array: the tracer copies the values into the span and keeps
		// nothing of the slice. Given at start (as options) they would be
		// copied into the start config first. The exported span is the
		// same; nothing reads attributes before the span ends.
		buf := attrBufs.Get().(*[maxServerAttrs]attribute.KeyValue)
		attrs := append(append(buf[:0], in.static...), catchAll...)
		attrs = append(attrs, attribute.String("url.path", r.URL.Path),
			attribute.Int("http.response.status_code", status))
		if status >= 500 {
			span.SetStatus(codes.Error, "")
			attrs = append(attrs, attribute.String("error.type", strconv.Itoa(status)))
		}
		span.SetAttributes(attrs...)
		clear(buf[:])
		attrBufs.Put(buf)
		span.End()
	}
	if t.duration != nil {
		t.duration.Record(context.Background(), time.Since(start).Seconds(), in.metricSet(r.Method, status)...)
	}
}

// metricSet returns the cached attribute set for one status (and, on the
// catch-all route, one method): after the first request of a kind, no
// attribute is built again.
func (in *ingress) metricSet(method string, status int) []metric.RecordOption {
	key := status
	if in.method == "" {
		key = status<<8 | methodIndex(method)
	}
	if v, ok := in.sets.Load(key); ok {
		return v.([]metric.RecordOption)
	}
	m := in.method
	if m == "" {
		m = methods[methodIndex(method)]
	}
	attrs := []attribute.KeyValue{
		attribute.String("http.request.method", m),
		attribute.Int("http.response.status_code", status),
		attribute.String("url.scheme", "http"),
	}
	if in.route != "" {
		attrs = append(attrs, attribute.String("http.route", in.route))
	}
	if status >= 500 {
		attrs = append(attrs, attribute.String("error.type", strconv.Itoa(status)))
	}
	// A ready slice, so Record's variadic argument allocates nothing.
	opts := []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(attrs...))}
	v, _ := in.sets.LoadOrStore(key, opts)
	return v.([]metric.RecordOption)
}

// headerCarrier reads and writes the propagation headers straight in the
// map under their canonical keys; http.Header.Get and Set would
// canonicalise (and allocate for) the lowercase names the propagators use,
// on every request.
type headerCarrier http.Header

func (h headerCarrier) Get(key string) string {
	if v := h.Values(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (h headerCarrier) Values(key string) []string { return h[canonicalKey(key)] }

// Set writes under the canonical key, as Values reads.
func (h headerCarrier) Set(key, value string) { h[canonicalKey(key)] = []string{value} }

// canonicalKey spells the propagation headers' lowercase names in their
// canonical form without building it: http.CanonicalHeaderKey allocates a
// new string for a name that is not canonical already, on every call.
func canonicalKey(key string) string {
	switch key {
	case "traceparent":
		return "Traceparent"
	case "tracestate":
		return "Tracestate"
	case "baggage":
		return "Baggage"
	}
	return http.CanonicalHeaderKey(key)
}

func (h headerCarrier) Keys() []string { return propagation.HeaderCarrier(h).Keys() }

// methods are the request methods metrics name; anything else is "_OTHER",
// as the semantic conventions ask, so a client cannot invent series.
var methods = []string{"_OTHER", "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"}

func methodIndex(m string) int {
	for i, known := range methods[1:] {
		if m == known {
			return i + 1
		}
	}
	return 0
}

// statusWriter remembers the status a handler wrote. Instances are pooled:
// a handler must not keep its ResponseWriter past returning.
type statusWriter struct {
	http.ResponseWriter
	status int
}

var statusWriters = sync.Pool{New: func() any { return new(statusWriter) }}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the real writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
