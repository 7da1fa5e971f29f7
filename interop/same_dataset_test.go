package interop

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/gymlens/gymlens/dataset"
	"github.com/gymlens/gymlens/internal/testenv"
	"github.com/gymlens/gymlens/internal/upstream"
)

// compareLines reads pairs of output lines ({"py": line, "go": line}, one
// pair a line), passes each through upstream's own model of a string_match
// result (so a field is compared as upstream's models define it, defaults
// included), and prints, per pair, the paths where the two differ. Ids and
// times are left aside: they are minted per process.
const compareLines = `
import json, sys
from resources_servers.string_match.app import StringMatchVerifyResponse
aside = {"id", "created_at", "completed_at"}
def diff(a, b, path, out):
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k in aside:
                continue
            if k not in a or k not in b:
                out.append(f"{path}.{k}: only in {'python' if k in a else 'go'}")
            else:
                diff(a[k], b[k], f"{path}.{k}", out)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{path}: {len(a)} items in python, {len(b)} in go")
        for i, (x, y) in enumerate(zip(a, b)):
            diff(x, y, f"{path}[{i}]", out)
    elif a != b:
        out.append(f"{path}: python {a!r}, go {b!r}")
for line in sys.stdin:
    pair = json.loads(line)
    py = StringMatchVerifyResponse.model_validate(pair["py"]).model_dump(mode="json")
    go = StringMatchVerifyResponse.model_validate(pair["go"]).model_dump(mode="json")
    out = []
    diff(py, go, "", out)
    print(json.dumps(out))
`

