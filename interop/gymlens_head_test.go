package interop

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/gymlens/gymlens/dataset"
	"github.com/gymlens/gymlens/internal/testenv"
	"github.com/gymlens/gymlens/internal/upstream"
)

// startGymlensFleet runs gymlens's `gym env start --config config` in dir
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
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := &http.Client{Timeout: 5 * time.Second}
	get := func(url string) ([]byte, bool) {
		res, err := c.Get(url)
		if err != nil {
			return nil, false
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		return b, err == nil && res.StatusCode == http.StatusOK
	}
	for {
		if raw, ok := get(head + "/server_instances"); ok {
			var insts []struct {
				URL string `json:"url"`
			}
			if json.Unmarshal(raw, &insts) == nil && len(insts) == want {
				up := 0
				for _, in := range insts {
					if _, ok := get(in.URL + "/"); ok {
						up++
					}
				}
				if up == want {
					return p
				}
			}
		}
		select {
		case <-p.Done():
			t.Fatalf("gym env start exited %d before its fleet was up:\n%s", p.ExitCode(), tailLines(log.String(), 60))
		case <-ctx.Done():
			t.Fatalf("gymlens fleet not up after 2 minutes:\n%s", tailLines(log.String(), 60))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Scenario (c) of issue 34: upstream's collector (gym eval run --no-serve,
// 0.7.0) pointed at gymlens's head server. It reads the fleet from
// /global_config_dict_yaml, finds the agent through the environment server
// gymlens generated for it (a Go legacy_agent relay, as upstream's parser
// generates one), and collects; every reward must equal upstream's own
// string_match verdict, and the lines must name the environment server
// and its implementation as upstream's own fleet's lines do.
func TestUpstreamCollectorAgainstGymlensHead(t *testing.T) {
	upstream.Python(t)
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

	tasks := filepath.Join(dir, "tasks.jsonl")
	var buf bytes.Buffer
	if err := dataset.WriteRows(&buf, dataset.StringMatch(10, 11)); err != nil {
		t.Fatal(err)
	}
	writeFile(t, tasks, buf.String())
	out := collectUpstream(t, dir, headPort, nil, tasks, "-a", "string_match_simple_agent", "--num-repeats", "2")
	lines := readLines(t, out)
	if len(lines) != 20 {
		t.Fatalf("upstream's collector wrote %d rollouts, want 20", len(lines))
	}
	for _, l := range lines {
		if l["_ng_environment_server"] != "string_match_environment_server" || l["_ng_result_type"] != "legacy_agent" {
			t.Fatalf("line names environment server %v (%v), want string_match_environment_server (legacy_agent)",
				l["_ng_environment_server"], l["_ng_result_type"])
		}
	}
	_, seen := checkAgainstUpstreamStringMatch(t, lines)
	t.Logf("%d rollouts through gymlens's head, relay, agent and servers, collected by upstream; rewards %v equal upstream's string_match", len(lines), seen)
}
