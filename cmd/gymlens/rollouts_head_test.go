package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gymlens/gymlens/internal/servertest"
	"github.com/gymlens/gymlens/internal/testenv"
)

// serveHead is a head server on loopback answering GET
// /global_config_dict_yaml with body, as NeMo Gym's does (a JSON string
// holding the YAML) unless body says otherwise.
func serveHead(t *testing.T, body string) string {
	t.Helper()
	h := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/global_config_dict_yaml" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(h.Close)
	return h.URL
}

func headJSON(doc string) string {
	b, _ := json.Marshal(doc)
	return string(b)
}

// writeTasks writes rows, one a line, and returns the file's path.
func writeTasks(t *testing.T, rows ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tasks.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(rows, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestCollectHeadUsageErrors(t *testing.T) {
	testenv.ClearTelemetry(t)
	closed := "http://" + servertest.FreeAddr(t)
	fleet := headJSON(fleetDict(1, 2, 3, ""))
	tasks := writeTasks(t, `{"responses_create_params": {"input": "y"}, "agent_ref": {"name": "math_simple_agent"}}`,
		`{"responses_create_params": {"input": "x"}, "agent_ref": {"type": "responses_api_agents", "name": "math_simpel_agent"}}`)
	for name, c := range map[string]struct {
		args []string
		want string
	}{
		"both": {[]string{"--head", "http://127.0.0.1:11000", "--agent-url", "http://127.0.0.1:1"},
			"gymlens rollouts collect: --agent-url and --head are exclusive: give the agent's URL or the head server's, not both\n"},
		"neither": {nil, "gymlens rollouts collect: --input, --output and --agent-url (or --head) are required\n"},
		"unreachable": {[]string{"--head", closed},
			"gymlens rollouts collect: head server " + closed + ": GET /global_config_dict_yaml: "},
		"raw YAML": {[]string{"--head", serveHead(t, fleetDict(1, 2, 3, ""))},
			"/global_config_dict_yaml did not answer a JSON string (NeMo Gym's head API sends the config YAML as one)"},
		// Without --agent, each row's agent_ref routes it.
		"unknown agent": {[]string{"--head", serveHead(t, fleet)},
			`is not in the config of head server`},
		"unknown agent names it": {[]string{"--head", serveHead(t, fleet)},
			`agent "math_simpel_agent" (row 2) is not in the config of head server http://127.0.0.1:`},
		"unknown agent lists the known": {[]string{"--head", serveHead(t, fleet)},
			`(its agents: math_simple_agent); did you mean "math_simple_agent"?`},
		// --agent routes every row (NeMo Gym 0.7's -a), so only it is checked.
		"unknown override agent": {[]string{"--head", serveHead(t, fleet), "--agent", "nope"},
			`agent "nope" (--agent) is not in the config of head server`},
		"no agents": {[]string{"--head", serveHead(t, headJSON("m:\n  resources_servers:\n    string_match: {host: 127.0.0.1, port: 1}\n"))},
			"its config has no agent (no responses_api_agents instance)"},
	} {
		out := filepath.Join(t.TempDir(), "rollouts.jsonl")
		args := append([]string{"rollouts", "collect", "-i", tasks, "-o", out}, c.args...)
		code, stdout, stderr := runGym(t, args...)
		if code != 2 || stdout != "" || !strings.Contains(stderr, c.want) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 2 and %q", name, code, stdout, stderr, c.want)
		}
		if entries, _ := os.ReadDir(filepath.Dir(out)); len(entries) != 0 {
			t.Errorf("%s: %d files created next to the output", name, len(entries))
		}
	}
}

// TestCollectThroughHead runs a real fleet of gymlens serve processes under
// the launch contract and collects against it with only the head
// server's address: the agents are found in its config.
func TestCollectThroughHead(t *testing.T) {
	testenv.ClearTelemetry(t)
	rp, mp, ap := testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t)
	dict := fleetDict(rp, mp, ap, "")
	procs := map[int]*launched{
		rp: launch(t, dict, "math", "MODEL_P=1"),
		mp: launch(t, dict, "policy_model", "MODEL_P=1"),
		ap: launch(t, dict, "math_simple_agent", "MODEL_P=1"),
	}
	for port, p := range procs {
		p.waitServing(t, port)
	}
	// The collector does not have MODEL_P, which only the model's block
	// needs: the head's config is still resolved enough to find the agent.
	testenv.Unset(t, "MODEL_P")
	head := serveHead(t, headJSON(dict))
	named := `{"responses_create_params": {"input": [{"role": "user", "content": "What is 2 + 3?"}]}, "expected_answer": "5",` +
		` "agent_ref": {"type": "responses_api_agents", "name": "math_simple_agent"}}`
	tasks := writeTasks(t, arithmeticRow, named)
	out := filepath.Join(t.TempDir(), "rollouts.jsonl")
	code, stdout, stderr := runGym(t, "rollouts", "collect", "--head", head, "--agent", "math_simple_agent",
		"-i", tasks, "-o", out, "--num-repeats", "2")
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s\nagent stderr:\n%s", code, stdout, stderr, procs[ap].Stderr)
	}
	if !strings.HasPrefix(stdout, "rollouts: 4 completed, 0 failed, 0 skipped (already in "+out+"), 0 not run, of 4; 4 rewarded;") {
		t.Errorf("stdout %q", stdout)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	for sc := bufio.NewScanner(f); sc.Scan(); n++ {
		var line struct {
			Reward   float64 `json:"reward"`
			AgentRef struct {
				Name string `json:"name"`
			} `json:"agent_ref"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil || line.Reward != 1 || line.AgentRef.Name != "math_simple_agent" {
			t.Errorf("line %d: %v %s", n+1, err, sc.Bytes())
		}
	}
	if n != 4 {
		t.Errorf("%d lines, want 4", n)
	}
}

// The summary counts each rollout once, by what became of it: a rollout
// whose /run failed is failed, not "run". Here an agent answers the first
// four rollouts and fails the other six (as one whose model server died
// does).
func TestCollectSummaryCountsWhatRan(t *testing.T) {
	testenv.ClearTelemetry(t)
	t.Setenv("NEMO_GYM_MAX_ROLLOUT_ATTEMPTS", "1")
	var mu sync.Mutex
	answered := 0
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/run" {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		answered++
		ok := answered <= 4
		mu.Unlock()
		if !ok {
			http.Error(w, "model server unreachable", http.StatusBadGateway)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"reward": 1.0, "response": {"output": []}}`))
	}))
	t.Cleanup(agent.Close)
	out := filepath.Join(t.TempDir(), "rollouts.jsonl")
	code, stdout, stderr := runGym(t, "rollouts", "collect", "--agent-url", agent.URL, "-i", writeTasks(t, arithmeticRow), "-o", out,
		"--num-repeats", "10", "--concurrency", "1", "--disable-aggregation")
	want := "rollouts: 4 completed, 6 failed, 0 skipped (already in " + out + "), 0 not run, of 10; 4 rewarded;"
	if code != 1 || !strings.HasPrefix(stdout, want) {
		t.Errorf("exit %d, stdout %q; want exit 1 and %q\nstderr:\n%s", code, stdout, want, stderr)
	}
}

