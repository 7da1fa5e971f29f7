package telemetry_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gymlens/gymlens/internal/testenv"
	"github.com/gymlens/gymlens/telemetry"
)

func clearEnv(t *testing.T) {
	t.Helper()
	testenv.ClearTelemetry(t)
}

func TestConfigFromYAML(t *testing.T) {
	cfg, err := telemetry.ConfigFromYAML([]byte(`
arithmetic:
  resources_servers:
    arithmetic: {domain: math}
telemetry:
  enabled: yes
  span_groups: [default, Verify]
  exporter: otlp
  otlp_endpoint: http://127.0.0.1:4317
  service_name: my-gym
  export_sample_rate: 0.5
`))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Present {
		t.Fatal("block not seen")
	}
	want := map[string]string{
		"ENABLED": "yes", "SPAN_GROUPS": "default,Verify", "EXPORTER": "otlp",
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317", "OTEL_SERVICE_NAME": "my-gym",
		"EXPORT_SAMPLE_RATE": "0.5",
	}
	for k, v := range want {
		if cfg.Values[k] != v {
			t.Errorf("Values[%s] = %q, want %q", k, cfg.Values[k], v)
		}
	}
}

func TestConfigFromYAMLUnknownKeyIsAnError(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{"telemetry:\n  enabeld: true\n", `telemetry: line 2: telemetry.enabeld: unknown key (did you mean "enabled"?)`},
		{"telemetry:\n  enabled: true\n  Span_Grups: [default]\n", `telemetry: line 3: telemetry.span_grups: unknown key (did you mean "span_groups"?)`},
		{"telemetry:\n  otlp_endpont: http://x\n", `telemetry: line 2: telemetry.otlp_endpont: unknown key (did you mean "otlp_endpoint"?)`},
		{"telemetry:\n  future_knob: {a: 1}\n", `telemetry: line 2: telemetry.future_knob: unknown key`},
		{"telemetry:\n  ? [a, b]\n  : 1\n", `telemetry: line 2: telemetry keys must be plain values`},
	} {
		_, err := telemetry.ConfigFromYAML([]byte(tc.doc))
		if err == nil || err.Error() != tc.want {
			t.Errorf("%q: error %v, want %s", tc.doc, err, tc.want)
		}
	}
}

func TestConfigFromYAMLAbsentBlockIsDisabledDefaults(t *testing.T) {
	clearEnv(t)
	for _, doc := range []string{"", "servers: {}\n", "telemetry:\n", "telemetry: null\n"} {
		cfg, err := telemetry.ConfigFromYAML([]byte(doc))
		if err != nil {
			t.Fatalf("%q: %v", doc, err)
		}
		eff, err := cfg.Effective()
		if err != nil || eff.Enabled {
			t.Fatalf("%q: enabled=%v err=%v", doc, eff.Enabled, err)
		}
	}
}

func TestConfigFromYAMLBadValues(t *testing.T) {
	for doc, wantInErr := range map[string]string{
		"telemetry:\n  enabled: maybe\n":                       `telemetry.enabled="maybe"`,
		"telemetry:\n  export_rank: last\n":                    `telemetry.export_rank="last"`,
		"telemetry:\n  span_groups: default,bogus\n":           `unknown span group "bogus"`,
		"telemetry:\n  exporter: kafka\n":                      `unknown exporter "kafka"`,
		"telemetry: [1, 2]\n":                                  "must be a mapping",
		"telemetry:\n  enabled: {a: 1}\n":                      "plain value",
		"telemetry: [\n":                                       "parse YAML",
		"defaults: &d {enabled: true}\ntelemetry:\n  <<: *d\n": "merge keys",
	} {
		_, err := telemetry.ConfigFromYAML([]byte(doc))
		if err == nil || !strings.Contains(err.Error(), wantInErr) {
			t.Errorf("%q: error %v, want it to mention %s", doc, err, wantInErr)
		}
	}
}

