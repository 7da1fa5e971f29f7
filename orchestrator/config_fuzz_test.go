package orchestrator_test

import (
	"net"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/gymlens/gymlens/internal/testenv"
	"github.com/gymlens/gymlens/orchestrator"
	"github.com/gymlens/gymlens/telemetry"
)

// maxFuzzFleetYAML bounds the documents FuzzParseFleetConfig parses.
const maxFuzzFleetYAML = 64 << 10

// fleetBombs are billion-laughs tails (see testenv.AliasBomb) for the
// fuzz corpus and the bomb test.
var fleetBombs = []string{
	"servers:\n  - {name: x, type: resources_servers, config: {k: *i}}\n",
	"servers: *i\n",
	"servers:\n  - name: x\n    type: resources_servers\n    <<: {config: {k: *i}}\n",
	"servers:\n  - {name: x, type: resources_servers}\ntelemetry:\n  future_knob: *i\n",
}

// touchesNetwork reports whether ParseConfig would bind a socket or
// resolve a name for doc: Validate checks that every fixed address with a
// port is free by listening on it, and a host name there goes through the
// resolver. The fuzz target leaves such documents alone, except for
// loopback IP literals, which cost a bind and a close.
func touchesNetwork(doc []byte) bool {
	var raw struct {
		Servers []struct {
			Addr string `yaml:"addr"`
		} `yaml:"servers"`
	}
	if yaml.Unmarshal(doc, &raw) != nil {
		return false // ParseConfig stops at the same error
	}
	for _, s := range raw.Servers {
		host, port, err := net.SplitHostPort(s.Addr)
		if s.Addr == "" || err != nil || port == "" || port == "0" || host == "" {
			continue
		}
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			return true
		}
	}
	return false
}

