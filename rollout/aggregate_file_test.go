package rollout

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/gymlens/gymlens/environment"
	"github.com/gymlens/gymlens/protocol"
)

// metricsAnswers are /aggregate_metrics answers of several shapes: as
// our servers write them, with white space, with members missing, extra
// or null, and a member name written with an escape.
var metricsAnswers = []string{
	`{"group_level_metrics":[{"_ng_task_index":0,"mean/reward":1,"rollout_infos":[{"rollout_id":"0:0","reward":1}]},{"_ng_task_index":1,"mean/reward":0}],` +
		`"agent_metrics":{"mean/reward":0.5,"num_repeats":1},"key_metrics":{"mean/reward":0.5},"perf_summary":null,"repeat_level_metrics":[]}`,
	`{ "group_level_metrics" : [ { "a" : [ 1 , 2 ] } ] , "agent_metrics" : { } , "key_metrics" : { "x" : "y\"}" } , "perf_summary" : { "mean_num_turns" : 2 } , "repeat_level_metrics" : [ {"b":{}} ] }`,
	`{"agent_metrics":{"mean/reward":1},"group_level_metrics":[{"k":1}],"not_upstreams":1}`,
	`{"group_level_metrics":null,"agent_metrics":null,"key_metrics":{},"perf_summary":null,"repeat_level_metrics":null}`,
	`{"group_level_metrics":[],"agent_metrics":{},"key_metrics":{},"perf_summary":null,"repeat\u005flevel_metrics":[{"c":1}]}`,
	`{}`,
}

// TestDecodeMetricsIsEncodingJSONs holds decodeMetrics to what
// encoding/json decodes from the same answers.
func TestDecodeMetricsIsEncodingJSONs(t *testing.T) {
	for _, a := range metricsAnswers {
		got, err := decodeMetrics(json.RawMessage(a))
		if err != nil {
			t.Fatalf("%s: %v", a, err)
		}
		var want AgentMetrics
		if err := json.Unmarshal([]byte(a), &want); err != nil {
			t.Fatal(err)
		}
		g := AgentMetrics{AgentMetrics: got.AgentMetrics, KeyMetrics: got.KeyMetrics, GroupLevelMetrics: got.GroupLevelMetrics,
			RepeatLevelMetrics: got.RepeatLevelMetrics, PerfSummary: got.PerfSummary}
		if !reflect.DeepEqual(normalised(t, g), normalised(t, want)) {
			t.Errorf("%s:\n got %+v\nwant %+v", a, g, want)
		}
	}
}

// normalised encodes m compactly and decodes it generically, so that two
// values compare by content.
func normalised(t *testing.T, m AgentMetrics) any {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestEncodeMetricsFileIsMarshalIndent holds the aggregate metrics
// file to json.MarshalIndent's layout (and a newline), with and without
// an environment server, perf summary, per-task and per-repeat objects.
func TestEncodeMetricsFileIsMarshalIndent(t *testing.T) {
	var entries []AgentMetrics
	for i, a := range metricsAnswers[:2] {
		m, err := decodeMetrics(json.RawMessage(a))
		if err != nil {
			t.Fatal(err)
		}
		e := AgentMetrics{AgentMetrics: m.AgentMetrics, KeyMetrics: m.KeyMetrics, GroupLevelMetrics: m.GroupLevelMetrics,
			RepeatLevelMetrics: m.RepeatLevelMetrics, PerfSummary: m.PerfSummary}
		e.AgentRef.Name = "agent"
		if i == 1 {
			e.EnvironmentServer = "env"
		}
		entries = append(entries, e)
	}
	// A large run's answer: per-task objects as the resources server
	// writes them, enough to be indented in parts.
	var responses []protocol.Fields
	for task := range 3000 {
		for rollout := range 2 {
			var f protocol.Fields
			_ = f.Set(protocol.KeyTaskIndex, task)
			_ = f.Set(protocol.KeyRolloutIndex, rollout)
			_ = f.Set(protocol.KeyReward, float64((task+rollout)%3)/2)
			_ = f.Set("correct", (task+rollout)%2 == 0)
			responses = append(responses, f)
		}
	}
	big := environment.AggregateMetrics(responses)
	e := AgentMetrics{AgentMetrics: big.AgentMetrics, KeyMetrics: big.KeyMetrics, GroupLevelMetrics: big.GroupLevelMetrics,
		RepeatLevelMetrics: big.RepeatLevelMetrics}
	e.AgentRef.Name = "big"
	entries = append(entries, e)
	for _, list := range [][]AgentMetrics{entries[:1], entries[:2], entries, nil} {
		want, err := json.MarshalIndent(list, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		got, err := encodeMetricsFile(list)
		if err != nil {
			t.Fatal(err)
		}
		if list == nil {
			want = []byte("[]")
		}
		if !bytes.Equal(got, append(want, '\n')) {
			t.Errorf("got\n%s\nwant\n%s", got, want)
		}
	}
}
