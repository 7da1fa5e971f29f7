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
// rollout's trace id (the one the agent reported in a traceresponse
// header, else the collector's CLIENT span's, so a call that timed out
// still names its trace), the rollout id,
// the collector's wall clock of the last call, when that call was made and
// how many calls the rollout took.
//
// A /run call that fails (no answer, a status outside 2xx, a body that is
// not a JSON object) is not a rollout: it is retried with
// _ng_attempt_index 1, 2, ... until MaxAttempts calls were made, and then
// the failures file gets the row of the last attempt plus
// "_ng_failure_class":"rollout_error", "_ng_failure_error" (the last
// error) and "_gymlens". An answer that carries a non-null
// _ng_failure_class itself goes to the failures file, with the same
// members added as an output line, and is not retried; one with a truthy
// _ng_no_persist is written nowhere (that check comes first). Upstream aborts the whole collection on a non-2xx /run;
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
//   - Bounded: rollouts are dispatched in order through a limiter of
//     Options.Concurrency slots (metrics.NewLimiter, site
//     rollout_collection). A rollout that gets a slot runs in a goroutine
//     of its own and keeps the slot across its retries; only the next
//     rollout waits on the limiter, and the rest of the dataset is not
//     dispatched yet, so a large dataset never means a large number of
//     goroutines or connections. The limiter is the source of
//     gym.concurrency.*{nemo.gym.concurrency.site="rollout_collection"}.
//   - Stop: closing Options.Stop (the orchestrator does when a server of
//     the fleet dies) dispatches no further rollout and retries no failed
//     call; the rollouts in flight finish and are recorded, failures
//     included, and Collect returns ErrStopped if rollouts remain, also
//     when the failures it caused tripped the failure-rate guard first.
//   - Failure rate: when FailureWindow (DefaultFailureWindow) rollouts
//     have finished and MaxFailureRate (DefaultMaxFailureRate) or more of
//     the last FailureWindow failed on every attempt, the run stops as
//     with Stop and Collect returns an error wrapping ErrFailureRate with
//     the figures and the last failure: a fleet that fails every call
//     (a hung or dead peer) ends the run instead of crawling through the
//     dataset one timeout at a time.
//   - Cancellation: cancelling ctx stops handing out rollouts and aborts
//     the calls in flight; those are not written (a resume runs them
//     again), and every line already in the files is complete. A failed
//     write to the files ends the run the same way.
//
// # Traces
//
// With telemetry on and the job span group enabled, the whole collection
// is one gym.job span (nemo.gym.job.tasks: the number of rollouts). The
// rollouts are not part of its trace: every /run call starts from a
// context with no parent span, so its CLIENT span (span group http_client)
// is the root of a new trace and carries one link, to the gym.job span.
// The agent's SERVER span is that CLIENT span's child, and everything the
// agent, model and resources servers do for the rollout stays in that
// trace; a collection of 10,000 rollouts is 10,000 traces of a rollout
// each plus the job's, not one enormous trace. A retried rollout is one
// such trace per attempt. The closing /aggregate_metrics calls are
// children of the gym.job span, in its trace.
//
// With the http_client group off there is no CLIENT span to carry the
// link: the call sends no trace context and the agent starts a root of
// its own. With the job group off, the calls continue whatever trace ctx
// carries, if any.
package rollout
