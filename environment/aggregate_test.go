package environment_test

import (
	"encoding/json"
	"math"
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gymlens/gymlens/environment"
	"github.com/gymlens/gymlens/internal/servertest"
	"github.com/gymlens/gymlens/protocol"
)

// The table below is worked out by hand from upstream's rules (every
// numeric member and boolean, usage merged in, sample standard
// deviation). The responses arrive out of order, as a collector sends
// them in completion order.
const aggregateBody = `{"verify_responses":[
 {"_ng_task_index":1,"_ng_rollout_index":0,"reward":0.5,"score2":3,"label":"c"},
 {"_ng_task_index":0,"_ng_rollout_index":1,"reward":0.0,"solved":false,"label":"b",
  "response":{"usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":0},"output_tokens":6,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":16}}},
 {"_ng_task_index":0,"_ng_rollout_index":0,"reward":1.0,"solved":true,"label":"a",
  "response":{"usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":0},"output_tokens":4,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":14}}}
]}`

var (
	sqrt2    = math.Sqrt(2)
	sqrtHalf = math.Sqrt(0.5)
)

// Over all three: reward 1, 0, 0.5; solved 1, 0; input_tokens 10, 10;
// output_tokens 4, 6; total_tokens 14, 16; score2 3 (one value: no std,
// since other members have two).
var wantAgent = map[string]any{
	"mean/reward": 0.5, "max/reward": 1.0, "min/reward": 0.0, "median/reward": 0.5, "std/reward": 0.5,
	"mean/solved": 0.5, "max/solved": 1.0, "min/solved": 0.0, "median/solved": 0.5, "std/solved": sqrtHalf,
	"mean/input_tokens": 10.0, "max/input_tokens": 10.0, "min/input_tokens": 10.0, "median/input_tokens": 10.0, "std/input_tokens": 0.0,
	"mean/output_tokens": 5.0, "max/output_tokens": 6.0, "min/output_tokens": 4.0, "median/output_tokens": 5.0, "std/output_tokens": sqrt2,
	"mean/total_tokens": 15.0, "max/total_tokens": 16.0, "min/total_tokens": 14.0, "median/total_tokens": 15.0, "std/total_tokens": sqrt2,
	"mean/score2": 3.0, "max/score2": 3.0, "min/score2": 3.0, "median/score2": 3.0,
	"num_repeats": 2.0,
}

// withoutAcrossRepeats drops the *_across_repeats/* members, which
// TestUpstreamAggregateMetricsAgree checks against upstream itself.
func withoutAcrossRepeats(m map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		if !strings.Contains(k, "_across_repeats/") {
			out[k] = v
		}
	}
	return out
}

var wantKey = map[string]any{
	"mean/reward": 0.5, "mean/solved": 0.5, "mean/input_tokens": 10.0, "mean/output_tokens": 5.0,
	"mean/total_tokens": 15.0, "mean/score2": 3.0,
}

// Task 0 has two rollouts; task 1 one, so every std there is undefined
// and upstream reports 0 for the members it has.
var wantGroups = `[
 {"_ng_task_index":0,
  "mean/reward":0.5,"mean/solved":0.5,"mean/input_tokens":10,"mean/output_tokens":5,"mean/total_tokens":15,
  "max/reward":1,"max/solved":1,"max/input_tokens":10,"max/output_tokens":6,"max/total_tokens":16,
  "min/reward":0,"min/solved":0,"min/input_tokens":10,"min/output_tokens":4,"min/total_tokens":14,
  "median/reward":0.5,"median/solved":0.5,"median/input_tokens":10,"median/output_tokens":5,"median/total_tokens":15,
  "std/reward":` + f(sqrtHalf) + `,"std/solved":` + f(sqrtHalf) + `,"std/input_tokens":0,"std/output_tokens":` + f(sqrt2) + `,"std/total_tokens":` + f(sqrt2) + `,
  "sample":{"agent_ref":{"name":"agent"}},"num_rollouts":2,"expected_num_rollouts":2,"missing_num_rollouts":0,
  "reward_profile_completion_pct":100,
  "rollout_infos":[
   {"rollout_id":"0:0","_ng_task_index":0,"_ng_rollout_index":0,"reward":1.0,"input_tokens":10,"output_tokens":4,"total_tokens":14,"solved":1},
   {"rollout_id":"0:1","_ng_task_index":0,"_ng_rollout_index":1,"reward":0.0,"input_tokens":10,"output_tokens":6,"total_tokens":16,"solved":0}]},
 {"_ng_task_index":1,
  "mean/reward":0.5,"mean/score2":3,"max/reward":0.5,"max/score2":3,"min/reward":0.5,"min/score2":3,
  "median/reward":0.5,"median/score2":3,"std/reward":0,"std/score2":0,
  "sample":{"agent_ref":{"name":"agent"}},"num_rollouts":1,"expected_num_rollouts":1,"missing_num_rollouts":0,
  "reward_profile_completion_pct":100,
  "rollout_infos":[{"rollout_id":"1:0","_ng_task_index":1,"_ng_rollout_index":0,"reward":0.5,"score2":3}]}
]`

