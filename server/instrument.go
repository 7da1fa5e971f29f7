package server

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/lens"
	"github.com/gymlens/gymlens/lens/cowmap"
	"github.com/gymlens/gymlens/telemetry"
)

// HealthPath is the liveness endpoint every server has. It is left out of
// traces and metrics: probes would drown the requests that matter.
const HealthPath = "/health"

// schemeHTTP is url.scheme (http.scheme): the server speaks plain HTTP.
const schemeHTTP = "http"

// ingressTelemetry is what every route's instrumentation shares: decided
// once, when the server's handler is built.
type ingressTelemetry struct {
	on     bool // telemetry initialised: extract trace context
	tracer trace.Tracer
	prop   propagation.TextMapPropagator

	// conv is the HTTP metric conventions OTEL_SEMCONV_STABILITY_OPT_IN
	// picked (semconv.go); each instrument is nil when not emitted.
	conv        httpConventions
	metrics     bool                    // any of the three below
	durations   bool                    // either of the two below
	duration    lens.Histogram[float64] // http.server.request.duration, s
	durationOld lens.Histogram[float64] // http.server.duration, ms
	active      *activeTable            // http.server.active_requests
	origins     originTable             // old conventions: where requests arrived

	// bodySizes says the body size histograms are recorded: lens's
	// HTTPBodySizes with the stable conventions. Only then are a
	// request's bodies wrapped to be counted.
	bodySizes bool
	reqBody   lens.Histogram[int64] // http.server.request.body.size, By
	respBody  lens.Histogram[int64] // http.server.response.body.size, By
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
		t.conv = conventionsOf(h.Config())
		m := h.Meter()
		ins := h.Instrumenter()
		if t.conv.new {
			t.duration, t.conv.new = histogram(ins, contract.HTTPServerRequestDuration, log)
		}
		if t.conv.old {
			t.durationOld, t.conv.old = histogram(ins, contract.HTTPServerDurationOld, log)
		}
		t.durations = t.conv.new || t.conv.old
		if t.conv.new && h.Config().HTTPBodySizes {
			t.bodySizes = t.bodySizeHistograms(ins, log)
		}
		// Python's ASGI instrumentation counts active requests under
		// every setting; only the attribute keys follow it. The counts are
		// atomics read at export time, so a request pays two atomic adds
		// rather than two SDK records.
		in := contract.MustLookup(contract.HTTPServerActiveRequests)
		t.active = &activeTable{m: map[attribute.Distinct]*activeCount{}}
		_, err := m.Int64ObservableUpDownCounter(in.Name, metric.WithUnit(in.Unit), metric.WithDescription(in.Description),
			metric.WithInt64Callback(t.active.observe))
		if err != nil {
			log.Debug("instrument unavailable", "instrument", in.Name, "err", err)
			t.active = nil
		}
		t.metrics = t.durations || t.active != nil
	}
	return t
}

// bodySizeHistograms creates the two body size histograms; false when
// either is unavailable.
func (t *ingressTelemetry) bodySizeHistograms(ins lens.Instrumenter, log *slog.Logger) bool {
	var err error
	if t.reqBody, err = ins.Int64Histogram(contract.HTTPServerRequestBodySize); err == nil {
		t.respBody, err = ins.Int64Histogram(contract.HTTPServerResponseBodySize)
	}
	if err != nil {
		log.Debug("instrument unavailable", "instrument", contract.HTTPServerRequestBodySize, "err", err)
		return false
	}
	return true
}

// histogram creates the contract's histogram name; false on failure.
func histogram(ins lens.Instrumenter, name string, log *slog.Logger) (lens.Histogram[float64], bool) {
	hist, err := ins.Float64Histogram(name)
	if err != nil {
		log.Debug("instrument unavailable", "instrument", name, "err", err)
		return hist, false
	}
	return hist, true
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
	in := &ingress{next: next, t: t, method: method, route: route, methodIdx: methodIndex(method)}
	in.spanName = strings.TrimSpace(method + " " + route)
	in.static = []attribute.KeyValue{attribute.String(contract.AttrURLScheme, schemeHTTP)}
	if route != "" {
		in.static = append(in.static, attribute.String(contract.AttrHTTPRoute, route))
	}
	if method != "" {
		in.static = append(in.static, attribute.String(contract.AttrHTTPRequestMethod, method))
	}
	in.startOpts = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)}
	return in
}

