package lens_test

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	otellog "go.opentelemetry.io/otel/log"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/internal/servertest"
	"github.com/gymlens/gymlens/internal/testenv"
	"github.com/gymlens/gymlens/lens"
	"github.com/gymlens/gymlens/lens/telfile"
)

// Metric and log losses are counted like span losses, and a process's
// shutdown flushes the three signals at once under one budget, the OTLP
// export timeout: against a collector that never answers, or an endpoint
// that refuses every connection, Shutdown with a context of no deadline
// of its own still returns, having counted every span, metric data point
// and log record it could not deliver, in the handle's account and in
// the process's telemetry file.

// refusing returns an endpoint on which nothing listens: every
// connection is refused.
func refusing(t *testing.T) string {
	t.Helper()
	return "http://" + servertest.FreeAddr(t)
}

// accountOf sums the points of the named counters of a telemetry file,
// keyed by metric name and error type ("" for success).
func accountOf(t *testing.T, path string, names ...string) map[string]int64 {
	t.Helper()
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	out := map[string]int64{}
	err := telfile.ReadFile(path, func(r telfile.Record) error {
		if m := r.Metric; m != nil && want[m.Name] {
			for _, p := range m.Points {
				v, _ := p.Value.Int64()
				et, _ := p.Attributes[contract.AttrErrorType].(string)
				out[m.Name+"/"+et] += v
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return out
}

func TestEverySignalsLossIsCountedWithinOneBudget(t *testing.T) {
	const (
		spans = 20
		logs  = 30
	)
	blackHole := func(t *testing.T) string {
		u, _ := testenv.BlackHole(t)
		return u
	}
	for _, c := range []struct {
		name     string
		protocol string
		endpoint func(t *testing.T) string
	}{
		{"blackhole grpc", lens.ProtocolGRPC, blackHole},
		{"blackhole http", lens.ProtocolHTTPProtobuf, blackHole},
		{"refused grpc", lens.ProtocolGRPC, refusing},
		{"refused http", lens.ProtocolHTTPProtobuf, refusing},
		{"http 500", lens.ProtocolHTTPProtobuf, func(t *testing.T) string { e, _ := answering(t, http.StatusInternalServerError); return e }},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "telemetry", "proc.jsonl")
			h := setupOTLP(t, c.endpoint(t), map[string]string{
				"OTEL_EXPORTER_OTLP_PROTOCOL": c.protocol,
				"NEMO_GYM_OTEL_FILE_PATH":     path,
				"NEMO_GYM_OTEL_LOGS_ENABLED":  "true",
				// The budget of the whole shutdown, and of one export.
				"OTEL_EXPORTER_OTLP_TIMEOUT": "1500",
				// Far longer than the budget: only shutdown's deadline
				// can end a span export.
				"OTEL_BSP_EXPORT_TIMEOUT": "60000",
			})
			endSpans(t, spans)
			counter, err := h.Meter().Int64Counter("gym.test.loss")
			if err != nil {
				t.Fatal(err)
			}
			counter.Add(context.Background(), 3)
			logger := h.LoggerProvider().Logger("gym.test")
			for range logs {
				var r otellog.Record
				r.SetBody(attribute.StringValue("lost?"))
				logger.Emit(context.Background(), r)
			}

			if a := h.Account(); a != nil {
				t.Errorf("an account before Shutdown: %s", a)
			}
			// No deadline of the caller's: the export timeout bounds it.
			began := time.Now()
			err = h.Shutdown(context.Background())
			t.Logf("shutdown returned after %v: %v", time.Since(began).Round(time.Millisecond), err)
			if err == nil {
				t.Error("Shutdown returned nil with nothing delivered")
			}

			if s := h.SpanStats(); len(s) != 1 || s[0].Ended != spans || s[0].Lost() != spans {
				t.Errorf("span account %+v, want %d ended and lost", s, spans)
			}
			ms := h.MetricStats()
			if len(ms) != 1 || ms[0].Exported != 0 || ms[0].ExportFailed == 0 || ms[0].Lost() != ms[0].ExportFailed {
				t.Errorf("metric account %+v, want the final export's points failed, none exported", ms)
			}
			ls := h.LogStats()
			if len(ls) != 1 || ls[0].Emitted != logs || ls[0].Lost() != logs || ls[0].Exported != 0 {
				t.Errorf("log account %+v, want %d emitted and lost", ls, logs)
			}
			t.Logf("accounts: spans %+v metrics %+v logs %+v", h.SpanStats(), ms, ls)

			acc := accountOf(t, path, contract.SDKMetricPointExported, contract.SDKLogProcessed, contract.SDKLogExported)
			t.Logf("written: %v", acc)
			if len(ms) == 1 && (acc[contract.SDKMetricPointExported+"/"+contract.SpanLossExportFailed] != int64(ms[0].ExportFailed) ||
				acc[contract.SDKMetricPointExported+"/"] != 0) {
				t.Errorf("file says %v, want %d metric data points in failed exports, none delivered", acc, ms[0].ExportFailed)
			}
			logLost := acc[contract.SDKLogProcessed+"/"+contract.SpanLossQueueFull] +
				acc[contract.SDKLogProcessed+"/"+contract.SpanLossUnflushed] +
				acc[contract.SDKLogExported+"/"+contract.SpanLossExportFailed]
			logTotal := acc[contract.SDKLogProcessed+"/"] + acc[contract.SDKLogProcessed+"/"+contract.SpanLossQueueFull] +
				acc[contract.SDKLogProcessed+"/"+contract.SpanLossUnflushed]
			if logLost != logs || logTotal != logs {
				t.Errorf("file says %d of %d log records lost (%v), want %d of %d", logLost, logTotal, acc, logs, logs)
			}
			checkAccountLines(t, h.Account(), path)
		})
	}
}

// checkAccountLines checks what Handle.Account returned: a resource
// header and then the account's records, those byte for byte the lines
// the process's telemetry file ends with.
func checkAccountLines(t *testing.T, account []byte, path string) {
	t.Helper()
	_, records, ok := bytes.Cut(account, []byte("\n"))
	if !ok || len(records) == 0 {
		t.Fatalf("Account() = %q, want a header line and records", account)
	}
	var kinds []string
	if err := telfile.Read(bytes.NewReader(account), func(r telfile.Record) error {
		kinds = append(kinds, r.Type)
		return nil
	}); err != nil || kinds[0] != telfile.TypeResource || slices.Contains(kinds[1:], telfile.TypeResource) {
		t.Fatalf("Account() is not a header and records (%v, %v):\n%s", kinds, err, account)
	}
	file, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(file, records) {
		t.Errorf("the telemetry file does not end with the account's records:\naccount:\n%s\nfile tail:\n%s", records, file[max(0, len(file)-len(records)):])
	}
}

// A process that exports only over OTLP, with no telemetry file, still
// has its account to hand over.
func TestAccountWithoutAFile(t *testing.T) {
	h := setupOTLP(t, refusing(t), map[string]string{"OTEL_EXPORTER_OTLP_TIMEOUT": "500"})
	endSpans(t, 5)
	_ = h.Shutdown(context.Background())
	var lost int64
	if err := telfile.Read(bytes.NewReader(h.Account()), func(r telfile.Record) error {
		if m := r.Metric; m != nil && m.Name == contract.SDKSpanExported {
			for _, p := range m.Points {
				if p.Attributes[contract.AttrErrorType] != nil {
					v, _ := p.Value.Int64()
					lost += v
				}
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("Account(): %v\n%s", err, h.Account())
	}
	if lost != 5 {
		t.Errorf("the account counts %d spans lost in exports, want 5:\n%s", lost, h.Account())
	}
}

// A caller's deadline shorter than the export timeout wins: shutdown
// ends with it, and counts what it cut short.
func TestShutdownKeepsTheCallersShorterDeadline(t *testing.T) {
	u, _ := testenv.BlackHole(t)
	h := setupOTLP(t, u, map[string]string{"OTEL_EXPORTER_OTLP_TIMEOUT": "60000", "OTEL_BSP_EXPORT_TIMEOUT": "60000"})
	endSpans(t, 5)
	counter, err := h.Meter().Int64Counter("gym.test.loss")
	if err != nil {
		t.Fatal(err)
	}
	counter.Add(context.Background(), 3)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if err := h.Shutdown(ctx); err == nil {
		t.Error("Shutdown returned nil with nothing delivered")
	}
	if ctx.Err() == nil {
		t.Error("Shutdown returned before its deadline with a collector that never answers")
	}
	if s := h.SpanStats(); len(s) != 1 || s[0].Lost() != 5 {
		t.Errorf("span account %+v, want the 5 spans lost", s)
	}
	if ms := h.MetricStats(); len(ms) != 1 || ms[0].ExportFailed == 0 {
		t.Errorf("metric account %+v, want the final export's points failed", ms)
	}
}

// ForceFlush against a collector that never answers ends with the export
// timeout when its caller gives it no deadline, and reports the failure;
// Shutdown then still counts everything the process held.
func TestForceFlushSharesTheBudget(t *testing.T) {
	u, _ := testenv.BlackHole(t)
	h := setupOTLP(t, u, map[string]string{"OTEL_EXPORTER_OTLP_TIMEOUT": "1000", "OTEL_BSP_EXPORT_TIMEOUT": "60000"})
	endSpans(t, 7)
	counter, err := h.Meter().Int64Counter("gym.test.loss")
	if err != nil {
		t.Fatal(err)
	}
	counter.Add(context.Background(), 1)
	if err := h.ForceFlush(context.Background()); err == nil {
		t.Error("ForceFlush returned nil with nothing delivered")
	}
	if err := h.Shutdown(context.Background()); err == nil {
		t.Error("Shutdown returned nil with nothing delivered")
	}
	if s := h.SpanStats(); len(s) != 1 || s[0].Lost() != 7 || s[0].Ended != 7 {
		t.Errorf("span account %+v, want the 7 spans lost", s)
	}
	if ms := h.MetricStats(); len(ms) != 1 || ms[0].ExportFailed == 0 || ms[0].Exported != 0 {
		t.Errorf("metric account %+v, want failed points and none delivered", ms)
	}
}
