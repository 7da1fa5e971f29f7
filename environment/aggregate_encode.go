package environment

import (
	"encoding/json"
	"strconv"

	"github.com/gymlens/gymlens/protocol"
	"github.com/gymlens/gymlens/server"
)

// The aggregate answer is written here straight into bytes: one
// group_level_metrics object per task, each with a statistic per column,
// is most of what /aggregate_metrics costs at scale, and building them
// as protocol.Fields (one json.Marshal per member) was most of that.
// The bytes are those the Fields encoding gave.

// memberKey returns key encoded as an object member's name with its
// colon, `"key":`, escaped as protocol.Fields encodes its keys.
func memberKey(key string) []byte {
	b, _ := protocol.Fields{{Key: key, Value: json.RawMessage("0")}}.MarshalJSON()
	return b[1 : len(b)-2] // `{"key":0}` less the braces and the value
}

// Encoded member names of a group_level_metrics object that are not a
// column's.
var (
	groupTaskKey      = memberKey(protocol.KeyTaskIndex)
	groupSampleKey    = memberKey(keySample)
	groupRolloutsKey  = memberKey(keyNumRollouts)
	groupExpectedKey  = memberKey(keyExpectedRollouts)
	groupMissingKey   = memberKey(keyMissingRollouts)
	groupCompleteKey  = memberKey(keyCompletionPct)
	groupInfosKey     = memberKey(keyRolloutInfos)
	infoIDKey         = memberKey(keyRolloutInfoID)
	infoTaskKey       = memberKey(protocol.KeyTaskIndex)
	infoRolloutKey    = memberKey(protocol.KeyRolloutIndex)
	completionPercent = protocol.AppendJSONFloat(nil, 100)
)

// statKeys returns, for every column, the encoded member name of each
// statistic ("mean/<column>", ...), in the order of stats.
func statKeys(columns []string) map[string][][]byte {
	out := make(map[string][][]byte, len(columns))
	for _, c := range columns {
		keys := make([][]byte, len(stats))
		for i, s := range stats {
			keys[i] = memberKey(s + "/" + c)
		}
		out[c] = keys
	}
	return out
}

// appendGroup appends to buf the group_level_metrics object of one
// task's rows, whose columns are cols: the task index, the statistics
// (see describe), the sample, the counts and the rollout infos, in
// upstream's order.
func appendGroup(buf []byte, keys map[string][][]byte, cols []column, rows []*profiled) []byte {
	buf = append(buf, '{')
	buf = append(buf, groupTaskKey...)
	buf = strconv.AppendInt(buf, int64(rows[0].task), 10)
	describe(cols, len(rows), func(stat int, c *column, v float64) {
		buf = append(buf, ',')
		buf = append(buf, keys[c.name][stat]...)
		buf = protocol.AppendJSONFloat(buf, v)
	})
	buf = append(buf, ',')
	buf = append(buf, groupSampleKey...)
	buf = append(buf, sampleRow...)
	for _, k := range [][]byte{groupRolloutsKey, groupExpectedKey} {
		buf = append(buf, ',')
		buf = append(buf, k...)
		buf = strconv.AppendInt(buf, int64(len(rows)), 10)
	}
	buf = append(buf, ',')
	buf = append(buf, groupMissingKey...)
	buf = append(buf, '0', ',')
	buf = append(buf, groupCompleteKey...)
	buf = append(buf, completionPercent...)
	buf = append(buf, ',')
	buf = append(buf, groupInfosKey...)
	buf = append(buf, '[')
	for i, r := range rows {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, r.info...)
	}
	return append(buf, ']', '}')
}

// encodeMetrics encodes m as the server writes a typed answer
// (protocol.AggregateMetricsResponse's MarshalJSON and a newline), writing the group and repeat objects, which are
// compact already, as they are rather than passing them through
// encoding/json, which would scan them once more.
func encodeMetrics(m protocol.AggregateMetricsResponse) (server.RawJSON, error) {
	groups, repeats := m.GroupLevelMetrics, m.RepeatLevelMetrics
	m.GroupLevelMetrics, m.RepeatLevelMetrics = nil, nil
	// The rest is small: encoded as usual, with empty lists, then the
	// lists are written in place of those.
	rest, err := m.MarshalJSON()
	if err != nil {
		return nil, err
	}
	const emptyGroups, emptyRepeats = `{"group_level_metrics":[]`, `,"repeat_level_metrics":[]}`
	if string(rest[:len(emptyGroups)]) != emptyGroups || string(rest[len(rest)-len(emptyRepeats):]) != emptyRepeats {
		// Not the shape this was written for: encode it all the usual way.
		m.GroupLevelMetrics, m.RepeatLevelMetrics = groups, repeats
		b, err := m.MarshalJSON()
		return append(b, '\n'), err
	}
	size := len(rest) + len(groups) + len(repeats) + 1
	for _, g := range groups {
		size += len(g)
	}
	for _, r := range repeats {
		size += len(r)
	}
	out := make([]byte, 0, size)
	out = append(out, emptyGroups[:len(emptyGroups)-2]...)
	out = appendList(out, groups)
	out = append(out, rest[len(emptyGroups):len(rest)-len(emptyRepeats)]...)
	out = append(out, emptyRepeats[:len(emptyRepeats)-3]...)
	out = appendList(out, repeats)
	return append(out, '}', '\n'), nil
}

// appendList appends items, each one compact JSON value, as a JSON list.
func appendList(buf []byte, items []json.RawMessage) []byte {
	buf = append(buf, '[')
	for i, it := range items {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, it...)
	}
	return append(buf, ']')
}
