package contract

// Span accounting. Every process that exports spans writes, when its
// telemetry shuts down, what became of every span it ended: two counters
// named as the OpenTelemetry semantic conventions name the SDK's own
// self-observability metrics, so a dashboard built on the SDK's metrics
// reads gymlens's too. They go to the process's file in RunTelemetryDir
// (whatever the exporter: over OTLP a dead collector would swallow the very
// record of its losses) as ordinary metric lines, which every reader of the
// format already understands, and the report and `gymlens run` read them back.
//
// SDKSpanProcessed counts the spans a batch processor was handed, by
// outcome: no error type for those it passed on to its exporter,
// SpanLossQueueFull for those dropped because its queue was full,
// SpanLossUnflushed for those still queued when shutdown ran out of time.
// SDKSpanExported counts the spans passed on to the exporter: no error
// type for those it delivered, SpanLossExportFailed for those in a failed
// export. A process lost every span with an error type.
const (
	SDKSpanProcessed = "otel.sdk.processor.span.processed"
	SDKSpanExported  = "otel.sdk.exporter.span.exported"

	// AttrComponentName and AttrComponentType name the processor or
	// exporter a point counts for (the exporter setting's name, and the
	// semantic conventions' component type).
	AttrComponentName = "otel.component.name"
	AttrComponentType = "otel.component.type"

	// Values of AttrErrorType on the two counters.
	SpanLossQueueFull    = "queue_full"
	SpanLossUnflushed    = "unflushed"
	SpanLossExportFailed = "export_failed"
)

// Metric and log accounting, written with the span account, in the same
// record and with the same error types. SDKMetricPointExported counts the
// metric data points passed on to an exporter: no error type for those it
// delivered, SpanLossExportFailed for those in a failed export (each
// export carries every cumulative point again, so this counts points per
// export, not distinct series). SDKLogProcessed and SDKLogExported count
// log records as the two span counters count spans.
const (
	SDKMetricPointExported = "otel.sdk.exporter.metric_data_point.exported"
	SDKLogProcessed        = "otel.sdk.processor.log.processed"
	SDKLogExported         = "otel.sdk.exporter.log.exported"
)
