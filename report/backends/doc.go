// Package backends reads a run back from the backends a fleet exported to,
// Jaeger (its HTTP query API) and Prometheus (its HTTP API), by run id, so
// that a run spread over several hosts is reported without copying files.
//
// It writes what it reads in the run directory's layout: one
// telemetry/<process>.jsonl file per process (the lens/telfile format: a
// resource line, the process's spans from Jaeger, its metric series from
// Prometheus), which report.Load then reads as it reads any run. A process
// is told apart by its service.instance.id and process.pid in both
// backends, so its spans and its series land in one file. Rollouts,
// failures and the config are not in the backends; Fetch copies them from
// a run directory when one is given (the head host's), so the report has
// every section a run directory gives.
//
// What the backends hold is what the tier kept: under tail sampling Jaeger
// has a share of the traces (every failed one), Prometheus every series,
// at its scrape resolution. Stats says how much was read, and the report's
// notes say when a limit cut a search short.
package backends
