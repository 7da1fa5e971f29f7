package lens

import (
	"fmt"
	"strconv"
	"strings"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The standard sampler variables. lens does not read them into its Config:
// the SDK's tracer provider reads them itself, in every process.
const (
	KeyTracesSampler    = "OTEL_TRACES_SAMPLER"
	KeyTracesSamplerArg = "OTEL_TRACES_SAMPLER_ARG"
)

// DefaultSampler is the sampler the SDK uses when OTEL_TRACES_SAMPLER is
// unset or names no sampler it knows.
const DefaultSampler = "parentbased_always_on"

// SamplerInfo describes the sampler the SDK will build from the
// environment (see DescribeSampler).
type SamplerInfo struct {
	// Name is the sampler in use, as OTEL_TRACES_SAMPLER spells it
	// (lower-cased); DefaultSampler when unset or unknown.
	Name string `json:"name"`
	// Arg is the ratio the sampler uses, for the traceidratio samplers
	// only ("" otherwise).
	Arg string `json:"arg,omitempty"`
	// Description is the SDK sampler's own description.
	Description string `json:"description"`
	// FromEnv reports whether OTEL_TRACES_SAMPLER chose the sampler.
	FromEnv bool `json:"from_env"`
	// Problem, when not empty, says what in the variables the SDK will
	// reject, and what it falls back to.
	Problem string `json:"problem,omitempty"`
}

// DescribeSampler reads OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG
// through getenv by the SDK's rules (names are case-insensitive and
// trimmed; the traceidratio samplers take a ratio in [0, 1], 1 when the
// argument is missing and also when it is malformed; an unknown name means
// the default) and says which sampler the tracer provider will use.
func DescribeSampler(getenv func(string) string) SamplerInfo {
	name := strings.ToLower(strings.TrimSpace(getenv(KeyTracesSampler)))
	arg := strings.TrimSpace(getenv(KeyTracesSamplerArg))
	info := SamplerInfo{Name: name, FromEnv: name != ""}
	ratio := func() float64 {
		if arg == "" {
			info.Arg = "1"
			return 1
		}
		v, err := strconv.ParseFloat(arg, 64)
		switch {
		case err != nil:
			info.Problem = fmt.Sprintf("%s=%q is not a number; the SDK uses 1", KeyTracesSamplerArg, arg)
		case v < 0 || v > 1:
			info.Problem = fmt.Sprintf("%s=%s is outside [0, 1]; the SDK uses 1", KeyTracesSamplerArg, arg)
		default:
			info.Arg = arg
			return v
		}
		info.Arg = "1"
		return 1
	}
	var s sdktrace.Sampler
	switch name {
	case "always_on":
		s = sdktrace.AlwaysSample()
	case "always_off":
		s = sdktrace.NeverSample()
	case "traceidratio":
		s = sdktrace.TraceIDRatioBased(ratio())
	case "parentbased_always_on":
		s = sdktrace.ParentBased(sdktrace.AlwaysSample())
	case "parentbased_always_off":
		s = sdktrace.ParentBased(sdktrace.NeverSample())
	case "parentbased_traceidratio":
		s = sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio()))
	default:
		if name != "" {
			info.Problem = fmt.Sprintf("%s=%q is not a sampler the SDK knows; it uses %s", KeyTracesSampler, name, DefaultSampler)
		}
		info.Name, info.FromEnv = DefaultSampler, false
		s = sdktrace.ParentBased(sdktrace.AlwaysSample())
	}
	info.Description = s.Description()
	return info
}
