package cowmap

import (
	"fmt"
	"sync"
	"testing"
)

// Concurrent misses build each key once; a builder's refusal stores
// nothing; a stored value is read back without building.
func TestGetBuildsOncePerKey(t *testing.T) {
	var m Map[string, string]
	var mu sync.Mutex
	built := map[string]int{}
	const limit = 10
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 100 {
				k := fmt.Sprintf("k%d", (i+w)%20)
				got := m.Get(k, func(n int) (string, bool) {
					if n >= limit {
						return "over", false
					}
					mu.Lock()
					built[k]++
					mu.Unlock()
					return "v:" + k, true
				})
				if got != "v:"+k && got != "over" {
					t.Errorf("Get(%q) = %q", k, got)
				}
			}
		})
	}
	wg.Wait()
	if m.Len() != limit || len(built) != limit {
		t.Fatalf("Len %d, built %d keys; want %d", m.Len(), len(built), limit)
	}
	for k, n := range built {
		if n != 1 {
			t.Errorf("%q built %d times", k, n)
		}
		if v, ok := m.Load(k); !ok || v != "v:"+k {
			t.Errorf("Load(%q) = %q, %v", k, v, ok)
		}
	}
	if _, ok := m.Load("absent"); ok {
		t.Error("Load of an absent key found it")
	}
}

func TestZeroMapIsEmpty(t *testing.T) {
	var m Map[int, int]
	if _, ok := m.Load(1); ok || m.Len() != 0 {
		t.Fatal("the zero Map is not empty")
	}
}

// A hit costs no allocation.
func TestLoadDoesNotAllocate(t *testing.T) {
	var m Map[string, int]
	m.Get("a", func(int) (int, bool) { return 1, true })
	if n := testing.AllocsPerRun(100, func() {
		if v := m.Get("a", nil); v != 1 {
			t.Fatal(v)
		}
	}); n != 0 {
		t.Fatalf("Get on a hit: %v allocs", n)
	}
}

func ExampleMap() {
	var routes Map[string, []string]
	attrs := routes.Get("POST /verify", func(int) ([]string, bool) {
		return []string{"http.route=/verify", "http.request.method=POST"}, true
	})
	fmt.Println(attrs, routes.Len())
	// Output: [http.route=/verify http.request.method=POST] 1
}
