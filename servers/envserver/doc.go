// Package envserver holds the built-in environment servers
// (environment_servers): the fourth server type of NeMo Gym 0.7, through
// which rollout collection reaches agents. Upstream's collector resolves
// each row's agent to the one environment server that names it and posts
// /run, and later /aggregate_metrics, there rather than to the agent.
//
// The one implementation is legacy_agent (ServerName), a relay in front of
// an agent that still owns its episode through /run. It translates
// nothing: POST /run goes to its agent_server with the caller's body,
// cookies and headers (minus those that describe a connection or a body,
// see RelayedHeader; a repeated one with its last value, as upstream's
// relay sends it), and the agent's status, headers (every Set-Cookie and
// traceresponse included) and body come back unchanged. POST
// /aggregate_metrics is checked as upstream checks it (verify_responses is
// required), forwarded, and the agent's answer returned with upstream's
// five keys. gymconfig generates one such relay for every agent no
// environment server names, as upstream's config parser does.
//
// The relay runs on package server like every built-in server: its routes
// are instrumented at ingress, its calls to the agent are server.Client
// calls (one CLIENT span each, the trace context passed on).
package envserver
