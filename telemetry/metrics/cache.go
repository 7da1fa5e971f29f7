package metrics

import (
	"sync/atomic"

	"github.com/gymlens/gymlens/lens/cowmap"
	"github.com/gymlens/gymlens/lens/instruments/gym"
)

// maxValues is the number of distinct attribute values (or combinations
// of values) one recorder keeps series for; the rest are recorded under
// contract.Other.
const maxValues = 64

// binding is what one recorder's attribute sets are bound to (B, a
// struct of lens.BoundHistogram and lens.BoundCounter values) in the
// instruments of the current telemetry set-up. The sets are fixed when
// the binding is built; the bound values are made on the first record
// with an Instruments value and made again when telemetry was set up
// anew, so a record is one atomic load and one comparison.
type binding[B any] struct {
	bind func(*gym.Instruments) B
	cur  atomic.Pointer[bound[B]]
}

type bound[B any] struct {
	ins *gym.Instruments
	b   B
}

func newBinding[B any](bind func(*gym.Instruments) B) *binding[B] {
	return &binding[B]{bind: bind}
}

// in returns the bound values in ins (shared: not to be modified).
func (x *binding[B]) in(ins *gym.Instruments) *B {
	if c := x.cur.Load(); c != nil && c.ins == ins {
		return &c.b
	}
	c := &bound[B]{ins: ins, b: x.bind(ins)}
	x.cur.Store(c)
	return &c.b
}

// cache maps a recorder's attribute values to what it records with,
// built once per distinct key. Reads are one atomic load and one map
// lookup (no lock, no allocation); a miss copies the map under a mutex, so
// the map a reader holds never changes. Past maxValues keys, every new
// key reads the value of its overflow key (contract.Other in place of the
// values), which the cache keeps besides.
//
// In front of the map sits the key built last (never written on the
// record path): a process records mostly one agent, one model server, one
// tool server, so most lookups are one comparison.
type cache[K comparable, V any] struct {
	last     atomic.Pointer[entry[K, V]]
	m        cowmap.Map[K, V]
	build    func(K) V
	overflow func(K) K
}

type entry[K comparable, V any] struct {
	k K
	v V
}

func newCache[K comparable, V any](overflow func(K) K, build func(K) V) *cache[K, V] {
	return &cache[K, V]{build: build, overflow: overflow}
}

// get returns the value for k.
func (c *cache[K, V]) get(k K) V {
	if e := c.last.Load(); e != nil && e.k == k {
		return e.v
	}
	if v, ok := c.m.Load(k); ok {
		return v
	}
	full := c.m.Len() >= maxValues
	if !full {
		v := c.m.Get(k, func(n int) (V, bool) {
			if n >= maxValues {
				full = true
				var zero V
				return zero, false
			}
			v := c.build(k)
			c.last.Store(&entry[K, V]{k, v})
			return v, true
		})
		if !full {
			return v
		}
	}
	// Past the cap: the overflow key's value, kept besides the others.
	return c.m.Get(c.overflow(k), func(int) (V, bool) { return c.build(c.overflow(k)), true })
}
