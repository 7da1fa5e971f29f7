package contract

// The layout of a run directory (runs/<run id>/), which gymlens run, gym env
// start and the orchestrator write and gymlens report reads.
const (
	// RunConfigFile is the fleet configuration the run used, secrets
	// redacted and URLs scrubbed of credentials.
	RunConfigFile = "config.yaml"
	// RunIdentityFile identifies the work of the run, written once when the
	// run directory is created: the command that created it and, for gym
	// run, the seed, the number of repeats and the dataset's row count and
	// SHA-256. `gymlens run --resume` continues a run only when what it would
	// run has the same identity.
	RunIdentityFile = "run.json"
	// RunTasksFile is gymlens run's copy of the dataset it ran.
	RunTasksFile = "tasks.jsonl"
	// RunRolloutsFile is the collected rollouts, one JSON line each.
	RunRolloutsFile = "rollouts.jsonl"
	// RunFailuresFile is the rollouts that failed every attempt.
	RunFailuresFile = "rollouts_failures.jsonl"
	// RunTelemetryDir holds one telemetry file per process,
	// <server name>.jsonl, and RunOrchestratorTelemetry.
	RunTelemetryDir = "telemetry"
	// RunOrchestratorTelemetry is the orchestrator's telemetry file in
	// RunTelemetryDir.
	RunOrchestratorTelemetry = "orchestrator.jsonl"
	// RunLogsDir holds one log per server process, <server name>.log.
	RunLogsDir = "logs"
	// RunPrometheusDir holds the Prometheus configuration written for a
	// run that exports to Prometheus.
	RunPrometheusDir = "prometheus"
	// RunHeadTokenFile holds the run's head token (EnvHeadToken), the one
	// file of the run directory with a credential in it.
	RunHeadTokenFile = "head_token"
	// RunStatusFile is the run's last status snapshot (the status API's
	// JSON, every rollout state counted), written when collection ends.
	RunStatusFile = "status.json"
)

// RoutePrefix starts every HTTP route of gymlens's own, on the head
// server and on gymlens's servers (NeMo Gym has none under it): each asks
// for the head token when the fleet has one, and a server answers them
// outside its request telemetry, as it does its health checks.
const RoutePrefix = "/gymlens/"

// EnvLive turns the live view (package live) off when it reads as false
// (0, false, no, off): no rollout tracker or status API in a collection,
// no episode registry in an agent. Unset, it is on. The orchestrator's
// servers inherit it.
const EnvLive = "GYMLENS_LIVE"

// EnvHeadToken is the environment variable that carries a fleet's head
// token: the bearer token its head server asks for. `gymlens run` and
// `gymlens env start` take it from there when it is set (one token for
// many runs), the orchestrator hands it to the servers it starts, and
// `gymlens serve --head` and `gymlens rollouts collect --head` send it.
const EnvHeadToken = "GYMLENS_HEAD_TOKEN"

// TelemetryFileName is the name of server's telemetry file in
// RunTelemetryDir.
func TelemetryFileName(server string) string { return server + ".jsonl" }

// LogFileName is the name of server's log in RunLogsDir.
func LogFileName(server string) string { return server + ".log" }

// Permissions of what a run writes under its run directory. A run holds
// prompts, model answers and the fleet's configuration, so only the user
// who ran it may read it.
const (
	// RunDirPerm is the mode of the run directory and every directory in it.
	RunDirPerm = 0o700
	// RunFilePerm is the mode of every file written in the run directory.
	RunFilePerm = 0o600
)
