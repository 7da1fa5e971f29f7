package orchestrator_test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/internal/testenv"
	"github.com/gymlens/gymlens/orchestrator"
)

// wantErr fails unless err is non-nil and contains every fragment.
func wantErr(t *testing.T, err error, fragments ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one containing %q", fragments)
	}
	for _, f := range fragments {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("error %q does not contain %q", err, f)
		}
	}
}

// mustParse parses a fleet document the test expects to be valid.
func mustParse(t *testing.T, doc string) orchestrator.Config {
	t.Helper()
	cfg, err := orchestrator.ParseConfig([]byte(doc))
	if err != nil {
		t.Fatalf("ParseConfig:\n%s\n%v", doc, err)
	}
	return cfg
}

// trio is a resources server, a model and an agent without references;
// tests append to it.
const trio = `calc:
  resources_servers:
    arithmetic: {}
policy:
  responses_api_models:
    policy_model: {}
`

func TestParseConfigRejects(t *testing.T) {
	cases := []struct {
		name string
		doc  string
		want []string
	}{
		{
			name: "old servers list",
			doc:  "servers:\n  - {name: calc, type: resources_servers}\n",
			want: []string{"gymlens's old `servers:` list shape", "NeMo Gym's config dict", "  arithmetic:\n    resources_servers:\n      arithmetic:"},
		},
		{
			name: "server type typo",
			doc:  "calc:\n  resource_server:\n    arithmetic: {}\n",
			want: []string{`calc: unknown server type "resource_server" (did you mean "resources_servers"?`},
		},
		{
			name: "reserved name",
			doc:  "orchestrator:\n  resources_servers:\n    arithmetic: {}\n",
			want: []string{`"orchestrator": an instance name must not be empty, contain '/' or spaces, nor be "orchestrator"`},
		},
		{
			name: "name with a space",
			doc:  "\"a b\":\n  resources_servers:\n    arithmetic: {}\n",
			want: []string{`"a b": an instance name`},
		},
		{
			name: "empty name",
			doc:  "'':\n  resources_servers:\n    arithmetic: {}\n",
			want: []string{`"": an instance name must not be empty`},
		},
		{
			name: "unknown implementation, near one",
			doc:  "calc:\n  resources_servers:\n    arithmetc: {}\n",
			want: []string{`calc.resources_servers.arithmetc: unknown implementation "arithmetc" of resources_servers (built-in: arithmetic, `, `did you mean "arithmetic"?`, "command:"},
		},
		{
			name: "implementation of another type",
			doc:  "calc:\n  resources_servers:\n    policy_model: {}\n",
			want: []string{`calc.resources_servers.policy_model: unknown implementation "policy_model" of resources_servers`},
		},
		{
			name: "two implementations",
			doc:  "calc:\n  resources_servers:\n    arithmetic: {}\n    string_match: {}\n",
			want: []string{"calc"},
		},
		{
			name: "ambiguous model server",
			doc: "calc:\n  resources_servers:\n    arithmetic: {}\nsmall:\n  responses_api_models:\n    policy_model: {}\n" +
				"large:\n  responses_api_models:\n    policy_model: {}\nagent:\n  responses_api_agents:\n    simple_agent: {}\n",
			want: []string{"agent.responses_api_agents.simple_agent.model_server: missing; the fleet has 2 responses_api_models instances (small, large)"},
		},
		{
			name: "agent without any resources server",
			doc:  "policy:\n  responses_api_models:\n    policy_model: {}\nagent:\n  responses_api_agents:\n    simple_agent: {}\n",
			want: []string{"agent.responses_api_agents.simple_agent.resources_server: missing; the fleet has 0 resources_servers instances"},
		},
		{
			name: "reference to a missing server",
			doc:  trio + "agent:\n  responses_api_agents:\n    simple_agent:\n      model_server: {type: responses_api_models, name: polcy}\n",
			want: []string{`instance "agent" field "model_server" references responses_api_models "polcy", which is not defined (did you mean "policy"?)`},
		},
		{
			name: "reference to a server of another type",
			doc:  trio + "agent:\n  responses_api_agents:\n    simple_agent:\n      resources_server: {type: resources_servers, name: policy}\n",
			want: []string{`instance "agent" field "resources_server" references resources_servers "policy"`},
		},
		{
			name: "reference that is not a reference",
			doc:  trio + "agent:\n  responses_api_agents:\n    simple_agent:\n      model_server: policy\n",
			want: []string{"agent.responses_api_agents.simple_agent.model_server: want a reference {type: responses_api_models, name: <instance>}, got policy"},
		},
		{
			name: "unknown key in a server block",
			doc:  "policy:\n  responses_api_models:\n    policy_model: {corect_probability: 0.5}\n",
			want: []string{"policy.responses_api_models.policy_model.corect_probability", `"correct_probability"`},
		},
		{
			name: "unknown nested key",
			doc:  "policy:\n  responses_api_models:\n    policy_model: {upstream: {base_ur: x}}\n",
			want: []string{"policy.responses_api_models.policy_model.upstream.base_ur"},
		},
		{
			name: "bad value in a server block",
			doc:  "calc:\n  resources_servers:\n    arithmetic: {tolerance: -1}\n",
			want: []string{"calc.resources_servers.arithmetic", "tolerance"},
		},
		{
			name: "command not a list",
			doc:  "env:\n  resources_servers:\n    mine: {command: ./env}\n",
			want: []string{"env.resources_servers.mine.command"},
		},
		{
			name: "bad telemetry value",
			doc:  "telemetry: {enabled: maybe}\n" + trio,
			want: []string{"telemetry.enabled", "maybe"},
		},
		{
			name: "telemetry block not a mapping",
			doc:  "telemetry: [1, 2]\n" + trio,
			want: []string{"telemetry"},
		},
		{
			name: "not YAML",
			doc:  "calc:\n  resources_servers: [unclosed\n",
			want: []string{"line"},
		},
		{
			name: "interpolation of a missing key",
			doc:  "policy:\n  responses_api_models:\n    policy_model: {seed: \"${sed}\"}\nseed: 3\n",
			want: []string{"policy.responses_api_models.policy_model.seed", `"sed"`},
		},
		{name: "empty document", doc: "", want: []string{"no server instances"}},
		{name: "telemetry only", doc: "telemetry: {enabled: true}\n", want: []string{"no server instances"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := orchestrator.ParseConfig([]byte(tc.doc))
			wantErr(t, err, tc.want...)
			if len(cfg.Servers) != 0 || cfg.Dict != nil {
				t.Errorf("a rejected config came back with servers: %+v", cfg.Servers)
			}
		})
	}
}

