package environment_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gymlens/gymlens/environment"
	"github.com/gymlens/gymlens/environment/envtest"
	"github.com/gymlens/gymlens/internal/upstream"
	"github.com/gymlens/gymlens/protocol"
)

// upstreamAggregate runs nemo-gym's own compute_aggregate_metrics (the
// function its resources servers and agents answer /aggregate_metrics
// with) over every case read from stdin, one JSON answer a line.
const upstreamAggregate = `
import json, sys, warnings
warnings.simplefilter("ignore")
from nemo_gym.reward_profile import compute_aggregate_metrics
for case in json.load(sys.stdin):
    print(compute_aggregate_metrics(case).model_dump_json())
`

// genVerifyResponses makes one seeded batch of verify responses as a
// collector sends them: several tasks, repeats with some missing,
// rewards of every kind, masks, numeric, boolean, string, null and
// object members, usage, and ng_perf records, in shuffled order.
func genVerifyResponses(r *rand.Rand) []map[string]any {
	tasks := 1 + r.IntN(6)
	repeats := 1 + r.IntN(4)
	maskRate := []float64{0, 0, 0.25, 0.6, 1}[r.IntN(5)]
	perfRate := []float64{0, 0.5, 1}[r.IntN(3)]
	var out []map[string]any
	for task := range tasks {
		for rollout := range repeats {
			if repeats > 1 && r.Float64() < 0.15 {
				continue // a rollout that never came back
			}
			vr := map[string]any{"_ng_task_index": task, "_ng_rollout_index": rollout}
			switch r.IntN(5) {
			case 0:
				vr["reward"] = 1.0
			case 1:
				vr["reward"] = 0.0
			case 2:
				vr["reward"] = math.Round(r.Float64()*1000) / 1000
			case 3:
				vr["reward"] = r.IntN(2)
			default:
				vr["reward"] = r.Float64()
			}
			if r.IntN(10) == 0 {
				vr["reward"] = r.IntN(2) == 0 // a boolean reward
			}
			if r.Float64() < maskRate {
				vr["mask_sample"] = true
				vr["failure_kind"] = "judge_failed"
				vr["failure_reason"] = "the judge gave no verdict"
			} else if r.IntN(2) == 0 {
				vr["mask_sample"] = false
				vr["failure_kind"] = nil
			}
			if r.IntN(3) > 0 {
				vr["solved"] = r.IntN(2) == 0
			}
			if r.IntN(2) == 0 {
				vr["score"] = r.NormFloat64() * 10
			}
			if task%2 == 0 {
				vr["steps"] = 1 + r.IntN(9)
			}
			vr["label"] = fmt.Sprintf("answer-%d", r.IntN(3))
			vr["extracted"] = nil
			vr["meta"] = map[string]any{"difficulty": r.IntN(3)}
			if r.IntN(4) == 0 {
				vr["_ng_attempt_index"] = 1 + r.IntN(2)
			}
			if r.IntN(5) > 0 {
				in, outTok := 10+r.IntN(500), 1+r.IntN(300)
				vr["response"] = map[string]any{
					"usage": map[string]any{
						"input_tokens": in, "output_tokens": outTok, "total_tokens": in + outTok,
						"input_tokens_details":  map[string]any{"cached_tokens": r.IntN(5)},
						"output_tokens_details": map[string]any{"reasoning_tokens": r.IntN(50)},
					},
					"incomplete_details": nil,
				}
				if r.IntN(8) == 0 {
					vr["total_tokens"] = -1 // the usage member wins
				}
			}
			if r.Float64() < perfRate {
				perf := map[string]any{"num_turns": 1 + r.IntN(6), "total_latency_ms": 5 + r.Float64()*900,
					"token_observability_coverage": float64(r.IntN(2))}
				if r.IntN(3) > 0 {
					perf["completion_tokens"] = r.IntN(400)
					perf["prompt_tokens"] = 10 + r.IntN(900)
				}
				if r.IntN(3) == 0 {
					perf["cached_prompt_tokens"] = r.IntN(100)
					perf["reasoning_tokens"] = r.IntN(100)
				}
				vr["ng_perf"] = perf
			}
			out = append(out, vr)
		}
	}
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// The same verify responses through upstream's compute_aggregate_metrics
// and through AggregateMetrics give the same answer: every member of every
// object, numbers equal to 1e-9 relative.
func TestUpstreamAggregateMetricsAgree(t *testing.T) {
	const n = 200
	r := rand.New(rand.NewPCG(7, 2026))
	cases := make([][]map[string]any, n)
	for i := range cases {
		cases[i] = genVerifyResponses(r)
	}
	cases = append(cases, []map[string]any{}) // and the empty list
	in, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}
	out := upstream.Run(t, 3*time.Minute, upstreamAggregate, in)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(cases) {
		t.Fatalf("upstream answered %d cases of %d", len(lines), len(cases))
	}
	agree, masked, repeated, perf := 0, 0, 0, 0
	for i, c := range cases {
		body, _ := json.Marshal(c)
		var responses []protocol.Fields
		if err := json.Unmarshal(body, &responses); err != nil {
			t.Fatal(err)
		}
		got, err := json.Marshal(environment.AggregateMetrics(responses))
		if err != nil {
			t.Fatal(err)
		}
		var want, have any
		if err := json.Unmarshal([]byte(lines[i]), &want); err != nil {
			t.Fatalf("case %d: upstream: %v", i, err)
		}
		_ = json.Unmarshal(got, &have)
		if diff := jsonDiff("", want, have); diff != "" {
			if i-agree < 5 {
				t.Errorf("case %d (%d responses): %s\ninput: %s", i, len(c), diff, body)
			}
			continue
		}
		agree++
		w := want.(map[string]any)
		if _, ok := w["agent_metrics"].(map[string]any)["coverage/masked_rollouts"]; ok {
			masked++
		}
		if len(w["repeat_level_metrics"].([]any)) > 0 {
			repeated++
		}
		if w["perf_summary"] != nil {
			perf++
		}
	}
	t.Logf("%d cases, %d agree (%d with masked rollouts, %d with repeat-level metrics, %d with perf_summary)",
		len(cases), agree, masked, repeated, perf)
	if agree != len(cases) {
		t.Errorf("%d of %d cases differ from upstream", len(cases)-agree, len(cases))
	}
	if masked == 0 || repeated == 0 || perf == 0 {
		t.Errorf("the generator missed a path: %d masked, %d repeated, %d perf", masked, repeated, perf)
	}
}

