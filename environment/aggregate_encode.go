package environment

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"sync/atomic"

	"github.com/gymlens/gymlens/internal/aggstream"
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

// groupsPerPiece is how many group objects one goroutine encodes at a
// time when an answer is streamed: enough to keep the pieces' hand-over
// rare, few enough that the first piece goes out at once.
const groupsPerPiece = 256

// answer is the aggregate metrics of the responses added (see
// aggregate) as a streamed answer, marked complete (aggstream.CompleteHeader:
// it always has upstream's five members), so that the servers that relay
// it pass it on as it arrives. The benchmark's hook (custom) runs before
// the first byte is written, so that its panic or failure is still the
// handler's to answer; then the group objects, most of the answer at
// scale, are encoded in pieces by a goroutine per CPU and written in
// order as each piece is done, while the rest of the metrics is computed
// beside them. The bytes are the answer's MarshalJSON and a newline, as a
// typed handler writes its answer.
func (a *aggregator) answer(custom func(tasks [][]protocol.Fields) map[string]any) server.Streamed {
	return server.Streamed{
		Header: http.Header{aggstream.CompleteHeader: {aggstream.CompleteValue}},
		Write: func(w io.Writer) error {
			p := a.prepare()
			extra, err := p.custom(custom)
			if err != nil {
				return err
			}
			return p.write(w, extra)
		},
	}
}

// piece is the encoded group objects of one piece of an answer,
// comma-separated, or what stopped their encoding.
type piece struct {
	buf []byte
	err error
}

// write writes the answer (see answer), with custom the hook's metrics.
func (p *prepared) write(w io.Writer, custom map[string]any) error {
	summary := make(chan piece, 1)
	go func() {
		defer recoverInto(summary)
		rest, err := p.summary(custom).MarshalJSON()
		summary <- piece{rest, err}
	}()
	groups := len(p.bounds) - 1
	pieces := make([]chan piece, (groups+groupsPerPiece-1)/groupsPerPiece)
	for i := range pieces {
		pieces[i] = make(chan piece, 1)
	}
	var next atomic.Int64
	for range min(runtime.GOMAXPROCS(0), len(pieces)) {
		go func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(pieces) {
					return
				}
				func() {
					defer recoverInto(pieces[i])
					var buf []byte
					from, to := i*groupsPerPiece, min((i+1)*groupsPerPiece, groups)
					p.eachGroup(from, to, func(g []byte) {
						if buf == nil {
							// Sized after the first group, with room to
							// spare: the groups of a run are alike.
							buf = make([]byte, 0, (len(g)+1)*(to-from)*5/4)
						} else {
							buf = append(buf, ',')
						}
						buf = append(buf, g...)
					})
					pieces[i] <- piece{buf: buf}
				}()
			}
		}()
	}
	// The goroutines above end on their own whatever happens here: every
	// channel takes its one value without waiting.
	const emptyGroups = `{"group_level_metrics":[]`
	if _, err := io.WriteString(w, emptyGroups[:len(emptyGroups)-1]); err != nil {
		return err
	}
	for i, c := range pieces {
		got := <-c
		if got.err != nil {
			return fmt.Errorf("aggregate metrics: %w", got.err)
		}
		if i > 0 {
			if _, err := io.WriteString(w, ","); err != nil {
				return err
			}
		}
		if _, err := w.Write(got.buf); err != nil {
			return err
		}
	}
	// The summary is encoded with no group: what follows its empty list
	// follows the groups.
	got := <-summary
	if got.err != nil {
		return fmt.Errorf("aggregate metrics: %w", got.err)
	}
	if !bytes.HasPrefix(got.buf, []byte(emptyGroups)) {
		return fmt.Errorf("aggregate metrics: the answer does not start with its groups: %.60s", got.buf)
	}
	_, err := w.Write(append(got.buf[len(emptyGroups)-1:], '\n'))
	return err
}

// recoverInto sends what a panic of the goroutine it is deferred in
// carried to c as an error: the answer's goroutines run beside the
// handler, whose own recovery cannot reach them.
func recoverInto(c chan<- piece) {
	if v := recover(); v != nil {
		c <- piece{err: fmt.Errorf("panic: %v", v)}
	}
}
