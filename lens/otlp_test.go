package lens_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/internal/servertest"
	"github.com/gymlens/gymlens/lens"
)

// otlpReceiver is the peer of the OTLP exporters in these tests: a minimal
// collector that keeps every trace and metrics export request it is sent.
type otlpReceiver struct {
	mu      sync.Mutex
	traces  []*coltracepb.ExportTraceServiceRequest
	metrics []*colmetricpb.ExportMetricsServiceRequest
	// Seen on the HTTP transport only: request headers of every export.
	contentTypes     []string
	contentEncodings []string
}

func (r *otlpReceiver) addTraces(req *coltracepb.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.traces = append(r.traces, proto.Clone(req).(*coltracepb.ExportTraceServiceRequest))
}

func (r *otlpReceiver) addMetrics(req *colmetricpb.ExportMetricsServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.metrics = append(r.metrics, proto.Clone(req).(*colmetricpb.ExportMetricsServiceRequest))
}

func (r *otlpReceiver) traceRequests() []*coltracepb.ExportTraceServiceRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*coltracepb.ExportTraceServiceRequest(nil), r.traces...)
}

func (r *otlpReceiver) metricRequests() []*colmetricpb.ExportMetricsServiceRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*colmetricpb.ExportMetricsServiceRequest(nil), r.metrics...)
}

func (r *otlpReceiver) headers() (contentTypes, contentEncodings []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.contentTypes...), append([]string(nil), r.contentEncodings...)
}

type grpcTraceService struct {
	coltracepb.UnimplementedTraceServiceServer
	r *otlpReceiver
}

func (s grpcTraceService) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	s.r.addTraces(req)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

type grpcMetricsService struct {
	colmetricpb.UnimplementedMetricsServiceServer
	r *otlpReceiver
}

func (s grpcMetricsService) Export(_ context.Context, req *colmetricpb.ExportMetricsServiceRequest) (*colmetricpb.ExportMetricsServiceResponse, error) {
	s.r.addMetrics(req)
	return &colmetricpb.ExportMetricsServiceResponse{}, nil
}

// startGRPCReceiver serves the OTLP trace and metrics services on a loopback
// port and returns the receiver and its endpoint URL. The server is stopped,
// and its Serve goroutine awaited, when the test ends.
func startGRPCReceiver(t *testing.T) (*otlpReceiver, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &otlpReceiver{}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, grpcTraceService{r: r})
	colmetricpb.RegisterMetricsServiceServer(srv, grpcMetricsService{r: r})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return r, "http://" + ln.Addr().String()
}

// startHTTPReceiver serves OTLP/HTTP (binary protobuf) on a loopback port:
// POST /v1/traces and /v1/metrics. It is closed when the test ends.
func startHTTPReceiver(t *testing.T) (*otlpReceiver, string) {
	t.Helper()
	r := &otlpReceiver{}
	// readBody records the headers and returns the decompressed body.
	readBody := func(w http.ResponseWriter, req *http.Request) ([]byte, bool) {
		r.mu.Lock()
		r.contentTypes = append(r.contentTypes, req.Header.Get("Content-Type"))
		r.contentEncodings = append(r.contentEncodings, req.Header.Get("Content-Encoding"))
		r.mu.Unlock()
		var body io.Reader = req.Body
		switch enc := strings.ToLower(req.Header.Get("Content-Encoding")); enc {
		case "", "identity":
		case "gzip":
			zr, err := gzip.NewReader(req.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return nil, false
			}
			defer zr.Close()
			body = zr
		default:
			http.Error(w, "unsupported Content-Encoding "+enc, http.StatusUnsupportedMediaType)
			return nil, false
		}
		b, err := io.ReadAll(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return nil, false
		}
		return b, true
	}
	respond := func(w http.ResponseWriter, resp proto.Message) {
		b, err := proto.Marshal(resp)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(b)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, req *http.Request) {
		b, ok := readBody(w, req)
		if !ok {
			return
		}
		var msg coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &msg); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.addTraces(&msg)
		respond(w, &coltracepb.ExportTraceServiceResponse{})
	})
	mux.HandleFunc("POST /v1/metrics", func(w http.ResponseWriter, req *http.Request) {
		b, ok := readBody(w, req)
		if !ok {
			return
		}
		var msg colmetricpb.ExportMetricsServiceRequest
		if err := proto.Unmarshal(b, &msg); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.addMetrics(&msg)
		respond(w, &colmetricpb.ExportMetricsServiceResponse{})
	})
	return r, servertest.ServeHandler(t, mux)
}

