package gymconfig_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/gymconfig"
	"github.com/gymlens/gymlens/internal/upstream"
)

// nameCases are agent names, implementations and the relay name
// upstream's rule gives them.
var nameCases = []struct{ agent, impl, want string }{
	{"string_match_simple_agent", "simple_agent", "string_match_environment_server"},
	{"simple_agent", "simple_agent", "simple_agent_environment_server"},
	{"workplace_assistant_simple_agent", "simple_agent", "workplace_assistant_environment_server"},
	{"math_agent", "custom", "math_environment_server"},
	{"math", "custom", "math_environment_server"},
	{"agent", "simple_agent", "agent_environment_server"},
	{"_agent", "x", "x_environment_server"},
	{"foo__simple_agent", "simple_agent", "foo_environment_server"},
	{"foosimple_agent", "simple_agent", "foo_environment_server"},
}

func TestLegacyEnvironmentServerName(t *testing.T) {
	for _, tc := range nameCases {
		if got := gymconfig.LegacyEnvironmentServerName(tc.agent, tc.impl); got != tc.want {
			t.Errorf("%s (%s): %q, want %q", tc.agent, tc.impl, got, tc.want)
		}
	}
}

// TestUpstreamLegacyEnvironmentServerName checks the table against
// upstream's own naming function.
func TestUpstreamLegacyEnvironmentServerName(t *testing.T) {
	upstream.Python(t)
	const program = `
import json, sys
from nemo_gym.global_config import legacy_environment_server_name
print(json.dumps([legacy_environment_server_name(a, i) for a, i in json.load(sys.stdin)]))
`
	var pairs [][2]string
	for _, tc := range nameCases {
		pairs = append(pairs, [2]string{tc.agent, tc.impl})
	}
	in, _ := json.Marshal(pairs)
	var theirs []string
	if err := json.Unmarshal(upstream.Run(t, time.Minute, program, in), &theirs); err != nil {
		t.Fatal(err)
	}
	agree := 0
	for i, tc := range nameCases {
		if theirs[i] == tc.want {
			agree++
		} else {
			t.Errorf("%s (%s): upstream %q, table %q", tc.agent, tc.impl, theirs[i], tc.want)
		}
	}
	t.Logf("%d names, %d agree with upstream", len(nameCases), agree)
}

func TestEnvironmentAgents(t *testing.T) {
	block := map[string]any{
		"agent_server":    map[string]any{"name": "a"}, // type left out: still the agent
		"user":            map[string]any{"type": contract.ServerTypeAgent, "name": "u"},
		"resources":       map[string]any{"type": contract.ServerTypeResources, "name": "r"},
		"unnamed":         map[string]any{"type": contract.ServerTypeAgent},
		"max_concurrency": 3,
	}
	if got, want := gymconfig.EnvironmentAgents(block), []string{"a", "u"}; !reflect.DeepEqual(got, want) {
		t.Errorf("%v, want %v", got, want)
	}
	typed := map[string]any{"agent_server": map[string]any{"type": contract.ServerTypeResources, "name": "r"}}
	if got := gymconfig.EnvironmentAgents(typed); len(got) != 0 {
		t.Errorf("an agent_server of another type named %v", got)
	}
}

// frontConfig has two agents with no environment server (one of whose
// relay names is taken), one fronted by a declared environment server,
// and a key in the way of the collision name.
const frontConfig = `
a_simple_agent:
  responses_api_agents:
    simple_agent: {entrypoint: app.py}
a_environment_server: 3
a_simple_agent_environment_server: taken
b_agent:
  responses_api_agents:
    custom: {entrypoint: app.py}
fronted_agent:
  responses_api_agents:
    simple_agent: {entrypoint: app.py}
declared:
  environment_servers:
    single_agent_turn:
      agent_server: {type: responses_api_agents, name: fronted_agent}
`

