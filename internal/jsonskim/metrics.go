package jsonskim

// aggregateMetricsMembers is the number of members of an
// /aggregate_metrics answer (upstream's AggregateMetrics,
// nemo_gym/config_types.py).
const aggregateMetricsMembers = 5

// aggregateMetricsKind returns, for a member name of an
// /aggregate_metrics answer, the first byte its value must have to pass
// as it is (perf_summary may be null too); known is false for any other
// name.
func aggregateMetricsKind(key string) (kind byte, known bool) {
	switch key {
	case "group_level_metrics", "repeat_level_metrics":
		return '[', true
	case "agent_metrics", "key_metrics", "perf_summary":
		return '{', true
	}
	return 0, false
}

// CompleteAggregateMetrics reports whether an /aggregate_metrics answer
// can be passed on as it came by a server that relays it (the agent, an
// environment server): an object with exactly upstream's five members,
// each once, none null but perf_summary, so that decoding it into the
// answer's type and encoding it again would fill no default and drop
// nothing. Its outline is checked, not its validity: whoever receives
// it last decodes it.
func CompleteAggregateMetrics(body []byte) bool {
	members, ok := Object(body)
	if !ok || len(members) != aggregateMetricsMembers {
		return false
	}
	seen := 0
	for _, m := range members {
		kind, known := aggregateMetricsKind(string(m.Key))
		if !known || seen&(1<<len(m.Key)) != 0 {
			return false
		}
		// The five names differ in length, so the length marks one.
		seen |= 1 << len(m.Key)
		if got := Kind(m.Value); got != kind && (string(m.Key) != "perf_summary" || got != 'n') {
			return false
		}
	}
	return true
}

// keyVerifyResponses is the member of an /aggregate_metrics request
// that holds the results (upstream's AggregateMetricsRequest,
// nemo_gym/config_types.py).
const keyVerifyResponses = "verify_responses"

// ForwardAggregateRequest returns the body a server that relays an
// /aggregate_metrics request (an environment server, the agent) sends
// on, when the request body (valid JSON) is of the usual shape: an
// object whose verify_responses member (the last one, as a decoder
// keeps it) is a list of objects. That is body itself when it has no
// other member, else {"verify_responses": <the list>}; the results go
// as they came, their members in their order, as upstream's relays (a
// Python dict) keep them. ok is false for anything else (a member name
// with an escape included), which the caller decodes and checks as
// usual.
func ForwardAggregateRequest(body []byte) (fwd []byte, ok bool) {
	members, ok := Object(body)
	if !ok {
		return nil, false
	}
	var list []byte
	for _, m := range members {
		if m.Escaped() {
			return nil, false
		}
		if string(m.Key) == keyVerifyResponses {
			list = m.Value
		}
	}
	elems, ok := Array(list)
	if !ok {
		return nil, false
	}
	for _, e := range elems {
		if Kind(e) != '{' {
			return nil, false
		}
	}
	if len(members) == 1 {
		return body, true
	}
	fwd = make([]byte, 0, len(list)+len(keyVerifyResponses)+5)
	fwd = append(fwd, `{"`+keyVerifyResponses+`":`...)
	fwd = append(fwd, list...)
	return append(fwd, '}'), true
}