func TestConfigureEnvWritesOnlyUnsetVariables(t *testing.T) {
	clearEnv(t)
	t.Setenv("NEMO_LENS_EXPORTER", "console") // fallback prefix set by the user
	t.Setenv("OTEL_SERVICE_NAME", "users-name")
	cfg, err := telemetry.ConfigFromYAML([]byte("telemetry:\n  enabled: true\n  exporter: otlp\n  span_groups: all\n  service_name: from-yaml\n"))
	if err != nil {
		t.Fatal(err)
	}
	runID, err := telemetry.ConfigureEnv(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^[0-9a-f]{12}$`).MatchString(runID) {
		t.Fatalf("run id %q is not 12 hex characters", runID)
	}
	for name, want := range map[string]string{
		"NEMO_GYM_OTEL_ENABLED":     "1",
		"NEMO_GYM_OTEL_SPAN_GROUPS": "all",
		"NEMO_GYM_OTEL_RUN_ID":      runID,
		"NEMO_GYM_OTEL_EXPORTER":    "", // the user's NEMO_LENS_EXPORTER wins
		"OTEL_SERVICE_NAME":         "users-name",
	} {
		if got := os.Getenv(name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
}

// What neither the block nor the environment sets goes to the servers as
// its default, as NeMo Gym's launcher writes it (switches as 1 or 0), so
// a server on another library's defaults reads what gymlens's read; the
// environment still wins, and the block's switches are written 1 or 0 too.
func TestConfigureEnvExportsDefaults(t *testing.T) {
	clearEnv(t)
	t.Setenv("NEMO_LENS_TRACES_ENABLED", "false") // the user's, under the fallback prefix
	cfg, err := telemetry.ConfigFromYAML([]byte("telemetry:\n  enabled: true\n  logs_enabled: yes\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := telemetry.ConfigureEnv(cfg); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"OTEL_SERVICE_NAME":                     "nemo-gym",
		"NEMO_GYM_OTEL_SPAN_GROUPS":             "default",
		"NEMO_GYM_OTEL_EXPORTER":                "otlp",
		"NEMO_GYM_OTEL_METRICS_ENABLED":         "1",
		"NEMO_GYM_OTEL_LOGS_ENABLED":            "1",
		"NEMO_GYM_OTEL_SERVICE_NAME_PER_SERVER": "1",
		"NEMO_GYM_OTEL_TRACES_ENABLED":          "", // NEMO_LENS_TRACES_ENABLED is set
		"NEMO_GYM_OTEL_EXPORT_STRATEGY":         "", // not a setting NeMo Gym's launcher hands on
	} {
		if got := os.Getenv(name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
}

func TestConfigureEnvEnabledDecision(t *testing.T) {
	t.Run("no block never overrides a user's fallback ENABLED", func(t *testing.T) {
		clearEnv(t)
		t.Setenv("NEMO_LENS_ENABLED", "1")
		cfg, _ := telemetry.ConfigFromYAML(nil)
		runID, err := telemetry.ConfigureEnv(cfg)
		if err != nil || runID == "" {
			t.Fatalf("runID=%q err=%v; want enabled by env", runID, err)
		}
		if v, set := os.LookupEnv("NEMO_GYM_OTEL_ENABLED"); set {
			t.Fatalf("wrote NEMO_GYM_OTEL_ENABLED=%q over the user's fallback", v)
		}
	})
	t.Run("explicit primary 0 turns everything off", func(t *testing.T) {
		clearEnv(t)
		t.Setenv("NEMO_GYM_OTEL_ENABLED", "0")
		t.Setenv("NEMO_LENS_ENABLED", "1")
		cfg, _ := telemetry.ConfigFromYAML([]byte("telemetry:\n  enabled: true\n  span_groups: all\n"))
		runID, err := telemetry.ConfigureEnv(cfg)
		if err != nil || runID != "" {
			t.Fatalf("runID=%q err=%v; want disabled", runID, err)
		}
		if _, set := os.LookupEnv("NEMO_GYM_OTEL_SPAN_GROUPS"); set {
			t.Fatal("wrote settings while disabled")
		}
	})
	t.Run("disabled block writes nothing", func(t *testing.T) {
		clearEnv(t)
		cfg, _ := telemetry.ConfigFromYAML([]byte("telemetry:\n  enabled: false\n  exporter: console\n"))
		if runID, err := telemetry.ConfigureEnv(cfg); err != nil || runID != "" {
			t.Fatalf("runID=%q err=%v", runID, err)
		}
		if _, set := os.LookupEnv("NEMO_GYM_OTEL_EXPORTER"); set {
			t.Fatal("wrote settings while disabled")
		}
	})
	t.Run("bad env value is an error and nothing is written", func(t *testing.T) {
		clearEnv(t)
		t.Setenv("NEMO_GYM_OTEL_EXPORT_SAMPLE_RATE", "2")
		cfg, _ := telemetry.ConfigFromYAML([]byte("telemetry:\n  enabled: true\n  span_groups: all\n"))
		_, err := telemetry.ConfigureEnv(cfg)
		if err == nil || !strings.Contains(err.Error(), "NEMO_GYM_OTEL_EXPORT_SAMPLE_RATE") || !strings.Contains(err.Error(), `"2"`) {
			t.Fatalf("err = %v", err)
		}
		if _, set := os.LookupEnv("NEMO_GYM_OTEL_ENABLED"); set {
			t.Fatal("wrote ENABLED despite the error")
		}
	})
}

func TestConfigureEnvRunIDRules(t *testing.T) {
	enabled, _ := telemetry.ConfigFromYAML([]byte("telemetry:\n  enabled: true\n"))
	withRunID, _ := telemetry.ConfigFromYAML([]byte("telemetry:\n  enabled: true\n  run_id: from-yaml\n"))
	cases := []struct {
		name string
		env  map[string]string
		cfg  telemetry.Config
		want string
	}{
		{"env RUN_ID wins", map[string]string{"NEMO_GYM_OTEL_RUN_ID": "env-run", "SLURM_JOB_ID": "42"}, withRunID, "env-run"},
		{"fallback RUN_ID", map[string]string{"NEMO_LENS_RUN_ID": "lens-run", "SLURM_JOB_ID": "42"}, enabled, "lens-run"},
		{"yaml run_id before slurm", map[string]string{"SLURM_JOB_ID": "42"}, withRunID, "from-yaml"},
		{"slurm job id", map[string]string{"SLURM_JOB_ID": "4242"}, enabled, "4242"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			got, err := telemetry.ConfigureEnv(c.cfg)
			if err != nil || got != c.want {
				t.Fatalf("run id %q err %v, want %q", got, err, c.want)
			}
			if _, _, ok := strings.Cut(os.Getenv("NEMO_GYM_OTEL_RUN_ID")+os.Getenv("NEMO_LENS_RUN_ID"), c.want); !ok {
				t.Fatalf("run id %q not visible to children", c.want)
			}
		})
	}
	t.Run("random ids differ", func(t *testing.T) {
		clearEnv(t)
		a, _ := telemetry.ConfigureEnv(enabled)
		os.Unsetenv("NEMO_GYM_OTEL_RUN_ID")
		b, _ := telemetry.ConfigureEnv(enabled)
		if a == b || len(a) != 12 {
			t.Fatalf("ids %q %q", a, b)
		}
	})
}

func TestResolveSpanGroups(t *testing.T) {
	cases := map[string][]string{
		"default":            {"http_client", "job", "rollout", "server"},
		"per_rollout":        {"agent", "http_client", "model_call", "rollout", "server", "verify"},
		" Default , SANDBOX": {"http_client", "job", "rollout", "sandbox", "server"},
		"":                   nil,
		"verify,verify":      {"verify"},
	}
	for spec, want := range cases {
		got, err := telemetry.ResolveSpanGroups(spec)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%q -> %v, %v; want %v", spec, got, err, want)
		}
	}
	all, err := telemetry.ResolveSpanGroups("all")
	if err != nil || len(all) != 15 {
		t.Fatalf("all -> %v (%d), %v; want 15 groups", all, len(all), err)
	}
	_, err = telemetry.ResolveSpanGroups("default,nope")
	if err == nil {
		t.Fatal("unknown group accepted")
	}
	for _, name := range []string{"nope", "default", "per_rollout", "all", "server", "optimizer", "sandbox"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error %q does not list %q", err, name)
		}
	}
	// Every preset carries both halves of propagation.
	for _, p := range []string{"default", "per_rollout", "all"} {
		g, _ := telemetry.ResolveSpanGroups(p)
		if !slices.Contains(g, "server") || !slices.Contains(g, "http_client") {
			t.Errorf("preset %s lacks server or http_client: %v", p, g)
		}
	}
}

func TestConfigFromYAMLFollowsAliases(t *testing.T) {
	cfg, err := telemetry.ConfigFromYAML([]byte("base: &b {enabled: true, span_groups: all}\ntelemetry: *b\n"))
	if err != nil || cfg.Values["ENABLED"] != "true" || cfg.Values["SPAN_GROUPS"] != "all" {
		t.Fatalf("aliased block: %+v, %v", cfg.Values, err)
	}
	cfg, err = telemetry.ConfigFromYAML([]byte("on: &on yes\ntelemetry:\n  enabled: *on\n"))
	if err != nil || cfg.Values["ENABLED"] != "yes" {
		t.Fatalf("aliased value: %+v, %v", cfg.Values, err)
	}
}

// Each signal's OTLP protocol has a telemetry-block key; the environment
// still wins over it, and a signal without one inherits otlp_protocol.
func TestYAMLSignalProtocols(t *testing.T) {
	clearEnv(t)
	cfg, err := telemetry.ConfigFromYAML([]byte("telemetry:\n  otlp_protocol: http/protobuf\n" +
		"  otlp_traces_protocol: grpc\n  otlp_metrics_protocol: HTTP/JSON\n"))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json")
	eff, err := cfg.Effective()
	if err != nil {
		t.Fatal(err)
	}
	if got := [3]string{eff.TracesProtocol, eff.MetricsProtocol, eff.LogsProtocol}; got != [3]string{"http/json", "http/json", "http/protobuf"} {
		t.Errorf("traces, metrics, logs protocol = %q", got)
	}
	if src, _ := eff.Source("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL"); src.Origin != "yaml telemetry.otlp_metrics_protocol" {
		t.Errorf("metrics protocol origin %q", src.Origin)
	}
	if _, err := telemetry.ConfigFromYAML([]byte("telemetry:\n  otlp_logs_protocol: thrift\n")); err == nil ||
		!strings.Contains(err.Error(), "telemetry.otlp_logs_protocol") {
		t.Errorf("bad otlp_logs_protocol: %v", err)
	}
}
