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

// presetAll puts every word of ty just below (or at) the fold mark, so the
// next add to any word crosses it, whichever word the pool hands out.
func presetAll(ty *Tally, v uint64) (sum uint64) {
	for i := range ty.words {
		ty.words[i].v.Store(v<<half | v)
	}
	return v * tallyShards
}

// Crossing 2^31 in either half moves the mark into the wide counters
// without losing or double-counting anything.
func TestTallyFoldsBeforeOverflow(t *testing.T) {
	var ty Tally
	base := presetAll(&ty, foldMark-1)
	ty.Add(true)
	ty.Add(false)
	ok, fail := ty.Counts()
	if ok != base+1 || fail != base+1 {
		t.Fatalf("after fold %d/%d, want %d/%d", ok, fail, base+1, base+1)
	}
	if ty.spilledOK != foldMark || ty.spilledFail != foldMark {
		t.Fatalf("spilled %d/%d, want one fold of each half", ty.spilledOK, ty.spilledFail)
	}
	for i := range ty.words {
		w := ty.words[i].v.Load()
		if w>>half >= foldMark || w&lowMask >= foldMark {
			t.Fatalf("word %d = %#x left at or past the mark", i, w)
		}
	}
	ty.Add(true)
	if ok, _ := ty.Counts(); ok != base+2 {
		t.Fatalf("after fold and one more: %d, want %d", ok, base+2)
	}
}

func TestTallyConcurrentFolds(t *testing.T) {
	var ty Tally
	base := presetAll(&ty, foldMark-500)
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
	if ok != base+4000 || fail != base+4000 {
		t.Fatalf("counts %d/%d, want %d each", ok, fail, base+4000)
	}
}

// Readers running beside writers always see counts that only grow and
// never more than were added.
func TestTallyReadsWhileAdding(t *testing.T) {
	var ty Tally
	const writers, each = 4, 20000
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for i := range each {
				ty.Add(i%4 != 0)
			}
		})
	}
	done := make(chan struct{})
	var prevOK, prevFail uint64
	go func() {
		defer close(done)
		for {
			ok, fail := ty.Counts()
			if ok < prevOK || fail < prevFail || ok > writers*each*3/4 || fail > writers*each/4 {
				t.Errorf("read %d/%d after %d/%d", ok, fail, prevOK, prevFail)
				return
			}
			prevOK, prevFail = ok, fail
			if ok+fail == writers*each {
				return
			}
		}
	}()
	wg.Wait()
	<-done
	if ok, fail := ty.Counts(); ok != writers*each*3/4 || fail != writers*each/4 {
		t.Fatalf("final %d/%d", ok, fail)
	}
}
