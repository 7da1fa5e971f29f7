package orchestrator_test

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/internal/testenv"
	"github.com/gymlens/gymlens/orchestrator"
	"github.com/gymlens/gymlens/servers/registry"
	"github.com/gymlens/gymlens/telemetry"
)

// maxFuzzFleetYAML bounds the documents FuzzParseFleetConfig parses.
const maxFuzzFleetYAML = 64 << 10

// fleetBombs are billion-laughs tails (see testenv.AliasBomb) for the
// fuzz corpus and the bomb test.
var fleetBombs = []string{
	"x:\n  resources_servers:\n    arithmetic: {k: *i}\n",
	"x: *i\n",
	"x:\n  resources_servers:\n    arithmetic:\n      <<: {k: *i}\n",
	"x:\n  resources_servers:\n    arithmetic: {}\ntelemetry:\n  future_knob: *i\n",
}

// touchesNetwork reports whether ParseConfig might bind a socket or
// resolve a name for doc: it checks that every fixed port (a block's
// port, head_server's, a metrics_addr) is free by listening on it. The
// fuzz target leaves documents that could hold one alone; a key can only
// say "port" or "addr" literally, or through an escape.
func touchesNetwork(doc []byte) bool {
	// A host name is resolved (is it this machine?), which may ask DNS.
	return bytes.Contains(doc, []byte("port")) || bytes.Contains(doc, []byte("addr")) || bytes.Contains(doc, []byte("host")) ||
		bytes.ContainsRune(doc, '\\')
}

func FuzzParseFleetConfig(f *testing.F) {
	for _, seed := range []string{
		"",
		"servers:",
		"servers: []",
		"x: {}",
		"x: 7",
		string(orchestrator.DefaultConfigYAML()),
		"calc:\n  resources_servers:\n    arithmetic: {tolerance: 0.5, domain: math}\n",
		"' padded ':\n  resources_servers:\n    arithmetic: {}\n",
		"a/b:\n  resources_servers:\n    arithmetic: {}\norchestrator:\n  resources_servers:\n    arithmetic: {}\n",
		"x:\n  resource_server:\n    arithmetic: {}\n",
		"x:\n  resources_servers:\n    policy_model: {}\n",
		"x:\n  resources_servers:\n    nope: {}\n",
		"x:\n  resources_servers:\n    nope: {command: [./nope]}\n",
		"x:\n  resources_servers:\n    nope: {command: []}\n",
		"agent:\n  responses_api_agents:\n    simple_agent: {}\n",
		"m1:\n  responses_api_models:\n    policy_model: {}\nm2:\n  responses_api_models:\n    policy_model: {}\nr:\n  resources_servers:\n    arithmetic: {}\n" +
			"a:\n  responses_api_agents:\n    simple_agent:\n      model_server: {type: responses_api_models, name: m2}\n",
		"m:\n  responses_api_models:\n    policy_model: {}\nr:\n  resources_servers:\n    arithmetic: {}\n" +
			"a:\n  responses_api_agents:\n    simple_agent:\n      model_server: {type: responses_api_models, name: r}\n      resources_server: {type: resources_servers, name: ghost}\n",
		"x:\n  resources_servers:\n    arithmetic: {nested: {deep: [1, {a: b}]}}\n",
		"x:\n  resources_servers:\n    arithmetic: [1, 2]\n",
		"7:\n  resources_servers:\n    arithmetic: {}\n",
		"x: &s\n  resources_servers:\n    arithmetic: {}\ny: *s\n",
		"x:\n  resources_servers:\n    arithmetic: {tolerance: '${t}'}\nt: 0.25\n",
		"x:\n  resources_servers:\n    arithmetic: {tolerance: '${oc.env:GYMLENS_FUZZ_UNSET}'}\n",
		"x:\n  resources_servers:\n    arithmetic: {tolerance: '???'}\n",
		"x:\n  resources_servers:\n    arithmetic: {}\ntelemetry:\n  enabled: maybe\n",
		"x:\n  resources_servers:\n    arithmetic: {}\ntelemetry:\n  enabled: on\n  span_groups: [default, verify]\n",
		"telemetry:\n  enabled: true\n",
		"- a\n- b\n",
	} {
		f.Add([]byte(seed))
	}
	for _, b := range fleetBombs {
		f.Add([]byte(testenv.AliasBomb(b)))
	}

	f.Fuzz(func(t *testing.T, doc []byte) {
		if len(doc) > maxFuzzFleetYAML {
			t.Skip("document too large")
		}
		if touchesNetwork(doc) {
			t.Skip("may hold a fixed port: validation would bind or resolve it")
		}
		cfg, err := orchestrator.ParseConfig(doc)
		if err != nil {
			if !reflect.DeepEqual(cfg, orchestrator.Config{}) {
				t.Errorf("error %v came with a configuration %+v", err, cfg)
			}
			return
		}
		again, err := orchestrator.ParseConfig(doc)
		if err != nil || !reflect.DeepEqual(cfg.Servers, again.Servers) || !bytes.Equal(cfg.Dict.YAML(), again.Dict.YAML()) {
			t.Fatalf("ParseConfig is not deterministic: %+v, then %+v, %v", cfg.Servers, again.Servers, err)
		}
		tcfg, err := telemetry.ConfigFromYAML(doc)
		if err != nil || !reflect.DeepEqual(tcfg, cfg.Telemetry) {
			t.Errorf("fleet telemetry %+v, ConfigFromYAML says %+v, %v", cfg.Telemetry, tcfg, err)
		}
		// The dict the children get is a config the orchestrator accepts
		// as it is.
		if _, err := orchestrator.ParseConfig(cfg.Dict.YAML()); err != nil {
			t.Errorf("the children's dict does not parse again: %v\n%s", err, cfg.Dict.YAML())
		}

		// An accepted fleet can be started: unique, usable names; every
		// built-in implementation serves its type; every built-in agent
		// names one model and one resources server of the fleet.
		if len(cfg.Servers) == 0 {
			t.Fatal("accepted a fleet without servers")
		}
		byName := map[string]orchestrator.ServerSpec{}
		for _, s := range cfg.Servers {
			if s.Name == "" || strings.ContainsAny(s.Name, "/ \t") || s.Name == "orchestrator" {
				t.Errorf("accepted server name %q", s.Name)
			}
			if _, dup := byName[s.Name]; dup {
				t.Errorf("accepted duplicate name %q", s.Name)
			}
			byName[s.Name] = s
			if _, ok := registry.Lookup(s.Type, s.Impl); !ok && !s.External() {
				t.Errorf("server %q: implementation %q for type %q, and no command", s.Name, s.Impl, s.Type)
			}
		}
		for _, s := range cfg.Agents() {
			if s.External() {
				continue
			}
			if m, ok := byName[s.ModelServer]; !ok || m.Type != contract.ServerTypeModel {
				t.Errorf("agent %q: model_server %q is not a model of the fleet", s.Name, s.ModelServer)
			}
			if r, ok := byName[s.ResourcesServer]; !ok || r.Type != contract.ServerTypeResources {
				t.Errorf("agent %q: resources_server %q is not a resources server of the fleet", s.Name, s.ResourcesServer)
			}
		}
		if got := cfg.Agents(); len(got) != countType(cfg.Servers, contract.ServerTypeAgent) {
			t.Errorf("Agents() returned %d of %d agents", len(got), countType(cfg.Servers, contract.ServerTypeAgent))
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
