package gymconfig

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Top-level keys upstream's parser writes for its launcher and servers
// (besides hosts, ports and the head server, see Defaults).
const (
	KeyUseAbsoluteIP                 = "use_absolute_ip"
	KeyAllowOpenAIVersionSkew        = "allow_openai_version_skew"
	KeyPythonVersion                 = "python_version"
	KeySkipVenvIfPresent             = "skip_venv_if_present"
	KeyServerSpinupTimeoutSeconds    = "server_spinup_timeout_seconds"
	KeyModelEndpointReadinessTimeout = "model_endpoint_readiness_timeout_seconds"
	KeyResultsDir                    = "results_dir"
	KeyCacheDir                      = "cache_dir"
	KeyUVCacheDir                    = "uv_cache_dir"
	KeyUVLockTimeoutSeconds          = "uv_lock_timeout_seconds"
	KeyUVVenvDir                     = "uv_venv_dir"
)

// Values upstream's parser gives those keys when the config leaves them out.
const (
	// DefaultServerSpinupTimeoutSeconds bounds a server's start-up.
	DefaultServerSpinupTimeoutSeconds = 600
	// DefaultModelEndpointReadinessTimeoutSeconds bounds the wait for the
	// model endpoints a config names.
	DefaultModelEndpointReadinessTimeoutSeconds = 600
	// DefaultUVLockTimeoutSeconds is uv_lock_timeout_seconds when neither
	// the config nor UV_LOCK_TIMEOUT gives one.
	DefaultUVLockTimeoutSeconds = 1800
)

// LauncherSettings are what LauncherDefaults needs to know of the process
// that launches the fleet.
type LauncherSettings struct {
	// WorkingDir is upstream's WORKING_DIR for an installed (wheel)
	// NeMo Gym, the launcher's working directory: results_dir and
	// cache_dir default under it, uv_venv_dir to it, and relative
	// results_dir and cache_dir are made absolute against it. Empty means
	// the process's working directory.
	WorkingDir string
	// PythonVersion, when not empty, is written as python_version (upstream
	// writes its own interpreter's); empty leaves the key as it is.
	PythonVersion string
}

// LauncherDefaults writes, in d, the rest of what NeMo Gym 0.7's parser
// writes before it launches servers (global_config.py), each key only
// when the config leaves it out, as the parser's setdefault does:
//
//	use_absolute_ip: false          allow_openai_version_skew: false
//	skip_venv_if_present: false     dry_run: false
//	server_spinup_timeout_seconds: 600
//	model_endpoint_readiness_timeout_seconds: 600
//	results_dir: <WorkingDir>/results   cache_dir: <WorkingDir>/cache
//	uv_cache_dir: <cache_dir>/uv        uv_venv_dir: <WorkingDir>
//	uv_lock_timeout_seconds: $UV_LOCK_TIMEOUT when a whole number, else 1800
//
// results_dir and cache_dir are then made absolute (a server resolves a
// relative path against its own directory); each must be a non-empty
// string. python_version is written when settings give one. Upstream's
// head_server_deps (the Ray and openai pins of its servers' venvs) is not
// written: gymlens builds no venvs. Python servers read these keys
// directly (dry_run unguarded), so a dict without them stops them at
// start-up. lookupEnv (nil means os.LookupEnv) answers oc.env and
// UV_LOCK_TIMEOUT. On error d is left as it was.
func (d *Dict) LauncherDefaults(lookupEnv func(string) (string, bool), settings LauncherSettings) error {
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	wd := settings.WorkingDir
	if wd == "" {
		var err error
		if wd, err = os.Getwd(); err != nil {
			return fmt.Errorf("launcher defaults: %w", err)
		}
	}
	wd, err := filepath.Abs(wd)
	if err != nil {
		return fmt.Errorf("launcher defaults: %w", err)
	}
	work := &Dict{root: cloneNode(d.root)}
	setDefault := func(key string, v any) error {
		if _, ok := work.Get([]string{key}); ok {
			return nil
		}
		return work.Set([]string{key}, v)
	}
	lock := DefaultUVLockTimeoutSeconds
	if v, ok := lookupEnv("UV_LOCK_TIMEOUT"); ok {
		v = strings.TrimSpace(v)
		if n, err := strconv.Atoi(v); err == nil && n >= 0 && !strings.HasPrefix(v, "+") {
			lock = n
		}
	}
	for _, kv := range []struct {
		key string
		v   any
	}{
		{KeyUseAbsoluteIP, false},
		{KeyAllowOpenAIVersionSkew, false},
		{KeySkipVenvIfPresent, false},
		{KeyDryRun, false},
		{KeyServerSpinupTimeoutSeconds, DefaultServerSpinupTimeoutSeconds},
		{KeyModelEndpointReadinessTimeout, DefaultModelEndpointReadinessTimeoutSeconds},
		{KeyResultsDir, filepath.Join(wd, "results")},
		{KeyCacheDir, filepath.Join(wd, "cache")},
	} {
		if err := setDefault(kv.key, kv.v); err != nil {
			return err
		}
	}
	if settings.PythonVersion != "" {
		if err := work.Set([]string{KeyPythonVersion}, settings.PythonVersion); err != nil {
			return err
		}
	}
	cfg, err := work.Resolve(lookupEnv)
	if err != nil {
		return err
	}
	for _, key := range []string{KeyResultsDir, KeyCacheDir} {
		s, ok := cfg.Root[key].(string)
		if !ok || s == "" {
			return fmt.Errorf("%s: must be a non-empty path string, got %s", key, pyStr(cfg.Root[key]))
		}
		if strings.HasPrefix(s, "~/") || s == "~" {
			if home, err := os.UserHomeDir(); err == nil {
				s = filepath.Join(home, strings.TrimPrefix(s, "~"))
			}
		}
		if !filepath.IsAbs(s) {
			s = filepath.Join(wd, s)
		}
		s = filepath.Clean(s)
		if s != cfg.Root[key] {
			if err := work.Set([]string{key}, s); err != nil {
				return err
			}
		}
		cfg.Root[key] = s
	}
	if err := setDefault(KeyUVCacheDir, filepath.Join(cfg.Root[KeyCacheDir].(string), "uv")); err != nil {
		return err
	}
	if err := setDefault(KeyUVLockTimeoutSeconds, lock); err != nil {
		return err
	}
	if err := setDefault(KeyUVVenvDir, wd); err != nil {
		return err
	}
	d.root = work.root
	return nil
}