// TestCollectThroughARelay runs a real fleet whose agent sits behind a
// legacy_agent environment server, as NeMo Gym 0.7 fleets are, and
// collects with only the head server's address: every rollout goes
// through the relay, and the lines and aggregate metrics name it.
func TestCollectThroughARelay(t *testing.T) {
	testenv.ClearTelemetry(t)
	rp, mp, ap, ep := testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t)
	relay := fmt.Sprintf("math_environment_server:\n  environment_servers:\n    legacy_agent:\n"+
		"      host: 127.0.0.1\n      port: %d\n      agent_server: {type: responses_api_agents, name: math_simple_agent}\n", ep)
	dict := fleetDict(rp, mp, ap, relay)
	procs := map[int]*launched{
		rp: launch(t, dict, "math", "MODEL_P=1"),
		mp: launch(t, dict, "policy_model", "MODEL_P=1"),
		ap: launch(t, dict, "math_simple_agent", "MODEL_P=1"),
		ep: launch(t, dict, "math_environment_server", "MODEL_P=1"),
	}
	for port, p := range procs {
		p.waitServing(t, port)
	}
	testenv.Unset(t, "MODEL_P")
	head := serveHead(t, headJSON(dict))
	named := `{"responses_create_params": {"input": [{"role": "user", "content": "What is 2 + 3?"}]}, "expected_answer": "5",` +
		` "agent_ref": {"type": "responses_api_agents", "name": "math_simple_agent"}}`
	other := strings.NewReplacer("2 + 3", "3 + 4", `"5"`, `"7"`).Replace(named)
	out := filepath.Join(t.TempDir(), "rollouts.jsonl")
	code, stdout, stderr := runGym(t, "rollouts", "collect", "--head", head, "-i", writeTasks(t, named, other), "-o", out, "--num-repeats", "2")
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s\nrelay stderr:\n%s", code, stdout, stderr, procs[ep].Stderr)
	}
	if strings.Contains(stderr, "calling the agent's /run directly") {
		t.Errorf("the agent was called directly:\n%s", stderr)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	for i, l := range lines {
		var line struct {
			Reward     float64 `json:"reward"`
			Server     string  `json:"_ng_environment_server"`
			ResultType string  `json:"_ng_result_type"`
		}
		if err := json.Unmarshal([]byte(l), &line); err != nil || line.Reward != 1 || line.Server != "math_environment_server" || line.ResultType != "legacy_agent" {
			t.Errorf("line %d: %v %s", i+1, err, l)
		}
	}
	if len(lines) != 4 {
		t.Errorf("%d lines, want 4", len(lines))
	}
	var metrics []struct {
		Ref struct {
			Name string `json:"name"`
		} `json:"agent_ref"`
		Server  string         `json:"_ng_environment_server"`
		Metrics map[string]any `json:"agent_metrics"`
	}
	raw, err = os.ReadFile(strings.TrimSuffix(out, ".jsonl") + "_aggregate_metrics.json")
	if err != nil || json.Unmarshal(raw, &metrics) != nil || len(metrics) != 1 || metrics[0].Ref.Name != "math_simple_agent" ||
		metrics[0].Server != "math_environment_server" || metrics[0].Metrics["mean/reward"] != 1.0 || metrics[0].Metrics["num_repeats"] != 2.0 {
		t.Errorf("aggregate metrics: %v\n%s", err, raw)
	}
}