func FuzzParseFleetConfig(f *testing.F) {
	for _, seed := range []string{
		"",
		"servers:",
		"servers: []",
		"servers: {}",
		"servers: 7",
		"servers:\n  - {name: arithmetic, type: resources_servers}\n  - {name: policy_model, type: responses_api_models}\n  - {name: simple_agent, type: responses_api_agents}\n",
		"servers:\n  - {name: calc, type: resources_servers, impl: arithmetic, addr: '127.0.0.1:0', config: {tolerance: 0.5}}\n",
		"servers:\n  - {name: ' padded ', type: resources_servers}\n",
		"servers:\n  - {name: 'a/b', type: resources_servers}\n  - {name: 'a b', type: resources_servers}\n  - {name: orchestrator, type: resources_servers}\n",
		"servers:\n  - {name: twin, type: resources_servers}\n  - {name: twin, type: responses_api_models}\n",
		"servers:\n  - {type: resources_servers}\n  - {name: '', type: resources_servers}\n",
		"servers:\n  - {name: x, type: resource_server}\n",
		"servers:\n  - {name: x, type: resources_servers, impl: policy_model}\n",
		"servers:\n  - {name: x, type: resources_servers, impl: nope}\n",
		"servers:\n  - {name: agent, type: responses_api_agents}\n",
		"servers:\n  - {name: m1, type: responses_api_models}\n  - {name: m2, type: responses_api_models}\n  - {name: r, type: resources_servers}\n  - {name: a, type: responses_api_agents, model_server: m2}\n",
		"servers:\n  - {name: m, type: responses_api_models}\n  - {name: r, type: resources_servers}\n  - {name: a, type: responses_api_agents, model_server: r, resources_server: ghost}\n",
		"servers:\n  - {name: x, type: resources_servers, addr: 'no-port'}\n",
		"servers:\n  - {name: x, type: resources_servers, addr: ':8080'}\n",
		"servers:\n  - {name: x, type: resources_servers, addr: '[::1]:0'}\n  - {name: y, type: resources_servers, addr: '[::1]:0'}\n",
		"servers:\n  - {name: x, type: resources_servers, addr: '127.0.0.1:1'}\n  - {name: y, type: resources_servers, addr: '127.0.0.1:1'}\n",
		"servers:\n  - {name: x, type: resources_servers, addr: 'example.invalid:80'}\n",
		"servers:\n  - {name: x, type: resources_servers, config: [1, 2]}\n",
		"servers:\n  - {name: x, type: resources_servers, config: {nested: {deep: [1, {a: b}]}}}\n",
		"servers:\n  - {name: 7, type: resources_servers}\n",
		"servers:\n  - {name: [a], type: resources_servers}\n",
		"servers:\n  - &s {name: x, type: resources_servers}\n  - *s\n",
		"servers:\n  - {name: \"tab\\there\", type: resources_servers}\n",
		"servers:\n  - {name: \"nul\\0\", type: resources_servers}\n",
		"servers:\n  - {name: x, type: resources_servers}\ntelemetry:\n  enabled: maybe\n",
		"servers:\n  - {name: x, type: resources_servers}\ntelemetry:\n  enabled: on\n  span_groups: [default, verify]\n",
		"telemetry:\n  enabled: true\n",
		"- a\n- b\n",
		"servers:\n  - {name: x, type: resources_servers}\n  - null\n",
	} {
		f.Add([]byte(seed))
	}
	for _, b := range fleetBombs {
		f.Add([]byte(testenv.AliasBomb(b)))
	}
	types := map[string]string{
		"arithmetic":   telemetry.ServerTypeResources,
		"policy_model": telemetry.ServerTypeModel,
		"simple_agent": telemetry.ServerTypeAgent,
	}

	f.Fuzz(func(t *testing.T, doc []byte) {
		if len(doc) > maxFuzzFleetYAML {
			t.Skip("document too large")
		}
		if touchesNetwork(doc) {
			t.Skip("fixed non-loopback address: validation would bind or resolve it")
		}
		cfg, err := orchestrator.ParseConfig(doc)
		if err != nil {
			if !reflect.DeepEqual(cfg, orchestrator.Config{}) {
				t.Errorf("error %v came with a configuration %+v", err, cfg)
			}
			return
		}
		again, err := orchestrator.ParseConfig(doc)
		if err != nil || !reflect.DeepEqual(cfg, again) {
			t.Fatalf("ParseConfig is not deterministic: %+v, then %+v, %v", cfg, again, err)
		}
		tcfg, err := telemetry.ConfigFromYAML(doc)
		if err != nil || !reflect.DeepEqual(tcfg, cfg.Telemetry) {
			t.Errorf("fleet telemetry %+v, ConfigFromYAML says %+v, %v", cfg.Telemetry, tcfg, err)
		}

		// An accepted fleet can be started: unique, usable names; every
		// implementation serves its type; every agent names one model and
		// one resources server of the fleet.
		if len(cfg.Servers) == 0 {
			t.Fatal("accepted a fleet without servers")
		}
		byName := map[string]orchestrator.ServerSpec{}
		for _, s := range cfg.Servers {
			if s.Name == "" || s.Name != strings.TrimSpace(s.Name) || strings.ContainsAny(s.Name, "/ \t") || s.Name == "orchestrator" {
				t.Errorf("accepted server name %q", s.Name)
			}
			if _, dup := byName[s.Name]; dup {
				t.Errorf("accepted duplicate name %q", s.Name)
			}
			byName[s.Name] = s
			if typ, ok := types[s.Impl]; !ok || typ != s.Type {
				t.Errorf("server %q: implementation %q for type %q", s.Name, s.Impl, s.Type)
			}
		}
		for _, s := range cfg.Servers {
			if s.Type != telemetry.ServerTypeAgent {
				continue
			}
			if m, ok := byName[s.ModelServer]; !ok || m.Type != telemetry.ServerTypeModel {
				t.Errorf("agent %q: model_server %q is not a model of the fleet", s.Name, s.ModelServer)
			}
			if r, ok := byName[s.ResourcesServer]; !ok || r.Type != telemetry.ServerTypeResources {
				t.Errorf("agent %q: resources_server %q is not a resources server of the fleet", s.Name, s.ResourcesServer)
			}
		}
		if got := cfg.Agents(); len(got) != countType(cfg.Servers, telemetry.ServerTypeAgent) {
			t.Errorf("Agents() returned %d of %d agents", len(got), countType(cfg.Servers, telemetry.ServerTypeAgent))
		}
	})
}

func countType(specs []orchestrator.ServerSpec, typ string) int {
	n := 0
	for _, s := range specs {
		if s.Type == typ {
			n++
		}
	}
	return n
}

// TestParseConfigAliasBombIsBounded checks that no path of ParseConfig
// expands a billion-laughs document: each is rejected with little memory.
func TestParseConfigAliasBombIsBounded(t *testing.T) {
	for _, use := range fleetBombs {
		doc := []byte(testenv.AliasBomb(use))
		var err error
		alloc := testenv.AllocatedBy(func() { _, err = orchestrator.ParseConfig(doc) })
		t.Logf("%q: %d KiB allocated, err %v", use, alloc>>10, err)
		if alloc > 256<<20 {
			t.Errorf("%q: %d MiB allocated for a %d-byte document", use, alloc>>20, len(doc))
		}
		if err == nil {
			t.Errorf("%q: bomb accepted", use)
		}
	}
}
