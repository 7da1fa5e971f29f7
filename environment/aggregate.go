package environment

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/gymlens/gymlens/internal/jsonskim"
	"github.com/gymlens/gymlens/protocol"
)

// Statistics the profiler computes for every numeric member, in the
// order upstream lists them (reward_profile.py, describe_dataframe).
var stats = []string{"mean", "max", "min", "median", "std"}

// Member names of upstream's aggregate metrics.
const (
	keySample           = "sample"
	keyNumRollouts      = "num_rollouts"
	keyExpectedRollouts = "expected_num_rollouts"
	keyMissingRollouts  = "missing_num_rollouts"
	keyCompletionPct    = "reward_profile_completion_pct"
	keyRolloutInfos     = "rollout_infos"
	keyRolloutInfoID    = "rollout_id"
	keyNumRepeats       = "num_repeats"
	// keyPerTaskMetrics is the member of the compute_metrics hook's result
	// that goes into the group objects rather than agent_metrics.
	keyPerTaskMetrics = "per_task_metrics"
	keySampleCount    = "sample_count"
	keyMissingCount   = "missing_count"
	// keyPerf is the per-rollout performance record perf_summary is
	// computed from.
	keyPerf = "ng_perf"
	// keyAgentName is the column upstream groups agent-level statistics
	// by; a result member of that name never counts as a metric.
	keyAgentName = "agent_name"
	// acrossRepeats marks a statistic over the per-repeat estimates.
	acrossRepeats = "_across_repeats/"
)

// Coverage metrics, present only when something was masked.
const (
	keyMeasuredRollouts   = "coverage/measured_rollouts"
	keyMaskedRollouts     = "coverage/masked_rollouts"
	keyMeasuredTasks      = "coverage/measured_tasks"
	keyFullyMaskedTasks   = "coverage/fully_masked_tasks"
	keyMetricsMeanPrefix  = "mean/"
	confidence95Quantile  = 0.975 // the upper tail of a two-sided 95 % interval
	histogramStatPrefix   = "histogram/"
	keyMetricAttemptIndex = "/" + protocol.KeyAttemptIndex
)

// sampleRow is the "sample" of every task group: upstream profiles the
// responses against rows it builds with only an agent name.
var sampleRow = json.RawMessage(`{"agent_ref":{"name":"agent"}}`)

// AggregateMetrics computes what upstream's /aggregate_metrics answers
// by default for a list of verify responses (reward_profile.py
// compute_aggregate_metrics, nemo-gym 0.7.0).
//
// A response with a truthy mask_sample is masked: it leaves every
// quality statistic, and coverage/measured_rollouts,
// coverage/masked_rollouts, coverage/measured_tasks and
// coverage/fully_masked_tasks join agent_metrics and key_metrics (only
// when something was masked). When every response is masked, those
// coverage members are all there is, besides perf_summary.
//
// The numeric members of a scored response are its top-level numbers
// and booleans (true counts 1, false 0) whose names do not begin with
// "_", plus those of its response.usage object, which take precedence;
// _ng_task_index and _ng_rollout_index identify the rollout (0 when
// absent). For every numeric member X:
//
//   - agent_metrics holds mean/X, max/X, min/X, median/X and std/X over
//     every scored response that has X (std is the sample standard
//     deviation; with a single value it is left out, unless no member
//     has two values, in which case members every response has get std
//     0), and num_repeats, the number of distinct rollout indexes over
//     every response, masked ones included;
//   - with more than one rollout index among the scored responses,
//     repeat_level_metrics holds per rollout index (ascending)
//     _ng_rollout_index, sample_count (tasks it has), missing_count
//     (tasks it lacks), and mean/, median/, std/, sem/, min/, max/, p25/,
//     p75/ and, with two values or more, ci_low_95/ and ci_high_95/ of X
//     (a Student t interval); and agent_metrics gains, for every
//     repeat-level mean/X, its mean_, median_, std_, min_, max_, se_,
//     ci_low_95_ and ci_high_95_across_repeats/ statistics over the
//     repeats;
//   - key_metrics holds the mean/* entries of agent_metrics (and the
//     coverage ones);
//   - group_level_metrics holds, per task in ascending task order, an
//     object with _ng_task_index, the same statistics over that task's
//     rollouts, "sample" ({"agent_ref":{"name":"agent"}}), num_rollouts,
//     expected_num_rollouts (the same), missing_num_rollouts (0),
//     reward_profile_completion_pct (100) and rollout_infos: per rollout,
//     in rollout order, rollout_id ("<task>:<rollout>"), the two indexes,
//     reward (as it came) and the rollout's numeric members;
//   - perf_summary summarises the ng_perf objects of every response
//     (masked ones included), or is nil when none has one.
//
// Upstream refuses (HTTP 500) a response without both indexes, two
// responses with the same pair, and a numeric member called agent_name;
// here they count as described. An empty list gives empty metrics.
func AggregateMetrics(responses []protocol.Fields) protocol.AggregateMetricsResponse {
	m, _ := aggregate(responses, nil) // only a hook's result can be refused
	return m
}

