package interop

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/gymlens/gymlens/dataset"
	"github.com/gymlens/gymlens/internal/testenv"
)

// startGymlensFleet runs gymlens's `gymlens env start --config config` in dir
// and waits until its head server lists want server instances and every
// one of them answers GET /, as upstream's clients would find them. The
// fleet is stopped (SIGTERM, then its process group killed) when the test
// ends.
func startGymlensFleet(t *testing.T, dir, config, head string, want int) *testenv.Proc {
	t.Helper()
	cmd := exec.Command(gymBin, "env", "start", "--config", config)
	cmd.Dir = dir
	cmd.Env = cleanEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	log := &testenv.Buffer{}
	cmd.Stdout, cmd.Stderr = log, log
	p := testenv.Start(t, cmd, 2*time.Minute)
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.Done():
		case <-time.After(20 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	})
	waitFleet(t, head, p, log, 2*time.Minute, want)
	return p
}

// Scenario (c) of issue 34: upstream's collector (gym eval run --no-serve,
// 0.7.0) pointed at gymlens's head server. It reads the fleet from
// /global_config_dict_yaml, finds the agent through the environment server
// gymlens generated for it (a Go legacy_agent relay, as upstream's parser
// generates one), and collects; every reward must equal upstream's own
// string_match verdict, and the lines must name the environment server
// and its implementation as upstream's own fleet's lines do.
func TestUpstreamCollectorAgainstGymlensHead(t *testing.T) {
	for _, rel := range []release{release070, release060} {
		t.Run(rel.name, func(t *testing.T) { collectAgainstGymlensHead(t, rel) })
	}
}

// collectAgainstGymlensHead is scenario (c) with one release's collector.
// 0.6.0's has no environment servers: it calls the agent itself and its
// lines name none.
func collectAgainstGymlensHead(t *testing.T, rel release) {
	rel.python(t)
	dir := t.TempDir()
	headPort := testenv.FreePort(t)
	config := filepath.Join(dir, "fleet.yaml")
	writeFile(t, config, fmt.Sprintf(`head_server: {host: 127.0.0.1, port: %d}
string_match:
  resources_servers:
    string_match: {domain: knowledge}
policy_model:
  responses_api_models:
    policy_model: {correct_probability: 0.6, seed: 7}
string_match_simple_agent:
  responses_api_agents:
    simple_agent:
      resources_server: {type: resources_servers, name: string_match}
      model_server: {type: responses_api_models, name: policy_model}
`, headPort))
	// Three servers and the relay generated for the agent.
	startGymlensFleet(t, dir, config, fmt.Sprintf("http://127.0.0.1:%d", headPort), 4)

	tasks := writeTasks(t, dir, dataset.StringMatch(10, 11))
	out := collectUpstream(t, rel, dir, headPort, nil, tasks, "-a", "string_match_simple_agent", "--num-repeats", "2")
	lines := readLines(t, out)
	if len(lines) != 20 {
		t.Fatalf("upstream's collector wrote %d rollouts, want 20", len(lines))
	}
	for _, l := range lines {
		if rel.name == release060.name {
			if _, ok := l["_ng_environment_server"]; ok {
				t.Fatalf("0.6.0's collector wrote _ng_environment_server: %v", l["_ng_environment_server"])
			}
			continue
		}
		if l["_ng_environment_server"] != "string_match_environment_server" || l["_ng_result_type"] != "legacy_agent" {
			t.Fatalf("line names environment server %v (%v), want string_match_environment_server (legacy_agent)",
				l["_ng_environment_server"], l["_ng_result_type"])
		}
	}
	_, seen := checkAgainstUpstreamStringMatch(t, lines)
	t.Logf("%d rollouts through gymlens's head and servers, collected by nemo-gym %s; rewards %v equal upstream's string_match", len(lines), rel.name, seen)
}
