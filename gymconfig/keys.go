package gymconfig

import (
	"github.com/gymlens/gymlens/contract"
)

// Environment variables of the launch contract.
const (
	// EnvConfigDict holds the YAML of the whole fleet config, with its
	// interpolations unresolved.
	EnvConfigDict = "NEMO_GYM_CONFIG_DICT"
	// EnvConfigPath holds the instance name (a top-level key of the
	// config), not a file path.
	EnvConfigPath = "NEMO_GYM_CONFIG_PATH"
)

// Top-level keys this package reads or fills.
const (
	// KeyHeadServer is the {host, port} of the fleet's head server.
	KeyHeadServer = "head_server"
	// KeyDefaultHost is the host given to server blocks without one.
	KeyDefaultHost = "default_host"
	// KeyPortRangeLow is the inclusive low end of the random port range.
	KeyPortRangeLow = "port_range_low"
	// KeyPortRangeHigh is the inclusive high end of the random port range.
	KeyPortRangeHigh = "port_range_high"
	// KeyDisallowedPorts lists ports never handed out: the head port and
	// every port already given.
	KeyDisallowedPorts = "disallowed_ports"
	// KeyDryRun asks every server to validate its config and exit 0.
	KeyDryRun = "dry_run"
	// KeyTelemetry is gymlens's telemetry block.
	KeyTelemetry = "telemetry"
	// KeySkipVerification is copied into agent blocks that lack it.
	KeySkipVerification = "skip_verification"
	// KeySkipVerificationReward is copied into agent blocks that lack it.
	KeySkipVerificationReward = "skip_verification_reward"
	// KeyCommand is the argv list of an external server (a gymlens
	// addition, not upstream).
	KeyCommand = "command"
)

// Defaults upstream applies when the config leaves them out.
const (
	// DefaultHost is the host of blocks without one when default_host is
	// unset, and of any address whose host is empty: loopback
	// (contract.DefaultHost).
	DefaultHost = contract.DefaultHost
	// DefaultHeadPort is the head server's port when head_server is unset.
	DefaultHeadPort = 11000
	// DefaultPortRangeLow is port_range_low when unset.
	DefaultPortRangeLow = 10001
	// DefaultPortRangeHigh is port_range_high when unset.
	DefaultPortRangeHigh = 20000
)

// IsReserved reports whether a top-level key is one of upstream's reserved
// keys (NeMo Gym 0.7's NEMO_GYM_RESERVED_TOP_LEVEL_KEYS, 41 keys, telemetry
// among them), never a server instance.
func IsReserved(key string) bool {
	switch key {
	case "config_paths", "entrypoint", KeyDefaultHost, KeyHeadServer,
		KeyDisallowedPorts, "head_server_deps", KeyPythonVersion,
		"pip_install_verbose", KeyUseAbsoluteIP, "uv_pip_set_python",
		KeySkipVenvIfPresent, "hf_token", "ray_head_node_address",
		KeyPortRangeLow, KeyPortRangeHigh, KeyDryRun, KeyServerSpinupTimeoutSeconds,
		KeyModelEndpointReadinessTimeout, KeyAllowOpenAIVersionSkew,
		KeyUVCacheDir, KeyUVLockTimeoutSeconds, KeyUVVenvDir, KeyResultsDir, KeyCacheDir,
		"_inherit_from", "_copy", "nemo_gym_log_dir", "verbose",
		"json", "query", "observability_enabled", "model_call_capture_dir",
		"token_id_capture", "component_name", KeySkipVerification,
		KeySkipVerificationReward, KeyTelemetry, "allow_unsupported_pairing",
		"environment_server_name", "environment_server_routes", "environment_routing_mode":
		return true
	}
	return false
}

var launcherKeys = map[string]bool{
	"entrypoint": true, "host": true, "port": true, "num_workers": true, "domain": true,
	"verified": true, "verified_url": true, "description": true, "value": true,
	"datasets": true, KeyCommand: true, "metrics_addr": true,
}

// IsLauncherKey reports whether a key of a server block belongs to the
// launcher rather than to the implementation: entrypoint host port
// num_workers domain verified verified_url description value datasets
// command metrics_addr (metrics_addr is gymlens's: where the child's
// prometheus exporter listens). An implementation's config is the block
// minus these and minus its reference-valued keys (see Instance.ImplConfig).
func IsLauncherKey(key string) bool { return launcherKeys[key] }
