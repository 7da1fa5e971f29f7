package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/internal/runconfig"
	"github.com/gymlens/gymlens/internal/testenv"
	"github.com/gymlens/gymlens/lens"
	"github.com/gymlens/gymlens/orchestrator"
	"github.com/gymlens/gymlens/telemetry"
)

// initExports runs the real telemetry.Init in this process, with an
// in-memory span exporter and a manual metric reader in place of the
// configured exporters, and reports whether anything came out: a span
// started through the gate reaches the exporter, or a collection holds
// metrics. err is Init's.
func initExports(t *testing.T) (exported bool, err error) {
	t.Helper()
	telemetry.ResetForTesting()
	t.Cleanup(telemetry.ResetForTesting)
	spans := tracetest.NewInMemoryExporter()
	reader := sdkmetric.NewManualReader()
	h, err := telemetry.Init(telemetry.InitOptions{ServerType: contract.ServerTypeResources, SpanExporter: spans, MetricReader: reader})
	if err != nil {
		return false, err
	}
	_, span := lens.Start(context.Background(), telemetry.GroupServer, "probe")
	lens.End(span, nil)
	if err := h.ForceFlush(context.Background()); err != nil {
		t.Fatalf("flush: %v", err)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil && !strings.Contains(err.Error(), "reader is not registered") {
		t.Fatalf("collect: %v", err)
	}
	tracesOut := len(spans.GetSpans()) > 0
	metricsOut := len(rm.ScopeMetrics) > 0
	if tracesOut != metricsOut {
		t.Fatalf("traces exported %v but metrics %v", tracesOut, metricsOut)
	}
	if tracesOut != h.IsExporting() {
		t.Fatalf("exported %v but IsExporting %v", tracesOut, h.IsExporting())
	}
	return tracesOut, nil
}

// checkVerdict runs `gymlens telemetry check --json` in this process: exit 0
// and whether it would export, or exit 2 and its stderr.
func checkVerdict(t *testing.T) (code int, export bool, rep checkReport, stderr string) {
	t.Helper()
	code, out, errOut := runGym(t, "telemetry", "check", "--json")
	if code != 0 {
		return code, false, rep, errOut
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	return code, rep.Export, rep, errOut
}

// The check and telemetry.Init agree on every environment of the table:
// both export, both do not, or the check rejects the configuration (exit
// 2) and Init turns telemetry off with an error. The integers are read as
// Python's int() reads them, so " 1" is rank 1 in both.
func TestCheckAgreesWithInit(t *testing.T) {
	const bad = -1 // want: a configuration error
	cases := []struct {
		name string
		env  map[string]string
		want int // 1 exports, 0 does not, bad: configuration error
	}{
		{"disabled", map[string]string{"NEMO_GYM_OTEL_ENABLED": "0"}, 0},
		{"nothing placed", nil, 1},
		{"rank with spaces is the last rank", map[string]string{"RANK": " 1", "WORLD_SIZE": "2", "NEMO_GYM_OTEL_EXPORT_STRATEGY": "single_rank"}, 1},
		{"rank with spaces is not rank 0", map[string]string{"RANK": " 1", "WORLD_SIZE": "2", "NEMO_GYM_OTEL_EXPORT_STRATEGY": "single_rank", "NEMO_GYM_OTEL_EXPORT_RANK": "0"}, 0},
		{"spaces and a sign everywhere", map[string]string{"RANK": "+2 ", "WORLD_SIZE": "\t4", "NEMO_GYM_OTEL_EXPORT_STRATEGY": "single_rank", "NEMO_GYM_OTEL_EXPORT_RANK": " 2"}, 1},
		{"underscore between digits", map[string]string{"RANK": "1_0", "WORLD_SIZE": "16", "NEMO_GYM_OTEL_EXPORT_STRATEGY": "single_rank", "NEMO_GYM_OTEL_EXPORT_RANK": "10"}, 1},
		{"rank not an integer", map[string]string{"RANK": "x", "WORLD_SIZE": "2"}, bad},
		{"rank a float", map[string]string{"RANK": "1.0", "WORLD_SIZE": "2"}, bad},
		{"world size not an integer", map[string]string{"WORLD_SIZE": "two"}, bad},
		{"world size missing, rank 0", map[string]string{"RANK": "0"}, 1},
		{"world size missing, rank 1", map[string]string{"RANK": "1"}, bad},
		{"world size 0", map[string]string{"WORLD_SIZE": "0"}, bad},
		{"blank rank is unset", map[string]string{"RANK": "  ", "WORLD_SIZE": "3", "NEMO_GYM_OTEL_EXPORT_STRATEGY": "single_rank", "NEMO_GYM_OTEL_EXPORT_RANK": "0"}, 1},
		{"all_ranks", map[string]string{"RANK": "3", "WORLD_SIZE": "4", "NEMO_GYM_OTEL_EXPORT_STRATEGY": "all_ranks"}, 1},
		{"single_rank last by default", map[string]string{"RANK": "3", "WORLD_SIZE": "4", "NEMO_GYM_OTEL_EXPORT_STRATEGY": "single_rank"}, 1},
		{"single_rank not last", map[string]string{"RANK": "2", "WORLD_SIZE": "4", "NEMO_GYM_OTEL_EXPORT_STRATEGY": "single_rank"}, 0},
		// md5 points of ranks 0..4: 0.785, 0.8411, 0.9212, 0.0883, 0.19.
		{"sampled keeps rank 3", map[string]string{"RANK": "3", "WORLD_SIZE": "5", "NEMO_GYM_OTEL_EXPORT_STRATEGY": "sampled", "NEMO_GYM_OTEL_EXPORT_SAMPLE_RATE": "0.5"}, 1},
		{"sampled drops rank 1", map[string]string{"RANK": "1", "WORLD_SIZE": "5", "NEMO_GYM_OTEL_EXPORT_STRATEGY": "sampled", "NEMO_GYM_OTEL_EXPORT_SAMPLE_RATE": "0.5"}, 0},
		{"first_rank_per_node local rank 0", map[string]string{"RANK": "4", "WORLD_SIZE": "8", "LOCAL_RANK": "0", "NEMO_GYM_OTEL_EXPORT_STRATEGY": "first_rank_per_node"}, 1},
		{"first_rank_per_node local rank with spaces", map[string]string{"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": " 1 ", "NEMO_GYM_OTEL_EXPORT_STRATEGY": "first_rank_per_node"}, 0},
		{"first_rank_per_node local rank missing", map[string]string{"RANK": "5", "WORLD_SIZE": "8", "NEMO_GYM_OTEL_EXPORT_STRATEGY": "first_rank_per_node"}, 1},
		{"local rank not an integer", map[string]string{"LOCAL_RANK": "first"}, bad},
		{"bad export rank", map[string]string{"NEMO_GYM_OTEL_EXPORT_RANK": "last"}, bad},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			testenv.ClearTelemetry(t)
			t.Setenv("NEMO_GYM_OTEL_ENABLED", "1")
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			code, checkExports, rep, errOut := checkVerdict(t)
			initExported, initErr := initExports(t)
			switch c.want {
			case bad:
				if code != 2 || initErr == nil || initExported {
					t.Fatalf("want a configuration error from both: check exit %d (stderr %q), Init error %v, Init exported %v",
						code, errOut, initErr, initExported)
				}
				// The check names the variable; Init's error carries the same text.
				line := strings.TrimPrefix(strings.SplitN(strings.TrimSpace(errOut), "\n", 2)[0], "gymlens telemetry check: ")
				if !strings.Contains(initErr.Error(), line) {
					t.Errorf("check says %q, Init says %q", line, initErr)
				}
			default:
				if code != 0 || initErr != nil {
					t.Fatalf("check exit %d (stderr %q), Init error %v", code, errOut, initErr)
				}
				if checkExports != initExported || initExported != (c.want == 1) {
					t.Fatalf("check says export %v (%s), Init exported %v, want %v", checkExports, rep.Reason, initExported, c.want == 1)
				}
				if !checkExports && rep.Reason == "" {
					t.Error("the check gives no reason for not exporting")
				}
			}
		})
	}
}

