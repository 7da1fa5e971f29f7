// Package telfile defines gymlens's on-disk telemetry format and reads it
// back.
//
// A telemetry file is JSON Lines: every line is one compact JSON object
// whose "type" field says what the line holds. A writer emits a "resource"
// header describing the producing process before its first record, then any
// mix of "span", "metric" and "log" lines. Several writers (or several runs
// of the same program) may append to one file, so a file can contain more
// than one header; each header applies to the records that follow it.
//
// This package is deliberately free of OpenTelemetry imports. It is the
// single definition of the format: the exporters in lens/internal/fileexport
// encode through these types, and tools that analyse recorded runs decode
// with [Read] or [ReadFile] (or walk the lines with a [Scanner]) without
// pulling in the SDK.
//
// The current layout is format 1 ([FormatVersion]). Readers ignore JSON
// fields they do not know, so optional fields can be added without a version
// bump; a header announcing a larger format number is rejected.
package telfile
