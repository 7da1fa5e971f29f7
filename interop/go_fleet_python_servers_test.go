package interop

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gymlens/gymlens/dataset"
	"github.com/gymlens/gymlens/internal/upstream"
)

// goFleetRun runs gymlens's `gymlens run --config` with fleet (YAML) on tasks,
// two rollouts each, telemetry off, and returns the output lines keyed by
// "<task index>-<rollout index>".
func goFleetRun(t *testing.T, dir, fleet, tasks string) map[string]map[string]any {
	t.Helper()
	lines, _ := goFleetRunWith(t, dir, fleet, tasks, nil)
	return lines
}

// goFleetRunWith is goFleetRun with telemetry: nil turns it off
// (--no-telemetry), otherwise these variables configure it. It returns the
// run directory too.
func goFleetRunWith(t *testing.T, dir, fleet, tasks string, telemetry []string) (map[string]map[string]any, string) {
	t.Helper()
	config := filepath.Join(dir, "fleet.yaml")
	writeFile(t, config, fleet)
	runs := filepath.Join(dir, "runs")
	args := []string{"run", "--config", config, "--input", tasks, "--num-repeats", "2", "--runs-dir", runs, "--quiet"}
	if telemetry == nil {
		args = append(args, "--no-telemetry")
	}
	cmd := exec.Command(gymBin, args...)
	cmd.Dir = dir
	cmd.Env = cleanEnv(telemetry...)
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Minute):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("gymlens run did not finish in 3 minutes:\n%s", tailLines(string(out), 40))
	}
	if err != nil {
		t.Fatalf("gymlens run: %v\n%s", err, tailLines(string(out), 40))
	}
	runDirs, _ := filepath.Glob(filepath.Join(runs, "*"))
	if len(runDirs) != 1 {
		t.Fatalf("run directories %v, want one", runDirs)
	}
	if failed := readLines(t, filepath.Join(runDirs[0], "rollouts_failures.jsonl")); len(failed) != 0 {
		t.Fatalf("%d rollouts failed; first: %v", len(failed), failed[0])
	}
	by := map[string]map[string]any{}
	for _, l := range readLines(t, filepath.Join(runDirs[0], "rollouts.jsonl")) {
		by[fmt.Sprintf("%v-%v", l["_ng_task_index"], l["_ng_rollout_index"])] = l
	}
	return by, runDirs[0]
}

// Scenario (b) of issue 34: a Go fleet with Python servers. gymlens's
// `gymlens run --config` starts upstream's own string_match and mcqa resources
// servers and upstream's own simple_agent (each from its block as upstream
// writes it, plus the `command:` that names the interpreter), beside
// gymlens's policy model and a gymlens simple_agent for mcqa, under the
// launch contract; its collector reaches both agents through the relays it
// generates. Every reward must equal the one the same tasks get in an
// all-Go fleet.
func TestUpstreamPythonServersInGymRun(t *testing.T) {
	py := upstream.Python(t)
	site := strings.TrimSpace(string(upstream.Run(t, time.Minute, "import nemo_gym, os; print(os.path.dirname(os.path.dirname(nemo_gym.__file__)))", nil)))
	app := func(typ, impl string) string { return filepath.Join(site, typ, impl, "app.py") }

	rows := append(dataset.WithAgent(dataset.StringMatch(6, 31), "sm_agent"), dataset.WithAgent(dataset.MCQA(6, 32), "mcqa_agent")...)
	dir := t.TempDir()
	tasks := writeTasks(t, dir, rows)

	const model = `
policy_model:
  responses_api_models:
    policy_model: {correct_probability: 0.6, seed: 7}
mcqa_agent:
  responses_api_agents:
    simple_agent:
      resources_server: {type: resources_servers, name: mcqa}
      model_server: {type: responses_api_models, name: policy_model}
`
	python := fmt.Sprintf(`string_match:
  resources_servers:
    string_match:
      entrypoint: app.py
      domain: knowledge
      command: [%[1]s, %[2]s]
mcqa:
  resources_servers:
    mcqa:
      entrypoint: app.py
      domain: knowledge
      command: [%[1]s, %[3]s]
sm_agent:
  responses_api_agents:
    simple_agent:
      entrypoint: app.py
      resources_server: {type: resources_servers, name: string_match}
      model_server: {type: responses_api_models, name: policy_model}
      command: [%[1]s, %[4]s]
`, py, app("resources_servers", "string_match"), app("resources_servers", "mcqa"), app("responses_api_agents", "simple_agent")) + model
	allGo := `string_match:
  resources_servers:
    string_match: {domain: knowledge}
mcqa:
  resources_servers:
    mcqa: {domain: knowledge}
sm_agent:
  responses_api_agents:
    simple_agent:
      resources_server: {type: resources_servers, name: string_match}
      model_server: {type: responses_api_models, name: policy_model}
` + model

	mixed := goFleetRun(t, filepath.Join(dir, "mixed"), python, tasks)
	reference := goFleetRun(t, filepath.Join(dir, "go"), allGo, tasks)
	if len(mixed) != 24 || len(reference) != 24 {
		t.Fatalf("rollouts: %d with Python servers, %d all-Go; want 24 each", len(mixed), len(reference))
	}
	seen := map[float64]int{}
	for k, m := range mixed {
		g := reference[k]
		if g == nil || m["reward"] != g["reward"] {
			t.Errorf("rollout %s: reward %v with upstream's Python servers, %v all-Go", k, m["reward"], g["reward"])
		}
		if m["_ng_environment_server"] == nil || m["_ng_environment_server"] != g["_ng_environment_server"] {
			t.Errorf("rollout %s: environment server %v, all-Go %v", k, m["_ng_environment_server"], g["_ng_environment_server"])
		}
		r, _ := m["reward"].(float64)
		seen[r]++
	}
	if seen[0] == 0 || seen[1] == 0 {
		t.Errorf("rewards %v: want both right and wrong answers", seen)
	}
	t.Logf("%d rollouts through gymlens run with upstream's string_match, mcqa and simple_agent: rewards %v equal the all-Go fleet's", len(mixed), seen)
}
