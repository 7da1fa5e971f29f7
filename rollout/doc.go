// Package rollout collects rollouts in NeMo Gym's formats: it expands a
// dataset into rollouts, sends each to the environment server that fronts
// its agent (POST /run), as NeMo Gym 0.7's collector does, and appends
// one JSON line per finished rollout to an output file, with upstream's
// sidecar files next to it.
//
//	rows ──► expand (task index, a a b b repeats, agent) ──► <stem>_materialized_inputs.jsonl
//	              │
//	              └─► skip what the output completed ──► limiter (N) ──► POST {environment server}/run (retried)
//	                                                            │
//	     output.jsonl ◄── completed, one Write per line ◄───────┤ (completion order)
//	     <stem>_failures.jsonl ◄── failed, _ng_failure_class ◄──┘
//	     <stem>_aggregate_metrics.json ◄── POST {environment server}/aggregate_metrics, streamed, answered at the end
//
// # Routing
//
// A row's agent is, first to last: Options.AgentOverride (upstream's
// --agent / agent_map._default, which replaces every row's agent_ref with
// {"name": agent} and warns once, listing what it replaced); its
// agent_ref.name; the agent its task_source resolves to
// (Options.TaskSources, upstream's resolve_dataset_agent: the dataset's
// agent pin, the declaring agent, the one agent whose resources_server is
// the declaring resources server), stamped as {"name": agent}; and
// Options.DefaultAgent for rows with neither. A row carrying
// _ng_environment_server goes to that server (upstream's legacy routing).
//
// The rollout then goes to the one environment server of
// Options.Environments that names its agent (in agent_server or any
// {type: responses_api_agents} field: gymconfig.EnvironmentAgents); two
// such servers are an error, as upstream's
// AmbiguousEnvironmentServerError. An agent no environment server names
// (an older config, or --agent-url pointing at the agent) has its own
// /run called, and one log line per agent says so; upstream would refuse
// it (AgentWithoutEnvironmentServerError). HeadFleet and FleetFromConfig
// read all three maps from the config a head server serves.
//
// # Lines
//
// An output line is the /run answer with every member it sent, plus, as
// upstream's collector adds them: _ng_task_index, _ng_rollout_index,
// agent_ref, task_source and skills_ref of the row (each when it has
// one), _ng_attempt_index and _ng_rollout_id when the row has them, and
// _ng_environment_server (the server that ran it) and _ng_result_type
// (that server's implementation, such as legacy_agent) unless the agent
// was called directly. Last comes the collector's own member
// KeyBookkeeping ("_gymlens", a Bookkeeping), which upstream does not
// write and the report reads: the rollout's trace id (the one the agent
// reported in a traceresponse header, else the collector's CLIENT span's,
// so a call that timed out still names its trace), the rollout id, the
// collector's wall clock of the last call, when that call was made and
// how many calls the rollout took. Upstream's aggregation skips members
// whose names begin with "_", so it is never a metric.
//
// A /run call that fails (no answer, a status outside 2xx, a body that is
// not a JSON object) is not a rollout: it is retried with
// _ng_attempt_index 1, 2, ... until MaxAttempts calls were made, and then
// the failures file gets upstream's sidecar row for it (as upstream's
// collector writes one with route_failures_to_sidecar): _ng_failure_class
// "agent_run_error" when the server answered with a status other than a
// gateway's (429, 502, 503, 504), so the rollout ran and broke, else
// "agent_request_failed"; _ng_failure_type, _ng_failure_message,
// _ng_failure_http_status and _ng_failure_response_body; then the
// collector's members as on an output line (not the row itself). An
// answer that carries a non-null _ng_failure_class itself goes to the
// failures file, with the same members added as an output line, and is
// not retried; one with a truthy _ng_no_persist is written nowhere (that
// check comes first). Upstream aborts the whole collection on a non-2xx
// /run unless route_failures_to_sidecar is set; this collector records
// the failure and carries on, and Collect's error then wraps
// ErrFailedRollouts.
//
// # Aggregate metrics
//
// When every rollout has ended, each environment server (or agent called
// directly) gets the successful results it ran (this run's and, on
// resume, the earlier ones, grouped by the _ng_environment_server on
// their lines) at POST /aggregate_metrics, stripped as upstream strips
// them: without response (but its usage and incomplete_details),
// responses_create_params, ng_agent_observations, ng_model_call_capture
// and ng_trajectory. The aggregate metrics file holds one AgentMetrics
// per server, in name order: agent_ref {name} (the agent, or the server
// when two servers front one agent, as upstream's label_runs names
// them), _ng_environment_server, agent_metrics, key_metrics,
// group_level_metrics, repeat_level_metrics and, when the server sent
// one, perf_summary.
//
// Each server's request body is built as its results are recorded (each
// result encoded once, appended), and sent as it grows: the call opens
// with the server's first result of the run (earlier results first) and
// its body is streamed in batches, so that the servers read the results
// during the collection; when every rollout has ended the body is closed
// and the answer awaited. A streamed call that fails (connection lost,
// gateway status) is made again at the end with the whole body, as
// upstream's collector makes it. Summary.AggregationElapsed is the time
// from the last rollout to the file written.
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
// such trace per attempt. The /aggregate_metrics calls are children of
// the gym.job span, in its trace.
//
// With the http_client group off there is no CLIENT span to carry the
// link: the call sends no trace context and the agent starts a root of
// its own. With the job group off, the calls continue whatever trace ctx
// carries, if any.
package rollout
