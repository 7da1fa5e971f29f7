// Package rollout collects rollouts: it sends every task of a dataset to a
// running agent server's POST /run and appends one JSON line per finished
// rollout to an output file.
//
//	tasks ──► skip ids already in the output ──► N workers ──► POST /run
//	                                                  │
//	        output.jsonl ◄── one Write per line ◄─────┘  (completion order)
//
// The collector is built to be stopped and started again:
//
//   - Resume: a task whose id already has a line in the output is skipped.
//     A last line without its newline (the process died while writing it)
//     is cut off before anything is appended, and that task runs again.
//   - Bounded: a fixed pool of Options.Concurrency workers pulls tasks, so a
//     large dataset never means a large number of goroutines or connections.
//   - Failures are data: an HTTP error, a refused connection, a timeout or a
//     response with Error set is written as a Record with Error filled in
//     and counted in Summary.Failed; the run carries on.
//   - Cancellation: cancelling ctx stops handing out tasks and aborts the
//     calls in flight; those are not written (a resume runs them again), and
//     every line already in the file is complete.
//
// With telemetry on and the job span group enabled, the whole collection is
// one gym.job span, and it is the parent of every /run call, so each
// rollout's trace in the agent, model and resources servers hangs off the
// job.
package rollout
