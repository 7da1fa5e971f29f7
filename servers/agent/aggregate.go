package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/gymlens/gymlens/protocol"
)

// aggregateMetrics serves POST /aggregate_metrics: the resources server
// aggregates (a non-2xx answer is a 500 here, as upstream raises). With
// skip_verification there is nothing it could aggregate, and the answer
// is upstream's empty metrics, with a warning.
func (a *agent) aggregateMetrics(ctx context.Context, req protocol.AggregateMetricsRequest) (protocol.AggregateMetricsResponse, error) {
	if a.cfg.SkipVerification {
		a.warnNoAggregates.Do(func() {
			slog.Default().Warn("agent: aggregate metrics are empty because skip_verification is set; " +
				"disable aggregation in the collector to write no aggregate metrics file")
		})
		return emptyMetrics(protocol.AggregateMetricsResponse{}), nil
	}
	if req.VerifyResponses == nil {
		req.VerifyResponses = []protocol.Fields{}
	}
	var out protocol.AggregateMetricsResponse
	if err := a.client.PostJSON(ctx, a.aggregateURL, req, &out); err != nil {
		return out, failed(fmt.Errorf("aggregate_metrics: %w", err))
	}
	return emptyMetrics(out), nil
}

// emptyMetrics gives every member of m that is nil its empty value, so it
// encodes as [] or {} (upstream's defaults) rather than null.
func emptyMetrics(m protocol.AggregateMetricsResponse) protocol.AggregateMetricsResponse {
	if m.GroupLevelMetrics == nil {
		m.GroupLevelMetrics = []json.RawMessage{}
	}
	if m.AgentMetrics == nil {
		m.AgentMetrics = map[string]any{}
	}
	if m.KeyMetrics == nil {
		m.KeyMetrics = map[string]any{}
	}
	return m
}