func TestTakenPortRejected(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	doc := fmt.Sprintf("calc:\n  resources_servers:\n    arithmetic: {port: %d}\n", port)
	_, err = orchestrator.ParseConfig([]byte(doc))
	wantErr(t, err, "calc.resources_servers.arithmetic: port 127.0.0.1:"+strconv.Itoa(port)+": not available")

	doc = fmt.Sprintf("head_server: {host: 127.0.0.1, port: %d}\n%s", port, trio)
	_, err = orchestrator.ParseConfig([]byte(doc))
	wantErr(t, err, "head_server: 127.0.0.1:"+strconv.Itoa(port)+": not available")
}

func TestDuplicateFixedPortRejected(t *testing.T) {
	port := testenv.FreePort(t) // free: only the duplicate makes the config bad
	doc := fmt.Sprintf("a:\n  resources_servers:\n    arithmetic: {port: %d}\nb:\n  resources_servers:\n    arithmetic: {host: 127.0.0.1, port: %d}\n", port, port)
	_, err := orchestrator.ParseConfig([]byte(doc))
	wantErr(t, err, fmt.Sprintf(`b.resources_servers.arithmetic: port 127.0.0.1:%d is also given to "a"`, port))
}

func TestFreeFixedPortAccepted(t *testing.T) {
	port := testenv.FreePort(t)
	cfg := mustParse(t, fmt.Sprintf("calc:\n  resources_servers:\n    arithmetic: {host: 127.0.0.1, port: %d}\nany:\n  resources_servers:\n    arithmetic: {}\n", port))
	if s := cfg.Servers[0]; s.Host != "127.0.0.1" || s.Port != port {
		t.Errorf("calc = %+v, want 127.0.0.1:%d", s, port)
	}
	if s := cfg.Servers[1]; s.Host != "" || s.Port != 0 {
		t.Errorf("any = %+v, want host and port left to the start", s)
	}
}

