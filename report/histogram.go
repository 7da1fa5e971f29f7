package report

import (
	"errors"
	"math"
	"slices"
)

// Histogram is one explicit-bucket histogram value: everything recorded
// into a stream up to one export.
type Histogram struct {
	// Count is the number of recorded values; Sum their total.
	Count uint64
	Sum   float64
	// Min and Max are the smallest and largest recorded values; they are
	// meaningful only when HasMinMax is set.
	Min, Max  float64
	HasMinMax bool
	// Bounds are the upper bucket boundaries in increasing order.
	Bounds []float64
	// Counts has len(Bounds)+1 entries: bucket i holds the values in
	// (Bounds[i-1], Bounds[i]], the last one everything above the final
	// bound.
	Counts []uint64
}

// ErrBoundsDiffer is returned by MergeHistograms for histograms whose
// bucket boundaries are not identical.
var ErrBoundsDiffer = errors.New("report: histograms have different bucket bounds")

// BucketRange returns the value range bucket i can hold, narrowed to the
// recorded minimum and maximum when they are known. The first bucket has
// no lower bound of its own; without a minimum it starts at 0 (durations
// are never negative). The last has no upper bound; without a maximum it
// is reported as ending at its lower bound.
func (h *Histogram) BucketRange(i int) (lo, hi float64) {
	switch {
	case i > 0:
		lo = h.Bounds[i-1]
	case h.HasMinMax:
		lo = h.Min
	default:
		lo = math.Min(0, h.firstBound())
	}
	switch {
	case i < len(h.Bounds):
		hi = h.Bounds[i]
	case h.HasMinMax:
		hi = h.Max
	default:
		hi = lo
	}
	if h.HasMinMax {
		lo = math.Max(lo, h.Min)
		hi = math.Min(hi, h.Max)
		if hi < lo {
			hi = lo
		}
	}
	return lo, hi
}

func (h *Histogram) firstBound() float64 {
	if len(h.Bounds) == 0 {
		return 0
	}
	return h.Bounds[0]
}

// Quantile estimates the q-quantile (q in [0, 1]) from the buckets: it
// finds the bucket holding the value of rank q*Count and interpolates
// linearly inside that bucket's range (see BucketRange). The result is an
// estimate whose error is bounded by the bucket's width. It returns NaN
// for an empty histogram.
func (h *Histogram) Quantile(q float64) float64 {
	v, _ := h.quantileBucket(q)
	return v
}

// quantileBucket is Quantile, also returning the index of the bucket the
// estimate lies in (-1 with NaN).
func (h *Histogram) quantileBucket(q float64) (float64, int) {
	if h == nil || h.Count == 0 || len(h.Counts) == 0 {
		return math.NaN(), -1
	}
	q = math.Max(0, math.Min(1, q))
	rank := q * float64(h.Count)
	var below float64
	for i, c := range h.Counts {
		if c == 0 {
			continue
		}
		n := float64(c)
		if below+n >= rank {
			lo, hi := h.BucketRange(i)
			frac := (rank - below) / n
			return lo + (hi-lo)*frac, i
		}
		below += n
	}
	// Counts sum to less than Count (inconsistent input): the top of the
	// highest non-empty bucket is the best answer left.
	for i := len(h.Counts) - 1; i >= 0; i-- {
		if h.Counts[i] > 0 {
			_, hi := h.BucketRange(i)
			return hi, i
		}
	}
	return math.NaN(), -1
}

// Clone returns a deep copy of h.
func (h *Histogram) Clone() *Histogram {
	c := *h
	c.Bounds = slices.Clone(h.Bounds)
	c.Counts = slices.Clone(h.Counts)
	return &c
}

// add folds o into h. Both must have the same bounds.
func (h *Histogram) add(o *Histogram) error {
	if !slices.Equal(h.Bounds, o.Bounds) || len(h.Counts) != len(o.Counts) {
		return ErrBoundsDiffer
	}
	for i, c := range o.Counts {
		h.Counts[i] += c
	}
	switch {
	case o.Count == 0:
	case h.Count == 0:
		h.Min, h.Max, h.HasMinMax = o.Min, o.Max, o.HasMinMax
	case h.HasMinMax && o.HasMinMax:
		h.Min = math.Min(h.Min, o.Min)
		h.Max = math.Max(h.Max, o.Max)
	default:
		h.HasMinMax = false
	}
	h.Count += o.Count
	h.Sum += o.Sum
	return nil
}

// MergeHistograms adds histograms with identical bounds into a new one,
// as if every value had been recorded into a single histogram. Nil
// entries are skipped; with nothing to merge it returns nil.
func MergeHistograms(hs ...*Histogram) (*Histogram, error) {
	var out *Histogram
	for _, h := range hs {
		if h == nil {
			continue
		}
		if out == nil {
			out = h.Clone()
			continue
		}
		if err := out.add(h); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// nonEmpty returns the first and last non-empty bucket and the largest
// count; first is -1 when every bucket is empty.
func (h *Histogram) nonEmpty() (first, last int, peak uint64) {
	first, last = -1, -1
	for i, c := range h.Counts {
		if c > 0 {
			if first < 0 {
				first = i
			}
			last = i
			peak = max(peak, c)
		}
	}
	return first, last, peak
}
