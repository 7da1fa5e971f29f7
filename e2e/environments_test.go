package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gymlens/gymlens/dataset"
	"github.com/gymlens/gymlens/internal/servertest"
	"github.com/gymlens/gymlens/protocol"
	"github.com/gymlens/gymlens/rollout"
)

// envFleet is a fleet whose resources server is the environment impl and
// whose built-in policy answers right with probability p.
func envFleet(impl string, p float64) string {
	return fmt.Sprintf(`
env:
  resources_servers:
    %s: {}
policy_model:
  responses_api_models:
    policy_model: {correct_probability: %v}
simple_agent:
  responses_api_agents:
    simple_agent: {}
telemetry:
  enabled: true
  exporter: file
  span_groups: all
`, impl, p)
}

// readObjects parses a JSONL file into objects.
func readObjects(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%s: %v: %s", path, err, sc.Text())
		}
		out = append(out, m)
	}
	return out
}

func writeRows(t *testing.T, path string, rows []protocol.RunRequest) string {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := dataset.WriteRows(f, rows); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestEnvironmentsEndToEnd collects a dataset of each ported environment
// through a real fleet (orchestrator, agent, model and the environment's
// resources server as processes) and checks the rewards the environment's
// rules give the built-in policy's answers: all right at probability 1,
// all wrong at 0.
func TestEnvironmentsEndToEnd(t *testing.T) {
	const n = 12
	cases := []struct {
		impl  string
		rows  []protocol.RunRequest
		check func(t *testing.T, line map[string]any, right bool)
		// right0 says whether answers are still right at probability 0
		// (the counter's tool plan does not depend on it).
		right0 bool
	}{
		{"string_match", dataset.StringMatch(n, 3), func(t *testing.T, l map[string]any, right bool) {
			if right && l["extracted_answer"] != l["expected_answer"] {
				t.Errorf("extracted %v, expected %v", l["extracted_answer"], l["expected_answer"])
			}
		}, false},
		{"mcqa", dataset.MCQA(n, 4), func(t *testing.T, l map[string]any, right bool) {
			if _, ok := l["options"]; !ok {
				t.Errorf("task field options not echoed: %v", l)
			}
			if right && l["extracted_answer"] != l["expected_answer"] {
				t.Errorf("extracted %v, expected %v", l["extracted_answer"], l["expected_answer"])
			}
		}, false},
		{"equivalence_rule", dataset.Equivalence(n, 5), func(t *testing.T, l map[string]any, right bool) {
			if l["equivalence_score"] != l["reward"] {
				t.Errorf("equivalence_score %v, reward %v", l["equivalence_score"], l["reward"])
			}
		}, false},
		{"counter", dataset.Counter(n, 6), func(t *testing.T, l map[string]any, _ bool) {
			resp, _ := l["response"].(map[string]any)
			out, _ := resp["output"].([]any)
			calls := 0
			for _, it := range out {
				if m, _ := it.(map[string]any); m["type"] == "function_call_output" {
					calls++
				}
			}
			if calls < 2 {
				t.Errorf("episode with %d tool outputs, want every planned call executed: %v", calls, out)
			}
		}, true},
		{"arithmetic", dataset.Arithmetic(n, 7), func(t *testing.T, l map[string]any, right bool) {
			if right && l["extracted_answer"] != l["expected_answer"] {
				t.Errorf("extracted %v, expected %v", l["extracted_answer"], l["expected_answer"])
			}
		}, false},
	}
	for _, c := range cases {
		for _, p := range []float64{1, 0} {
			t.Run(fmt.Sprintf("%s/p=%v", c.impl, p), func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				cfg := writeFile(t, filepath.Join(dir, "fleet.yaml"), envFleet(c.impl, p))
				input := writeRows(t, filepath.Join(dir, "tasks.jsonl"), c.rows)
				runs := filepath.Join(dir, "runs")
				res := runGym(t, 3*time.Minute, gymEnv(), "run", "--config", cfg, "--input", input,
					"--num-repeats", "2", "--concurrency", "4", "--runs-dir", runs, "--quiet")
				if res.err != nil {
					t.Fatalf("gymlens run: %v\nstdout:\n%s\nstderr:\n%s", res.err, res.stdout, tail(res.stderr, 30))
				}
				run := runDir(t, runs)
				lines := readObjects(t, filepath.Join(run, "rollouts.jsonl"))
				if len(lines) != 2*n {
					t.Fatalf("%d output lines, want %d", len(lines), 2*n)
				}
				right := p == 1 || c.right0
				pairs := map[string]bool{}
				for _, l := range lines {
					// A wrong answer scores below 1: 0, or string_match's
					// soft numeric 0.98 for a near miss.
					if r, _ := l["reward"].(float64); right && r != 1 || !right && r >= 1 {
						t.Errorf("reward %v with right answers %v: %v", l["reward"], right, l)
					}
					for _, k := range []string{"responses_create_params", "response", "_ng_task_index", "_ng_rollout_index", "agent_ref"} {
						if _, ok := l[k]; !ok {
							t.Errorf("output line without %s", k)
						}
					}
					pairs[fmt.Sprint(l["_ng_task_index"], "-", l["_ng_rollout_index"])] = true
					c.check(t, l, right)
				}
				if len(pairs) != 2*n {
					t.Errorf("%d distinct (task, rollout) pairs, want %d", len(pairs), 2*n)
				}
				if !strings.Contains(res.stdout, fmt.Sprintf("rollouts        %d (0 failed)", 2*n)) {
					t.Errorf("summary:\n%s", res.stdout)
				}
			})
		}
	}
}

