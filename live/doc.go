// Package live is the run seen while it runs: the state of every rollout
// in flight (queued, active, slow, retrying, stalled, failed, cancelled,
// done), the stage an agent has it at, and the fleet's last minute, as
// the status API of the head server and of `gymlens rollouts collect`
// answers it and `gymlens top` and the live page draw it.
//
// It is built from what the fleet already knows, with tracing on or off:
// the collector's own queue (Tracker) and the episodes an agent server
// has in flight (Episodes, served at EpisodesPath). Everything it holds is
// bounded whatever the length of the run, and nothing in it is a prompt,
// an answer, a header or a credential: a rollout is named by its identity
// and described by stages, durations and status codes only.
package live