func TestDefaultConfig(t *testing.T) {
	cfg := orchestrator.DefaultConfig()
	want := []struct{ name, typ, impl string }{
		{"arithmetic", contract.ServerTypeResources, "arithmetic"},
		{"policy_model", contract.ServerTypeModel, "policy_model"},
		{"simple_agent", contract.ServerTypeAgent, "simple_agent"},
		{"simple_agent_environment_server", contract.ServerTypeEnvironment, "legacy_agent"},
	}
	if len(cfg.Servers) != len(want) {
		t.Fatalf("%d servers, want %d: %+v", len(cfg.Servers), len(want), cfg.Servers)
	}
	for i, w := range want {
		if s := cfg.Servers[i]; s.Name != w.name || s.Type != w.typ || s.Impl != w.impl || s.External() {
			t.Errorf("server %d = %+v, want %s %s %s", i, s, w.name, w.typ, w.impl)
		}
	}
	agents := cfg.Agents()
	if len(agents) != 1 {
		t.Fatalf("Agents() = %+v, want one", agents)
	}
	if a := agents[0]; a.ModelServer != "policy_model" || a.ResourcesServer != "arithmetic" {
		t.Errorf("agent peers = model %q resources %q, want policy_model and arithmetic", a.ModelServer, a.ResourcesServer)
	}
	if v, ok := cfg.Dict.Get([]string{"arithmetic", "resources_servers", "arithmetic", "domain"}); !ok || v != "math" {
		t.Errorf("arithmetic domain = %v (%v), want math", v, ok)
	}
	// The constant is a config file like any other.
	again, err := orchestrator.ParseConfig(orchestrator.DefaultConfigYAML())
	if err != nil || !reflect.DeepEqual(again.Servers, cfg.Servers) {
		t.Errorf("DefaultConfigYAML parses to %+v, %v; want %+v", again.Servers, err, cfg.Servers)
	}
	if cfg.HeadServerGiven() {
		t.Error("the built-in fleet fixes the head server")
	}
}

// An agent without references gets the only server of each type, in the
// dict the children receive.
func TestParseConfigFillsInAgentReferences(t *testing.T) {
	cfg := mustParse(t, "telemetry:\n  enabled: true\n  exporter: [file, prometheus]\n"+trio+
		"runner:\n  responses_api_agents:\n    simple_agent: {}\n")
	if !cfg.Telemetry.Present || cfg.Telemetry.Values["EXPORTER"] != "file,prometheus" {
		t.Errorf("telemetry = %+v", cfg.Telemetry)
	}
	r := cfg.Agents()[0]
	if r.Name != "runner" || r.ModelServer != "policy" || r.ResourcesServer != "calc" {
		t.Errorf("runner = %+v, want model policy and resources calc filled in", r)
	}
	var dict map[string]any
	if err := yaml.Unmarshal(cfg.Dict.YAML(), &dict); err != nil {
		t.Fatal(err)
	}
	block := dict["runner"].(map[string]any)["responses_api_agents"].(map[string]any)["simple_agent"].(map[string]any)
	if want := map[string]any{"type": "responses_api_models", "name": "policy"}; !reflect.DeepEqual(block["model_server"], want) {
		t.Errorf("dict runner.model_server = %v, want %v", block["model_server"], want)
	}
	if want := map[string]any{"type": "resources_servers", "name": "calc"}; !reflect.DeepEqual(block["resources_server"], want) {
		t.Errorf("dict runner.resources_server = %v, want %v", block["resources_server"], want)
	}
	// References are not part of the implementation's config.
	if len(r.Config) != 0 {
		t.Errorf("agent implementation config = %v, want empty", r.Config)
	}
}

func TestParseConfigInterpolationsAndSecrets(t *testing.T) {
	t.Setenv("GYMLENS_TEST_LATENCY", "2.5")
	cfg := mustParse(t, `policy_api_key: sk-very-secret
seed: 11
policy:
  responses_api_models:
    policy_model:
      seed: ${seed}
      latency_ms: ${oc.env:GYMLENS_TEST_LATENCY,0}
      description: the built-in policy
remote:
  responses_api_models:
    openai_model:
      command: [./remote-model]
      openai_api_key: ${policy_api_key}
      openai_base_url: http://127.0.0.1:9/v1
`)
	p := cfg.Servers[0]
	if p.Config["seed"] != 11 || p.Config["latency_ms"] != "2.5" {
		t.Errorf("policy config = %v, want seed 11 and latency_ms \"2.5\" resolved", p.Config)
	}
	if _, ok := p.Config["description"]; ok {
		t.Errorf("launcher key description reached the implementation config: %v", p.Config)
	}
	// The dict the children get keeps the interpolations.
	if y := string(cfg.Dict.YAML()); !strings.Contains(y, "${seed}") || !strings.Contains(y, "${oc.env:GYMLENS_TEST_LATENCY,0}") {
		t.Errorf("dict YAML lost its interpolations:\n%s", y)
	}
	red, err := yaml.Marshal(cfg.Redacted())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(red), "sk-very-secret") {
		t.Errorf("Redacted() holds the secret:\n%s", red)
	}
	if !strings.Contains(string(red), "http://127.0.0.1:9/v1") {
		t.Errorf("Redacted() lost a plain value:\n%s", red)
	}
}

