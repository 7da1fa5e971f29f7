package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/internal/testenv"
	"github.com/gymlens/gymlens/protocol"
	"github.com/gymlens/gymlens/server"
	"github.com/gymlens/gymlens/servers/resources/arithmetic"
	"github.com/gymlens/gymlens/telemetry"
)

// discardSpans is a span exporter that drops every span it is handed, so a
// benchmark pays for recording and batching spans but not for shipping them.
type discardSpans struct{}

func (discardSpans) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardSpans) Shutdown(context.Context) error                             { return nil }

// The request every case below serves: a correct answer, so the verifier
// does its full parse-and-compare and answers 200.
const (
	verifyBenchBody = `{"responses_create_params":{"input":[{"role":"user","content":"What is 3 + 4?"}]},` +
		`"task_id":"bench-1","expected_answer":"7","response":{"id":"resp_1","object":"response","created_at":1767225600,` +
		`"model":"gym-policy","output":[{"type":"message","id":"msg_1","role":"assistant","status":"completed",` +
		`"content":[{"type":"output_text","text":"The answer is 7.","annotations":[]}]}],` +
		`"parallel_tool_calls":true,"tool_choice":"auto","tools":[]}}`
	// verifyBenchTraceparent is a sampled W3C parent from a caller.
	verifyBenchTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	verifyBenchParentSpan  = "00f067aa0ba902b7"
	verifyBenchTraceID     = "4bf92f3577b34da6a3ce929d0e0e4736"
)

// Ways our stack can be built for the benchmark.
const (
	oursUninstrumented = "uninstrumented" // telemetry.Init never ran
	oursOff            = "off"            // Init ran with ENABLED=0
	oursMetricsOnly    = "metrics-only"   // metrics to a manual reader, no traces
	oursDefault        = "default"        // SPAN_GROUPS=default, spans discarded
	oursAll            = "all"            // SPAN_GROUPS=all, spans discarded
)

// oursVerifyHandler sets up this process's telemetry as mode says and only
// then builds the arithmetic resources server, whose handler it returns.
// Telemetry is reset, and the environment restored, when tb ends. exp and
// reader may be nil (a discarding exporter and a fresh manual reader).
func oursVerifyHandler(tb testing.TB, mode string, exp sdktrace.SpanExporter, reader sdkmetric.Reader) http.Handler {
	tb.Helper()
	testenv.ClearTelemetry(tb)
	telemetry.ResetForTesting()
	tb.Cleanup(telemetry.ResetForTesting)
	if exp == nil {
		exp = discardSpans{}
	}
	if reader == nil {
		reader = sdkmetric.NewManualReader()
	}
	opts := telemetry.InitOptions{ServerName: arithmetic.ServerName, ServerType: contract.ServerTypeResources}
	switch mode {
	case oursUninstrumented:
	case oursOff:
		tb.Setenv("NEMO_GYM_OTEL_ENABLED", "0")
	case oursMetricsOnly:
		tb.Setenv("NEMO_GYM_OTEL_ENABLED", "1")
		tb.Setenv("NEMO_GYM_OTEL_EXPORTER", "none")
		tb.Setenv("NEMO_GYM_OTEL_TRACES_ENABLED", "0")
		opts.MetricReader = reader
	case oursDefault, oursAll:
		tb.Setenv("NEMO_GYM_OTEL_ENABLED", "1")
		tb.Setenv("NEMO_GYM_OTEL_EXPORTER", "none")
		tb.Setenv("NEMO_GYM_OTEL_SPAN_GROUPS", mode)
		opts.MetricReader, opts.SpanExporter = reader, exp
	default:
		tb.Fatalf("unknown mode %q", mode)
	}
	if mode != oursUninstrumented {
		h, err := telemetry.Init(opts)
		if err != nil {
			tb.Fatal(err)
		}
		if exporting := mode != oursOff; h.IsExporting() != exporting {
			tb.Fatalf("mode %s: telemetry exporting = %v, want %v", mode, h.IsExporting(), exporting)
		}
	}
	env, err := arithmetic.New(arithmetic.Defaults())
	if err != nil {
		tb.Fatal(err)
	}
	s := server.New(server.Options{Name: arithmetic.ServerName})
	env.Register(s)
	return s.Handler()
}

// routeVerify is the resources server's verify route.
const routeVerify = "POST " + protocol.PathVerify

