// Package gym declares the instruments of the telemetry contract (package
// contract: the gym.* catalogue and the two gen_ai.* client histograms)
// on one meter, and the state behind the observable ones.
//
// Names, kinds, units, descriptions and bucket boundaries come from
// contract.Instruments; nothing here spells them again. NeMo Gym's own
// module (gym.rollout.duration_ms, gym.verify.*, gym.servers.active) is
// recorded through Record; the attributed catalogue's synchronous
// instruments are exported fields, which telemetry/metrics records into
// with precomputed attribute sets.
//
// Three groups are observable, read by callbacks when the SDK collects:
//
//	verify tally (one atomic add per verification) ─► gym.verify.success_rate, gym.verify.calls
//	live Slots (the limiters' semaphores), by site ─► gym.concurrency.limit, .active, .available, .queue_depth
//	/proc walk of this process and its descendants ─► gym.process_tree.memory_used_mib, .cpu_percent
//
// The success rate and the verify counter come from one tally, so the
// exported fraction always agrees with the exported counts. The four
// concurrency gauges of a site come from one reading of its semaphores, so
// active plus available is always the limit. The process tree gauges are
// registered on Linux only (elsewhere the standard library cannot list a
// process's descendants).
//
// gym.server.request_duration_ms is declared for compatibility and never
// recorded: without attributes it would merge every route of every server.
package gym