// The rank the check shows for RANK=" 1" is the one Init puts in the
// resource.
func TestCheckRankWithSpacesIsInitsRank(t *testing.T) {
	testenv.ClearTelemetry(t)
	t.Setenv("NEMO_GYM_OTEL_ENABLED", "1")
	t.Setenv("RANK", " 1")
	t.Setenv("WORLD_SIZE", "2")
	_, _, rep, _ := checkVerdict(t)
	if rep.Rank != 1 || rep.RankOrigin != "env RANK" || rep.Resource[contract.AttrDLRank] != float64(1) {
		t.Errorf("check: rank %d from %q, resource dl.rank %v", rep.Rank, rep.RankOrigin, rep.Resource[contract.AttrDLRank])
	}
	if _, err := initExports(t); err != nil {
		t.Fatal(err)
	}
	got, _ := telemetry.Get().Resource().Set().Value(contract.AttrDLRank)
	if got.AsInt64() != 1 {
		t.Errorf("Init's resource has dl.rank %v", got.AsInt64())
	}
}

// `gymlens telemetry check --fleet` answers for a fleet started by gymlens run: the
// same settings, from the same places, as the orchestrator recorded in
// the run's config.yaml, and the same verdict for the orchestrator and
// every server as the telemetry files the run wrote.
func TestCheckFleetAgreesWithGymRun(t *testing.T) {
	for _, c := range []struct {
		name string
		env  map[string]string
		doc  string // fleet config; "" is the built-in fleet
	}{
		{"built-in fleet, defaults", nil, ""},
		{"turned off by the environment", map[string]string{"NEMO_GYM_OTEL_ENABLED": "0"}, ""},
		{"block with metrics off", nil, builtinFleetWith("telemetry:\n  enabled: true\n  metrics_enabled: false\n  span_groups: all\n")},
		{"block without enabled", nil, builtinFleetWith("telemetry:\n  span_groups: all\n")},
	} {
		t.Run(c.name, func(t *testing.T) {
			testenv.ClearTelemetry(t)
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			args := []string{}
			if c.doc != "" {
				args = append(args, "--config", writeYAML(t, c.doc))
			}
			fleetCfg, err := loadFleetConfig(configArg(args))
			if err != nil {
				t.Fatal(err)
			}
			// What the check says for each process.
			checks := map[string]checkReport{"orchestrator": checkJSON(t, append([]string{"--fleet"}, args...)...)}
			for _, s := range fleetCfg.Servers {
				checks[s.Name] = checkJSON(t, append([]string{"--fleet", "--server-name", s.Name}, args...)...)
			}
			// What gymlens run does: the real binary, the real fleet.
			runs := filepath.Join(t.TempDir(), "runs")
			res := runGymProcess(t, append([]string{"run", "--rollouts", "2", "--quiet", "--runs-dir", runs}, args...)...)
			if res.code != 0 {
				t.Fatalf("gymlens run: exit %d\n%s", res.code, res.stderr)
			}
			entries, err := os.ReadDir(runs)
			if err != nil || len(entries) != 1 {
				t.Fatalf("runs dir: %v, %v", entries, err)
			}
			runDir := filepath.Join(runs, entries[0].Name())

			// Settings and their origins, as the orchestrator ran with them.
			b, err := os.ReadFile(filepath.Join(runDir, contract.RunConfigFile))
			if err != nil {
				t.Fatal(err)
			}
			recorded, err := runconfig.Parse(b)
			if err != nil {
				t.Fatal(err)
			}
			orch := checks["orchestrator"]
			for _, s := range orch.Settings {
				key := strings.TrimPrefix(s.YAMLKey, "telemetry.")
				value, origin := recorded.Telemetry[key], recorded.TelemetrySources[key]
				switch s.Key {
				case lens.KeyRunID, lens.KeyFilePath:
					// Each run has its own id and directory.
					if (value == "") != (s.Raw == "") {
						t.Errorf("%s: gymlens run %q, check %q", s.Key, value, s.Raw)
					}
				default:
					if value != s.Raw {
						t.Errorf("%s: gymlens run ran with %q, check says %q", s.Key, value, s.Raw)
					}
				}
				// gymlens run's writes are env to the orchestrator; the check
				// names gymlens run instead.
				if strings.HasPrefix(s.Origin, "gymlens run: ") != (strings.HasPrefix(origin, "env ") && !isUserEnv(c.env, origin)) {
					t.Errorf("%s: gymlens run's origin %q, check's %q", s.Key, origin, s.Origin)
				}
			}
			// Whether each process exported: its telemetry file has lines.
			for name, rep := range checks {
				file := filepath.Join(runDir, contract.RunTelemetryDir, contract.TelemetryFileName(name))
				if name == "orchestrator" {
					file = filepath.Join(runDir, contract.RunTelemetryDir, contract.RunOrchestratorTelemetry)
				}
				data, _ := os.ReadFile(file)
				wrote := len(data) > 0
				if wrote != rep.Export {
					t.Errorf("%s: check says export %v (%s); gymlens run wrote %d bytes to %s", name, rep.Export, rep.Reason, len(data), file)
				}
				if rep.Export && !slices.Equal(rep.Signals, signalsIn(t, data)) {
					t.Errorf("%s: check lists signals %v, the file holds %v", name, rep.Signals, signalsIn(t, data))
				}
			}
		})
	}
}

