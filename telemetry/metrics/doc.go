// Package metrics is the Gym-facing wrapper over the gym.* instruments: the
// Go form of NeMo Gym's nemo_gym.telemetry.metrics module.
//
// Each recorder takes an explicit position on its instrument:
//
//   - gym.rollout.duration_ms: used. One rollout is a comparable unit of
//     work, so an undimensioned distribution still means something.
//   - gym.verify.duration_ms: used, for the same reason, per verification.
//   - gym.verify.success_rate: used, with its window stated: the fraction of
//     verifications that completed since this process started. A gauge holds
//     a last value and cannot be a rate by itself, and a cumulative fraction
//     flattens as the process ages; for a windowed or fleet-wide rate use the
//     gym.verify.calls counter, which this package also feeds.
//   - gym.servers.active: used by exactly one process. Were every server to
//     write this gauge, the exported value would be whoever wrote last.
//     RecordActiveServers therefore refuses to run outside the orchestrator.
//   - gym.server.request_duration_ms: deliberately unused. Undimensioned it
//     would pour every route of every server into one histogram. The HTTP
//     instrumentation already exports http.server.request.duration by route,
//     method and status code, which answers the real questions.
//
// NeMo Gym's attributed catalogue and the GenAI conventions have one
// recorder each, called where upstream records: RecordRollout (also
// gym.rollout.completed_total by outcome), RecordModelCall, RecordHTTPTimeout,
// RecordHTTPRetry, RecordAgentTurns (once per episode), RecordAgentTurn (once
// per turn), RecordToolCall and RecordGenAI; a Limiter bounds the work in
// flight at a concurrency site and is the source of gym.concurrency.*.
//
// Attribute sets are built once per distinct value and kept in a
// copy-on-write map per recorder, so the record path with telemetry on
// allocates nothing; each recorder keeps at most 64 distinct values (or
// combinations), and records the rest under contract.Other ("_OTHER"), so a
// caller passing unbounded names cannot grow the series without limit.
//
// Every recorder is a no-op unless telemetry was initialised and this
// process exports metrics; none of them panics or fails the caller. Metric
// recording does not depend on span groups, so the default preset still
// produces verify metrics. Recorders stay cheap when off (one pointer load),
// but call sites that build anything for them belong under a gate.
package metrics
