// Package lens is the generic OpenTelemetry layer of gymlens.
//
// It knows nothing about Gym servers. It reads its configuration from the
// environment (a primary variable prefix with a fallback prefix), keeps the
// per-process span-group gate, decides through an export strategy whether this
// process exports at all, and builds the tracer, meter and logger providers
// behind a [Handle].
//
// Call flow in one process:
//
//	LoadConfig(env)            strict parsing, every value remembers its source
//	   │
//	Setup(cfg, opts) ──► export strategy says no ──► no-op Handle, gate all off
//	   │ yes
//	   ├── exporters (otlp | console | prometheus | file) per signal
//	   ├── tracer: lens's own (internal/tracer) ──► span batcher ──► exporters
//	   ├── meter and logger: the OpenTelemetry SDK's
//	   ├── global providers + W3C trace-context/baggage propagators
//	   └── gate mask published: Enabled(g) becomes true for resolved groups
//
// Why a bit mask: instrumentation sites sit on hot paths, and a site whose
// group is off must cost one atomic load and a bit test, nothing more. All
// attribute building and span creation belongs inside `if lens.Enabled(g)`.
//
// Why a tracer of its own: a fleet server starts a span or more for every
// request, and the SDK's span was the largest single cost telemetry added
// per rollout (see internal/tracer). lens's spans implement the same
// trace.Span API and are encoded in place by the run-directory and console
// exporters; over OTLP, internal/otlpenc maps them to the protobuf and the
// official OTLP trace clients send it; an exporter written for the SDK
// (Options.SpanExporter) receives them in the SDK's read-only form.
// Metrics and logs stay on the SDK.
package lens
