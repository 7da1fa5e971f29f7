package gym

import (
	"context"
	"errors"
	"fmt"
	"math"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/lens"
)

// Kind says what one Measurement is.
type Kind uint8

// Measurement kinds accepted by Record.
const (
	// KindRolloutDuration records Value (ms) into gym.rollout.duration_ms.
	KindRolloutDuration Kind = iota + 1
	// KindRollout records Value (ms) into gym.rollout.duration_ms and
	// counts the rollout in gym.rollout.completed_total by outcome.
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

// Instruments are the instruments of the contract's catalogue on one
// meter, with the tallies behind the observable ones. The synchronous
// instruments of the attributed catalogue are exported fields: the
// recorders in telemetry/metrics bind them to their attribute sets once
// and record through the bound values.
type Instruments struct {
	rolloutDuration lens.BoundHistogram[float64] // no attributes
	verifyDuration  lens.BoundHistogram[float64] // no attributes
	// requestDuration is declared and deliberately never recorded.
	requestDuration lens.Histogram[float64]
	serversActive   metric.Int64Gauge
	successRate     metric.Float64ObservableGauge
	verifyCalls     metric.Int64ObservableCounter

	// RolloutCompleted is gym.rollout.completed_total.
	RolloutCompleted lens.Counter
	// rolloutSucceeded and rolloutFailed are RolloutCompleted by outcome.
	rolloutSucceeded, rolloutFailed lens.BoundCounter
	// QueueWait is gym.concurrency.queue_wait_duration_ms.
	QueueWait lens.Histogram[float64]
	// AdmissionCancelled is gym.concurrency.admission_cancelled_total.
	AdmissionCancelled lens.Counter
	// ModelCallDuration is gym.model.call_duration_ms.
	ModelCallDuration lens.Histogram[float64]
	// ModelTimeToFirstByte is gym.model.time_to_first_byte_ms.
	ModelTimeToFirstByte lens.Histogram[float64]
	// HTTPTimeouts is gym.http.timeout_total.
	HTTPTimeouts lens.Counter
	// HTTPRetries is gym.http.retry_total.
	HTTPRetries lens.Counter
	// AgentTurnCount is gym.agent.turn_count.
	AgentTurnCount lens.Histogram[float64]
	// AgentTurnDuration is gym.agent.turn_duration_ms.
	AgentTurnDuration lens.Histogram[float64]
	// ToolCallDuration is gym.tool.call_duration_ms.
	ToolCallDuration lens.Histogram[float64]
	// GenAIDuration is gen_ai.client.operation.duration.
	GenAIDuration lens.Histogram[float64]
	// GenAITokens is gen_ai.client.token.usage.
	GenAITokens lens.Histogram[int64]

	concLimit     metric.Int64ObservableGauge
	concActive    metric.Int64ObservableUpDownCounter
	concAvailable metric.Int64ObservableUpDownCounter
	concQueue     metric.Int64ObservableUpDownCounter

	registrations []metric.Registration
	tree          *treeSampler

	verify Tally
}

var (
	verifySuccess = metric.WithAttributeSet(attribute.NewSet(attribute.String(contract.AttrVerifyOutcome, contract.OutcomeSuccess)))
	verifyFailure = metric.WithAttributeSet(attribute.NewSet(attribute.String(contract.AttrVerifyOutcome, contract.OutcomeFailure)))

	rolloutSuccess = attribute.NewSet(attribute.String(contract.AttrRolloutOutcome, contract.OutcomeSuccess))
	rolloutFailure = attribute.NewSet(attribute.String(contract.AttrRolloutOutcome, contract.OutcomeFailure))
)

// builder creates instruments from their contract entries and collects
// the errors.
type builder struct {
	i    lens.Instrumenter
	m    metric.Meter
	errs []error
}

func (b *builder) hist(name string) lens.Histogram[float64] {
	h, err := b.i.Float64Histogram(name)
	b.errs = append(b.errs, err)
	return h
}

func (b *builder) intHist(name string) lens.Histogram[int64] {
	h, err := b.i.Int64Histogram(name)
	b.errs = append(b.errs, err)
	return h
}

func (b *builder) counter(name string) lens.Counter {
	c, err := b.i.Int64Counter(name)
	b.errs = append(b.errs, err)
	return c
}

func (b *builder) obsCounter(name string) metric.Int64ObservableCounter {
	in := contract.MustLookup(name)
	c, err := b.m.Int64ObservableCounter(in.Name, metric.WithDescription(in.Description), metric.WithUnit(in.Unit))
	b.errs = append(b.errs, err)
	return c
}

func (b *builder) obsUpDown(name string) metric.Int64ObservableUpDownCounter {
	in := contract.MustLookup(name)
	c, err := b.m.Int64ObservableUpDownCounter(in.Name, metric.WithDescription(in.Description), metric.WithUnit(in.Unit))
	b.errs = append(b.errs, err)
	return c
}

func (b *builder) obsIntGauge(name string) metric.Int64ObservableGauge {
	in := contract.MustLookup(name)
	g, err := b.m.Int64ObservableGauge(in.Name, metric.WithDescription(in.Description), metric.WithUnit(in.Unit))
	b.errs = append(b.errs, err)
	return g
}

func (b *builder) obsFloatGauge(name string) metric.Float64ObservableGauge {
	in := contract.MustLookup(name)
	opts := []metric.Float64ObservableGaugeOption{metric.WithDescription(in.Description)}
	if in.Unit != "" {
		opts = append(opts, metric.WithUnit(in.Unit))
	}
	g, err := b.m.Float64ObservableGauge(in.Name, opts...)
	b.errs = append(b.errs, err)
	return g
}

func (b *builder) intGauge(name string) metric.Int64Gauge {
	in := contract.MustLookup(name)
	opts := []metric.Int64GaugeOption{metric.WithDescription(in.Description)}
	if in.Unit != "" {
		opts = append(opts, metric.WithUnit(in.Unit))
	}
	g, err := b.m.Int64Gauge(in.Name, opts...)
	b.errs = append(b.errs, err)
	return g
}

// New creates the instruments with in (the synchronous ones through its
// aggregation, the asynchronous ones on its meter) and registers the
// callbacks that export the tallies, the concurrency limiters' state and
// (where the platform allows) the process tree's memory and CPU. Create
// them once per process (the telemetry package does so at start-up); New
// is safe to call concurrently, and a second call gets the same
// underlying instruments.
func New(in lens.Instrumenter) (*Instruments, error) {
	m := in.Meter()
	b := &builder{i: in, m: m}
	rollout, verify := b.hist(contract.RolloutDuration), b.hist(contract.VerifyDuration)
	i := &Instruments{
		rolloutDuration: rollout.Bind(attribute.NewSet()),
		verifyDuration:  verify.Bind(attribute.NewSet()),
		requestDuration: b.hist(contract.ServerRequestDuration),
		serversActive:   b.intGauge(contract.ServersActive),
		successRate:     b.obsFloatGauge(contract.VerifySuccessRate),
		verifyCalls:     b.obsCounter(contract.VerifyCalls),

		RolloutCompleted:     b.counter(contract.RolloutCompleted),
		QueueWait:            b.hist(contract.ConcurrencyQueueWait),
		AdmissionCancelled:   b.counter(contract.ConcurrencyAdmissionCanc),
		ModelCallDuration:    b.hist(contract.ModelCallDuration),
		ModelTimeToFirstByte: b.hist(contract.ModelTimeToFirstByte),
		HTTPTimeouts:         b.counter(contract.HTTPTimeouts),
		HTTPRetries:          b.counter(contract.HTTPRetries),
		AgentTurnCount:       b.hist(contract.AgentTurnCount),
		AgentTurnDuration:    b.hist(contract.AgentTurnDuration),
		ToolCallDuration:     b.hist(contract.ToolCallDuration),
		GenAIDuration:        b.hist(contract.GenAIOperationDuration),
		GenAITokens:          b.intHist(contract.GenAITokenUsage),

		concLimit:     b.obsIntGauge(contract.ConcurrencyLimit),
		concActive:    b.obsUpDown(contract.ConcurrencyActive),
		concAvailable: b.obsUpDown(contract.ConcurrencyAvailable),
		concQueue:     b.obsUpDown(contract.ConcurrencyQueueDepth),
	}
	var treeMem, treeCPU metric.Float64ObservableGauge
	tree := newTreeSampler()
	if tree != nil {
		treeMem = b.obsFloatGauge(contract.ProcessTreeMemoryUsed)
		treeCPU = b.obsFloatGauge(contract.ProcessTreeCPUPercent)
	}
	if err := errors.Join(b.errs...); err != nil {
		return nil, fmt.Errorf("gym: create instruments: %w", err)
	}
	i.rolloutSucceeded = i.RolloutCompleted.Bind(rolloutSuccess)
	i.rolloutFailed = i.RolloutCompleted.Bind(rolloutFailure)
	reg, err := m.RegisterCallback(i.observeTallies, i.successRate, i.verifyCalls)
	if err != nil {
		return nil, fmt.Errorf("gym: register callback: %w", err)
	}
	i.registrations = append(i.registrations, reg)
	reg, err = m.RegisterCallback(i.observeConcurrency, i.concLimit, i.concActive, i.concAvailable, i.concQueue)
	if err != nil {
		_ = i.Close()
		return nil, fmt.Errorf("gym: register concurrency callback: %w", err)
	}
	i.registrations = append(i.registrations, reg)
	if tree != nil {
		i.tree = tree
		reg, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
			mib, pct, ok := tree.sample()
			if ok {
				o.ObserveFloat64(treeMem, mib)
				o.ObserveFloat64(treeCPU, pct)
			}
			return nil
		}, treeMem, treeCPU)
		if err != nil {
			_ = i.Close()
			return nil, fmt.Errorf("gym: register process tree callback: %w", err)
		}
		i.registrations = append(i.registrations, reg)
	}
	return i, nil
}

