// Package contract is the telemetry and layout contract of a gymlens
// fleet, in one place and free of OpenTelemetry: every instrument's name,
// kind, unit, bucket boundaries and attribute keys; every span name and
// span attribute key; the instrumentation scopes; the NeMo Gym server
// types; the layout of a run directory; and how a listen address is read
// (ListenAddr: an empty host is loopback).
//
// The contract is NeMo Gym's where NeMo Gym has one (the gym.* names, the
// nemo.gym.* attribute keys, the scopes, the server types), the
// OpenTelemetry semantic conventions' for the http.* and gen_ai.* names,
// and gymlens's own beyond them (Source says which). The servers, the
// collection driver, the report, the Prometheus rules and the docs all
// read their names from here; a test holds docs/observability/metrics.md
// to Instruments.
//
// The package imports only the standard library, so any program can use
// it to query a fleet's telemetry without linking an SDK.
package contract