// ingress is one route's instrumentation.
type ingress struct {
	next      http.Handler
	t         *ingressTelemetry
	method    string // "" for the catch-all: taken from the request
	methodIdx int    // method's index in methods
	route     string // "" for the catch-all: no http.route
	spanName  string
	startOpts []trace.SpanStartOption
	static    []attribute.KeyValue // the route's span attributes: scheme, route, method

	// Metric attribute sets, built on the first request of each kind.
	durations cowmap.Map[uint64, durationSets] // requestKind.key(status)
	active    cowmap.Map[uint64, *activeCount] // requestKind.key(0)
}

func (in *ingress) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	t := in.t
	ctx := t.prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	if t.tracer == nil && !t.metrics {
		in.next.ServeHTTP(w, withContext(ctx, r))
		return
	}
	start := time.Now()
	var kind requestKind
	if t.metrics {
		kind = in.kindOf(r)
		if t.active != nil {
			// Up when the request starts, down when it ends, however it
			// ends: a panic passing through still takes it down.
			c := in.activeSet(kind)
			c.n.Add(1)
			defer c.n.Add(-1)
		}
	}
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
		if !span.IsRecording() {
			// Sampled out: nothing set on the span would be kept, and
			// it needs no End.
			span = nil
		} else if method != "" {
			catchAll = append(catchAll, attribute.String(contract.AttrHTTPRequestMethod, method))
			if method == methods[0] {
				catchAll = append(catchAll, attribute.String("http.request.method_original", r.Method))
			}
		}
	}
	var status int
	var sizes *bodyCount // the counted bodies, when their sizes are recorded
	if t.bodySizes {
		sizes = &bodyCount{statusWriter: statusWriter{ResponseWriter: w}}
		if r.Body != nil {
			sizes.body.ReadCloser = r.Body
			r.Body = &sizes.body
		}
		in.next.ServeHTTP(sizes, withContext(ctx, r))
		status = sizes.status
		sizes.ResponseWriter = nil
	} else {
		sw := statusWriters.Get().(*statusWriter)
		sw.ResponseWriter, sw.status = w, 0
		in.next.ServeHTTP(sw, withContext(ctx, r))
		status = sw.status
		sw.ResponseWriter = nil
		statusWriters.Put(sw)
	}
	if status == 0 {
		status = http.StatusOK
	}

	if span != nil {
		// Every attribute in one call, at the end (see lens.Attrs).
		// Given at start (as options) they would be copied into the
		// start config first.
		attrs := lens.NewAttrs()
		if in.route != "" {
			// A route's span names the rollout the request belongs
			// to, by its path prefix (see Options.RolloutPrefix) or its
			// baggage; the catch-all's does not.
			if id := RequestRolloutID(ctx); id != "" {
				attrs.Add(attribute.String(contract.AttrRolloutID, id))
			}
		}
		attrs.Add(in.static...)
		attrs.Add(catchAll...)
		attrs.Add(attribute.String("url.path", r.URL.Path),
			attribute.Int(contract.AttrHTTPResponseStatus, status))
		if status >= 500 {
			span.SetStatus(codes.Error, "")
			attrs.Add(attribute.String(contract.AttrErrorType, strconv.Itoa(status)))
		}
		attrs.SetOn(span)
		span.End()
	}
	if t.durations {
		seconds := time.Since(start).Seconds()
		sets := in.durationSet(kind, status)
		if t.conv.new {
			sets.new.Record(seconds)
		}
		if t.conv.old {
			sets.old.Record(oldDurationMS(seconds))
		}
		if sizes != nil {
			sets.reqBody.Record(sizes.body.n.Load())
			sets.respBody.Record(sizes.written)
		}
	}
}

// withContext is r with ctx, r itself when ctx is r's already (a request
// with no trace context, no span started): Request.WithContext copies the
// whole request.
func withContext(ctx context.Context, r *http.Request) *http.Request {
	if ctx == r.Context() {
		return r
	}
	return r.WithContext(ctx)
}

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

// bodyCount is a statusWriter that also counts the bytes of a request's
// bodies, for the body size histograms: the response body bytes the
// route wrote (written) and, through body, which replaces the request's
// Body, the request body bytes it read. Made per request, and only when
// the sizes are recorded.
type bodyCount struct {
	statusWriter
	written int64
	body    countedBody
}

func (w *bodyCount) Write(b []byte) (int, error) {
	n, err := w.statusWriter.Write(b)
	w.written += int64(n)
	return n, err
}

// countedBody is a body that counts the bytes read from it. The count is
// atomic: an HTTP client's transport reads a request body on a goroutine
// of its own, which may still run when the answer has come.
type countedBody struct {
	io.ReadCloser
	n atomic.Int64
}

func (b *countedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}
