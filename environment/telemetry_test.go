package environment_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/internal/servertest"
	"github.com/gymlens/gymlens/lens"
	"github.com/gymlens/gymlens/server"
	"github.com/gymlens/gymlens/telemetry"
)

// fleetName is the server name telemetry is initialised with in these
// tests: the instance name gym.verify spans must carry.
const fleetName = "exact_match_prod"

// telemetryOn enables telemetry with every span group, a manual metric
// reader and an in-memory span exporter. Call it before starting servers.
func telemetryOn(t *testing.T) (*lens.Handle, *sdkmetric.ManualReader, *tracetest.InMemoryExporter) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	exp := tracetest.NewInMemoryExporter()
	h := servertest.EnableTelemetry(t, telemetry.InitOptions{ServerName: fleetName,
		ServerType: contract.ServerTypeResources, MetricReader: reader, SpanExporter: exp})
	return h, reader, exp
}

// verifyMetrics reads the verify call counts, the success rate and the
// number of recorded durations; absent series read as zero (rate -1).
func verifyMetrics(t *testing.T, r *sdkmetric.ManualReader) (ok, fail int64, rate float64, durations uint64) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("collect: %v", err)
	}
	rate = -1
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch m.Name {
			case contract.VerifyCalls:
				for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
					v, _ := p.Attributes.Value(attribute.Key(contract.AttrVerifyOutcome))
					switch v.AsString() {
					case contract.OutcomeSuccess:
						ok = p.Value
					case contract.OutcomeFailure:
						fail = p.Value
					}
				}
			case contract.VerifySuccessRate:
				rate = m.Data.(metricdata.Gauge[float64]).DataPoints[0].Value
			case contract.VerifyDuration:
				for _, p := range m.Data.(metricdata.Histogram[float64]).DataPoints {
					durations += p.Count
				}
			}
		}
	}
	return ok, fail, rate, durations
}

