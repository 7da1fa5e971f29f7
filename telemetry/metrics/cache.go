package metrics

import (
	"sync/atomic"

	"github.com/gymlens/gymlens/lens/cowmap"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// maxValues is the number of distinct attribute values (or combinations
// of values) one recorder keeps series for; the rest are recorded under
// contract.Other.
const maxValues = 64

// opts are the ready-made options of one attribute set, as the SDK's
// Record and Add take them: passing a prebuilt slice with ... costs no
// allocation, where building the variadic slice at the call would.
type opts struct {
	rec []metric.RecordOption
	add []metric.AddOption
}

func newOpts(set attribute.Set) opts {
	o := metric.WithAttributeSet(set)
	return opts{rec: []metric.RecordOption{o}, add: []metric.AddOption{o}}
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
