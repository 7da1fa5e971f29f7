package rollout

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/internal/aggstream"
	"github.com/gymlens/gymlens/internal/jsonskim"
	"github.com/gymlens/gymlens/protocol"
	"github.com/gymlens/gymlens/server"
)

// AgentMetrics is one entry of the aggregate metrics file: what the
// /aggregate_metrics of the environment server that ran a group of
// rollouts (or of their agent, when they were sent to it directly)
// answered for its successful results, in upstream's shape.
type AgentMetrics struct {
	// AgentRef names the agent: {"name": ...}; when several groups have
	// one agent (two environment servers front it), each is named by its
	// environment server instead, as upstream labels them.
	AgentRef struct {
		Name string `json:"name"`
	} `json:"agent_ref"`
	// EnvironmentServer is the environment server the rollouts ran
	// through; "" (left out) for rollouts sent to their agent directly.
	EnvironmentServer string `json:"_ng_environment_server,omitempty"`
	// AgentMetrics holds the statistics of every numeric member
	// ("mean/reward", "max/reward", ...); KeyMetrics the headline ones.
	AgentMetrics map[string]any `json:"agent_metrics"`
	KeyMetrics   map[string]any `json:"key_metrics"`
	// GroupLevelMetrics are the per-task statistics, RepeatLevelMetrics
	// the per-repeat ones, as the server sent them.
	GroupLevelMetrics  []json.RawMessage `json:"group_level_metrics"`
	RepeatLevelMetrics []json.RawMessage `json:"repeat_level_metrics"`
	// PerfSummary is the efficiency summary of the rollouts' ng_perf
	// records; left out when the server sent none.
	PerfSummary map[string]any `json:"perf_summary,omitempty"`

	// groupsIndented is GroupLevelMetrics as the file lays it out, when it
	// was indented as the answer arrived.
	groupsIndented []byte
}

// stripped reports the members of a result that /aggregate_metrics is
// not sent, as upstream strips them: the episode (but see metricsEntry),
// the prompt and the observability payloads.
func stripped(key string) bool {
	switch key {
	case protocol.KeyResponse, protocol.KeyParams, "ng_agent_observations", "ng_model_call_capture", "ng_trajectory":
		return true
	}
	return false
}

// metricsEntry returns result as /aggregate_metrics takes it, encoded:
// without the stripped members, but with the response's usage and
// incomplete_details kept (when not null) as {"response": {...}}.
func metricsEntry(result protocol.Fields) []byte {
	out := make(protocol.Fields, 0, len(result))
	for _, m := range result {
		if !stripped(m.Key) {
			out = append(out, m)
		}
	}
	if raw, ok := result.Get(protocol.KeyResponse); ok {
		if usage, details, ok := responseSummary(raw); ok {
			var kept protocol.Fields
			if len(usage) > 0 && !isNull(usage) {
				kept.SetRaw("usage", usage)
			}
			if len(details) > 0 && !isNull(details) {
				kept.SetRaw("incomplete_details", details)
			}
			if len(kept) > 0 {
				b, _ := kept.MarshalJSON()
				out.SetRaw(protocol.KeyResponse, b)
			}
		}
	}
	b, _ := out.MarshalJSON() // the members are raw JSON already
	return b
}

// responseSummary reads the usage and incomplete_details members of a
// response as encoding/json gives them to fields of those names (names
// matched without regard to case, the last match kept); ok is false when
// raw is not an object. The response is the largest part of a result,
// so it is skimmed, not decoded, unless a member name holds an escape.
func responseSummary(raw json.RawMessage) (usage, details json.RawMessage, ok bool) {
	members, ok := jsonskim.Object(raw)
	escaped := false
	for _, m := range members {
		escaped = escaped || m.Escaped()
	}
	if !ok || escaped {
		var resp struct {
			Usage             json.RawMessage `json:"usage"`
			IncompleteDetails json.RawMessage `json:"incomplete_details"`
		}
		if json.Unmarshal(raw, &resp) != nil {
			return nil, nil, false
		}
		return resp.Usage, resp.IncompleteDetails, true
	}
	for _, m := range members {
		switch {
		case bytes.EqualFold(m.Key, []byte("usage")):
			usage = m.Value
		case bytes.EqualFold(m.Key, []byte("incomplete_details")):
			details = m.Value
		}
	}
	return usage, details, true
}

// pendingMetrics is one target's /aggregate_metrics request, built as
// its results arrive: the encoded entries, comma-separated, after the
// opening of {"verify_responses": [...]} (aggstream.Open). From this
// run's first result on, the request is streamed to the target as the
// body grows (see open), so that the servers read the results while the
// collection runs; the body is kept whole all the same, to be sent again
// at the end should the stream fail.
type pendingMetrics struct {
	mu   sync.Mutex
	more *sync.Cond // signalled when body grows, the run ends or the stream is abandoned
	body []byte
	n    int // entries in body
	sent int // bytes of body the stream has read
	// ended says no entry will follow; abandoned that the stream is to
	// stop (a read of its body fails with it).
	ended     bool
	abandoned error

	// The stream, once opened: done is closed when its call has
	// returned, with answer and err set; cancel ends the call.
	done   chan struct{}
	cancel context.CancelFunc
	answer server.RawJSON // an answer not marked complete, as it came
	marked *markedAnswer  // an answer marked complete, read as it arrived
	err    error
}

