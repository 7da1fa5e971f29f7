package gym

import (
	"sync"
	"sync/atomic"
)

// Tally counts successes and failures with one atomic add per event, on a
// counter word that stays with the adding core.
//
// The counts are spread over tallyShards words, each on cache lines of its
// own. An Add borrows a word through a sync.Pool, whose per-P caches hand
// the same word back to the same P, so under parallel load each core adds
// to a line it already owns instead of pulling one shared line back and
// forth. Every word keeps both counts (successes in the high half,
// failures in the low half), so each word is read as a pair that existed
// at one instant, and the sum over the words is a pair of counts of one
// set of events: the success rate and the call counts read together always
// agree. When a half reaches 2^31 the goroutine that crossed the mark moves
// 2^31 into wide overflow counters under a mutex; the hot path never locks.
//
// The zero value is ready to use. A Tally must not be copied after first use.
type Tally struct {
	pool sync.Pool // *tallyWord; its per-P caches keep a word on one P
	// next picks the word handed out when the pool has none for this P
	// (at first use, and after a GC emptied the pool).
	next  atomic.Uint32
	words [tallyShards]tallyWord
	mu    sync.Mutex
	// spilled holds what was folded out of each half (under mu).
	spilledOK, spilledFail uint64
}

// tallyShards is the number of counter words. More Ps than words share
// words, which stays correct (the adds are atomic) and only brings back
// some of the contention.
const tallyShards = 32

// tallyWord is one counter word padded to 128 bytes, so no two words, and
// no word and the fields before it, share a 64-byte cache line or an
// adjacent-line prefetch pair.
type tallyWord struct {
	v atomic.Uint64
	_ [120]byte
}

const (
	half     = 32
	foldMark = uint64(1) << 31
	lowMask  = uint64(1)<<half - 1
)

// Add counts one event.
func (t *Tally) Add(succeeded bool) {
	w, _ := t.pool.Get().(*tallyWord)
	if w == nil {
		w = &t.words[t.next.Add(1)%tallyShards]
	}
	if succeeded {
		if n := w.v.Add(1 << half); n>>half == foldMark {
			t.fold(w, foldMark<<half, true)
		}
	} else if n := w.v.Add(1); n&lowMask == foldMark {
		t.fold(w, foldMark, false)
	}
	t.pool.Put(w)
}

func (t *Tally) fold(w *tallyWord, delta uint64, ok bool) {
	t.mu.Lock()
	if ok {
		t.spilledOK += foldMark
	} else {
		t.spilledFail += foldMark
	}
	w.v.Add(-delta)
	t.mu.Unlock()
}

// Counts returns the successes and failures counted so far.
func (t *Tally) Counts() (succeeded, failed uint64) {
	t.mu.Lock()
	succeeded, failed = t.spilledOK, t.spilledFail
	for i := range t.words {
		w := t.words[i].v.Load()
		succeeded += w >> half
		failed += w & lowMask
	}
	t.mu.Unlock()
	return succeeded, failed
}

// Reset sets both counts to zero. Adds that run at the same time may be
// kept or lost.
func (t *Tally) Reset() {
	t.mu.Lock()
	for i := range t.words {
		t.words[i].v.Store(0)
	}
	t.spilledOK, t.spilledFail = 0, 0
	t.mu.Unlock()
}
