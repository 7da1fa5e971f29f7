// Package counter is the built-in "counter" environment: a NeMo Gym
// resources server with per-rollout session state and two tools, the Go
// counterpart of upstream's example_session_state_mgmt, and the fleet's
// test of the session cookie.
//
// Each rollout has a counter in its session (the cookie every answer
// sets):
//
//	POST /seed_session       {"initial_count": N, ...the row}  -> {}
//	POST /increment_counter  {"count": N}                      -> {"success": true}
//	POST /get_counter_value  {}                                -> {"count": N}
//	POST /verify             the row with "expected_count"     -> reward 1 when the
//	                         session's counter equals it, else 0 (0 without a session)
//
// As upstream, a tool call on a session that was never seeded starts a
// counter at 0. Unlike upstream, seeding a session twice restarts its
// counter (upstream keeps the first); agents seed once per rollout, so
// both read the same. Sessions idle for longer than the SDK's
// DefaultSessionTTL, or beyond its DefaultMaxSessions, are dropped and
// then score 0.
//
// Tools returns the two tool definitions and Row builds a dataset row
// ("add 1 then add 2 then get the count") that the built-in offline
// policy solves by calling the tools in order.
package counter
