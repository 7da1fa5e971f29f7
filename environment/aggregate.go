package environment

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/gymlens/gymlens/protocol"
)

// Statistics AggregateMetrics computes for every numeric member, in the
// order upstream lists them.
var stats = []string{"mean", "max", "min", "median", "std"}

// Member names of upstream's per-task (group-level) metrics.
const (
	keySample           = "sample"
	keyNumRollouts      = "num_rollouts"
	keyExpectedRollouts = "expected_num_rollouts"
	keyMissingRollouts  = "missing_num_rollouts"
	keyCompletionPct    = "reward_profile_completion_pct"
	keyRolloutInfos     = "rollout_infos"
	keyRolloutInfoID    = "rollout_id"
	keyUsage            = "usage"
	// keyAgentName is the column upstream groups agent-level statistics
	// by; a result member of that name never counts as a metric.
	keyAgentName = "agent_name"
)

// sampleRow is the "sample" of every task group: upstream profiles the
// responses against rows it builds with only an agent name.
var sampleRow = json.RawMessage(`{"agent_ref":{"name":"agent"}}`)

// AggregateMetrics computes what upstream's /aggregate_metrics answers
// by default for a list of verify responses (reward_profile.py,
// compute_aggregate_metrics), as JSON objects.
//
// The numeric members of each response are its top-level numbers and
// booleans (true counts 1, false 0), plus the numeric members of its
// response.usage object, which take precedence; _ng_task_index and
// _ng_rollout_index identify the rollout (0 when absent) and are not
// metrics. For every numeric member X:
//
//   - agent_metrics holds mean/X, max/X, min/X, median/X and std/X over
//     every response that has X (std is the sample standard deviation;
//     with a single value it is left out, unless no member has two
//     values, in which case members every response has get std 0);
//   - key_metrics holds the mean/* entries of agent_metrics;
//   - group_level_metrics holds, per task in ascending task order, an
//     object with _ng_task_index, the same statistics over that task's
//     rollouts, "sample" ({"agent_ref":{"name":"agent"}}), num_rollouts,
//     expected_num_rollouts (the same), missing_num_rollouts (0),
//     reward_profile_completion_pct (100) and rollout_infos: per rollout,
//     in rollout order, rollout_id ("<task>:<rollout>"), the two indexes,
//     reward (as it came) and the rollout's numeric members.
//
// Upstream refuses (HTTP 500) responses without both indexes and two
// responses with the same pair; here they count as described. An empty
// list gives empty metrics.
func AggregateMetrics(responses []protocol.Fields) protocol.AggregateMetricsResponse {
	out := protocol.AggregateMetricsResponse{GroupLevelMetrics: []json.RawMessage{},
		AgentMetrics: map[string]any{}, KeyMetrics: map[string]any{}}
	if len(responses) == 0 {
		return out
	}
	rows := make([]*profiled, len(responses))
	for i, r := range responses {
		rows[i] = profile(r)
	}
	// Upstream aligns results by (task, rollout) key before profiling,
	// so its columns come in the order they first appear in that order.
	sort.SliceStable(rows, func(i, j int) bool {
		if rows[i].task != rows[j].task {
			return rows[i].task < rows[j].task
		}
		return rows[i].rollout < rows[j].rollout
	})
	var columns []string
	seen := map[string]bool{}
	for _, r := range rows {
		for _, c := range r.columns {
			if !seen[c] {
				seen[c] = true
				columns = append(columns, c)
			}
		}
	}

	for start := 0; start < len(rows); {
		end := start + 1
		for end < len(rows) && rows[end].task == rows[start].task {
			end++
		}
		group := rows[start:end]
		var g protocol.Fields
		_ = g.Set(protocol.KeyTaskIndex, group[0].task)
		for _, f := range describe(columns, group) {
			g = append(g, f)
		}
		g.SetRaw(keySample, sampleRow)
		_ = g.Set(keyNumRollouts, len(group))
		_ = g.Set(keyExpectedRollouts, len(group))
		_ = g.Set(keyMissingRollouts, 0)
		_ = g.Set(keyCompletionPct, 100.0)
		infos := make([]json.RawMessage, len(group))
		for i, r := range group {
			infos[i], _ = r.info.MarshalJSON()
		}
		_ = g.Set(keyRolloutInfos, infos)
		raw, _ := g.MarshalJSON()
		out.GroupLevelMetrics = append(out.GroupLevelMetrics, raw)
		start = end
	}

	for _, f := range describe(columns, rows) {
		v, _ := strconv.ParseFloat(string(f.Value), 64)
		out.AgentMetrics[f.Key] = v
	}
	out.KeyMetrics = keyMetrics(out.AgentMetrics)
	return out
}

// keyMetrics returns the mean/* entries of agent metrics.
func keyMetrics(agent map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range agent {
		if strings.HasPrefix(k, "mean/") {
			out[k] = v
		}
	}
	return out
}

// profiled is one verify response as the statistics see it.
type profiled struct {
	task, rollout int
	columns       []string           // numeric members, in order
	values        map[string]float64 // by member
	info          protocol.Fields    // its rollout_infos entry
}

