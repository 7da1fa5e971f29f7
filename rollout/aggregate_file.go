package rollout

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/gymlens/gymlens/internal/aggstream"
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
			case []byte: // indented already
				buf.Write(list)
				return nil
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
			{"group_level_metrics", groupsOf(e)}, {"repeat_level_metrics", e.RepeatLevelMetrics}} {
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

// groupsOf is e's group_level_metrics for the file: indented already
// ([]byte) or to be indented ([]json.RawMessage).
func groupsOf(e AgentMetrics) any {
	if e.groupsIndented != nil {
		return e.groupsIndented
	}
	return e.GroupLevelMetrics
}

// indentList writes list, a member of an entry, as MarshalIndent lays a
// list out at that level. A long list (the per-task metrics of a large
// run) is indented in parts at once, one per CPU, and the parts joined.
func indentList(buf *bytes.Buffer, list []json.RawMessage) error {
	if len(list) == 0 {
		buf.WriteString("[]")
		return nil
	}
	buf.WriteString("[")
	parts := max(1, min(runtime.GOMAXPROCS(0), len(list)/minIndentPart))
	per := (len(list) + parts - 1) / parts
	outs := make([]bytes.Buffer, parts)
	errs := make([]error, parts)
	var wg sync.WaitGroup
	for p := 1; p < parts; p++ {
		wg.Go(func() { errs[p] = indentElements(&outs[p], list, p*per, min((p+1)*per, len(list))) })
	}
	errs[0] = indentElements(buf, list, 0, min(per, len(list)))
	wg.Wait()
	for p := range parts {
		if errs[p] != nil {
			return errs[p]
		}
		buf.Write(outs[p].Bytes())
	}
	buf.WriteString("\n" + memberPrefix + "]")
	return nil
}

// minIndentPart is the fewest elements of a list indented apart.
const minIndentPart = 1024

// indentElements writes list[first:last] to out, each after its comma
// (but the list's first) and its line's indentation.
func indentElements(out *bytes.Buffer, list []json.RawMessage, first, last int) error {
	size := 0
	for _, el := range list[first:last] {
		size += 2*len(el) + len(listPrefix) + 2
	}
	out.Grow(size)
	for i := first; i < last; i++ {
		if i > 0 {
			out.WriteString(",")
		}
		out.WriteString("\n" + listPrefix)
		if indentCompact(out, list[i], listPrefix) {
			continue
		}
		if err := json.Indent(out, list[i], listPrefix, fileIndent); err != nil {
			return fmt.Errorf("per-task metrics %d: %w", i, err)
		}
	}
	return nil
}

// indentCompact writes v, compact JSON, to out as json.Indent(out, v,
// prefix, fileIndent) does, and reports true; for v with a space outside
// its strings (not compact) it writes nothing and reports false. It does
// not check v: the caller has (json.Valid over the whole answer), and a
// server's per-task metrics are compact, so this costs a fraction of
// json.Indent's scan.
func indentCompact(out *bytes.Buffer, v []byte, prefix string) bool {
	for i := 0; i < len(v); i++ {
		switch v[i] {
		case ' ', '\t', '\n', '\r':
			return false
		case '"':
			end, ok := jsonskim.ValueEnd(v, i)
			if !ok {
				return false
			}
			i = end - 1
		}
	}
	depth := 0
	newline := func() {
		out.WriteByte('\n')
		out.WriteString(prefix)
		for range depth {
			out.WriteString(fileIndent)
		}
	}
	start := 0 // of the bytes not yet written
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch c {
		case '"':
			end, _ := jsonskim.ValueEnd(v, i)
			i = end - 1
			continue
		case '{', '[':
			out.Write(v[start : i+1])
			start = i + 1
			if i+1 < len(v) && (v[i+1] == '}' || v[i+1] == ']') {
				out.WriteByte(v[i+1]) // empty: {} or [] as it is
				i++
				start = i + 1
				continue
			}
			depth++
			newline()
		case '}', ']':
			out.Write(v[start:i])
			depth--
			newline()
			out.WriteByte(c)
			start = i + 1
		case ',':
			out.Write(v[start : i+1])
			start = i + 1
			newline()
		case ':':
			out.Write(v[start : i+1])
			out.WriteByte(' ')
			start = i + 1
		}
	}
	out.Write(v[start:])
	return true
}

