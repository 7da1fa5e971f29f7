package telemetry_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gymlens/gymlens/internal/upstream"
	"github.com/gymlens/gymlens/telemetry"
)

// upstreamLaunchEnv is what nemo-gym 0.7.0's launcher does with a
// telemetry block before it starts a server (global_config.py:1595):
// configure_telemetry_env(telemetry_config_from_global_config(dict)), on
// an environment with no telemetry variable. It prints the variables that
// call wrote, as one JSON object per block of stdin (one block a line).
const upstreamLaunchEnv = `
import json, os, sys
from omegaconf import OmegaConf
from nemo_gym.telemetry.setup import configure_telemetry_env, telemetry_config_from_global_config
for k in list(os.environ):
    if k.startswith(("NEMO_GYM_OTEL_", "NEMO_LENS_", "OTEL_", "SLURM_")):
        del os.environ[k]
clean = dict(os.environ)
for line in sys.stdin:
    os.environ.clear()
    os.environ.update(clean)
    configure_telemetry_env(telemetry_config_from_global_config(OmegaConf.create({"telemetry": json.loads(line)})))
    print(json.dumps({k: v for k, v in os.environ.items() if k not in clean}))
`

// upstreamOnly are the variables nemo-gym 0.7.0's launcher writes that name
// settings gymlens does not have (aiohttp client instrumentation and memory
// profiling of the Python process).
var upstreamOnly = []string{
	"NEMO_GYM_OTEL_INSTRUMENT_AIOHTTP",
	"NEMO_GYM_OTEL_MEMORY_PROFILING_ENABLED",
	"NEMO_GYM_OTEL_MEMORY_PROFILING_INTERVAL_SECONDS",
}

// TestUpstreamLaunchEnvironment holds gymlens's orchestrator to what
// nemo-gym 0.7.0's launcher writes into a server's environment for the
// same telemetry block: every variable upstream writes (its settings
// gymlens has no twin for aside) is written by gymlens with the same
// value, so upstream's Python servers started by `gymlens run` read the
// settings they read under upstream's launcher (service name, span groups,
// exporter, signal switches), whatever nemo-lens's own defaults are.
func TestUpstreamLaunchEnvironment(t *testing.T) {
	blocks := []map[string]any{
		{"enabled": true},
		{"enabled": true, "span_groups": "default,verify", "exporter": "otlp,console", "logs_enabled": true,
			"service_name": "my-gym", "otlp_endpoint": "http://127.0.0.1:4317", "otlp_protocol": "http/protobuf"},
		{"enabled": true, "traces_enabled": false, "metrics_enabled": false, "service_name_per_server": false, "span_groups": "all"},
		{"enabled": true, "run_id": "fixed-run", "exporter": "console"},
		{"enabled": false, "exporter": "console"},
	}
	var stdin strings.Builder
	for _, b := range blocks {
		line, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		stdin.Write(append(line, '\n'))
	}
	out := upstream.Run(t, time.Minute, upstreamLaunchEnv, []byte(stdin.String()))
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(blocks) {
		t.Fatalf("upstream printed %d lines for %d blocks:\n%s", len(lines), len(blocks), out)
	}
	agree := 0
	for i, b := range blocks {
		var want map[string]string
		if err := json.Unmarshal([]byte(lines[i]), &want); err != nil {
			t.Fatalf("block %d: %v: %s", i, err, lines[i])
		}
		doc, _ := json.Marshal(map[string]any{"telemetry": b})
		cfg, err := telemetry.ConfigFromYAML(doc) // JSON is YAML
		if err != nil {
			t.Fatalf("block %d: %v", i, err)
		}
		vars, runID, err := telemetry.PlanEnv(cfg, func(string) (string, bool) { return "", false })
		if err != nil {
			t.Fatalf("block %d: %v", i, err)
		}
		same := true
		got := map[string]string{}
		for _, v := range vars {
			got[v.Name] = v.Value
		}
		for name, w := range want {
			if slices.Contains(upstreamOnly, name) {
				continue
			}
			g, ok := got[name]
			switch {
			case !ok:
				same = false
				t.Errorf("block %v: upstream writes %s=%s, gymlens nothing", b, name, w)
			case name == "NEMO_GYM_OTEL_RUN_ID" && b["run_id"] == nil:
				// Both mint one; upstream's are 12 hex digits too.
				if len(g) != len(w) || runID != g {
					same = false
					t.Errorf("block %v: run id %q (returned %q), upstream mints %q", b, g, runID, w)
				}
			case g != w:
				same = false
				t.Errorf("block %v: %s=%q, upstream writes %q", b, name, g, w)
			}
		}
		var extra []string
		for name := range got {
			if _, ok := want[name]; !ok {
				extra = append(extra, name)
			}
		}
		slices.Sort(extra)
		if len(extra) > 0 {
			t.Logf("block %v: gymlens also writes %v (settings upstream's launcher passes on only through the dict)", b, extra)
		}
		if same {
			agree++
		}
	}
	t.Logf("%d telemetry blocks, %d agree with nemo-gym 0.7.0's launcher environment", len(blocks), agree)
}
