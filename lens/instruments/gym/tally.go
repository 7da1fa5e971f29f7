package gym

import (
	"sync"
	"sync/atomic"
)

// Tally counts successes and failures with one atomic add per event. Both
// counts live in one 64-bit word (successes in the high half, failures in
// the low half) so a reader always sees a pair that existed at one instant.
// When a half reaches 2^31 the goroutine that crossed the mark moves 2^31
// into a wide overflow counter under a mutex; the hot path never locks.
type Tally struct {
	word paddedWord
	mu   sync.Mutex
	// spilled holds what was folded out of each half (under mu).
	spilledOK, spilledFail uint64
}

// paddedWord keeps the hot word on a cache line of its own, so writers do
// not evict the read-only instrument fields next to it from other cores.
type paddedWord struct {
	_ [64]byte
	v atomic.Uint64
	_ [56]byte
}

const (
	half     = 32
	foldMark = uint64(1) << 31
	lowMask  = uint64(1)<<half - 1
)

// Add counts one event.
func (t *Tally) Add(succeeded bool) {
	if succeeded {
		n := t.word.v.Add(1 << half)
		if n>>half == foldMark {
			t.fold(foldMark<<half, true)
		}
		return
	}
	n := t.word.v.Add(1)
	if n&lowMask == foldMark {
		t.fold(foldMark, false)
	}
}

func (t *Tally) fold(delta uint64, ok bool) {
	t.mu.Lock()
	if ok {
		t.spilledOK += foldMark
	} else {
		t.spilledFail += foldMark
	}
	t.word.v.Add(-delta)
	t.mu.Unlock()
}

// Counts returns the successes and failures counted so far.
func (t *Tally) Counts() (succeeded, failed uint64) {
	t.mu.Lock()
	w := t.word.v.Load()
	succeeded, failed = t.spilledOK+w>>half, t.spilledFail+w&lowMask
	t.mu.Unlock()
	return succeeded, failed
}

// Reset sets both counts to zero.
func (t *Tally) Reset() {
	t.mu.Lock()
	t.word.v.Store(0)
	t.spilledOK, t.spilledFail = 0, 0
	t.mu.Unlock()
}