// jsonDiff describes the first difference between two decoded JSON
// values ("" when equal), numbers compared to 1e-9 relative.
func jsonDiff(path string, want, have any) string {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return fmt.Sprintf("%s: want an object, have %v", path, have)
		}
		keys := make([]string, 0, len(w)+len(h))
		for k := range w {
			keys = append(keys, k)
		}
		for k := range h {
			if _, ok := w[k]; !ok {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			wv, wok := w[k]
			hv, hok := h[k]
			switch {
			case !wok:
				return fmt.Sprintf("%s.%s: not upstream's, have %v", path, k, hv)
			case !hok:
				return fmt.Sprintf("%s.%s: missing, upstream has %v", path, k, wv)
			}
			if d := jsonDiff(path+"."+k, wv, hv); d != "" {
				return d
			}
		}
		return ""
	case []any:
		h, ok := have.([]any)
		if !ok || len(h) != len(w) {
			return fmt.Sprintf("%s: want %d elements, have %v", path, len(w), have)
		}
		for i := range w {
			if d := jsonDiff(fmt.Sprintf("%s[%d]", path, i), w[i], h[i]); d != "" {
				return d
			}
		}
		return ""
	case float64:
		h, ok := have.(float64)
		if !ok || math.Abs(w-h) > 1e-9*math.Max(1, math.Max(math.Abs(w), math.Abs(h))) {
			return fmt.Sprintf("%s: want %v, have %v", path, w, have)
		}
		return ""
	default:
		if want != have {
			return fmt.Sprintf("%s: want %v, have %v", path, want, have)
		}
		return ""
	}
}