// clearOTLPEnv hides OTLP and resource variables the surrounding environment
// may carry, so the exporters see only what the test sets. The exporters
// treat an empty value as unset.
func clearOTLPEnv(t *testing.T) {
	t.Helper()
	for _, name := range []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
		"OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", "OTEL_EXPORTER_OTLP_INSECURE", "OTEL_EXPORTER_OTLP_TRACES_INSECURE",
		"OTEL_EXPORTER_OTLP_METRICS_INSECURE", "OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
		"OTEL_EXPORTER_OTLP_METRICS_HEADERS", "OTEL_EXPORTER_OTLP_COMPRESSION", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
		"OTEL_EXPORTER_OTLP_METRICS_COMPRESSION", "OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
		"OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE",
		"OTEL_METRIC_EXPORT_INTERVAL", "OTEL_METRIC_EXPORT_TIMEOUT", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_SERVICE_NAME",
		"OTEL_BSP_SCHEDULE_DELAY", "OTEL_BSP_EXPORT_TIMEOUT",
	} {
		t.Setenv(name, "")
	}
}

// setupOTLP points the real OTLP exporters at endpoint (through the
// environment, which they read themselves) and runs lens.Setup with
// EXPORTER=otlp. extra holds further OTEL_* variables: they are set in the
// process environment and also given to the configuration loader. The
// receiver must already be running, so that its cleanup (registered
// earlier) runs after the telemetry reset registered here.
func setupOTLP(t *testing.T, endpoint string, extra map[string]string) *lens.Handle {
	t.Helper()
	clearOTLPEnv(t)
	isolateTelemetry(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
	t.Setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
	vars := enabledVars(map[string]string{
		"NEMO_GYM_OTEL_EXPORTER":      "otlp",
		"NEMO_GYM_OTEL_SPAN_GROUPS":   "job",
		"NEMO_GYM_OTEL_LOGS_ENABLED":  "false",
		"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
	})
	for k, v := range extra {
		t.Setenv(k, v)
		vars[k] = v
	}
	cfg := mustLoad(t, vars)
	if !cfg.HasExporter(lens.ExporterOTLP) {
		t.Fatalf("exporters %v, want otlp", cfg.Exporters)
	}
	h, err := lens.Setup(context.Background(), cfg, lens.Options{
		ServiceName: "otlp-test",
		Logger:      slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatalf("Setup: %v", err)
	}
	if !h.IsExporting() || !h.TracesExporting() || !h.MetricsExporting() {
		t.Fatalf("exporting=%v traces=%v metrics=%v", h.IsExporting(), h.TracesExporting(), h.MetricsExporting())
	}
	if !lens.Enabled(lens.GroupJob) {
		t.Fatal("job group is off")
	}
	return h
}

const (
	otlpSpanName    = "otlp.span"
	otlpCounterName = "lens_test.otlp.items"
)

// emit records one span in the job group and adds value to the test counter.
func emit(t *testing.T, h *lens.Handle, value int64) (traceID [16]byte) {
	t.Helper()
	ctx, span := lens.Start(context.Background(), lens.GroupJob, otlpSpanName)
	if !span.IsRecording() {
		t.Fatal("lens.Start did not record")
	}
	counter, err := h.Meter().Int64Counter(otlpCounterName)
	if err != nil {
		t.Fatal(err)
	}
	counter.Add(ctx, value)
	span.End()
	return span.SpanContext().TraceID()
}

func serviceName(res *resourcepb.Resource) string {
	for _, kv := range res.GetAttributes() {
		if kv.GetKey() == "service.name" {
			return kv.GetValue().GetStringValue()
		}
	}
	return ""
}

// findSpan returns the exported span named name with its resource and scope.
func findSpan(reqs []*coltracepb.ExportTraceServiceRequest, name string) (*tracepb.Span, *resourcepb.Resource, *commonpb.InstrumentationScope) {
	for _, req := range reqs {
		for _, rs := range req.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					if s.GetName() == name {
						return s, rs.GetResource(), ss.GetScope()
					}
				}
			}
		}
	}
	return nil, nil, nil
}

