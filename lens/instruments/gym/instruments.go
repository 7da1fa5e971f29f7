package gym

import (
	"context"
	"errors"
	"fmt"
	"math"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Instrument names, as NeMo Gym spells them.
const (
	RolloutDurationName       = "gym.rollout.duration_ms"
	VerifyDurationName        = "gym.verify.duration_ms"
	VerifySuccessRateName     = "gym.verify.success_rate"
	ServersActiveName         = "gym.servers.active"
	ServerRequestDurationName = "gym.server.request_duration_ms"
	VerifyCallsName           = "gym.verify.calls"
	RolloutCallsName          = "gym.rollout.calls"
)

// Outcome attribute keys and values of the two counters.
const (
	VerifyOutcomeKey  = "nemo.gym.verify.outcome"
	RolloutOutcomeKey = "nemo.gym.rollout.outcome"
	OutcomeSuccess    = "success"
	OutcomeFailure    = "failure"
)

// HistogramPattern matches the name of every gym.* instrument; a view on it
// with the histogram kind selects the gym duration histograms.
const HistogramPattern = "gym.*"

// DefaultBucketsMS are the bucket boundaries, in milliseconds, the gym
// duration histograms export by default. The instruments set none, as NeMo
// Gym's do, so these are the OpenTelemetry SDK's default explicit buckets;
// the slice only states them (for the report, the docs and the tests).
// Treat it as read-only.
var DefaultBucketsMS = []float64{0, 5, 10, 25, 50, 75, 100, 250, 500, 750, 1000,
	2500, 5000, 7500, 10000}

// Names returns every declared instrument name.
func Names() []string {
	return []string{RolloutDurationName, VerifyDurationName, VerifySuccessRateName,
		ServersActiveName, ServerRequestDurationName, VerifyCallsName, RolloutCallsName}
}

// Kind says what one Measurement is.
type Kind uint8

// Measurement kinds accepted by Record.
const (
	// KindRolloutDuration records Value (ms) into gym.rollout.duration_ms.
	KindRolloutDuration Kind = iota + 1
	// KindRollout records Value (ms) into gym.rollout.duration_ms and
	// counts the rollout's outcome in gym.rollout.calls.
	KindRollout
	// KindVerify records Value (ms) into gym.verify.duration_ms and folds
	// the outcome into gym.verify.success_rate and gym.verify.calls.
	KindVerify
	// KindServersActive sets gym.servers.active to Value.
	KindServersActive
)

// Measurement is one thing to record.
type Measurement struct {
	Kind Kind
	// Value is a duration in milliseconds, or the server count.
	Value float64
	// Succeeded is the outcome for KindRollout and KindVerify.
	Succeeded bool
}

// ErrInvalidValue is returned by Record for a negative, NaN or infinite
// value, or an unknown kind; nothing is recorded then.
var ErrInvalidValue = errors.New("gym: invalid measurement")

// Instruments are the gym.* instruments of one meter, with the tallies
// behind the observable ones.
type Instruments struct {
	rolloutDuration metric.Float64Histogram
	verifyDuration  metric.Float64Histogram
	// requestDuration is declared and deliberately never recorded.
	requestDuration metric.Float64Histogram
	serversActive   metric.Int64Gauge
	successRate     metric.Float64ObservableGauge
	verifyCalls     metric.Int64ObservableCounter
	rolloutCalls    metric.Int64ObservableCounter
	registration    metric.Registration

	verify  Tally
	rollout Tally
}

var (
	verifySuccess  = metric.WithAttributeSet(attribute.NewSet(attribute.String(VerifyOutcomeKey, OutcomeSuccess)))
	verifyFailure  = metric.WithAttributeSet(attribute.NewSet(attribute.String(VerifyOutcomeKey, OutcomeFailure)))
	rolloutSuccess = metric.WithAttributeSet(attribute.NewSet(attribute.String(RolloutOutcomeKey, OutcomeSuccess)))
	rolloutFailure = metric.WithAttributeSet(attribute.NewSet(attribute.String(RolloutOutcomeKey, OutcomeFailure)))
)

// New creates the instruments on m and registers the callback that exports
// the tallies. Create them once per meter (the telemetry package does so at
// start-up); New is safe to call concurrently, and the SDK hands back the
// same underlying instruments for the same meter.
func New(m metric.Meter) (*Instruments, error) {
	i := &Instruments{}
	var errs []error
	hist := func(name, desc string) metric.Float64Histogram {
		// No bucket boundaries: the reader's (by default the SDK's
		// default explicit buckets, DefaultBucketsMS) apply, as upstream.
		h, err := m.Float64Histogram(name, metric.WithUnit("ms"), metric.WithDescription(desc))
		errs = append(errs, err)
		return h
	}
	i.rolloutDuration = hist(RolloutDurationName, "Wall-clock duration of one rollout, failed ones included.")
	i.verifyDuration = hist(VerifyDurationName, "Wall-clock duration of one verification.")
	i.requestDuration = hist(ServerRequestDurationName, "Declared for compatibility and never recorded; use http.server.request.duration.")

	var err error
	i.serversActive, err = m.Int64Gauge(ServersActiveName, // no unit, as upstream
		metric.WithDescription("Servers the orchestrator runs; written by the orchestrator only."))
	errs = append(errs, err)
	i.successRate, err = m.Float64ObservableGauge(VerifySuccessRateName, // no unit, as upstream
		metric.WithDescription("Cumulative fraction of verifications that completed, since process start."))
	errs = append(errs, err)
	i.verifyCalls, err = m.Int64ObservableCounter(VerifyCallsName, metric.WithUnit("{call}"),
		metric.WithDescription("Verifications by outcome."))
	errs = append(errs, err)
	i.rolloutCalls, err = m.Int64ObservableCounter(RolloutCallsName, metric.WithUnit("{rollout}"),
		metric.WithDescription("Rollouts by outcome."))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("gym: create instruments: %w", err)
	}
	i.registration, err = m.RegisterCallback(i.observe, i.successRate, i.verifyCalls, i.rolloutCalls)
	if err != nil {
		return nil, fmt.Errorf("gym: register callback: %w", err)
	}
	return i, nil
}

