// Package agent is the built-in responses_api_agents server, NeMo Gym's
// "simple_agent": POST /run takes one dataset row and answers with its
// verification, after an episode in which the model's function calls are
// executed as the resources server's tool routes.
//
// # One rollout
//
//	POST /run (row)
//	├─ POST resources/seed_session     body: the row without _ng_rollout_id;
//	│                                  cookies: the inbound ones
//	├─ episode                         cookies: the seed answer's
//	│  ├─ POST model/v1/responses      body: params, input = row input + items so far
//	│  ├─ POST resources/<tool>        body: parsed arguments; answer of any status = output;
//	│  │                               its cookies merged into the resources cookies
//	│  └─ ... until a turn without a function call, an incomplete response, or max_steps
//	└─ POST resources/verify           body: row without _ng_rollout_id + {"response": episode}
//	                                   cookies: the episode's last resources and
//	                                   model cookies, and the agent's own
//
// This is nemo-gym 0.7.0's simple_agent. A turn with no function call
// ends the episode; when it has no assistant message either (reasoning
// only, or no output at all), the episode's response gets status
// "incomplete" and, in its metadata, ng_termination_reason
// ("incomplete_reasoning" when the turn had output, "empty_output" when it
// had none) and ng_termination_message (upstream's text,
// TerminationMessage), and a warning is logged. A tool answer's cookies
// are merged into the resources cookies the next calls send (a cookie of
// the same name replaced, one set by the seed or an earlier tool kept).
// _ng_rollout_id is never sent on: upstream's run request excludes it
// from its dumps. Every other member of the row is, as it came; the one
// difference left is that upstream dumps responses_create_params (and
// the episode) in full, every parameter it did not get as null or its
// default, where this agent sends the members that were set.
//
// The answer is the verify JSON as the resources server gave it, byte for
// byte (whitespace around the value aside): it is checked
// (protocol.CheckVerifyResponse), not decoded and encoded again. Two
// edits make it what upstream's agent answers, the dump of its
// verify-response model: mask_sample (false), failure_kind and
// failure_reason (null) are added when the answer lacks them, and an
// echoed _ng_rollout_id is left out. A non-2xx answer from the seed, a
// model call or verify, an invalid model or verify answer, an unreachable
// peer, or, when the fleet has observability_enabled, an explicit
// _ng_rollout_id upstream would refuse fails the rollout: /run answers
// 500, as upstream's does (without observability_enabled upstream reads
// no rollout id, and such an id is ignored). An _ng_rollout_id that is
// not a string is a 422, as upstream's request model refuses it. With
// execute_tools false (Config.ExecuteTools), which upstream supports only
// for agent sessions, /run and /v1/responses answer 500. A tool route's
// answer is never a failure, whatever its status: its text is what the
// model sees next. Arguments that Python's json.loads refuses give
// upstream's output, {"error": "Invalid tool call arguments:
// JSONDecodeError('Expecting value: line 1 column 10 (char 9)')"} and the
// like, with no call; arguments only Python reads (NaN, Infinity) are
// sent as they came.
//
// # The episode runs in this process
//
// Upstream's /run reaches its episode through an HTTP call to its own
// /v1/responses. This agent calls the same code directly: the episode, its
// cookies and its answer are those of the self-call, one round trip (and
// one encode and decode of the whole episode) per rollout cheaper. POST
// /v1/responses, /ng-rollout/{rollout_id}/v1/responses and
// /ng-rollout/{rollout_id}/training-token-capture/v1/responses still serve
// outside callers with that code: the request's cookies go to the
// resources server, a prefix is kept on the model calls, and the answer
// sets the resources and model cookies the episode ended with.
//
// # Telemetry
//
// With every group on, a rollout's trace is:
//
//	POST /run                          SERVER span (runtime)
//	└─ gym.rollout                     rollout group
//	   ├─ HTTP POST                    CLIENT span: .../seed_session
//	   ├─ gym.agent.responses          agent group
//	   │  ├─ HTTP POST                 CLIENT span, one per model call: .../v1/responses
//	   │  └─ HTTP POST                 CLIENT span, one per tool call: .../<tool>
//	   └─ HTTP POST                    CLIENT span: .../verify
//
// CLIENT spans are named as upstream's egress client names them; the
// route is in url.full. Both gym.* spans carry nemo.gym.server.name, and
// when the row has a rollout id (row.ResolveRolloutID: an explicit
// _ng_rollout_id, else "<task index>-<rollout index>", "-a<n>" for a
// re-dispatch attempt) every span of the rollout carries it as
// nemo.gym.rollout.id: the /run SERVER span, gym.rollout,
// gym.agent.responses and each CLIENT span here, and, downstream, the
// model and resources servers' spans, which read it from the path prefix
// below or from the W3C baggage it also travels in. A row without one
// gets none. /run answers with a W3C traceresponse header naming the
// rollout's trace, so a collector can file the rollout under it, unless
// the trace is the caller's and the agent recorded no span in it (sampled
// out): the header would repeat the caller's own traceparent.
//
// # The rollout id on the wire
//
// Upstream's server client puts a known rollout id in the path of a
// rollout's calls, "/ng-rollout/<id>" before the route
// (/ng-rollout/3-1/verify), when the fleet config's top-level
// observability_enabled is true; its resources and model servers strip
// the prefix before routing (a resources server whatever its own
// telemetry) and label their spans with the id. This agent prefixes a
// rollout's calls to the resources server (seed_session, each tool route,
// verify) and its model calls (/v1/responses) when observability_enabled
// is true (Config.ObservabilityEnabled, which `gymlens serve` sets from the
// fleet config) OR when this process exports traces and the rollout's
// trace was not sampled out: a fleet that traces then gets the id on the
// gym.verify span of a Python resources server too, with no key to set,
// and a fleet exporting metrics only, or a dropped trace, pays nothing
// for an id no span would carry. /aggregate_metrics, which belongs to no
// rollout, is never prefixed. A prefixed /v1/responses of the agent's own
// keeps its prefix on the model calls, as upstream's does, and, beyond
// upstream (whose prefixed /v1/responses has no rollout context), on the
// episode's tool calls.
//
// # Metrics
//
// Every rollout that passed request validation is recorded exactly once
// with metrics.RecordRollout, failed ones included. Each model call is
// recorded into gym.model.call_duration_ms and
// gym.model.time_to_first_byte_ms (dialect responses, the model server's
// instance name; the first byte is when the answer's headers arrived)
// and into the GenAI conventions' gen_ai.client.operation.duration and
// gen_ai.client.token.usage; each turn (a model call and the tool calls it
// asks for) into gym.agent.turn_duration_ms and each episode's number of
// turns into gym.agent.turn_count (by this agent's server name); each tool
// call into gym.tool.call_duration_ms (tool name, resources server name).
// With metrics off none of it reads a clock of its own (the episodes
// registry below reads one as each step starts and ends, whatever).
//
// # Episodes in flight
//
// Whatever its telemetry, the agent keeps a live.Episodes registry: each
// /run and each /v1/responses call is an episode named by its rollout id
// (one without an id is counted, not listed), and its seed_session, each
// model call, each tool call and its verify are steps with their HTTP
// status (0 when no answer came). GET live.EpisodesPath (RouteEpisodes)
// answers the live.EpisodesReport: the episodes in flight, their recent
// steps, and every stage's count, success rate and latency percentiles
// over the last minute. With a head token (Config.HeadToken) it answers
// only a request carrying it as a bearer token, else 401. The report
// holds ids, stages, times and statuses: no prompt, answer, header or
// cookie. docs/live.md describes its schema.
//
// # GenAI conventions
//
// A model call's CLIENT span carries gen_ai.operation.name "chat",
// gen_ai.provider.name "openai" (the model server speaks OpenAI's
// Responses API, whatever answers behind it), gen_ai.request.model (when
// the parameters name one), and, for an answer, gen_ai.response.model,
// gen_ai.response.id, gen_ai.usage.input_tokens and output_tokens and
// gen_ai.response.finish_reasons (the answer's status mapped as a chat
// completion's finish_reason would read: see
// contract.ResponseFinishReason). They are computed only when the span
// records, from the answer the episode decodes anyway.
//
// Prompts, model output and tool arguments are never put on spans.
package agent
