package lens_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/internal/servertest"
	"github.com/gymlens/gymlens/lens"
)

// jsonExport is one request an OTLP receiver got: its path and headers,
// the id fields as sent, and the message decoded from either encoding.
type jsonExport struct {
	path, contentType, contentEncoding string
	ids                                map[string][]string // JSON key -> values as sent
	msg                                proto.Message
}

// jsonReceiver is a loopback OTLP/HTTP collector that takes both the JSON
// and the protobuf encoding on /v1/traces, /v1/metrics and /v1/logs, and
// answers JSON with JSON. metricsReply, when set, is its JSON answer to a
// metrics export.
type jsonReceiver struct {
	mu           sync.Mutex
	got          []jsonExport
	metricsReply string
}

// hexID is how OTLP/JSON spells ids: hex, in either case (the trace
// exporter writes upper case, lens's JSON transport lower case).
var hexID = regexp.MustCompile(`^[0-9a-fA-F]+$`)

// decodeOTLPJSON reads an OTLP/JSON body the way a collector does: hex
// trace and span ids, everything else protobuf's JSON mapping.
func decodeOTLPJSON(body []byte, msg proto.Message, ids map[string][]string) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return err
	}
	var walk func(any) error
	walk = func(x any) error {
		switch v := x.(type) {
		case map[string]any:
			for k, y := range v {
				if s, ok := y.(string); ok && (k == "traceId" || k == "spanId" || k == "parentSpanId") {
					ids[k] = append(ids[k], s)
					raw, err := hex.DecodeString(s)
					if err != nil {
						return err
					}
					v[k] = base64.StdEncoding.EncodeToString(raw)
					continue
				}
				if err := walk(y); err != nil {
					return err
				}
			}
		case []any:
			for _, y := range v {
				if err := walk(y); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(doc); err != nil {
		return err
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	return protojson.Unmarshal(b, msg)
}

func startJSONReceiver(t *testing.T, metricsReply string) (*jsonReceiver, string) {
	t.Helper()
	r := &jsonReceiver{metricsReply: metricsReply}
	return r, servertest.ServeHandler(t, r.handler())
}

// startJSONTLSReceiver is startJSONReceiver over HTTPS; it also returns a
// PEM file holding the server's certificate.
func startJSONTLSReceiver(t *testing.T) (*jsonReceiver, string, string) {
	t.Helper()
	r := &jsonReceiver{}
	srv := httptest.NewTLSServer(r.handler())
	t.Cleanup(srv.Close)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	block := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(caFile, block, 0o600); err != nil {
		t.Fatal(err)
	}
	return r, srv.URL, caFile
}

func (r *jsonReceiver) handler() http.Handler {
	handle := func(newMsg func() proto.Message, reply func() string) http.HandlerFunc {
		return func(w http.ResponseWriter, req *http.Request) {
			var body io.Reader = req.Body
			if strings.EqualFold(req.Header.Get("Content-Encoding"), "gzip") {
				zr, err := gzip.NewReader(req.Body)
				if err != nil {
					http.Error(w, err.Error(), http.StatusBadRequest)
					return
				}
				defer zr.Close()
				body = zr
			}
			b, err := io.ReadAll(body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			e := jsonExport{path: req.URL.Path, contentType: req.Header.Get("Content-Type"),
				contentEncoding: req.Header.Get("Content-Encoding"), ids: map[string][]string{}, msg: newMsg()}
			isJSON := e.contentType == "application/json"
			if isJSON {
				err = decodeOTLPJSON(b, e.msg, e.ids)
			} else {
				err = proto.Unmarshal(b, e.msg)
			}
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			r.mu.Lock()
			r.got = append(r.got, e)
			r.mu.Unlock()
			if isJSON {
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, reply())
				return
			}
			w.Header().Set("Content-Type", "application/x-protobuf")
		}
	}
	empty := func() string { return "{}" }
	mux := http.NewServeMux()
	mux.Handle("POST /v1/traces", handle(func() proto.Message { return new(coltracepb.ExportTraceServiceRequest) }, empty))
	mux.Handle("POST /v1/metrics", handle(func() proto.Message { return new(colmetricpb.ExportMetricsServiceRequest) },
		func() string {
			if r.metricsReply != "" {
				return r.metricsReply
			}
			return "{}"
		}))
	mux.Handle("POST /v1/logs", handle(func() proto.Message { return new(collogspb.ExportLogsServiceRequest) }, empty))
	return mux
}

func (r *jsonReceiver) exports(path string) []jsonExport {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []jsonExport
	for _, e := range r.got {
		if e.path == path {
			out = append(out, e)
		}
	}
	return out
}

// jsonRun is what one traced piece of work left behind: a span with a
// link, a counter point recorded inside it (an exemplar) and a log record
// written inside it.
type jsonRun struct {
	span, linked trace.SpanContext
}

const (
	jsonSpanName = "json.span"
	jsonCounter  = "lens_test.json.items"
	jsonLogLine  = "json export probe"
)

// setupJSON runs Setup exporting all three signals over OTLP to endpoint,
// with the extra (protocol) variables, and records one jsonRun.
func setupJSON(t *testing.T, endpoint string, extra map[string]string) (*lens.Handle, jsonRun) {
	t.Helper()
	// The log bridge fans out to the default handler: keep the probe
	// line out of the test output. Registered first, restored last.
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.DiscardHandler))
	t.Cleanup(func() { slog.SetDefault(prev) })
	clearOTLPEnv(t)
	isolateTelemetry(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
	for _, n := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL",
		"OTEL_EXPORTER_OTLP_LOGS_PROTOCOL", "OTEL_EXPORTER_OTLP_LOGS_COMPRESSION", "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"} {
		t.Setenv(n, "")
	}
	vars := enabledVars(map[string]string{
		"NEMO_GYM_OTEL_EXPORTER":     "otlp",
		"NEMO_GYM_OTEL_SPAN_GROUPS":  "job",
		"NEMO_GYM_OTEL_LOGS_ENABLED": "true",
	})
	for k, v := range extra {
		t.Setenv(k, v)
		vars[k] = v
	}
	h, err := lens.Setup(context.Background(), mustLoad(t, vars), lens.Options{
		ServiceName: "json-test",
		Logger:      slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatalf("Setup: %v", err)
	}
	if !h.TracesExporting() || !h.MetricsExporting() {
		t.Fatalf("traces=%v metrics=%v", h.TracesExporting(), h.MetricsExporting())
	}
	_, other := lens.Start(context.Background(), lens.GroupJob, "json.linked")
	other.End()
	ctx, span := lens.Start(context.Background(), lens.GroupJob, jsonSpanName,
		trace.WithLinks(trace.Link{SpanContext: other.SpanContext()}))
	counter, err := h.Meter().Int64Counter(jsonCounter)
	if err != nil {
		t.Fatal(err)
	}
	counter.Add(ctx, 5)
	slog.InfoContext(ctx, jsonLogLine)
	span.End()
	return h, jsonRun{span: span.SpanContext(), linked: other.SpanContext()}
}

func wantHexIDs(t *testing.T, e jsonExport, key string, want ...string) {
	t.Helper()
	for _, w := range want {
		found := false
		for _, got := range e.ids[key] {
			if !hexID.MatchString(got) {
				t.Errorf("%s %s %q is not hex", e.path, key, got)
			}
			found = found || strings.EqualFold(got, w)
		}
		if !found {
			t.Errorf("%s: no %s %s among %v", e.path, key, w, e.ids[key])
		}
	}
}

// checkJSONTraces: the span and its link arrive with hex ids equal to the
// span's, under the tracer scope.
func checkJSONTraces(t *testing.T, r *jsonReceiver, run jsonRun) {
	t.Helper()
	exps := r.exports("/v1/traces")
	if len(exps) == 0 {
		t.Fatal("no trace export")
	}
	var reqs []*coltracepb.ExportTraceServiceRequest
	for _, e := range exps {
		if e.contentType != "application/json" {
			t.Errorf("trace export Content-Type %q, want application/json", e.contentType)
		}
		wantHexIDs(t, e, "traceId", run.span.TraceID().String())
		reqs = append(reqs, e.msg.(*coltracepb.ExportTraceServiceRequest))
	}
	span, res, scope := findSpan(reqs, jsonSpanName)
	if span == nil {
		t.Fatalf("no span %q", jsonSpanName)
	}
	if id := run.span.SpanID(); !bytes.Equal(span.GetSpanId(), id[:]) {
		t.Errorf("span id %x, want %s", span.GetSpanId(), id)
	}
	if id := run.span.TraceID(); !bytes.Equal(span.GetTraceId(), id[:]) {
		t.Errorf("trace id %x, want %s", span.GetTraceId(), id)
	}
	if len(span.GetLinks()) != 1 || !bytes.Equal(span.GetLinks()[0].GetSpanId(), func() []byte { id := run.linked.SpanID(); return id[:] }()) {
		t.Errorf("links %v, want one to %s", span.GetLinks(), run.linked.SpanID())
	}
	wantHexIDs(t, exps[0], "spanId", run.span.SpanID().String(), run.linked.SpanID().String())
	if scope.GetName() != contract.TracerScope || serviceName(res) != "json-test" {
		t.Errorf("span scope %q service %q", scope.GetName(), serviceName(res))
	}
}

// checkJSONMetrics: the counter arrives under the meter scope, with an
// exemplar whose hex ids are the span's.
func checkJSONMetrics(t *testing.T, r *jsonReceiver, run jsonRun, wantType string) {
	t.Helper()
	exps := r.exports("/v1/metrics")
	if len(exps) == 0 {
		t.Fatal("no metrics export")
	}
	var reqs []*colmetricpb.ExportMetricsServiceRequest
	for _, e := range exps {
		if e.contentType != wantType {
			t.Errorf("metrics export Content-Type %q, want %s", e.contentType, wantType)
		}
		reqs = append(reqs, e.msg.(*colmetricpb.ExportMetricsServiceRequest))
	}
	m, res, scope := findMetric(reqs, jsonCounter)
	if m == nil {
		t.Fatalf("no metric %q", jsonCounter)
	}
	if scope.GetName() != contract.MeterScope || serviceName(res) != "json-test" {
		t.Errorf("metric scope %q service %q", scope.GetName(), serviceName(res))
	}
	pts := m.GetSum().GetDataPoints()
	if len(pts) != 1 || pts[0].GetAsInt() != 5 {
		t.Fatalf("points %v, want one of 5", pts)
	}
	ex := pts[0].GetExemplars()
	if len(ex) == 0 {
		t.Fatal("the point has no exemplar")
	}
	tid, sid := run.span.TraceID(), run.span.SpanID()
	if !bytes.Equal(ex[0].GetTraceId(), tid[:]) || !bytes.Equal(ex[0].GetSpanId(), sid[:]) {
		t.Errorf("exemplar ids %x/%x, want %s/%s", ex[0].GetTraceId(), ex[0].GetSpanId(), tid, sid)
	}
	if wantType == "application/json" {
		wantHexIDs(t, exps[len(exps)-1], "traceId", tid.String())
		wantHexIDs(t, exps[len(exps)-1], "spanId", sid.String())
	}
}

// checkJSONLogs: the log record arrives with the span's hex ids.
func checkJSONLogs(t *testing.T, r *jsonReceiver, run jsonRun) {
	t.Helper()
	exps := r.exports("/v1/logs")
	if len(exps) == 0 {
		t.Fatal("no logs export")
	}
	tid, sid := run.span.TraceID(), run.span.SpanID()
	found := false
	for _, e := range exps {
		if e.contentType != "application/json" {
			t.Errorf("logs export Content-Type %q, want application/json", e.contentType)
		}
		for _, rl := range e.msg.(*collogspb.ExportLogsServiceRequest).GetResourceLogs() {
			for _, sl := range rl.GetScopeLogs() {
				for _, lr := range sl.GetLogRecords() {
					if lr.GetBody().GetStringValue() != jsonLogLine {
						continue
					}
					found = true
					if !bytes.Equal(lr.GetTraceId(), tid[:]) || !bytes.Equal(lr.GetSpanId(), sid[:]) {
						t.Errorf("log record ids %x/%x, want %s/%s", lr.GetTraceId(), lr.GetSpanId(), tid, sid)
					}
					if sl.GetScope().GetName() != contract.TracerScope {
						t.Errorf("log scope %q", sl.GetScope().GetName())
					}
					wantHexIDs(t, e, "traceId", tid.String())
					wantHexIDs(t, e, "spanId", sid.String())
				}
			}
		}
	}
	if !found {
		t.Errorf("no log record %q", jsonLogLine)
	}
}

func TestOTLPExportHTTPJSON(t *testing.T) {
	for _, c := range []struct {
		name string
		env  map[string]string
	}{
		{"general", map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}},
		{"gzip", map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json", "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip"}},
		{"per signal over grpc", map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
			"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "http/json",
			"OTEL_EXPORTER_OTLP_LOGS_PROTOCOL": "http/json"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, endpoint := startJSONReceiver(t, "")
			h, run := setupJSON(t, endpoint, c.env)
			if err := shutdownWithin(t, h, 10*time.Second); err != nil {
				t.Fatalf("Shutdown: %v", err)
			}
			checkJSONTraces(t, r, run)
			checkJSONMetrics(t, r, run, "application/json")
			checkJSONLogs(t, r, run)
			wantEnc := c.env["OTEL_EXPORTER_OTLP_COMPRESSION"]
			for _, p := range []string{"/v1/traces", "/v1/metrics", "/v1/logs"} {
				for _, e := range r.exports(p) {
					if e.contentEncoding != wantEnc {
						t.Errorf("%s Content-Encoding %q, want %q", p, e.contentEncoding, wantEnc)
					}
				}
			}
		})
	}
}

// A signal's own protocol wins over the general one: here metrics stay on
// protobuf while traces and logs speak JSON to the same collector.
func TestOTLPExportSignalProtocolOverridesGeneral(t *testing.T) {
	r, endpoint := startJSONReceiver(t, "")
	h, run := setupJSON(t, endpoint, map[string]string{
		"OTEL_EXPORTER_OTLP_PROTOCOL":         "http/json",
		"OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "http/protobuf",
	})
	if err := shutdownWithin(t, h, 10*time.Second); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	checkJSONTraces(t, r, run)
	checkJSONMetrics(t, r, run, "application/x-protobuf")
	checkJSONLogs(t, r, run)
}

// A collector's JSON partial-success answer reaches the metric exporter as
// the protobuf it parses: the rejected points surface as an export error.
func TestOTLPExportHTTPJSONPartialSuccess(t *testing.T) {
	r, endpoint := startJSONReceiver(t, `{"partialSuccess":{"rejectedDataPoints":"3","errorMessage":"too many labels"}}`)
	h, _ := setupJSON(t, endpoint, map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"})
	err := shutdownWithin(t, h, 10*time.Second)
	if err == nil || !strings.Contains(err.Error(), "too many labels") || !strings.Contains(err.Error(), "3") {
		t.Errorf("Shutdown = %v, want the partial success (3 points, too many labels)", err)
	}
	if len(r.exports("/v1/metrics")) == 0 {
		t.Error("no metrics export")
	}
}

// The http/json client replaces the exporters' own, so it must honour the
// OTLP certificate variables itself: a collector with a self-signed
// certificate is reached over HTTPS once OTEL_EXPORTER_OTLP_CERTIFICATE
// names it.
func TestOTLPExportHTTPJSONOverTLS(t *testing.T) {
	r, endpoint, caFile := startJSONTLSReceiver(t)
	h, run := setupJSON(t, endpoint, map[string]string{
		"OTEL_EXPORTER_OTLP_PROTOCOL":    "http/json",
		"OTEL_EXPORTER_OTLP_CERTIFICATE": caFile,
	})
	if err := shutdownWithin(t, h, 10*time.Second); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	checkJSONTraces(t, r, run)
	checkJSONMetrics(t, r, run, "application/json")
	checkJSONLogs(t, r, run)
}