// aggregate is AggregateMetrics with custom (nil for none) as the
// benchmark's own compute_metrics hook: its metrics join agent_metrics
// after the coverage ones, before num_repeats, and its per_task_metrics
// the group objects (see prepared.custom).
func aggregate(responses []protocol.Fields, custom func(tasks [][]protocol.Fields) map[string]any) (protocol.AggregateMetricsResponse, error) {
	return aggregatorOf(responses).metrics(custom)
}

// aggregatorOf returns an aggregator that has added responses.
func aggregatorOf(responses []protocol.Fields) *aggregator {
	a := &aggregator{}
	for _, r := range responses {
		a.add(r)
	}
	return a
}

// aggregator gathers verify responses one by one, profiling each scored
// one as it comes (the streamed /aggregate_metrics reads them while the
// collection runs), for metrics to compute the statistics over them all.
type aggregator struct {
	responses, scored []protocol.Fields
	rows              []*profiled // of scored, in its order
}

// add takes one more verify response.
func (a *aggregator) add(r protocol.Fields) {
	a.responses = append(a.responses, r)
	if raw, ok := r.Get(protocol.KeyMaskSample); !ok || !truthy(raw) {
		a.scored = append(a.scored, r)
		a.rows = append(a.rows, profile(r))
	}
}

// metrics computes the aggregate metrics of the responses added (see
// aggregate).
func (a *aggregator) metrics(custom func(tasks [][]protocol.Fields) map[string]any) (protocol.AggregateMetricsResponse, error) {
	p := a.prepare()
	extra, err := p.custom(custom)
	if err != nil {
		return protocol.AggregateMetricsResponse{}, err
	}
	out := p.summary(extra)
	p.eachGroup(0, len(p.bounds)-1, func(g []byte) {
		out.GroupLevelMetrics = append(out.GroupLevelMetrics, json.RawMessage(bytes.Clone(g)))
	})
	return out, nil
}

// prepared is an aggregator's responses made ready for the statistics:
// the scored rows in upstream's order, the columns, and where each task's
// group of rows starts. Its methods only read it, so the group objects
// and the summary can be computed at the same time.
type prepared struct {
	responses, scored []protocol.Fields
	rows              []*profiled
	columns           []string
	keys              map[string][][]byte // statKeys(columns)
	// bounds holds the index in rows of each group's first row, then
	// len(rows): group i is rows[bounds[i]:bounds[i+1]].
	bounds []int
	// perTask holds, by task index, the members the hook's
	// per_task_metrics adds to (or replaces in) that task's group object.
	perTask map[int]protocol.Fields
}

