package envserver

import (
	"encoding/json"

	"github.com/gymlens/gymlens/internal/jsonskim"
)

// forwardAggregate returns the body to send the agent for an
// /aggregate_metrics request that checkAggregate would pass, without
// decoding it: valid JSON of the shape jsonskim.ForwardAggregateRequest
// takes. ok is false for anything else, which is left to
// checkAggregate, with its 422 details.
func forwardAggregate(body []byte) (fwd []byte, ok bool) {
	if !json.Valid(body) {
		return nil, false
	}
	return jsonskim.ForwardAggregateRequest(body)
}
