package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/internal/testenv"
	"github.com/gymlens/gymlens/lens"
)

func writeYAML(t *testing.T, doc string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gym.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// settingRow returns the fields of the settings-table row for key.
func settingRow(t *testing.T, out, key string) string {
	t.Helper()
	for line := range strings.SplitSeq(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == key {
			return line
		}
	}
	t.Fatalf("no row for %s in:\n%s", key, out)
	return ""
}

// checkJSON runs the check with --json and decodes its report.
func checkJSON(t *testing.T, args ...string) checkReport {
	t.Helper()
	code, out, errOut := runGym(t, append([]string{"telemetry", "check", "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	var rep checkReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	return rep
}

func origin(t *testing.T, rep checkReport, key string) (value, from string) {
	t.Helper()
	for _, s := range rep.Settings {
		if s.Key == key {
			return s.Value, s.Origin
		}
	}
	t.Fatalf("setting %s missing from the report", key)
	return "", ""
}

func TestCheckDefaults(t *testing.T) {
	testenv.ClearTelemetry(t)
	code, out, errOut := runGym(t, "telemetry", "check")
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	row := settingRow(t, out, "ENABLED")
	if f := strings.Fields(row); len(f) != 3 || f[1] != "false" || f[2] != "default" {
		t.Errorf("ENABLED row = %q, want false from default", row)
	}
	for _, want := range []string{
		"would not export: telemetry is disabled by default",
		"span groups:     http_client, job, rollout, server",
		"service name:    nemo-gym\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// Every setting appears, in lens.Settings() order.
	last := -1
	for _, s := range lens.Settings() {
		i := strings.Index(out, "\n"+s.Key+" ")
		if i <= last {
			t.Errorf("setting %s missing or out of order", s.Key)
		}
		last = i
	}
}

func TestCheckEnabledExports(t *testing.T) {
	testenv.ClearTelemetry(t)
	t.Setenv("NEMO_GYM_OTEL_ENABLED", "yes")
	code, out, _ := runGym(t, "telemetry", "check")
	if code != 0 || !strings.Contains(out, "verdict:         would export\n") {
		t.Errorf("exit %d, output:\n%s", code, out)
	}
	if row := settingRow(t, out, "ENABLED"); !strings.Contains(row, "true") || !strings.Contains(row, "env NEMO_GYM_OTEL_ENABLED") {
		t.Errorf("ENABLED row = %q", row)
	}
}

func TestCheckEnvOverridesYAML(t *testing.T) {
	testenv.ClearTelemetry(t)
	path := writeYAML(t, `
telemetry:
  enabled: false
  span_groups: [job, verify]
  exporter: console
`)
	t.Setenv("NEMO_GYM_OTEL_ENABLED", "1")
	t.Setenv("NEMO_GYM_OTEL_EXPORTER", "otlp,prometheus")

	code, out, errOut := runGym(t, "telemetry", "check", "--config", path)
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	if row := settingRow(t, out, "ENABLED"); !strings.Contains(row, "env NEMO_GYM_OTEL_ENABLED") {
		t.Errorf("ENABLED row = %q, want the env source", row)
	}
	if row := settingRow(t, out, "SPAN_GROUPS"); !strings.Contains(row, "yaml telemetry.span_groups") {
		t.Errorf("SPAN_GROUPS row = %q, want the yaml source", row)
	}
	for _, want := range []string{"span groups:     job, verify", "exporters:       otlp, prometheus", "would export"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	rep := checkJSON(t, "--config", path)
	if v, from := origin(t, rep, lens.KeyEnabled); v != "true" || from != "env NEMO_GYM_OTEL_ENABLED" {
		t.Errorf("ENABLED = %q from %q", v, from)
	}
	if v, from := origin(t, rep, lens.KeyExporter); v != "otlp,prometheus" || from != "env NEMO_GYM_OTEL_EXPORTER" {
		t.Errorf("EXPORTER = %q from %q", v, from)
	}
	if v, from := origin(t, rep, lens.KeySpanGroups); v != "job,verify" || from != "yaml telemetry.span_groups" {
		t.Errorf("SPAN_GROUPS = %q from %q", v, from)
	}
	if !rep.YAMLBlock {
		t.Errorf("yaml block %v", rep.YAMLBlock)
	}
}

func TestCheckYAMLDisables(t *testing.T) {
	testenv.ClearTelemetry(t)
	path := writeYAML(t, "telemetry:\n  enabled: off\n")
	rep := checkJSON(t, "--config", path)
	if rep.Export || rep.Reason != "telemetry is disabled by yaml telemetry.enabled=off" {
		t.Errorf("export %v, reason %q", rep.Export, rep.Reason)
	}
}

func TestCheckFallbackPrefix(t *testing.T) {
	testenv.ClearTelemetry(t)
	t.Setenv("NEMO_LENS_ENABLED", "true")
	rep := checkJSON(t)
	if v, from := origin(t, rep, lens.KeyEnabled); v != "true" || from != "env NEMO_LENS_ENABLED" {
		t.Errorf("fallback only: ENABLED = %q from %q", v, from)
	}
	if !rep.Export {
		t.Errorf("fallback only: would not export: %s", rep.Reason)
	}

	t.Setenv("NEMO_GYM_OTEL_ENABLED", "0")
	rep = checkJSON(t)
	if v, from := origin(t, rep, lens.KeyEnabled); v != "false" || from != "env NEMO_GYM_OTEL_ENABLED" {
		t.Errorf("both set: ENABLED = %q from %q, want the primary", v, from)
	}
	if rep.Export || !strings.Contains(rep.Reason, "disabled by env NEMO_GYM_OTEL_ENABLED=0") {
		t.Errorf("both set: export %v, reason %q", rep.Export, rep.Reason)
	}
}

func TestCheckBadBoolean(t *testing.T) {
	testenv.ClearTelemetry(t)
	t.Setenv("NEMO_GYM_OTEL_METRICS_ENABLED", "maybe")
	code, out, errOut := runGym(t, "telemetry", "check")
	if code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
	if out != "" {
		t.Errorf("unexpected stdout:\n%s", out)
	}
	if !strings.Contains(errOut, "NEMO_GYM_OTEL_METRICS_ENABLED") || !strings.Contains(errOut, `"maybe"`) {
		t.Errorf("stderr does not name the variable and value:\n%s", errOut)
	}
}

func TestCheckErrorsOnePerLine(t *testing.T) {
	testenv.ClearTelemetry(t)
	t.Setenv("NEMO_GYM_OTEL_ENABLED", "perhaps")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "carrier-pigeon")
	code, _, errOut := runGym(t, "telemetry", "check")
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	if code != 2 || len(lines) != 2 {
		t.Fatalf("exit %d, want 2 and two lines:\n%s", code, errOut)
	}
	if !strings.Contains(lines[0], `NEMO_GYM_OTEL_ENABLED="perhaps"`) ||
		!strings.Contains(lines[1], `OTEL_EXPORTER_OTLP_PROTOCOL="carrier-pigeon"`) {
		t.Errorf("unexpected lines:\n%s", errOut)
	}
}

func TestCheckUnknownSpanGroup(t *testing.T) {
	testenv.ClearTelemetry(t)
	t.Setenv("NEMO_GYM_OTEL_SPAN_GROUPS", "rollout,bogus")
	code, _, errOut := runGym(t, "telemetry", "check")
	if code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
	for _, want := range []string{"NEMO_GYM_OTEL_SPAN_GROUPS", `"bogus"`, "valid:", "http_client", "per_rollout", "sandbox"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
}

func TestCheckBadYAMLFile(t *testing.T) {
	testenv.ClearTelemetry(t)
	for name, doc := range map[string]string{
		"syntax":      "telemetry: [unclosed\n",
		"bad value":   "telemetry:\n  export_sample_rate: 2\n",
		"not a block": "telemetry: 3\n",
	} {
		path := writeYAML(t, doc)
		code, out, errOut := runGym(t, "telemetry", "check", "--config", path)
		if code != 2 || out != "" || !strings.Contains(errOut, path) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q", name, code, out, errOut)
		}
	}
	code, _, errOut := runGym(t, "telemetry", "check", "--config", filepath.Join(t.TempDir(), "missing.yaml"))
	if code != 2 || !strings.Contains(errOut, "missing.yaml") {
		t.Errorf("missing file: exit %d, stderr %q", code, errOut)
	}
}

func TestCheckYAMLWithoutBlock(t *testing.T) {
	testenv.ClearTelemetry(t)
	path := writeYAML(t, "arithmetic:\n  resources_servers:\n    arithmetic: {}\n")
	code, out, _ := runGym(t, "telemetry", "check", "--config", path)
	if code != 0 || !strings.Contains(out, "(no telemetry: block)") {
		t.Errorf("exit %d, output:\n%s", code, out)
	}
}

func TestCheckSingleRank(t *testing.T) {
	testenv.ClearTelemetry(t)
	t.Setenv("NEMO_GYM_OTEL_ENABLED", "1")
	t.Setenv("NEMO_GYM_OTEL_EXPORT_STRATEGY", "single_rank")
	code, out, errOut := runGym(t, "telemetry", "check", "--rank", "0", "--world-size", "4")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	want := "would not export: export strategy single_rank exports only from rank 3 (EXPORT_RANK=-1, the last rank); this is rank 0 of 4"
	if !strings.Contains(out, want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}

	// The last rank is the one that exports; RANK and WORLD_SIZE stand in
	// for the flags.
	t.Setenv("RANK", "3")
	t.Setenv("WORLD_SIZE", "4")
	rep := checkJSON(t)
	if !rep.Export || rep.Rank != 3 || rep.WorldSize != 4 {
		t.Errorf("rank 3 of 4: export %v (%s), rank %d, world %d", rep.Export, rep.Reason, rep.Rank, rep.WorldSize)
	}
}

func TestCheckFirstRankPerNode(t *testing.T) {
	testenv.ClearTelemetry(t)
	t.Setenv("NEMO_GYM_OTEL_ENABLED", "1")
	t.Setenv("NEMO_GYM_OTEL_EXPORT_STRATEGY", "first_rank_per_node")
	t.Setenv("LOCAL_RANK", "2")
	rep := checkJSON(t, "--rank", "2", "--world-size", "8")
	if rep.Export || rep.LocalRank != 2 || !strings.Contains(rep.Reason, "LOCAL_RANK 2") {
		t.Errorf("export %v, local rank %d, reason %q", rep.Export, rep.LocalRank, rep.Reason)
	}
}

func TestCheckExporterNone(t *testing.T) {
	testenv.ClearTelemetry(t)
	t.Setenv("NEMO_GYM_OTEL_ENABLED", "1")
	t.Setenv("NEMO_LENS_EXPORTER", "none")
	rep := checkJSON(t)
	if rep.Export || rep.Reason != "the exporter is none (env NEMO_LENS_EXPORTER)" {
		t.Errorf("export %v, reason %q", rep.Export, rep.Reason)
	}
}

func TestCheckNoSignals(t *testing.T) {
	testenv.ClearTelemetry(t)
	t.Setenv("NEMO_GYM_OTEL_ENABLED", "1")
	t.Setenv("NEMO_GYM_OTEL_TRACES_ENABLED", "0")
	t.Setenv("NEMO_GYM_OTEL_METRICS_ENABLED", "0")
	rep := checkJSON(t)
	if rep.Export || len(rep.Signals) != 0 || !strings.Contains(rep.Reason, "all disabled") {
		t.Errorf("export %v, signals %v, reason %q", rep.Export, rep.Signals, rep.Reason)
	}
}

func TestCheckServiceName(t *testing.T) {
	testenv.ClearTelemetry(t)
	t.Setenv("OTEL_SERVICE_NAME", "fleet")
	rep := checkJSON(t, "--server-name", "arithmetic", "--server-type", "resources_servers")
	if rep.ServiceName != "fleet/arithmetic" || rep.ServerType != "resources_servers" {
		t.Errorf("service name %q, server type %q", rep.ServiceName, rep.ServerType)
	}
	t.Setenv("NEMO_GYM_OTEL_SERVICE_NAME_PER_SERVER", "false")
	if rep := checkJSON(t, "--server-name", "arithmetic"); rep.ServiceName != "fleet" {
		t.Errorf("per-server off: service name %q", rep.ServiceName)
	}
}

func TestCheckSpanGroupsNone(t *testing.T) {
	testenv.ClearTelemetry(t)
	// An empty value counts as unset, so a spec naming no group is ",".
	t.Setenv("NEMO_GYM_OTEL_SPAN_GROUPS", ",")
	code, out, _ := runGym(t, "telemetry", "check")
	if code != 0 || !strings.Contains(out, "span groups:     (none)") {
		t.Errorf("exit %d, output:\n%s", code, out)
	}
	if rep := checkJSON(t); rep.SpanGroups == nil || len(rep.SpanGroups) != 0 {
		t.Errorf("span groups = %#v, want an empty list", rep.SpanGroups)
	}
}

func TestCheckJSON(t *testing.T) {
	testenv.ClearTelemetry(t)
	t.Setenv("NEMO_GYM_OTEL_ENABLED", "on")
	code, out, _ := runGym(t, "telemetry", "check", "--json")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var obj map[string]any
	dec := json.NewDecoder(strings.NewReader(out))
	if err := dec.Decode(&obj); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if dec.More() {
		t.Errorf("more than one JSON value:\n%s", out)
	}
	for _, key := range []string{"settings", "span_groups", "exporters", "service_name", "export", "export_strategy"} {
		if _, ok := obj[key]; !ok {
			t.Errorf("JSON lacks %q", key)
		}
	}
	if obj["export"] != true {
		t.Errorf("export = %v, want true", obj["export"])
	}
	if n := len(obj["settings"].([]any)); n != len(lens.Settings()) {
		t.Errorf("%d settings, want %d", n, len(lens.Settings()))
	}
}

func TestCheckBadFlags(t *testing.T) {
	testenv.ClearTelemetry(t)
	for _, args := range [][]string{
		{"--bogus"},
		{"--rank", "x"},
		{"extra"},
		{"--rank", "4", "--world-size", "4"},
		{"--world-size", "0"},
		{"--server-type", "toaster"},
	} {
		code, out, errOut := runGym(t, append([]string{"telemetry", "check"}, args...)...)
		if code != 2 || out != "" || errOut == "" {
			t.Errorf("check %v: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
}

func TestCheckFileExporterWithoutPath(t *testing.T) {
	testenv.ClearTelemetry(t)
	t.Setenv("NEMO_GYM_OTEL_ENABLED", "1")
	t.Setenv("NEMO_GYM_OTEL_EXPORTER", "file")
	code, out, _ := runGym(t, "telemetry", "check")
	if code != 0 || !strings.Contains(out, "would not export: set-up would fail") || !strings.Contains(out, "NEMO_GYM_OTEL_FILE_PATH") {
		t.Errorf("exit %d, output:\n%s", code, out)
	}
	t.Setenv("NEMO_GYM_OTEL_FILE_PATH", filepath.Join(t.TempDir(), "t.jsonl"))
	if _, out, _ := runGym(t, "telemetry", "check"); !strings.Contains(out, "verdict:         would export\n") {
		t.Errorf("with a path, output:\n%s", out)
	}
}

// The check shows each signal's OTLP protocol (its own variable over the
// general one) and the resource a server with these flags would report.
func TestCheckProtocolsAndResource(t *testing.T) {
	testenv.ClearTelemetry(t)
	t.Setenv("NEMO_GYM_OTEL_ENABLED", "1")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
	t.Setenv("OTEL_EXPORTER_OTLP_LOGS_PROTOCOL", "grpc")
	t.Setenv("NEMO_GYM_OTEL_RUN_ID", "r1")
	t.Setenv("SLURM_JOB_ID", "77")
	t.Setenv("CUDA_VISIBLE_DEVICES", "0,1")
	t.Setenv("DEPLOYMENT_ENV", "staging")
	args := []string{"--rank", "1", "--world-size", "2", "--server-name", "arithmetic", "--server-type", "resources_servers"}
	rep := checkJSON(t, args...)
	if want := (otlpProtocols{Traces: "http/json", Metrics: "http/json", Logs: "grpc"}); rep.OTLPProtocols != want {
		t.Errorf("protocols %+v, want %+v", rep.OTLPProtocols, want)
	}
	if v, from := origin(t, rep, lens.KeyOTLPTracesProtocol); v != "http/json" || from != "default" {
		t.Errorf("traces protocol row %q from %q, want the inherited http/json", v, from)
	}
	for k, want := range map[string]any{
		"service.name": "nemo-gym/arithmetic", "service.version": contract.Version,
		"service.instance.id": "r1-rank1", contract.AttrRunID: "r1",
		contract.AttrDLRank: float64(1), contract.AttrDLWorldSize: float64(2),
		contract.AttrSlurmJobID: "77", contract.AttrHostGPUCount: float64(2),
		contract.AttrDeploymentEnvironment: "staging", contract.AttrServerName: "arithmetic",
		contract.AttrServerType: "resources_servers", contract.AttrServiceGroup: "nemo-gym",
	} {
		if got := rep.Resource[k]; got != want {
			t.Errorf("resource %s = %#v, want %#v", k, got, want)
		}
	}
	if _, ok := rep.Resource["process.pid"]; ok {
		t.Error("resource lists the check's own process.pid")
	}
	code, out, _ := runGym(t, append([]string{"telemetry", "check"}, args...)...)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, re := range []string{`(?m)^otlp protocols:\s+traces http/json, metrics http/json, logs grpc$`,
		`(?m)^resource:$`, `(?m)^  service.instance.id\s+r1-rank1$`, `(?m)^  dl.rank\s+1$`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("text output lacks %s:\n%s", re, out)
		}
	}
}

// TestCheckShowsSampler: the check names the sampler the SDK will build
// from OTEL_TRACES_SAMPLER and its argument, the default when unset, and
// what the SDK does with a value it rejects.
func TestCheckShowsSampler(t *testing.T) {
	testenv.ClearTelemetry(t)
	if rep := checkJSON(t); rep.Sampler.Name != "parentbased_always_on" || rep.Sampler.FromEnv {
		t.Errorf("default sampler %+v", rep.Sampler)
	}
	t.Setenv("OTEL_TRACES_SAMPLER", "parentbased_traceidratio")
	t.Setenv("OTEL_TRACES_SAMPLER_ARG", "0.01")
	code, out, errOut := runGym(t, "telemetry", "check")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "sampler:         parentbased_traceidratio 0.01 (OTEL_TRACES_SAMPLER)") {
		t.Errorf("no sampler row for parentbased_traceidratio 0.01:\n%s", out)
	}
	rep := checkJSON(t)
	if rep.Sampler.Name != "parentbased_traceidratio" || rep.Sampler.Arg != "0.01" || !rep.Sampler.FromEnv ||
		!strings.HasPrefix(rep.Sampler.Description, "ParentBased{root:TraceIDRatioBased{0.01}") {
		t.Errorf("sampler %+v", rep.Sampler)
	}
	t.Setenv("OTEL_TRACES_SAMPLER_ARG", "1.5")
	if rep := checkJSON(t); rep.Sampler.Arg != "1" || !strings.Contains(rep.Sampler.Problem, "outside [0, 1]") {
		t.Errorf("out-of-range ratio: %+v", rep.Sampler)
	}
}

// The check says who aggregates the contract's histograms and counters:
// lens by default, the SDK (and why) when the configuration asks for what
// lens's aggregation does not do.
func TestCheckShowsAggregation(t *testing.T) {
	testenv.ClearTelemetry(t)
	code, out, errOut := runGym(t, "telemetry", "check")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "aggregation:     lens\n") {
		t.Errorf("no aggregation row saying lens:\n%s", out)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION", "base2_exponential_bucket_histogram")
	if rep := checkJSON(t); rep.MetricAggregation != "sdk (OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION=base2_exponential_bucket_histogram)" {
		t.Errorf("exponential histograms: aggregation %q", rep.MetricAggregation)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION", "")
	t.Setenv("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "delta")
	if rep := checkJSON(t); rep.MetricAggregation != "sdk (OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE=delta)" {
		t.Errorf("delta temporality: aggregation %q", rep.MetricAggregation)
	}
}