// prepare sorts the scored rows as upstream aligns them and finds the
// columns and the groups.
func (a *aggregator) prepare() *prepared {
	p := &prepared{responses: a.responses, scored: a.scored, rows: a.rows}
	if len(p.rows) == 0 {
		p.bounds = []int{0}
		return p
	}
	// Upstream aligns results by (task, rollout) key before profiling,
	// so its columns come in the order they first appear in that order.
	rows := p.rows
	sort.SliceStable(rows, func(i, j int) bool {
		if rows[i].task != rows[j].task {
			return rows[i].task < rows[j].task
		}
		return rows[i].rollout < rows[j].rollout
	})
	seen := map[string]bool{}
	for i, r := range rows {
		for _, c := range r.columns {
			if !seen[c] {
				seen[c] = true
				p.columns = append(p.columns, c)
			}
		}
		if i == 0 || r.task != rows[i-1].task {
			p.bounds = append(p.bounds, i)
		}
	}
	p.bounds = append(p.bounds, len(rows))
	p.keys = statKeys(p.columns)
	return p
}

// custom runs the benchmark's own compute_metrics hook (nil for none)
// over the scored responses grouped by task and returns what joins
// agent_metrics; nil without a hook or anything scored. As upstream
// (reward_profile.py, compute_aggregate_metrics), a per_task_metrics
// member of its result does not: it is a list of objects, each naming its
// task by _ng_task_index, whose other members are set on that task's
// group object (see perTask); an error says why one cannot be.
func (p *prepared) custom(hook func(tasks [][]protocol.Fields) map[string]any) (map[string]any, error) {
	if hook == nil || len(p.scored) == 0 {
		return nil, nil
	}
	out := hook(groupByTask(p.scored))
	list, ok := out[keyPerTaskMetrics]
	if !ok {
		return out, nil
	}
	out = maps.Clone(out)
	delete(out, keyPerTaskMetrics)
	raw, err := json.Marshal(list)
	if err != nil {
		return nil, fmt.Errorf("compute_metrics: %s: %w", keyPerTaskMetrics, err)
	}
	var entries []protocol.Fields
	if err := json.Unmarshal(raw, &entries); err != nil {
		return nil, fmt.Errorf("compute_metrics: %s must be a list of objects: %w", keyPerTaskMetrics, err)
	}
	for _, e := range entries {
		var task int
		if ok, err := e.Decode(protocol.KeyTaskIndex, &task); !ok || err != nil {
			return nil, fmt.Errorf("compute_metrics: every %s entry needs an integer %s", keyPerTaskMetrics, protocol.KeyTaskIndex)
		}
		if p.perTask == nil {
			p.perTask = map[int]protocol.Fields{}
		}
		// A later entry for the same task replaces an earlier one whole,
		// as upstream's dict of them by task index does.
		var members protocol.Fields
		for _, m := range e {
			if m.Key != protocol.KeyTaskIndex {
				members.SetRaw(m.Key, m.Value)
			}
		}
		p.perTask[task] = members
	}
	return out, nil
}

// eachGroup hands emit the group_level_metrics objects of groups from to
// to-1, in order; each is valid until the next.
func (p *prepared) eachGroup(from, to int, emit func(group []byte)) {
	var buf []byte // one group's object, reused
	var scratch []column
	for i := from; i < to; i++ {
		group := p.rows[p.bounds[i]:p.bounds[i+1]]
		scratch = columnsInto(scratch[:0], p.columns, group)
		buf = appendGroup(buf[:0], p.keys, scratch, group)
		if extra, ok := p.perTask[group[0].task]; ok {
			buf = withMembers(buf, extra)
		}
		emit(buf)
	}
}

// withMembers returns the encoded object group with each of extra's
// members set: in place where group has the name, else after its last
// member, as a Python dict's update sets them.
func withMembers(group []byte, extra protocol.Fields) []byte {
	var f protocol.Fields
	if err := f.UnmarshalJSON(group); err != nil {
		return group // the group is this package's own encoding: not reached
	}
	for _, m := range extra {
		f.SetRaw(m.Key, m.Value)
	}
	b, err := f.MarshalJSON()
	if err != nil {
		return group
	}
	return append(group[:0], b...)
}

