// Package orchestrator starts, watches and stops a Gym fleet from NeMo
// Gym's config dict: one child process per server instance, started under
// NeMo Gym's launch contract, and the head server.
//
// The orchestrator is the only process that knows how many servers run, so
// it is the only writer of gym.servers.active: the count once every server
// answers, one less for each server reaped (dead, killed as hung, or
// stopped), each value exported before the next is recorded.
//
//	config dict ─► parse, resolve, check (instances, impls and their blocks,
//	   references, fixed ports) ─► head server on head_server ─► defaults
//	   (hosts, ports, disallowed_ports) ─► spawn resources + models (parallel)
//	   ─► GET / answers ─► agents ─► GET / answers
//	   gym.servers.active = n ─► watch exits, probe GET / (liveness) ─►
//	   stop: SIGTERM, drain, SIGKILL
//
// The orchestrator owns each child's stdout and stderr pipes and drains
// them into the child's log for as long as they are open; a log write that
// fails (a full disk) is counted and dropped, so a child never blocks on
// or dies of its output. A running server that fails LivenessFailures
// probes in a row is killed and reported on Exits with ErrUnresponsive.
//
// Children learn everything from their environment: NEMO_GYM_CONFIG_DICT
// (the whole dict as YAML, hosts and ports filled in, interpolations
// unresolved) and NEMO_GYM_CONFIG_PATH (their instance name), the
// telemetry settings the orchestrator wrote with telemetry.ConfigureEnv,
// a per-process telemetry file in the run directory and a prometheus
// port. Built-in servers run as `gymlens serve` with no arguments; a block
// with command: runs that program instead. Each child is killed by the
// kernel if the orchestrator itself dies (Pdeathsig), so no server
// outlives its fleet.
//
// A block whose host is not this machine is a server on another host: it
// is not spawned but waited for (JoinTimeout) until `gymlens serve --head`
// starts it there, with the dict from the head server and the telemetry
// environment from HeadTelemetryPath. It is probed, counted and listed as
// a child is; one that stops answering is dropped from the fleet, not
// killed, and it leaves by itself once the head server is gone.
package orchestrator
