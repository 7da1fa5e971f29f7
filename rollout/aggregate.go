package rollout

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/internal/jsonskim"
	"github.com/gymlens/gymlens/protocol"
	"github.com/gymlens/gymlens/server"
)

// AgentMetrics is one entry of the aggregate metrics file: what the
// /aggregate_metrics of the environment server that ran a group of
// rollouts (or of their agent, when they were sent to it directly)
// answered for its successful results, in upstream's shape.
type AgentMetrics struct {
	// AgentRef names the agent: {"name": ...}; when several groups have
	// one agent (two environment servers front it), each is named by its
	// environment server instead, as upstream labels them.
	AgentRef struct {
		Name string `json:"name"`
	} `json:"agent_ref"`
	// EnvironmentServer is the environment server the rollouts ran
	// through; "" (left out) for rollouts sent to their agent directly.
	EnvironmentServer string `json:"_ng_environment_server,omitempty"`
	// AgentMetrics holds the statistics of every numeric member
	// ("mean/reward", "max/reward", ...); KeyMetrics the headline ones.
	AgentMetrics map[string]any `json:"agent_metrics"`
	KeyMetrics   map[string]any `json:"key_metrics"`
	// GroupLevelMetrics are the per-task statistics, RepeatLevelMetrics
	// the per-repeat ones, as the server sent them.
	GroupLevelMetrics  []json.RawMessage `json:"group_level_metrics"`
	RepeatLevelMetrics []json.RawMessage `json:"repeat_level_metrics"`
	// PerfSummary is the efficiency summary of the rollouts' ng_perf
	// records; left out when the server sent none.
	PerfSummary map[string]any `json:"perf_summary,omitempty"`
}

// stripped reports the members of a result that /aggregate_metrics is
// not sent, as upstream strips them: the episode (but see metricsEntry),
// the prompt and the observability payloads.
func stripped(key string) bool {
	switch key {
	case protocol.KeyResponse, protocol.KeyParams, "ng_agent_observations", "ng_model_call_capture", "ng_trajectory":
		return true
	}
	return false
}

// metricsEntry returns result as /aggregate_metrics takes it, encoded:
// without the stripped members, but with the response's usage and
// incomplete_details kept (when not null) as {"response": {...}}.
func metricsEntry(result protocol.Fields) []byte {
	out := make(protocol.Fields, 0, len(result))
	for _, m := range result {
		if !stripped(m.Key) {
			out = append(out, m)
		}
	}
	if raw, ok := result.Get(protocol.KeyResponse); ok {
		if usage, details, ok := responseSummary(raw); ok {
			var kept protocol.Fields
			if len(usage) > 0 && !isNull(usage) {
				kept.SetRaw("usage", usage)
			}
			if len(details) > 0 && !isNull(details) {
				kept.SetRaw("incomplete_details", details)
			}
			if len(kept) > 0 {
				b, _ := kept.MarshalJSON()
				out.SetRaw(protocol.KeyResponse, b)
			}
		}
	}
	b, _ := out.MarshalJSON() // the members are raw JSON already
	return b
}

// responseSummary reads the usage and incomplete_details members of a
// response as encoding/json gives them to fields of those names (names
// matched without regard to case, the last match kept); ok is false when
// raw is not an object. The response is the largest part of a result,
// so it is skimmed, not decoded, unless a member name holds an escape.
func responseSummary(raw json.RawMessage) (usage, details json.RawMessage, ok bool) {
	members, ok := jsonskim.Object(raw)
	escaped := false
	for _, m := range members {
		escaped = escaped || m.Escaped()
	}
	if !ok || escaped {
		var resp struct {
			Usage             json.RawMessage `json:"usage"`
			IncompleteDetails json.RawMessage `json:"incomplete_details"`
		}
		if json.Unmarshal(raw, &resp) != nil {
			return nil, nil, false
		}
		return resp.Usage, resp.IncompleteDetails, true
	}
	for _, m := range members {
		switch {
		case bytes.EqualFold(m.Key, []byte("usage")):
			usage = m.Value
		case bytes.EqualFold(m.Key, []byte("incomplete_details")):
			details = m.Value
		}
	}
	return usage, details, true
}

// pendingMetrics is one target's /aggregate_metrics request, built as
// its results arrive: the encoded entries, comma-separated, after the
// opening of {"verify_responses": [...]}, so that the closing call
// sends what is there with no encoding left to do.
type pendingMetrics struct {
	body []byte
	n    int // entries in body
}

// verifyResponsesOpen opens the request body; the list and the object
// are closed when it is sent.
const verifyResponsesOpen = `{"verify_responses":[`

