package environment

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gymlens/gymlens/protocol"
)

// TestAppendNumberIsEncodingJSONs holds appendNumber to what
// encoding/json writes for a float64, over the boundaries of the
// exponent form and random values of every magnitude.
func TestAppendNumberIsEncodingJSONs(t *testing.T) {
	vals := []float64{0, 1, -1, 100, 0.5, 1e-6, 9.99999e-7, 1e-7, -1e-7, 1e20, 1e21, 9.999999e20, 1.5e300, 5e-324,
		math.MaxFloat64, -math.MaxFloat64, 0.1 + 0.2, 123456789.125, math.Copysign(0, -1)}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		vals = append(vals, math.Float64frombits(r.Uint64()))
	}
	checked := 0
	for _, v := range vals {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if got := protocol.AppendJSONFloat(nil, v); !bytes.Equal(got, want) {
			t.Errorf("AppendJSONFloat(%v) = %s, want %s", v, got, want)
		}
		checked++
	}
	if checked < 10000 {
		t.Fatalf("only %d values checked", checked)
	}
}

// TestEncodeMetricsIsMarshalJSON holds the /aggregate_metrics answer as
// written (encodeMetrics) to the answer's own MarshalJSON plus the
// newline the server adds, over collections with several repeats,
// masked results, usage, perf records and member names JSON escapes.
func TestEncodeMetricsIsMarshalJSON(t *testing.T) {
	bodies := []string{
		`[]`,
		`[{"reward":1,"mask_sample":true}]`,
		`[{"_ng_task_index":0,"_ng_rollout_index":0,"reward":1},{"_ng_task_index":0,"_ng_rollout_index":1,"reward":0.25},` +
			`{"_ng_task_index":1,"_ng_rollout_index":0,"reward":0,"a<b>&\"c":3e-9,"flag":true},` +
			`{"_ng_task_index":1,"_ng_rollout_index":1,"reward":1,"response":{"usage":{"input_tokens":5,"output_tokens":7}},` +
			`"ng_perf":{"num_turns":2,"completion_tokens":7}},{"_ng_task_index":2,"_ng_rollout_index":0,"reward":1e22,"mask_sample":1}]`,
	}
	for _, body := range bodies {
		var responses []protocol.Fields
		if err := json.Unmarshal([]byte(body), &responses); err != nil {
			t.Fatal(err)
		}
		m := AggregateMetrics(responses)
		want, err := m.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		got, err := encodeMetrics(m)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, append(want, '\n')) {
			t.Errorf("%s:\n got %s\nwant %s", body, got, want)
		}
	}
}
