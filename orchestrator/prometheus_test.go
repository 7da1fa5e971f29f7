package orchestrator_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/gymlens/gymlens/contract"
	gymprom "github.com/gymlens/gymlens/deploy/prometheus"
	"github.com/gymlens/gymlens/orchestrator"
)

type targetGroup struct {
	Targets []string          `json:"targets"`
	Labels  map[string]string `json:"labels"`
}

type generatedConfig struct {
	Global struct {
		ScrapeInterval     string `yaml:"scrape_interval"`
		ScrapeTimeout      string `yaml:"scrape_timeout"`
		EvaluationInterval string `yaml:"evaluation_interval"`
	} `yaml:"global"`
	RuleFiles     []string `yaml:"rule_files"`
	ScrapeConfigs []struct {
		JobName       string `yaml:"job_name"`
		FileSDConfigs []struct {
			Files           []string `yaml:"files"`
			RefreshInterval string   `yaml:"refresh_interval"`
		} `yaml:"file_sd_configs"`
	} `yaml:"scrape_configs"`
}

func readTargets(t *testing.T, runDir string) []targetGroup {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(runDir, orchestrator.PrometheusDir, orchestrator.PrometheusTargetsFile))
	if err != nil {
		t.Fatal(err)
	}
	var groups []targetGroup
	if err := json.Unmarshal(b, &groups); err != nil {
		t.Fatalf("targets.json is not a file_sd list: %v\n%s", err, b)
	}
	return groups
}

func readPromConfig(t *testing.T, runDir string) generatedConfig {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(runDir, orchestrator.PrometheusDir, orchestrator.PrometheusConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	var cfg generatedConfig
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		t.Fatalf("prometheus.yml: %v\n%s", err, b)
	}
	return cfg
}

func fleetInfo() []orchestrator.ServerInfo {
	return []orchestrator.ServerInfo{
		{Spec: orchestrator.ServerSpec{Name: "arithmetic", Type: contract.ServerTypeResources}, MetricsAddr: "127.0.0.1:40001"},
		{Spec: orchestrator.ServerSpec{Name: "policy_model", Type: contract.ServerTypeModel}, MetricsAddr: "0.0.0.0:40002"},
		{Spec: orchestrator.ServerSpec{Name: "quiet", Type: contract.ServerTypeModel}},
		{Spec: orchestrator.ServerSpec{Name: "simple_agent", Type: contract.ServerTypeAgent}, MetricsAddr: "[::]:40003"},
	}
}

func TestWritePrometheusConfig(t *testing.T) {
	runDir := t.TempDir()
	if err := orchestrator.WritePrometheusConfig(runDir, "run42", "127.0.0.1:40000", fleetInfo(), 0); err != nil {
		t.Fatal(err)
	}
	want := []targetGroup{
		{[]string{"127.0.0.1:40000"}, map[string]string{"gym_server_name": "orchestrator", "gym_server_type": "orchestrator", "gym_run_id": "run42"}},
		{[]string{"127.0.0.1:40001"}, map[string]string{"gym_server_name": "arithmetic", "gym_server_type": "resources_servers", "gym_run_id": "run42"}},
		{[]string{"127.0.0.1:40002"}, map[string]string{"gym_server_name": "policy_model", "gym_server_type": "responses_api_models", "gym_run_id": "run42"}},
		{[]string{"[::1]:40003"}, map[string]string{"gym_server_name": "simple_agent", "gym_server_type": "responses_api_agents", "gym_run_id": "run42"}},
	}
	if got := readTargets(t, runDir); !reflect.DeepEqual(got, want) {
		t.Errorf("targets.json\n got %+v\nwant %+v", got, want)
	}

	cfg := readPromConfig(t, runDir)
	dir := filepath.Join(runDir, orchestrator.PrometheusDir)
	if g := cfg.Global; g.ScrapeInterval != "5s" || g.ScrapeTimeout != "5s" || g.EvaluationInterval != "5s" {
		t.Errorf("global = %+v, want 5s everywhere (the default interval)", g)
	}
	if len(cfg.ScrapeConfigs) != 1 || cfg.ScrapeConfigs[0].JobName != "gym" || len(cfg.ScrapeConfigs[0].FileSDConfigs) != 1 {
		t.Fatalf("scrape_configs = %+v, want one job gym with one file_sd config", cfg.ScrapeConfigs)
	}
	sd := cfg.ScrapeConfigs[0].FileSDConfigs[0]
	if want := []string{filepath.Join(dir, "targets.json")}; !reflect.DeepEqual(sd.Files, want) || sd.RefreshInterval == "" {
		t.Errorf("file_sd = %+v, want files %v and a refresh interval", sd, want)
	}
	if want := []string{filepath.Join(dir, gymprom.RulesFile)}; !reflect.DeepEqual(cfg.RuleFiles, want) {
		t.Errorf("rule_files = %v, want %v", cfg.RuleFiles, want)
	}
	rules, err := os.ReadFile(filepath.Join(dir, gymprom.RulesFile))
	if err != nil || string(rules) != gymprom.Rules() || !strings.Contains(string(rules), "gym:verify_success_rate:ratio_rate5m") {
		t.Errorf("rules.yml is not the shipped rules (err %v)", err)
	}
	entries, _ := os.ReadDir(dir)
	var files []string
	for _, e := range entries {
		files = append(files, e.Name())
	}
	if want := []string{"prometheus.yml", "rules.yml", "targets.json"}; !reflect.DeepEqual(files, want) {
		t.Errorf("prometheus/ holds %v, want %v (no temporary files left)", files, want)
	}

	// The real parser, when it is installed.
	if promtool, err := exec.LookPath("promtool"); err == nil {
		out, err := exec.Command(promtool, "check", "config", filepath.Join(dir, "prometheus.yml")).CombinedOutput()
		if err != nil {
			t.Errorf("promtool check config: %v\n%s", err, out)
		}
	}
}