// plainVerifyMux is the peer: a bare net/http mux whose POST /verify does
// the work our runtime and verifier do for a request, without telemetry:
// bounded JSON decode, validation, number extraction and exact rational
// comparison, JSON encode.
func plainVerifyMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc(routeVerify, func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				http.Error(w, "internal error", http.StatusInternalServerError)
			}
		}()
		var req protocol.VerifyRequest
		body := http.MaxBytesReader(w, r.Body, server.DefaultMaxBodyBytes)
		dec := json.NewDecoder(body)
		if err := dec.Decode(&req); err != nil || dec.More() {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		if _, err := io.Copy(io.Discard, body); err != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		if err := req.Validate(); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var expected string
		if _, err := req.Fields.Decode("expected_answer", &expected); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		want, ok := new(big.Rat).SetString(strings.TrimSpace(expected))
		if !ok {
			http.Error(w, "expected answer is not a number", http.StatusInternalServerError)
			return
		}
		resp := protocol.NewVerifyResponse(req, 0)
		var extracted *string
		if tok, found := arithmetic.LastNumber(req.Response.OutputText()); found {
			extracted = &tok
			if got, ok := new(big.Rat).SetString(tok); ok && got.Cmp(want) == 0 {
				resp.Reward = 1
			}
		}
		_ = resp.Fields.Set("expected_answer", expected)
		_ = resp.Fields.Set("extracted_answer", extracted)
		var buf bytes.Buffer
		if err := json.NewEncoder(&buf).Encode(resp); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(buf.Bytes())
	})
	return mux
}

// otelhttpVerifyHandler wraps the peer mux in stock otelhttp with its own
// SDK: spans through a batcher (or, for tests, synchronously) into exp,
// metrics into reader, W3C trace context propagation. The providers are
// shut down when tb ends.
func otelhttpVerifyHandler(tb testing.TB, exp sdktrace.SpanExporter, syncExport bool, reader sdkmetric.Reader) http.Handler {
	tb.Helper()
	// Only the chosen processor may be built: WithBatcher starts its
	// export goroutine at once.
	var proc sdktrace.TracerProviderOption
	if syncExport {
		proc = sdktrace.WithSyncer(exp)
	} else {
		proc = sdktrace.WithBatcher(exp)
	}
	tp := sdktrace.NewTracerProvider(proc, sdktrace.WithSampler(sdktrace.AlwaysSample()))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tp.Shutdown(ctx); err != nil {
			tb.Error(err)
		}
		if err := mp.Shutdown(ctx); err != nil {
			tb.Error(err)
		}
	})
	return otelhttp.NewHandler(plainVerifyMux(), "server",
		otelhttp.WithTracerProvider(tp),
		otelhttp.WithMeterProvider(mp),
		otelhttp.WithPropagators(propagation.TraceContext{}))
}

// serveVerify sends one POST /verify, from a traced caller, to h.
func serveVerify(h http.Handler, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/verify", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Traceparent", verifyBenchTraceparent)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// BenchmarkVerifyRequest is the per-request cost of the HTTP instrumentation:
// POST /verify served in process (httptest, no network) by our stack in each
// telemetry mode, next to the peer, a plain net/http mux doing the same work,
// bare and wrapped in stock otelhttp with the same SDK set-up (spans to a
// discarding exporter through a batcher, always sampled; metrics to a manual
// reader; W3C trace context). Every request carries a sampled traceparent.
//
// Run all cases in one go, so the ratios come from one run:
//
//	go test -run '^$' -bench BenchmarkVerifyRequest -benchmem -count 5 -benchtime 1s ./server/
//
// With ns and allocs the medians over -count of ns/op and allocs/op:
//
//	added(ours)     = ns(ours/default) - ns(ours/uninstrumented)
//	added(otelhttp) = ns(peer/otelhttp) - ns(peer/plain-mux)
//	target: added(ours) / added(otelhttp) <= 0.6
//	allocs: (allocs(ours/default) - allocs(ours/uninstrumented)) /
//	        (allocs(peer/otelhttp) - allocs(peer/plain-mux)) <= 0.5
//	off:    ns(ours/off) / ns(ours/uninstrumented) - 1 <= 0.03
//
// go test runs the -count repetitions of one case back to back, so on a
// busy machine load drift lands on whole cases. There, build the binary once
// (go test -c) and run it repeatedly with -test.count 1 instead: the cases
// then interleave, and the ratios can be taken per run. Allocation counts
// are exact either way. A nonzero dropped-spans/op means the span export
// goroutine was starved and the case was measured cheaper than it is.
//
// ours/uninstrumented is our stack with telemetry never initialised, so the
// ingress middleware is not installed at all; ours/off has Init run with
// NEMO_GYM_OTEL_ENABLED=0. Note that ours/metrics-only, default and all also
// include the verifier's own gym.* metrics (and, with all, its gym.verify
// span), which the peer has no counterpart for.
func BenchmarkVerifyRequest(b *testing.B) {
	body := []byte(verifyBenchBody)
	run := func(b *testing.B, h http.Handler) {
		// One request outside the timed loop: it must succeed, and it
		// fills the per-route caches as a warm server has them.
		if rec := serveVerify(h, body); rec.Code != http.StatusOK {
			b.Fatalf("POST /verify: %d %s", rec.Code, rec.Body)
		}
		// Start every case from a collected heap, so one case's garbage
		// is not billed to the next.
		runtime.GC()
		b.ReportAllocs()
		for b.Loop() {
			if rec := serveVerify(h, body); rec.Code != http.StatusOK {
				b.Fatalf("POST /verify: %d", rec.Code)
			}
		}
	}
	b.Run("peer/plain-mux", func(b *testing.B) {
		testenv.ClearTelemetry(b)
		telemetry.ResetForTesting()
		run(b, plainVerifyMux())
	})
	b.Run("peer/otelhttp", func(b *testing.B) {
		testenv.ClearTelemetry(b)
		telemetry.ResetForTesting()
		run(b, otelhttpVerifyHandler(b, discardSpans{}, false, sdkmetric.NewManualReader()))
	})
	for _, mode := range []string{oursUninstrumented, oursOff, oursMetricsOnly, oursDefault, oursAll} {
		b.Run("ours/"+mode, func(b *testing.B) {
			quietLogs(b)
			run(b, oursVerifyHandler(b, mode, nil, nil))
			// A starved export goroutine makes the span queue overflow, and
			// a dropped span is cheaper than a queued one: say so.
			if h := telemetry.Get(); h.TracesExporting() {
				b.ReportMetric(float64(h.DroppedSpans())/float64(b.N), "dropped-spans/op")
			}
		})
	}
}