// findMetric returns the last export of the metric named name with its
// resource and scope.
func findMetric(reqs []*colmetricpb.ExportMetricsServiceRequest, name string) (*metricpb.Metric, *resourcepb.Resource, *commonpb.InstrumentationScope) {
	for i := len(reqs) - 1; i >= 0; i-- {
		for _, rm := range reqs[i].GetResourceMetrics() {
			for _, sm := range rm.GetScopeMetrics() {
				for _, m := range sm.GetMetrics() {
					if m.GetName() == name {
						return m, rm.GetResource(), sm.GetScope()
					}
				}
			}
		}
	}
	return nil, nil, nil
}

// checkExported asserts that r received the span (with traceID) and the
// counter (with value), both under the service name "otlp-test".
func checkExported(t *testing.T, r *otlpReceiver, traceID [16]byte, value int64) {
	t.Helper()
	span, res, scope := findSpan(r.traceRequests(), otlpSpanName)
	if span == nil {
		t.Errorf("receiver got no span %q (%d trace requests)", otlpSpanName, len(r.traceRequests()))
	} else {
		if got := span.GetTraceId(); len(got) != 16 || !bytes.Equal(got, traceID[:]) {
			t.Errorf("span trace id %x, want the 16 bytes %x", got, traceID)
		}
		if len(span.GetSpanId()) != 8 {
			t.Errorf("span id %x is not 8 bytes", span.GetSpanId())
		}
		if span.GetEndTimeUnixNano() < span.GetStartTimeUnixNano() || span.GetStartTimeUnixNano() == 0 {
			t.Errorf("span times %d..%d", span.GetStartTimeUnixNano(), span.GetEndTimeUnixNano())
		}
		if got := serviceName(res); got != "otlp-test" {
			t.Errorf("span resource service.name = %q, want otlp-test", got)
		}
		if scope.GetName() != contract.TracerScope {
			t.Errorf("span scope %q, want %q", scope.GetName(), contract.TracerScope)
		}
	}

	m, res, scope := findMetric(r.metricRequests(), otlpCounterName)
	if m == nil {
		t.Errorf("receiver got no metric %q (%d metrics requests)", otlpCounterName, len(r.metricRequests()))
		return
	}
	sum := m.GetSum()
	if sum == nil || !sum.GetIsMonotonic() || len(sum.GetDataPoints()) != 1 {
		t.Fatalf("metric %s = %v, want a monotonic sum with one point", otlpCounterName, m)
	}
	if got := sum.GetDataPoints()[0].GetAsInt(); got != value {
		t.Errorf("counter value %d, want %d", got, value)
	}
	if got := serviceName(res); got != "otlp-test" {
		t.Errorf("metric resource service.name = %q, want otlp-test", got)
	}
	if scope.GetName() != contract.MeterScope {
		t.Errorf("metric scope %q, want %q", scope.GetName(), contract.MeterScope)
	}
}

func shutdownWithin(t *testing.T, h *lens.Handle, d time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return h.Shutdown(ctx)
}

func TestOTLPExportGRPC(t *testing.T) {
	r, endpoint := startGRPCReceiver(t)
	h := setupOTLP(t, endpoint, nil) // protocol: the default, grpc
	if p := h.Config().OTLPProtocol; p != lens.ProtocolGRPC {
		t.Fatalf("protocol %q, want the grpc default", p)
	}
	traceID := emit(t, h, 7)
	// Nothing has been exported yet: the batch processor and the 10 s
	// metric interval hold everything until the flush in Shutdown.
	if err := shutdownWithin(t, h, 10*time.Second); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	checkExported(t, r, traceID, 7)
}