func TestWritePrometheusConfigRelativeDirAndIntervals(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, tc := range []struct {
		interval                  time.Duration
		wantInterval, wantTimeout string
	}{
		{30 * time.Second, "30s", "10s"},
		{1500 * time.Millisecond, "1500ms", "1500ms"},
		{2 * time.Minute, "120s", "10s"},
	} {
		if err := orchestrator.WritePrometheusConfig("runs/r", "", "127.0.0.1:1", nil, tc.interval); err != nil {
			t.Fatal(err)
		}
		cfg := readPromConfig(t, "runs/r")
		if g := cfg.Global; g.ScrapeInterval != tc.wantInterval || g.EvaluationInterval != tc.wantInterval || g.ScrapeTimeout != tc.wantTimeout {
			t.Errorf("interval %s: global = %+v, want interval %s timeout %s", tc.interval, g, tc.wantInterval, tc.wantTimeout)
		}
		if f := cfg.ScrapeConfigs[0].FileSDConfigs[0].Files[0]; !filepath.IsAbs(f) {
			t.Errorf("file_sd path %q is relative; Prometheus would resolve it against the config's directory", f)
		}
	}
	// No run id: no empty gym_run_id label.
	got := readTargets(t, "runs/r")
	if len(got) != 1 || !reflect.DeepEqual(got[0].Labels, map[string]string{"gym_server_name": "orchestrator", "gym_server_type": "orchestrator"}) {
		t.Errorf("targets = %+v", got)
	}
}

func TestWritePrometheusConfigRewritesTargets(t *testing.T) {
	runDir := t.TempDir()
	servers := fleetInfo()
	if err := orchestrator.WritePrometheusConfig(runDir, "r", "127.0.0.1:40000", servers, 0); err != nil {
		t.Fatal(err)
	}
	// The orchestrator's own endpoint is off and the agent is gone.
	if err := orchestrator.WritePrometheusConfig(runDir, "r", "", servers[:2], 0); err != nil {
		t.Fatal(err)
	}
	got := readTargets(t, runDir)
	if len(got) != 2 || got[0].Labels["gym_server_name"] != "arithmetic" || got[1].Labels["gym_server_name"] != "policy_model" {
		t.Errorf("targets after rewrite = %+v", got)
	}
}

func TestWritePrometheusConfigNothingToScrape(t *testing.T) {
	runDir := t.TempDir()
	servers := []orchestrator.ServerInfo{{Spec: orchestrator.ServerSpec{Name: "a", Type: contract.ServerTypeAgent}}}
	if err := orchestrator.WritePrometheusConfig(runDir, "r", "", servers, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(runDir, orchestrator.PrometheusDir)); !os.IsNotExist(err) {
		t.Errorf("prometheus/ written with no metrics endpoint in the fleet (stat: %v)", err)
	}
}

func TestWritePrometheusConfigBadAddress(t *testing.T) {
	runDir := t.TempDir()
	for _, addr := range []string{"localhost", "127.0.0.1:0", "127.0.0.1:http"} {
		servers := []orchestrator.ServerInfo{{Spec: orchestrator.ServerSpec{Name: "broken", Type: contract.ServerTypeAgent}, MetricsAddr: addr}}
		err := orchestrator.WritePrometheusConfig(runDir, "r", "127.0.0.1:40000", servers, 0)
		if err == nil || !strings.Contains(err.Error(), "broken") {
			t.Errorf("metrics address %q: err = %v, want one naming the server", addr, err)
		}
	}
	if _, err := os.Stat(filepath.Join(runDir, orchestrator.PrometheusDir)); !os.IsNotExist(err) {
		t.Errorf("files written despite a bad address (stat: %v)", err)
	}
}