// add appends one encoded entry.
func (p *pendingMetrics) add(entry []byte) {
	if p.body == nil {
		p.body = append(make([]byte, 0, 64<<10), verifyResponsesOpen...)
	}
	if p.n > 0 {
		p.body = append(p.body, ',')
	}
	p.body = append(p.body, entry...)
	p.n++
}

// request returns the whole body, closed.
func (p *pendingMetrics) request() server.RawJSON {
	return server.RawJSON(append(p.body, ']', '}'))
}

// priorResult is a result an earlier run wrote to the output, with what
// routes it to its group.
type priorResult struct {
	server, agent string
	entry         []byte // metricsEntry of the result
}

// routePrior groups the results of earlier runs by target key: a result
// stamped with an environment server under that server (which must be
// in the fleet), else under its agent's current target. A result whose
// agent the options cannot reach is left out.
func routePrior(r *router, prior []priorResult) (map[string]*pendingMetrics, error) {
	out := map[string]*pendingMetrics{}
	for _, p := range prior {
		var t *target
		var err error
		if p.server != "" {
			if t, err = r.forServer(p.server, p.agent); err != nil {
				return nil, fmt.Errorf("rollout: the output holds results of environment server %q, which is not in the fleet; "+
					"aggregate them with the fleet that produced them", p.server)
			}
		} else if t, err = r.forAgent(p.agent); err != nil {
			continue
		}
		if out[t.key] == nil {
			out[t.key] = &pendingMetrics{}
		}
		out[t.key].add(p.entry)
	}
	return out, nil
}

// aggregate sends each target (environment server, or agent called
// directly) the results it produced that the output holds (this run's
// and, on resume, the earlier ones), in target name order, and writes
// the answers to path. Targets with no successful result are left out;
// with no entry at all no file is written. The first failed call is
// returned, and nothing is written then.
func (c *collector) aggregate(ctx context.Context, path string) ([]AgentMetrics, error) {
	keys := sortedKeys(c.entries)
	agentOf := map[string]string{}
	for _, key := range keys {
		if t := c.router.made[key]; t != nil && c.entries[key].n > 0 {
			agentOf[key] = t.agent
		}
	}
	labels := labelRuns(agentOf)
	var out []AgentMetrics
	for _, key := range keys {
		t, entries := c.router.made[key], c.entries[key]
		if t == nil || entries.n == 0 {
			continue
		}
		what := "agent " + key
		if t.server != "" {
			what = "environment server " + key
		}
		var raw json.RawMessage // checked as JSON by the client's decoder
		if err := c.client.PostJSON(ctx, t.aggregate, entries.request(), &raw); err != nil {
			return nil, fmt.Errorf("rollout: aggregate metrics of %s: %w", what, err)
		}
		resp, err := decodeMetrics(raw)
		if err != nil {
			return nil, fmt.Errorf("rollout: aggregate metrics of %s: %w", what, err)
		}
		m := AgentMetrics{EnvironmentServer: t.server, AgentMetrics: resp.AgentMetrics, KeyMetrics: resp.KeyMetrics,
			GroupLevelMetrics: resp.GroupLevelMetrics, RepeatLevelMetrics: resp.RepeatLevelMetrics, PerfSummary: resp.PerfSummary}
		m.AgentRef.Name = labels[key]
		if m.AgentMetrics == nil {
			m.AgentMetrics = map[string]any{}
		}
		if m.KeyMetrics == nil {
			m.KeyMetrics = map[string]any{}
		}
		if m.GroupLevelMetrics == nil {
			m.GroupLevelMetrics = []json.RawMessage{}
		}
		if m.RepeatLevelMetrics == nil {
			m.RepeatLevelMetrics = []json.RawMessage{}
		}
		out = append(out, m)
	}
	if len(out) == 0 {
		return nil, nil
	}
	b, err := encodeMetricsFile(out)
	if err != nil {
		return nil, fmt.Errorf("rollout: aggregate metrics: %w", err)
	}
	if err := os.WriteFile(path, b, contract.RunFilePerm); err != nil {
		return nil, fmt.Errorf("rollout: aggregate metrics: %w", err)
	}
	return out, nil
}

// labelRuns names each group (by key) after its agent when that agent
// has no other group, else after the key, and falls back to the key
// while a name still repeats, as upstream's label_runs does.
func labelRuns(agentOf map[string]string) map[string]string {
	keysOf := map[string]int{}
	for _, agent := range agentOf {
		if agent != "" {
			keysOf[agent]++
		}
	}
	labels := map[string]string{}
	for key, agent := range agentOf {
		labels[key] = key
		if agent != "" && keysOf[agent] == 1 {
			labels[key] = agent
		}
	}
	for {
		count := map[string]int{}
		for _, l := range labels {
			count[l]++
		}
		changed := false
		for key, l := range labels {
			if count[l] > 1 && l != key {
				labels[key] = key
				changed = true
			}
		}
		if !changed {
			return labels
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
