package report

import (
	"errors"
	"fmt"
	"math"
	"testing"
)

func approx(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestQuantileInterpolatesInsideBucket(t *testing.T) {
	h := &Histogram{
		Count:  10,
		Bounds: []float64{100, 200, 400},
		Counts: []uint64{0, 4, 6, 0},
	}
	cases := []struct{ q, want float64 }{
		{0, 100},    // rank 0 lands at the first non-empty bucket's floor
		{0.2, 150},  // rank 2 of 4 in (100, 200]
		{0.4, 200},  // rank 4: top of (100, 200]
		{0.7, 300},  // rank 7: 3 of 6 into (200, 400]
		{1, 400},    // rank 10: top of (200, 400]
		{1.5, 400},  // clamped to 1
		{-1, 100.0}, // clamped to 0
	}
	for _, c := range cases {
		if got := h.Quantile(c.q); !approx(got, c.want) {
			t.Errorf("Quantile(%v) = %v, want %v", c.q, got, c.want)
		}
	}
}

func TestQuantileUsesMinAndMax(t *testing.T) {
	h := &Histogram{
		Count: 4, Min: 20, Max: 700, HasMinMax: true,
		Bounds: []float64{100, 500},
		Counts: []uint64{2, 0, 2},
	}
	// The first bucket starts at the minimum, not at 0.
	if got := h.Quantile(0.25); !approx(got, 60) {
		t.Errorf("p25 = %v, want 60 (halfway between min 20 and bound 100)", got)
	}
	// The top bucket is open: the maximum closes it.
	if got := h.Quantile(1); !approx(got, 700) {
		t.Errorf("p100 = %v, want the max 700", got)
	}
	if got := h.Quantile(0.75); !approx(got, 600) {
		t.Errorf("p75 = %v, want 600 (halfway between 500 and max 700)", got)
	}
	// A maximum inside a bucket narrows it too.
	h2 := &Histogram{Count: 2, Min: 110, Max: 130, HasMinMax: true, Bounds: []float64{100, 250}, Counts: []uint64{0, 2, 0}}
	if got := h2.Quantile(0.5); !approx(got, 120) {
		t.Errorf("p50 = %v, want 120", got)
	}
}

func TestQuantileEmpty(t *testing.T) {
	var nilH *Histogram
	for _, h := range []*Histogram{nilH, {}, {Bounds: []float64{1}, Counts: []uint64{0, 0}}} {
		if got := h.Quantile(0.5); !math.IsNaN(got) {
			t.Errorf("Quantile of %+v = %v, want NaN", h, got)
		}
	}
}

func TestMergeHistograms(t *testing.T) {
	a := &Histogram{Count: 2, Sum: 3, Min: 1, Max: 2, HasMinMax: true, Bounds: []float64{5}, Counts: []uint64{2, 0}}
	b := &Histogram{Count: 1, Sum: 9, Min: 9, Max: 9, HasMinMax: true, Bounds: []float64{5}, Counts: []uint64{0, 1}}
	m, err := MergeHistograms(a, nil, b)
	if err != nil {
		t.Fatal(err)
	}
	if m.Count != 3 || m.Sum != 12 || m.Min != 1 || m.Max != 9 || m.Counts[0] != 2 || m.Counts[1] != 1 {
		t.Errorf("merged = %+v", m)
	}
	if a.Count != 2 || a.Counts[1] != 0 {
		t.Errorf("MergeHistograms changed its input: %+v", a)
	}
	if _, err := MergeHistograms(a, &Histogram{Bounds: []float64{6}, Counts: []uint64{0, 0}}); !errors.Is(err, ErrBoundsDiffer) {
		t.Errorf("different bounds: err = %v, want ErrBoundsDiffer", err)
	}
	if m, err := MergeHistograms(); m != nil || err != nil {
		t.Errorf("nothing to merge: %v, %v", m, err)
	}
}

func ExampleHistogram_Quantile() {
	// Ten rollouts: four took between 100 and 250 ms, six between 250 and
	// 500 ms, the slowest 420 ms.
	h := &Histogram{
		Count:  10,
		Min:    130,
		Max:    420,
		Bounds: []float64{100, 250, 500},
		Counts: []uint64{0, 4, 6, 0},
		// Min and Max were recorded.
		HasMinMax: true,
	}
	fmt.Printf("p50 %.0f ms\n", h.Quantile(0.5))
	fmt.Printf("p99 %.0f ms\n", h.Quantile(0.99))
	// Output:
	// p50 278 ms
	// p99 417 ms
}