func f(v float64) string { b, _ := json.Marshal(v); return string(b) }

// orderedKeys returns the member names of a JSON object, in order.
func orderedKeys(t *testing.T, raw []byte) []string {
	t.Helper()
	var fs protocol.Fields
	if err := json.Unmarshal(raw, &fs); err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(fs))
	for i, m := range fs {
		out[i] = m.Key
	}
	return out
}

func TestAggregateMetricsAgainstAHandComputedTable(t *testing.T) {
	var calls atomic.Int64
	base, _ := start(t, exactEnv(&calls))
	status, raw := servertest.PostRaw(t, base+"/aggregate_metrics", aggregateBody)
	if status != http.StatusOK {
		t.Fatalf("%d %s", status, raw)
	}
	var got struct {
		GroupLevelMetrics []json.RawMessage `json:"group_level_metrics"`
		AgentMetrics      map[string]any    `json:"agent_metrics"`
		KeyMetrics        map[string]any    `json:"key_metrics"`
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(withoutAcrossRepeats(got.AgentMetrics), wantAgent) {
		t.Errorf("agent_metrics:\n got %v\nwant %v", got.AgentMetrics, wantAgent)
	}
	if !reflect.DeepEqual(got.KeyMetrics, wantKey) {
		t.Errorf("key_metrics:\n got %v\nwant %v", got.KeyMetrics, wantKey)
	}
	groups, _ := json.Marshal(got.GroupLevelMetrics)
	if !sameJSON(groups, []byte(wantGroups)) {
		t.Errorf("group_level_metrics:\n got %s\nwant %s", groups, wantGroups)
	}
	// Members come in upstream's order: the index, stat by stat, then
	// the bookkeeping.
	var want []json.RawMessage
	_ = json.Unmarshal([]byte(wantGroups), &want)
	for i := range want {
		if g, w := orderedKeys(t, got.GroupLevelMetrics[i]), orderedKeys(t, want[i]); !reflect.DeepEqual(g, w) {
			t.Errorf("group %d member order:\n got %v\nwant %v", i, g, w)
		}
	}
}

func TestAggregateMetricsEdgeCases(t *testing.T) {
	var calls atomic.Int64
	base, _ := start(t, exactEnv(&calls))
	for _, c := range []struct{ name, body, agent string }{
		{"empty", `{"verify_responses":[]}`, `{}`},
		// One response: no std is defined, so each member gets 0.
		{"one response", `{"verify_responses":[{"reward":1,"ok":true}]}`,
			`{"mean/reward":1,"max/reward":1,"min/reward":1,"median/reward":1,"std/reward":0,"mean/ok":1,"max/ok":1,"min/ok":1,"median/ok":1,"std/ok":0,"num_repeats":1}`},
		// Without indexes every response counts as task 0, rollout 0;
		// strings, objects, nulls and the indexes are not metrics.
		{"no indexes", `{"verify_responses":[{"reward":1,"s":"x","o":{"a":1},"n":null},{"reward":0,"_ng_task_index":0}]}`,
			`{"mean/reward":0.5,"max/reward":1,"min/reward":0,"median/reward":0.5,"std/reward":` + f(sqrtHalf) + `,"num_repeats":1}`},
		// A masked rollout leaves the quality metrics (not 1/3 but 1/2)
		// and is counted in coverage; num_repeats counts it.
		{"masked", `{"verify_responses":[{"_ng_task_index":0,"reward":1},{"_ng_task_index":1,"reward":0},` +
			`{"_ng_task_index":2,"_ng_rollout_index":3,"reward":0,"mask_sample":true}]}`,
			`{"mean/reward":0.5,"max/reward":1,"min/reward":0,"median/reward":0.5,"std/reward":` + f(sqrtHalf) + `,"num_repeats":2,` +
				`"coverage/measured_rollouts":2,"coverage/masked_rollouts":1,"coverage/measured_tasks":2,"coverage/fully_masked_tasks":1}`},
		{"all masked", `{"verify_responses":[{"reward":1,"mask_sample":true}]}`,
			`{"coverage/measured_rollouts":0,"coverage/masked_rollouts":1,"coverage/measured_tasks":0,"coverage/fully_masked_tasks":1}`},
	} {
		status, raw := servertest.PostRaw(t, base+"/aggregate_metrics", c.body)
		if status != http.StatusOK {
			t.Errorf("%s: %d %s", c.name, status, raw)
			continue
		}
		m := members(t, raw)
		if !sameJSON(m["agent_metrics"], []byte(c.agent)) {
			t.Errorf("%s: agent_metrics %s, want %s", c.name, m["agent_metrics"], c.agent)
		}
		if c.name == "empty" && string(raw) != `{"group_level_metrics":[],"agent_metrics":{},"key_metrics":{},"perf_summary":null,"repeat_level_metrics":[]}`+"\n" {
			t.Errorf("empty: %q", raw)
		}
	}
	if status, _ := servertest.PostRaw(t, base+"/aggregate_metrics", `{"verify_responses":[1]}`); status != http.StatusUnprocessableEntity {
		t.Errorf("a response that is not an object: %d, want 422", status)
	}
	// A whole collection in one body, as the collector sends it: more than
	// the server's own decoded-size budget takes (five objects an entry,
	// each charged 4 KiB, 200 MB for the run).
	entry := `{"reward":1,"task_index":3,"response":{"usage":{"input_tokens":9,"output_tokens":4,"input_tokens_details":{"cached_tokens":0},"output_tokens_details":{"reasoning_tokens":0}}}}`
	whole := `{"verify_responses":[` + strings.Repeat(entry+",", 9999) + entry + `]}`
	if status, raw := servertest.PostRaw(t, base+"/aggregate_metrics", whole); status != http.StatusOK {
		t.Errorf("a run of 10000 results: %d %.200s", status, raw)
	}
}

func TestComputeMetrics(t *testing.T) {
	var calls atomic.Int64
	var seen [][]protocol.Fields
	env := exactEnv(&calls, environment.ComputeMetrics(func(tasks [][]environment.Fields) map[string]any {
		seen = tasks
		return map[string]any{"mean/custom": 7.0, "pass@1": 50.0}
	}))
	base, _ := start(t, env)
	status, raw := servertest.PostRaw(t, base+"/aggregate_metrics", aggregateBody)
	if status != http.StatusOK {
		t.Fatalf("%d %s", status, raw)
	}
	m := members(t, raw)
	var agent, key map[string]any
	_ = json.Unmarshal(m["agent_metrics"], &agent)
	_ = json.Unmarshal(m["key_metrics"], &key)
	if agent["pass@1"] != 50.0 || agent["mean/custom"] != 7.0 || key["mean/custom"] != 7.0 || key["pass@1"] != nil || key["mean/reward"] != 0.5 {
		t.Errorf("agent %v key %v; want the hook's metrics merged, its mean/* among the key metrics", agent, key)
	}
	// Grouped by task, in arrival order within a task.
	if len(seen) != 2 || len(seen[0]) != 2 || len(seen[1]) != 1 {
		t.Fatalf("hook saw %d groups", len(seen))
	}
	var label string
	_, _ = seen[0][0].Decode("label", &label)
	if label != "b" {
		t.Errorf("first response of task 0 is %q, want b (arrival order)", label)
	}
}

func TestAggregateMetricsFunction(t *testing.T) {
	var req protocol.AggregateMetricsRequest
	if err := json.Unmarshal([]byte(aggregateBody), &req); err != nil {
		t.Fatal(err)
	}
	got := environment.AggregateMetrics(req.VerifyResponses)
	raw, _ := json.Marshal(got.AgentMetrics)
	var agent map[string]any
	_ = json.Unmarshal(raw, &agent)
	if !reflect.DeepEqual(withoutAcrossRepeats(agent), wantAgent) || len(got.GroupLevelMetrics) != 2 {
		t.Errorf("AggregateMetrics: %v, %d groups", got.AgentMetrics, len(got.GroupLevelMetrics))
	}
}

// The hook sees the scored responses only, and is not called when every
// response is masked; the coverage members stay among the key metrics.
func TestComputeMetricsSkipsMasked(t *testing.T) {
	var calls atomic.Int64
	var seen int
	env := exactEnv(&calls, environment.ComputeMetrics(func(tasks [][]environment.Fields) map[string]any {
		for _, g := range tasks {
			seen += len(g)
		}
		return map[string]any{"pass@1": 1.0}
	}))
	base, _ := start(t, env)
	status, raw := servertest.PostRaw(t, base+"/aggregate_metrics",
		`{"verify_responses":[{"reward":1},{"_ng_task_index":1,"reward":0,"mask_sample":true}]}`)
	if status != http.StatusOK {
		t.Fatalf("%d %s", status, raw)
	}
	var key map[string]any
	_ = json.Unmarshal(members(t, raw)["key_metrics"], &key)
	if seen != 1 || key["coverage/masked_rollouts"] != 1.0 || key["mean/reward"] != 1.0 {
		t.Errorf("hook saw %d responses; key metrics %v", seen, key)
	}
	seen = 0
	status, raw = servertest.PostRaw(t, base+"/aggregate_metrics", `{"verify_responses":[{"reward":1,"mask_sample":true}]}`)
	if status != http.StatusOK || seen != 0 {
		t.Errorf("every response masked: %d %s, hook saw %d", status, raw, seen)
	}
}