// observeTallies runs at collection time. Series appear only once
// something was counted, so a process that never verifies exports no
// verify series.
func (i *Instruments) observeTallies(_ context.Context, o metric.Observer) error {
	if ok, fail := i.verify.Counts(); ok+fail > 0 {
		o.ObserveFloat64(i.successRate, float64(ok)/float64(ok+fail))
		o.ObserveInt64(i.verifyCalls, clampInt64(ok), verifySuccess)
		o.ObserveInt64(i.verifyCalls, clampInt64(fail), verifyFailure)
	}
	return nil
}

// observeConcurrency exports the live limiters' state, summed by site, so
// limit, active, available and queue depth of one site come from one
// reading and active+available is always the limit.
func (i *Instruments) observeConcurrency(_ context.Context, o metric.Observer) error {
	for _, s := range concurrencySnapshot() {
		opt := metric.WithAttributeSet(attribute.NewSet(attribute.String(contract.AttrConcurrencySite, s.site)))
		o.ObserveInt64(i.concLimit, s.limit, opt)
		o.ObserveInt64(i.concActive, s.active, opt)
		o.ObserveInt64(i.concAvailable, s.limit-s.active, opt)
		o.ObserveInt64(i.concQueue, s.waiting, opt)
	}
	return nil
}

func clampInt64(v uint64) int64 {
	if v > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(v)
}

// Record is the one entry point for the measurements of NeMo Gym's own
// module. It never panics on bad input: a negative, NaN or infinite value,
// or an unknown kind, is refused with ErrInvalidValue and nothing is
// recorded. It allocates nothing and takes no lock.
func (i *Instruments) Record(ctx context.Context, m Measurement) error {
	if i == nil {
		return nil
	}
	if m.Value < 0 || math.IsNaN(m.Value) || math.IsInf(m.Value, 0) {
		return ErrInvalidValue
	}
	switch m.Kind {
	case KindRolloutDuration:
		i.rolloutDuration.Record(m.Value)
	case KindRollout:
		i.rolloutDuration.Record(m.Value)
		if m.Succeeded {
			i.rolloutSucceeded.Add(1)
		} else {
			i.rolloutFailed.Add(1)
		}
	case KindVerify:
		i.verifyDuration.Record(m.Value)
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

// Close unregisters the collection callbacks.
func (i *Instruments) Close() error {
	if i == nil {
		return nil
	}
	var errs []error
	for _, r := range i.registrations {
		errs = append(errs, r.Unregister())
	}
	i.registrations = nil
	return errors.Join(errs...)
}
