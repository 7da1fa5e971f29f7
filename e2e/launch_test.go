package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// walletFleet is a fleet in NeMo Gym's config shape whose resources
// server is not built in: the wallet environment of examples/wallet, a
// program written with the environment SDK, started through command:
// next to the built-in model and agent. The head server takes any free
// port.
const walletFleet = `
head_server: {host: 127.0.0.1, port: 0}
policy_seed: 11
wallet:
  resources_servers:
    wallet:
      entrypoint: app.py
      domain: other
      command: [./wallet]
policy_model:
  responses_api_models:
    policy_model:
      seed: ${policy_seed}
wallet_simple_agent:
  responses_api_agents:
    simple_agent:
      resources_server: {type: resources_servers, name: wallet}
      model_server: {type: responses_api_models, name: policy_model}
      max_steps: ${oc.env:WALLET_MAX_STEPS,4}
telemetry:
  enabled: true
  exporter: file
  span_groups: all
`

// TestNeMoGymFleetWithSDKEnvironment runs a user's Go environment in a
// gymlens fleet the way a NeMo Gym user would: the fleet file is
// upstream's config dict, the environment is the user's own binary (built
// from examples/wallet) launched through command: under NeMo Gym's launch
// contract, rollouts are collected by a separate collector that finds the
// agent through the head server, and each rollout's spans from the
// wallet, the agent and the model land in one trace.
func TestNeMoGymFleetWithSDKEnvironment(t *testing.T) {
	dir := t.TempDir()
	build := exec.Command("go", "build", "-race", "-o", filepath.Join(dir, "wallet"), "../examples/wallet")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		t.Fatalf("build the wallet: %v", err)
	}
	cfg := writeFile(t, filepath.Join(dir, "fleet.yaml"), walletFleet)
	runs := filepath.Join(dir, "runs")

	// The fleet, until SIGTERM. Its stdout names the head server.
	fleet := startEnv(t, gymEnv(), 4, "--config", cfg, "--runs-dir", runs) // and the agent's relay
	head := fleet.head

	// Rows for the wallet agent: the built-in policy calls none of the
	// wallet's tools, so the final balance is the opening one and the
	// wallet's rule gives 1 exactly where expected equals opening.
	const n = 8
	var rows strings.Builder
	want := map[int]float64{}
	for i := range n {
		opening, expected := 10+i, 10+i
		if i%2 == 1 {
			expected = opening + 5
		}
		if expected == opening {
			want[i] = 1
		} else {
			want[i] = 0
		}
		fmt.Fprintf(&rows, `{"responses_create_params":{"input":[{"role":"user","content":"Deposit 5 and report the balance."}],`+
			`"tools":[{"type":"function","name":"balance","description":"Read the balance.","parameters":{"type":"object","properties":{}},"strict":true}]},`+
			`"opening_balance":%d,"expected_balance":%d,"agent_ref":{"type":"responses_api_agents","name":"wallet_simple_agent"}}`+"\n",
			opening, expected)
	}
	tasks := writeFile(t, filepath.Join(dir, "tasks.jsonl"), rows.String())
	out := filepath.Join(dir, "rollouts.jsonl")
	res := runGym(t, 2*time.Minute, gymEnv(), "rollouts", "collect", "--head", head, "-i", tasks, "-o", out, "--concurrency", "4")
	if res.err != nil {
		t.Fatalf("collect through the head server: %v\nstdout:\n%s\nstderr:\n%s", res.err, res.stdout, res.stderr)
	}
	lines := readObjects(t, out)
	if len(lines) != n {
		t.Fatalf("%d output lines, want %d", len(lines), n)
	}
	traces := map[string]bool{}
	for _, l := range lines {
		idx := int(l["_ng_task_index"].(float64))
		if got := l["reward"]; got != want[idx] {
			t.Errorf("task %d: reward %v, want %v (final_balance %v)", idx, got, want[idx], l["final_balance"])
		}
		if l["final_balance"] != l["opening_balance"] {
			t.Errorf("task %d: final balance %v, opening %v: the wallet's session state did not follow the rollout", idx, l["final_balance"], l["opening_balance"])
		}
		book, _ := l["_gymlens"].(map[string]any)
		id, _ := book["trace_id"].(string)
		if len(id) != 32 {
			t.Fatalf("task %d: no trace id in %v", idx, book)
		}
		traces[id] = true
	}
	if len(traces) != n {
		t.Errorf("%d distinct traces for %d rollouts", len(traces), n)
	}

	fleet.stop(t, time.Minute)

	procs := readRun(t, runDir(t, runs))
	for _, name := range []string{"wallet", "policy_model", "wallet_simple_agent", "orchestrator"} {
		if procs[name] == nil {
			t.Fatalf("no telemetry file of %s (have %v)", name, names(procs))
		}
	}
	if got := procs["wallet"].resource["nemo.gym.server.name"]; got != "wallet" {
		t.Errorf("the wallet's nemo.gym.server.name is %v, want its instance name", got)
	}
	if vals := procs["orchestrator"].metricValues("gym.servers.active"); !hasValue(vals, 3) {
		t.Errorf("gym.servers.active %v: the external server is not counted with the built-ins", vals)
	}
	// Every rollout's trace holds the agent's gym.rollout, the model's
	// gym.model.responses and the wallet's gym.verify and SERVER spans.
	wantSpans := map[string][]string{
		"wallet_simple_agent": {"gym.rollout"},
		"policy_model":        {"gym.model.responses"},
		"wallet":              {"gym.verify", "POST /verify", "POST /seed_session"},
	}
	for proc, spans := range wantSpans {
		seen := map[string]map[string]bool{}
		for _, s := range procs[proc].spans {
			if traces[s.TraceID] {
				if seen[s.Name] == nil {
					seen[s.Name] = map[string]bool{}
				}
				seen[s.Name][s.TraceID] = true
			}
		}
		for _, name := range spans {
			if len(seen[name]) != n {
				t.Errorf("%s: %q spans in %d of the %d rollout traces", proc, name, len(seen[name]), n)
			}
		}
	}
}
