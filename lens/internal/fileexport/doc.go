// Package fileexport writes OpenTelemetry spans, metrics and logs to a local
// file in gymlens's own telemetry format (see internal/telfile).
//
// A [Sink] owns one destination. Its three exporters (SpanExporter,
// MetricExporter and LogExporter) plug into the SDK providers and may all be
// used at once: every export call is encoded completely in memory and then
// appended with a single Write while holding the sink's lock, so batches from
// different signals never interleave and a crash can cut off at most the
// batch being written. The reader in internal/telfile recognises such a cut
// off final line and reports it as telfile.ErrTruncated.
//
// The sink writes a resource header line lazily, just before its first
// batch. Opening the same file again (for example on the next run) appends a
// new header followed by that run's records.
package fileexport