func TestFrontAgentsGeneratesRelays(t *testing.T) {
	d := mustParse(t, frontConfig)
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	made, err := d.FrontAgents(noEnv, log)
	if err != nil {
		t.Fatal(err)
	}
	want := []gymconfig.Relay{
		{Agent: "a_simple_agent", Server: "a_simple_agent_environment_server_environment_server"},
		{Agent: "b_agent", Server: "b_environment_server"},
	}
	if !reflect.DeepEqual(made, want) {
		t.Errorf("made %+v, want %+v", made, want)
	}
	cfg, err := d.Resolve(noEnv)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range want {
		in, ok := cfg.Instance(r.Server)
		if !ok || in.Type != contract.ServerTypeEnvironment || in.Impl != gymconfig.LegacyAgentImpl {
			t.Fatalf("%s: %+v", r.Server, in)
		}
		if ref := in.Refs()[gymconfig.KeyAgentServer]; ref.Name != r.Agent || ref.Type != contract.ServerTypeAgent {
			t.Errorf("%s fronts %+v, want %s", r.Server, ref, r.Agent)
		}
		if in.Block["entrypoint"] != "app.py" {
			t.Errorf("%s entrypoint %v", r.Server, in.Block["entrypoint"])
		}
	}
	if n := strings.Count(logs.String(), "DEPRECATED: agents without an environment server: `a_simple_agent`, `b_agent`."); n != 1 {
		t.Errorf("want one deprecation line naming both agents, got %d:\n%s", n, logs.String())
	}
	// Once every agent has its server, a second pass generates nothing.
	logs.Reset()
	if again, err := d.FrontAgents(noEnv, log); err != nil || len(again) != 0 || logs.Len() != 0 {
		t.Errorf("second pass: %v %v %q", again, err, logs.String())
	}
}

func TestFrontAgentsOptOutIsAnError(t *testing.T) {
	d := mustParse(t, frontConfig+"error_on_agent_without_environment_server: true\n")
	before := string(d.YAML())
	_, err := d.FrontAgents(noEnv, slog.New(slog.DiscardHandler))
	if !errors.Is(err, gymconfig.ErrAgentWithoutEnvironmentServer) || !strings.Contains(err.Error(), "a_simple_agent, b_agent") {
		t.Fatalf("err %v", err)
	}
	if string(d.YAML()) != before {
		t.Error("the dict changed on error")
	}
}

// TestUpstreamFrontAgentsAgrees runs upstream's own generation on the
// same dicts and compares the instances it adds, their blocks and its
// deprecation text with ours. Every agent has an entrypoint: upstream
// leaves an agent without one alone, where gymlens starts it (a built-in)
// and fronts it too.
func TestUpstreamFrontAgentsAgrees(t *testing.T) {
	upstream.Python(t)
	configs := []string{
		frontConfig,
		"simple_agent:\n  responses_api_agents:\n    simple_agent: {entrypoint: app.py}\n",
		"string_match_simple_agent:\n  responses_api_agents:\n    simple_agent: {entrypoint: app.py}\n" +
			"string_match_environment_server: {x: 1}\n",
		"x:\n  responses_api_agents:\n    x: {entrypoint: a.py}\ny_x:\n  responses_api_agents:\n    x: {entrypoint: a.py}\n",
		"e:\n  environment_servers:\n    legacy_agent:\n      agent_server: {name: z_agent}\nz_agent:\n  responses_api_agents:\n    simple_agent: {entrypoint: app.py}\n",
	}
	const program = `
import json, logging, sys
from omegaconf import OmegaConf
from nemo_gym.global_config import GlobalConfigDictParser
records = []
class H(logging.Handler):
    def emit(self, r): records.append(r.getMessage())
logging.getLogger("nemo_gym.global_config").addHandler(H())
out = []
for doc in json.load(sys.stdin):
    cfg = OmegaConf.create(doc)
    before = set(cfg.keys())
    records.clear()
    GlobalConfigDictParser.model_construct()._front_agents_without_environment_server(cfg)
    plain = OmegaConf.to_container(cfg)
    out.append({"added": {k: plain[k] for k in plain if k not in before}, "logs": list(records)})
print(json.dumps(out))
`
	var docs []any
	for _, c := range configs {
		cfg, err := mustParse(t, c).Resolve(noEnv)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, cfg.Root)
	}
	in, _ := json.Marshal(docs)
	var theirs []struct {
		Added map[string]any `json:"added"`
		Logs  []string       `json:"logs"`
	}
	if err := json.Unmarshal(upstream.Run(t, 2*time.Minute, program, in), &theirs); err != nil {
		t.Fatal(err)
	}
	agree := 0
	for i, c := range configs {
		d := mustParse(t, c)
		made, err := d.FrontAgents(noEnv, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		ours := map[string]any{}
		for _, r := range made {
			v, _ := d.Get([]string{r.Server})
			ours[r.Server] = v
		}
		if !reflect.DeepEqual(ours, theirs[i].Added) {
			t.Errorf("config %d: we add %v, upstream %v", i, ours, theirs[i].Added)
			continue
		}
		want := ""
		if len(made) > 0 {
			want = gymconfig.DeprecationNotice(made)
		}
		got := strings.Join(theirs[i].Logs, "\n")
		if want != got {
			t.Errorf("config %d: notice differs\nours:\n%s\nupstream:\n%s", i, want, got)
			continue
		}
		agree++
	}
	t.Logf("%d configs, %d agree with upstream", len(configs), agree)
}
