package lens_test

import (
	"errors"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gymlens/gymlens/internal/testenv"
	"github.com/gymlens/gymlens/lens"
)

// fuzzVarNames lists every variable LoadConfig reads (primary, fallback and
// standard names) plus a few near misses it must ignore. A fuzz line whose
// name is a number picks from this list, so the mutator can move a value
// from one variable to another with a single-byte change.
var fuzzVarNames = func() []string {
	var names []string
	for _, s := range lens.Settings() {
		if s.Standard {
			names = append(names, s.Key)
			continue
		}
		names = append(names, lens.PrimaryPrefix+s.Key, lens.FallbackPrefix+s.Key)
	}
	return append(names, "NEMO_GYM_OTEL_", "nemo_gym_otel_enabled", "NEMO_GYM_OTEL_ENABLED ", "OTEL_SDK_DISABLED")
}()

// parseFuzzEnv turns the fuzz input into an environment. Each line is
// NAME=VALUE. A NAME that is a decimal number n stands for fuzzVarNames[n
// modulo its length]. A VALUE that is a Go-quoted string is unquoted, so a
// seed can carry newlines and other control characters.
func parseFuzzEnv(spec string) map[string]string {
	env := map[string]string{}
	for line := range strings.SplitSeq(spec, "\n") {
		name, value, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		if n, err := strconv.ParseUint(name, 10, 16); err == nil {
			name = fuzzVarNames[int(n)%len(fuzzVarNames)]
		}
		if u, err := strconv.Unquote(value); err == nil {
			value = u
		}
		env[name] = value
	}
	return env
}

// refParseBool is the documented boolean grammar written independently of
// lens.ParseBool: 1/true/yes/on and 0/false/no/off, ASCII case ignored,
// surrounding white space ignored, nothing else.
func refParseBool(s string) (value, ok bool) {
	b := []byte(strings.TrimSpace(s))
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c - 'A' + 'a'
		}
	}
	switch string(b) {
	case "1", "true", "yes", "on":
		return true, true
	case "0", "false", "no", "off":
		return false, true
	}
	return false, false
}

// refSource says where a setting's value must come from: the primary
// variable, else the fallback, else the default. A blank value counts as
// unset.
func refSource(env map[string]string, s lens.Setting) lens.Source {
	names := []string{lens.PrimaryPrefix + s.Key, lens.FallbackPrefix + s.Key}
	if s.Standard {
		names = []string{s.Key}
	}
	for _, n := range names {
		if v, ok := env[n]; ok && strings.TrimSpace(v) != "" {
			return lens.Source{Key: s.Key, Value: v, Origin: "env " + n}
		}
	}
	return lens.Source{Key: s.Key, Value: s.Default, Origin: "default"}
}

