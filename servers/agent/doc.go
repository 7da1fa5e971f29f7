// Package agent is the built-in "simple_agent" agent server: POST /run
// performs one rollout of a task.
//
// One rollout, and the trace it produces when every group is on:
//
//	POST /run                      SERVER span (runtime)
//	└─ gym.rollout                 rollout group, nemo.gym.rollout.id
//	   ├─ gym.agent.responses      agent group
//	   │  └─ POST /v1/responses    CLIENT span ─► model server
//	   └─ POST /verify             CLIENT span ─► resources server
//
// A rollout whose model or verify call fails is still answered with 200:
// the response carries Error and reward 0, so the collector keeps the
// failed rollout. Every rollout that passed request validation is recorded
// exactly once with metrics.RecordRollout, failed ones included.
package agent
