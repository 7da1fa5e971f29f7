package rollout

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/gymlens/gymlens/environment"
	"github.com/gymlens/gymlens/protocol"
)

// metricsAnswers are /aggregate_metrics answers of several shapes: as
// our servers write them, with white space, with members missing, extra
// or null, and a member name written with an escape.
var metricsAnswers = []string{
	`{"group_level_metrics":[{"_ng_task_index":0,"mean/reward":1,"rollout_infos":[{"rollout_id":"0:0","reward":1}]},{"_ng_task_index":1,"mean/reward":0}],` +
		`"agent_metrics":{"mean/reward":0.5,"num_repeats":1},"key_metrics":{"mean/reward":0.5},"perf_summary":null,"repeat_level_metrics":[]}`,
	`{ "group_level_metrics" : [ { "a" : [ 1 , 2 ] } ] , "agent_metrics" : { } , "key_metrics" : { "x" : "y\"}" } , "perf_summary" : { "mean_num_turns" : 2 } , "repeat_level_metrics" : [ {"b":{}} ] }`,
	`{"agent_metrics":{"mean/reward":1},"group_level_metrics":[{"k":1}],"not_upstreams":1}`,
	`{"group_level_metrics":null,"agent_metrics":null,"key_metrics":{},"perf_summary":null,"repeat_level_metrics":null}`,
	`{"group_level_metrics":[],"agent_metrics":{},"key_metrics":{},"perf_summary":null,"repeat\u005flevel_metrics":[{"c":1}]}`,
	`{}`,
}

// TestDecodeMetricsIsEncodingJSONs holds decodeMetrics to what
// encoding/json decodes from the same answers.
func TestDecodeMetricsIsEncodingJSONs(t *testing.T) {
	for _, a := range metricsAnswers {
		got, err := decodeMetrics(json.RawMessage(a))
		if err != nil {
			t.Fatalf("%s: %v", a, err)
		}
		var want AgentMetrics
		if err := json.Unmarshal([]byte(a), &want); err != nil {
			t.Fatal(err)
		}
		g := AgentMetrics{AgentMetrics: got.AgentMetrics, KeyMetrics: got.KeyMetrics, GroupLevelMetrics: got.GroupLevelMetrics,
			RepeatLevelMetrics: got.RepeatLevelMetrics, PerfSummary: got.PerfSummary}
		if !reflect.DeepEqual(normalised(t, g), normalised(t, want)) {
			t.Errorf("%s:\n got %+v\nwant %+v", a, g, want)
		}
	}
}

