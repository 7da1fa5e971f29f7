package orchestrator_test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gymlens/gymlens/orchestrator"
	"github.com/gymlens/gymlens/telemetry"
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

func TestParseConfigRejects(t *testing.T) {
	cases := []struct {
		name string
		doc  string
		want []string
	}{
		{
			name: "unknown server type",
			doc: `servers:
  - {name: calc, type: resource_server}
`,
			want: []string{`"calc"`, `"resource_server"`, telemetry.ServerTypeResources, telemetry.ServerTypeModel, telemetry.ServerTypeAgent},
		},
		{
			name: "duplicate name",
			doc: `servers:
  - {name: twin, type: resources_servers}
  - {name: twin, type: responses_api_models}
`,
			want: []string{`"twin"`, "duplicate"},
		},
		{
			name: "missing name",
			doc: `servers:
  - {type: resources_servers}
`,
			want: []string{"servers[0]", "name is required"},
		},
		{
			name: "blank name",
			doc: `servers:
  - {name: arithmetic, type: resources_servers}
  - {name: "  ", type: responses_api_models}
`,
			want: []string{"servers[1]", "name is required"},
		},
		{
			name: "reserved name",
			doc: `servers:
  - {name: orchestrator, type: resources_servers}
`,
			want: []string{`"orchestrator"`},
		},
		{
			name: "name with a slash",
			doc: `servers:
  - {name: a/b, type: resources_servers}
`,
			want: []string{`"a/b"`, "'/'"},
		},
		{
			name: "implementation of another type",
			doc: `servers:
  - {name: calc, type: resources_servers, impl: policy_model}
`,
			want: []string{`"calc"`, `"policy_model"`, telemetry.ServerTypeModel, telemetry.ServerTypeResources},
		},
		{
			name: "unknown implementation",
			doc: `servers:
  - {name: calc, type: resources_servers, impl: sympy}
`,
			want: []string{`"calc"`, `"sympy"`},
		},
		{
			name: "ambiguous model server",
			doc: `servers:
  - {name: arithmetic, type: resources_servers}
  - {name: small, type: responses_api_models}
  - {name: large, type: responses_api_models}
  - {name: agent, type: responses_api_agents}
`,
			want: []string{`"agent"`, "model_server", "2 " + telemetry.ServerTypeModel},
		},
		{
			name: "agent without any resources server",
			doc: `servers:
  - {name: policy, type: responses_api_models}
  - {name: agent, type: responses_api_agents}
`,
			want: []string{`"agent"`, "resources_server", "0 " + telemetry.ServerTypeResources},
		},
		{
			name: "reference to a missing server",
			doc: `servers:
  - {name: arithmetic, type: resources_servers}
  - {name: policy, type: responses_api_models}
  - {name: agent, type: responses_api_agents, model_server: gpt}
`,
			want: []string{`"agent"`, "model_server", `"gpt"`},
		},
		{
			name: "reference to a server of another type",
			doc: `servers:
  - {name: arithmetic, type: resources_servers}
  - {name: policy, type: responses_api_models}
  - {name: agent, type: responses_api_agents, resources_server: policy}
`,
			want: []string{`"agent"`, "resources_server", `"policy"`},
		},
		{
			name: "address without a host",
			doc: `servers:
  - {name: calc, type: resources_servers, addr: ":18080"}
`,
			want: []string{`"calc"`, ":18080", "host"},
		},
		{
			name: "address without a port",
			doc: `servers:
  - {name: calc, type: resources_servers, addr: "localhost"}
`,
			want: []string{`"calc"`, "localhost"},
		},
		{
			name: "bad telemetry value",
			doc: `telemetry: {enabled: maybe}
servers:
  - {name: calc, type: resources_servers}
`,
			want: []string{"telemetry.enabled", "maybe"},
		},
		{
			name: "telemetry block not a mapping",
			doc: `telemetry: [1, 2]
servers:
  - {name: calc, type: resources_servers}
`,
			want: []string{"telemetry"},
		},
		{
			name: "not YAML",
			doc:  "servers: [unclosed\n",
			want: []string{"YAML"},
		},
		{name: "empty document", doc: "", want: []string{"no servers"}},
		{name: "empty list", doc: "servers: []\n", want: []string{"no servers"}},
		{name: "telemetry only", doc: "telemetry: {enabled: true}\n", want: []string{"no servers"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := orchestrator.ParseConfig([]byte(tc.doc))
			wantErr(t, err, tc.want...)
			if len(cfg.Servers) != 0 {
				t.Errorf("a rejected config came back with servers: %+v", cfg.Servers)
			}
		})
	}
}