// add appends one encoded entry.
func (p *pendingMetrics) add(entry []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.body == nil {
		p.body = append(make([]byte, 0, 64<<10), aggstream.Open...)
	}
	if p.n > 0 {
		p.body = append(p.body, ',')
	}
	p.body = append(p.body, entry...)
	p.n++
	if p.more != nil && len(p.body)-p.sent >= aggstream.Batch {
		p.more.Signal() // a batch is there for the stream
	}
}

// request returns the whole body, closed. The stream has ended.
func (p *pendingMetrics) request() server.RawJSON {
	return server.RawJSON(append(p.body[:len(p.body):len(p.body)], aggstream.Close...))
}

// open starts streaming the request to url, unless it was started
// before: a call whose body is what add has appended so far, then, as it
// is appended, what follows, closed when the run ends (finish). Its
// answer waits for finish.
func (p *pendingMetrics) open(ctx context.Context, client *server.Client, url string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done != nil {
		return
	}
	p.more = sync.NewCond(&p.mu)
	ctx, p.cancel = context.WithCancel(ctx)
	p.done = make(chan struct{})
	go func() {
		defer close(p.done)
		p.err = client.PostStream(ctx, url, &streamBody{p: p}, server.AnswerReader(func(h http.Header, body io.Reader) error {
			if h.Get(aggstream.CompleteHeader) == aggstream.CompleteValue {
				var err error
				p.marked, err = readMarked(body)
				return err
			}
			var buf bytes.Buffer
			_, err := buf.ReadFrom(body)
			p.answer = buf.Bytes()
			return err
		}))
	}()
}

// finish ends the streamed request's body and returns the target's
// answer (waiting at most timeout for it once the body is sent): raw, or,
// when the target marked it complete, read as it arrived (marked); ok is
// false when there was no stream.
func (p *pendingMetrics) finish(timeout time.Duration) (answer server.RawJSON, marked *markedAnswer, ok bool, err error) {
	p.mu.Lock()
	if p.done == nil {
		p.mu.Unlock()
		return nil, nil, false, nil
	}
	p.ended = true
	p.more.Broadcast()
	p.mu.Unlock()
	stop := time.AfterFunc(timeout, p.cancel)
	<-p.done
	stop.Stop()
	p.cancel()
	return p.answer, p.marked, true, p.err
}

// abandon stops a stream that is still open and waits for its call to
// end: for a run that ends without aggregating.
func (p *pendingMetrics) abandon() {
	p.mu.Lock()
	if p.done == nil {
		p.mu.Unlock()
		return
	}
	if p.abandoned == nil {
		p.abandoned = errStreamAbandoned
	}
	p.more.Broadcast()
	p.mu.Unlock()
	p.cancel()
	<-p.done
}

// errStreamAbandoned ends the body of a stream whose run ended early.
var errStreamAbandoned = errors.New("rollout: the run ended before its aggregation")

// streamBody reads a pendingMetrics' body as it grows: what has been
// appended, aggstream.Batch bytes at least at a time (each read is a chunk
// on the wire, and its own wake-up of every server on the way), then,
// once the run has ended, the rest and the list's close.
type streamBody struct {
	p    *pendingMetrics
	tail int // of aggstream.Close read so far
}

func (s *streamBody) Read(b []byte) (int, error) {
	p := s.p
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.body)-p.sent < aggstream.Batch && !p.ended && p.abandoned == nil {
		p.more.Wait()
	}
	switch {
	case p.abandoned != nil:
		return 0, p.abandoned
	case p.sent < len(p.body):
		n := copy(b, p.body[p.sent:])
		p.sent += n
		return n, nil
	case s.tail < len(aggstream.Close):
		n := copy(b, aggstream.Close[s.tail:])
		s.tail += n
		return n, nil
	}
	return 0, io.EOF
}

// priorResult is a result an earlier run wrote to the output, with what
// routes it to its group.
type priorResult struct {
	server, agent string
	entry         []byte // metricsEntry of the result
}

// routePrior groups the results of earlier runs by target key: a result
// stamped with an environment server under that server (which must be
// in the fleet), else under its agent's current target. A result whose
// agent the options cannot reach is left out.
func routePrior(r *router, prior []priorResult) (map[string]*pendingMetrics, error) {
	out := map[string]*pendingMetrics{}
	for _, p := range prior {
		var t *target
		var err error
		if p.server != "" {
			if t, err = r.forServer(p.server, p.agent); err != nil {
				return nil, fmt.Errorf("rollout: the output holds results of environment server %q, which is not in the fleet; "+
					"aggregate them with the fleet that produced them", p.server)
			}
		} else if t, err = r.forAgent(p.agent); err != nil {
			continue
		}
		if out[t.key] == nil {
			out[t.key] = &pendingMetrics{}
		}
		out[t.key].add(p.entry)
	}
	return out, nil
}

