package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/protocol"
)

// AgentMetrics is one entry of the aggregate metrics file: what an
// agent's /aggregate_metrics answered for its successful results.
type AgentMetrics struct {
	// AgentRef names the agent: {"name": ...}.
	AgentRef struct {
		Name string `json:"name"`
	} `json:"agent_ref"`
	// AgentMetrics holds the statistics of every numeric member
	// ("mean/reward", "max/reward", ...); KeyMetrics the headline ones.
	AgentMetrics map[string]any `json:"agent_metrics"`
	KeyMetrics   map[string]any `json:"key_metrics"`
	// GroupLevelMetrics are the per-group statistics, as the agent sent
	// them.
	GroupLevelMetrics []json.RawMessage `json:"group_level_metrics"`
}

// heavyKeys are the members of a result that /aggregate_metrics is not
// sent: the episode, the prompt, observability payloads, and the
// collector's own record.
var heavyKeys = map[string]bool{
	protocol.KeyResponse: true, protocol.KeyParams: true,
	"ng_agent_observations": true, "ng_model_call_capture": true, "ng_trajectory": true,
	KeyBookkeeping: true,
}

// metricsEntry returns result as /aggregate_metrics takes it: without
// the heavy members, but with the response's usage kept as
// {"response": {"usage": ...}}.
func metricsEntry(result protocol.Fields) protocol.Fields {
	out := make(protocol.Fields, 0, len(result))
	for _, m := range result {
		if !heavyKeys[m.Key] {
			out = append(out, m)
		}
	}
	if raw, ok := result.Get(protocol.KeyResponse); ok {
		var resp struct {
			Usage json.RawMessage `json:"usage"`
		}
		if json.Unmarshal(raw, &resp) == nil && truthy(resp.Usage) {
			out.SetRaw(protocol.KeyResponse, append(append([]byte(`{"usage":`), resp.Usage...), '}'))
		}
	}
	return out
}

// aggregate sends each agent the results it produced that the output
// holds (this run's and, on resume, the earlier ones), in agent name
// order, and writes the answers to path. Agents with no successful
// result, or with no URL in Options.Agents, are left out; with no entry
// at all no file is written. The first failed call is returned, and
// nothing is written then.
func (c *collector) aggregate(ctx context.Context, path string) ([]AgentMetrics, error) {
	var out []AgentMetrics
	for _, name := range sortedKeys(c.entries) {
		urls, ok := c.urls[name]
		entries := c.entries[name]
		if !ok || len(entries) == 0 {
			continue
		}
		var resp protocol.AggregateMetricsResponse
		if err := c.client.PostJSON(ctx, urls.aggregate, protocol.AggregateMetricsRequest{VerifyResponses: entries}, &resp); err != nil {
			return nil, fmt.Errorf("rollout: aggregate metrics of agent %s: %w", name, err)
		}
		m := AgentMetrics{AgentMetrics: resp.AgentMetrics, KeyMetrics: resp.KeyMetrics, GroupLevelMetrics: resp.GroupLevelMetrics}
		m.AgentRef.Name = name
		if m.AgentMetrics == nil {
			m.AgentMetrics = map[string]any{}
		}
		if m.KeyMetrics == nil {
			m.KeyMetrics = map[string]any{}
		}
		if m.GroupLevelMetrics == nil {
			m.GroupLevelMetrics = []json.RawMessage{}
		}
		out = append(out, m)
	}
	if len(out) == 0 {
		return nil, nil
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("rollout: aggregate metrics: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), contract.RunFilePerm); err != nil {
		return nil, fmt.Errorf("rollout: aggregate metrics: %w", err)
	}
	return out, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