// Every problem is reported at once, not only the first.
func TestValidateReportsEveryProblem(t *testing.T) {
	cfg := orchestrator.Config{Servers: []orchestrator.ServerSpec{
		{Name: "a", Type: "nonsense"},
		{Name: "b", Type: telemetry.ServerTypeModel, Impl: "arithmetic"},
		{Type: telemetry.ServerTypeResources},
	}}
	wantErr(t, cfg.Validate(), `"a"`, `"b"`, "servers[2]")
}

func TestTakenPortRejectedBeforeSpawning(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	_, port, _ := net.SplitHostPort(addr)

	doc := "servers:\n  - {name: calc, type: resources_servers, addr: \"" + addr + "\"}\n"
	_, err = orchestrator.ParseConfig([]byte(doc))
	wantErr(t, err, `"calc"`, port)

	// Start validates too, and spawns nothing: the binary would leave a
	// mark if it ever ran.
	dir := t.TempDir()
	mark := filepath.Join(dir, "spawned")
	bin := writeScript(t, dir, "fake-gym", "touch '"+mark+"'\nexit 1\n")
	cfg := orchestrator.Config{Servers: []orchestrator.ServerSpec{
		{Name: "policy", Type: telemetry.ServerTypeModel},
		{Name: "calc", Type: telemetry.ServerTypeResources, Addr: addr},
	}}
	f, err := orchestrator.Start(ctxFor(t, 30*time.Second), cfg, orchestrator.Options{Binary: bin, RunDir: dir, Logger: testLogger(t)})
	if f != nil {
		t.Error("Start returned a fleet for an invalid config")
	}
	wantErr(t, err, `"calc"`, port)
	if _, err := os.Stat(mark); err == nil {
		t.Error("a server was spawned although the config was invalid")
	}
}

func TestFreeFixedPortAccepted(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	doc := "servers:\n  - {name: calc, type: resources_servers, addr: \"" + addr + "\"}\n" +
		"  - {name: any, type: resources_servers, addr: \"127.0.0.1:0\"}\n"
	cfg, err := orchestrator.ParseConfig([]byte(doc))
	if err != nil {
		t.Fatalf("a free port was refused: %v", err)
	}
	if cfg.Servers[0].Addr != addr {
		t.Errorf("addr = %q, want %q", cfg.Servers[0].Addr, addr)
	}
}

func TestDefaultConfig(t *testing.T) {
	cfg := orchestrator.DefaultConfig()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("DefaultConfig does not validate: %v", err)
	}
	want := map[string]struct{ typ, impl string }{
		"arithmetic":   {telemetry.ServerTypeResources, "arithmetic"},
		"policy_model": {telemetry.ServerTypeModel, "policy_model"},
		"simple_agent": {telemetry.ServerTypeAgent, "simple_agent"},
	}
	if len(cfg.Servers) != len(want) {
		t.Fatalf("%d servers, want %d: %+v", len(cfg.Servers), len(want), cfg.Servers)
	}
	for _, s := range cfg.Servers {
		w, ok := want[s.Name]
		if !ok || s.Type != w.typ || s.Impl != w.impl {
			t.Errorf("server %+v, want type %q impl %q", s, w.typ, w.impl)
		}
	}
	agents := cfg.Agents()
	if len(agents) != 1 {
		t.Fatalf("Agents() = %+v, want one", agents)
	}
	if a := agents[0]; a.ModelServer != "policy_model" || a.ResourcesServer != "arithmetic" {
		t.Errorf("agent peers = model %q resources %q, want policy_model and arithmetic", a.ModelServer, a.ResourcesServer)
	}
	// Validating again changes nothing.
	again := cfg
	again.Servers = append([]orchestrator.ServerSpec(nil), cfg.Servers...)
	if err := again.Validate(); err != nil {
		t.Fatal(err)
	}
	for i := range cfg.Servers {
		if cfg.Servers[i].ModelServer != again.Servers[i].ModelServer || cfg.Servers[i].Impl != again.Servers[i].Impl {
			t.Errorf("second Validate changed %+v into %+v", cfg.Servers[i], again.Servers[i])
		}
	}
}