// normalised encodes m compactly and decodes it generically, so that two
// values compare by content.
func normalised(t *testing.T, m AgentMetrics) any {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestEncodeMetricsFileIsMarshalIndent holds the aggregate metrics
// file to json.MarshalIndent's layout (and a newline), with and without
// an environment server, perf summary, per-task and per-repeat objects.
func TestEncodeMetricsFileIsMarshalIndent(t *testing.T) {
	var entries []AgentMetrics
	for i, a := range metricsAnswers[:2] {
		m, err := decodeMetrics(json.RawMessage(a))
		if err != nil {
			t.Fatal(err)
		}
		e := AgentMetrics{AgentMetrics: m.AgentMetrics, KeyMetrics: m.KeyMetrics, GroupLevelMetrics: m.GroupLevelMetrics,
			RepeatLevelMetrics: m.RepeatLevelMetrics, PerfSummary: m.PerfSummary}
		e.AgentRef.Name = "agent"
		if i == 1 {
			e.EnvironmentServer = "env"
		}
		entries = append(entries, e)
	}
	// A large run's answer: per-task objects as the resources server
	// writes them, enough to be indented in parts.
	var responses []protocol.Fields
	for task := range 3000 {
		for rollout := range 2 {
			var f protocol.Fields
			_ = f.Set(protocol.KeyTaskIndex, task)
			_ = f.Set(protocol.KeyRolloutIndex, rollout)
			_ = f.Set(protocol.KeyReward, float64((task+rollout)%3)/2)
			_ = f.Set("correct", (task+rollout)%2 == 0)
			responses = append(responses, f)
		}
	}
	big := environment.AggregateMetrics(responses)
	e := AgentMetrics{AgentMetrics: big.AgentMetrics, KeyMetrics: big.KeyMetrics, GroupLevelMetrics: big.GroupLevelMetrics,
		RepeatLevelMetrics: big.RepeatLevelMetrics}
	e.AgentRef.Name = "big"
	entries = append(entries, e)
	for _, list := range [][]AgentMetrics{entries[:1], entries[:2], entries, nil} {
		want, err := json.MarshalIndent(list, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		got, err := encodeMetricsFile(list)
		if err != nil {
			t.Fatal(err)
		}
		if list == nil {
			want = []byte("[]")
		}
		if !bytes.Equal(got, append(want, '\n')) {
			t.Errorf("got\n%s\nwant\n%s", got, want)
		}
	}
}

// TestMarkedAnswerAsWholeAnswer holds the reading of an answer marked
// complete as it arrives (readMarked: split, checked and indented in
// pieces) to the reading of the same bytes whole (decodeMetrics, then
// encodeMetricsFile indenting): the same file, for answers of none, one,
// and enough per-task objects for several pieces, read a few bytes at a
// time. A marked answer that is cut, invalid inside a per-task object, or
// not of the complete shape is an error.
func TestMarkedAnswerAsWholeAnswer(t *testing.T) {
	var responses []protocol.Fields
	for task := range 3*groupPiece + 5 {
		for rollout := range 1 + task%2 {
			var f protocol.Fields
			_ = f.Set(protocol.KeyTaskIndex, task)
			_ = f.Set(protocol.KeyRolloutIndex, rollout)
			_ = f.Set(protocol.KeyReward, float64((task+rollout)%3)/2)
			responses = append(responses, f)
		}
	}
	answers := []string{metricsAnswers[0]}
	for _, n := range []int{0, 1, len(responses)} {
		b, err := environment.AggregateMetrics(responses[:n]).MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		answers = append(answers, string(b)+"\n")
	}
	file := func(m protocol.AggregateMetricsResponse, indented []byte) []byte {
		e := AgentMetrics{AgentMetrics: m.AgentMetrics, KeyMetrics: m.KeyMetrics, GroupLevelMetrics: m.GroupLevelMetrics,
			RepeatLevelMetrics: m.RepeatLevelMetrics, PerfSummary: m.PerfSummary, groupsIndented: indented}
		e.AgentRef.Name = "agent"
		b, err := encodeMetricsFile([]AgentMetrics{e})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, a := range answers {
		whole, err := decodeMetrics(json.RawMessage(a))
		if err != nil {
			t.Fatal(err)
		}
		marked, err := readMarked(iotest.HalfReader(strings.NewReader(a)))
		if err != nil {
			t.Fatalf("%.80s: %v", a, err)
		}
		if got, want := file(marked.metrics, marked.groups), file(whole, nil); !bytes.Equal(got, want) {
			t.Errorf("%.80s: read as it arrived, the file is\n%.400s\nwant\n%.400s", a, got, want)
		}
		if len(marked.metrics.GroupLevelMetrics) != len(whole.GroupLevelMetrics) {
			t.Errorf("%.80s: %d per-task objects, want %d", a, len(marked.metrics.GroupLevelMetrics), len(whole.GroupLevelMetrics))
		}
	}
	big := answers[len(answers)-1]
	for _, bad := range []string{
		big[:len(big)/2],
		strings.Replace(big, `"mean/reward":`, `"mean/reward":tru,"x":`, 1),
		strings.Replace(big, `"key_metrics"`, `"other_metrics"`, 1),
		strings.TrimSuffix(big, "}\n"),
		`{"agent_metrics":{},"group_level_metrics":[]}`,
	} {
		if _, err := readMarked(strings.NewReader(bad)); err == nil {
			t.Errorf("a broken marked answer was taken: %.100s ... %.60s", bad, bad[max(0, len(bad)-60):])
		}
	}
}
