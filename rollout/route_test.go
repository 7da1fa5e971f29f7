package rollout_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gymlens/gymlens/dataset"
	"github.com/gymlens/gymlens/protocol"
	"github.com/gymlens/gymlens/rollout"
	"github.com/gymlens/gymlens/server"
)

// logBuffer is a slog handler's output, safe for the collector's
// goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func newLog() (*slog.Logger, *logBuffer) {
	b := &logBuffer{}
	return slog.New(slog.NewTextHandler(b, nil)), b
}

// rowsFor returns n arithmetic rows naming agent ("" for none).
func rowsFor(n int, seed int64, agent string) []protocol.RunRequest {
	rows := dataset.Arithmetic(n, seed)
	for i := range rows {
		rows[i].AgentRef = nil
		if agent != "" {
			rows[i].AgentRef = protocol.AgentRef(agent)
		}
	}
	return rows
}

// Rows go to the environment server that names their agent, as NeMo Gym
// 0.7's collector sends them; an agent none names is called directly,
// with one log line. Lines name the server and its implementation, and
// the aggregate metrics come from each server, one entry each.
func TestCollectThroughEnvironmentServers(t *testing.T) {
	env := startAgent(t, nil)    // the relay in front of agent_a
	agentA := startAgent(t, nil) // reached only through env
	agentB := startAgent(t, nil) // no environment server
	log, logs := newLog()
	out := outPath(t)
	rows := append(rowsFor(3, 1, "agent_a"), rowsFor(2, 2, "agent_b")...)
	sourced := rowsFor(1, 3, "")
	_ = sourced[0].Fields.Set(rollout.KeyTaskSource, "rs")
	rows = append(rows, sourced...)
	opts := rollout.Options{
		Agents: map[string]string{"agent_a": agentA.URL, "agent_b": agentB.URL},
		Environments: map[string]rollout.EnvironmentServer{
			"a_environment_server": {URL: env.URL, Impl: "legacy_agent", Agents: []string{"agent_a"}},
		},
		TaskSources: map[string]rollout.TaskSource{"rs": {Agent: "agent_a"}},
		Output:      out, Log: log,
	}
	sum, err := rollout.Collect(context.Background(), rows, opts)
	if err != nil || sum.Succeeded != 6 {
		t.Fatalf("%+v, %v", sum, err)
	}
	if len(env.Calls()) != 4 || len(agentA.Calls()) != 0 || len(agentB.Calls()) != 2 {
		t.Fatalf("calls: environment server %d, agent_a %d, agent_b %d", len(env.Calls()), len(agentA.Calls()), len(agentB.Calls()))
	}
	for _, l := range readLines(t, out) {
		ref := string(must(l.Get(protocol.KeyAgentRef)))
		switch {
		case strings.Contains(ref, "agent_a"):
			if get[string](t, l, rollout.KeyEnvironmentServer) != "a_environment_server" || get[string](t, l, rollout.KeyResultType) != "legacy_agent" {
				t.Errorf("line of agent_a: %s", l)
			}
		case l.Has(rollout.KeyEnvironmentServer) || l.Has(rollout.KeyResultType):
			t.Errorf("line of a directly called agent names an environment server: %s", l)
		}
		if l.Has(rollout.KeyTaskSource) {
			// Stamped as upstream stamps a task_source row: {"name": agent}.
			if get[string](t, l, rollout.KeyTaskSource) != "rs" || ref != `{"name":"agent_a"}` {
				t.Errorf("task_source line: %s", l)
			}
		}
	}
	if n := strings.Count(logs.String(), "calling the agent's /run directly"); n != 1 || !strings.Contains(logs.String(), "agent=agent_b") {
		t.Errorf("log, want one line about agent_b:\n%s", logs)
	}
	if aggs := env.Aggregates(); len(aggs) != 1 || len(aggs[0].VerifyResponses) != 4 {
		t.Errorf("environment server aggregates %+v", aggs)
	}
	if aggs := agentB.Aggregates(); len(aggs) != 1 || len(aggs[0].VerifyResponses) != 2 {
		t.Errorf("agent_b aggregates %+v", aggs)
	}
	if len(agentA.Aggregates()) != 0 {
		t.Errorf("agent_a was asked for metrics directly")
	}
	var entries []map[string]any
	raw, err := os.ReadFile(rollout.AggregateMetricsPath(out))
	if err != nil || json.Unmarshal(raw, &entries) != nil || len(entries) != 2 {
		t.Fatalf("aggregate metrics file: %v\n%s", err, raw)
	}
	name := func(e map[string]any) any { return e["agent_ref"].(map[string]any)["name"] }
	if name(entries[0]) != "agent_a" || entries[0]["_ng_environment_server"] != "a_environment_server" {
		t.Errorf("first entry %v", entries[0])
	}
	if _, ok := entries[1]["_ng_environment_server"]; ok || name(entries[1]) != "agent_b" {
		t.Errorf("second entry %v", entries[1])
	}
	for _, e := range entries {
		if l, ok := e["repeat_level_metrics"].([]any); !ok || len(l) != 0 {
			t.Errorf("entry without repeat_level_metrics: %v", e)
		}
	}
}

