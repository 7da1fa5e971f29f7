package orchestrator_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/dataset"
	"github.com/gymlens/gymlens/gymconfig"
	"github.com/gymlens/gymlens/internal/testenv"
	"github.com/gymlens/gymlens/internal/upstream"
	"github.com/gymlens/gymlens/orchestrator"
)

// relayFleet has an agent that no environment server names: the config
// layer generates arith_environment_server, a legacy_agent relay, for it.
const relayFleet = `arithmetic:
  resources_servers:
    arithmetic: {domain: math}
policy_model:
  responses_api_models:
    policy_model: {correct_probability: 1}
arith_simple_agent:
  responses_api_agents:
    simple_agent:
      resources_server: {type: resources_servers, name: arithmetic}
      model_server: {type: responses_api_models, name: policy_model}
`

// startRelayFleet starts relayFleet and returns it with the generated
// relay's info.
func startRelayFleet(t *testing.T) (*orchestrator.Fleet, orchestrator.ServerInfo) {
	t.Helper()
	testenv.ClearTelemetry(t)
	cfg, err := orchestrator.ParseConfig([]byte(relayFleet))
	if err != nil {
		t.Fatal(err)
	}
	f := startFleet(t, cfg, orchestrator.Options{ExtraEnv: []string{"NEMO_GYM_OTEL_ENABLED=0"}})
	var relay orchestrator.ServerInfo
	for _, s := range f.Servers() {
		if s.Spec.Name == "arith_environment_server" {
			relay = s
		}
	}
	if relay.PID == 0 || relay.Spec.Type != contract.ServerTypeEnvironment || relay.Spec.Impl != gymconfig.LegacyAgentImpl || relay.Spec.AgentServer != "arith_simple_agent" {
		t.Fatalf("no generated relay in %+v", f.Servers())
	}
	return f, relay
}