// TestUpstreamSidePython plays NeMo Gym's Python side with a stdlib-only
// client: upstream's collector against the gymlens agent, and upstream's
// agent against the gymlens counter environment (cookies handled as
// upstream's agent handles them).
func TestUpstreamSidePython(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed")
	}
	// The counter environment alone, as upstream's agent would call it.
	_, base := serveWith(t, gymEnv(), "resources_servers", "--name", "counter", "--impl", "counter")
	out, err := exec.Command(py, "testdata/upstream_side.py", "agent", base).CombinedOutput()
	if err != nil {
		t.Fatalf("python agent side: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	want := []string{`"count": 6, "reward": 1.0`, `"count": 5, "reward": 0.0`, `"no_cookie_status": 200, "reward": 0.0`}
	if len(lines) != len(want) {
		t.Fatalf("python printed %q", out)
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("scenario %d: %s, want %s", i, lines[i], w)
		}
	}

	// Upstream's collector against a gymlens agent in front of the same
	// environment and the built-in model.
	_, modelURL := serveWith(t, gymEnv(), "responses_api_models", "--name", "policy_model")
	_, agentURL := serveWith(t, gymEnv(), "responses_api_agents", "--name", "simple_agent",
		"--model-url", modelURL, "--resources-url", base)
	dir := t.TempDir()
	input := writeRows(t, filepath.Join(dir, "tasks.jsonl"), dataset.Counter(4, 9))
	output := filepath.Join(dir, "out.jsonl")
	if out, err := exec.Command(py, "testdata/upstream_side.py", "collector", agentURL, input, output).CombinedOutput(); err != nil {
		t.Fatalf("python collector side: %v\n%s", err, out)
	}
	got := readObjects(t, output)
	if len(got) != 4 {
		t.Fatalf("%d lines from the python collector, want 4", len(got))
	}
	for _, l := range got {
		if l["reward"] != 1.0 || l["expected_count"] == nil || l["responses_create_params"] == nil {
			t.Errorf("python collector line: %v", l)
		}
	}
}

// TestCollectAgainstDeadAgent: a refused connection is not a completed
// rollout. Each row is tried NEMO_GYM_MAX_ROLLOUT_ATTEMPTS times, then
// lands in the failures file; nothing is written as completed, and the
// command exits 1. A second run without --resume refuses to overwrite
// (exit 2); with --resume it tries the failed rows again.
func TestCollectAgainstDeadAgent(t *testing.T) {
	dir := t.TempDir()
	input := writeRows(t, filepath.Join(dir, "tasks.jsonl"), dataset.Arithmetic(3, 2))
	output := filepath.Join(dir, "out.jsonl")
	dead := "http://" + servertest.FreeAddr(t)
	args := []string{"rollouts", "collect", "-i", input, "-o", output, "--agent-url", dead, "--num-repeats", "2"}
	res := runGym(t, time.Minute, gymEnv("NEMO_GYM_MAX_ROLLOUT_ATTEMPTS=3"), args...)
	if code := exitCode(res.err); code != 1 {
		t.Fatalf("exit %d (%v), want 1\nstdout:\n%s\nstderr:\n%s", code, res.err, res.stdout, res.stderr)
	}
	if !strings.Contains(res.stdout, "rollouts: 0 completed, 6 failed, 0 skipped") {
		t.Errorf("summary: %s", res.stdout)
	}
	if done := readObjects(t, output); len(done) != 0 {
		t.Errorf("%d completed lines for rollouts that never reached an agent", len(done))
	}
	fails := readObjects(t, strings.TrimSuffix(output, ".jsonl")+"_failures.jsonl")
	if len(fails) != 6 {
		t.Fatalf("%d failure lines, want 6", len(fails))
	}
	for _, f := range fails {
		gl, _ := f["_gymlens"].(map[string]any)
		msg, _ := f["_ng_failure_message"].(string)
		// No agent ever answered: upstream's agent_request_failed.
		if f["_ng_failure_class"] != rollout.FailureAgentRequestFailed || f["_ng_attempt_index"] != 2.0 || gl["attempts"] != 3.0 ||
			!strings.Contains(msg, "connection refused") {
			t.Errorf("failure line: class %v, attempt %v, attempts %v, error %q", f["_ng_failure_class"], f["_ng_attempt_index"], gl["attempts"], msg)
		}
	}
	// The failures file is the output's: a second run must say what to do.
	res = runGym(t, time.Minute, gymEnv(), args...)
	if code := exitCode(res.err); code != 2 || !strings.Contains(res.stderr, "--resume") {
		t.Fatalf("second run without --resume: exit %d, stderr %s; want 2 asking for --resume", code, res.stderr)
	}
	if again := readObjects(t, strings.TrimSuffix(output, ".jsonl")+"_failures.jsonl"); len(again) != 6 {
		t.Fatalf("the refused run changed the failures file: %d lines", len(again))
	}
	res = runGym(t, time.Minute, gymEnv("NEMO_GYM_MAX_ROLLOUT_ATTEMPTS=1"), append(args, "--resume")...)
	if code := exitCode(res.err); code != 1 || !strings.Contains(res.stdout, "rollouts: 0 completed, 6 failed") {
		t.Errorf("resumed run: exit %d, stdout %s", code, res.stdout)
	}
}
