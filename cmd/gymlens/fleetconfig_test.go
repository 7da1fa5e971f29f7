package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/gymlens/gymlens/internal/testenv"
)

// Every broken fleet config makes `gymlens run` and `gymlens env start` exit 2
// with one exact message, before anything is created: no run directory,
// no process.
func TestBrokenFleetConfigs(t *testing.T) {
	testenv.ClearTelemetry(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyPort := busy.Addr().(*net.TCPAddr).Port
	const trio = "arithmetic:\n  resources_servers:\n    arithmetic: {}\npolicy_model:\n  responses_api_models:\n    policy_model: {}\n"
	cases := []struct {
		name string
		doc  string
		want string // after "<command>: fleet config <path>: "
	}{
		{
			name: "broken YAML",
			doc:  "calc:\n  resources_servers:\n    arithmetic: {tolerance: [unclosed\n",
			want: "parse config YAML: yaml: line 2: did not find expected ',' or ']'",
		},
		{
			name: "unknown key in a server block",
			doc:  "policy_model:\n  responses_api_models:\n    policy_model:\n      corect_probability: 0.5\n",
			want: `policy_model.responses_api_models.policy_model.corect_probability: unknown key (did you mean "correct_probability"?)`,
		},
		{
			name: "unknown key in the telemetry block",
			doc:  "telemetry:\n  enabled: true\n  exporterr: file\n" + trio,
			want: `telemetry: line 3: telemetry.exporterr: unknown key (did you mean "exporter"?)`,
		},
		{
			name: "mistakes in the telemetry block and a server block, both reported",
			doc:  "telemetry:\n  enabeld: true\n" + trio + "simple_agent:\n  responses_api_agents:\n    simple_agent: {max_stpes: 3}\n",
			want: "telemetry: line 2: telemetry.enabeld: unknown key (did you mean \"enabled\"?)\n" +
				`simple_agent.responses_api_agents.simple_agent.max_stpes: unknown key (did you mean "max_steps"?)`,
		},
		{
			name: "missing reference",
			doc:  trio + "simple_agent:\n  responses_api_agents:\n    simple_agent:\n      resources_server: {type: resources_servers, name: arithmetc}\n",
			want: `instance "simple_agent" field "resources_server" references resources_servers "arithmetc", which is not defined (did you mean "arithmetic"?)`,
		},
		{
			name: "ambiguous reference",
			doc:  trio + "large:\n  responses_api_models:\n    policy_model: {}\nsimple_agent:\n  responses_api_agents:\n    simple_agent: {}\n",
			want: "simple_agent.responses_api_agents.simple_agent.model_server: missing; the fleet has 2 responses_api_models instances (policy_model, large), so name one: model_server: {type: responses_api_models, name: <instance>}",
		},
		{
			name: "unknown implementation",
			doc:  "arithmetic:\n  resources_servers:\n    arithmetc: {}\n",
			want: `arithmetic.resources_servers.arithmetc: unknown implementation "arithmetc" of resources_servers (built-in: arithmetic, string_match, mcqa, equivalence_rule, counter; did you mean "arithmetic"?); an external server needs a command: [argv...]`,
		},
		{
			name: "environment server gymlens does not have",
			doc: trio + "simple_agent:\n  responses_api_agents:\n    simple_agent: {}\n" +
				"turns:\n  environment_servers:\n    single_agent_turn:\n      agent_server: {type: responses_api_agents, name: simple_agent}\n",
			want: `turns.environment_servers.single_agent_turn: unknown implementation "single_agent_turn" of environment_servers (built-in: legacy_agent); an external server needs a command: [argv...]`,
		},
		{
			name: "relay without its agent",
			doc:  trio + "relay:\n  environment_servers:\n    legacy_agent: {}\n",
			want: `relay.environment_servers.legacy_agent.agent_server: required: the agent this environment server fronts, {type: responses_api_agents, name: <agent instance>}`,
		},
		{
			name: "agent without an environment server, refused",
			doc:  "error_on_agent_without_environment_server: true\n" + trio + "simple_agent:\n  responses_api_agents:\n    simple_agent: {}\n",
			want: "agent instance(s) have no environment server, so rollout collection cannot reach them: simple_agent; declare one for each, naming the agent in its agent_server reference (agent_server: {type: responses_api_agents, name: <agent>}), or unset error_on_agent_without_environment_server to generate a legacy_agent relay for each",
		},
		{
			name: "server type typo",
			doc:  "arithmetic:\n  resource_servers:\n    arithmetic: {}\n",
			want: `arithmetic: unknown server type "resource_servers" (did you mean "resources_servers"? server types: resources_servers, responses_api_models, responses_api_agents, environment_servers)`,
		},
		{
			name: "unset environment variable",
			doc:  "arithmetic:\n  resources_servers:\n    arithmetic: {tolerance: \"${oc.env:GYMLENS_TEST_UNSET}\"}\n",
			want: `arithmetic.resources_servers.arithmetic.tolerance: ${oc.env:GYMLENS_TEST_UNSET}: oc.env: environment variable "GYMLENS_TEST_UNSET" is not set`,
		},
		{
			name: "fixed port taken",
			doc:  fmt.Sprintf("arithmetic:\n  resources_servers:\n    arithmetic: {port: %d}\n", busyPort),
			want: fmt.Sprintf("arithmetic.resources_servers.arithmetic: port 127.0.0.1:%d: not available: listen tcp 127.0.0.1:%d: bind: address already in use", busyPort, busyPort),
		},
		{
			name: "head server port taken",
			doc:  fmt.Sprintf("head_server: {host: 127.0.0.1, port: %d}\n", busyPort) + trio,
			want: fmt.Sprintf("head_server: 127.0.0.1:%d: not available: listen tcp 127.0.0.1:%d: bind: address already in use", busyPort, busyPort),
		},
		{
			name: "no server instances",
			doc:  "telemetry: {enabled: true}\n",
			want: "no server instances: a server is a top-level key shaped <name>: {<resources_servers|responses_api_models|responses_api_agents|environment_servers>: {<impl>: {...}}}",
		},
		{
			name: "old servers list",
			doc:  "servers:\n  - {name: arithmetic, type: resources_servers}\n",
			want: "the file uses gymlens's old `servers:` list shape; a fleet file is now NeMo Gym's config dict, one top-level key per server instance:\n" +
				"  arithmetic:\n    resources_servers:\n      arithmetic: {domain: math}\n" +
				"  policy_model:\n    responses_api_models:\n      policy_model: {correct_probability: 0.8}\n" +
				"  simple_agent:\n    responses_api_agents:\n      simple_agent:\n" +
				"        resources_server: {type: resources_servers, name: arithmetic}\n" +
				"        model_server: {type: responses_api_models, name: policy_model}\n" +
				"(an old entry's name becomes the top-level key, type and impl the two levels below it, config: its keys)",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "fleet.yaml")
			if err := os.WriteFile(path, []byte(tc.doc), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, cmd := range []struct {
				name string
				args []string
			}{
				{"gymlens run", []string{"run", "--quiet"}},
				{"gymlens env start", []string{"env", "start"}},
			} {
				runs := filepath.Join(dir, "runs")
				code, out, errOut := runGym(t, append(cmd.args, "--config", path, "--runs-dir", runs)...)
				want := cmd.name + ": fleet config " + path + ": " + tc.want + "\n"
				if code != exitUsage || errOut != want || out != "" {
					t.Errorf("%s: exit %d, stdout %q\nstderr: %s\nwant:   %s", cmd.name, code, out, errOut, want)
				}
				if _, err := os.Stat(runs); !os.IsNotExist(err) {
					t.Errorf("%s created %s (%v)", cmd.name, runs, err)
				}
			}
		})
	}
}