// A server with command: runs its own program: its impl name is free and
// its block is not checked against a built-in implementation.
func TestExternalServer(t *testing.T) {
	cfg := mustParse(t, trio+`wallet:
  resources_servers:
    wallet_env:
      command: [./bin/wallet, --verbose]
      opening_balance: 10
      domain: games
agent:
  responses_api_agents:
    simple_agent:
      resources_server: {type: resources_servers, name: wallet}
`)
	var w orchestrator.ServerSpec
	for _, s := range cfg.Servers {
		if s.Name == "wallet" {
			w = s
		}
	}
	if !w.External() || !reflect.DeepEqual(w.Command, []string{"./bin/wallet", "--verbose"}) || w.Impl != "wallet_env" {
		t.Errorf("wallet = %+v", w)
	}
	if w.Config["opening_balance"] != 10 {
		t.Errorf("wallet config = %v", w.Config)
	}
	if a := cfg.Agents()[0]; a.ResourcesServer != "wallet" || a.ModelServer != "policy" {
		t.Errorf("agent = %+v, want resources wallet (given) and model policy (filled in)", a)
	}
}

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	if _, err := orchestrator.LoadConfig(filepath.Join(dir, "missing.yaml")); err == nil {
		t.Error("missing file accepted")
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("x:\n  resources_servers:\n    nope: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := orchestrator.LoadConfig(bad)
	wantErr(t, err, "fleet config "+bad+": ", `x.resources_servers.nope: unknown implementation "nope"`)

	good := filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(good, []byte("x:\n  resources_servers:\n    arithmetic: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := orchestrator.LoadConfig(good)
	if err != nil || len(cfg.Servers) != 1 || cfg.Servers[0].Impl != "arithmetic" || cfg.Dir != dir || cfg.Servers[0].Dir != dir {
		t.Errorf("LoadConfig(good) = %+v, %v; want one arithmetic server in %s", cfg, err, dir)
	}
}

func TestConfigSet(t *testing.T) {
	cfg := orchestrator.DefaultConfig()
	path, ok := cfg.ImplPath("policy_model", "seed")
	if !ok {
		t.Fatal("no policy_model")
	}
	if err := cfg.Set(path, 42); err != nil {
		t.Fatal(err)
	}
	if got := cfg.Servers[1].Config["seed"]; got != 42 {
		t.Errorf("seed = %v after Set, want 42", got)
	}
	if v, _ := cfg.Dict.Get(path); v != 42 {
		t.Errorf("dict seed = %v, want 42", v)
	}
	// A bad value is refused and the config stays as it was.
	wantErr(t, cfg.Set(path, "many"), "policy_model.responses_api_models.policy_model.seed")
	if v, _ := cfg.Dict.Get(path); v != 42 {
		t.Errorf("dict seed = %v after a refused Set, want 42", v)
	}
	// DefaultConfig hands out fresh copies.
	if _, ok := orchestrator.DefaultConfig().Servers[1].Config["seed"]; ok {
		t.Error("Set on one DefaultConfig changed the next")
	}
}

func TestMetricsAddrValidated(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for doc, want := range map[string]string{
		fmt.Sprintf("r:\n  resources_servers:\n    arithmetic: {metrics_addr: %q}\n", busy.Addr()): "r.resources_servers.arithmetic.metrics_addr: " + busy.Addr().String(),
		"r:\n  resources_servers:\n    arithmetic: {metrics_addr: nonsense}\n":                     "r.resources_servers.arithmetic.metrics_addr: nonsense",
		"r:\n  resources_servers:\n    arithmetic: {metrics_addr: 9}\n":                            "r.resources_servers.arithmetic.metrics_addr: want a host:port string",
	} {
		if _, err := orchestrator.ParseConfig([]byte(doc)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err %v, want it to mention %s", doc, err, want)
		}
	}
	cfg := mustParse(t, "r:\n  resources_servers:\n    arithmetic: {metrics_addr: \"127.0.0.1:0\"}\nm:\n  responses_api_models:\n    policy_model: {metrics_addr: \"127.0.0.1:0\"}\n")
	if cfg.Servers[0].MetricsAddr != "127.0.0.1:0" || len(cfg.Servers[0].Config) != 0 {
		t.Errorf("r = %+v, want metrics_addr kept out of the implementation config", cfg.Servers[0])
	}
}
