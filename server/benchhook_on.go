//go:build gymbench

package server

import "os"

// benchUninstrumentedEnv names the variable that, in a build with the
// gymbench tag only, makes every server of the process uninstrumented: no
// ingress instrumentation is installed, whatever the telemetry settings
// (no SERVER spans, no request-duration metric, incoming trace context
// ignored). scripts/bench-http.sh builds gym with the tag and sets it to 1
// for its "uninstrumented" baseline. Ordinary builds have neither the
// variable nor the behaviour.
const benchUninstrumentedEnv = "GYMLENS_BENCH_UNINSTRUMENTED"

// benchUninstrumented is read once, when the process starts.
var benchUninstrumented = os.Getenv(benchUninstrumentedEnv) == "1"
