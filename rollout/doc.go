// Package rollout collects rollouts in NeMo Gym's formats: it expands a
// dataset into rollouts, sends each to its agent's POST /run, and appends
// one JSON line per finished rollout to an output file, with upstream's
// sidecar files next to it.
//
//	rows ──► expand (task index, a a b b repeats, agent_ref) ──► <stem>_materialized_inputs.jsonl
//	              │
//	              └─► skip what the output completed ──► limiter (N) ──► POST {agent}/run (retried)
//	                                                            │
//	     output.jsonl ◄── completed, one Write per line ◄───────┤ (completion order)
//	     <stem>_failures.jsonl ◄── failed, _ng_failure_class ◄──┘
//	     <stem>_aggregate_metrics.json ◄── POST {agent}/aggregate_metrics at the end
//
// # Lines
//
// An output line is the agent's /run answer with every member it sent,
// plus _ng_task_index, _ng_rollout_index and agent_ref of the row (and
// _ng_attempt_index and _ng_rollout_id when the row has them), plus the
// collector's own member KeyBookkeeping ("_gymlens", a Bookkeeping): the
// trace id the agent reported in a traceresponse header, the rollout id,
// the collector's wall clock of the call and when it was made.
//
// A /run call that fails (no answer, a status outside 2xx, a body that is
// not a JSON object) is not a rollout: it is retried with
// _ng_attempt_index 1, 2, ... until MaxAttempts calls were made, and then
// the failures file gets the row of the last attempt plus
// "_ng_failure_class":"rollout_error", "_ng_failure_error" (the last
// error) and "_gymlens". An answer that carries _ng_failure_class itself
// goes to the failures file as it is; one with a truthy _ng_no_persist is
// written nowhere. Upstream aborts the whole collection on a non-2xx /run;
// this collector records the failure and carries on, and Collect's error
// then wraps ErrFailedRollouts.
//
// # Stopping and starting again
//
//   - Resume: with Options.Resume, a rollout (task index, rollout index)
//     the output already holds is skipped; one the failures file holds
//     runs again, its attempt index continuing past the recorded ones. A
//     last line without its newline (the process died while writing it)
//     is cut off before anything is appended. A rollout's identity comes
//     from the rows and their order, so resume with the same input.
//     MaxAttempts counts the calls of one run: a resumed run gives each
//     failed rollout that many again (upstream counts the failure lines
//     across runs and gives up on a rollout once they reach the cap).
//     Without Resume, the output and failures files are emptied first.
//   - Bounded: a limiter of Options.Concurrency slots (metrics.NewLimiter,
//     site rollout_collection) admits one rollout at a time into a
//     goroutine of its own, which keeps its slot across retries; the rest
//     of the dataset waits undispatched, so a large dataset never means a
//     large number of goroutines or connections. The limiter is the source
//     of gym.concurrency.*{nemo.gym.concurrency.site="rollout_collection"}.
//   - Cancellation: cancelling ctx stops handing out rollouts and aborts
//     the calls in flight; those are not written (a resume runs them
//     again), and every line already in the files is complete.
//
// With telemetry on and the job span group enabled, the whole collection
// is one gym.job span. Each /run call is a CLIENT span that starts a trace
// of its own and links back to the job, so each rollout's trace in the
// agent, model and resources servers is one trace, not a branch of one
// enormous job trace.
package rollout
