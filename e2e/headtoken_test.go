package e2e

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gymlens/gymlens/contract"
)

// No secret leaves where it belongs: a `gymlens run` given a head token,
// an OTLP export header and an API key in its config writes none of them
// to its output, its servers' logs, its spans and metrics, or any file of
// its run directory, except the token to head_token (mode 0600).
func TestSecretsStayOutOfRunOutput(t *testing.T) {
	const (
		token  = "planted-head-token-91c3e7d2"
		header = "planted-otlp-header-5a0b"
		apiKey = "planted-api-key-e44f"
	)
	dir := t.TempDir()
	cfg := writeFile(t, filepath.Join(dir, "fleet.yaml"), `policy_api_key: `+apiKey+`
arithmetic:
  resources_servers:
    arithmetic: {domain: math}
policy_model:
  responses_api_models:
    policy_model: {correct_probability: 0.7}
simple_agent:
  responses_api_agents:
    simple_agent:
      resources_server: {type: resources_servers, name: arithmetic}
      model_server: {type: responses_api_models, name: policy_model}
simple_agent_environment_server:
  environment_servers:
    legacy_agent:
      agent_server: {type: responses_api_agents, name: simple_agent}
telemetry:
  enabled: true
  exporter: file
  span_groups: all
  logs_enabled: true
`)
	runs := filepath.Join(dir, "runs")
	res := runGym(t, 2*time.Minute, gymEnv(contract.EnvHeadToken+"="+token, "OTEL_EXPORTER_OTLP_HEADERS=authorization=Bearer "+header),
		"run", "--config", cfg, "--rollouts", "6", "--runs-dir", runs)
	if res.err != nil {
		t.Fatalf("gymlens run: %v\n%s", res.err, tail(res.stderr, 30))
	}
	for name, out := range map[string]string{"stdout": res.stdout, "stderr": res.stderr} {
		for _, secret := range []string{token, header, apiKey} {
			if strings.Contains(out, secret) {
				t.Errorf("gymlens run's %s holds a secret (%s)", name, secret)
			}
		}
	}
	run := runDir(t, runs)
	files := 0
	err := filepath.WalkDir(run, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		rel, _ := filepath.Rel(run, path)
		if rel == contract.RunHeadTokenFile {
			fi, _ := d.Info()
			if strings.TrimSpace(string(b)) != token || fi.Mode().Perm() != 0o600 {
				t.Errorf("%s: %q mode %v, want the token, 0600", rel, b, fi.Mode().Perm())
			}
			return nil
		}
		for _, secret := range []string{token, header, apiKey} {
			if strings.Contains(string(b), secret) {
				t.Errorf("%s holds a secret (%s)", rel, secret)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(run, contract.RunHeadTokenFile)); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d files of the run directory, stdout and stderr hold no planted secret", files)
}
