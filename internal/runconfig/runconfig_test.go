package runconfig

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/lens"
)

// TestLayoutUnchanged checks that File renders byte for byte as the
// untyped map config.yaml was written from before File existed, before and
// after the fleet runs.
func TestLayoutUnchanged(t *testing.T) {
	dict := map[string]any{
		"head_server": map[string]any{"host": "127.0.0.1", "port": 11000},
		"arithmetic":  map[string]any{"resources_servers": map[string]any{"arithmetic": map[string]any{"domain": "math", "port": 11518}}},
	}
	tel := map[string]any{"enabled": "1", "exporter": "file", "otlp_endpoint": ""}
	sources := map[string]string{"enabled": "env NEMO_GYM_OTEL_ENABLED", "exporter": "default", "otlp_endpoint": "default"}

	before := File{RunID: "r1", Fleet: dict, Servers: []Server{{Name: "arithmetic", Type: contract.ServerTypeResources, Impl: "arithmetic"}}}
	before.SetTelemetry(lens.KeyEnabled, "1", sources["enabled"])
	before.SetTelemetry(lens.KeyExporter, "file", sources["exporter"])
	before.SetTelemetry(lens.KeyOTLPEndpoint, "", sources["otlp_endpoint"])
	type oldServer struct {
		Name    string `yaml:"name"`
		Type    string `yaml:"type"`
		Impl    string `yaml:"impl"`
		URL     string `yaml:"url,omitempty"`
		PID     int    `yaml:"pid,omitempty"`
		Command string `yaml:"command,omitempty"`
	}
	old := map[string]any{
		"run_id": "r1", "telemetry": tel, "telemetry_sources": sources, "fleet": dict,
		"servers": []oldServer{{Name: "arithmetic", Type: contract.ServerTypeResources, Impl: "arithmetic"}},
	}
	same(t, "before the fleet runs", before, old)

	after := before
	after.Servers = []Server{{Name: "arithmetic", Type: contract.ServerTypeResources, Impl: "arithmetic", URL: "http://127.0.0.1:11518", PID: 7, Command: "python app.py"}}
	after.HeadServerURL = "http://127.0.0.1:11000"
	old["servers"] = []oldServer{{Name: "arithmetic", Type: contract.ServerTypeResources, Impl: "arithmetic", URL: "http://127.0.0.1:11518", PID: 7, Command: "python app.py"}}
	old["head_server_url"] = "http://127.0.0.1:11000"
	same(t, "with the fleet running", after, old)

	// No dict, no servers, no telemetry settings.
	same(t, "empty", File{RunID: "r2"}, map[string]any{
		"run_id": "r2", "fleet": map[string]any(nil), "servers": []oldServer(nil),
		"telemetry": map[string]any{}, "telemetry_sources": map[string]string{},
	})
}

func same(t *testing.T, what string, f File, old map[string]any) {
	t.Helper()
	got, err := f.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	want, err := yaml.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s: File renders\n%s\nthe map rendered\n%s", what, got, want)
	}
}

// TestRoundTrip reads a config.yaml that gymlens run wrote (the report's
// fixture) and renders it back unchanged.
func TestRoundTrip(t *testing.T) {
	want, err := os.ReadFile(filepath.Join("..", "..", "report", "testdata", "run-small", contract.RunConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse(want)
	if err != nil {
		t.Fatal(err)
	}
	if f.RunID != "run-small" || len(f.Servers) != 3 || f.Servers[0].PID == 0 || f.HeadServerURL == "" || f.Fleet["head_server"] == nil {
		t.Errorf("parsed %+v", f)
	}
	if v, ok := f.TelemetryValue(lens.KeyMetricExportInterval); !ok || v != "200" {
		t.Errorf("metric interval %q, %v; want 200", v, ok)
	}
	got, err := f.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("rendered back differently:\n%s", got)
	}
}

// TestTelemetryKeys checks that the telemetry block is keyed by lens's
// settings table and that a hand-edited scalar reads as its text.
func TestTelemetryKeys(t *testing.T) {
	for _, s := range lens.Settings() {
		if s.YAML != "" && TelemetryKey(s.Key) != s.YAML {
			t.Errorf("TelemetryKey(%s) = %q, want the table's %q", s.Key, TelemetryKey(s.Key), s.YAML)
		}
	}
	f, err := Parse([]byte("run_id: x\ntelemetry:\n  enabled: true\n  metric_export_interval_ms: 250\n"))
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := f.TelemetryValue(lens.KeyEnabled); v != "true" {
		t.Errorf("enabled = %q, want true", v)
	}
	if v, _ := f.TelemetryValue(lens.KeyMetricExportInterval); v != "250" {
		t.Errorf("metric interval = %q, want 250", v)
	}
	if _, ok := f.TelemetryValue(lens.KeyExporter); ok {
		t.Error("an absent key reads as present")
	}
	if _, err := Parse([]byte("servers: {")); err == nil {
		t.Error("broken YAML parsed")
	}
}
