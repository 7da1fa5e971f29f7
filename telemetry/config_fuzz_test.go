package telemetry_test

import (
	"maps"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/gymlens/gymlens/internal/testenv"
	"github.com/gymlens/gymlens/lens"
	"github.com/gymlens/gymlens/telemetry"
)

// maxFuzzYAML bounds the documents the YAML fuzz targets parse: bigger
// ones only make each run slower.
const maxFuzzYAML = 64 << 10

// yamlBombs go into FuzzConfigFromYAML's corpus and into the bomb test.
// tail is what follows the anchors of testenv.AliasBomb; rejected says whether ConfigFromYAML
// must refuse the document (the last one uses the bomb outside the
// telemetry block, which ConfigFromYAML never decodes).
var yamlBombs = []struct {
	tail     string
	rejected bool
}{
	{"telemetry:\n  future_knob: *i\n", true},
	{"telemetry:\n  <<: {x: *i}\n", true},
	{"telemetry: *i\n", true},
	{"telemetry:\n  span_groups: *i\n", true},
	{"telemetry:\n  enabled: true\nservers:\n  - {name: x, type: resources_servers, config: {k: *i}}\n", false},
}

func FuzzConfigFromYAML(f *testing.F) {
	for _, seed := range []string{
		"",
		"telemetry:",
		"telemetry: ~",
		"telemetry: null",
		"telemetry: {}",
		"telemetry: []",
		"telemetry: 3",
		"telemetry: 'enabled: true'",
		"telemetry:\n  enabled: yes\n  span_groups: [default, Verify]\n  exporter: otlp\n  otlp_endpoint: http://127.0.0.1:4317\n  service_name: my-gym\n  export_sample_rate: 0.5\n  future_knob: {a: 1}\n",
		"telemetry:\n  enabled: maybe\n",
		"telemetry:\n  ENABLED: on\n  ' Span_Groups ': ''\n",
		"telemetry:\n  enabled:\n  exporter: []\n",
		"telemetry:\n  exporter: [otlp, [console]]\n",
		"telemetry:\n  exporter: {otlp: 1}\n",
		"telemetry:\n  enabled: true\n  enabled: false\n",
		"telemetry:\n  export_rank: -2\n",
		"telemetry:\n  export_sample_rate: .inf\n",
		"telemetry:\n  metric_export_interval_ms: 0x10\n",
		"telemetry:\n  otlp_protocol: HTTP/PROTOBUF\n",
		"telemetry:\n  span_groups: \"default,\\u0000\"\n",
		"telemetry:\n  run_id: !!binary aGVsbG8=\n",
		"telemetry:\n  ? [a, b]\n  : 1\n",
		"telemetry: &t\n  enabled: true\nother: *t\n",
		"telemetry:\n  enabled: &e true\n  traces_enabled: *e\n",
		"telemetry:\n  <<: {enabled: true}\n",
		"telemetry:\n  enabled: true\n---\ntelemetry:\n  enabled: false\n",
		"%YAML 1.2\n---\ntelemetry: {enabled: 1}\n",
		"\ufefftelemetry: {enabled: 1}\n",
		"telemetry: {enabled: \"\\xff\"}\n",
		"[telemetry]",
		"telemetry:\n\tenabled: true\n",
		"servers:\n  - {name: arithmetic, type: resources_servers}\ntelemetry:\n  service_name: '   '\n",
	} {
		f.Add([]byte(seed))
	}
	for _, bomb := range yamlBombs {
		f.Add([]byte(testenv.AliasBomb(bomb.tail)))
	}
	settingKeys := map[string]bool{}
	for _, s := range lens.Settings() {
		settingKeys[s.Key] = true
	}
	yamlKeys := map[string]bool{}
	for _, k := range telemetry.YAMLKeys() {
		yamlKeys[k] = true
	}
	noEnv := func(string) (string, bool) { return "", false }

	f.Fuzz(func(t *testing.T, doc []byte) {
		if len(doc) > maxFuzzYAML {
			t.Skip("document too large")
		}
		cfg, err := telemetry.ConfigFromYAML(doc)
		again, err2 := telemetry.ConfigFromYAML(doc)
		if !reflect.DeepEqual(cfg, again) || errText(err) != errText(err2) {
			t.Fatalf("ConfigFromYAML is not deterministic:\n%+v, %v\n%+v, %v", cfg, err, again, err2)
		}
		if err != nil {
			if !strings.HasPrefix(err.Error(), "telemetry: ") {
				t.Errorf("error %q does not say it is about telemetry", err)
			}
			if cfg.Present || cfg.Values != nil {
				t.Errorf("error %v came with a configuration %+v", err, cfg)
			}
			return
		}
		if !cfg.Present && len(cfg.Values) != 0 {
			t.Errorf("no telemetry block, yet values %v", cfg.Values)
		}
		for k := range cfg.Values {
			if !settingKeys[k] || telemetry.YAMLKey(k) == "" {
				t.Errorf("value under %q, which is no setting", k)
			}
		}
		// Every key of an accepted block is a known one.
		var top struct {
			Telemetry map[string]any `yaml:"telemetry"`
		}
		if yaml.Unmarshal(doc, &top) == nil {
			for k := range top.Telemetry {
				if !yamlKeys[strings.ToLower(strings.TrimSpace(k))] {
					t.Errorf("unknown key %q accepted", k)
				}
			}
		}
		// An accepted block is a valid configuration on its own.
		if _, err := lens.LoadConfig(lens.LoadOptions{Lookup: noEnv, Overlay: cfg.Values, Groups: telemetry.GroupSet()}); err != nil {
			t.Errorf("accepted block %v does not load: %v", cfg.Values, err)
		}

		// The values survive being written back as a YAML block.
		if len(cfg.Values) == 0 {
			return
		}
		block := map[string]string{}
		for k, v := range cfg.Values {
			block[telemetry.YAMLKey(k)] = v
		}
		out, err := yaml.Marshal(map[string]any{"telemetry": block})
		if err != nil {
			t.Fatalf("marshal %v: %v", block, err)
		}
		back, err := telemetry.ConfigFromYAML(out)
		if err != nil {
			t.Fatalf("re-reading\n%s: %v", out, err)
		}
		if !maps.Equal(back.Values, cfg.Values) {
			t.Errorf("values %q came back as %q through\n%s", cfg.Values, back.Values, out)
		}
	})
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestConfigFromYAMLAliasBombIsBounded checks that the expansion limit of
// the YAML decoder holds on every path ConfigFromYAML takes: each bomb is
// rejected (or, where the alias is never expanded, read without
// expanding it), allocating far less than the 9^9 strings it describes.
func TestConfigFromYAMLAliasBombIsBounded(t *testing.T) {
	for _, bomb := range yamlBombs {
		doc := []byte(testenv.AliasBomb(bomb.tail))
		var err error
		alloc := testenv.AllocatedBy(func() { _, err = telemetry.ConfigFromYAML(doc) })
		t.Logf("%q: %d KiB allocated, err %v", bomb.tail, alloc>>10, err)
		if alloc > 256<<20 {
			t.Errorf("%q: %d MiB allocated for a %d-byte document", bomb.tail, alloc>>20, len(doc))
		}
		if (err != nil) != bomb.rejected {
			t.Errorf("%q: err %v, want rejected=%v", bomb.tail, err, bomb.rejected)
		}
	}
}
