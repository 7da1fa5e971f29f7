package rollout_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/dataset"
	"github.com/gymlens/gymlens/protocol"
	"github.com/gymlens/gymlens/rollout"
	"github.com/gymlens/gymlens/server"
	"github.com/gymlens/gymlens/servers/resources/counter"
)

// hangGuard bounds how long a test waits for something that should happen
// at once; reaching it means a hang, never a slow machine.
const hangGuard = 30 * time.Second

const agentName = dataset.DefaultAgent

func outPath(t *testing.T) string { return filepath.Join(t.TempDir(), "rollouts.jsonl") }

// options returns the options of a run against one agent.
func options(agent *fakeAgent, out string) rollout.Options {
	return rollout.Options{Agents: map[string]string{agentName: agent.URL}, Output: out}
}

// readLines parses a JSONL file the collector wrote, failing the test on
// a line that is not a complete JSON object; a missing file has none.
func readLines(t *testing.T, path string) []protocol.Fields {
	t.Helper()
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) > 0 && raw[len(raw)-1] != '\n' {
		t.Fatalf("%s does not end with a newline: %q", path, raw[max(0, len(raw)-80):])
	}
	var lines []protocol.Fields
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var f protocol.Fields
		if err := f.UnmarshalJSON(sc.Bytes()); err != nil {
			t.Fatalf("%s line %d %q: %v", path, len(lines)+1, sc.Text(), err)
		}
		lines = append(lines, f)
	}
	return lines
}

// get decodes member key of a line, failing the test when it is missing.
func get[T any](t *testing.T, f protocol.Fields, key string) T {
	t.Helper()
	var v T
	if ok, err := f.Decode(key, &v); !ok || err != nil {
		b, _ := f.MarshalJSON()
		t.Fatalf("line %s: member %s: present %v, %v", b, key, ok, err)
	}
	return v
}

func keysOf(f protocol.Fields) []string {
	var keys []string
	for _, m := range f {
		keys = append(keys, m.Key)
	}
	slices.Sort(keys)
	return keys
}

// ids returns the "task-rollout" pairs of lines, in order.
func ids(t *testing.T, lines []protocol.Fields) []string {
	t.Helper()
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = fmt.Sprintf("%d-%d", get[int](t, l, protocol.KeyTaskIndex), get[int](t, l, protocol.KeyRolloutIndex))
	}
	return out
}

func callIDs(calls []call) []string {
	out := make([]string, len(calls))
	for i, c := range calls {
		out[i] = fmt.Sprintf("%d-%d", c.Task, c.Rollout)
		if c.Attempt >= 0 {
			out[i] += fmt.Sprintf("/a%d", c.Attempt)
		}
	}
	return out
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func seq(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%d-0", i)
	}
	return out
}

func traceResponse(task int) string { return fmt.Sprintf("00-%032x-%016x-01", task+1, task+1) }

