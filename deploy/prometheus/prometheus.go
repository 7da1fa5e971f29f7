// Package prometheus carries the Prometheus files gymlens ships for a
// fleet, embedded so that a gymlens binary can copy them next to the scrape
// configuration it generates without knowing where the source tree is.
//
// rules.yml holds the recording rules (fleet verify and rollout success
// rates from the outcome counters, rollout p95, per-route request p95)
// and the GymServersBelowStarted alert; rules_test.yml is its promtool
// unit test. Both use the series names the in-process exporter produces
// (NeMo Gym's, listed in docs/observability/metrics.md); the package's
// tests hold every series, label and bucket bound they use to the
// contract package, and run promtool when it is installed.
package prometheus

import _ "embed"

// RulesFile is the file name of the shipped rules.
const RulesFile = "rules.yml"

//go:embed rules.yml
var rules string

// Rules returns the content of rules.yml.
func Rules() string { return rules }
