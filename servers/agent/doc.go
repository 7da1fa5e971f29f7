// Package agent is the built-in responses_api_agents server, NeMo Gym's
// "simple_agent": POST /run takes one dataset row and answers with its
// verification, after an episode in which the model's function calls are
// executed as the resources server's tool routes.
//
// # One rollout
//
//	POST /run (row)
//	├─ POST resources/seed_session     body: the row; cookies: the inbound ones
//	├─ episode                         cookies: the seed answer's
//	│  ├─ POST model/v1/responses      body: params, input = row input + items so far
//	│  ├─ POST resources/<tool>        body: parsed arguments; answer of any status = output
//	│  └─ ... until an answer, an incomplete response, or max_steps
//	└─ POST resources/verify           body: row + {"response": episode}
//	                                   cookies: the episode's last resources and
//	                                   model cookies, and the agent's own
//
// The answer is the verify JSON as the resources server gave it, byte for
// byte (whitespace around the value aside): it is checked
// (protocol.CheckVerifyResponse), not decoded and encoded again. A non-2xx
// answer from the seed, a model call or verify, an invalid model or verify
// answer, an unreachable peer, or an explicit
// _ng_rollout_id upstream would refuse fails the rollout: /run answers 500,
// as upstream's does. A tool route's answer is never a failure, whatever
// its status: its text is what the model sees next. Arguments that are not
// JSON give the output {"error": "Invalid tool call arguments: ..."} with
// no call.
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
//	   ├─ POST /seed_session           CLIENT span
//	   ├─ gym.agent.responses          agent group
//	   │  ├─ POST /v1/responses        CLIENT span, one per model call
//	   │  └─ POST /<tool>              CLIENT span, one per tool call
//	   └─ POST /verify                 CLIENT span
//
// Both gym.* spans carry nemo.gym.server.name and, when the row has one
// (row.ResolveRolloutID: an explicit _ng_rollout_id, else
// "<task index>-<rollout index>"), nemo.gym.rollout.id, which also travels
// on as baggage for the model and resources servers' spans; a row without
// one gets none. /run answers with a W3C traceresponse header naming the
// rollout's trace, so a collector can file the rollout under it. Every
// rollout that passed request validation is recorded exactly once with
// metrics.RecordRollout, failed ones included.
//
// Prompts, model output and tool arguments are never put on spans.
package agent
