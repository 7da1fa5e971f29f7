// Package tracer is lens's implementation of the OpenTelemetry trace API:
// a TracerProvider whose spans cost a fraction of the SDK's on the request
// path, for processes that start several spans per request.
//
// Why not the SDK's tracer: on a fleet serving rollouts with a fast model,
// every request starts and ends a span, and the SDK's span (lock, start
// config copies, a de-duplication map and a full snapshot copy at End: six
// allocations and about 1.4 KB per span) was the largest single part of
// what telemetry cost per rollout. A span here is one allocation with room
// for five attributes inline; at End it is handed to the processors as is
// (it no longer changes, so it is its own snapshot), and the exporters read
// it in place.
//
// Semantics follow the SDK's defaults where a user could tell: a span
// whose parent is sampled (or that has no parent) records; one whose
// parent is not sampled does not record but carries a span context of its
// own, so the trace continues downstream. Attribute keys are unique (a
// later value replaces an earlier one), and at most 128 attributes, events
// and links are kept per span (the SDK's default limits; beyond them new
// attributes are dropped and the oldest events and links make room), the
// rest counted as dropped. The OTEL_SPAN_*_LIMIT variables are not read. What is not provided: the SDK's span processor and sampler
// plug-ins, and recording a panic from within End (lens.Run records panics
// itself).
//
// Exporters written for the SDK still work: [Span.Snapshot] turns a
// finished span into the SDK's read-only form.
package tracer
