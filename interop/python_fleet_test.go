package interop

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gymlens/gymlens/dataset"
	"github.com/gymlens/gymlens/internal/testenv"
	"github.com/gymlens/gymlens/internal/upstream"
)

// reverifyStringMatch scores each line's episode with upstream's own
// string_match verifier, in-process, and prints one {"reward",
// "extracted_answer"} line per input line.
const reverifyStringMatch = `
import asyncio, json, sys
from resources_servers.string_match.app import StringMatchResourcesServer, StringMatchVerifyRequest
keys = ("responses_create_params", "response", "expected_answer", "extraction_mode", "case_sensitive")
async def main():
    for line in sys.stdin:
        row = json.loads(line)
        req = StringMatchVerifyRequest.model_validate({k: row[k] for k in keys if k in row})
        res = await StringMatchResourcesServer.verify(None, req)
        print(json.dumps({"reward": res.reward, "extracted_answer": res.extracted_answer}))
asyncio.run(main())
`

// Scenario (a) of issue 34: a Python fleet with Go servers. Upstream's
// launcher (gymlens env start, 0.7.0) starts its own simple_agent (and the
// legacy_agent relay its parser generates for it) beside a gymlens
// string_match resources server and a gymlens policy model, both from
// `gymlens env scaffold` directories found through --search-dir; upstream's
// collector (gym eval run --no-serve) writes the rollouts. Every reward and
// extracted answer must equal what upstream's own string_match verifier
// gives on the same episode.
func TestUpstreamLauncherRunsGymlensServers(t *testing.T) {
	for _, rel := range []release{release070, release060} {
		t.Run(rel.name, func(t *testing.T) { launcherRunsGymlensServers(t, rel) })
	}
}

// launcherRunsGymlensServers is scenario (a) under one release's launcher,
// agent and collector (0.6.0 generates no relay).
func launcherRunsGymlensServers(t *testing.T, rel release) {
	rel.python(t)
	dir := t.TempDir()
	goDir := filepath.Join(dir, "go-servers")
	runGym(t, "env", "scaffold", "--impl", "string_match", "--domain", "knowledge", "--out", goDir)
	runGym(t, "env", "scaffold", "--impl", "policy_model", "--out", goDir)
	venvs := venvDir(t, rel, "resources_servers/string_match", "responses_api_models/policy_model",
		"responses_api_agents/simple_agent", "environment_servers/legacy_agent")

	headPort := testenv.FreePort(t)
	fleet := filepath.Join(dir, "fleet.yaml")
	writeFile(t, fleet, fmt.Sprintf(`default_host: 127.0.0.1
head_server: {host: 127.0.0.1, port: %d}
skip_venv_if_present: true
uv_venv_dir: %s
policy_model:
  responses_api_models:
    policy_model:
      entrypoint: app.py
      correct_probability: 0.6
      seed: 7
string_match_simple_agent:
  responses_api_agents:
    simple_agent:
      entrypoint: app.py
      resources_server: {type: resources_servers, name: string_match}
      model_server: {type: responses_api_models, name: policy_model}
`, headPort, venvs))
	// The scaffold's own config file, given as a user would.
	smConfig := filepath.Join(goDir, "resources_servers", "string_match", "configs", "string_match.yaml")
	f := startUpstreamFleet(t, rel, dir, headPort, []string{smConfig, fleet}, []string{goDir})

	tasks := writeTasks(t, dir, dataset.StringMatch(10, 11))
	out := collectUpstream(t, rel, dir, headPort, f.log, tasks, "-a", "string_match_simple_agent", "--num-repeats", "2")

	lines := readLines(t, out)
	if len(lines) != 20 {
		t.Fatalf("upstream's collector wrote %d rollouts, want 20 (10 tasks x 2)", len(lines))
	}
	if failed := readLines(t, filepath.Join(filepath.Dir(out), "rollouts_failures.jsonl")); len(failed) != 0 {
		t.Fatalf("%d rollouts failed; first: %v", len(failed), failed[0])
	}
	sum, seen := checkAgainstUpstreamStringMatch(t, lines)

	// Upstream's aggregation of the same run, through the relay, the agent
	// and the gymlens resources server's /aggregate_metrics.
	var agg []map[string]any
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(out), "rollouts_aggregate_metrics.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &agg); err != nil || len(agg) != 1 {
		t.Fatalf("aggregate metrics: %v, %d entries:\n%s", err, len(agg), raw)
	}
	km, _ := agg[0]["key_metrics"].(map[string]any)
	if mean, ok := km["mean/reward"].(float64); !ok || math.Abs(mean-sum/float64(len(lines))) > 1e-9 {
		t.Errorf("key_metrics mean/reward = %v, want %v", km["mean/reward"], sum/float64(len(lines)))
	}
	t.Logf("%d rollouts through nemo-gym %s's launcher, agent and collector; rewards %v; every reward equals upstream's string_match", len(lines), rel.name, seen)
}

// checkAgainstUpstreamStringMatch scores every output line's episode with
// upstream's own string_match verifier and fails the test where the line's
// reward or extracted answer differs. It returns the rewards' sum and how
// often each reward occurred; a run with only right or only wrong answers
// fails, since it would prove little.
func checkAgainstUpstreamStringMatch(t *testing.T, lines []map[string]any) (sum float64, seen map[float64]int) {
	t.Helper()
	var in bytes.Buffer
	for _, l := range lines {
		b, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		in.Write(append(b, '\n'))
	}
	verdicts := bytes.Split(bytes.TrimSpace(upstream.Run(t, time.Minute, reverifyStringMatch, in.Bytes())), []byte("\n"))
	if len(verdicts) != len(lines) {
		t.Fatalf("upstream's verifier gave %d verdicts for %d lines", len(verdicts), len(lines))
	}
	seen = map[float64]int{}
	for i, l := range lines {
		var v struct {
			Reward          float64 `json:"reward"`
			ExtractedAnswer *string `json:"extracted_answer"`
		}
		if err := json.Unmarshal(verdicts[i], &v); err != nil {
			t.Fatal(err)
		}
		got, _ := l["reward"].(float64)
		gotExtracted, _ := l["extracted_answer"].(string)
		if got != v.Reward || v.ExtractedAnswer == nil || gotExtracted != *v.ExtractedAnswer {
			t.Errorf("task %v rollout %v: gymlens reward %v extracted %q; upstream's string_match %v %v",
				l["_ng_task_index"], l["_ng_rollout_index"], got, gotExtracted, v.Reward, deref(v.ExtractedAnswer))
		}
		sum += got
		seen[got]++
	}
	if seen[0] == 0 || seen[1] == 0 {
		t.Errorf("rewards %v: want both right and wrong answers (correct_probability 0.6), or the comparison proves little", seen)
	}

	return sum, seen
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