func TestCollectAll(t *testing.T) {
	const n = 20
	agent := startAgent(t, func(_ context.Context, c call) answer {
		ans := answer{Body: echo(c, float64(c.Task%2))} // odd tasks are rewarded
		switch {
		case c.Task == 5:
			ans.TraceResponse = "00-not-a-trace-01"
		case c.Task%3 == 0:
			ans.TraceResponse = traceResponse(c.Task)
		}
		return ans
	})
	rows := dataset.Arithmetic(n, 1)
	out := outPath(t)
	opts := options(agent, out)
	opts.Agents[agentName] += "/" // a trailing slash is fine
	before := time.Now().UTC()
	sum, err := rollout.Collect(context.Background(), rows, opts)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Total != n || sum.Succeeded != n || sum.Failed != 0 || sum.Skipped != 0 || sum.Discarded != 0 ||
		sum.Rewarded != n/2 || sum.Retries != 0 || sum.Remaining() != 0 || sum.RepairedBytes != 0 {
		t.Fatalf("summary %+v", sum)
	}
	if len(sum.DurationsMS) != n || sum.Elapsed <= 0 {
		t.Fatalf("summary %+v", sum)
	}

	lines := readLines(t, out)
	if got := sorted(ids(t, lines)); !slices.Equal(got, sorted(seq(n))) {
		t.Fatalf("output holds %v", got)
	}
	wantKeys := []string{"_gymlens", "_ng_rollout_index", "_ng_task_index", "agent_ref", "expected_answer",
		"extracted_answer", "response", "responses_create_params", "reward", "task_id"}
	for _, l := range lines {
		task := get[int](t, l, protocol.KeyTaskIndex)
		if got := keysOf(l); !slices.Equal(got, wantKeys) {
			t.Fatalf("line of task %d has members %v, want %v", task, got, wantKeys)
		}
		if get[float64](t, l, protocol.KeyReward) != float64(task%2) ||
			get[string](t, l, "expected_answer") != get[string](t, rows[task].Fields, "expected_answer") ||
			get[protocol.ServerRef](t, l, protocol.KeyAgentRef) != (protocol.ServerRef{Type: contract.ServerTypeAgent, Name: agentName}) {
			t.Fatalf("line of task %d: wrong members", task)
		}
		var params protocol.ResponseCreateParams
		if err := json.Unmarshal(must(l.Get(protocol.KeyParams)), &params); err != nil || params.Input.LastUserText() != rows[task].ResponsesCreateParams.Input.LastUserText() {
			t.Fatalf("line of task %d: params %v", task, err)
		}
		m := get[rollout.Bookkeeping](t, l, rollout.KeyBookkeeping)
		wantTrace := ""
		if task%3 == 0 {
			wantTrace = fmt.Sprintf("%032x", task+1)
		}
		if m.TraceID != wantTrace || m.RolloutID != fmt.Sprintf("%d-0", task) || m.DurationMS <= 0 || m.Attempts != 1 ||
			m.AttemptedAt.Before(before.Add(-time.Second)) || m.AttemptedAt.Location() != time.UTC {
			t.Fatalf("line of task %d: %s %+v", task, rollout.KeyBookkeeping, m)
		}
	}
	var rawMeta map[string]json.RawMessage
	if err := json.Unmarshal(must(lines[0].Get(rollout.KeyBookkeeping)), &rawMeta); err != nil {
		t.Fatal(err)
	}
	if got := sorted(keysOfMap(rawMeta)); !slices.Equal(got, []string{"attempted_at", "attempts", "duration_ms", "rollout_id", "trace_id"}) {
		t.Fatalf("%s members %v", rollout.KeyBookkeeping, got)
	}
	if _, err := time.Parse(time.RFC3339Nano, strings.Trim(string(rawMeta["attempted_at"]), `"`)); err != nil {
		t.Fatalf("attempted_at: %v", err)
	}

	// The agent saw every row once, with the collector's members.
	calls := agent.Calls()
	if got := sorted(callIDs(calls)); !slices.Equal(got, sorted(seq(n))) {
		t.Fatalf("agent saw %v", got)
	}
	for _, c := range calls {
		if c.Row.AgentRef == nil || c.Row.AgentRef.Name != agentName || c.Row.RolloutID != "" ||
			get[string](t, c.Body, "expected_answer") != get[string](t, rows[c.Task].Fields, "expected_answer") {
			t.Fatalf("agent got %v", c.Body)
		}
	}

	// Sidecars: the expanded rows, an empty failures file, the metrics.
	mat := readLines(t, rollout.MaterializedInputsPath(out))
	if got := ids(t, mat); !slices.Equal(got, seq(n)) {
		t.Fatalf("materialized inputs %v", got)
	}
	for i, l := range mat {
		if got := keysOf(l); !slices.Equal(got, []string{"_ng_rollout_index", "_ng_task_index", "agent_ref", "expected_answer", "responses_create_params", "task_id"}) {
			t.Fatalf("materialized row %d has %v", i, got)
		}
	}
	if fi, err := os.Stat(rollout.FailuresPath(out)); err != nil || fi.Size() != 0 {
		t.Fatalf("failures file: %v, %v", fi, err)
	}
	aggs := agent.Aggregates()
	if len(aggs) != 1 || len(aggs[0].VerifyResponses) != n {
		t.Fatalf("aggregate requests %+v", aggs)
	}
	for _, e := range aggs[0].VerifyResponses {
		// Upstream strips only the prompt, the episode and observability
		// payloads: the collector's members go along.
		if got := keysOf(e); !slices.Equal(got, []string{"_gymlens", "_ng_rollout_index", "_ng_task_index", "agent_ref", "expected_answer", "extracted_answer", "response", "reward", "task_id"}) {
			t.Fatalf("aggregate entry members %v", got)
		}
		if got := string(must(e.Get(protocol.KeyResponse))); got != `{"usage":{"input_tokens":12,"input_tokens_details":{"cached_tokens":0},"output_tokens":7,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":19}}` {
			t.Fatalf("aggregate entry response %s", got)
		}
	}
	raw, err := os.ReadFile(rollout.AggregateMetricsPath(out))
	if err != nil {
		t.Fatal(err)
	}
	want := `[
  {
    "agent_ref": {
      "name": "simple_agent"
    },
    "agent_metrics": {
      "count": 20,
      "mean/reward": 0.5
    },
    "key_metrics": {
      "mean/reward": 0.5
    },
    "group_level_metrics": [
      {
        "group": "all"
      }
    ],
    "repeat_level_metrics": []
  }
]
`
	if string(raw) != want {
		t.Fatalf("aggregate metrics file:\n%s\nwant\n%s", raw, want)
	}
	if len(sum.Metrics) != 1 || sum.Metrics[0].AgentRef.Name != agentName || sum.Metrics[0].KeyMetrics["mean/reward"] != 0.5 {
		t.Fatalf("summary metrics %+v", sum.Metrics)
	}
	if filepath.Base(rollout.AggregateMetricsPath(out)) != "rollouts_aggregate_metrics.json" ||
		filepath.Base(rollout.FailuresPath(out)) != "rollouts_failures.jsonl" ||
		filepath.Base(rollout.MaterializedInputsPath(out)) != "rollouts_materialized_inputs.jsonl" {
		t.Fatal("sidecar names")
	}

	// Without Resume, a second run starts the files afresh.
	sum, err = rollout.Collect(context.Background(), rows, opts)
	if err != nil || sum.Skipped != 0 || sum.Succeeded != n {
		t.Fatalf("rerun: %+v, %v", sum, err)
	}
	if got := len(readLines(t, out)); got != n {
		t.Fatalf("rerun left %d lines", got)
	}
}

func must(raw json.RawMessage, ok bool) json.RawMessage {
	if !ok {
		return nil
	}
	return raw
}

func keysOfMap(m map[string]json.RawMessage) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}

func TestSidecarPaths(t *testing.T) {
	for in, want := range map[string][3]string{
		"out/r.jsonl":   {"out/r_failures.jsonl", "out/r_materialized_inputs.jsonl", "out/r_aggregate_metrics.json"},
		"r":             {"r_failures.jsonl", "r_materialized_inputs.jsonl", "r_aggregate_metrics.json"},
		"/a.b/c.d.json": {"/a.b/c.d_failures.jsonl", "/a.b/c.d_materialized_inputs.jsonl", "/a.b/c.d_aggregate_metrics.json"},
	} {
		got := [3]string{rollout.FailuresPath(in), rollout.MaterializedInputsPath(in), rollout.AggregateMetricsPath(in)}
		if got != want {
			t.Errorf("%s: %v, want %v", in, got, want)
		}
	}
}

