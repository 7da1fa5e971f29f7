package rollout_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gymlens/gymlens/internal/upstream"
	"github.com/gymlens/gymlens/rollout"
)

// upstreamRouting reads config dicts (YAML, one per element of a JSON
// list on stdin) with nemo-gym's own functions and prints, per config,
// the environment servers fronting each agent
// (rollout_collection._environment_servers_by_agent) and, for every agent
// and resources server, the agent its task_source rows go to, or null
// when upstream refuses (resolve_task_sources' rules: conflicting pins,
// then resolve_dataset_agent).
const upstreamRouting = `
import json, sys, yaml
from omegaconf import OmegaConf, DictConfig
from nemo_gym.rollout_collection import _environment_servers_by_agent
from nemo_gym.global_config import resolve_dataset_agent, dataset_agent_pins
for doc in json.load(sys.stdin):
    cfg = OmegaConf.create(yaml.safe_load(doc))
    sources = {}
    for name, block in cfg.items():
        if not isinstance(block, DictConfig) or not ("responses_api_agents" in block or "resources_servers" in block):
            continue
        pins = dataset_agent_pins(cfg, name)
        if len(pins) > 1:
            sources[name] = None
            continue
        try:
            sources[name] = resolve_dataset_agent(cfg, name, pin=pins[0] if pins else None)
        except Exception:
            sources[name] = None
    envs = {agent: sorted(servers) for agent, servers in _environment_servers_by_agent(cfg).items()}
    print(json.dumps({"envs": envs, "sources": sources}))
`

// genRoutingConfig makes a seeded fleet config: resources servers and
// agents referencing them (or not), datasets pinning agents (rightly or
// not), environment servers fronting agents (one, two, none; by
// agent_server, with or without its type, or by another field).
func genRoutingConfig(r *rand.Rand) string {
	var b strings.Builder
	port := 20000
	next := func() int { port++; return port }
	nRes, nAgents := 1+r.IntN(3), 1+r.IntN(4)
	agent := func(i int) string { return fmt.Sprintf("agent_%d", i) }
	res := func(i int) string { return fmt.Sprintf("rs_%d", i) }
	datasets := func() string {
		var ds []string
		for i := range r.IntN(3) {
			d := fmt.Sprintf("{name: d%d", i)
			if r.IntN(2) == 0 {
				d += ", agent: " + agent(r.IntN(nAgents+1)) // sometimes an agent that does not exist
			}
			ds = append(ds, d+"}")
		}
		if len(ds) == 0 {
			return ""
		}
		return ", datasets: [" + strings.Join(ds, ", ") + "]"
	}
	fmt.Fprintf(&b, "policy_model:\n  responses_api_models:\n    openai_model: {host: 127.0.0.1, port: %d}\n", next())
	for i := range nRes {
		fmt.Fprintf(&b, "%s:\n  resources_servers:\n    x: {host: 127.0.0.1, port: %d, domain: other%s}\n", res(i), next(), datasets())
	}
	for i := range nAgents {
		ref := ""
		if r.IntN(5) > 0 {
			ref = fmt.Sprintf(", resources_server: {type: resources_servers, name: %s}", res(r.IntN(nRes)))
		}
		fmt.Fprintf(&b, "%s:\n  responses_api_agents:\n    simple_agent: {host: 127.0.0.1, port: %d%s%s}\n", agent(i), next(), ref, datasets())
	}
	for i := range r.IntN(nAgents + 2) {
		a := agent(r.IntN(nAgents))
		field := fmt.Sprintf("agent_server: {type: responses_api_agents, name: %s}", a)
		switch r.IntN(4) {
		case 0:
			field = fmt.Sprintf("agent_server: {name: %s}", a) // the type may be left out
		case 1:
			field += fmt.Sprintf(", user_agent: {type: responses_api_agents, name: %s}", agent(r.IntN(nAgents)))
		}
		fmt.Fprintf(&b, "env_%d:\n  environment_servers:\n    legacy_agent: {host: 127.0.0.1, port: %d, %s}\n", i, next(), field)
	}
	return b.String()
}

// FleetFromConfig routes as upstream's collector: the same environment
// servers front each agent, and every task_source resolves to the same
// agent or is refused alike, over seeded configs.
func TestUpstreamFleetRoutingAgrees(t *testing.T) {
	const n = 150
	r := rand.New(rand.NewPCG(11, 7))
	docs := make([]string, n)
	for i := range docs {
		docs[i] = genRoutingConfig(r)
	}
	in, _ := json.Marshal(docs)
	out := strings.Split(strings.TrimSpace(string(upstream.Run(t, 2*time.Minute, upstreamRouting, in))), "\n")
	if len(out) != n {
		t.Fatalf("upstream answered %d configs of %d", len(out), n)
	}
	agree, refused, fronted := 0, 0, 0
	for i, doc := range docs {
		var want struct {
			Envs    map[string][]string `json:"envs"`
			Sources map[string]*string  `json:"sources"`
		}
		if err := json.Unmarshal([]byte(out[i]), &want); err != nil {
			t.Fatal(err)
		}
		f, err := rollout.FleetFromConfig([]byte(doc), noEnv)
		if err != nil {
			t.Fatalf("config %d: %v\n%s", i, err, doc)
		}
		envs := map[string][]string{}
		for _, name := range slices.Sorted(maps.Keys(f.Environments)) {
			for _, a := range f.Environments[name].Agents {
				envs[a] = append(envs[a], name)
			}
		}
		sources := map[string]*string{}
		for name, ts := range f.TaskSources {
			if !strings.HasPrefix(name, "agent_") && !strings.HasPrefix(name, "rs_") {
				continue
			}
			if ts.Agent != "" {
				sources[name] = &ts.Agent
			} else {
				sources[name] = nil
			}
		}
		if !equalLists(envs, want.Envs) || !equalSources(sources, want.Sources) {
			t.Errorf("config %d:\n%s\nupstream: %s\ngymlens: envs %v, sources %v", i, doc, out[i], envs, show(sources))
			continue
		}
		agree++
		for _, s := range want.Sources {
			if s == nil {
				refused++
			}
		}
		fronted += len(want.Envs)
	}
	t.Logf("%d configs, %d agree (%d task sources refused, %d agents fronted)", n, agree, refused, fronted)
	if refused == 0 || fronted == 0 {
		t.Errorf("the generator missed a path: %d refused, %d fronted", refused, fronted)
	}
}

func equalLists(a, b map[string][]string) bool {
	return maps.EqualFunc(a, b, slices.Equal[[]string])
}

func equalSources(a, b map[string]*string) bool {
	return maps.EqualFunc(a, b, func(x, y *string) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) })
}

func show(m map[string]*string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = "<refused>"
		if v != nil {
			out[k] = *v
		}
	}
	return out
}
