// Package fileexport writes OpenTelemetry spans, metrics and logs to a local
// file in gymlens's own telemetry format (see lens/telfile).
//
// A [Sink] owns one destination. Its three exporters may all be used at
// once: SpanExporter, MetricExporter and LogExporter plug into the SDK's
// tracer (behind a batch span processor), meter and logger providers. Every export is encoded in memory and appended
// under the sink's lock in writes of whole lines (one Write per batch, except
// that a large span batch goes in pieces of about 64 KiB), so lines from
// different signals never interleave and a crash can cut off at most the
// final line. The reader in lens/telfile recognises such a cut off final
// line and reports it as telfile.ErrTruncated.
//
// The sink writes a resource header line lazily, just before its first
// batch. Opening the same file again (for example on the next run) appends a
// new header followed by that run's records.
package fileexport
