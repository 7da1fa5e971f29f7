package lens

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// The standard sampler variables. lens does not read them into its Config:
// it builds the sampler from them as the SDK's tracer provider would (see
// samplerFromEnv), in every process.
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
	_, info := samplerFromEnv(getenv)
	return info
}

// samplerFromEnv builds the sampler the SDK would build from the
// variables read through getenv, and describes it. lens hands the sampler
// to the tracer provider itself, so the one gymlens telemetry check describes
// is the one in use by construction.
func samplerFromEnv(getenv func(string) string) (sdktrace.Sampler, SamplerInfo) {
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
	return s, info
}

// followsUnsampledParent reports whether the sampler named name (as
// SamplerInfo.Name spells it) always drops a span whose parent was sampled
// out, remote or local: every parent-based sampler with the SDK's default
// delegates does, and always_off drops everything. Under such a sampler a
// span started beneath an unsampled parent is never recorded, so lens does
// not ask the SDK for one (see followingTracer).
func followsUnsampledParent(name string) bool {
	return name == "always_off" || strings.HasPrefix(name, "parentbased_")
}

// followingTracer is the SDK tracer of a process whose sampler follows an
// unsampled parent. Under a valid, unsampled parent it returns the context
// as it is and the parent's own non-recording span, which is what the SDK
// would decide, without the span id, the sampler call and the two
// allocations the SDK pays for a span it will not record. The trace id and
// the sampled-out flag flow on to the calls made under it unchanged, so
// downstream processes drop the trace too. A span asked to be a new root
// is started by the SDK as usual.
type followingTracer struct{ trace.Tracer }

// Start begins a span, as trace.Tracer's Start, skipping the SDK when the
// parent was sampled out.
func (t followingTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if psc := trace.SpanContextFromContext(ctx); psc.IsValid() && !psc.IsSampled() && !newRoot(opts) {
		return ctx, trace.SpanFromContext(ctx)
	}
	return t.Tracer.Start(ctx, name, opts...)
}

// newRoot reports whether opts ask for a new root span.
func newRoot(opts []trace.SpanStartOption) bool {
	if len(opts) == 0 {
		return false
	}
	c := trace.NewSpanStartConfig(opts...)
	return c.NewRoot()
}

// SampledOut reports whether ctx belongs to a trace this process's sampler
// has dropped: ctx carries a valid span context that is not sampled, and
// the live handle's sampler follows an unsampled parent, so no span
// started under ctx will be recorded here, nor, with the same sampler, in
// any process the trace reaches. Work done only for spans (their
// attributes, a rollout id sent for the callee's spans) can be skipped.
// False without a live handle that exports traces.
func SampledOut(ctx context.Context) bool {
	h := live.Load()
	if h == nil || !h.followsParent {
		return false
	}
	psc := trace.SpanContextFromContext(ctx)
	return psc.IsValid() && !psc.IsSampled()
}