// rowsFrom parses JSON rows.
func rowsFrom(t *testing.T, lines ...string) []protocol.RunRequest {
	t.Helper()
	rows, err := dataset.ReadRows(strings.NewReader(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func TestCollectPreprocessing(t *testing.T) {
	agent := startAgent(t, nil)
	rows := rowsFrom(t,
		`{"responses_create_params":{"input":"a"},"agent_ref":{"name":"simple_agent"}}`,
		`{"responses_create_params":{"input":"b"},"agent_ref":{"name":"simple_agent"}}`,
		`{"responses_create_params":{"input":"a"},"agent_ref":{"name":"simple_agent"}}`, // the same task as the first
		`{"responses_create_params":{"input":"c"},"agent_ref":{"name":"simple_agent"},"_ng_task_index":7,"_ng_rollout_index":5}`,
		`{"responses_create_params":{"input":"d"}}`, // runs on the default agent
		`{"responses_create_params":{"input":"e"},"agent_ref":{"name":"simple_agent"},"_ng_rollout_id":"custom.id"}`,
	)
	out := outPath(t)
	opts := options(agent, out)
	opts.NumRepeats, opts.Concurrency, opts.DefaultAgent = 2, 1, agentName
	sum, err := rollout.Collect(context.Background(), rows, opts)
	if err != nil || sum.Total != 12 || sum.Succeeded != 12 {
		t.Fatalf("%+v, %v", sum, err)
	}
	// Repeats back to back (a a b b), identical rows sharing a task index
	// whose rollout indexes continue, an explicit task index kept.
	want := []string{"0-0", "0-1", "1-0", "1-1", "0-2", "0-3", "7-0", "7-1", "2-0", "2-1", "3-0", "3-1"}
	mat := readLines(t, rollout.MaterializedInputsPath(out))
	if got := ids(t, mat); !slices.Equal(got, want) {
		t.Fatalf("materialized %v, want %v", got, want)
	}
	if got := callIDs(agent.Calls()); !slices.Equal(got, want) { // Concurrency 1: in order
		t.Fatalf("agent saw %v, want %v", got, want)
	}
	if got := ids(t, readLines(t, out)); !slices.Equal(got, want) {
		t.Fatalf("output %v, want %v", got, want)
	}
	for _, l := range mat {
		input := get[string](t, get[protocol.Fields](t, l, protocol.KeyParams), "input")
		ref := get[protocol.ServerRef](t, l, protocol.KeyAgentRef)
		switch {
		case input == "d" && ref != protocol.ServerRef{Type: contract.ServerTypeAgent, Name: agentName}:
			t.Fatalf("default agent_ref %+v", ref)
		case input != "d" && ref != protocol.ServerRef{Name: agentName}:
			t.Fatalf("row agent_ref changed to %+v", ref)
		}
	}
	lines := readLines(t, out)
	for _, l := range lines {
		m := get[rollout.Bookkeeping](t, l, rollout.KeyBookkeeping)
		task := get[int](t, l, protocol.KeyTaskIndex)
		// The row's agent_ref as it came (the default agent's in full).
		wantRef := `{"name":"simple_agent"}`
		if task == 2 {
			wantRef = `{"type":"responses_api_agents","name":"simple_agent"}`
		}
		if got := string(must(l.Get(protocol.KeyAgentRef))); got != wantRef {
			t.Fatalf("task %d: agent_ref %s, want %s", task, got, wantRef)
		}
		if task == 3 {
			if m.RolloutID != "custom.id" || get[string](t, l, protocol.KeyRolloutID) != "custom.id" {
				t.Fatalf("explicit rollout id: %+v", m)
			}
		} else if want := fmt.Sprintf("%d-%d", task, get[int](t, l, protocol.KeyRolloutIndex)); m.RolloutID != want {
			t.Fatalf("rollout id %q, want %q", m.RolloutID, want)
		}
	}

	t.Run("limit", func(t *testing.T) {
		agent := startAgent(t, nil)
		opts := options(agent, outPath(t))
		opts.Limit, opts.NumRepeats = 4, 3
		sum, err := rollout.Collect(context.Background(), dataset.Arithmetic(10, 2), opts)
		if err != nil || sum.Total != 12 || sum.Succeeded != 12 {
			t.Fatalf("%+v, %v", sum, err)
		}
		if got := sorted(callIDs(agent.Calls())); !slices.Equal(got, sorted([]string{"0-0", "0-1", "0-2", "1-0", "1-1", "1-2", "2-0", "2-1", "2-2", "3-0", "3-1", "3-2"})) {
			t.Fatalf("agent saw %v", got)
		}
	})
	t.Run("repeats by agent", func(t *testing.T) {
		a, b := startAgent(t, nil), startAgent(t, nil)
		rows := append(dataset.Arithmetic(2, 3), dataset.WithAgent(dataset.Equivalence(3, 4), "other")...)
		opts := rollout.Options{Agents: map[string]string{agentName: a.URL, "other": b.URL}, Output: outPath(t),
			NumRepeatsByAgent: map[string]int{"other": 2, rollout.DefaultRepeatsKey: 3}}
		sum, err := rollout.Collect(context.Background(), rows, opts)
		if err != nil || sum.Total != 2*3+3*2 {
			t.Fatalf("%+v, %v", sum, err)
		}
		if got := sorted(callIDs(a.Calls())); !slices.Equal(got, []string{"0-0", "0-1", "0-2", "1-0", "1-1", "1-2"}) {
			t.Fatalf("agent %s saw %v", agentName, got)
		}
		if got := sorted(callIDs(b.Calls())); !slices.Equal(got, []string{"2-0", "2-1", "3-0", "3-1", "4-0", "4-1"}) {
			t.Fatalf("agent other saw %v", got)
		}
		// One metrics entry per agent, in name order, each from its own
		// agent's results.
		if len(a.Aggregates()) != 1 || len(a.Aggregates()[0].VerifyResponses) != 6 || len(b.Aggregates()) != 1 || len(b.Aggregates()[0].VerifyResponses) != 6 {
			t.Fatalf("aggregate calls %d, %d", len(a.Aggregates()), len(b.Aggregates()))
		}
		if len(sum.Metrics) != 2 || sum.Metrics[0].AgentRef.Name != "other" || sum.Metrics[1].AgentRef.Name != agentName {
			t.Fatalf("metrics %+v", sum.Metrics)
		}
	})
}

func TestCollectRejectsBadInput(t *testing.T) {
	good := dataset.Arithmetic(2, 1)
	noAgent := rowsFrom(t, `{"responses_create_params":{"input":"q"}}`)
	var noInput protocol.RunRequest
	if err := json.Unmarshal([]byte(`{"responses_create_params":{}}`), &noInput); err != nil {
		t.Fatal(err)
	}
	badID := dataset.Arithmetic(1, 1)
	badID[0].RolloutID = "no spaces allowed"
	url := "http://127.0.0.1:1"
	for name, tc := range map[string]struct {
		rows   []protocol.RunRequest
		opts   rollout.Options
		want   string
		envMax string
	}{
		"no output":         {good, rollout.Options{Agents: map[string]string{agentName: url}}, "Output", ""},
		"no agents":         {good, rollout.Options{}, `agent "simple_agent" of rows 1, 2 is not in the fleet`, ""},
		"empty url":         {good, rollout.Options{Agents: map[string]string{agentName: ""}}, "want http://host:port", ""},
		"no scheme":         {good, rollout.Options{Agents: map[string]string{agentName: "127.0.0.1:80"}}, `URL "127.0.0.1:80"`, ""},
		"query":             {good, rollout.Options{Agents: map[string]string{agentName: url + "/?x=1"}}, "want http", ""},
		"invalid row":       {append(good, noInput), rollout.Options{Agents: map[string]string{agentName: url}}, "row 3: validation error: responses_create_params.input", ""},
		"no agent":          {noAgent, rollout.Options{Agents: map[string]string{agentName: url}}, "row 1 name no agent", ""},
		"bad rollout id":    {badID, rollout.Options{Agents: map[string]string{agentName: url}}, "row 1: _ng_rollout_id", ""},
		"negative repeats":  {good, rollout.Options{Agents: map[string]string{agentName: url}, NumRepeats: -1}, "NumRepeats", ""},
		"zero repeats":      {good, rollout.Options{Agents: map[string]string{agentName: url}, NumRepeatsByAgent: map[string]int{agentName: 0}}, "NumRepeatsByAgent", ""},
		"repeats uncovered": {good, rollout.Options{Agents: map[string]string{agentName: url}, NumRepeatsByAgent: map[string]int{"x": 2}}, `no entry for agent "simple_agent"`, ""},
		"negative attempts": {good, rollout.Options{Agents: map[string]string{agentName: url}, MaxAttempts: -2}, "MaxAttempts", ""},
		"bad attempts env":  {good, rollout.Options{Agents: map[string]string{agentName: url}}, rollout.EnvMaxAttempts + `="zero"`, "zero"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.opts.Output == "" && name != "no output" {
				tc.opts.Output = filepath.Join(dir, "out.jsonl")
			}
			t.Setenv(rollout.EnvMaxAttempts, tc.envMax)
			_, err := rollout.Collect(context.Background(), tc.rows, tc.opts)
			if !errors.Is(err, rollout.ErrInvalidInput) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Fatalf("files made before the input was checked: %v", entries)
			}
		})
	}
}

// A /run that fails is retried with the attempt index counting up; after
// MaxAttempts calls the rollout goes to the failures file.
func TestCollectRetries(t *testing.T) {
	var mu sync.Mutex
	attempts := map[int]int{}
	agent := startAgent(t, func(_ context.Context, c call) answer {
		mu.Lock()
		attempts[c.Task]++
		n := attempts[c.Task]
		mu.Unlock()
		switch {
		case c.Task == 1: // always fails
			return answer{Status: http.StatusInternalServerError, Body: "Hit an exception: verify exploded"}
		case c.Task == 3 && n <= 2: // the connection drops twice
			return answer{Abort: true}
		case c.Task == 4 && n == 1:
			return answer{Status: http.StatusServiceUnavailable, Body: map[string]string{"detail": "busy"}}
		case c.Task == 6 && n == 1: // 200, but not a JSON object
			return answer{Body: []int{1, 2}}
		}
		return answer{}
	})
	client := server.NewClient(server.ClientOptions{Retries: -1})
	t.Cleanup(client.CloseIdleConnections)
	out := outPath(t)
	opts := options(agent, out)
	opts.Client, opts.MaxAttempts = client, 3
	sum, err := rollout.Collect(context.Background(), dataset.Arithmetic(8, 2), opts)
	if !errors.Is(err, rollout.ErrFailedRollouts) || !strings.Contains(err.Error(), "rollouts_failures.jsonl") {
		t.Fatalf("err = %v, want ErrFailedRollouts", err)
	}
	if sum.Succeeded != 7 || sum.Failed != 1 || sum.Retries != 2+2+1+1 || sum.Remaining() != 0 || len(sum.DurationsMS) != 8 {
		t.Fatalf("summary %+v", sum)
	}
	got := map[int][]int{}
	for _, c := range agent.Calls() {
		got[c.Task] = append(got[c.Task], c.Attempt)
	}
	for task, want := range map[int][]int{0: {-1}, 1: {-1, 1, 2}, 3: {-1, 1, 2}, 4: {-1, 1}, 6: {-1, 1}} {
		if !slices.Equal(got[task], want) {
			t.Errorf("task %d: attempt indexes %v, want %v (-1: none)", task, got[task], want)
		}
	}

	lines := readLines(t, out)
	if got := sorted(ids(t, lines)); !slices.Equal(got, []string{"0-0", "2-0", "3-0", "4-0", "5-0", "6-0", "7-0"}) {
		t.Fatalf("output %v", got)
	}
	for _, l := range lines {
		task := get[int](t, l, protocol.KeyTaskIndex)
		m := get[rollout.Bookkeeping](t, l, rollout.KeyBookkeeping)
		wantAttempts := map[int]int{3: 3, 4: 2, 6: 2}[task]
		if wantAttempts == 0 {
			if l.Has(protocol.KeyAttemptIndex) || m.Attempts != 1 || m.RolloutID != fmt.Sprintf("%d-0", task) {
				t.Fatalf("task %d: %+v", task, m)
			}
			continue
		}
		if get[int](t, l, protocol.KeyAttemptIndex) != wantAttempts-1 || m.Attempts != wantAttempts ||
			m.RolloutID != fmt.Sprintf("%d-0-a%d", task, wantAttempts-1) {
			t.Fatalf("task %d: attempt %s, %+v", task, must(l.Get(protocol.KeyAttemptIndex)), m)
		}
	}

	fails := readLines(t, rollout.FailuresPath(out))
	if len(fails) != 1 {
		t.Fatalf("%d failure lines", len(fails))
	}
	f := fails[0]
	// Upstream's sidecar row of a /run that came back without a result
	// (route_failures_to_sidecar): the failure, and the collector's
	// members; not the row.
	if got := keysOf(f); !slices.Equal(got, []string{"_gymlens", "_ng_attempt_index", "_ng_failure_class", "_ng_failure_http_status",
		"_ng_failure_message", "_ng_failure_response_body", "_ng_failure_type", "_ng_rollout_index", "_ng_task_index", "agent_ref"}) {
		t.Fatalf("failure line members %v", got)
	}
	m := get[rollout.Bookkeeping](t, f, rollout.KeyBookkeeping)
	msg := get[string](t, f, rollout.KeyFailureMessage)
	if get[int](t, f, protocol.KeyTaskIndex) != 1 || get[int](t, f, protocol.KeyAttemptIndex) != 2 ||
		get[string](t, f, protocol.KeyFailureClass) != rollout.FailureAgentRunError ||
		get[string](t, f, rollout.KeyFailureType) != "ClientResponseError" || get[int](t, f, rollout.KeyFailureHTTPStatus) != 500 ||
		!strings.Contains(get[string](t, f, rollout.KeyFailureResponseBody), "verify exploded") ||
		!strings.HasPrefix(msg, "500, message='Internal Server Error', url='http://") || !strings.Contains(msg, "verify exploded") ||
		m.Attempts != 3 || m.RolloutID != "1-0-a2" || m.DurationMS <= 0 || m.AttemptedAt.IsZero() {
		t.Fatalf("failure line: %s %+v", f, m)
	}
	// Only the successes are aggregated.
	if aggs := agent.Aggregates(); len(aggs) != 1 || len(aggs[0].VerifyResponses) != 7 {
		t.Fatalf("aggregates %+v", aggs)
	}

	t.Run("attempts from the environment", func(t *testing.T) {
		t.Setenv(rollout.EnvMaxAttempts, "2")
		agent := startAgent(t, func(context.Context, call) answer { return answer{Status: http.StatusBadGateway} })
		// Before the agent stops: a connection the transport dialled but
		// never used would hold up its shutdown.
		t.Cleanup(client.CloseIdleConnections)
		opts := options(agent, outPath(t))
		opts.Client = client
		sum, err := rollout.Collect(context.Background(), dataset.Arithmetic(2, 2), opts)
		if !errors.Is(err, rollout.ErrFailedRollouts) || sum.Failed != 2 || len(agent.Calls()) != 4 {
			t.Fatalf("%+v, %v, %d calls", sum, err, len(agent.Calls()))
		}
		if entries, _ := os.ReadDir(filepath.Dir(opts.Output)); len(entries) != 3 { // no aggregate metrics file
			t.Fatalf("files %v", entries)
		}
	})
}

// Answers that carry the failure members are routed as upstream routes
// them.
func TestCollectRouting(t *testing.T) {
	agent := startAgent(t, func(_ context.Context, c call) answer {
		body := echo(c, 1)
		switch c.Task {
		case 1:
			_ = body.Set(protocol.KeyReward, 0)
			_ = body.Set(protocol.KeyFailureClass, "judge_failed")
			_ = body.Set("_ng_failure_judge_error", "judge timed out")
		case 2:
			_ = body.Set(protocol.KeyNoPersist, true)
		case 3:
			_ = body.Set(protocol.KeyNoPersist, 0) // falsy: persisted
		case 4:
			_ = body.Set(protocol.KeyFailureClass, nil) // null: no failure
		case 5:
			_ = body.Set(protocol.KeyNoPersist, "yes")
			_ = body.Set(protocol.KeyFailureClass, "kill_shaped") // no_persist wins
		}
		return answer{Body: body}
	})
	out := outPath(t)
	sum, err := rollout.Collect(context.Background(), dataset.Arithmetic(6, 3), options(agent, out))
	if !errors.Is(err, rollout.ErrFailedRollouts) {
		t.Fatalf("err = %v", err)
	}
	if sum.Succeeded != 3 || sum.Failed != 1 || sum.Discarded != 2 || sum.Rewarded != 3 || sum.Remaining() != 0 {
		t.Fatalf("summary %+v", sum)
	}
	if got := sorted(ids(t, readLines(t, out))); !slices.Equal(got, []string{"0-0", "3-0", "4-0"}) {
		t.Fatalf("output %v", got)
	}
	fails := readLines(t, rollout.FailuresPath(out))
	if len(fails) != 1 || get[int](t, fails[0], protocol.KeyTaskIndex) != 1 ||
		get[string](t, fails[0], protocol.KeyFailureClass) != "judge_failed" || !fails[0].Has(protocol.KeyResponse) ||
		get[rollout.Bookkeeping](t, fails[0], rollout.KeyBookkeeping).RolloutID != "1-0" {
		t.Fatalf("failures %v", fails)
	}
	if aggs := agent.Aggregates(); len(aggs) != 1 || len(aggs[0].VerifyResponses) != 3 {
		t.Fatalf("aggregates %+v", aggs)
	}
}

func TestCollectCompletionOrder(t *testing.T) {
	out := outPath(t)
	agent := startAgent(t, func(ctx context.Context, c call) answer {
		if c.Task == 0 {
			// Answer only once the line of task 1 is in the file.
			deadline := time.Now().Add(hangGuard)
			for time.Now().Before(deadline) && ctx.Err() == nil {
				if raw, _ := os.ReadFile(out); bytes.Contains(raw, []byte(`"_ng_task_index":1,`)) {
					break
				}
				time.Sleep(time.Millisecond)
			}
		}
		return answer{}
	})
	opts := options(agent, out)
	opts.Concurrency = 2
	if _, err := rollout.Collect(context.Background(), dataset.Arithmetic(2, 1), opts); err != nil {
		t.Fatal(err)
	}
	if got := ids(t, readLines(t, out)); !slices.Equal(got, []string{"1-0", "0-0"}) {
		t.Fatalf("lines in order %v, want completion order", got)
	}
}

func TestCollectConcurrencyBound(t *testing.T) {
	const limit = 4
	reached := make(chan struct{})
	var once sync.Once
	var agent *fakeAgent
	agent = startAgent(t, func(ctx context.Context, c call) answer {
		// Hold every request until the bound has been reached once, so the
		// peak is exactly the bound and not an accident of timing.
		if agent.inFlight.Load() >= limit {
			once.Do(func() { close(reached) })
		}
		select {
		case <-reached:
		case <-ctx.Done():
		case <-time.After(hangGuard):
		}
		return answer{}
	})
	opts := options(agent, outPath(t))
	opts.Concurrency, opts.NumRepeats = limit, 3
	sum, err := rollout.Collect(context.Background(), dataset.Arithmetic(20, 2), opts)
	if err != nil || sum.Succeeded != 60 {
		t.Fatalf("%+v, %v", sum, err)
	}
	if peak := agent.maxInFlight.Load(); peak != limit {
		t.Fatalf("peak in flight %d, want exactly %d", peak, limit)
	}
}

// A resumed run skips the rollouts the output completed and runs the
// failed and unrecorded ones again.
func TestCollectResumes(t *testing.T) {
	var healthy atomic.Bool
	agent := startAgent(t, func(_ context.Context, c call) answer {
		if healthy.Load() {
			return answer{}
		}
		switch c.Task {
		case 2:
			return answer{Status: http.StatusInternalServerError}
		case 4:
			body := echo(c, 1)
			_ = body.Set(protocol.KeyNoPersist, true)
			return answer{Body: body}
		}
		return answer{}
	})
	out := outPath(t)
	opts := options(agent, out)
	opts.MaxAttempts = 2
	rows := dataset.Arithmetic(6, 4)
	sum, err := rollout.Collect(context.Background(), rows, opts)
	if !errors.Is(err, rollout.ErrFailedRollouts) || sum.Succeeded != 4 || sum.Failed != 1 || sum.Discarded != 1 {
		t.Fatalf("first run: %+v, %v", sum, err)
	}
	before, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	failsBefore, _ := os.ReadFile(rollout.FailuresPath(out))

	healthy.Store(true)
	first := len(agent.Calls())
	opts.Resume = true
	sum, err = rollout.Collect(context.Background(), rows, opts)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Total != 6 || sum.Skipped != 4 || sum.Succeeded != 2 || sum.Failed != 0 || sum.RepairedBytes != 0 {
		t.Fatalf("resume: %+v", sum)
	}
	// The failed rollout continues past its recorded attempts (0 and 1);
	// the discarded one starts over.
	if got := sorted(callIDs(agent.Calls()[first:])); !slices.Equal(got, []string{"2-0/a2", "4-0"}) {
		t.Fatalf("resume ran %v", got)
	}
	after, _ := os.ReadFile(out)
	if !bytes.HasPrefix(after, before) {
		t.Fatal("existing lines were changed")
	}
	if failsAfter, _ := os.ReadFile(rollout.FailuresPath(out)); !bytes.Equal(failsAfter, failsBefore) {
		t.Fatal("the failures file changed")
	}
	if got := sorted(ids(t, readLines(t, out))); !slices.Equal(got, sorted(seq(6))) {
		t.Fatalf("output %v", got)
	}
	// Metrics cover the whole output: the earlier run's lines too.
	aggs := agent.Aggregates()
	if len(aggs) != 2 || len(aggs[1].VerifyResponses) != 6 {
		t.Fatalf("aggregates %d", len(aggs))
	}

	// A resume with nothing left to do runs nothing.
	calls := len(agent.Calls())
	sum, err = rollout.Collect(context.Background(), rows, opts)
	if err != nil || sum.Skipped != 6 || sum.Succeeded+sum.Failed != 0 || len(agent.Calls()) != calls {
		t.Fatalf("rerun: %+v, %v", sum, err)
	}
}

func TestCollectRepairsTruncatedLastLines(t *testing.T) {
	agent := startAgent(t, nil)
	out := outPath(t)
	opts := options(agent, out)
	rows := dataset.Arithmetic(6, 5)
	if _, err := rollout.Collect(context.Background(), rows, opts); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(out)
	lines := bytes.SplitAfter(raw, []byte("\n"))
	last := lines[len(lines)-2]
	cutID := ids(t, readLinesOf(t, last))[0]
	partial := last[:len(last)/2] // the process died in the middle of this write
	kept := bytes.Join(lines[:len(lines)-2], nil)
	if err := os.WriteFile(out, append(bytes.Clone(kept), partial...), 0o644); err != nil {
		t.Fatal(err)
	}
	failPartial := []byte(`{"_ng_task_index":1,"_ng_rollout_ind`)
	if err := os.WriteFile(rollout.FailuresPath(out), failPartial, 0o644); err != nil {
		t.Fatal(err)
	}
	calls := len(agent.Calls())
	opts.Resume = true
	sum, err := rollout.Collect(context.Background(), rows, opts)
	if err != nil {
		t.Fatal(err)
	}
	if sum.RepairedBytes != int64(len(partial)+len(failPartial)) || sum.Skipped != 5 || sum.Succeeded != 1 {
		t.Fatalf("summary %+v, want %d bytes repaired", sum, len(partial)+len(failPartial))
	}
	if got := callIDs(agent.Calls()[calls:]); !slices.Equal(got, []string{cutID}) {
		t.Fatalf("agent saw %v, want %v (the cut rollout runs again)", got, cutID)
	}
	after, _ := os.ReadFile(out)
	if !bytes.HasPrefix(after, kept) || bytes.Contains(after[len(kept):], partial[:len(partial)-1]) && len(readLines(t, out)) != 6 {
		t.Fatalf("repair changed complete lines or kept the fragment:\n%s", after)
	}
	if got := sorted(ids(t, readLines(t, out))); !slices.Equal(got, sorted(seq(6))) {
		t.Fatalf("output %v", got)
	}
	if fi, _ := os.Stat(rollout.FailuresPath(out)); fi.Size() != 0 {
		t.Fatal("the cut failure line was kept")
	}
}

// readLinesOf parses JSONL bytes.
func readLinesOf(t *testing.T, raw []byte) []protocol.Fields {
	t.Helper()
	path := filepath.Join(t.TempDir(), "x.jsonl")
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return readLines(t, path)
}

func TestCollectRefusesCorruptOutput(t *testing.T) {
	agent := startAgent(t, nil)
	for name, tc := range map[string]struct{ output, failures, want string }{
		"not json":      {`{"_ng_task_index":0,"_ng_rollout_index":0}` + "\nnot json\n", "", "rollouts.jsonl line 2 is not a rollout line"},
		"no indexes":    {`{"reward":1}` + "\n", "", "line 1 is not a rollout line: no _ng_task_index"},
		"failures file": {"", "\n[1]\n", "rollouts_failures.jsonl line 2 is not a failure line"},
	} {
		t.Run(name, func(t *testing.T) {
			out := outPath(t)
			if err := os.WriteFile(out, []byte(tc.output), 0o644); err != nil {
				t.Fatal(err)
			}
			if tc.failures != "" {
				if err := os.WriteFile(rollout.FailuresPath(out), []byte(tc.failures), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			opts := options(agent, out)
			opts.Resume = true
			_, err := rollout.Collect(context.Background(), dataset.Arithmetic(2, 1), opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
			if raw, _ := os.ReadFile(out); string(raw) != tc.output {
				t.Fatal("a corrupt output was modified")
			}
			if _, err := os.Stat(rollout.MaterializedInputsPath(out)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("materialized inputs written: %v", err)
			}
		})
	}
	if n := len(agent.Calls()); n != 0 {
		t.Fatalf("%d rollouts ran", n)
	}
}

func TestCollectAgentGoesAway(t *testing.T) {
	var agent *fakeAgent
	var calls atomic.Int64
	agent = startAgent(t, func(ctx context.Context, c call) answer {
		if calls.Add(1) == 4 { // Concurrency 1: requests come one at a time
			agent.beginStop() // answer this one, refuse every later connection
		}
		return answer{}
	})
	client := server.NewClient(server.ClientOptions{Retries: -1})
	t.Cleanup(client.CloseIdleConnections)
	out := outPath(t)
	opts := options(agent, out)
	opts.Client, opts.Concurrency, opts.MaxAttempts, opts.DisableAggregation = client, 1, 2, true
	sum, err := rollout.Collect(context.Background(), dataset.Arithmetic(10, 7), opts)
	if !errors.Is(err, rollout.ErrFailedRollouts) {
		t.Fatalf("err = %v", err)
	}
	if sum.Succeeded != 4 || sum.Failed != 6 || sum.Retries != 6 || sum.Remaining() != 0 {
		t.Fatalf("summary %+v", sum)
	}
	fails := readLines(t, rollout.FailuresPath(out))
	if len(fails) != 6 {
		t.Fatalf("%d failure lines", len(fails))
	}
	for _, f := range fails {
		if msg := get[string](t, f, rollout.KeyFailureMessage); !strings.Contains(msg, "refused") ||
			get[string](t, f, protocol.KeyFailureClass) != rollout.FailureAgentRequestFailed ||
			get[string](t, f, rollout.KeyFailureType) != "ClientConnectorError" ||
			string(must(f.Get(rollout.KeyFailureHTTPStatus))) != "null" {
			t.Fatalf("failure %s, want a refused connection", f)
		}
	}
	if _, err := os.Stat(rollout.AggregateMetricsPath(out)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("aggregation disabled, yet: %v", err)
	}
}

func TestCollectAggregationFails(t *testing.T) {
	agent := startAgent(t, nil)
	agent.failAggregates(http.StatusInternalServerError)
	out := outPath(t)
	sum, err := rollout.Collect(context.Background(), dataset.Arithmetic(3, 1), options(agent, out))
	if err == nil || errors.Is(err, rollout.ErrFailedRollouts) || !strings.Contains(err.Error(), "aggregate metrics of agent simple_agent") ||
		!strings.Contains(err.Error(), "no metrics today") {
		t.Fatalf("err = %v", err)
	}
	if sum.Succeeded != 3 || len(readLines(t, out)) != 3 || sum.Metrics != nil {
		t.Fatalf("summary %+v", sum)
	}
	if _, err := os.Stat(rollout.AggregateMetricsPath(out)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("aggregate metrics file: %v", err)
	}
}

func TestCollectCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const quick = 10
	var calls atomic.Int64
	agent := startAgent(t, func(rctx context.Context, c call) answer {
		if calls.Add(1) <= quick {
			return answer{}
		}
		cancel()      // the operator hits Ctrl-C while this rollout runs
		<-rctx.Done() // and the collector hangs up
		return answer{Status: http.StatusInternalServerError}
	})
	out := outPath(t)
	opts := options(agent, out)
	opts.Concurrency = 4
	rows := dataset.Arithmetic(200, 8)
	done := collectAsync(ctx, rows, opts)
	var res collectResult
	select {
	case res = <-done:
	case <-time.After(hangGuard):
		t.Fatal("Collect did not return after cancellation")
	}
	if !errors.Is(res.err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", res.err)
	}
	sum := res.sum
	if sum.Failed != 0 || sum.Succeeded > quick || sum.Remaining() < 200-quick {
		t.Fatalf("summary %+v: cancelled rollouts must not be recorded as failures", sum)
	}
	if n := len(readLines(t, out)); n != sum.Succeeded {
		t.Fatalf("%d lines, %d rollouts counted", n, sum.Succeeded)
	}
	if n := len(readLines(t, rollout.FailuresPath(out))); n != 0 {
		t.Fatalf("%d failure lines", n)
	}
	if n := len(agent.Calls()); n > quick+4 {
		t.Fatalf("agent got %d requests: rollouts were handed out after the cancel", n)
	}
	if _, err := os.Stat(rollout.AggregateMetricsPath(out)); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a cut-short run was aggregated")
	}

	// Resuming picks up where the cancelled run stopped.
	opts = options(startAgent(t, nil), out)
	opts.Resume = true
	sum2, err := rollout.Collect(context.Background(), rows, opts)
	if err != nil || sum2.Skipped != sum.Succeeded || sum2.Succeeded != 200-sum.Succeeded {
		t.Fatalf("resume: %+v, %v", sum2, err)
	}
}

func TestCollectWriteErrorStops(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	agent := startAgent(t, nil)
	out := outPath(t)
	if err := os.Symlink("/dev/full", out); err != nil {
		t.Skip(err)
	}
	opts := options(agent, out)
	opts.Concurrency = 2
	sum, err := rollout.Collect(context.Background(), dataset.Arithmetic(20, 9), opts)
	if err == nil || !strings.Contains(err.Error(), "write "+out) {
		t.Fatalf("err = %v", err)
	}
	if sum.Succeeded+sum.Failed != 0 {
		t.Fatalf("summary %+v counts rollouts that were never written", sum)
	}
	if n := len(agent.Calls()); n > 4 {
		t.Fatalf("the run went on after the write failed: %d requests", n)
	}
}

func TestCollectProgress(t *testing.T) {
	agent := startAgent(t, nil)
	for _, tty := range []bool{false, true} {
		t.Run(fmt.Sprintf("tty=%v", tty), func(t *testing.T) {
			var buf bytes.Buffer
			opts := options(agent, outPath(t))
			opts.Progress, opts.ProgressTTY, opts.NumRepeats = &buf, tty, 5
			if _, err := rollout.Collect(context.Background(), dataset.Arithmetic(5, 10), opts); err != nil {
				t.Fatal(err)
			}
			got := buf.String()
			if !strings.Contains(got, "25/25") || !strings.Contains(got, "100%") || !strings.Contains(got, "/s") {
				t.Fatalf("progress %q lacks done/total, percent or rate", got)
			}
			if !strings.HasSuffix(got, "\n") {
				t.Fatalf("progress %q does not end its line", got)
			}
			if tty != strings.Contains(got, "\r") {
				t.Fatalf("tty=%v but output %q", tty, got)
			}
			if tty && !strings.Contains(got, "[====================]") {
				t.Fatalf("no full bar in %q", got)
			}
			if !tty && !strings.HasPrefix(got, "rollouts: ") {
				t.Fatalf("plain progress %q", got)
			}
		})
	}
}

func TestCollectFile(t *testing.T) {
	agent := startAgent(t, nil)
	dir := t.TempDir()
	in := filepath.Join(dir, "tasks.jsonl")
	var buf bytes.Buffer
	if err := dataset.WriteRows(&buf, dataset.Counter(7, 3)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(in, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.jsonl")
	opts := options(agent, out)
	sum, err := rollout.CollectFile(context.Background(), in, opts)
	if err != nil || sum.Succeeded != 7 {
		t.Fatalf("%+v, %v", sum, err)
	}
	lines := readLines(t, out)
	if len(lines) != 7 || !lines[0].Has("expected_count") {
		t.Fatalf("%d lines", len(lines))
	}
	// The tools reach the agent untouched.
	for _, c := range agent.Calls() {
		if tools := c.Row.ResponsesCreateParams.Tools; len(tools) != 2 || tools[0].Name != counter.ToolIncrement {
			t.Fatalf("tools %+v", tools)
		}
	}

	if err := os.WriteFile(in, []byte(`{"responses_create_params":{"input":"q"}}`+"\n"+`{"responses_create_params":{}}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := rollout.CollectFile(context.Background(), in, opts); !errors.Is(err, rollout.ErrInvalidInput) || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("bad input file: %v", err)
	}
	if _, err := rollout.CollectFile(context.Background(), filepath.Join(dir, "missing.jsonl"), opts); !errors.Is(err, os.ErrNotExist) || !errors.Is(err, rollout.ErrInvalidInput) {
		t.Fatalf("missing input file: %v", err)
	}
}

func TestPercentile(t *testing.T) {
	v := []float64{40, 10, 30, 20, 50} // unsorted on purpose
	for _, tc := range []struct{ p, want float64 }{
		{0, 10}, {50, 30}, {100, 50}, {25, 20}, {10, 14}, {95, 48}, {-5, 10}, {150, 50},
	} {
		if got := rollout.Percentile(v, tc.p); got != tc.want {
			t.Errorf("Percentile(%v) = %v, want %v", tc.p, got, tc.want)
		}
	}
	if !slices.Equal(v, []float64{40, 10, 30, 20, 50}) {
		t.Fatal("Percentile modified its input")
	}
	if got := rollout.Percentile(nil, 50); got != 0 {
		t.Fatalf("no values: %v", got)
	}
	if got := rollout.Percentile([]float64{7}, 95); got != 7 {
		t.Fatalf("one value: %v", got)
	}
}

func ExamplePercentile() {
	durations := []float64{120, 80, 100, 300, 90}
	fmt.Printf("p50 %.0f ms, p95 %.0f ms\n", rollout.Percentile(durations, 50), rollout.Percentile(durations, 95))
	// Output: p50 100 ms, p95 264 ms
}

// Closing Options.Stop lets the rollouts in flight finish and be recorded
// without retrying them, starts no new one, and reports ErrStopped.
func TestCollectStopFinishesInFlight(t *testing.T) {
	stop := make(chan struct{})
	entered := make(chan struct{}, 64)
	release := make(chan struct{})
	agent := startAgent(t, func(ctx context.Context, c call) answer {
		entered <- struct{}{}
		<-release
		return answer{Status: http.StatusInternalServerError, Body: "model call failed: peer gone"}
	})
	const concurrency = 3
	out := outPath(t)
	opts := options(agent, out)
	opts.Concurrency, opts.Stop, opts.MaxAttempts = concurrency, stop, 5
	done := collectAsync(context.Background(), dataset.Arithmetic(50, 3), opts)
	for range concurrency {
		<-entered // every worker holds one rollout
	}
	close(stop)
	close(release)
	r := <-done
	if !errors.Is(r.err, rollout.ErrStopped) {
		t.Fatalf("err = %v, want ErrStopped", r.err)
	}
	fails := readLines(t, rollout.FailuresPath(out))
	if len(fails) != concurrency || r.sum.Failed != concurrency || r.sum.Retries != 0 {
		t.Fatalf("%d failure lines, %+v; want the %d in flight, recorded as failures", len(fails), r.sum, concurrency)
	}
	if n := len(agent.Calls()); n != concurrency {
		t.Fatalf("agent saw %d calls after Stop; want only the %d in flight", n, concurrency)
	}
}

// collectResult is what Collect returned.
type collectResult struct {
	sum rollout.Summary
	err error
}

// collectAsync runs Collect in a goroutine; its result arrives on the
// channel.
func collectAsync(ctx context.Context, rows []protocol.RunRequest, opts rollout.Options) <-chan collectResult {
	done := make(chan collectResult, 1)
	go func() {
		sum, err := rollout.Collect(ctx, rows, opts)
		done <- collectResult{sum, err}
	}()
	return done
}