// markedAnswer is an /aggregate_metrics answer marked complete
// (aggstream.CompleteHeader), read as it arrived: decoded, its per-task
// objects (slices of copies of the answer) checked, and indented for the
// file while the rest of it was still on its way.
type markedAnswer struct {
	metrics protocol.AggregateMetricsResponse
	// groups is the group_level_metrics member as the file lays it out
	// (indentList's bytes).
	groups []byte
}

// groupPiece is how many per-task objects of a marked answer are checked
// and indented together, on one of a goroutine per CPU.
const groupPiece = 256

// indentedPiece is one piece of a marked answer's per-task objects,
// indented, or what was wrong with one.
type indentedPiece struct {
	elems []json.RawMessage
	later bool // not the answer's first piece: its first object follows a comma
	out   bytes.Buffer
	err   error
}

// readMarked reads a marked answer from body as it arrives (see
// markedAnswer). An answer that is not of the complete shape, or not
// valid JSON, is an error.
func readMarked(body io.Reader) (*markedAnswer, error) {
	work := make(chan *indentedPiece)
	var pieces []*indentedPiece
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for p := range work {
				p.err = indentPiece(p)
			}
		})
	}
	var data []byte // the current piece's objects, copied
	var ends []int  // the end of each object in data
	send := func() {
		if len(ends) == 0 {
			return
		}
		p := &indentedPiece{elems: make([]json.RawMessage, len(ends)), later: len(pieces) > 0}
		start := 0
		for i, end := range ends {
			p.elems[i] = data[start:end:end]
			start = end
		}
		pieces = append(pieces, p)
		work <- p
		data, ends = nil, nil
	}
	rest, err := aggstream.EachGroup(body, func(elem []byte) error {
		if data == nil {
			// Sized after the piece's first object: a run's are alike.
			data = make([]byte, 0, len(elem)*groupPiece*5/4)
			ends = make([]int, 0, groupPiece)
		}
		data = append(data, elem...)
		ends = append(ends, len(data))
		if len(ends) == groupPiece {
			send()
		}
		return nil
	})
	send()
	close(work)
	wg.Wait()
	if err != nil {
		return nil, fmt.Errorf("read answer: %w", err)
	}
	// The rest, after an empty list, is what decodeMetrics reads.
	rest = append([]byte(`{"group_level_metrics":[]`), rest...)
	if !json.Valid(rest) || !jsonskim.CompleteAggregateMetrics(rest) {
		return nil, errors.New("the answer marked complete is not of the complete shape, or not valid JSON")
	}
	m, err := decodeMetrics(rest)
	if err != nil {
		return nil, err
	}
	out := &markedAnswer{metrics: m}
	if len(pieces) == 0 {
		out.groups = []byte("[]")
		return out, nil
	}
	size := len("[\n" + memberPrefix + "]")
	for _, p := range pieces {
		if p.err != nil {
			return nil, p.err
		}
		size += p.out.Len()
		out.metrics.GroupLevelMetrics = append(out.metrics.GroupLevelMetrics, p.elems...)
	}
	buf := make([]byte, 0, size)
	buf = append(buf, '[')
	for _, p := range pieces {
		buf = append(buf, p.out.Bytes()...)
	}
	out.groups = append(buf, "\n"+memberPrefix+"]"...)
	return out, nil
}

// indentPiece checks a piece's objects and indents them, each after its
// comma (but the answer's first) and its line's indentation.
func indentPiece(p *indentedPiece) error {
	for _, el := range p.elems {
		if !json.Valid(el) {
			return errors.New("the answer is not valid JSON")
		}
	}
	if p.later {
		p.out.WriteString(",")
	}
	return indentElements(&p.out, p.elems, 0, len(p.elems))
}