// quietLogs discards slog output until tb ends. On a busy machine the span
// batcher warns about drops, and its lines would split the benchmark's
// result lines; the drops are reported as a metric instead.
func quietLogs(tb testing.TB) {
	prev, out, flags := slog.Default(), log.Writer(), log.Flags()
	slog.SetDefault(slog.New(slog.DiscardHandler))
	tb.Cleanup(func() {
		slog.SetDefault(prev)
		// Restoring the standard handler leaves package log writing to
		// the discarded one: point it back where it wrote.
		log.SetOutput(out)
		log.SetFlags(flags)
	})
}

// TestVerifyTelemetryMatchesOtelhttp checks that what the benchmark's
// default-preset case exports is the semantic-convention data stock otelhttp
// exports for the same request: a SERVER span "POST /verify" continuing the
// caller's W3C trace, and an http.server.request.duration point with the
// same route, method and status values.
func TestVerifyTelemetryMatchesOtelhttp(t *testing.T) {
	body := []byte(verifyBenchBody)
	keys := []attribute.Key{"http.route", "http.request.method", "http.response.status_code"}
	want := map[attribute.Key]attribute.Value{
		"http.route":                attribute.StringValue("/verify"),
		"http.request.method":       attribute.StringValue(http.MethodPost),
		"http.response.status_code": attribute.IntValue(http.StatusOK),
	}

	oursSpans := tracetest.NewInMemoryExporter()
	oursReader := sdkmetric.NewManualReader()
	ours := oursVerifyHandler(t, oursDefault, oursSpans, oursReader)
	if rec := serveVerify(ours, body); rec.Code != http.StatusOK {
		t.Fatalf("ours: POST /verify: %d %s", rec.Code, rec.Body)
	}
	if err := telemetry.Get().ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}

	peerSpans := tracetest.NewInMemoryExporter()
	peerReader := sdkmetric.NewManualReader()
	peer := otelhttpVerifyHandler(t, peerSpans, true, peerReader)
	if rec := serveVerify(peer, body); rec.Code != http.StatusOK {
		t.Fatalf("otelhttp: POST /verify: %d %s", rec.Code, rec.Body)
	}

	for _, side := range []struct {
		name   string
		spans  *tracetest.InMemoryExporter
		reader *sdkmetric.ManualReader
	}{{"ours", oursSpans, oursReader}, {"otelhttp", peerSpans, peerReader}} {
		t.Run(side.name, func(t *testing.T) {
			checkVerifyServerSpan(t, side.spans.GetSpans())
			point := verifyDurationPoint(t, side.reader, want)
			for _, k := range keys {
				got, _ := point.Attributes.Value(k)
				if got.Type() != want[k].Type() || got.Emit() != want[k].Emit() {
					t.Errorf("%s = %s %q, want %s %q", k, got.Type(), got.Emit(), want[k].Type(), want[k].Emit())
				}
			}
			if point.Count != 1 {
				t.Errorf("%s point counts %d requests, want 1", contract.HTTPServerRequestDuration, point.Count)
			}
		})
	}
}

