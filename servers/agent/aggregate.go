package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/gymlens/gymlens/internal/aggstream"
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
func (a *agent) aggregateMetrics(ctx context.Context, req aggregateBody) (server.Streamed, error) {
	if a.cfg.SkipVerification {
		a.warnNoAggregates.Do(func() {
			slog.Default().Warn("agent: aggregate metrics are empty because skip_verification is set; " +
				"disable aggregation in the collector to write no aggregate metrics file")
		})
		return written(encodeMetrics(protocol.AggregateMetricsResponse{}))
	}
	var raw server.RawJSON
	fwd := server.RawJSON(req.fwd)
	if fwd == nil {
		fwd = aggregateRequest(req.decoded.VerifyResponses)
	}
	err := a.client.PostJSON(ctx, a.aggregateURL, fwd, &raw)
	return written(answerMetrics(raw, err))
}

// streamAggregateMetrics serves POST /aggregate_metrics as its body
// arrives: each verify response is passed on to the resources server once
// read (aggstream.Forward), so that the resources server reads the
// collection's results while they are produced, and an answer the
// resources server marks complete is passed back as it arrives, so that
// the answer's way back costs no hop a wait for the whole of it. A body
// of another shape, and every body under skip_verification, is left to
// aggregateMetrics.
func (a *agent) streamAggregateMetrics(ctx context.Context, body io.Reader) (server.Streamed, error) {
	if a.cfg.SkipVerification {
		return server.Streamed{}, server.ErrNotStreamed
	}
	answer, err := aggstream.Forward(ctx, a.client, a.aggregateURL, body)
	switch {
	case errors.Is(err, server.ErrNotStreamed):
		return server.Streamed{}, err
	case err == nil && answer.Passed():
		return server.Streamed{Header: answer.Header(), Write: func(w io.Writer) error {
			if _, err := answer.WriteTo(w); err != nil {
				return failed(fmt.Errorf("aggregate_metrics: %w", err))
			}
			return nil
		}}, nil
	}
	return written(answerMetrics(answer.Raw, err))
}

// written is an answer already encoded, or its error, as the route's
// streamed answer.
func written(raw server.RawJSON, err error) (server.Streamed, error) {
	if err != nil {
		return server.Streamed{}, err
	}
	return server.Streamed{Write: func(w io.Writer) error {
		_, err := w.Write(raw)
		return err
	}}, nil
}

// answerMetrics answers with the resources server's answer raw, or the
// failure of that call (a 500, as upstream raises). An answer of the usual
// shape is passed on as it came, unread: the last reader checks it (the
// collector's, as upstream's collector decodes it); others are decoded to
// fill upstream's defaults.
func answerMetrics(raw server.RawJSON, err error) (server.RawJSON, error) {
	if err != nil {
		return nil, failed(fmt.Errorf("aggregate_metrics: %w", err))
	}
	if jsonskim.CompleteAggregateMetrics(raw) {
		return raw, nil
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
