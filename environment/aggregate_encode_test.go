package environment

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gymlens/gymlens/internal/aggstream"
	"github.com/gymlens/gymlens/internal/jsonskim"
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

// TestStreamedAnswerIsMarshalJSON holds the /aggregate_metrics answer as
// streamed (aggregator.answer, its groups encoded in pieces by several
// goroutines) to the answer's own MarshalJSON plus the newline a typed
// handler adds, over collections with several repeats, masked results,
// usage, perf records, member names JSON escapes, and enough tasks for
// several pieces, with and without a metrics hook.
func TestStreamedAnswerIsMarshalJSON(t *testing.T) {
	bodies := []string{
		`[]`,
		`[{"reward":1,"mask_sample":true}]`,
		`[{"_ng_task_index":0,"_ng_rollout_index":0,"reward":1},{"_ng_task_index":0,"_ng_rollout_index":1,"reward":0.25},` +
			`{"_ng_task_index":1,"_ng_rollout_index":0,"reward":0,"a<b>&\"c":3e-9,"flag":true},` +
			`{"_ng_task_index":1,"_ng_rollout_index":1,"reward":1,"response":{"usage":{"input_tokens":5,"output_tokens":7}},` +
			`"ng_perf":{"num_turns":2,"completion_tokens":7}},{"_ng_task_index":2,"_ng_rollout_index":0,"reward":1e22,"mask_sample":1}]`,
	}
	// Tasks enough for several pieces, out of order, some with two
	// repeats and a column only some rows have.
	var many bytes.Buffer
	many.WriteString("[")
	for i := range 3*groupsPerPiece + 17 {
		task := (i * 7919) % (3*groupsPerPiece + 17)
		if i > 0 {
			many.WriteString(",")
		}
		fmt.Fprintf(&many, `{"_ng_task_index":%d,"_ng_rollout_index":0,"reward":%g}`, task, float64(task%5)/4)
		if task%3 == 0 {
			fmt.Fprintf(&many, `,{"_ng_task_index":%d,"_ng_rollout_index":1,"reward":1,"extra":%d}`, task, task)
		}
	}
	many.WriteString("]")
	bodies = append(bodies, many.String())
	hook := func(tasks [][]protocol.Fields) map[string]any { return map[string]any{"tasks_seen": len(tasks)} }
	for _, body := range bodies {
		for _, custom := range []func([][]protocol.Fields) map[string]any{nil, hook} {
			var responses []protocol.Fields
			if err := json.Unmarshal([]byte(body), &responses); err != nil {
				t.Fatal(err)
			}
			m, err := aggregate(responses, custom)
			if err != nil {
				t.Fatal(err)
			}
			want, err := m.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			answer := aggregatorOf(responses).answer(custom)
			if answer.Header.Get(aggstream.CompleteHeader) != aggstream.CompleteValue {
				t.Errorf("the answer is not marked complete: %v", answer.Header)
			}
			var got bytes.Buffer
			if err := answer.Write(&got); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes(), append(want, '\n')) {
				t.Errorf("%.80s (hook %t):\n got %.300s\nwant %.300s", body, custom != nil, got.Bytes(), want)
			}
			if !jsonskim.CompleteAggregateMetrics(bytes.TrimSpace(got.Bytes())) {
				t.Errorf("%.80s: the answer marked complete is not of the complete shape", body)
			}
		}
	}
}

// BenchmarkAggregateAnswer writes the /aggregate_metrics answer of 40 000
// scored results (one per task, reward and three usage columns), as the
// resources server does at the end of a 40 000-rollout run.
func BenchmarkAggregateAnswer(b *testing.B) {
	var responses []protocol.Fields
	for task := range 40_000 {
		var f protocol.Fields
		_ = f.Set(protocol.KeyTaskIndex, task)
		_ = f.Set(protocol.KeyRolloutIndex, 0)
		_ = f.Set(protocol.KeyReward, float64(task%2))
		f.SetRaw(protocol.KeyResponse, json.RawMessage(`{"usage":{"input_tokens":5,"output_tokens":4,"total_tokens":9}}`))
		responses = append(responses, f)
	}
	a := aggregatorOf(responses)
	answer := a.answer(nil)
	var n int64
	b.ResetTimer()
	for b.Loop() {
		var w countWriter
		if err := answer.Write(&w); err != nil {
			b.Fatal(err)
		}
		n = int64(w)
	}
	b.SetBytes(n)
}

// countWriter counts what is written to it.
type countWriter int

func (c *countWriter) Write(p []byte) (int, error) {
	*c += countWriter(len(p))
	return len(p), nil
}