// builtinFleetWith returns the built-in fleet's config with extra YAML
// appended.
func builtinFleetWith(extra string) string {
	return string(orchestrator.DefaultConfigYAML()) + "\n" + extra
}

func configArg(args []string) string {
	if i := slices.Index(args, "--config"); i >= 0 {
		return args[i+1]
	}
	return ""
}

// isUserEnv reports whether origin ("env NAME") is one of the variables
// the test set itself.
func isUserEnv(env map[string]string, origin string) bool {
	name, _ := strings.CutPrefix(origin, "env ")
	_, ok := env[name]
	return ok
}

// signalsIn lists the signals a telemetry file holds lines of, in
// Decision order.
func signalsIn(t *testing.T, data []byte) []string {
	t.Helper()
	seen := map[string]bool{}
	for line := range strings.SplitSeq(string(data), "\n") {
		var rec struct {
			Type string `json:"type"`
			Name string `json:"name"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil {
			// The span account written at shutdown is the traces
			// pipeline's own record, there with metrics off too.
			if rec.Name == contract.SDKSpanProcessed || rec.Name == contract.SDKSpanExported {
				rec.Type = "span"
			}
			seen[rec.Type] = true
		}
	}
	var out []string
	for _, s := range []struct{ signal, rec string }{
		{lens.SignalTraces, "span"}, {lens.SignalMetrics, "metric"}, {lens.SignalLogs, "log"},
	} {
		if seen[s.rec] {
			out = append(out, s.signal)
		}
	}
	return out
}