// summary computes everything but group_level_metrics (left empty), with
// custom (the hook's metrics) joining agent_metrics after the coverage
// ones, before num_repeats.
func (p *prepared) summary(custom map[string]any) protocol.AggregateMetricsResponse {
	out := protocol.AggregateMetricsResponse{GroupLevelMetrics: []json.RawMessage{}, AgentMetrics: map[string]any{},
		KeyMetrics: map[string]any{}, RepeatLevelMetrics: []json.RawMessage{}}
	responses, scored, rows, columns := p.responses, p.scored, p.rows, p.columns
	if len(responses) == 0 {
		return out
	}
	coverage := coverageMetrics(responses, scored)
	out.PerfSummary = perfSummary(responses)
	if len(scored) == 0 {
		for k, v := range coverage {
			out.AgentMetrics[k] = v
			out.KeyMetrics[k] = v
		}
		return out
	}
	describe(columnsInto(nil, columns, rows), len(rows), func(stat int, c *column, v float64) {
		out.AgentMetrics[stats[stat]+"/"+c.name] = v
	})
	repeats := repeatLevel(columns, rows)
	for _, r := range repeats {
		raw, _ := r.fields.MarshalJSON()
		out.RepeatLevelMetrics = append(out.RepeatLevelMetrics, raw)
	}
	for k, v := range acrossRepeatStats(repeats) {
		out.AgentMetrics[k] = v
	}
	for k, v := range coverage {
		out.AgentMetrics[k] = v
	}
	for k, v := range custom {
		out.AgentMetrics[k] = v
	}
	distinct := map[int]bool{}
	for _, r := range responses {
		distinct[index(r, protocol.KeyRolloutIndex)] = true
	}
	out.AgentMetrics[keyNumRepeats] = len(distinct)
	out.KeyMetrics = keyMetrics(out.AgentMetrics)
	for k, v := range coverage {
		out.KeyMetrics[k] = v
	}
	return out
}

// coverageMetrics says how much of the run the quality metrics were
// computed from; empty when nothing was masked.
func coverageMetrics(all, scored []protocol.Fields) map[string]any {
	if len(all) == len(scored) {
		return nil
	}
	total, measured := map[int]bool{}, map[int]bool{}
	for _, r := range all {
		total[index(r, protocol.KeyTaskIndex)] = true
	}
	for _, r := range scored {
		measured[index(r, protocol.KeyTaskIndex)] = true
	}
	return map[string]any{
		keyMeasuredRollouts: len(scored),
		keyMaskedRollouts:   len(all) - len(scored),
		keyMeasuredTasks:    len(measured),
		keyFullyMaskedTasks: len(total) - len(measured),
	}
}

// keyMetrics returns the mean/* entries of agent metrics.
func keyMetrics(agent map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range agent {
		if strings.HasPrefix(k, keyMetricsMeanPrefix) {
			out[k] = v
		}
	}
	return out
}

// profiled is one scored verify response as the statistics see it.
type profiled struct {
	task, rollout int
	columns       []string           // numeric members, in order
	vals          []float64          // their values, in that order
	values        map[string]float64 // by member (the last, for a repeated name)
	repeated      bool               // a member name repeats
	info          []byte             // its rollout_infos entry, encoded
}

// value returns the row's value of column c; at is c's position among
// all the columns. Rows mostly have every column, in one order, so the
// value at that position is looked at first, before the map.
func (p *profiled) value(c string, at int) (float64, bool) {
	if at < len(p.columns) && p.columns[at] == c && !p.repeated {
		return p.vals[at], true
	}
	v, ok := p.values[c]
	return v, ok
}