func spanAttr(s tracetest.SpanStub, key string) (attribute.Value, bool) {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func TestVerifyIsCountedOnceWhenItGotPastValidation(t *testing.T) {
	_, reader, _ := telemetryOn(t)
	var calls atomic.Int64
	base, _ := start(t, exactEnv(&calls))
	url := base + "/verify"
	post := func(answer string) int {
		status, _ := servertest.PostRaw(t, url, verifyBody(`"expected_answer":"Paris"`, answer))
		return status
	}
	for _, answer := range []string{"Paris", "Lyon", "Paris"} {
		if status := post(answer); status != http.StatusOK {
			t.Fatalf("%s: %d", answer, status)
		}
	}
	// A wrong answer (reward 0) is a completed verification.
	if ok, fail, rate, n := verifyMetrics(t, reader); ok != 3 || fail != 0 || rate != 1 || n != 3 {
		t.Fatalf("after 2 right + 1 wrong: success=%d failure=%d rate=%v durations=%d; want 3, 0, 1, 3", ok, fail, rate, n)
	}
	// Refused requests are not verifications.
	post422(t, url, verifyBody(`"expected_answer":5`, "Paris"))
	post422(t, url, `{"responses_create_params":{"input":"x"},"expected_answer":"Paris"}`)
	if ok, fail, _, n := verifyMetrics(t, reader); ok != 3 || fail != 0 || n != 3 {
		t.Fatalf("422s were counted: success=%d failure=%d durations=%d", ok, fail, n)
	}
	// An error, an unusable score, an HTTP error and a panic all fail;
	// the process keeps serving.
	for _, answer := range []string{"error", "nan", "teapot", "panic"} {
		if status := post(answer); status == http.StatusOK {
			t.Fatalf("%s: 200", answer)
		}
	}
	if status := post("Paris"); status != http.StatusOK {
		t.Fatalf("after a panic: %d", status)
	}
	ok, fail, rate, n := verifyMetrics(t, reader)
	if ok != 4 || fail != 4 || n != 8 || rate != 0.5 {
		t.Errorf("success=%d failure=%d rate=%v durations=%d; want 4, 4, 0.5, 8", ok, fail, rate, n)
	}
}

func TestVerifySpan(t *testing.T) {
	h, _, exp := telemetryOn(t)
	var calls atomic.Int64
	base, stop := start(t, exactEnv(&calls))
	c := servertest.Client(t)
	const secret = "Paris-7731"
	body := json.RawMessage(verifyBody(`"expected_answer":"`+secret+`"`, secret))
	post := func(ctx context.Context, path string, body json.RawMessage) []byte {
		t.Helper()
		var raw json.RawMessage
		if _, err := c.Post(ctx, base+path, body, &raw, server.Call{AnyStatus: true}); err != nil {
			t.Fatal(err)
		}
		return raw
	}
	ctx := context.Background()
	plain := post(ctx, "/verify", body)
	prefixed := post(ctx, "/ng-rollout/7-2/verify", body)
	if string(plain) != string(prefixed) {
		t.Errorf("/ng-rollout/7-2/verify answered\n%s\n/verify answered\n%s", prefixed, plain)
	}
	// Without a prefix the id comes from the caller's baggage; the prefix
	// wins over it.
	post(telemetry.WithRolloutID(ctx, "baggage-1"), "/verify", body)
	post(telemetry.WithRolloutID(ctx, "baggage-2"), "/ng-rollout/prefix-2/verify", body)
	post(ctx, "/ng-rollout/failed-1/verify", json.RawMessage(verifyBody(`"expected_answer":"x"`, "error")))
	post(ctx, "/ng-rollout/panicked-1/verify", json.RawMessage(verifyBody(`"expected_answer":"x"`, "panic")))
	stop() // every server span has ended once the server drained
	if err := h.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}

	byRollout := map[string]tracetest.SpanStub{}
	verifySpans := 0
	spanByID := map[trace.SpanID]tracetest.SpanStub{}
	for _, s := range exp.GetSpans() {
		spanByID[s.SpanContext.SpanID()] = s
	}
	for _, s := range exp.GetSpans() {
		for _, kv := range s.Attributes {
			if strings.Contains(kv.Value.Emit(), "7731") {
				t.Errorf("span %q attribute %s carries task or answer text", s.Name, kv.Key)
			}
		}
		for _, e := range s.Events {
			for _, kv := range e.Attributes {
				if strings.Contains(kv.Value.Emit(), "7731") {
					t.Errorf("span %q event attribute %s carries task or answer text", s.Name, kv.Key)
				}
			}
		}
		if s.Name != contract.SpanVerify {
			continue
		}
		verifySpans++
		id, _ := spanAttr(s, contract.AttrRolloutID)
		byRollout[id.AsString()] = s
		if v, _ := spanAttr(s, contract.AttrServerName); v.AsString() != fleetName {
			t.Errorf("gym.verify %s: server name %q, want %q", id.AsString(), v.AsString(), fleetName)
		}
		if !s.Parent.IsValid() {
			t.Errorf("gym.verify %s has no parent: the SERVER span should be it", id.AsString())
		}
		// The SERVER span names the same rollout (from the prefix, or the
		// baggage when there is none).
		if parent, ok := spanByID[s.Parent.SpanID()]; !ok || parent.SpanKind != trace.SpanKindServer {
			t.Errorf("gym.verify %s: parent is not an exported SERVER span", id.AsString())
		} else if pid, _ := spanAttr(parent, contract.AttrRolloutID); pid.AsString() != id.AsString() {
			t.Errorf("SERVER span of gym.verify %s has rollout id %q", id.AsString(), pid.AsString())
		}
	}
	if verifySpans != 6 {
		t.Errorf("%d gym.verify spans, want 6", verifySpans)
	}
	for _, id := range []string{"", "7-2", "baggage-1", "prefix-2"} {
		s, ok := byRollout[id]
		if !ok {
			t.Errorf("no gym.verify span with rollout id %q; have %v", id, keys(byRollout))
			continue
		}
		if v, _ := spanAttr(s, contract.AttrVerifyReward); v.Type() != attribute.FLOAT64 || v.AsFloat64() != 1 {
			t.Errorf("rollout %q: reward attribute %s, want float 1", id, v.Emit())
		}
		if s.Status.Code == codes.Error {
			t.Errorf("rollout %q: error status %q", id, s.Status.Description)
		}
	}
	for _, id := range []string{"failed-1", "panicked-1"} {
		s, ok := byRollout[id]
		if !ok {
			t.Errorf("no gym.verify span for %s", id)
			continue
		}
		if s.Status.Code != codes.Error {
			t.Errorf("%s: status %v, want error", id, s.Status)
		}
		if _, has := spanAttr(s, contract.AttrVerifyReward); has {
			t.Errorf("%s: a failed verification carries a reward", id)
		}
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// With telemetry off the span name falls back to the environment's name
// and nothing is recorded; verify works the same.
func TestVerifyWithTelemetryOff(t *testing.T) {
	telemetry.ResetForTesting()
	var calls atomic.Int64
	base, _ := start(t, exactEnv(&calls))
	status, raw := servertest.PostRaw(t, base+"/ng-rollout/1-1/verify", verifyBody(`"expected_answer":"a"`, "a"))
	if status != http.StatusOK || reward(t, raw) != "1" {
		t.Fatalf("%d %s", status, raw)
	}
}