func TestParseConfigFillsInAndKeepsTelemetry(t *testing.T) {
	doc := `telemetry:
  enabled: true
  exporter: [file, prometheus]
servers:
  - name: calc
    type: resources_servers
  - name: small
    type: responses_api_models
    config: {seed: 7, latency_ms: 0}
  - name: large
    type: responses_api_models
  - name: runner
    type: responses_api_agents
    model_server: large
`
	cfg, err := orchestrator.ParseConfig([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Telemetry.Present {
		t.Error("telemetry block not seen")
	}
	if got := cfg.Telemetry.Values["EXPORTER"]; got != "file,prometheus" {
		t.Errorf("telemetry exporter = %q, want file,prometheus", got)
	}
	byName := map[string]orchestrator.ServerSpec{}
	for _, s := range cfg.Servers {
		byName[s.Name] = s
	}
	if r := byName["runner"]; r.ModelServer != "large" || r.ResourcesServer != "calc" || r.Impl != "simple_agent" {
		t.Errorf("runner = %+v, want model large, resources calc (filled in), impl simple_agent", r)
	}
	if s := byName["small"]; s.Impl != "policy_model" || s.Config["seed"] != 7 {
		t.Errorf("small = %+v", s)
	}
}

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	if _, err := orchestrator.LoadConfig(filepath.Join(dir, "missing.yaml")); err == nil {
		t.Error("missing file accepted")
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("servers:\n  - {name: x, type: nope}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := orchestrator.LoadConfig(bad)
	wantErr(t, err, bad, `"x"`, `"nope"`)

	good := filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(good, []byte("servers:\n  - {name: x, type: resources_servers}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := orchestrator.LoadConfig(good)
	if err != nil || len(cfg.Servers) != 1 || cfg.Servers[0].Impl != "arithmetic" {
		t.Errorf("LoadConfig(good) = %+v, %v", cfg, err)
	}
}

func TestDuplicateFixedAddressRejected(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // free again: only the duplicate makes the config bad
	doc := fmt.Sprintf(`
servers:
  - {name: a, type: resources_servers, addr: %q}
  - {name: m, type: responses_api_models}
  - {name: r2, type: resources_servers, addr: %q}
  - {name: r3, type: resources_servers, addr: "127.0.0.1:0"}
  - {name: r4, type: resources_servers, addr: "127.0.0.1:0"}
`, addr, addr)
	_, err = orchestrator.ParseConfig([]byte(doc))
	if err == nil || !strings.Contains(err.Error(), `also given to server "a"`) {
		t.Fatalf("err = %v; want the duplicate address named", err)
	}
	if strings.Contains(err.Error(), "r4") {
		t.Fatalf("two free-port addresses reported as duplicates: %v", err)
	}
}

func TestServerConfigCheckedBeforeSpawn(t *testing.T) {
	for doc, want := range map[string]string{
		"servers:\n  - {name: m, type: responses_api_models, config: {corect_probability: 0.5}}\n":                                                                    `unknown key "corect_probability"`,
		"servers:\n  - {name: m, type: responses_api_models, config: {upstream: {base_ur: x}}}\n":                                                                     `config.upstream: unknown key "base_ur"`,
		"servers:\n  - {name: m, type: responses_api_models, config: {correct_probability: 7}}\n":                                                                     "correct",
		"servers:\n  - {name: r, type: resources_servers, config: {tolerance: -1}}\n":                                                                                 "tolerance",
		"servers:\n  - {name: r, type: resources_servers, config: {tolerance: fast}}\n":                                                                               "config",
		"servers:\n  - {name: r, type: resources_servers, config: {work_us: -1}}\n":                                                                                   "work_us",
		"servers:\n  - {name: r, type: resources_servers}\n  - {name: m, type: responses_api_models}\n  - {name: a, type: responses_api_agents, config: {modl: x}}\n": `unknown key "modl"`,
	} {
		_, err := orchestrator.ParseConfig([]byte(doc))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err %v, want it to mention %s", doc, err, want)
		}
	}
	ok := "servers:\n  - {name: r, type: resources_servers, config: {tolerance: 0.5, panic_on_task_prefix: x, work_us: 100}}\n" +
		"  - {name: m, type: responses_api_models, config: {seed: 3, correct_probability: 0.9, latency_ms: 1}}\n" +
		"  - {name: a, type: responses_api_agents, config: {model: gym-policy}}\n"
	if _, err := orchestrator.ParseConfig([]byte(ok)); err != nil {
		t.Fatalf("valid server configs rejected: %v", err)
	}
}

func TestMetricsAddrValidated(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for doc, want := range map[string]string{
		fmt.Sprintf("servers:\n  - {name: r, type: resources_servers, metrics_addr: %q}\n  - {name: m, type: responses_api_models}\n", busy.Addr()): "metrics_addr",
		"servers:\n  - {name: r, type: resources_servers, metrics_addr: \"nonsense\"}\n":                                                            "metrics_addr nonsense",
	} {
		if _, err := orchestrator.ParseConfig([]byte(doc)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err %v, want it to mention %s", doc, err, want)
		}
	}
	ok := "servers:\n  - {name: r, type: resources_servers, metrics_addr: \"127.0.0.1:0\"}\n  - {name: m, type: responses_api_models, metrics_addr: \"127.0.0.1:0\"}\n"
	if _, err := orchestrator.ParseConfig([]byte(ok)); err != nil {
		t.Fatalf("free-port metrics addresses rejected: %v", err)
	}
}