func TestOTLPExportHTTPProtobuf(t *testing.T) {
	for _, compression := range []string{"none", "gzip"} {
		t.Run(compression, func(t *testing.T) {
			r, endpoint := startHTTPReceiver(t)
			h := setupOTLP(t, endpoint, map[string]string{
				"OTEL_EXPORTER_OTLP_PROTOCOL":    lens.ProtocolHTTPProtobuf,
				"OTEL_EXPORTER_OTLP_COMPRESSION": compression,
			})
			if p := h.Config().OTLPProtocol; p != lens.ProtocolHTTPProtobuf {
				t.Fatalf("protocol %q, want http/protobuf", p)
			}
			traceID := emit(t, h, 11)
			if err := shutdownWithin(t, h, 10*time.Second); err != nil {
				t.Fatalf("Shutdown: %v", err)
			}
			checkExported(t, r, traceID, 11)

			types, encodings := r.headers()
			if len(types) == 0 {
				t.Fatal("no HTTP export reached the receiver")
			}
			wantEnc := ""
			if compression == "gzip" {
				wantEnc = "gzip"
			}
			for i := range types {
				if types[i] != "application/x-protobuf" {
					t.Errorf("request %d Content-Type %q, want application/x-protobuf", i, types[i])
				}
				if encodings[i] != wantEnc {
					t.Errorf("request %d Content-Encoding %q, want %q", i, encodings[i], wantEnc)
				}
			}
		})
	}
}

func TestOTLPMetricExportIntervalHonoured(t *testing.T) {
	r, endpoint := startGRPCReceiver(t)
	h := setupOTLP(t, endpoint, map[string]string{"OTEL_METRIC_EXPORT_INTERVAL": "100"})
	if got := h.Config().MetricExportInterval; got != 100*time.Millisecond {
		t.Fatalf("MetricExportInterval = %v, want 100ms", got)
	}
	emit(t, h, 3)
	// No Shutdown, no ForceFlush: only the periodic reader can deliver.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if m, _, _ := findMetric(r.metricRequests(), otlpCounterName); m != nil {
			if got := m.GetSum().GetDataPoints(); len(got) != 1 || got[0].GetAsInt() != 3 {
				t.Errorf("periodic export of %s = %v, want one point of 3", otlpCounterName, m)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no periodic metrics export within 10 s at a 100 ms interval (%d metrics requests)", len(r.metricRequests()))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !h.IsExporting() || lens.Current() != h {
		t.Error("the handle was shut down while polling")
	}
	// The telemetry reset registered by setupOTLP shuts the handle down
	// before the receiver stops.
}

func TestOTLPEndpointDown(t *testing.T) {
	for _, protocol := range []string{lens.ProtocolGRPC, lens.ProtocolHTTPProtobuf} {
		t.Run(strings.ReplaceAll(protocol, "/", "_"), func(t *testing.T) {
			// A loopback port that was just closed: connections are refused.
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			endpoint := "http://" + ln.Addr().String()
			if err := ln.Close(); err != nil {
				t.Fatal(err)
			}

			var h *lens.Handle
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Fatalf("panic with the endpoint down: %v", p)
					}
				}()
				// Setup succeeds: the exporters connect lazily.
				h = setupOTLP(t, endpoint, map[string]string{
					"OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
					// Longer than the Shutdown bound, so the context
					// expires while the final span export is still
					// retrying, but short enough that the export the
					// processor abandons in the background (see
					// TestOTLPShutdownAbortsAbandonedExport) ends soon.
					"OTEL_BSP_EXPORT_TIMEOUT": "4000",
				})
				for i := range 5 {
					emit(t, h, int64(i+1))
				}
			}()

			const bound = 3 * time.Second
			start := time.Now()
			done := make(chan error, 1)
			go func() {
				defer func() {
					if p := recover(); p != nil {
						done <- fmt.Errorf("Shutdown panicked: %v", p)
					}
				}()
				done <- shutdownWithin(t, h, bound)
			}()
			var first error
			select {
			case first = <-done:
				elapsed := time.Since(start)
				t.Logf("Shutdown with the endpoint down returned after %v: %v", elapsed.Round(time.Millisecond), first)
				if first != nil && strings.Contains(first.Error(), "panicked") {
					t.Fatal(first)
				}
				// Allow slack over the context for the final attempt to
				// notice the deadline and for connections to close.
				if elapsed > bound+2*time.Second {
					t.Errorf("Shutdown took %v with a %v context", elapsed, bound)
				}
			case <-time.After(bound + 10*time.Second):
				t.Fatalf("Shutdown with a %v context still running after %v", bound, bound+10*time.Second)
			}
			if lens.Current() != nil || lens.Enabled(lens.GroupJob) {
				t.Error("state still live after Shutdown")
			}
			// Shutdown is idempotent: a second call returns the first result
			// at once instead of retrying the dead endpoint.
			if second := h.Shutdown(context.Background()); !errors.Is(second, first) && second != first {
				t.Errorf("second Shutdown = %v, want %v", second, first)
			}
			// Whatever Shutdown left running in the background ends by
			// itself once OTEL_BSP_EXPORT_TIMEOUT expires.
			waitExportGoroutinesGone(t, start, 10*time.Second)
		})
	}
}