// metricMember reports whether a result member can be a metric column:
// upstream skips every member whose name begins with "_" (the indexes,
// _ng_attempt_index, the collector's own members), and mask_sample,
// which it strips from the scored responses.
func metricMember(key string) bool {
	return !strings.HasPrefix(key, "_") && key != protocol.KeyMaskSample && key != keyAgentName
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
		if !metricMember(m.Key) {
			continue
		}
		if v, _, ok := numeric(m.Value); ok {
			if _, seen := p.values[m.Key]; seen {
				p.repeated = true
			}
			p.columns = append(p.columns, m.Key)
			p.vals = append(p.vals, v)
			p.values[m.Key] = v
		}
	}

	var info protocol.Fields
	id := make([]byte, 0, 24)
	id = append(id, '"')
	id = strconv.AppendInt(id, int64(p.task), 10)
	id = append(id, ':')
	id = strconv.AppendInt(id, int64(p.rollout), 10)
	id = append(id, '"')
	info.SetRaw(keyRolloutInfoID, id)
	info.SetRaw(protocol.KeyTaskIndex, strconv.AppendInt(nil, int64(p.task), 10))
	info.SetRaw(protocol.KeyRolloutIndex, strconv.AppendInt(nil, int64(p.rollout), 10))
	if raw, ok := r.Get(protocol.KeyReward); ok {
		info.SetRaw(protocol.KeyReward, raw)
	}
	for _, u := range usage {
		if _, text, ok := numeric(u.Value); ok {
			info.SetRaw(u.Key, text)
		}
	}
	for _, m := range r {
		if m.Key == protocol.KeyReward || m.Key == protocol.KeyResponse || m.Key == protocol.KeyMaskSample || strings.HasPrefix(m.Key, "_") {
			continue
		}
		if _, text, ok := numeric(m.Value); ok {
			info.SetRaw(m.Key, text)
		}
	}
	p.info, _ = info.MarshalJSON()
	return p
}

