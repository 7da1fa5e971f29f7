package gym

import (
	"sync"
	"testing"
)

func TestTallyCounts(t *testing.T) {
	var ty Tally
	for i := range 10 {
		ty.Add(i%5 != 0)
	}
	if ok, fail := ty.Counts(); ok != 8 || fail != 2 {
		t.Fatalf("counts %d/%d, want 8/2", ok, fail)
	}
	ty.Reset()
	if ok, fail := ty.Counts(); ok != 0 || fail != 0 {
		t.Fatalf("after reset %d/%d", ok, fail)
	}
}

// Crossing 2^31 in either half moves the mark into the wide counters
// without losing or double-counting anything.
func TestTallyFoldsBeforeOverflow(t *testing.T) {
	var ty Tally
	ty.word.v.Store((foldMark-1)<<half | (foldMark - 1))
	ty.Add(true)
	ty.Add(false)
	ok, fail := ty.Counts()
	if ok != foldMark || fail != foldMark {
		t.Fatalf("after fold %d/%d, want %d/%d", ok, fail, foldMark, foldMark)
	}
	if w := ty.word.v.Load(); w != 0 {
		t.Fatalf("word %#x not folded", w)
	}
	ty.Add(true)
	if ok, _ := ty.Counts(); ok != foldMark+1 {
		t.Fatalf("after fold and one more: %d", ok)
	}
}

func TestTallyConcurrentFolds(t *testing.T) {
	var ty Tally
	start := foldMark - 500
	ty.word.v.Store(start<<half | start)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				ty.Add((i+w)%2 == 0)
			}
		})
	}
	wg.Wait()
	ok, fail := ty.Counts()
	if ok != start+4000 || fail != start+4000 {
		t.Fatalf("counts %d/%d, want %d each", ok, fail, start+4000)
	}
}
