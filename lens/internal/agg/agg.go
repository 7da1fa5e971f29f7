package agg

import (
	"context"
	"math"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/gymlens/gymlens/lens/cowmap"
)

// MaxSeries is how many attribute sets one instrument keeps; binding
// another one returns the overflow series, whose only attribute is
// otel.metric.overflow=true, as the SDK's cardinality limit does.
const MaxSeries = 2000

// overflowSet is the attribute set of the overflow series.
var overflowSet = attribute.NewSet(attribute.Bool("otel.metric.overflow", true))

// Desc names an instrument as the SDK's metricdata.Metrics does.
type Desc struct {
	Name, Description, Unit string
}

// Registry holds one scope's instruments and produces their data. It is
// an sdkmetric.Producer: give it to every reader with sdkmetric.WithProducer
// (or the Prometheus exporter's WithProducer).
type Registry struct {
	scope instrumentation.Scope
	mu    sync.Mutex
	insts []collector
	names map[string]any // instrument name -> the instrument, so a second create returns the first
}

type collector interface {
	collect(now time.Time) (metricdata.Metrics, bool)
}

// NewRegistry returns an empty registry whose data carries scope.
func NewRegistry(scope instrumentation.Scope) *Registry {
	return &Registry{scope: scope, names: map[string]any{}}
}

// Produce returns every instrument that has data, in creation order, under
// the registry's scope; nothing when none has.
func (r *Registry) Produce(context.Context) ([]metricdata.ScopeMetrics, error) {
	r.mu.Lock()
	insts := slices.Clone(r.insts)
	r.mu.Unlock()
	now := time.Now()
	var ms []metricdata.Metrics
	for _, in := range insts {
		if m, ok := in.collect(now); ok {
			ms = append(ms, m)
		}
	}
	if len(ms) == 0 {
		return nil, nil
	}
	return []metricdata.ScopeMetrics{{Scope: r.scope, Metrics: ms}}, nil
}

// instrument returns the instrument registered under d.Name, creating it
// with build on first use. A name registered with another type panics: the
// callers' names come from one catalogue that gives each one kind.
func instrument[T collector](r *Registry, d Desc, build func() T) T {
	r.mu.Lock()
	defer r.mu.Unlock()
	if in, ok := r.names[d.Name]; ok {
		return in.(T)
	}
	in := build()
	r.names[d.Name] = in
	r.insts = append(r.insts, in)
	return in
}

// Number is what a histogram records.
type Number interface{ int64 | float64 }

// Histogram is an explicit-bucket histogram, cumulative since its
// creation, with min, max and sum, as the SDK's default histogram.
type Histogram[N Number] struct {
	desc   Desc
	bounds []float64
	start  time.Time
	series cowmap.Map[attribute.Distinct, *HistSeries[N]]
	mu     sync.Mutex
	list   []*HistSeries[N] // series in creation order, for collection
}

// Float64Histogram returns the float64 histogram named d.Name, creating it
// with bounds (ascending) on first use.
func (r *Registry) Float64Histogram(d Desc, bounds []float64) *Histogram[float64] {
	return instrument(r, d, func() *Histogram[float64] { return newHistogram[float64](d, bounds) })
}

// Int64Histogram returns the int64 histogram named d.Name, creating it with
// bounds (ascending) on first use.
func (r *Registry) Int64Histogram(d Desc, bounds []float64) *Histogram[int64] {
	return instrument(r, d, func() *Histogram[int64] { return newHistogram[int64](d, bounds) })
}

func newHistogram[N Number](d Desc, bounds []float64) *Histogram[N] {
	return &Histogram[N]{desc: d, bounds: slices.Clone(bounds), start: time.Now()}
}

// Series returns the series of set, the same one for every call with an
// equal set. Bind once and keep it: the lookup hashes the set.
func (h *Histogram[N]) Series(set attribute.Set) *HistSeries[N] {
	return bind(&h.series, set, func(s attribute.Set) *HistSeries[N] {
		hs := &HistSeries[N]{set: s, bounds: h.bounds, counts: make([]atomic.Uint64, len(h.bounds)+1)}
		lo, hi := extremes[N]()
		hs.min.Store(toBits(hi))
		hs.max.Store(toBits(lo))
		h.mu.Lock()
		h.list = append(h.list, hs)
		h.mu.Unlock()
		return hs
	})
}

func bind[S any](m *cowmap.Map[attribute.Distinct, S], set attribute.Set, build func(attribute.Set) S) S {
	key := set.Equivalent()
	if s, ok := m.Load(key); ok {
		return s
	}
	full := false
	s := m.Get(key, func(n int) (S, bool) {
		if n >= MaxSeries {
			full = true
			var zero S
			return zero, false
		}
		return build(set), true
	})
	if !full {
		return s
	}
	return m.Get(overflowSet.Equivalent(), func(int) (S, bool) { return build(overflowSet), true })
}

// HistSeries is one attribute set's histogram.
type HistSeries[N Number] struct {
	set    attribute.Set
	bounds []float64
	counts []atomic.Uint64 // len(bounds)+1; counts[i] holds bounds[i-1] < v <= bounds[i]
	sum    atomic.Uint64   // float64 bits, or int64 two's complement
	min    atomic.Uint64   // as sum; starts at N's largest value
	max    atomic.Uint64   // as sum; starts at N's smallest value
}

