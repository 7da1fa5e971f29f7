package backends

import (
	"context"
	"encoding/json"
	"math"
	"slices"
	"testing"

	"github.com/gymlens/gymlens/lens/telfile"
)

// A span as Jaeger's query API returns it (ids without leading zeros,
// times in microseconds, OTLP fields as tags) comes back as the run
// directory writes it.
func TestConvertSpanUndoesJaegersMapping(t *testing.T) {
	var s jaegerSpan
	if err := json.Unmarshal([]byte(`{
		"traceID": "af3e0c2b5d4e6f708192a3b4c5d6e7f", "spanID": "2a3b4c5d6e7f809",
		"operationName": "POST /verify",
		"references": [
			{"refType": "CHILD_OF", "traceID": "af3e0c2b5d4e6f708192a3b4c5d6e7f", "spanID": "1"},
			{"refType": "FOLLOWS_FROM", "traceID": "5b49", "spanID": "77"}
		],
		"startTime": 1764720000000123, "duration": 456,
		"tags": [
			{"key": "span.kind", "type": "string", "value": "server"},
			{"key": "otel.status_code", "type": "string", "value": "ERROR"},
			{"key": "otel.status_description", "type": "string", "value": "boom"},
			{"key": "otel.scope.name", "type": "string", "value": "nemo.gym"},
			{"key": "error", "type": "bool", "value": true},
			{"key": "http.response.status_code", "type": "int64", "value": 500},
			{"key": "nemo.gym.verify.reward", "type": "float64", "value": 0.5},
			{"key": "http.route", "type": "string", "value": "/verify"}
		],
		"logs": [{"timestamp": 1764720000000200, "fields": [
			{"key": "event", "type": "string", "value": "exception"},
			{"key": "exception.message", "type": "string", "value": "panicked"}]}],
		"processID": "p1"}`), &s); err != nil {
		t.Fatal(err)
	}
	got := convertSpan(s)
	if got.TraceID != "0af3e0c2b5d4e6f708192a3b4c5d6e7f" || got.SpanID != "02a3b4c5d6e7f809" || got.ParentSpanID != "0000000000000001" {
		t.Errorf("ids %s %s parent %s: want Jaeger's ids padded to 32 and 16 digits", got.TraceID, got.SpanID, got.ParentSpanID)
	}
	if got.Kind != telfile.KindServer || got.Status != telfile.StatusError || got.StatusMessage != "boom" || got.Scope != "nemo.gym" {
		t.Errorf("kind %q status %q %q scope %q", got.Kind, got.Status, got.StatusMessage, got.Scope)
	}
	if got.StartNS != 1764720000000123000 || got.EndNS-got.StartNS != 456000 {
		t.Errorf("start %d, duration %d ns", got.StartNS, got.EndNS-got.StartNS)
	}
	want := map[string]any{"http.response.status_code": int64(500), "nemo.gym.verify.reward": 0.5, "http.route": "/verify"}
	if len(got.Attributes) != len(want) {
		t.Errorf("attributes %v, want %v (Jaeger's derived tags dropped)", got.Attributes, want)
	}
	for k, v := range want {
		if got.Attributes[k] != v {
			t.Errorf("%s = %#v, want %#v", k, got.Attributes[k], v)
		}
	}
	if len(got.Links) != 1 || got.Links[0].TraceID != "00000000000000000000000000005b49" {
		t.Errorf("links %v: want the FOLLOWS_FROM reference", got.Links)
	}
	if len(got.Events) != 1 || got.Events[0].Name != "exception" || got.Events[0].Attributes["exception.message"] != "panicked" {
		t.Errorf("events %v", got.Events)
	}
}

// Prometheus's cumulative buckets become the per-bucket counts of the
// run directory's histogram point.
func TestHistogramPointFromCumulativeBuckets(t *testing.T) {
	h := &histSample{buckets: map[float64]float64{5: 2, 10: 7, 25: 7, math.Inf(1): 9}, sum: 88.5, count: 9}
	var p telfile.Point
	if !histogramPoint(h, &p) {
		t.Fatal("not a histogram")
	}
	if !slices.Equal(p.Bounds, []float64{5, 10, 25}) || !slices.Equal(p.Counts, []uint64{2, 5, 0, 2}) || p.Count != 9 || p.Sum.Float64() != 88.5 {
		t.Errorf("bounds %v counts %v count %d sum %v", p.Bounds, p.Counts, p.Count, p.Sum)
	}
	if histogramPoint(&histSample{buckets: map[float64]float64{}}, &p) {
		t.Error("a histogram without buckets was accepted")
	}
}

func TestFetchNeedsARunAndABackend(t *testing.T) {
	for _, o := range []Options{{JaegerURL: "http://127.0.0.1:1"}, {RunID: "r"}} {
		if _, err := Fetch(context.Background(), o, t.TempDir()); err == nil {
			t.Errorf("Fetch(%+v) accepted", o)
		}
	}
}

func TestPromLabel(t *testing.T) {
	for in, want := range map[string]string{"nemo.run.id": "nemo_run_id", "http.response.status_code": "http_response_status_code", "a-b/c": "a_b_c"} {
		if got := promLabel(in); got != want {
			t.Errorf("promLabel(%q) = %q, want %q", in, got, want)
		}
	}
}