// Scenario (d) of issue 34: the same dataset through an all-Python fleet
// (upstream's launcher, string_match, simple_agent, legacy_agent relay,
// openai_model and collector) and an all-Go fleet (gymlens's gymlens run). The
// policy behind both is gymlens's seeded policy model: upstream ships no
// model server that answers offline, so its openai_model forwards to one
// (an OpenAI-compatible endpoint, as it would to vLLM). The outputs must
// agree line by line in every field upstream's result model defines, ids
// and times aside, and in the aggregate metrics.
func TestUpstreamSameDatasetPythonAndGoFleets(t *testing.T) {
	upstream.Python(t)
	dir := t.TempDir()
	rows := dataset.WithAgent(dataset.StringMatch(8, 23), "string_match_simple_agent")
	tasks := writeTasks(t, dir, rows)
	const policy = `{"correct_probability": 0.6, "seed": 7, "model": "gym-policy"}`

	// The policy the Python fleet's openai_model forwards to.
	modelPort := testenv.FreePort(t)
	model := exec.Command(gymBin, "serve", "responses_api_models", "--impl", "policy_model", "--name", "policy",
		"--addr", fmt.Sprintf("127.0.0.1:%d", modelPort), "--config-json", policy)
	model.Env = cleanEnv()
	model.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	mp := testenv.Start(t, model, time.Minute)
	mp.WaitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d/", modelPort))

	// All Python.
	pyDir := filepath.Join(dir, "python")
	venvs := venvDir(t, release070, "resources_servers/string_match", "responses_api_models/openai_model",
		"responses_api_agents/simple_agent", "environment_servers/legacy_agent")
	headPort := testenv.FreePort(t)
	pyFleet := filepath.Join(pyDir, "fleet.yaml")
	writeFile(t, pyFleet, fmt.Sprintf(`default_host: 127.0.0.1
head_server: {host: 127.0.0.1, port: %d}
skip_venv_if_present: true
uv_venv_dir: %s
string_match:
  resources_servers:
    string_match: {entrypoint: app.py, domain: knowledge}
policy_model:
  responses_api_models:
    openai_model:
      entrypoint: app.py
      openai_base_url: http://127.0.0.1:%d/v1
      openai_api_key: dummy
      openai_model: gym-policy
string_match_simple_agent:
  responses_api_agents:
    simple_agent:
      entrypoint: app.py
      resources_server: {type: resources_servers, name: string_match}
      model_server: {type: responses_api_models, name: policy_model}
`, headPort, venvs, modelPort))
	f := startUpstreamFleet(t, release070, pyDir, headPort, []string{pyFleet}, nil)
	// Rows name their agent (agent_ref), so neither collector is told one.
	pyOut := collectUpstream(t, release070, pyDir, headPort, f.log, tasks, "--num-repeats", "2")
	f.stop(t)

	// All Go.
	goDir := filepath.Join(dir, "go")
	goFleet := filepath.Join(goDir, "fleet.yaml")
	writeFile(t, goFleet, fmt.Sprintf(`string_match:
  resources_servers:
    string_match: {domain: knowledge}
policy_model:
  responses_api_models:
    policy_model: %s
string_match_simple_agent:
  responses_api_agents:
    simple_agent:
      resources_server: {type: resources_servers, name: string_match}
      model_server: {type: responses_api_models, name: policy_model}
`, policy))
	runs := filepath.Join(goDir, "runs")
	cmd := exec.Command(gymBin, "run", "--config", goFleet, "--input", tasks, "--num-repeats", "2", "--runs-dir", runs, "--no-telemetry", "--quiet")
	cmd.Dir = goDir
	cmd.Env = cleanEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gymlens run: %v\n%s", err, out)
	}
	runDirs, _ := filepath.Glob(filepath.Join(runs, "*"))
	if len(runDirs) != 1 {
		t.Fatalf("run directories %v, want one", runDirs)
	}
	goOut := filepath.Join(runDirs[0], "rollouts.jsonl")

	pyLines, goLines := readLines(t, pyOut), readLines(t, goOut)
	if len(pyLines) != 16 || len(goLines) != 16 {
		t.Fatalf("rollouts: python %d, go %d, want 16 each", len(pyLines), len(goLines))
	}
	byKey := func(lines []map[string]any) map[string]map[string]any {
		m := map[string]map[string]any{}
		for _, l := range lines {
			m[fmt.Sprintf("%v-%v", l["_ng_task_index"], l["_ng_rollout_index"])] = l
		}
		return m
	}
	pyBy, goBy := byKey(pyLines), byKey(goLines)
	var in bytes.Buffer
	var keys []string
	for k, p := range pyBy {
		g, ok := goBy[k]
		if !ok {
			t.Fatalf("rollout %s is in python's output only", k)
		}
		for _, key := range []string{"_ng_task_index", "_ng_rollout_index", "agent_ref", "task_source", "_ng_environment_server", "_ng_result_type"} {
			if fmt.Sprint(p[key]) != fmt.Sprint(g[key]) {
				t.Errorf("rollout %s: %s python %v, go %v", k, key, p[key], g[key])
			}
		}
		b, _ := json.Marshal(map[string]any{"py": p, "go": g})
		in.Write(append(b, '\n'))
		keys = append(keys, k)
	}
	diffs := bytes.Split(bytes.TrimSpace(upstream.Run(t, time.Minute, compareLines, in.Bytes())), []byte("\n"))
	equal := 0
	for i, d := range diffs {
		var paths []string
		if err := json.Unmarshal(d, &paths); err != nil {
			t.Fatal(err)
		}
		if len(paths) == 0 {
			equal++
			continue
		}
		t.Errorf("rollout %s differs: %v", keys[i], paths)
	}

	// The aggregate metrics of the two runs.
	pyAgg := readAggregate(t, filepath.Join(filepath.Dir(pyOut), "rollouts_aggregate_metrics.json"))
	goAgg := readAggregate(t, filepath.Join(runDirs[0], "rollouts_aggregate_metrics.json"))
	var aggIn bytes.Buffer
	b, _ := json.Marshal(map[string]any{"py": pyAgg, "go": goAgg})
	aggIn.Write(b)
	if d := upstream.Run(t, time.Minute, compareAggregates, aggIn.Bytes()); len(bytes.TrimSpace(d)) != 0 {
		t.Errorf("aggregate metrics differ:\n%s", d)
	}
	t.Logf("%d rollouts, %d equal in every field of upstream's model", len(keys), equal)
}

// compareAggregates prints every difference between two
// _aggregate_metrics.json lists, numbers compared to 1e-9 relative.
const compareAggregates = `
import json, math, sys
d = json.load(sys.stdin)
def diff(a, b, path):
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                print(f"{path}.{k}: only in {'python' if k in a else 'go'}")
            else:
                diff(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            print(f"{path}: {len(a)} items in python, {len(b)} in go")
        for i, (x, y) in enumerate(zip(a, b)):
            diff(x, y, f"{path}[{i}]")
    elif isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool) and not isinstance(b, bool):
        if not math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12):
            print(f"{path}: python {a!r}, go {b!r}")
    elif a != b:
        print(f"{path}: python {a!r}, go {b!r}")
diff(d["py"], d["go"], "")
`

func readAggregate(t *testing.T, path string) any {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}
