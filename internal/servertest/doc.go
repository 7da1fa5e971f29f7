// Package servertest runs the built-in servers for real inside a test: on a
// loopback port, served by the actual runtime, and stopped before the test
// ends. It also switches in-process telemetry on for tests that assert on
// spans and metrics.
//
// It deliberately imports no OpenTelemetry SDK package (the layering rule
// keeps those inside lens and telemetry); tests hand in their own reader and
// exporter through telemetry.InitOptions.
package servertest
