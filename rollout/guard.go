package rollout

import (
	"fmt"
	"math"
)

// failureGuard watches the outcomes of the most recently finished
// rollouts, a sliding window of fixed size, and trips when the share of
// failures in a full window reaches the limit.
type failureGuard struct {
	window   []bool // ring of outcomes, true: failed
	next     int    // where the next outcome goes
	seen     int    // outcomes added, up to len(window)
	failures int    // failures in the window
	limit    float64
	need     int // failures in a full window that trip it: limit × window, rounded up
}

// newFailureGuard checks Options.FailureWindow and MaxFailureRate and
// returns their guard; nil when the guard is off (a negative window).
func newFailureGuard(window int, rate float64) (*failureGuard, error) {
	if window < 0 {
		return nil, nil
	}
	if window == 0 {
		window = DefaultFailureWindow
	}
	switch {
	case rate == 0:
		rate = DefaultMaxFailureRate
	case !(rate > 0 && rate <= 1): // NaN included
		return nil, fmt.Errorf("rollout: Options.MaxFailureRate is %v; want a share in (0, 1], or 0 for the default %v", rate, DefaultMaxFailureRate)
	}
	// The small slack keeps 0.8 × 50 at 40 whatever the float rounding.
	need := max(1, int(math.Ceil(rate*float64(window)-1e-9)))
	return &failureGuard{window: make([]bool, window), limit: rate, need: need}, nil
}

// add records one finished rollout. Once the window is full, it trips when
// failures/window >= limit, and says so with the figures.
func (g *failureGuard) add(failed bool) (msg string, trip bool) {
	n := len(g.window)
	if g.seen == n && g.window[g.next] {
		g.failures-- // the oldest outcome leaves the window
	}
	g.window[g.next] = failed
	if failed {
		g.failures++
	}
	g.next = (g.next + 1) % n
	g.seen = min(g.seen+1, n)
	if g.seen < n || g.failures < g.need {
		return "", false
	}
	return fmt.Sprintf("%d of the last %d rollouts failed on every attempt (%.0f%%; the limit is %.0f%%)",
		g.failures, n, 100*float64(g.failures)/float64(n), 100*g.limit), true
}
