package lens_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/gymlens/gymlens/internal/testenv"
	"github.com/gymlens/gymlens/lens"
)

// ParseInt reads what Python's int() reads from text, and nothing more.
func TestParseIntIsPythonsInt(t *testing.T) {
	for in, want := range map[string]int64{
		"0": 0, " 1": 1, "1 ": 1, "\t7\n": 7, "+2": 2, "-3": -3, " -1 ": -1,
		"010": 10, "1_000": 1000, "-1_2_3": -123,
	} {
		if got, err := lens.ParseInt(in); err != nil || got != want {
			t.Errorf("ParseInt(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", " ", "x", "1.0", "1e3", "0x10", "--1", "+-1", "- 1", "1 2", "_1", "1_", "1__0", "+_1", "9223372036854775808"} {
		if got, err := lens.ParseInt(in); err == nil {
			t.Errorf("ParseInt(%q) = %d, want an error", in, got)
		}
	}
}

// Every integer setting goes through ParseInt: spaces and underscores are
// fine, as for a Python process reading the same variable.
func TestIntegerSettingsUseParseInt(t *testing.T) {
	cfg := mustLoad(t, map[string]string{
		"NEMO_GYM_OTEL_EXPORT_RANK":      " 2 ",
		"OTEL_METRIC_EXPORT_INTERVAL":    "1_000",
		"OTEL_BSP_MAX_QUEUE_SIZE":        "+16",
		"OTEL_BSP_MAX_EXPORT_BATCH_SIZE": " 8",
	})
	if cfg.ExportRank != 2 || cfg.MetricExportInterval.Milliseconds() != 1000 || cfg.SpanQueueSize != 16 || cfg.SpanBatchSize != 8 {
		t.Errorf("export rank %d, interval %v, queue %d, batch %d", cfg.ExportRank, cfg.MetricExportInterval, cfg.SpanQueueSize, cfg.SpanBatchSize)
	}
}

func TestDecidePlacementFromEnvironmentOrCaller(t *testing.T) {
	cfg := mustLoad(t, enabledVars(map[string]string{"NEMO_GYM_OTEL_EXPORT_STRATEGY": "single_rank"}))
	env := testenv.Lookup(map[string]string{"RANK": " 1", "WORLD_SIZE": "2 ", "LOCAL_RANK": "1"})
	d, err := lens.Decide(cfg, lens.DecideOptions{Lookup: env, OwnSpanExporter: true})
	if err != nil || !d.Export || d.Rank != 1 || d.WorldSize != 2 || d.LocalRank != 1 ||
		d.RankOrigin != "env RANK" || d.WorldSizeOrigin != "env WORLD_SIZE" || d.LocalRankOrigin != "env LOCAL_RANK" {
		t.Fatalf("from the environment: %+v, %v", d, err)
	}
	zero, four := 0, 4
	d, err = lens.Decide(cfg, lens.DecideOptions{Lookup: env, Rank: &zero, WorldSize: &four, Origin: "flag", OwnSpanExporter: true})
	if err != nil || d.Export || d.Rank != 0 || d.WorldSize != 4 || d.RankOrigin != "flag" || d.LocalRankOrigin != "env LOCAL_RANK" {
		t.Fatalf("from the caller: %+v, %v", d, err)
	}
	if want := "export strategy single_rank exports only from rank 3 (EXPORT_RANK=-1, the last rank); this is rank 0 of 4"; d.Reason != want {
		t.Errorf("reason %q, want %q", d.Reason, want)
	}
	d, err = lens.Decide(cfg, lens.DecideOptions{Lookup: testenv.Lookup(nil), OwnSpanExporter: true})
	if err != nil || !d.Export || d.WorldSize != 1 || d.RankOrigin != lens.OriginDefault {
		t.Fatalf("nothing set: %+v, %v", d, err)
	}
}

func TestDecideBadPlacementIsAConfigError(t *testing.T) {
	cfg := mustLoad(t, enabledVars(nil))
	for name, vars := range map[string]map[string]string{
		"RANK":       {"RANK": "x"},
		"WORLD_SIZE": {"WORLD_SIZE": "1.5"},
		"LOCAL_RANK": {"LOCAL_RANK": "first"},
	} {
		_, err := lens.Decide(cfg, lens.DecideOptions{Lookup: testenv.Lookup(vars)})
		var ce *lens.ConfigError
		if !errors.As(err, &ce) || ce.Name != name {
			t.Errorf("%s: error %v, want a ConfigError naming it", name, err)
		}
	}
	for _, vars := range []map[string]string{{"WORLD_SIZE": "0"}, {"RANK": "2", "WORLD_SIZE": "2"}, {"RANK": "-1"}} {
		if d, err := lens.Decide(cfg, lens.DecideOptions{Lookup: testenv.Lookup(vars)}); err == nil || d.Export {
			t.Errorf("%v: %+v, %v; want an error", vars, d, err)
		}
	}
	// Disabled telemetry still reports the bad placement; Setup ignores it.
	off := mustLoad(t, map[string]string{"NEMO_GYM_OTEL_ENABLED": "0"})
	if _, err := lens.Decide(off, lens.DecideOptions{Lookup: testenv.Lookup(map[string]string{"RANK": "x"})}); err == nil {
		t.Error("disabled: a bad RANK is not reported")
	}
	isolateTelemetry(t)
	t.Setenv("RANK", "x")
	if h, err := lens.Setup(context.Background(), off, lens.Options{}); err != nil || h.IsExporting() {
		t.Errorf("disabled Setup with RANK=x: %v, %v", h.IsExporting(), err)
	}
	lens.ResetForTesting()
	if _, err := lens.Setup(context.Background(), cfg, lens.Options{SpanExporter: tracetest.NewInMemoryExporter()}); err == nil || !strings.Contains(err.Error(), `RANK="x"`) {
		t.Errorf("enabled Setup with RANK=x: %v", err)
	}
}

// Signals are what is enabled and has an exporter to go to; Setup exports
// exactly when Decide says so, with the signals it lists.
func TestDecideSignalsAreWhatSetupBuilds(t *testing.T) {
	cases := []struct {
		name            string
		vars            map[string]string
		ownSpans, ownMR bool
		want            []string
	}{
		{"none", nil, false, false, nil},
		{"none with own exporters", nil, true, true, []string{lens.SignalTraces, lens.SignalMetrics}},
		{"prometheus alone", map[string]string{"NEMO_GYM_OTEL_EXPORTER": "prometheus", "NEMO_GYM_OTEL_PROMETHEUS_ADDR": "127.0.0.1:0"}, false, false, []string{lens.SignalMetrics}},
		{"prometheus, metrics off", map[string]string{"NEMO_GYM_OTEL_EXPORTER": "prometheus", "NEMO_GYM_OTEL_METRICS_ENABLED": "0"}, false, false, nil},
		{"all off", map[string]string{"NEMO_GYM_OTEL_TRACES_ENABLED": "0", "NEMO_GYM_OTEL_METRICS_ENABLED": "0"}, true, true, nil},
		{"traces only", map[string]string{"NEMO_GYM_OTEL_METRICS_ENABLED": "0"}, true, true, []string{lens.SignalTraces}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := mustLoad(t, enabledVars(c.vars))
			d, err := lens.Decide(cfg, lens.DecideOptions{Lookup: testenv.Lookup(nil), OwnSpanExporter: c.ownSpans, OwnMetricReader: c.ownMR})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(d.Signals, c.want) && !(len(d.Signals) == 0 && len(c.want) == 0) {
				t.Fatalf("signals %v, want %v", d.Signals, c.want)
			}
			if d.Export != (len(c.want) > 0) || (!d.Export && d.Reason == "") {
				t.Fatalf("export %v, reason %q", d.Export, d.Reason)
			}
			opts := lens.Options{}
			if c.ownSpans {
				opts.SpanExporter = tracetest.NewInMemoryExporter()
			}
			if c.ownMR {
				opts.MetricReader = sdkmetric.NewManualReader()
			}
			h := mustSetup(t, cfg, opts)
			if h.IsExporting() != d.Export || h.TracesExporting() != d.HasSignal(lens.SignalTraces) ||
				h.MetricsExporting() != d.HasSignal(lens.SignalMetrics) {
				t.Errorf("Setup: exporting %v, traces %v, metrics %v; Decide: %+v",
					h.IsExporting(), h.TracesExporting(), h.MetricsExporting(), d)
			}
		})
	}
}

func TestDecideFileWithoutPathFailsSetup(t *testing.T) {
	cfg := mustLoad(t, enabledVars(map[string]string{"NEMO_GYM_OTEL_EXPORTER": "file"}))
	d, err := lens.Decide(cfg, lens.DecideOptions{Lookup: testenv.Lookup(nil)})
	if err != nil || d.Export || d.SetupErr == nil || !strings.HasPrefix(d.Reason, "set-up would fail") {
		t.Fatalf("%+v, %v", d, err)
	}
	isolateTelemetry(t)
	if _, err := lens.Setup(context.Background(), cfg, lens.Options{}); err == nil || err.Error() != d.SetupErr.Error() {
		t.Errorf("Setup error %v, want %v", err, d.SetupErr)
	}
}

// Config.Value shows parsed values: booleans as true/false, inherited
// protocols, milliseconds as numbers.
func TestConfigValueShowsParsedValues(t *testing.T) {
	cfg := mustLoad(t, map[string]string{
		"NEMO_GYM_OTEL_ENABLED":       "yes",
		"OTEL_EXPORTER_OTLP_PROTOCOL": "HTTP/JSON",
		"OTEL_METRIC_EXPORT_INTERVAL": " 5_000",
		"NEMO_GYM_OTEL_RUN_ID":        " r1 ",
		"NEMO_GYM_OTEL_EXPORTER":      "FILE, prometheus",
	})
	for key, want := range map[string]string{
		lens.KeyEnabled: "true", lens.KeyOTLPTracesProtocol: "http/json", lens.KeyMetricExportInterval: "5000",
		lens.KeyRunID: "r1", lens.KeyExporter: "file,prometheus", lens.KeyLogsEnabled: "false", "NO_SUCH_KEY": "",
	} {
		if got := cfg.Value(key); got != want {
			t.Errorf("Value(%s) = %q, want %q", key, got, want)
		}
	}
	for _, s := range lens.Settings() {
		if s.YAML == "" {
			t.Errorf("setting %s has no YAML key", s.Key)
		}
	}
}