// aggregate sends each target (environment server, or agent called
// directly) the results it produced that the output holds (this run's
// and, on resume, the earlier ones), in target name order, and writes
// the answers to path. Targets with no successful result are left out;
// with no entry at all no file is written. The first failed call is
// returned, and nothing is written then.
func (c *collector) aggregate(ctx context.Context, path string) ([]AgentMetrics, error) {
	keys := sortedKeys(c.entries)
	agentOf := map[string]string{}
	for _, key := range keys {
		if t := c.router.made[key]; t != nil && c.entries[key].n > 0 {
			agentOf[key] = t.agent
		}
	}
	labels := labelRuns(agentOf)
	var out []AgentMetrics
	var checks sync.WaitGroup
	var invalidMu sync.Mutex
	var invalid error // the first answer found not to be JSON
	defer checks.Wait()
	for _, key := range keys {
		t, entries := c.router.made[key], c.entries[key]
		if t == nil || entries.n == 0 {
			continue
		}
		what := "agent " + key
		if t.server != "" {
			what = "environment server " + key
		}
		raw, marked, streamed, err := entries.finish(c.client.Timeout())
		var refused *server.StatusError
		if streamed && errors.As(err, &refused) && !gatewayStatus(refused.Status) {
			// The target read the results and refused them: sending them
			// again would get the same answer.
			return nil, fmt.Errorf("rollout: aggregate metrics of %s: %w", what, err)
		}
		if streamed && err != nil {
			slog.Warn("rollout: the streamed /aggregate_metrics call failed; sending the results again, at once",
				"target", what, "err", err)
		}
		if !streamed || err != nil {
			raw, marked = nil, nil
			if err := c.client.PostJSON(ctx, t.aggregate, entries.request(), &raw); err != nil {
				return nil, fmt.Errorf("rollout: aggregate metrics of %s: %w", what, err)
			}
		}
		var resp protocol.AggregateMetricsResponse
		var groupsIndented []byte
		if marked != nil {
			// Checked, taken apart and indented as it arrived.
			resp, groupsIndented = marked.metrics, marked.groups
		} else {
			// The servers on the way pass the answer on unread: it is
			// checked here, while it is taken apart and written.
			checks.Go(func() {
				if !json.Valid(raw) {
					invalidMu.Lock()
					defer invalidMu.Unlock()
					invalid = cmp.Or(invalid, fmt.Errorf("rollout: aggregate metrics of %s: the answer is not valid JSON", what))
				}
			})
			if resp, err = decodeMetrics(json.RawMessage(raw)); err != nil {
				return nil, fmt.Errorf("rollout: aggregate metrics of %s: %w", what, err)
			}
		}
		m := AgentMetrics{EnvironmentServer: t.server, AgentMetrics: resp.AgentMetrics, KeyMetrics: resp.KeyMetrics,
			GroupLevelMetrics: resp.GroupLevelMetrics, RepeatLevelMetrics: resp.RepeatLevelMetrics, PerfSummary: resp.PerfSummary,
			groupsIndented: groupsIndented}
		m.AgentRef.Name = labels[key]
		if m.AgentMetrics == nil {
			m.AgentMetrics = map[string]any{}
		}
		if m.KeyMetrics == nil {
			m.KeyMetrics = map[string]any{}
		}
		if m.GroupLevelMetrics == nil {
			m.GroupLevelMetrics = []json.RawMessage{}
		}
		if m.RepeatLevelMetrics == nil {
			m.RepeatLevelMetrics = []json.RawMessage{}
		}
		out = append(out, m)
	}
	if len(out) == 0 {
		return nil, nil
	}
	b, err := encodeMetricsFile(out)
	checks.Wait()
	if invalid != nil {
		return nil, invalid
	}
	if err != nil {
		return nil, fmt.Errorf("rollout: aggregate metrics: %w", err)
	}
	if err := os.WriteFile(path, b, contract.RunFilePerm); err != nil {
		return nil, fmt.Errorf("rollout: aggregate metrics: %w", err)
	}
	return out, nil
}

// abandonStreams stops every streamed /aggregate_metrics call still
// open (a run that ended before aggregating) and waits for them.
func (c *collector) abandonStreams() {
	for _, p := range c.entries {
		p.abandon()
	}
}

// labelRuns names each group (by key) after its agent when that agent
// has no other group, else after the key, and falls back to the key
// while a name still repeats, as upstream's label_runs does.
func labelRuns(agentOf map[string]string) map[string]string {
	keysOf := map[string]int{}
	for _, agent := range agentOf {
		if agent != "" {
			keysOf[agent]++
		}
	}
	labels := map[string]string{}
	for key, agent := range agentOf {
		labels[key] = key
		if agent != "" && keysOf[agent] == 1 {
			labels[key] = agent
		}
	}
	for {
		count := map[string]int{}
		for _, l := range labels {
			count[l]++
		}
		changed := false
		for key, l := range labels {
			if count[l] > 1 && l != key {
				labels[key] = key
				changed = true
			}
		}
		if !changed {
			return labels
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