// errParts flattens the joined error LoadConfig returns.
func errParts(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func FuzzLoadConfig(f *testing.F) {
	for _, seed := range []struct {
		spec   string
		groups bool
	}{
		{"", false},
		{"NEMO_GYM_OTEL_ENABLED=true", false},
		{"NEMO_GYM_OTEL_ENABLED=  YES \nNEMO_GYM_OTEL_SPAN_GROUPS=job, Step", true},
		{"NEMO_GYM_OTEL_ENABLED=maybe\nNEMO_LENS_ENABLED=1", false},
		{"NEMO_GYM_OTEL_ENABLED=\"\"\nNEMO_LENS_ENABLED=on", false},
		{"NEMO_GYM_OTEL_ENABLED=\"\\ttrue\\n\"", false},
		{"NEMO_GYM_OTEL_ENABLED=\"\\u00a0off\\u2028\"", false},
		{"NEMO_GYM_OTEL_ENABLED=TRUE\nNEMO_GYM_OTEL_TRACES_ENABLED=Off\nNEMO_GYM_OTEL_LOGS_ENABLED=No", false},
		{"NEMO_GYM_OTEL_ENABLED=yeſ", false},      // long s: folds to "yes" only under Unicode folding
		{"NEMO_GYM_OTEL_ENABLED=\u0130", false},   // dotted capital I
		{"NEMO_GYM_OTEL_ENABLED=t\x00rue", false}, // embedded NUL
		{"NEMO_GYM_OTEL_SPAN_GROUPS=", true},
		{"NEMO_GYM_OTEL_SPAN_GROUPS=   ", true},
		{"NEMO_GYM_OTEL_SPAN_GROUPS=all,,nope", true},
		{"NEMO_GYM_OTEL_SPAN_GROUPS=DEFAULT , Checkpoint", true},
		{"NEMO_GYM_OTEL_EXPORTER=otlp, console ,PROMETHEUS,file", false},
		{"NEMO_GYM_OTEL_EXPORTER=none,otlp", false},
		{"NEMO_GYM_OTEL_EXPORTER=,,,", false},
		{"NEMO_GYM_OTEL_EXPORTER=kafka", false},
		{"NEMO_GYM_OTEL_EXPORT_STRATEGY=Sampled\nNEMO_GYM_OTEL_EXPORT_SAMPLE_RATE=0.25", false},
		{"NEMO_GYM_OTEL_EXPORT_STRATEGY=round_robin", false},
		{"NEMO_GYM_OTEL_EXPORT_RANK=-2", false},
		{"NEMO_GYM_OTEL_EXPORT_RANK=99999999999999999999", false},
		{"NEMO_GYM_OTEL_EXPORT_RANK= 3 ", false},
		{"NEMO_GYM_OTEL_EXPORT_SAMPLE_RATE=NaN", false},
		{"NEMO_GYM_OTEL_EXPORT_SAMPLE_RATE=+Inf", false},
		{"NEMO_GYM_OTEL_EXPORT_SAMPLE_RATE=1e-400", false},
		{"NEMO_GYM_OTEL_EXPORT_SAMPLE_RATE=0x1p-2", false},
		{"NEMO_GYM_OTEL_EXPORT_SAMPLE_RATE=1.0000001", false},
		{"NEMO_GYM_OTEL_EXPORT_SAMPLE_RATE=1_0", false},
		{"OTEL_EXPORTER_OTLP_PROTOCOL=HTTP/Protobuf", false},
		{"OTEL_EXPORTER_OTLP_PROTOCOL=http/json", false},
		{"OTEL_METRIC_EXPORT_INTERVAL=0", false},
		{"OTEL_METRIC_EXPORT_INTERVAL=9223372036854775807", false},
		{"OTEL_METRIC_EXPORT_INTERVAL=-5", false},
		{"OTEL_METRIC_EXPORT_INTERVAL=18446744073710", false}, // wraps to 448µs
		{"OTEL_METRIC_EXPORT_INTERVAL=9223372036854", false},  // the largest that fits
		{"OTEL_METRIC_EXPORT_INTERVAL=0_1", false},            // Python int(): 1
		{"OTEL_SERVICE_NAME=   \nNEMO_GYM_OTEL_RUN_ID= abc ", false},
		{"NEMO_GYM_OTEL_PROMETHEUS_ADDR=:0\nNEMO_GYM_OTEL_FILE_PATH=/tmp/x.jsonl", false},
		{"0=on\n2=default\n4=all\n6=none", true},
		{"1=bogus\n3=bogus\n5=bogus\n7=bogus\n9=bogus\n11=bogus\n13=bogus\n15=bogus\n17=bogus\n19=bogus\n21=bogus\n23=bogus\n25=bogus\n26=bogus\n27=bogus\n28=bogus\n29=bogus", true},
		{"nemo_gym_otel_enabled=true\nNEMO_GYM_OTEL_=1", false},
	} {
		f.Add(seed.spec, seed.groups)
	}
	f.Fuzz(func(t *testing.T, spec string, groups bool) {
		env := parseFuzzEnv(spec)
		opts := lens.LoadOptions{Lookup: testenv.Lookup(env)}
		if groups {
			opts.Groups = lens.NewGroupSet()
		}
		cfg, err := lens.LoadConfig(opts)

		// The same values load to the same result.
		again, err2 := lens.LoadConfig(opts)
		if !reflect.DeepEqual(cfg, again) || errText(err) != errText(err2) {
			t.Fatalf("LoadConfig is not deterministic:\n%+v, %v\n%+v, %v", cfg, err, again, err2)
		}

		// Every value comes from where the precedence rules say.
		settings := lens.Settings()
		if len(cfg.Sources) != len(settings) {
			t.Fatalf("%d sources for %d settings", len(cfg.Sources), len(settings))
		}
		for i, s := range settings {
			if want := refSource(env, s); cfg.Sources[i] != want {
				t.Errorf("source of %s = %+v, want %+v", s.Key, cfg.Sources[i], want)
			}
		}

		// Every error is a *ConfigError naming a variable of the
		// environment and quoting its value: the defaults are all valid, so
		// nothing else can be wrong.
		parts := errParts(err)
		if len(parts) > len(settings) {
			t.Errorf("%d errors for %d settings", len(parts), len(settings))
		}
		badNames := map[string]bool{}
		for _, p := range parts {
			var ce *lens.ConfigError
			if !errors.As(p, &ce) {
				t.Fatalf("error part %v (%T) is not a *lens.ConfigError", p, p)
			}
			if ce.Name == "" || ce.Value == "" || ce.Reason == "" {
				t.Errorf("ConfigError with an empty field: %+v", ce)
			}
			if v, ok := env[ce.Name]; !ok || v != ce.Value {
				t.Errorf("ConfigError %+v does not quote a variable of the environment", ce)
			}
			if badNames[ce.Name] {
				t.Errorf("variable %s reported twice", ce.Name)
			}
			badNames[ce.Name] = true
		}

		// ParseBool accepts exactly the documented spellings.
		for _, v := range env {
			got, gotErr := lens.ParseBool(v)
			want, ok := refParseBool(v)
			if ok != (gotErr == nil) || got != want {
				t.Errorf("ParseBool(%q) = %v, %v; the documented grammar says %v, valid=%v", v, got, gotErr, want, ok)
			}
		}
		// ... and so do the boolean settings.
		for key, got := range map[string]bool{
			lens.KeyEnabled:              cfg.Enabled,
			lens.KeyTracesEnabled:        cfg.TracesEnabled,
			lens.KeyMetricsEnabled:       cfg.MetricsEnabled,
			lens.KeyLogsEnabled:          cfg.LogsEnabled,
			lens.KeyServiceNamePerServer: cfg.ServiceNamePerServer,
		} {
			src, _ := cfg.Source(key)
			name := strings.TrimPrefix(src.Origin, "env ")
			want, ok := refParseBool(src.Value)
			if ok && (got != want || badNames[name]) {
				t.Errorf("%s=%q: got %v (reported bad: %v), want %v", name, src.Value, got, badNames[name], want)
			}
			if !ok && !badNames[name] {
				t.Errorf("%s=%q is not a boolean but no error names it", name, src.Value)
			}
		}
		if err != nil {
			return
		}

		// The interval is the number of milliseconds given (digits may be
		// grouped with underscores, as Python's int() reads them: "0_1" is 1).
		src, _ := cfg.Source(lens.KeyMetricExportInterval)
		ms, _ := strconv.ParseInt(strings.ReplaceAll(strings.TrimSpace(src.Value), "_", ""), 10, 64)
		if cfg.MetricExportInterval != time.Duration(ms)*time.Millisecond {
			t.Errorf("%s=%q gave interval %v", src.Origin, src.Value, cfg.MetricExportInterval)
		}

		// A configuration without error is a usable one.
		knownProtocol := func(p string) bool {
			return p == lens.ProtocolGRPC || p == lens.ProtocolHTTPProtobuf || p == lens.ProtocolHTTPJSON
		}
		if !(cfg.ExportSampleRate >= 0 && cfg.ExportSampleRate <= 1) ||
			cfg.MetricExportInterval <= 0 || cfg.ServiceName == "" ||
			!knownProtocol(cfg.OTLPProtocol) || !knownProtocol(cfg.TracesProtocol) ||
			!knownProtocol(cfg.MetricsProtocol) || !knownProtocol(cfg.LogsProtocol) {
			t.Errorf("accepted configuration out of range: %+v", cfg)
		}
		if len(cfg.Exporters) == 0 || (len(cfg.Exporters) > 1 && slices.Contains(cfg.Exporters, lens.ExporterNone)) {
			t.Errorf("accepted exporters %q", cfg.Exporters)
		}
		for _, e := range cfg.Exporters {
			switch e {
			case lens.ExporterOTLP, lens.ExporterConsole, lens.ExporterPrometheus, lens.ExporterFile, lens.ExporterNone:
			default:
				t.Errorf("accepted unknown exporter %q", e)
			}
		}
		if groups {
			if _, err := opts.Groups.Resolve(cfg.SpanGroups); err != nil {
				t.Errorf("accepted SPAN_GROUPS %q that does not resolve: %v", cfg.SpanGroups, err)
			}
		}

		// Writing the effective values back as primary variables loads
		// the same configuration.
		back := map[string]string{}
		for _, s := range settings {
			src, _ := cfg.Source(s.Key)
			if s.Standard {
				back[s.Key] = src.Value
			} else {
				back[lens.PrimaryPrefix+s.Key] = src.Value
			}
		}
		opts.Lookup = testenv.Lookup(back)
		round, err := lens.LoadConfig(opts)
		if err != nil {
			t.Fatalf("reloading the effective values %v: %v", back, err)
		}
		round.Sources, cfg.Sources = nil, nil
		if !reflect.DeepEqual(round, cfg) {
			t.Errorf("reloaded configuration differs:\n got %+v\nwant %+v", round, cfg)
		}
	})
}
