package rollout

import (
	"math"
	"slices"
)

// Percentile returns the p-th percentile (p in 0..100, clamped) of values,
// which need not be sorted and are not modified. It interpolates linearly
// between the two nearest ranks (the method NumPy and most spreadsheets use
// by default): with n sorted values the percentile sits at the fractional
// index p/100*(n-1). So Percentile(v, 0) is the minimum, Percentile(v, 100)
// the maximum and Percentile(v, 50) the median. It returns 0 for no values;
// NaN values are ignored.
func Percentile(values []float64, p float64) float64 {
	sorted := make([]float64, 0, len(values))
	for _, v := range values {
		if !math.IsNaN(v) {
			sorted = append(sorted, v)
		}
	}
	if len(sorted) == 0 {
		return 0
	}
	slices.Sort(sorted)
	switch {
	case math.IsNaN(p) || p <= 0:
		return sorted[0]
	case p >= 100:
		return sorted[len(sorted)-1]
	}
	rank := p / 100 * float64(len(sorted)-1)
	lo := int(math.Floor(rank))
	hi := int(math.Ceil(rank))
	return sorted[lo] + (sorted[hi]-sorted[lo])*(rank-float64(lo))
}
