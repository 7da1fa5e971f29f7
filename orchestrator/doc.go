// Package orchestrator starts, watches and stops a Gym fleet: one child
// process per configured server, all running the same gym binary.
//
// The orchestrator is the only process that knows how many servers run, so
// it is the only writer of gym.servers.active: the count once every server
// is healthy, one less for each server that dies, zero at shutdown.
//
//	config ─► validate (types, names, references, fixed ports) ─► spawn
//	   resources + models (parallel) ─► READY line (address) ─► /health
//	   agents (given the others' URLs) ─► READY ─► /health
//	   gym.servers.active = n ─► watch exits ─► stop: SIGTERM, drain, SIGKILL
//
// Children learn everything through their command line and environment:
// the telemetry settings the orchestrator wrote with telemetry.ConfigureEnv,
// plus a per-process telemetry file in the run directory. Each child is
// killed by the kernel if the orchestrator itself dies (Pdeathsig), so no
// server outlives its fleet.
package orchestrator
