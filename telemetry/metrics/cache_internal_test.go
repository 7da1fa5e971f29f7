package metrics

import (
	"fmt"
	"sync"
	"testing"

	"github.com/gymlens/gymlens/contract"
)

// Each key is built once, concurrently or not; past maxValues every new
// key reads its overflow key's value, which is built once too.
func TestCacheBuildsOncePerKeyAndCaps(t *testing.T) {
	var mu sync.Mutex
	built := map[string]int{}
	c := newCache(otherString, func(k string) string {
		mu.Lock()
		built[k]++
		mu.Unlock()
		return "v:" + k
	})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 200 {
				k := fmt.Sprintf("k%d", (i+w)%100)
				got := c.get(k)
				if got != "v:"+k && got != "v:"+contract.Other {
					t.Errorf("get(%q) = %q", k, got)
				}
			}
		})
	}
	wg.Wait()
	if len(built) != maxValues+1 || built[contract.Other] != 1 {
		t.Fatalf("built %d keys (%d overflow builds), want %d and 1", len(built), built[contract.Other], maxValues+1)
	}
	for k, n := range built {
		if n != 1 {
			t.Errorf("%q built %d times", k, n)
		}
	}
	// A key cached before the cap keeps its own value.
	for k := range built {
		if k != contract.Other && c.get(k) != "v:"+k {
			t.Errorf("get(%q) = %q after the cap", k, c.get(k))
		}
	}
}