// usageOf returns the members of r's response.usage object, if any, as
// encoding/json gives a "usage" field of that object (its name matched
// without regard to case, the last match kept). The response is read by
// its outline when it has one member so named, an object, and no name
// with an escape (the values are slices of it, valid JSON as decoded);
// else it is decoded through encoding/json.
func usageOf(r protocol.Fields) protocol.Fields {
	raw, ok := r.Get(protocol.KeyResponse)
	if !ok || jsonskim.Kind(raw) != '{' {
		return nil
	}
	if members, ok := jsonskim.Object(raw); ok {
		var usage []byte
		matches, escaped := 0, false
		for _, m := range members {
			escaped = escaped || m.Escaped()
			if bytes.EqualFold(m.Key, []byte("usage")) {
				usage = m.Value
				matches++
			}
		}
		if !escaped && matches == 0 {
			return nil
		}
		if inner, ok := jsonskim.Object(usage); ok && !escaped && matches == 1 {
			out := make(protocol.Fields, 0, len(inner))
			for _, m := range inner {
				if m.Escaped() {
					out = nil
					break
				}
				out.SetRaw(string(m.Key), m.Value)
			}
			if out != nil {
				return out
			}
		}
	}
	var resp struct {
		Usage protocol.Fields `json:"usage"`
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

// truthy reports whether raw is a value Python counts as true: not null,
// false, 0, "", [] or {}.
func truthy(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return false
	}
	switch s := string(raw); {
	case s == "null" || s == "false" || s == `""` || s == "[]" || s == "{}":
		return false
	case s[0] == '[' || s[0] == '{':
		var v any
		if json.Unmarshal(raw, &v) != nil {
			return false
		}
		switch x := v.(type) {
		case []any:
			return len(x) > 0
		case map[string]any:
			return len(x) > 0
		}
	}
	if v, _, ok := numeric(raw); ok {
		return v != 0
	}
	return true
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

// column is one metric's values over a set of rows.
type column struct {
	name string
	vals []float64
}

// columnsInto collects the values of every column over rows into dst
// (reusing its value slices), leaving out columns none of them has.
func columnsInto(dst []column, columns []string, rows []*profiled) []column {
	n := 0
	for ci, c := range columns {
		var vals []float64
		if n < cap(dst) {
			vals = dst[:cap(dst)][n].vals[:0]
		}
		for _, r := range rows {
			if v, ok := r.value(c, ci); ok {
				vals = append(vals, v)
			}
		}
		if len(vals) > 0 {
			dst = append(dst[:n], column{c, vals})
			n++
		}
	}
	return dst[:n]
}

// describe computes the statistics of every column of cols (the
// columns of n rows) stat by stat and column by column (mean/a, mean/b,
// max/a, ...), and hands each to emit, leaving out what is undefined,
// as upstream's profiler drops NaN entries.
func describe(cols []column, n int, emit func(stat int, c *column, v float64)) {
	// A standard deviation needs two values. When no column has two,
	// upstream reports 0 for the columns every row has.
	anyStd := false
	for _, c := range cols {
		if len(c.vals) >= 2 {
			anyStd = true
			break
		}
	}
	for stat, name := range stats {
		for i := range cols {
			c := &cols[i]
			var v float64
			switch name {
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
				case !anyStd && len(c.vals) == n:
					v = 0
				default:
					continue
				}
			}
			if math.IsNaN(v) || math.IsInf(v, 0) {
				continue
			}
			emit(stat, c, v)
		}
	}
}

// repeat is one entry of repeat_level_metrics, with its mean/* values
// kept for the statistics across repeats.
type repeat struct {
	fields protocol.Fields
	means  map[string]float64
}

// repeatLevel computes repeat_level_metrics: per rollout index, when the
// rows have more than one, statistics over that repeat's rows.
// Upstream takes the columns in name order here.
func repeatLevel(columns []string, rows []*profiled) []repeat {
	byRepeat := map[int][]*profiled{}
	tasks := map[int]bool{}
	for _, r := range rows {
		byRepeat[r.rollout] = append(byRepeat[r.rollout], r)
		tasks[r.task] = true
	}
	if len(byRepeat) < 2 {
		return nil
	}
	sorted := slices.Clone(columns)
	slices.Sort(sorted)
	var out []repeat
	for _, idx := range slices.Sorted(maps.Keys(byRepeat)) {
		group := byRepeat[idx]
		present := map[int]bool{}
		for _, r := range group {
			present[r.task] = true
		}
		rep := repeat{means: map[string]float64{}}
		_ = rep.fields.Set(protocol.KeyRolloutIndex, idx)
		_ = rep.fields.Set(keySampleCount, len(present))
		_ = rep.fields.Set(keyMissingCount, len(tasks)-len(present))
		for _, c := range columnsInto(nil, sorted, group) {
			n := len(c.vals)
			m := mean(c.vals)
			sd := 0.0
			if n > 1 {
				sd = std(c.vals)
			}
			sem := sd / math.Sqrt(float64(n))
			_ = rep.fields.Set("mean/"+c.name, m)
			_ = rep.fields.Set("median/"+c.name, median(c.vals))
			_ = rep.fields.Set("std/"+c.name, sd)
			_ = rep.fields.Set("sem/"+c.name, sem)
			_ = rep.fields.Set("min/"+c.name, slices.Min(c.vals))
			_ = rep.fields.Set("max/"+c.name, slices.Max(c.vals))
			_ = rep.fields.Set("p25/"+c.name, quantile(c.vals, 0.25))
			_ = rep.fields.Set("p75/"+c.name, quantile(c.vals, 0.75))
			if lo, hi, ok := interval95(m, sem, n); ok {
				_ = rep.fields.Set("ci_low_95/"+c.name, lo)
				_ = rep.fields.Set("ci_high_95/"+c.name, hi)
			}
			rep.means["mean/"+c.name] = m
		}
		out = append(out, rep)
	}
	return out
}

// acrossRepeatStats computes the *_across_repeats/* statistics of every
// primary repeat-level metric (upstream's is_primary_metric: of the
// repeat-level members, the mean/* ones) over the repeats that have it.
func acrossRepeatStats(repeats []repeat) map[string]any {
	names := map[string]bool{}
	for _, r := range repeats {
		for k := range r.means {
			if isPrimaryMetric(k) {
				names[k] = true
			}
		}
	}
	out := map[string]any{}
	for name := range names {
		var vals []float64
		for _, r := range repeats {
			if v, ok := r.means[name]; ok {
				vals = append(vals, v)
			}
		}
		n := len(vals)
		m := mean(vals)
		sd := 0.0
		if n > 1 {
			sd = std(vals)
		}
		se := sd / math.Sqrt(float64(n))
		out["mean"+acrossRepeats+name] = m
		out["median"+acrossRepeats+name] = median(vals)
		out["std"+acrossRepeats+name] = sd
		out["min"+acrossRepeats+name] = slices.Min(vals)
		out["max"+acrossRepeats+name] = slices.Max(vals)
		out["se"+acrossRepeats+name] = se
		if lo, hi, ok := interval95(m, se, n); ok {
			out["ci_low_95"+acrossRepeats+name] = lo
			out["ci_high_95"+acrossRepeats+name] = hi
		}
	}
	return out
}

// isPrimaryMetric reports whether a metric name is a point estimate that
// is summarised across repeats.
// It leaves out, as upstream's metrics_config.py does, some names, the
// statistics other than the mean (by prefix), and other summaries and
// bounds (by suffix).
func isPrimaryMetric(name string) bool {
	switch name {
	case protocol.KeyTaskIndex, protocol.KeyRolloutIndex, protocol.KeyAttemptIndex,
		keySampleCount, keyMissingCount, keyNumRepeats, "token_usage_version":
		return false
	}
	if strings.Contains(name, acrossRepeats) {
		return false
	}
	for _, p := range []string{"max/", "min/", "median/", "std/", "sem/", "se/", "p25/", "p75/",
		"ci_low_95/", "ci_high_95/", histogramStatPrefix} {
		if strings.HasPrefix(name, p) {
			return false
		}
	}
	for _, s := range []string{"/max", "/min", "/median", "/p5", "/p25", "/p75", "/p95",
		"/ci_low_95", "/ci_high_95", "/ci_lower", "/ci_upper", "_ci_lower", "_ci_upper", "_ci95_lower",
		"_ci95_upper", keyMetricAttemptIndex, "/std_dev_across_runs", "/std_err_across_runs", "/avg_sample_std_dev"} {
		if strings.HasSuffix(name, s) {
			return false
		}
	}
	return true
}

// perfSummary summarises the ng_perf objects of responses as upstream's
// compute_perf_summary does; nil when none has one. Coverages are over
// every response.
func perfSummary(responses []protocol.Fields) map[string]any {
	var records []map[string]json.RawMessage
	for _, r := range responses {
		raw, ok := r.Get(keyPerf)
		if !ok {
			continue
		}
		var rec map[string]json.RawMessage
		if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' || json.Unmarshal(raw, &rec) != nil {
			continue
		}
		records = append(records, rec)
	}
	if len(records) == 0 {
		return nil
	}
	total := float64(len(responses))
	values := func(key string) []float64 {
		var out []float64
		for _, rec := range records {
			if v, _, ok := numeric(rec[key]); ok {
				out = append(out, v)
			}
		}
		return out
	}
	tokenCovered := 0
	for _, rec := range records {
		if v, _, ok := numeric(rec["token_observability_coverage"]); ok && v > 0 {
			tokenCovered++
		}
	}
	out := map[string]any{
		"overall_observability_coverage": float64(len(records)) / total,
		"token_observability_coverage":   float64(tokenCovered) / total,
	}
	for _, field := range []string{"prompt_tokens", "cached_prompt_tokens", "completion_tokens", "reasoning_tokens"} {
		if vals := values(field); len(vals) > 0 {
			out["mean_"+field] = mean(vals)
			out["median_"+field] = median(vals)
			out["total_"+field] = sum(vals)
		}
	}
	if vals := values("num_turns"); len(vals) > 0 {
		out["mean_num_turns"] = mean(vals)
		out["median_num_turns"] = median(vals)
		out["std_num_turns"] = pstd(vals)
		out["min_num_turns"] = slices.Min(vals)
		out["p90_num_turns"] = quantile(vals, 0.9)
		out["max_num_turns"] = slices.Max(vals)
	}
	var perTurn []float64
	for _, rec := range records {
		tokens, _, ok1 := numeric(rec["completion_tokens"])
		turns, _, ok2 := numeric(rec["num_turns"])
		if ok1 && ok2 && turns > 0 {
			perTurn = append(perTurn, tokens/turns)
		}
	}
	if len(perTurn) > 0 {
		out["mean_tokens_per_turn"] = mean(perTurn)
		out["median_tokens_per_turn"] = median(perTurn)
	}
	if vals := values("total_latency_ms"); len(vals) > 0 {
		out["total_latency_p50_ms"] = quantile(vals, 0.5)
		out["total_latency_p90_ms"] = quantile(vals, 0.9)
		out["total_latency_p99_ms"] = quantile(vals, 0.99)
		out["total_latency_mean_ms"] = mean(vals)
	}
	return out
}

