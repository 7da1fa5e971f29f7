// Package server is the HTTP runtime every Gym server process runs on.
//
// Endpoints are typed: a handler is func(ctx, Req) (Resp, error) and the
// runtime owns decoding, size limits, encoding and error mapping, so a
// malformed body is a 400 naming the problem, an oversized one a 413, and a
// returned error or a panic a 500 that leaves the process serving.
//
// The runtime also keeps a server standing against callers that hold on:
// header, whole-request, write and idle timeouts, a connection cap that
// closes idle connections first and keeps file descriptors in reserve, a
// concurrent-request cap answered 503 with Retry-After, and a budget on
// the decoded size of a body answered 413. Settings is their one table
// (Options fields, defaults, GYM_SERVER_* variables).
//
// Telemetry sits at the two edges and nowhere else:
//
//	ingress:  per-route middleware ─► SERVER span named by the route
//	          pattern ("POST /verify"), http.server.request.duration with
//	          http.route from the pattern, never the raw path; everything
//	          static per route is computed once when the server starts
//	egress:   Client.PostJSON ─► one CLIENT span per logical call (not per
//	          retry), W3C traceparent injected, URL without query string
//
// Server spans are gated on the server span group and client spans on
// http_client; when a group is off the trace context still flows through,
// so a trace stays whole across a process that does not record.
package server
