package agent

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/gymlens/gymlens/internal/jsonskim"
	"github.com/gymlens/gymlens/protocol"
)

// Members of upstream's BaseVerifyResponse (nemo-gym 0.7.0) besides the
// echoed request and the reward, with the values upstream's /run answer
// carries when the verifier's answer lacks them: upstream's agent
// validates the answer into its verify-response model and answers that
// model's full dump. They are listed in the order the dump writes them.
var verifyDefaults = []struct{ key, value string }{
	{protocol.KeyMaskSample, "false"},
	{protocol.KeyFailureKind, "null"},
	{protocol.KeyFailureReason, "null"},
}

// member is one top-level member of a JSON object: its key as it is
// written (quotes and escapes included) and the span of the whole member,
// key to end of value, in the object.
type member struct {
	key        []byte
	start, end int
}

// members lists the top-level members of obj, which must be one valid
// JSON object (leading and trailing white space allowed), and returns the
// index of its closing brace.
func members(obj []byte) (ms []member, closing int) {
	i := skipSpace(obj, 0) + 1 // past '{'
	for {
		i = skipSpace(obj, i)
		switch {
		case i >= len(obj):
			return ms, len(obj)
		case obj[i] == '}':
			return ms, i
		case obj[i] == ',':
			i = skipSpace(obj, i+1)
		}
		start := i
		keyEnd := valueEnd(obj, i)
		i = skipSpace(obj, keyEnd)
		i = skipSpace(obj, i+1) // past ':'
		end := valueEnd(obj, i)
		ms = append(ms, member{key: obj[start:keyEnd], start: start, end: end})
		i = end
	}
}

// is reports whether the member's key is key.
func (m member) is(key string) bool {
	if bytes.IndexByte(m.key, '\\') < 0 {
		return len(m.key) == len(key)+2 && string(m.key[1:len(m.key)-1]) == key
	}
	var s string
	return json.Unmarshal(m.key, &s) == nil && s == key
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON white space.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// valueEnd returns the end of the JSON value that starts at b[i] (b is
// valid JSON: jsonskim.ValueEnd's outline is the value's).
func valueEnd(b []byte, i int) int {
	end, _ := jsonskim.ValueEnd(b, i)
	return end
}

// rebuild writes obj (whose members and closing brace members found)
// again with only the members keep selects, then the extra members (each
// already "key":value) before the closing brace. Everything else is kept
// as it came: the white space around the kept members, the separator
// before each (the one that preceded it in obj), what follows the brace.
func rebuild(obj []byte, ms []member, closing int, keep func(member) bool, extra []string) []byte {
	head, tail := closing, closing
	if len(ms) > 0 {
		head, tail = ms[0].start, ms[len(ms)-1].end
	}
	out := make([]byte, 0, len(obj)+64)
	out = append(out, obj[:head]...)
	n := 0
	for j, m := range ms {
		if !keep(m) {
			continue
		}
		if n > 0 {
			out = append(out, obj[ms[j-1].end:m.start]...)
		}
		out = append(out, obj[m.start:m.end]...)
		n++
	}
	for _, e := range extra {
		if n > 0 {
			out = append(out, ',')
		}
		out = append(out, e...)
		n++
	}
	return append(out, obj[tail:]...)
}

// forwardedRow returns the row as upstream's agent sends it to
// /seed_session and /verify, and its encoding: without _ng_rollout_id,
// which upstream's run request declares as excluded from its dumps. A
// row that has none is returned as it is, with no second pass.
func forwardedRow(row protocol.RunRequest) (protocol.RunRequest, []byte, error) {
	b, err := row.MarshalJSON()
	if err != nil {
		return row, nil, fmt.Errorf("encode the row: %w", err)
	}
	if !bytes.Contains(b, []byte(`"`+protocol.KeyRolloutID+`"`)) {
		return row, b, nil
	}
	ms, closing := members(b)
	isID := func(m member) bool { return m.is(protocol.KeyRolloutID) }
	found := false
	for _, m := range ms {
		found = found || isID(m)
	}
	if !found {
		return row, b, nil
	}
	b = rebuild(b, ms, closing, func(m member) bool { return !isID(m) }, nil)
	var clean protocol.RunRequest
	if err := clean.UnmarshalJSON(b); err != nil {
		return row, nil, fmt.Errorf("decode the row without %s: %w", protocol.KeyRolloutID, err)
	}
	return clean, b, nil
}

// upstreamAnswer makes a /run answer (a verify answer, one JSON object
// followed by a newline) what upstream's agent answers with the same
// verify answer: its _ng_rollout_id left out (upstream's verify-response
// model never dumps it) and every member of verifyDefaults it lacks added
// with its default. An answer that needs neither is returned as it is.
func upstreamAnswer(b []byte) []byte {
	ms, closing := members(b)
	var missing []string
	drop := false
	for _, d := range verifyDefaults {
		has := false
		for _, m := range ms {
			has = has || m.is(d.key)
		}
		if !has {
			missing = append(missing, `"`+d.key+`":`+d.value)
		}
	}
	for _, m := range ms {
		drop = drop || m.is(protocol.KeyRolloutID)
	}
	if !drop && len(missing) == 0 {
		return b
	}
	return rebuild(b, ms, closing, func(m member) bool { return !m.is(protocol.KeyRolloutID) }, missing)
}