// profile reads the numeric members of response r.
func profile(r protocol.Fields) *profiled {
	p := &profiled{task: index(r, protocol.KeyTaskIndex), rollout: index(r, protocol.KeyRolloutIndex),
		values: map[string]float64{}}
	usage := usageOf(r)

	// The columns: the response's members with the usage members merged
	// over them, numeric ones only.
	merged := slices.Clone(r)
	for _, u := range usage {
		merged.SetRaw(u.Key, u.Value)
	}
	for _, m := range merged {
		if m.Key == protocol.KeyTaskIndex || m.Key == protocol.KeyRolloutIndex || m.Key == keyAgentName {
			continue
		}
		if v, _, ok := numeric(m.Value); ok {
			p.columns = append(p.columns, m.Key)
			p.values[m.Key] = v
		}
	}

	_ = p.info.Set(keyRolloutInfoID, strconv.Itoa(p.task)+":"+strconv.Itoa(p.rollout))
	_ = p.info.Set(protocol.KeyTaskIndex, p.task)
	_ = p.info.Set(protocol.KeyRolloutIndex, p.rollout)
	if raw, ok := r.Get(protocol.KeyReward); ok {
		p.info.SetRaw(protocol.KeyReward, raw)
	}
	for _, u := range usage {
		if _, text, ok := numeric(u.Value); ok {
			p.info.SetRaw(u.Key, text)
		}
	}
	for _, m := range r {
		switch m.Key {
		case protocol.KeyTaskIndex, protocol.KeyRolloutIndex, protocol.KeyReward, protocol.KeyResponse:
			continue
		}
		if _, text, ok := numeric(m.Value); ok {
			p.info.SetRaw(m.Key, text)
		}
	}
	return p
}

// usageOf returns the members of r's response.usage object, if any.
func usageOf(r protocol.Fields) protocol.Fields {
	var resp struct {
		Usage protocol.Fields `json:"usage"`
	}
	raw, ok := r.Get(protocol.KeyResponse)
	if !ok || len(bytes.TrimSpace(raw)) == 0 || bytes.TrimSpace(raw)[0] != '{' {
		return nil
	}
	if err := json.Unmarshal(raw, &resp); err != nil {
		return nil
	}
	return resp.Usage
}

// numeric reads a JSON number or boolean (as 1 or 0): its value, and its
// text as a metric value (the number as it came, or 1 or 0). ok is false
// for anything else and for numbers beyond float64's range.
func numeric(raw json.RawMessage) (v float64, text json.RawMessage, ok bool) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0:
		return 0, nil, false
	case string(raw) == "true":
		return 1, json.RawMessage("1"), true
	case string(raw) == "false":
		return 0, json.RawMessage("0"), true
	case raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9':
		v, err := strconv.ParseFloat(string(raw), 64)
		if err != nil || math.IsInf(v, 0) {
			return 0, nil, false
		}
		return v, raw, true
	}
	return 0, nil, false
}

// index reads an integral index member of r, 0 when it is absent or not
// a whole number.
func index(r protocol.Fields, key string) int {
	raw, ok := r.Get(key)
	if !ok {
		return 0
	}
	v, _, ok := numeric(raw)
	if !ok || v != math.Trunc(v) || math.Abs(v) > 1<<53 || string(bytes.TrimSpace(raw)) == "true" || string(bytes.TrimSpace(raw)) == "false" {
		return 0
	}
	return int(v)
}

// describe computes the statistics of every column over rows, stat by
// stat and column by column (mean/a, mean/b, max/a, ...), leaving out
// what is undefined, as upstream's profiler drops NaN entries.
func describe(columns []string, rows []*profiled) protocol.Fields {
	type column struct {
		name string
		vals []float64
	}
	var cols []column
	for _, c := range columns {
		var vals []float64
		for _, r := range rows {
			if v, ok := r.values[c]; ok {
				vals = append(vals, v)
			}
		}
		if len(vals) > 0 {
			cols = append(cols, column{c, vals})
		}
	}
	// A standard deviation needs two values. When no column has two,
	// upstream reports 0 for the columns every row has.
	anyStd := false
	for _, c := range cols {
		if len(c.vals) >= 2 {
			anyStd = true
			break
		}
	}
	var out protocol.Fields
	for _, stat := range stats {
		for _, c := range cols {
			var v float64
			switch stat {
			case "mean":
				v = mean(c.vals)
			case "max":
				v = slices.Max(c.vals)
			case "min":
				v = slices.Min(c.vals)
			case "median":
				v = median(c.vals)
			case "std":
				switch {
				case len(c.vals) >= 2:
					v = std(c.vals)
				case !anyStd && len(c.vals) == len(rows):
					v = 0
				default:
					continue
				}
			}
			if math.IsNaN(v) || math.IsInf(v, 0) {
				continue
			}
			_ = out.Set(stat+"/"+c.name, v)
		}
	}
	return out
}

func mean(vals []float64) float64 {
	var sum float64
	for _, v := range vals {
		sum += v
	}
	return sum / float64(len(vals))
}

func median(vals []float64) float64 {
	s := slices.Clone(vals)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// std is the sample standard deviation (n-1 in the denominator), as
// pandas computes it.
func std(vals []float64) float64 {
	m := mean(vals)
	var sq float64
	for _, v := range vals {
		d := v - m
		sq += d * d
	}
	return math.Sqrt(sq / float64(len(vals)-1))
}

// groupByTask groups responses by task index, ascending, each group in
// the order the responses came.
func groupByTask(responses []protocol.Fields) [][]protocol.Fields {
	byTask := map[int][]protocol.Fields{}
	var tasks []int
	for _, r := range responses {
		t := index(r, protocol.KeyTaskIndex)
		if _, ok := byTask[t]; !ok {
			tasks = append(tasks, t)
		}
		byTask[t] = append(byTask[t], r)
	}
	slices.Sort(tasks)
	out := make([][]protocol.Fields, len(tasks))
	for i, t := range tasks {
		out[i] = byTask[t]
	}
	return out
}
