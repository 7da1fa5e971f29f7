package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/gymlens/gymlens/internal/jsonskim"
	"github.com/gymlens/gymlens/protocol"
	"github.com/gymlens/gymlens/server"
)

// aggregateMetrics serves POST /aggregate_metrics: the resources server
// aggregates (a non-2xx answer is a 500 here, as upstream raises). With
// skip_verification there is nothing it could aggregate, and the answer
// is upstream's empty metrics, with a warning.
//
// A whole collection's results pass through here, and a per-task answer
// comes back: a request of the usual shape is passed on as it came (see
// aggregateBody), and so is an answer of the usual shape
// (jsonskim.CompleteAggregateMetrics); only others are decoded, to check
// the request or fill upstream's defaults in the answer.
func (a *agent) aggregateMetrics(ctx context.Context, req aggregateBody) (server.RawJSON, error) {
	if a.cfg.SkipVerification {
		a.warnNoAggregates.Do(func() {
			slog.Default().Warn("agent: aggregate metrics are empty because skip_verification is set; " +
				"disable aggregation in the collector to write no aggregate metrics file")
		})
		return encodeMetrics(protocol.AggregateMetricsResponse{})
	}
	var raw json.RawMessage
	fwd := server.RawJSON(req.fwd)
	if fwd == nil {
		fwd = aggregateRequest(req.decoded.VerifyResponses)
	}
	if err := a.client.PostJSON(ctx, a.aggregateURL, fwd, &raw); err != nil {
		return nil, failed(fmt.Errorf("aggregate_metrics: %w", err))
	}
	if jsonskim.CompleteAggregateMetrics(raw) {
		return server.RawJSON(raw), nil
	}
	var out protocol.AggregateMetricsResponse
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, failed(fmt.Errorf("aggregate_metrics: %w", err))
	}
	return encodeMetrics(out)
}

// aggregateBody is an /aggregate_metrics request: the body to pass on
// when it has the shape jsonskim.ForwardAggregateRequest takes (the
// server's decoder has checked it is valid JSON), else the request
// decoded, and checked, as protocol.AggregateMetricsRequest.
type aggregateBody struct {
	fwd     []byte
	decoded protocol.AggregateMetricsRequest
}

// UnmarshalJSON keeps the body to pass on, or decodes it.
func (b *aggregateBody) UnmarshalJSON(data []byte) error {
	if fwd, ok := jsonskim.ForwardAggregateRequest(data); ok {
		b.fwd = bytes.Clone(fwd) // data is the decoder's, reused after this
		return nil
	}
	// The error is the 422's detail, with its location: passed on as
	// protocol.AggregateMetricsRequest gives it.
	return b.decoded.UnmarshalJSON(data)
}

// Validate checks a decoded request as protocol.AggregateMetricsRequest
// does; a body passed on has the shape that check passes.
func (b *aggregateBody) Validate() error {
	if b.fwd != nil {
		return nil
	}
	return b.decoded.Validate()
}

// aggregateRequest encodes {"verify_responses": responses} in one pass.
func aggregateRequest(responses []protocol.Fields) server.RawJSON {
	size := len(`{"verify_responses":[]}`) + len(responses)
	for _, r := range responses {
		for _, m := range r {
			size += len(m.Key) + len(m.Value) + 4
		}
		size += 2
	}
	buf := make([]byte, 0, size)
	buf = append(buf, `{"verify_responses":[`...)
	for i, r := range responses {
		if i > 0 {
			buf = append(buf, ',')
		}
		b, _ := r.MarshalJSON() // the members are raw JSON already
		buf = append(buf, b...)
	}
	return append(buf, ']', '}')
}

// encodeMetrics encodes m with upstream's defaults for what is nil.
func encodeMetrics(m protocol.AggregateMetricsResponse) (server.RawJSON, error) {
	b, err := emptyMetrics(m).MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("aggregate_metrics: %w", err)
	}
	return server.RawJSON(b), nil
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
