package lens_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/internal/servertest"
	"github.com/gymlens/gymlens/internal/testenv"
	"github.com/gymlens/gymlens/lens"
)

// Collector faults on loopback, each a real server: one that accepts
// connections and never answers, and OTLP/HTTP endpoints answering every
// export with 500 or 429. Every span the process ends and does not
// deliver must be counted, by cause, and written to its run-directory
// file at shutdown; a background flush must not wait on the collector.

// answering serves OTLP/HTTP answering every request with status; it
// counts the trace export requests.
func answering(t *testing.T, status int) (string, *atomic.Int64) {
	t.Helper()
	var traces atomic.Int64
	url := servertest.ServeHandler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/traces" {
			traces.Add(1)
		}
		if status == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "1")
		}
		http.Error(w, http.StatusText(status), status)
	}))
	return url, &traces
}

// endSpans ends n spans of the job group.
func endSpans(t *testing.T, n int, attrs ...attribute.KeyValue) {
	t.Helper()
	for range n {
		_, span := lens.Start(context.Background(), lens.GroupJob, otlpSpanName)
		if !span.IsRecording() {
			t.Fatal("lens.Start did not record")
		}
		span.SetAttributes(attrs...)
		span.End()
	}
}

// spanAccount reads the span accounting lines of a telemetry file: the
// value of every point of the two counters, keyed by metric name and
// error type ("" for success).
func spanAccount(t *testing.T, path string) map[string]int64 {
	t.Helper()
	return accountOf(t, path, contract.SDKSpanProcessed, contract.SDKSpanExported)
}

func TestCollectorFaultsCountEveryLostSpan(t *testing.T) {
	const spans = 40
	blackHole := func(t *testing.T) string {
		u, _ := testenv.BlackHole(t)
		return u
	}
	for _, c := range []struct {
		name     string
		protocol string
		endpoint func(t *testing.T) string
		// exportTimeout is OTEL_BSP_EXPORT_TIMEOUT: 1 s ends each export
		// before shutdown's 4 s; 30 s leaves one running when shutdown
		// ends, as the lens default does against a process's 10 s.
		exportTimeout string
	}{
		{"blackhole grpc", lens.ProtocolGRPC, blackHole, "1000"},
		{"blackhole http", lens.ProtocolHTTPProtobuf, blackHole, "1000"},
		{"http 500", lens.ProtocolHTTPProtobuf, func(t *testing.T) string { e, _ := answering(t, http.StatusInternalServerError); return e }, "1000"},
		{"http 429", lens.ProtocolHTTPProtobuf, func(t *testing.T) string { e, _ := answering(t, http.StatusTooManyRequests); return e }, "1000"},
		{"blackhole grpc, export outlasting shutdown", lens.ProtocolGRPC, blackHole, "30000"},
		{"http 429, export outlasting shutdown", lens.ProtocolHTTPProtobuf, func(t *testing.T) string { e, _ := answering(t, http.StatusTooManyRequests); return e }, "30000"},
	} {
		t.Run(c.name, func(t *testing.T) {
			endpoint := c.endpoint(t)
			path := filepath.Join(t.TempDir(), "telemetry", "proc.jsonl")
			h := setupOTLP(t, endpoint, map[string]string{
				"OTEL_EXPORTER_OTLP_PROTOCOL": c.protocol,
				"NEMO_GYM_OTEL_FILE_PATH":     path,
				// The exporter's own timeout is far longer, so only the
				// processor's bound or shutdown's ends an export.
				"OTEL_BSP_EXPORT_TIMEOUT":    c.exportTimeout,
				"OTEL_EXPORTER_OTLP_TIMEOUT": "30000",
			})
			endSpans(t, spans)

			began := time.Now()
			err := shutdownWithin(t, h, 4*time.Second)
			t.Logf("shutdown in %v: %v", time.Since(began).Round(time.Millisecond), err)
			stats := h.SpanStats()
			if len(stats) != 1 {
				t.Fatalf("SpanStats = %+v, want one exporter", stats)
			}
			s := stats[0]
			t.Logf("account: %+v", s)
			if s.Ended != spans || s.Lost() != spans || s.Exported != 0 {
				t.Errorf("account %+v: want all %d spans ended and lost, none exported", s, spans)
			}
			if c.name == "http 500" && s.ExportFailed != spans {
				t.Errorf("with HTTP 500 the %d spans must count as failed exports: %+v", spans, s)
			}

			acc := spanAccount(t, path)
			t.Logf("written: %v", acc)
			lost := acc[contract.SDKSpanProcessed+"/"+contract.SpanLossQueueFull] +
				acc[contract.SDKSpanProcessed+"/"+contract.SpanLossUnflushed] +
				acc[contract.SDKSpanExported+"/"+contract.SpanLossExportFailed]
			var total int64
			for k, v := range acc {
				if strings.HasPrefix(k, contract.SDKSpanProcessed+"/") {
					total += v
				}
			}
			if lost != spans || total != spans || acc[contract.SDKSpanExported+"/"] != 0 {
				t.Errorf("file %s says %d of %d spans lost (%v), want %d of %d", path, lost, total, acc, spans, spans)
			}
		})
	}
}