func sum(vals []float64) float64 {
	var s float64
	for _, v := range vals {
		s += v
	}
	return s
}

func mean(vals []float64) float64 { return sum(vals) / float64(len(vals)) }

func median(vals []float64) float64 {
	s := slices.Clone(vals)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// quantile is the q-quantile of vals with linear interpolation between
// the closest ranks, as pandas' Series.quantile computes it by default.
func quantile(vals []float64, q float64) float64 {
	s := slices.Clone(vals)
	slices.Sort(s)
	pos := q * float64(len(s)-1)
	lo := int(math.Floor(pos))
	if lo >= len(s)-1 {
		return s[len(s)-1]
	}
	frac := pos - float64(lo)
	return s[lo] + (s[lo+1]-s[lo])*frac
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

// pstd is the population standard deviation (n in the denominator).
func pstd(vals []float64) float64 {
	m := mean(vals)
	var sq float64
	for _, v := range vals {
		d := v - m
		sq += d * d
	}
	return math.Sqrt(sq / float64(len(vals)))
}

// interval95 is the two-sided 95 % Student t interval around m with
// standard error se over n values; none for n < 2, and m itself at both
// ends when se is 0, as upstream's _confidence_interval gives them.
func interval95(m, se float64, n int) (lo, hi float64, ok bool) {
	if n <= 1 {
		return 0, 0, false
	}
	if se == 0 {
		return m, m, true
	}
	d := studentTQuantile(confidence95Quantile, float64(n-1)) * se
	return m - d, m + d, true
}

// studentTQuantile returns the p-quantile (p in (0.5, 1)) of Student's t
// distribution with df degrees of freedom. With x = df/(df+t²), the
// upper tail 1-p equals I_x(df/2, 1/2)/2, where I is the regularised
// incomplete beta function; x is found by bisection (I_x is increasing
// in x), which reaches float64 precision in well under 200 halvings.
func studentTQuantile(p, df float64) float64 {
	target := 2 * (1 - p)
	a, b := df/2, 0.5
	lo, hi := 0.0, 1.0
	for range 200 {
		mid := (lo + hi) / 2
		if mid == lo || mid == hi {
			break
		}
		if regIncBeta(mid, a, b) < target {
			lo = mid
		} else {
			hi = mid
		}
	}
	x := (lo + hi) / 2
	return math.Sqrt(df * (1 - x) / x)
}

// regIncBeta is the regularised incomplete beta function I_x(a, b),
// from its continued fraction (evaluated with the modified Lentz
// method), using I_x(a, b) = 1 - I_{1-x}(b, a) where the fraction
// converges slowly.
func regIncBeta(x, a, b float64) float64 {
	switch {
	case x <= 0:
		return 0
	case x >= 1:
		return 1
	case x > (a+1)/(a+b+2):
		return 1 - regIncBeta(1-x, b, a)
	}
	la, _ := math.Lgamma(a)
	lb, _ := math.Lgamma(b)
	lab, _ := math.Lgamma(a + b)
	front := math.Exp(a*math.Log(x)+b*math.Log1p(-x)-(la+lb-lab)) / a
	const tiny = 1e-300
	f, c, d := 1.0, 1.0, 0.0
	for i := 0; i <= 10000; i++ {
		var num float64
		m := float64(i / 2)
		switch {
		case i == 0:
			num = 1
		case i%2 == 0:
			num = m * (b - m) * x / ((a + 2*m - 1) * (a + 2*m))
		default:
			num = -(a + m) * (a + b + m) * x / ((a + 2*m) * (a + 2*m + 1))
		}
		d = 1 + num*d
		if math.Abs(d) < tiny {
			d = tiny
		}
		d = 1 / d
		c = 1 + num/c
		if math.Abs(c) < tiny {
			c = tiny
		}
		cd := c * d
		f *= cd
		if math.Abs(1-cd) < 1e-16 {
			break
		}
	}
	return front * (f - 1)
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