// Upstream refuses to choose between two environment servers that name
// one agent (AmbiguousEnvironmentServerError); rows stamped with
// _ng_environment_server choose for themselves, and the entries of one
// agent's two servers are then named by server (upstream's label_runs).
func TestCollectEnvironmentServerAmbiguity(t *testing.T) {
	e1, e2 := startAgent(t, nil), startAgent(t, nil)
	envs := map[string]rollout.EnvironmentServer{
		"e1": {URL: e1.URL, Impl: "legacy_agent", Agents: []string{"agent_a"}},
		"e2": {URL: e2.URL, Impl: "single_agent_turn", Agents: []string{"agent_a"}},
	}
	out := outPath(t)
	opts := rollout.Options{Environments: envs, Output: out}
	_, err := rollout.Collect(context.Background(), rowsFor(2, 1, "agent_a"), opts)
	if !errors.Is(err, rollout.ErrInvalidInput) || !strings.Contains(err.Error(), `agent "agent_a" is fronted by several environment servers (e1, e2)`) {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("an output was written: %v", err)
	}

	rows := rowsFor(4, 1, "")
	for i := range rows {
		_ = rows[i].Fields.Set(rollout.KeyEnvironmentServer, []string{"e1", "e2"}[i%2])
	}
	sum, err := rollout.Collect(context.Background(), rows, opts)
	if err != nil || sum.Succeeded != 4 || len(e1.Calls()) != 2 || len(e2.Calls()) != 2 {
		t.Fatalf("%+v, %v", sum, err)
	}
	for _, l := range readLines(t, out) {
		if string(must(l.Get(protocol.KeyAgentRef))) != `{"name":"agent_a"}` {
			t.Errorf("line %s: want the server's agent stamped", l)
		}
	}
	var entries []struct {
		Ref struct {
			Name string `json:"name"`
		} `json:"agent_ref"`
		Server string `json:"_ng_environment_server"`
	}
	raw, _ := os.ReadFile(rollout.AggregateMetricsPath(out))
	if json.Unmarshal(raw, &entries) != nil || len(entries) != 2 || entries[0].Ref.Name != "e1" || entries[0].Server != "e1" ||
		entries[1].Ref.Name != "e2" || entries[1].Server != "e2" {
		t.Fatalf("aggregate metrics file:\n%s", raw)
	}

	rows[0].Fields.Set(rollout.KeyEnvironmentServer, "e3")
	if _, err := rollout.Collect(context.Background(), rows, opts); !errors.Is(err, rollout.ErrInvalidInput) ||
		!strings.Contains(err.Error(), `row 1: environment server "e3" is not in the fleet`) {
		t.Fatalf("err = %v", err)
	}
}

// An agent override routes every row to its agent, as NeMo Gym 0.7's
// --agent does, and says which agent_refs it replaced.
func TestCollectAgentOverride(t *testing.T) {
	b := startAgent(t, nil)
	log, logs := newLog()
	out := outPath(t)
	rows := append(rowsFor(2, 1, "agent_a"), rowsFor(2, 2, "")...)
	rows = append(rows, rowsFor(1, 3, "agent_b")...)
	_ = rows[2].Fields.Set(rollout.KeyTaskSource, "nowhere") // the override wins over task_source
	opts := rollout.Options{Agents: map[string]string{"agent_b": b.URL}, AgentOverride: "agent_b", Output: out, Log: log}
	sum, err := rollout.Collect(context.Background(), rows, opts)
	if err != nil || sum.Succeeded != 5 || len(b.Calls()) != 5 {
		t.Fatalf("%+v, %v", sum, err)
	}
	for _, l := range readLines(t, out) {
		if string(must(l.Get(protocol.KeyAgentRef))) != `{"name":"agent_b"}` {
			t.Errorf("line %s", l)
		}
	}
	if s := logs.String(); strings.Count(s, "level=WARN") != 1 || !strings.Contains(s, "rerouted=\"agent_a -> agent_b\"") {
		t.Errorf("log:\n%s", s)
	}
}

// task_source resolves through Options.TaskSources; what cannot be
// resolved is refused before anything runs, saying why.
func TestCollectTaskSourceErrors(t *testing.T) {
	a := startAgent(t, nil)
	sources := map[string]rollout.TaskSource{"string_match": {Err: "2 agents reference this resources server (x, y)"}, "mcqa": {Agent: "agent_a"}}
	for source, want := range map[string]string{
		"string_match": `row 1: cannot resolve task_source to an agent: "string_match": 2 agents reference this resources server (x, y)`,
		"mcq":          `row 1: cannot resolve task_source to an agent: "mcq": not in the running config (did you mean "mcqa"?)`,
	} {
		rows := rowsFor(1, 1, "")
		_ = rows[0].Fields.Set(rollout.KeyTaskSource, source)
		_, err := rollout.Collect(context.Background(), rows, rollout.Options{Agents: map[string]string{"agent_a": a.URL},
			TaskSources: sources, Output: outPath(t)})
		if !errors.Is(err, rollout.ErrInvalidInput) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v", source, err)
		}
	}
}

