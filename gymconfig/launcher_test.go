package gymconfig_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gymlens/gymlens/gymconfig"
	"github.com/gymlens/gymlens/internal/testenv"
	"github.com/gymlens/gymlens/internal/upstream"
)

const launcherBase = "s:\n  resources_servers:\n    r: {host: 127.0.0.1, port: 15000}\n"

func TestLauncherDefaultsWritesUpstreamsKeys(t *testing.T) {
	wd := t.TempDir()
	d := mustParse(t, launcherBase)
	if err := d.LauncherDefaults(noEnv, gymconfig.LauncherSettings{WorkingDir: wd, PythonVersion: "3.13.0"}); err != nil {
		t.Fatal(err)
	}
	// What a Python server reads back out of NEMO_GYM_CONFIG_DICT.
	c, err := mustParse(t, string(d.YAML())).Resolve(noEnv)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"use_absolute_ip": false, "allow_openai_version_skew": false, "skip_venv_if_present": false,
		"dry_run": false, "server_spinup_timeout_seconds": 600, "model_endpoint_readiness_timeout_seconds": 600,
		"results_dir": filepath.Join(wd, "results"), "cache_dir": filepath.Join(wd, "cache"),
		"uv_cache_dir": filepath.Join(wd, "cache", "uv"), "uv_lock_timeout_seconds": 1800, "uv_venv_dir": wd,
		"python_version": "3.13.0",
	}
	for k, v := range want {
		if got := c.Root[k]; got != v {
			t.Errorf("%s = %#v, want %#v", k, got, v)
		}
		if !gymconfig.IsReserved(k) {
			t.Errorf("%s is not reserved", k)
		}
	}
}

func TestLauncherDefaultsKeepsWhatIsGiven(t *testing.T) {
	wd := t.TempDir()
	d := mustParse(t, launcherBase+"dry_run: true\nserver_spinup_timeout_seconds: 5\nresults_dir: out\ncache_dir: ${oc.env:CACHE}\nuv_lock_timeout_seconds: null\n")
	env := testenv.Lookup(map[string]string{"CACHE": "/var/c", "UV_LOCK_TIMEOUT": "77"})
	if err := d.LauncherDefaults(env, gymconfig.LauncherSettings{WorkingDir: wd}); err != nil {
		t.Fatal(err)
	}
	c, err := d.Resolve(env)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]any{
		"dry_run": true, "server_spinup_timeout_seconds": 5, "results_dir": filepath.Join(wd, "out"),
		"cache_dir": "/var/c", "uv_cache_dir": "/var/c/uv", "uv_lock_timeout_seconds": nil,
	} {
		if got := c.Root[k]; got != v {
			t.Errorf("%s = %#v, want %#v", k, got, v)
		}
	}
	if _, ok := c.Root["python_version"]; ok {
		t.Error("python_version written without a version")
	}
	// UV_LOCK_TIMEOUT gives the default when the config has no key.
	d = mustParse(t, launcherBase)
	if err := d.LauncherDefaults(env, gymconfig.LauncherSettings{WorkingDir: wd}); err != nil {
		t.Fatal(err)
	}
	if v, _ := d.Get([]string{"uv_lock_timeout_seconds"}); v != 77 {
		t.Errorf("uv_lock_timeout_seconds = %#v, want UV_LOCK_TIMEOUT's 77", v)
	}
}

func TestLauncherDefaultsRefusesAnEmptyDir(t *testing.T) {
	d := mustParse(t, launcherBase+"results_dir: ''\n")
	before := string(d.YAML())
	err := d.LauncherDefaults(noEnv, gymconfig.LauncherSettings{WorkingDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "results_dir: must be a non-empty path string") {
		t.Errorf("err %v", err)
	}
	if string(d.YAML()) != before {
		t.Error("the dict changed on error")
	}
}

// TestUpstreamReservedKeys checks IsReserved against NeMo Gym's own
// NEMO_GYM_RESERVED_TOP_LEVEL_KEYS, and that the switch upstream reads
// but does not reserve stays a possible instance name.
func TestUpstreamReservedKeys(t *testing.T) {
	upstream.Python(t)
	out := upstream.Run(t, time.Minute, "import json\nfrom nemo_gym.global_config import NEMO_GYM_RESERVED_TOP_LEVEL_KEYS as K\nprint(json.dumps(K))", nil)
	var keys []string
	if err := json.Unmarshal(out, &keys); err != nil {
		t.Fatal(err)
	}
	agree := 0
	for _, k := range keys {
		if gymconfig.IsReserved(k) {
			agree++
		} else {
			t.Errorf("%s is reserved upstream, not here", k)
		}
	}
	if gymconfig.IsReserved(gymconfig.KeyErrorOnAgentWithoutEnvironmentServer) {
		t.Errorf("%s is reserved here, not upstream", gymconfig.KeyErrorOnAgentWithoutEnvironmentServer)
	}
	t.Logf("%d upstream reserved keys, %d reserved here", len(keys), agree)
}

// head_server is filled per key, as upstream's parser fills it: a config
// may pin just its port or just its host.
func TestDefaultsFillsHeadServerPerKey(t *testing.T) {
	for doc, want := range map[string]map[string]any{
		"head_server: {port: 12001}\n":      {"host": "127.0.0.1", "port": 12001},
		"head_server: {host: 127.0.0.2}\n":  {"host": "127.0.0.2", "port": 11000},
		"default_host: 127.0.0.3\n":         {"host": "127.0.0.3", "port": 11000},
		"head_server: {host: h, port: 1}\n": {"host": "h", "port": 1},
	} {
		d := mustParse(t, doc)
		if _, err := d.Defaults(noEnv, nil); err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		got, _ := d.Get([]string{"head_server"})
		m, _ := got.(map[string]any)
		if len(m) != 2 || m["host"] != want["host"] || m["port"] != want["port"] {
			t.Errorf("%s: head_server %v, want %v", doc, got, want)
		}
	}
}