// A generated relay is launched like every server, counts as active,
// is listed by the head with its host and port, and relays a rollout to
// the agent it fronts.
func TestFleetLaunchesTheGeneratedRelay(t *testing.T) {
	f, relay := startRelayFleet(t)
	if n := f.Active(); n != 4 {
		t.Errorf("Active() = %d, want 4 (three servers and the relay)", n)
	}

	code, body := getBody(t, f.HeadURL()+orchestrator.HeadInstancesPath)
	var list []orchestrator.ServerInstance
	if err := json.Unmarshal(body, &list); code != http.StatusOK || err != nil {
		t.Fatalf("GET %s = %d %s: %v", orchestrator.HeadInstancesPath, code, body, err)
	}
	found := false
	for _, in := range list {
		if in.ProcessName != relay.Spec.Name {
			continue
		}
		found = true
		u, _ := url.Parse(relay.URL)
		if in.ServerType != contract.ServerTypeEnvironment || in.Name != gymconfig.LegacyAgentImpl ||
			in.Host != u.Hostname() || strconv.Itoa(in.Port) != u.Port() || in.URL != relay.URL || in.Status != "success" {
			t.Errorf("head lists the relay as %+v, want %s at %s", in, gymconfig.LegacyAgentImpl, relay.URL)
		}
	}
	if !found {
		t.Errorf("head does not list %s: %s", relay.Spec.Name, body)
	}

	code, body = getBody(t, f.HeadURL()+orchestrator.HeadConfigPath)
	var doc string
	if err := json.Unmarshal(body, &doc); code != http.StatusOK || err != nil {
		t.Fatalf("GET %s = %d: %v", orchestrator.HeadConfigPath, code, err)
	}
	d, err := gymconfig.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	gc, err := d.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	if u, err := gc.URL(relay.Spec.Name); err != nil || u != relay.URL {
		t.Errorf("head YAML gives the relay %q, %v; want %s", u, err, relay.URL)
	}

	row := dataset.Arithmetic(1, 3)[0]
	raw, _ := json.Marshal(row)
	res, err := httpClient.Post(relay.URL+"/run", "application/json", bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(res.Body)
	res.Body.Close()
	var run struct {
		Reward *float64 `json:"reward"`
	}
	if res.StatusCode != http.StatusOK || json.Unmarshal(out, &run) != nil || run.Reward == nil || *run.Reward != 1 {
		t.Errorf("POST %s/run = %d %s, want the agent's verify answer with reward 1", relay.URL, res.StatusCode, out)
	}
	cookies := strings.Join(res.Header.Values("Set-Cookie"), "\n")
	if !strings.Contains(cookies, "LegacyAgentEnvironmentServer___arith_environment_server=") || !strings.Contains(cookies, "___arith_simple_agent=") {
		t.Errorf("Set-Cookie %q: want the relay's and the agent's session cookies", cookies)
	}
}

// upstreamRoute is run by upstream's interpreter: it reads our head's
// config as upstream's collector does (ServerClient from the head), maps
// the agent to its environment server with the collector's own functions,
// and posts one /run there through upstream's client.
const upstreamRoute = `
import asyncio, json, os, sys
os.chdir(sys.argv[4])  # Hydra writes outputs/ in the working directory
from nemo_gym.config_types import BaseServerConfig
from nemo_gym.server_utils import ServerClient
from nemo_gym.rollout_collection import _environment_servers_by_agent, _environment_server_for_agent

host, port, agent = sys.argv[1], int(sys.argv[2]), sys.argv[3]
sys.argv = sys.argv[:1]  # upstream reads the command line as Hydra overrides
row = json.load(sys.stdin)
client = ServerClient.load_from_global_config(BaseServerConfig(host=host, port=port))
by_agent = _environment_servers_by_agent(client.global_config_dict)
env = _environment_server_for_agent(agent, by_agent)
base = client._resolve_base_url(env)

async def main():
    r = await client.post(server_name=env, url_path="/run", json=row)
    return r.status, json.loads(await r.read())

status, body = asyncio.run(main())
print(json.dumps({"by_agent": by_agent, "env": env, "url": base, "status": status, "reward": body.get("reward")}))
`

// Upstream's collector code, reading our head, finds the generated relay
// for the agent, builds its URL and gets a rollout through it.
func TestUpstreamCollectorFindsTheGeneratedRelay(t *testing.T) {
	upstream.Python(t)
	f, relay := startRelayFleet(t)
	host, port, err := net.SplitHostPort(strings.TrimPrefix(f.HeadURL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	row, _ := json.Marshal(dataset.Arithmetic(1, 5)[0])
	out := upstream.Run(t, 2*time.Minute, upstreamRoute, row, host, port, "arith_simple_agent", t.TempDir())
	var got struct {
		ByAgent map[string][]string `json:"by_agent"`
		Env     string              `json:"env"`
		URL     string              `json:"url"`
		Status  int                 `json:"status"`
		Reward  *float64            `json:"reward"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	if got.Env != relay.Spec.Name || got.URL != relay.URL {
		t.Errorf("upstream routes arith_simple_agent to %q at %q, want %s at %s", got.Env, got.URL, relay.Spec.Name, relay.URL)
	}
	if len(got.ByAgent) != 1 || len(got.ByAgent["arith_simple_agent"]) != 1 {
		t.Errorf("upstream's agent -> environment servers map %v, want the one relay", got.ByAgent)
	}
	if got.Status != http.StatusOK || got.Reward == nil || *got.Reward != 1 {
		t.Errorf("upstream's /run through the relay: status %d reward %v", got.Status, got.Reward)
	}
	t.Logf("upstream: %s -> %s (%s), /run %d reward %v", "arith_simple_agent", got.Env, got.URL, got.Status, *got.Reward)
}

// An environment server gymlens has no implementation of is refused when
// the file is read, naming the block, unless it is an external server; a
// legacy_agent block is checked as upstream's config checks it.
func TestParseConfigEnvironmentServers(t *testing.T) {
	const agent = relayFleet
	for _, impl := range []string{"single_agent_turn", "single_agent_turn_legacy", "nemo_user_sim", "my_env"} {
		doc := agent + "env:\n  environment_servers:\n    " + impl + ":\n      agent_server: {type: responses_api_agents, name: arith_simple_agent}\n"
		_, err := orchestrator.ParseConfig([]byte(doc))
		want := `env.environment_servers.` + impl + `: unknown implementation "` + impl + `" of environment_servers (built-in: legacy_agent`
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", impl, err, want)
		}
		cfg, err := orchestrator.ParseConfig([]byte(doc + "      command: [./bin/env]\n"))
		if err != nil {
			t.Errorf("%s with command: %v", impl, err)
			continue
		}
		// Named by an environment server, the agent gets no relay.
		if len(cfg.Servers) != 4 || cfg.Servers[3].Name != "env" || !cfg.Servers[3].External() || cfg.Servers[3].AgentServer != "arith_simple_agent" {
			t.Errorf("%s with command: servers %+v", impl, cfg.Servers)
		}
	}
	for _, tc := range []struct{ block, want string }{
		{"{agent_server: {type: responses_api_agents, name: arith_simple_agent}, max_concurrent_episodes: 2}", "queue_timeout_seconds is required when max_concurrent_episodes is set"},
		{"{agent_server: {type: responses_api_agents, name: arith_simple_agent}, max_concurent_episodes: 2}", `unknown key (did you mean "max_concurrent_episodes"?)`},
		{"{agent_server: {type: responses_api_agents, name: nobody}}", `references responses_api_agents "nobody", which is not defined`},
		{"{agent_server: {name: arith_simple_agent}}", "agent_server: want a reference {type: responses_api_agents, name: <agent instance>}"},
		{"{}", "env.environment_servers.legacy_agent.agent_server: required"},
	} {
		_, err := orchestrator.ParseConfig([]byte(agent + "env:\n  environment_servers:\n    legacy_agent: " + tc.block + "\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.block, err, tc.want)
		}
	}
	cfg, err := orchestrator.ParseConfig([]byte(agent + "env:\n  environment_servers:\n    legacy_agent:\n      agent_server: {type: responses_api_agents, name: arith_simple_agent}\n      cleanup_timeout_seconds: 30\n"))
	if err != nil || len(cfg.Servers) != 4 {
		t.Errorf("a declared relay: %v, %+v", err, cfg.Servers)
	}
}