// Record adds one measurement. As in the SDK, a NaN or an infinity is
// counted (NaN and +Inf in the last bucket) and added to the sum; a NaN
// is never the min or the max.
func (s *HistSeries[N]) Record(v N) {
	f := float64(v)
	switch x := any(v).(type) {
	case float64:
		for {
			old := s.sum.Load()
			if s.sum.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+x)) {
				break
			}
		}
	case int64:
		s.sum.Add(uint64(x))
	}
	for f == f { // not NaN
		old := s.min.Load()
		if fromBits[N](old) <= v || s.min.CompareAndSwap(old, toBits(v)) {
			break
		}
	}
	for f == f {
		old := s.max.Load()
		if fromBits[N](old) >= v || s.max.CompareAndSwap(old, toBits(v)) {
			break
		}
	}
	// The count goes last: a collection that sees it sees the sum too.
	s.counts[sort.SearchFloat64s(s.bounds, f)].Add(1)
}

// extremes are N's smallest and largest values.
func extremes[N Number]() (lo, hi N) {
	var z N
	if _, ok := any(z).(float64); ok {
		return N(math.Inf(-1)), N(math.Inf(1))
	}
	return N(int64(math.MinInt64)), N(int64(math.MaxInt64))
}

func toBits[N Number](v N) uint64 {
	switch x := any(v).(type) {
	case float64:
		return math.Float64bits(x)
	case int64:
		return uint64(x)
	}
	return 0
}

func fromBits[N Number](b uint64) N {
	var z N
	switch any(z).(type) {
	case float64:
		return N(math.Float64frombits(b))
	}
	return N(int64(b))
}

func (h *Histogram[N]) collect(now time.Time) (metricdata.Metrics, bool) {
	h.mu.Lock()
	list := h.list
	h.mu.Unlock()
	var dps []metricdata.HistogramDataPoint[N]
	for _, s := range list {
		counts := make([]uint64, len(s.counts))
		var n uint64
		for i := range s.counts {
			counts[i] = s.counts[i].Load()
			n += counts[i]
		}
		if n == 0 {
			continue
		}
		dps = append(dps, metricdata.HistogramDataPoint[N]{
			Attributes:   s.set,
			StartTime:    h.start,
			Time:         now,
			Count:        n,
			Bounds:       slices.Clone(h.bounds),
			BucketCounts: counts,
			Min:          metricdata.NewExtrema(fromBits[N](s.min.Load())),
			Max:          metricdata.NewExtrema(fromBits[N](s.max.Load())),
			Sum:          fromBits[N](s.sum.Load()),
		})
	}
	if len(dps) == 0 {
		return metricdata.Metrics{}, false
	}
	return metricdata.Metrics{Name: h.desc.Name, Description: h.desc.Description, Unit: h.desc.Unit,
		Data: metricdata.Histogram[N]{Temporality: metricdata.CumulativeTemporality, DataPoints: dps}}, true
}

// Counter is a monotonic int64 sum, cumulative since its creation.
type Counter struct {
	desc   Desc
	start  time.Time
	series cowmap.Map[attribute.Distinct, *CounterSeries]
	mu     sync.Mutex
	list   []*CounterSeries // series in creation order, for collection
}

// Int64Counter returns the counter named d.Name, creating it on first use.
func (r *Registry) Int64Counter(d Desc) *Counter {
	return instrument(r, d, func() *Counter { return &Counter{desc: d, start: time.Now()} })
}

// Series returns the series of set, the same one for every call with an
// equal set.
func (c *Counter) Series(set attribute.Set) *CounterSeries {
	return bind(&c.series, set, func(s attribute.Set) *CounterSeries {
		cs := &CounterSeries{set: s}
		c.mu.Lock()
		c.list = append(c.list, cs)
		c.mu.Unlock()
		return cs
	})
}

// CounterSeries is one attribute set's count.
type CounterSeries struct {
	set   attribute.Set
	n     atomic.Int64
	added atomic.Bool
}

// Add adds v; a negative v is dropped (the sum is monotonic).
func (s *CounterSeries) Add(v int64) {
	if v < 0 {
		return
	}
	s.n.Add(v)
	if !s.added.Load() {
		s.added.Store(true)
	}
}

func (c *Counter) collect(now time.Time) (metricdata.Metrics, bool) {
	c.mu.Lock()
	list := c.list
	c.mu.Unlock()
	var dps []metricdata.DataPoint[int64]
	for _, s := range list {
		if s.added.Load() {
			dps = append(dps, metricdata.DataPoint[int64]{Attributes: s.set, StartTime: c.start, Time: now, Value: s.n.Load()})
		}
	}
	if len(dps) == 0 {
		return metricdata.Metrics{}, false
	}
	return metricdata.Metrics{Name: c.desc.Name, Description: c.desc.Description, Unit: c.desc.Unit,
		Data: metricdata.Sum[int64]{Temporality: metricdata.CumulativeTemporality, IsMonotonic: true, DataPoints: dps}}, true
}
