package cowmap

import (
	"sync"
	"sync/atomic"
)

// Map is a copy-on-write map. The zero value is an empty map ready to use;
// a Map must not be copied after first use.
type Map[K comparable, V any] struct {
	mu sync.Mutex
	m  atomic.Pointer[map[K]V]
}

// Load returns the value stored under k.
func (c *Map[K, V]) Load(k K) (V, bool) {
	if m := c.m.Load(); m != nil {
		v, ok := (*m)[k]
		return v, ok
	}
	var zero V
	return zero, false
}

// Len returns the number of entries.
func (c *Map[K, V]) Len() int {
	if m := c.m.Load(); m != nil {
		return len(*m)
	}
	return 0
}

// Get returns the value stored under k. On a miss it calls build, under
// the map's mutex so that each key is built once, with the number of
// entries before the new one; build's value is returned, and stored only
// when keep is true (a builder past its cap returns a shared value and
// false).
func (c *Map[K, V]) Get(k K, build func(n int) (v V, keep bool)) V {
	if v, ok := c.Load(k); ok {
		return v
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var cur map[K]V
	if p := c.m.Load(); p != nil {
		cur = *p
	}
	if v, ok := cur[k]; ok {
		return v
	}
	v, keep := build(len(cur))
	if !keep {
		return v
	}
	next := make(map[K]V, len(cur)+1)
	for key, val := range cur {
		next[key] = val
	}
	next[k] = v
	c.m.Store(&next)
	return v
}