// A healthy collector: everything delivered, and the account says so.
func TestSpanAccountOfAHealthyCollector(t *testing.T) {
	r, endpoint := startGRPCReceiver(t)
	path := filepath.Join(t.TempDir(), "proc.jsonl")
	h := setupOTLP(t, endpoint, map[string]string{"NEMO_GYM_OTEL_FILE_PATH": path})
	endSpans(t, 25)
	if err := shutdownWithin(t, h, 10*time.Second); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if got := countSpans(r); got != 25 {
		t.Errorf("receiver got %d spans, want 25", got)
	}
	s := h.SpanStats()[0]
	if s.Ended != 25 || s.Exported != 25 || s.Lost() != 0 {
		t.Errorf("account %+v, want 25 ended and exported, none lost", s)
	}
	acc := spanAccount(t, path)
	if acc[contract.SDKSpanExported+"/"] != 25 || acc[contract.SDKSpanProcessed+"/"] != 25 {
		t.Errorf("written account %v, want 25 processed and exported", acc)
	}
}

func countSpans(r *otlpReceiver) int {
	n := 0
	for _, req := range r.traceRequests() {
		for _, rs := range req.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				n += len(ss.GetSpans())
			}
		}
	}
	return n
}

// One span with a 4 MiB attribute among many innocent ones, exported over
// gRPC to a receiver with gRPC's default 4 MiB message limit (a
// collector's default): with the SDK's unlimited attribute values the
// whole batch was refused and every innocent span lost.
func TestHugeAttributeDoesNotPoisonTheBatch(t *testing.T) {
	r, endpoint := startGRPCReceiver(t)
	h := setupOTLP(t, endpoint, nil)
	endSpans(t, 300, attribute.String("gym.test.innocent", "yes"))
	endSpans(t, 1, attribute.String(contract.AttrTaskID, strings.Repeat("t", 4<<20)))
	endSpans(t, 300, attribute.String("gym.test.innocent", "yes"))
	if err := shutdownWithin(t, h, 10*time.Second); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if got := countSpans(r); got != 601 {
		t.Errorf("receiver got %d of 601 spans (%+v)", got, h.SpanStats())
	}
	for _, req := range r.traceRequests() {
		for _, rs := range req.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				for _, sp := range ss.GetSpans() {
					for _, kv := range sp.GetAttributes() {
						if kv.GetKey() == contract.AttrTaskID {
							if n := len(kv.GetValue().GetStringValue()); n != lens.DefaultAttributeValueLengthLimit {
								t.Errorf("task id arrived with %d bytes, want it truncated to %d", n, lens.DefaultAttributeValueLengthLimit)
							}
						}
					}
				}
			}
		}
	}
}

// Whatever the attribute limit, a batch is sent in requests under the
// budget: 1000 spans of 8000-byte values are 8 MB in one batch, twice a
// collector's limit; with no limit at all a 5 MiB span is lost alone.
func TestBatchesAreSplitUnderTheRequestBudget(t *testing.T) {
	r, endpoint := startGRPCReceiver(t)
	h := setupOTLP(t, endpoint, map[string]string{"OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT": "-1"})
	if got := h.Config().AttributeValueLengthLimit; got != -1 {
		t.Fatalf("AttributeValueLengthLimit = %d, want -1 (no limit)", got)
	}
	payload := attribute.String("gym.test.payload", strings.Repeat("p", 8000))
	endSpans(t, 500, payload)
	endSpans(t, 1, attribute.String(contract.AttrTaskID, strings.Repeat("t", 5<<20)))
	endSpans(t, 499, payload)
	if err := shutdownWithin(t, h, 20*time.Second); err != nil {
		t.Logf("Shutdown: %v", err)
	}
	s := h.SpanStats()[0]
	t.Logf("%d trace requests; account %+v", len(r.traceRequests()), s)
	if got := countSpans(r); got != 999 {
		t.Errorf("receiver got %d spans, want the 999 innocent ones", got)
	}
	if s.ExportFailed != 1 || s.Lost() != 1 || s.Exported != 999 {
		t.Errorf("account %+v, want exactly the huge span lost, in a failed export", s)
	}
}

// A client's oversized or malformed baggage is a property of its request:
// dropped, with a debug line, and never reported as a telemetry export
// error. Good members of other baggage headers are kept.
func TestClientBaggageIsNotAnExportError(t *testing.T) {
	var logs bytes.Buffer
	isolateTelemetry(t)
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { slog.SetDefault(prev) })
	cfg := mustLoad(t, enabledVars(nil))
	h, err := lens.Setup(context.Background(), cfg, lens.Options{
		Logger:       slog.New(slog.NewTextHandler(&logs, nil)),
		SpanExporter: discard{},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Shutdown(context.Background())
	prop := otel.GetTextMapPropagator()

	huge := propagation.HeaderCarrier{"Baggage": {"big=" + strings.Repeat("x", 9000)}}
	if b := baggage.FromContext(prop.Extract(context.Background(), huge)); b.Len() != 0 {
		t.Errorf("oversized baggage kept: %d members", b.Len())
	}
	mixed := propagation.HeaderCarrier{"Baggage": {"bad member ;;;=", contract.AttrRolloutID + "=r-1"}}
	b := baggage.FromContext(prop.Extract(context.Background(), mixed))
	if got := b.Member(contract.AttrRolloutID).Value(); got != "r-1" {
		t.Errorf("the good baggage header was lost with the bad one: %q", got)
	}
	out := logs.String()
	t.Logf("log:\n%s", out)
	if strings.Contains(out, "telemetry export error") {
		t.Errorf("a client's baggage was logged as a telemetry export error:\n%s", out)
	}
	if !strings.Contains(out, "baggage dropped") {
		t.Errorf("no debug line about the dropped baggage:\n%s", out)
	}
	if n := len(h.SpanStats()); n != 1 || h.SpanStats()[0].Lost() != 0 {
		t.Errorf("baggage counted as a span loss: %+v", h.SpanStats())
	}
}