// upstreamPerTask runs compute_aggregate_metrics with a compute_metrics
// hook whose result carries per_task_metrics (one entry per task: a new
// member, and num_rollouts replaced) besides an agent-level member.
const upstreamPerTask = `
import json, sys, warnings
warnings.simplefilter("ignore")
from nemo_gym.reward_profile import compute_aggregate_metrics
def hook(tasks):
    per = []
    for group in tasks:
        per.append({"_ng_task_index": group[0].get("_ng_task_index", 0),
                    "best_of_task": max(float(r["reward"]) for r in group), "num_rollouts": 99})
    return {"tasks_seen": len(tasks), "per_task_metrics": per}
for case in json.load(sys.stdin):
    print(compute_aggregate_metrics(case, compute_metrics_fn=hook).model_dump_json())
`

// TestUpstreamPerTaskMetricsAgree: a ComputeMetrics hook's
// per_task_metrics goes into the group objects (new members added,
// existing ones replaced) and not into agent_metrics, as upstream's
// compute_aggregate_metrics does, in the answer the server streams.
func TestUpstreamPerTaskMetricsAgree(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 2026))
	var cases [][]map[string]any
	for range 20 {
		var c []map[string]any
		for task := range 1 + r.IntN(5) {
			for rollout := range 1 + r.IntN(3) {
				vr := map[string]any{"_ng_task_index": task, "_ng_rollout_index": rollout, "reward": math.Round(r.Float64()*100) / 100}
				if r.IntN(6) == 0 {
					vr["mask_sample"] = true
				}
				c = append(c, vr)
			}
		}
		cases = append(cases, c)
	}
	in, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(upstream.Run(t, 3*time.Minute, upstreamPerTask, in))), "\n")
	if len(lines) != len(cases) {
		t.Fatalf("upstream answered %d cases of %d", len(lines), len(cases))
	}
	hook := func(tasks [][]environment.Fields) map[string]any {
		var per []map[string]any
		for _, group := range tasks {
			var task int
			_, _ = group[0].Decode(protocol.KeyTaskIndex, &task)
			best := math.Inf(-1)
			for _, resp := range group {
				var v float64
				_, _ = resp.Decode(protocol.KeyReward, &v)
				best = max(best, v)
			}
			per = append(per, map[string]any{protocol.KeyTaskIndex: task, "best_of_task": best, "num_rollouts": 99})
		}
		return map[string]any{"tasks_seen": len(tasks), "per_task_metrics": per}
	}
	env := environment.New("per_task", environment.Verify(func(context.Context, *environment.VerifyRequest, struct{}) (environment.Score, error) {
		return environment.Score{}, nil
	}), environment.ComputeMetrics(hook))
	base := envtest.Serve(t, env)
	s := envtest.NewSession(t, base)
	withPerTask := 0
	for i, c := range cases {
		status, body := s.Post("/aggregate_metrics", map[string]any{"verify_responses": c})
		if status != 200 {
			t.Fatalf("case %d: %d %s", i, status, body)
		}
		var want, have any
		if err := json.Unmarshal([]byte(lines[i]), &want); err != nil {
			t.Fatalf("case %d: upstream: %v", i, err)
		}
		if err := json.Unmarshal(body, &have); err != nil {
			t.Fatal(err)
		}
		if diff := jsonDiff("", want, have); diff != "" {
			t.Errorf("case %d: %s\ninput: %v", i, diff, c)
		}
		if groups := want.(map[string]any)["group_level_metrics"].([]any); len(groups) > 0 {
			if _, ok := groups[0].(map[string]any)["best_of_task"]; ok {
				withPerTask++
			}
		}
	}
	if withPerTask == 0 {
		t.Errorf("no case had per-task metrics in its groups")
	}
	t.Logf("%d cases, %d with per-task metrics merged", len(cases), withPerTask)
}