// observe runs at collection time. Series appear only once something was
// counted, so a process that never verifies exports no verify series.
func (i *Instruments) observe(_ context.Context, o metric.Observer) error {
	if ok, fail := i.verify.Counts(); ok+fail > 0 {
		o.ObserveFloat64(i.successRate, float64(ok)/float64(ok+fail))
		o.ObserveInt64(i.verifyCalls, clampInt64(ok), verifySuccess)
		o.ObserveInt64(i.verifyCalls, clampInt64(fail), verifyFailure)
	}
	if ok, fail := i.rollout.Counts(); ok+fail > 0 {
		o.ObserveInt64(i.rolloutCalls, clampInt64(ok), rolloutSuccess)
		o.ObserveInt64(i.rolloutCalls, clampInt64(fail), rolloutFailure)
	}
	return nil
}

func clampInt64(v uint64) int64 {
	if v > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(v)
}

// Record is the one entry point for every gym measurement. It never panics
// on bad input: a negative, NaN or infinite value, or an unknown kind, is
// refused with ErrInvalidValue and nothing is recorded. It allocates
// nothing and takes no lock.
func (i *Instruments) Record(ctx context.Context, m Measurement) error {
	if i == nil {
		return nil
	}
	if m.Value < 0 || math.IsNaN(m.Value) || math.IsInf(m.Value, 0) {
		return ErrInvalidValue
	}
	switch m.Kind {
	case KindRolloutDuration:
		i.rolloutDuration.Record(ctx, m.Value)
	case KindRollout:
		i.rolloutDuration.Record(ctx, m.Value)
		i.rollout.Add(m.Succeeded)
	case KindVerify:
		i.verifyDuration.Record(ctx, m.Value)
		i.verify.Add(m.Succeeded)
	case KindServersActive:
		if m.Value > math.MaxInt64 {
			return ErrInvalidValue
		}
		i.serversActive.Record(ctx, int64(m.Value))
	default:
		return ErrInvalidValue
	}
	return nil
}

// ResetVerifyTally zeroes the verify tally (tests use it).
func (i *Instruments) ResetVerifyTally() {
	if i != nil {
		i.verify.Reset()
	}
}

// Close unregisters the collection callback.
func (i *Instruments) Close() error {
	if i == nil || i.registration == nil {
		return nil
	}
	return i.registration.Unregister()
}
