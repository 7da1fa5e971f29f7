// Package gym declares the gym.* metric instruments and the single entry
// point that records into them.
//
// The names, units and bucket boundaries match NeMo Gym's, so a Go process
// and a Python one land in the same dashboards. Beyond NeMo Gym, two
// counters carry an outcome attribute (gym.verify.calls, gym.rollout.calls),
// which is what windowed and fleet-wide success rates need.
//
// Why the success rate and the counters are observable instruments: they are
// computed from a lock-free tally when the SDK collects, so the hot path pays
// one atomic add instead of two extra SDK calls, and the exported fraction is
// always consistent with the exported counts (never above 1).
//
//	Record(Measurement{Kind: KindVerify, ...})
//	   ├── gym.verify.duration_ms   histogram Record        (hot path)
//	   └── verify tally             one atomic add          (hot path)
//	collection ──► callback reads tally ──► gym.verify.success_rate, gym.verify.calls
//
// gym.server.request_duration_ms is declared for compatibility and never
// recorded: without attributes it would merge every route of every server.
package gym
