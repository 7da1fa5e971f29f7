// Package model is the fleet's model server, NeMo Gym's policy_model: a
// responses_api_models server that answers POST /v1/responses (the
// Responses API, which the agent calls) and POST /v1/chat/completions.
//
// # Requests and answers
//
// /v1/responses takes protocol.ResponseCreateParams under upstream's
// strict schema: an unknown member (prompt_cache_key, conversation, ...),
// a wrong type or a bad literal is a 422 in FastAPI's shape, located
// under "body". Streaming is not supported: stream true is a 422 whose
// message says so (upstream would replay the answer as server-sent
// events). The answer is a complete protocol.Response: every required
// member, the request's parallel_tool_calls, tool_choice and tools echoed
// with upstream's defaults (true, "auto", []), and a usage object with
// both detail objects.
//
// /v1/chat/completions takes the chat request upstream accepts (messages
// required, unknown members ignored) and answers an OpenAI chat
// completion object (ChatCompletion).
//
// Both routes are also served under /ng-rollout/<id>/ (and
// /ng-rollout/<id>/training-token-capture/) when the server is built with
// ServerOptions; the id goes on the route's span.
//
// # Modes
//
// In built-in mode (the default) a deterministic policy answers, so a
// fleet runs offline (see Decide and Answer):
//
//	counter tools offered   one increment_counter call per "add N" of the
//	                        last user message, then get_counter_value,
//	                        one call per turn, then "The count is X."
//	"What is A op B?"       the result, right with probability
//	                        CorrectProbability, formatted as the question
//	                        asks (an option letter, the bare number,
//	                        \boxed{N}, or "The answer is N.")
//	anything else           "I don't know"
//
// The draw is seeded from (Seed, message text): the same question under
// the same seed always gets the same answer, whatever ran before.
//
// # Stalls
//
// StallTasks and StallSeconds make a fault visible on purpose: the first
// model call of a rollout whose task index is in StallTasks waits
// StallSeconds before it is answered, in either mode and on both routes,
// and returns at once when its caller goes away. The server knows a
// call's task from the rollout id it carries (the /ng-rollout/<id>/
// prefix, else the W3C baggage), when that id has upstream's form
// "<task index>-<rollout index>[-a<attempt>]"; an agent sends it while
// the fleet sets observability_enabled or traces are exported. A call
// without such an id, or with an explicit _ng_rollout_id of another form,
// never stalls. The first call of an episode is the one that carries no
// session cookie of this server: agents send back the model's cookies
// from its second call on, so every later call of the episode, and every
// call of the other tasks, is answered at once. Each retry attempt of a
// task is an episode of its own and stalls again.
//
// In upstream mode (Upstream.BaseURL, or upstream's openai_base_url) the
// server forwards to an OpenAI-compatible endpoint with a bearer key.
// Upstream.API chooses where /v1/responses goes: "chat_completions" (the
// default) translates the request to <base>/v1/chat/completions (messages,
// tool calls and tool outputs both ways) and maps the first choice back;
// "responses" posts the request as it came, model replaced, to
// <base>/v1/responses and refuses (502) an answer that fails the response
// schema. /v1/chat/completions is always forwarded to the upstream's chat
// completions, each member as NeMo Gym's request model holds it once
// validated ("5" as 5), model replaced, and its answer returned as it
// came once it passes NeMo Gym's chat completion model (else a 502).
//
// # Telemetry
//
// One request is one gym.model.responses (or gym.model.chat_completions)
// span in the model_call group, carrying the server name, the request and
// response model, the token usage, the mode and the rollout id, never
// prompt or output text. In upstream mode each call is also a CLIENT span
// in the http_client group. The API key stays out of logs, errors and
// spans, and upstream URLs are shown without query string or credentials.
package model