// checkVerifyServerSpan wants exactly one SERVER span, named POST /verify,
// whose parent is the remote span of verifyBenchTraceparent.
func checkVerifyServerSpan(t *testing.T, spans tracetest.SpanStubs) {
	t.Helper()
	var found []tracetest.SpanStub
	for _, s := range spans {
		if s.SpanKind == trace.SpanKindServer {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d SERVER spans, want 1 (all spans: %d)", len(found), len(spans))
	}
	s := found[0]
	if s.Name != routeVerify {
		t.Errorf("SERVER span named %q, want %q", s.Name, routeVerify)
	}
	if got := s.Parent.SpanID().String(); got != verifyBenchParentSpan || !s.Parent.IsRemote() {
		t.Errorf("SERVER span parent %s (remote %v), want the traceparent's %s", got, s.Parent.IsRemote(), verifyBenchParentSpan)
	}
	if got := s.SpanContext.TraceID().String(); got != verifyBenchTraceID {
		t.Errorf("SERVER span in trace %s, want the caller's %s", got, verifyBenchTraceID)
	}
}

// verifyDurationPoint collects reader and returns the
// http.server.request.duration point whose route, method and status are the
// wanted ones.
func verifyDurationPoint(t *testing.T, reader *sdkmetric.ManualReader, want map[attribute.Key]attribute.Value) metricdata.HistogramDataPoint[float64] {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != contract.HTTPServerRequestDuration {
				continue
			}
			if m.Unit != "s" {
				t.Errorf("%s unit %q, want s", m.Name, m.Unit)
			}
			hist, ok := m.Data.(metricdata.Histogram[float64])
			if !ok {
				t.Fatalf("%s is a %T, want a float64 histogram", m.Name, m.Data)
			}
		points:
			for _, p := range hist.DataPoints {
				seen = append(seen, p.Attributes.Encoded(attribute.DefaultEncoder()))
				for k, v := range want {
					if got, ok := p.Attributes.Value(k); !ok || got.Emit() != v.Emit() {
						continue points
					}
				}
				return p
			}
		}
	}
	t.Fatalf("no %s point with route, method and status %v; points: %q", contract.HTTPServerRequestDuration, want, seen)
	return metricdata.HistogramDataPoint[float64]{}
}

// BenchmarkHTTPServerSemconv is the per-request cost of the HTTP server
// metrics under each OTEL_SEMCONV_STABILITY_OPT_IN value, metrics only (no
// traces), GET /ping answered 204 in process: "bare" is the server built
// uninstrumented, "http" the new-only default (http.server.request.duration
// and http.server.active_requests), "http-dup" (the value http/dup) adds
// http.server.duration with the old attributes, and "database" (no http
// item) has the old conventions only. The request carries a connection's
// local address, so the old conventions' origin lookup runs as it does on
// a real server.
//
// Each case after "http" reports x-http, its ns/op divided by the http
// case's from the same run, and added-x-http, (ns/op - bare) divided by
// (http - bare): what the instrumentation costs relative to the new-only
// middleware.
//
//	go test -run '^$' -bench BenchmarkHTTPServerSemconv -benchmem -count 1 ./server/
//
// Use -count 1 and repeat the command (or the binary from go test -c): with
// -count n, go test runs every repetition of one case before the next case,
// so each ratio would compare against the last http repetition only.
func BenchmarkHTTPServerSemconv(b *testing.B) {
	var bareNS, httpNS float64
	run := func(b *testing.B, h http.Handler, r *http.Request) float64 {
		w := &discardWriter{h: http.Header{}}
		h.ServeHTTP(w, r) // fills the per-route caches, as on a warm server
		runtime.GC()
		b.ReportAllocs()
		for b.Loop() {
			h.ServeHTTP(w, r)
		}
		return float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	}
	b.Run("bare", func(b *testing.B) {
		testenv.ClearTelemetry(b)
		telemetry.ResetForTesting()
		h, r := pingHandler(b, true)
		bareNS = run(b, h, r)
	})
	for _, mode := range semconvModes {
		// "http/dup" would name two levels of sub-benchmark.
		b.Run(strings.ReplaceAll(mode, "/", "-"), func(b *testing.B) {
			enableMetrics(b, &mode)
			h, r := pingHandler(b, false)
			ns := run(b, h, r)
			if mode == "http" {
				httpNS = ns
				return
			}
			if httpNS > 0 {
				b.ReportMetric(ns/httpNS, "x-http")
				if httpNS > bareNS {
					b.ReportMetric((ns-bareNS)/(httpNS-bareNS), "added-x-http")
				}
			}
		})
	}
}
