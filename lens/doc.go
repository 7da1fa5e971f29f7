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
//	   ├── tracer: the SDK's (sampler and limits from OTEL_*) ──► batch span processor per exporter
//	   │                                                  └──► Options.SpanProcessors
//	   ├── meter and logger: the OpenTelemetry SDK's
//	   ├── global providers + W3C trace-context/baggage propagators
//	   └── gate mask published: Enabled(g) becomes true for resolved groups
//
// Why a bit mask: instrumentation sites sit on hot paths, and a site whose
// group is off must cost one atomic load and a bit test, nothing more. All
// attribute building and span creation belongs inside `if lens.Enabled(g)`.
//
// Spans come from the OpenTelemetry SDK's tracer provider, so the SDK's
// standard settings hold in every process: OTEL_TRACES_SAMPLER and
// OTEL_TRACES_SAMPLER_ARG (with parentbased_traceidratio a rollout is kept
// or dropped whole, since every process follows the sampled flag of the
// trace context it receives), and the OTEL_SPAN_*, OTEL_EVENT_* and
// OTEL_LINK_* count limits; attribute values are cut at
// OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT (8 KiB unless set; the SDK's default is
// none). The run-directory and console exporters are
// sdktrace.SpanExporters; over OTLP the official trace exporters send them,
// each batch in requests kept under MaxExportRequestBytes. Each exporter
// sits behind the SDK's batch span processor, wrapped so that every span it
// is offered is accounted for: delivered, dropped with the queue full, in a
// failed export, or still queued when shutdown ran out of time
// (Handle.SpanStats). Log records are accounted for the same way behind
// the SDK's batch log record processor (Handle.LogStats), and metric data
// points as delivered or in a failed export (Handle.MetricStats). At
// shutdown the accounts are logged and appended to the FILE_PATH file,
// whatever the exporter, for the run to read (contract.SDKSpanProcessed,
// SDKSpanExported, SDKMetricPointExported, SDKLogProcessed,
// SDKLogExported).
//
// Nothing here waits on a collector outside Shutdown and ForceFlush, which
// flush the three signals at once under one deadline: their context's, or
// the OTLP export timeout (OTEL_EXPORTER_OTLP_TIMEOUT) from the call. Incoming baggage is read by lens's own propagator, so a
// client's malformed header is dropped with a debug line rather than
// reported to the SDK's error handler as an export error. The W3C trace
// context is lens's own propagator too: it extracts and injects exactly
// what the SDK's does (a differential test and fuzz target hold it to
// that), but reads and writes an http.Header without canonicalising names,
// and a request made under a context with no span of this process in it
// (a sampled-out trace) forwards the incoming traceparent value as it came,
// without formatting or allocating.
package lens
