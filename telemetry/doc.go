// Package telemetry is the Gym side of gymlens: it turns a Gym fleet's
// configuration into lens settings and gives each server process its
// telemetry.
//
// The orchestrator reads the `telemetry:` block of the fleet's YAML
// (ConfigFromYAML), writes it into the environment with ConfigureEnv (only
// where the user has not set a variable already) and mints the run id. The
// environment is the only channel to the servers it spawns: each of them
// calls Init once with its server name and type, and reads everything else
// from its environment.
//
//	orchestrator: ConfigFromYAML ─► ConfigureEnv (set-if-unset, run id) ─► spawn
//	every process: Init(name, type) ─► lens.Setup ─► gym instruments ─► Get()
//	                                                 └► Go runtime metrics (when exporting metrics)
//
// The server type given to Init is the process's role; telemetry/metrics
// uses it to keep gym.servers.active orchestrator-only.
package telemetry