// A /run that came back without a result is written as upstream's
// collector writes one with route_failures_to_sidecar: agent_run_error
// when the server answered (it ran and broke), agent_request_failed for
// a gateway's status or no answer at all.
func TestCollectFailureClasses(t *testing.T) {
	long := strings.Repeat("é", 2500)
	agent := startAgent(t, func(ctx context.Context, c call) answer {
		switch c.Task {
		case 0:
			return answer{Status: http.StatusBadGateway, Body: "upstream gone"}
		case 1:
			return answer{Status: http.StatusOK, Body: json.RawMessage(`[1,2]`)}
		case 2:
			return answer{Status: http.StatusInternalServerError, Body: long}
		case 3:
			<-ctx.Done() // until the collector gives up
			return answer{}
		}
		return answer{}
	})
	client := server.NewClient(server.ClientOptions{Timeout: 300 * time.Millisecond})
	t.Cleanup(client.CloseIdleConnections)
	out := outPath(t)
	opts := options(agent, out)
	opts.Client, opts.MaxAttempts, opts.DisableAggregation = client, 1, true
	sum, err := rollout.Collect(context.Background(), dataset.Arithmetic(5, 1), opts)
	if !errors.Is(err, rollout.ErrFailedRollouts) || sum.Failed != 4 || sum.Succeeded != 1 {
		t.Fatalf("%+v, %v", sum, err)
	}
	byTask := map[int]protocol.Fields{}
	for _, f := range readLines(t, rollout.FailuresPath(out)) {
		byTask[get[int](t, f, protocol.KeyTaskIndex)] = f
	}
	for task, want := range map[int]struct {
		class, kind, status, body string
	}{
		0: {rollout.FailureAgentRequestFailed, "ClientResponseError", "502", `"\"upstream gone\"\n"`},
		1: {rollout.FailureAgentRunError, "JSONDecodeError", "200", "null"},
		2: {rollout.FailureAgentRunError, "ClientResponseError", "500", ""},
		3: {rollout.FailureAgentRequestFailed, "TimeoutError", "null", "null"},
	} {
		f := byTask[task]
		if f == nil {
			t.Errorf("task %d: no failure line", task)
			continue
		}
		if get[string](t, f, protocol.KeyFailureClass) != want.class || get[string](t, f, rollout.KeyFailureType) != want.kind ||
			string(must(f.Get(rollout.KeyFailureHTTPStatus))) != want.status || get[string](t, f, rollout.KeyFailureMessage) == "" {
			t.Errorf("task %d: %s", task, f)
		}
		if body := string(must(f.Get(rollout.KeyFailureResponseBody))); want.body != "" && body != want.body {
			t.Errorf("task %d: body %s, want %s", task, body, want.body)
		}
	}
	// A long body is cut to 2000 characters and marked.
	if body := get[string](t, byTask[2], rollout.KeyFailureResponseBody); !strings.HasSuffix(body, "…") ||
		len([]rune(body)) != 2001 || !strings.HasPrefix(body, `"éé`) {
		t.Errorf("long body: %d characters, %.20q...%q", len([]rune(body)), body, body[len(body)-8:])
	}
	if keys := keysOf(byTask[3]); slices.Contains(keys, protocol.KeyParams) {
		t.Errorf("a failure line carries the row: %v", keys)
	}
}

// A resumed run aggregates the earlier results under the environment
// server stamped on them; one the fleet no longer has is refused.
func TestCollectResumeEnvironmentServers(t *testing.T) {
	env := startAgent(t, nil)
	envs := map[string]rollout.EnvironmentServer{"e1": {URL: env.URL, Impl: "legacy_agent", Agents: []string{"agent_a"}}}
	out := outPath(t)
	rows := rowsFor(3, 1, "agent_a")
	opts := rollout.Options{Environments: envs, Output: out, Limit: 2}
	if _, err := rollout.Collect(context.Background(), rows, opts); err != nil {
		t.Fatal(err)
	}
	opts.Limit, opts.Resume = 0, true
	if sum, err := rollout.Collect(context.Background(), rows, opts); err != nil || sum.Skipped != 2 || sum.Succeeded != 1 {
		t.Fatalf("%+v, %v", sum, err)
	}
	if aggs := env.Aggregates(); len(aggs) != 2 || len(aggs[1].VerifyResponses) != 3 {
		t.Fatalf("aggregates %+v", aggs)
	}
	opts.Environments = map[string]rollout.EnvironmentServer{"e2": envs["e1"]}
	if _, err := rollout.Collect(context.Background(), rows, opts); !errors.Is(err, rollout.ErrInvalidInput) ||
		!strings.Contains(err.Error(), `results of environment server "e1", which is not in the fleet`) {
		t.Fatalf("err = %v", err)
	}
}