// A flag that sets a key of the built-in policy's block is checked like
// the file: a bad value exits 2 before anything is created.
func TestRunModelFlagsCheckedLikeTheConfig(t *testing.T) {
	testenv.ClearTelemetry(t)
	runs := filepath.Join(t.TempDir(), "runs")
	code, out, errOut := runGym(t, "run", "--correct-probability", "7", "--runs-dir", runs, "--quiet")
	want := "gymlens run: policy_model.responses_api_models.policy_model: model: correct_probability must be in [0, 1], got 7\n"
	if code != exitUsage || errOut != want || out != "" {
		t.Errorf("exit %d, stdout %q\nstderr: %s\nwant:   %s", code, out, errOut, want)
	}
	if _, err := os.Stat(runs); !os.IsNotExist(err) {
		t.Errorf("gymlens run created %s (%v)", runs, err)
	}
}

func TestMissingFleetConfigFile(t *testing.T) {
	testenv.ClearTelemetry(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "nope.yaml")
	code, _, errOut := runGym(t, "env", "start", "--config", path, "--runs-dir", filepath.Join(dir, "runs"))
	if want := "gymlens env start: fleet config: open " + path + ": no such file or directory\n"; code != exitUsage || errOut != want {
		t.Errorf("exit %d, stderr %q, want %q", code, errOut, want)
	}
}