// exportGoroutines returns the stacks of the goroutines that belong to an
// OTLP exporter, a gRPC connection or a batch span processor.
func exportGoroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, "go.opentelemetry.io/otel/exporters/otlp/") ||
			strings.Contains(g, "go.opentelemetry.io/otel/sdk/trace.(*batchSpanProcessor)") ||
			strings.Contains(g, "google.golang.org/grpc.") ||
			strings.Contains(g, "google.golang.org/grpc/internal/") {
			out = append(out, g)
		}
	}
	return out
}

// waitExportGoroutinesGone waits up to limit for every exporter goroutine
// to end, logging how long after since they were last seen, and fails with
// their stacks otherwise.
func waitExportGoroutinesGone(t *testing.T, since time.Time, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		gs := exportGoroutines()
		if len(gs) == 0 {
			t.Logf("exporter goroutines gone %v after Shutdown began", time.Since(since).Round(time.Millisecond))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d exporter goroutines still running %v after Shutdown began:\n%s",
				len(gs), time.Since(since).Round(time.Millisecond), strings.Join(gs, "\n\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestOTLPShutdownAbortsAbandonedExport: when the Shutdown context expires
// while the batch span processor is still exporting its final batch to an
// unreachable gRPC collector, the SDK alone would keep retrying in the
// background for up to OTEL_BSP_EXPORT_TIMEOUT (30 s by default), holding
// the connection open. lens.Handle.Shutdown aborts that export when its
// context ends, so nothing outlives it.
func TestOTLPShutdownAbortsAbandonedExport(t *testing.T) {
	endpoint := "http://" + servertest.FreeAddr(t)
	h := setupOTLP(t, endpoint, nil) // grpc, default OTEL_BSP_EXPORT_TIMEOUT
	emit(t, h, 1)
	start := time.Now()
	err := shutdownWithin(t, h, 500*time.Millisecond)
	t.Logf("Shutdown returned after %v: %v", time.Since(start).Round(time.Millisecond), err)
	waitExportGoroutinesGone(t, start, 3*time.Second)
}

// When a span exporter after the OTLP one cannot be built (here the file
// exporter without its path), Setup fails and the OTLP client it had
// already started is stopped: TestMain's leak check would see its
// connection's goroutines otherwise.
func TestSetupStopsTheOTLPClientWhenALaterExporterFails(t *testing.T) {
	clearOTLPEnv(t)
	isolateTelemetry(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
	cfg := mustLoad(t, enabledVars(map[string]string{
		"NEMO_GYM_OTEL_EXPORTER":      "otlp,file",
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1",
	}))
	h, err := lens.Setup(context.Background(), cfg, lens.Options{ServiceName: "leak-test",
		Logger: slog.New(slog.DiscardHandler)})
	if err == nil {
		_ = h.Shutdown(context.Background())
		t.Fatal("Setup with the file exporter but no file path succeeded")
	}
	if !strings.Contains(err.Error(), "file exporter") {
		t.Errorf("error %v, want it to name the file exporter", err)
	}
}
