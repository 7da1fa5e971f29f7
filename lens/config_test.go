package lens_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gymlens/gymlens/internal/testenv"
	"github.com/gymlens/gymlens/lens"
)

func TestLoadConfigDefaults(t *testing.T) {
	cfg, err := lens.LoadConfig(lens.LoadOptions{Lookup: testenv.Lookup(nil)})
	if err != nil {
		t.Fatalf("LoadConfig with an empty environment: %v", err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"Enabled", cfg.Enabled, false},
		{"SpanGroups", cfg.SpanGroups, "default"},
		{"Exporters", fmt.Sprint(cfg.Exporters), fmt.Sprint([]string{lens.ExporterOTLP})},
		{"TracesEnabled", cfg.TracesEnabled, true},
		{"MetricsEnabled", cfg.MetricsEnabled, true},
		{"LogsEnabled", cfg.LogsEnabled, false},
		{"ExportStrategy", cfg.ExportStrategy, lens.StrategyAllRanks},
		{"ExportRank", cfg.ExportRank, -1},
		{"ExportSampleRate", cfg.ExportSampleRate, 1.0},
		{"RunID", cfg.RunID, ""},
		{"ServiceNamePerServer", cfg.ServiceNamePerServer, true},
		{"FilePath", cfg.FilePath, ""},
		{"PrometheusAddr", cfg.PrometheusAddr, lens.DefaultPrometheusAddr},
		{"ServiceName", cfg.ServiceName, "nemo-gym"},
		{"OTLPEndpoint", cfg.OTLPEndpoint, ""},
		{"OTLPProtocol", cfg.OTLPProtocol, lens.ProtocolGRPC},
		{"MetricExportInterval", cfg.MetricExportInterval, 10 * time.Second},
		{"SpanScheduleDelay", cfg.SpanScheduleDelay, 5 * time.Second},
		{"SpanExportTimeout", cfg.SpanExportTimeout, 30 * time.Second},
		{"SpanQueueSize", cfg.SpanQueueSize, lens.DefaultSpanQueueSize},
		{"SpanBatchSize", cfg.SpanBatchSize, lens.DefaultSpanBatchSize},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	settings := lens.Settings()
	if len(cfg.Sources) != len(settings) {
		t.Fatalf("got %d sources, want one per setting (%d)", len(cfg.Sources), len(settings))
	}
	for i, s := range cfg.Sources {
		if s.Key != settings[i].Key {
			t.Errorf("Sources[%d].Key = %q, want %q (display order)", i, s.Key, settings[i].Key)
		}
		if s.Origin != "default" || s.Value != settings[i].Default {
			t.Errorf("Sources[%d] = %+v, want origin default and value %q", i, s, settings[i].Default)
		}
	}
}

func TestSettingsReturnsCopy(t *testing.T) {
	a := lens.Settings()
	a[0].Default = "mutated"
	if b := lens.Settings(); b[0].Default == "mutated" {
		t.Fatal("Settings exposes its internal table")
	}
}

func TestLoadConfigPrimaryBeatsFallback(t *testing.T) {
	cfg := mustLoad(t, map[string]string{
		"NEMO_GYM_OTEL_SPAN_GROUPS": "job",
		"NEMO_LENS_SPAN_GROUPS":     "step",
		"NEMO_LENS_RUN_ID":          "run-from-fallback",
	})
	if cfg.SpanGroups != "job" {
		t.Errorf("SpanGroups = %q, want the primary value job", cfg.SpanGroups)
	}
	if src, _ := cfg.Source(lens.KeySpanGroups); src.Origin != "env NEMO_GYM_OTEL_SPAN_GROUPS" {
		t.Errorf("SPAN_GROUPS origin = %q", src.Origin)
	}
	if cfg.RunID != "run-from-fallback" {
		t.Errorf("RunID = %q, want the fallback value", cfg.RunID)
	}
	if src, _ := cfg.Source(lens.KeyRunID); src.Origin != "env NEMO_LENS_RUN_ID" {
		t.Errorf("RUN_ID origin = %q, want env NEMO_LENS_RUN_ID", src.Origin)
	}
}

func TestLoadConfigFallbackWhenPrimaryEmpty(t *testing.T) {
	for _, primary := range []string{"", "   "} {
		cfg := mustLoad(t, map[string]string{
			"NEMO_GYM_OTEL_ENABLED": primary,
			"NEMO_LENS_ENABLED":     "yes",
		})
		if !cfg.Enabled {
			t.Errorf("primary %q: Enabled = false, want the fallback's true", primary)
		}
		if src, _ := cfg.Source(lens.KeyEnabled); src.Origin != "env NEMO_LENS_ENABLED" || src.Value != "yes" {
			t.Errorf("primary %q: ENABLED source = %+v", primary, src)
		}
	}
}

func TestLoadConfigCustomPrefixes(t *testing.T) {
	cfg, err := lens.LoadConfig(lens.LoadOptions{
		Prefix:   "APP_",
		Fallback: "OLD_",
		Lookup: testenv.Lookup(map[string]string{
			"APP_ENABLED":            "on",
			"OLD_RUN_ID":             "r1",
			"NEMO_GYM_OTEL_EXPORTER": "console", // default prefix is ignored now
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Enabled || cfg.RunID != "r1" || !cfg.HasExporter(lens.ExporterOTLP) || cfg.HasExporter(lens.ExporterConsole) {
		t.Errorf("custom prefixes not honoured: %+v", cfg)
	}
}

func TestLoadConfigReadsProcessEnvironment(t *testing.T) {
	t.Setenv("NEMO_GYM_OTEL_RUN_ID", "from-process-env")
	t.Setenv("OTEL_SERVICE_NAME", "svc-from-env")
	cfg, err := lens.LoadConfig(lens.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RunID != "from-process-env" || cfg.ServiceName != "svc-from-env" {
		t.Errorf("RunID=%q ServiceName=%q, want the process environment's values", cfg.RunID, cfg.ServiceName)
	}
	if src, _ := cfg.Source(lens.KeyServiceName); src.Origin != "env OTEL_SERVICE_NAME" {
		t.Errorf("OTEL_SERVICE_NAME origin = %q (standard variables take no prefix)", src.Origin)
	}
}

func TestLoadConfigStandardVariablesIgnorePrefixes(t *testing.T) {
	cfg := mustLoad(t, map[string]string{
		"NEMO_GYM_OTEL_OTEL_SERVICE_NAME": "wrong",
		"NEMO_LENS_OTEL_SERVICE_NAME":     "wrong",
	})
	if cfg.ServiceName != "nemo-gym" {
		t.Errorf("ServiceName = %q: a prefixed standard variable was read", cfg.ServiceName)
	}
}

func TestLoadConfigOverlayAndEnvPrecedence(t *testing.T) {
	opts := lens.LoadOptions{
		Lookup: testenv.Lookup(map[string]string{"NEMO_GYM_OTEL_EXPORTER": "console"}),
		Overlay: map[string]string{
			lens.KeyExporter:   "prometheus",
			lens.KeySpanGroups: "job,step",
			lens.KeyRunID:      "  ", // blank overlay values do not count
		},
		OverlayOrigin: func(key string) string { return "yaml telemetry." + strings.ToLower(key) },
		Defaults:      map[string]string{lens.KeyRunID: "default-run"},
	}
	cfg, err := lens.LoadConfig(opts)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]lens.Source{
		lens.KeyExporter:   {Key: lens.KeyExporter, Value: "console", Origin: "env NEMO_GYM_OTEL_EXPORTER"},
		lens.KeySpanGroups: {Key: lens.KeySpanGroups, Value: "job,step", Origin: "yaml telemetry.span_groups"},
		lens.KeyRunID:      {Key: lens.KeyRunID, Value: "default-run", Origin: "default"},
		lens.KeyEnabled:    {Key: lens.KeyEnabled, Value: "false", Origin: "default"},
	}
	for key, w := range want {
		got, ok := cfg.Source(key)
		if !ok || got != w {
			t.Errorf("Source(%s) = %+v, %v; want %+v", key, got, ok, w)
		}
	}
	if !cfg.HasExporter(lens.ExporterConsole) || cfg.HasExporter(lens.ExporterPrometheus) {
		t.Errorf("Exporters = %v: env must beat the overlay", cfg.Exporters)
	}
	if cfg.SpanGroups != "job,step" || cfg.RunID != "default-run" {
		t.Errorf("SpanGroups=%q RunID=%q", cfg.SpanGroups, cfg.RunID)
	}
	if _, ok := cfg.Source("NO_SUCH_KEY"); ok {
		t.Error("Source reports an unknown key")
	}

	// Without OverlayOrigin the origin is "overlay <key>".
	cfg, err = lens.LoadConfig(lens.LoadOptions{Lookup: testenv.Lookup(nil), Overlay: map[string]string{lens.KeyRunID: "r"}})
	if err != nil {
		t.Fatal(err)
	}
	if src, _ := cfg.Source(lens.KeyRunID); src.Origin != "overlay RUN_ID" {
		t.Errorf("default overlay origin = %q, want %q", src.Origin, "overlay RUN_ID")
	}
}

func TestParseBool(t *testing.T) {
	cases := map[string]bool{
		"1": true, "true": true, "TRUE": true, "True": true, "yes": true, "YeS": true, "on": true, " ON ": true, "\ttrue\n": true,
		"0": false, "false": false, "FALSE": false, "no": false, "No": false, "off": false, " Off ": false,
	}
	for in, want := range cases {
		got, err := lens.ParseBool(in)
		if err != nil || got != want {
			t.Errorf("ParseBool(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "2", "t", "f", "y", "n", "enabled", "truee", "-1", "o n"} {
		if _, err := lens.ParseBool(in); err == nil {
			t.Errorf("ParseBool(%q) accepted", in)
		}
	}
}

func TestLoadConfigBooleansThroughEnv(t *testing.T) {
	for in, want := range map[string]bool{"1": true, " Yes ": true, "ON": true, "tRuE": true, "0": false, "No": false, "OFF ": false, "False": false} {
		cfg := mustLoad(t, map[string]string{
			"NEMO_GYM_OTEL_ENABLED":         in,
			"NEMO_GYM_OTEL_TRACES_ENABLED":  in,
			"NEMO_GYM_OTEL_METRICS_ENABLED": in,
			"NEMO_GYM_OTEL_LOGS_ENABLED":    in,
		})
		if cfg.Enabled != want || cfg.TracesEnabled != want || cfg.MetricsEnabled != want || cfg.LogsEnabled != want {
			t.Errorf("%q: Enabled=%v Traces=%v Metrics=%v Logs=%v, want all %v",
				in, cfg.Enabled, cfg.TracesEnabled, cfg.MetricsEnabled, cfg.LogsEnabled, want)
		}
	}
}

func TestParseFloat(t *testing.T) {
	for in, want := range map[string]float64{"0": 0, "1": 1, " 0.25 ": 0.25, "1e-1": 0.1} {
		got, err := lens.ParseFloat(in)
		if err != nil || got != want {
			t.Errorf("ParseFloat(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "x", "NaN", "nan", "Inf", "-Inf", "+inf", "1,5"} {
		if _, err := lens.ParseFloat(in); err == nil {
			t.Errorf("ParseFloat(%q) accepted", in)
		}
	}
}

// TestLoadConfigRejectsBadValues feeds one bad value at a time and checks
// that the error is a *ConfigError naming the variable and the value.
func TestLoadConfigRejectsBadValues(t *testing.T) {
	cases := []struct {
		name, variable, value string
		extra                 map[string]string
		reason                string // substring of the reason, optional
	}{
		{"bad bool", "NEMO_GYM_OTEL_ENABLED", "maybe", nil, "not a boolean"},
		{"bad bool fallback", "NEMO_LENS_TRACES_ENABLED", "2", nil, "not a boolean"},
		{"bad bool logs", "NEMO_GYM_OTEL_LOGS_ENABLED", "enable", nil, ""},
		{"bad bool per server", "NEMO_GYM_OTEL_SERVICE_NAME_PER_SERVER", "y", nil, ""},
		{"rank not int", "NEMO_GYM_OTEL_EXPORT_RANK", "abc", nil, "not an integer"},
		{"rank float", "NEMO_GYM_OTEL_EXPORT_RANK", "1.5", nil, "not an integer"},
		{"rate above 1", "NEMO_GYM_OTEL_EXPORT_SAMPLE_RATE", "1.5", nil, "[0, 1]"},
		{"rate negative", "NEMO_GYM_OTEL_EXPORT_SAMPLE_RATE", "-0.1", nil, "[0, 1]"},
		{"rate NaN", "NEMO_GYM_OTEL_EXPORT_SAMPLE_RATE", "NaN", nil, "finite"},
		{"rate inf", "NEMO_GYM_OTEL_EXPORT_SAMPLE_RATE", "+Inf", nil, "finite"},
		{"rate text", "NEMO_GYM_OTEL_EXPORT_SAMPLE_RATE", "x", nil, "not a number"},
		{"interval zero", "OTEL_METRIC_EXPORT_INTERVAL", "0", nil, "positive"},
		{"interval negative", "OTEL_METRIC_EXPORT_INTERVAL", "-5", nil, "positive"},
		{"interval with unit", "OTEL_METRIC_EXPORT_INTERVAL", "1s", nil, "milliseconds"},
		{"interval overflowing a duration", "OTEL_METRIC_EXPORT_INTERVAL", "18446744073710", nil, "at most"},
		{"protocol unknown", "OTEL_EXPORTER_OTLP_PROTOCOL", "http/thrift", nil, "grpc, http/protobuf or http/json"},
		{"traces protocol unknown", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "zipkin", nil, "http/json"},
		{"metrics protocol unknown", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "json", nil, "http/json"},
		{"logs protocol unknown", "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL", "http", nil, "http/json"},
		{"schedule delay zero", "OTEL_BSP_SCHEDULE_DELAY", "0", nil, "positive"},
		{"schedule delay with unit", "OTEL_BSP_SCHEDULE_DELAY", "5s", nil, "milliseconds"},
		{"export timeout negative", "OTEL_BSP_EXPORT_TIMEOUT", "-1", nil, "positive"},
		{"queue size zero", "OTEL_BSP_MAX_QUEUE_SIZE", "0", nil, "between 1 and"},
		{"queue size huge", "OTEL_BSP_MAX_QUEUE_SIZE", "100000000", nil, "between 1 and"},
		{"queue size text", "OTEL_BSP_MAX_QUEUE_SIZE", "lots", nil, "not an integer"},
		{"batch zero", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "0", nil, "between 1 and"},
		{"unknown exporter", "NEMO_GYM_OTEL_EXPORTER", "otlp,jaeger", nil, "jaeger"},
		{"none with otlp", "NEMO_GYM_OTEL_EXPORTER", "none, otlp", nil, "none"},
		{"unknown strategy", "NEMO_GYM_OTEL_EXPORT_STRATEGY", "every_third", nil, "every_third"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			vars := map[string]string{c.variable: c.value}
			for k, v := range c.extra {
				vars[k] = v
			}
			_, err := lens.LoadConfig(lens.LoadOptions{Lookup: testenv.Lookup(vars)})
			if err == nil {
				t.Fatalf("%s=%q accepted", c.variable, c.value)
			}
			var ce *lens.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v is not a *ConfigError", err)
			}
			errs := configErrors(t, err)
			if len(errs) != 1 {
				t.Fatalf("got %d errors, want 1: %v", len(errs), err)
			}
			if ce.Name != c.variable || ce.Value != c.value {
				t.Errorf("ConfigError names %s=%q, want %s=%q", ce.Name, ce.Value, c.variable, c.value)
			}
			if !strings.Contains(ce.Reason, c.reason) {
				t.Errorf("reason %q does not mention %q", ce.Reason, c.reason)
			}
			msg := err.Error()
			if !strings.Contains(msg, c.variable) || !strings.Contains(msg, fmt.Sprintf("%q", c.value)) {
				t.Errorf("message %q does not name %s and %q", msg, c.variable, c.value)
			}
		})
	}
}

func TestLoadConfigOverlayErrorNamesOverlayOrigin(t *testing.T) {
	_, err := lens.LoadConfig(lens.LoadOptions{
		Lookup:        testenv.Lookup(nil),
		Overlay:       map[string]string{lens.KeyEnabled: "perhaps"},
		OverlayOrigin: func(key string) string { return "yaml telemetry." + strings.ToLower(key) },
	})
	errs := configErrors(t, err)
	if len(errs) != 1 || errs[0].Name != "yaml telemetry.enabled" || errs[0].Value != "perhaps" {
		t.Fatalf("got %v, want one error naming the overlay origin", err)
	}
}

func TestLoadConfigBadDefaultIsReported(t *testing.T) {
	_, err := lens.LoadConfig(lens.LoadOptions{
		Lookup:   testenv.Lookup(nil),
		Defaults: map[string]string{lens.KeyExportSampleRate: "2"},
	})
	errs := configErrors(t, err)
	if len(errs) != 1 || !strings.Contains(errs[0].Name, lens.KeyExportSampleRate) || errs[0].Value != "2" {
		t.Fatalf("got %v, want one error for the default EXPORT_SAMPLE_RATE", err)
	}
}

func TestLoadConfigReportsEveryBadValue(t *testing.T) {
	vars := map[string]string{
		"NEMO_GYM_OTEL_ENABLED":            "true", // fine
		"NEMO_GYM_OTEL_TRACES_ENABLED":     "sure",
		"NEMO_GYM_OTEL_EXPORT_RANK":        "abc",
		"NEMO_GYM_OTEL_EXPORT_SAMPLE_RATE": "1.5",
		"OTEL_METRIC_EXPORT_INTERVAL":      "1s",
		"OTEL_EXPORTER_OTLP_PROTOCOL":      "http/xml",
		"NEMO_LENS_EXPORTER":               "zipkin",
	}
	cfg, err := lens.LoadConfig(lens.LoadOptions{Lookup: testenv.Lookup(vars)})
	if err == nil {
		t.Fatal("no error for six bad values")
	}
	got := map[string]string{}
	for _, ce := range configErrors(t, err) {
		got[ce.Name] = ce.Value
	}
	for name, value := range vars {
		if name == "NEMO_GYM_OTEL_ENABLED" {
			if _, ok := got[name]; ok {
				t.Errorf("valid %s reported as bad", name)
			}
			continue
		}
		if got[name] != value {
			t.Errorf("bad %s=%q not reported (got %v)", name, value, got)
		}
	}
	if len(got) != len(vars)-1 {
		t.Errorf("got %d errors, want %d: %v", len(got), len(vars)-1, err)
	}
	if !cfg.Enabled {
		t.Error("Enabled must still be meaningful when other values are bad")
	}
}

func TestLoadConfigExporters(t *testing.T) {
	cases := map[string][]string{
		" Console , PROMETHEUS ": {"console", "prometheus"},
		"file,file,console":      {"file", "console"},
		"none":                   {"none"},
		",":                      {"none"}, // set but naming nothing
		"otlp,,console":          {"otlp", "console"},
	}
	for spec, want := range cases {
		cfg := mustLoad(t, map[string]string{"NEMO_GYM_OTEL_EXPORTER": spec, "NEMO_GYM_OTEL_FILE_PATH": "/tmp/x.jsonl"})
		if fmt.Sprint(cfg.Exporters) != fmt.Sprint(want) {
			t.Errorf("EXPORTER=%q -> %v, want %v", spec, cfg.Exporters, want)
		}
		for _, w := range want {
			if !cfg.HasExporter(w) {
				t.Errorf("EXPORTER=%q: HasExporter(%q) = false", spec, w)
			}
		}
	}
}

func TestLoadConfigParsesValues(t *testing.T) {
	cfg := mustLoad(t, map[string]string{
		"NEMO_GYM_OTEL_EXPORT_STRATEGY":    " Single_Rank ",
		"NEMO_GYM_OTEL_EXPORT_RANK":        "3",
		"NEMO_GYM_OTEL_EXPORT_SAMPLE_RATE": "0.25",
		"OTEL_METRIC_EXPORT_INTERVAL":      "1500",
		"OTEL_EXPORTER_OTLP_PROTOCOL":      "HTTP/Protobuf",
		"OTEL_EXPORTER_OTLP_ENDPOINT":      "http://collector:4318",
		"NEMO_GYM_OTEL_PROMETHEUS_ADDR":    "0.0.0.0:9000",
		"NEMO_GYM_OTEL_FILE_PATH":          " /tmp/run/telemetry.jsonl ",
		"OTEL_BSP_SCHEDULE_DELAY":          "250",
		"OTEL_BSP_EXPORT_TIMEOUT":          "4000",
		"OTEL_BSP_MAX_QUEUE_SIZE":          "100",
		"OTEL_BSP_MAX_EXPORT_BATCH_SIZE":   " 40 ",
	})
	if cfg.SpanScheduleDelay != 250*time.Millisecond || cfg.SpanExportTimeout != 4*time.Second ||
		cfg.SpanQueueSize != 100 || cfg.SpanBatchSize != 40 {
		t.Errorf("span batching: delay=%v timeout=%v queue=%d batch=%d",
			cfg.SpanScheduleDelay, cfg.SpanExportTimeout, cfg.SpanQueueSize, cfg.SpanBatchSize)
	}
	if cfg.ExportStrategy != lens.StrategySingleRank || cfg.ExportRank != 3 || cfg.ExportSampleRate != 0.25 {
		t.Errorf("strategy=%q rank=%d rate=%v", cfg.ExportStrategy, cfg.ExportRank, cfg.ExportSampleRate)
	}
	if cfg.MetricExportInterval != 1500*time.Millisecond {
		t.Errorf("interval = %v", cfg.MetricExportInterval)
	}
	if cfg.OTLPProtocol != lens.ProtocolHTTPProtobuf || cfg.OTLPEndpoint != "http://collector:4318" {
		t.Errorf("protocol=%q endpoint=%q", cfg.OTLPProtocol, cfg.OTLPEndpoint)
	}
	if cfg.PrometheusAddr != "0.0.0.0:9000" || cfg.FilePath != "/tmp/run/telemetry.jsonl" {
		t.Errorf("prometheus=%q file=%q", cfg.PrometheusAddr, cfg.FilePath)
	}
}

func TestLoadConfigValidatesSpanGroupsWhenGivenASet(t *testing.T) {
	groups := lens.NewGroupSet()
	if _, err := lens.LoadConfig(lens.LoadOptions{Lookup: testenv.Lookup(map[string]string{"NEMO_GYM_OTEL_SPAN_GROUPS": "job, STEP"}), Groups: groups}); err != nil {
		t.Errorf("valid groups rejected: %v", err)
	}
	_, err := lens.LoadConfig(lens.LoadOptions{Lookup: testenv.Lookup(map[string]string{"NEMO_GYM_OTEL_SPAN_GROUPS": "job,bogus"}), Groups: groups})
	errs := configErrors(t, err)
	if len(errs) != 1 || errs[0].Name != "NEMO_GYM_OTEL_SPAN_GROUPS" || errs[0].Value != "job,bogus" || !strings.Contains(errs[0].Reason, "bogus") {
		t.Fatalf("got %v, want one error naming SPAN_GROUPS and bogus", err)
	}
	// Without a set nothing is checked.
	if _, err := lens.LoadConfig(lens.LoadOptions{Lookup: testenv.Lookup(map[string]string{"NEMO_GYM_OTEL_SPAN_GROUPS": "bogus"})}); err != nil {
		t.Errorf("SPAN_GROUPS validated without a group set: %v", err)
	}
}

func TestConfigErrorMessage(t *testing.T) {
	e := &lens.ConfigError{Name: "NEMO_GYM_OTEL_ENABLED", Value: "maybe", Reason: "not a boolean"}
	if got, want := e.Error(), `NEMO_GYM_OTEL_ENABLED="maybe": not a boolean`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestDefaultPrometheusAddrIsLoopback(t *testing.T) {
	cfg := mustLoad(t, nil)
	host, port, err := net.SplitHostPort(cfg.PrometheusAddr)
	if err != nil {
		t.Fatal(err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() || port == "" {
		t.Errorf("default PROMETHEUS_ADDR %q is not a loopback address", cfg.PrometheusAddr)
	}
}

// An empty SPAN_GROUPS (or one of spaces) is unset, as nemo-lens's from_env
// reads it: the fallback prefix and then the default apply. A list naming
// no group ("," or " , ") is how to enable none.
func TestLoadConfigEmptySpanGroupsMeansDefault(t *testing.T) {
	for _, c := range []struct {
		name           string
		env            map[string]string
		overlay        map[string]string
		want, wantFrom string
	}{
		{"empty", map[string]string{"NEMO_GYM_OTEL_SPAN_GROUPS": ""}, nil, "default", "default"},
		{"spaces", map[string]string{"NEMO_GYM_OTEL_SPAN_GROUPS": "  \t"}, nil, "default", "default"},
		{"empty primary, fallback set", map[string]string{"NEMO_GYM_OTEL_SPAN_GROUPS": "", "NEMO_LENS_SPAN_GROUPS": "job"}, nil, "job", "env NEMO_LENS_SPAN_GROUPS"},
		{"empty overlay", nil, map[string]string{lens.KeySpanGroups: ""}, "default", "default"},
		{"empty env over overlay", map[string]string{"NEMO_GYM_OTEL_SPAN_GROUPS": " "}, map[string]string{lens.KeySpanGroups: "step"}, "step", "overlay SPAN_GROUPS"},
		{"comma", map[string]string{"NEMO_GYM_OTEL_SPAN_GROUPS": ","}, nil, ",", "env NEMO_GYM_OTEL_SPAN_GROUPS"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := lens.LoadConfig(lens.LoadOptions{Lookup: testenv.Lookup(c.env), Overlay: c.overlay, Groups: lens.NewGroupSet()})
			if err != nil {
				t.Fatal(err)
			}
			src, _ := cfg.Source(lens.KeySpanGroups)
			if cfg.SpanGroups != c.want || src.Origin != c.wantFrom {
				t.Errorf("SpanGroups = %q from %q, want %q from %q", cfg.SpanGroups, src.Origin, c.want, c.wantFrom)
			}
		})
	}
	// "default" resolves to the default preset's groups; "," to none.
	gs := lens.NewGroupSet()
	if m, _ := gs.Resolve("default"); gs.Names(m) == nil {
		t.Error("the default preset resolves to no group")
	}
	if m, err := gs.Resolve(","); err != nil || m != 0 {
		t.Errorf(`Resolve(",") = %b, %v; want no group`, m, err)
	}
}

// Any negative EXPORT_RANK is accepted and means the last rank, as in
// nemo-lens's single_rank strategy.
func TestExportRankBelowMinusOneIsLastRank(t *testing.T) {
	for _, v := range []string{"-1", "-2", "-100"} {
		cfg := mustLoad(t, map[string]string{"NEMO_GYM_OTEL_EXPORT_STRATEGY": "single_rank", "NEMO_GYM_OTEL_EXPORT_RANK": v})
		for rank, want := range []bool{false, false, false, true} {
			got, err := lens.ShouldExport(cfg, rank, 4, 0)
			if err != nil || got != want {
				t.Errorf("EXPORT_RANK=%s rank %d of 4: export %v, %v; want %v", v, rank, got, err, want)
			}
		}
	}
}

// Each signal's protocol is its own variable, else the general one, else
// grpc; values are matched without regard to case or surrounding spaces.
func TestOTLPProtocolPerSignal(t *testing.T) {
	for _, c := range []struct {
		name                    string
		env                     map[string]string
		general, tr, metr, logs string
	}{
		{"defaults", nil, "grpc", "grpc", "grpc", "grpc"},
		{"general json", map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": " HTTP/JSON "}, "http/json", "http/json", "http/json", "http/json"},
		{"per signal", map[string]string{
			"OTEL_EXPORTER_OTLP_PROTOCOL":         "http/protobuf",
			"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL":  "grpc",
			"OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "http/json",
			"OTEL_EXPORTER_OTLP_LOGS_PROTOCOL":    "",
		}, "http/protobuf", "grpc", "http/json", "http/protobuf"},
		{"signal only", map[string]string{"OTEL_EXPORTER_OTLP_LOGS_PROTOCOL": "http/json"}, "grpc", "grpc", "grpc", "http/json"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := mustLoad(t, c.env)
			got := [4]string{cfg.OTLPProtocol, cfg.TracesProtocol, cfg.MetricsProtocol, cfg.LogsProtocol}
			if want := [4]string{c.general, c.tr, c.metr, c.logs}; got != want {
				t.Errorf("general, traces, metrics, logs = %q, want %q", got, want)
			}
		})
	}
}

// TestEverySettingIsDocumented: the configuration page names every row of
// the settings table, by variable and by telemetry-block key, so a setting
// added to the table cannot be left out of the docs.
func TestEverySettingIsDocumented(t *testing.T) {
	page, err := os.ReadFile(filepath.Join("..", "docs", "observability", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range lens.Settings() {
		if !strings.Contains(string(page), s.Key) {
			t.Errorf("docs/observability/configuration.md does not name %s", s.Key)
		}
		if s.YAML != "" && !strings.Contains(string(page), s.YAML) {
			t.Errorf("docs/observability/configuration.md does not name the telemetry key %s (%s)", s.YAML, s.Key)
		}
	}
}
