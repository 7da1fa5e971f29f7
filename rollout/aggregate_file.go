package rollout

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/gymlens/gymlens/internal/jsonskim"
	"github.com/gymlens/gymlens/protocol"
)

// An /aggregate_metrics answer holds one group_level_metrics object per
// task: at 40 000 rollouts some 30 MB, nearly all of the answer. It is
// taken apart by its outline, the per-task objects kept as slices of
// the answer, and written to the file indented one by one, so that no
// decoder builds them and no encoder scans them again.

// decodeMetrics reads an /aggregate_metrics answer, raw (valid JSON),
// as encoding/json decodes it into protocol.AggregateMetricsResponse:
// directly when it has upstream's five members and nothing else, else
// through encoding/json.
func decodeMetrics(raw json.RawMessage) (protocol.AggregateMetricsResponse, error) {
	var m protocol.AggregateMetricsResponse
	if jsonskim.CompleteAggregateMetrics(raw) {
		members, _ := jsonskim.Object(raw)
		ok := true
		for _, mem := range members {
			var err error
			switch string(mem.Key) {
			case "group_level_metrics":
				m.GroupLevelMetrics, ok = rawList(mem.Value)
			case "repeat_level_metrics":
				m.RepeatLevelMetrics, ok = rawList(mem.Value)
			case "agent_metrics":
				err = json.Unmarshal(mem.Value, &m.AgentMetrics)
			case "key_metrics":
				err = json.Unmarshal(mem.Value, &m.KeyMetrics)
			case "perf_summary":
				err = json.Unmarshal(mem.Value, &m.PerfSummary)
			}
			if err != nil {
				return m, fmt.Errorf("decode answer: %s: %w", mem.Key, err)
			}
			if !ok {
				break
			}
		}
		if ok {
			return m, nil
		}
		m = protocol.AggregateMetricsResponse{}
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return m, fmt.Errorf("decode answer: %w", err)
	}
	return m, nil
}

// rawList returns the elements of the JSON list b as slices of it.
func rawList(b []byte) ([]json.RawMessage, bool) {
	elems, ok := jsonskim.Array(b)
	if !ok {
		return nil, false
	}
	out := make([]json.RawMessage, len(elems))
	for i, e := range elems {
		out[i] = e
	}
	return out, true
}

// Indentation of the aggregate metrics file: two spaces a level, as
// upstream writes it (orjson's OPT_INDENT_2).
const (
	fileIndent = "  "
	// memberPrefix starts a member of an entry (level 2); listPrefix an
	// element of one of its lists (level 3).
	memberPrefix = fileIndent + fileIndent
	listPrefix   = memberPrefix + fileIndent
)

// encodeMetricsFile encodes the aggregate metrics file: entries as a
// JSON list indented by two spaces, with a final newline. The bytes are
// json.MarshalIndent's but for the per-task and per-repeat objects,
// which are indented as they came (json.Indent) rather than compacted
// first, so that a '<', '>' or '&' in them is written as it is.
func encodeMetricsFile(entries []AgentMetrics) ([]byte, error) {
	size := 64
	for _, e := range entries {
		for _, g := range e.GroupLevelMetrics {
			size += 2 * len(g)
		}
		for _, r := range e.RepeatLevelMetrics {
			size += 2 * len(r)
		}
	}
	buf := bytes.NewBuffer(make([]byte, 0, size))
	buf.WriteString("[")
	for i, e := range entries {
		if i > 0 {
			buf.WriteString(",")
		}
		buf.WriteString("\n" + fileIndent + "{")
		first := true
		member := func(name string, v any) error {
			if !first {
				buf.WriteString(",")
			}
			first = false
			buf.WriteString("\n" + memberPrefix)
			k, _ := json.Marshal(name)
			buf.Write(k)
			buf.WriteString(": ")
			switch list := v.(type) {
			case []json.RawMessage:
				return indentList(buf, list)
			}
			b, err := json.MarshalIndent(v, memberPrefix, fileIndent)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			buf.Write(b)
			return nil
		}
		// The members in AgentMetrics' order, the empty ones left out as
		// its tags leave them out.
		if err := member("agent_ref", e.AgentRef); err != nil {
			return nil, err
		}
		if e.EnvironmentServer != "" {
			if err := member("_ng_environment_server", e.EnvironmentServer); err != nil {
				return nil, err
			}
		}
		for _, m := range []struct {
			name string
			v    any
		}{{"agent_metrics", e.AgentMetrics}, {"key_metrics", e.KeyMetrics},
			{"group_level_metrics", e.GroupLevelMetrics}, {"repeat_level_metrics", e.RepeatLevelMetrics}} {
			if err := member(m.name, m.v); err != nil {
				return nil, err
			}
		}
		if len(e.PerfSummary) > 0 {
			if err := member("perf_summary", e.PerfSummary); err != nil {
				return nil, err
			}
		}
		buf.WriteString("\n" + fileIndent + "}")
	}
	if len(entries) > 0 {
		buf.WriteString("\n")
	}
	buf.WriteString("]\n")
	return buf.Bytes(), nil
}

// indentList writes list, a member of an entry, as MarshalIndent lays a
// list out at that level.
func indentList(buf *bytes.Buffer, list []json.RawMessage) error {
	if len(list) == 0 {
		buf.WriteString("[]")
		return nil
	}
	buf.WriteString("[")
	for i, el := range list {
		if i > 0 {
			buf.WriteString(",")
		}
		buf.WriteString("\n" + listPrefix)
		if err := json.Indent(buf, el, listPrefix, fileIndent); err != nil {
			return fmt.Errorf("per-task metrics %d: %w", i, err)
		}
	}
	buf.WriteString("\n" + memberPrefix + "]")
	return nil
}
