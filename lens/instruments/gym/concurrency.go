package gym

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"weak"

	"github.com/gymlens/gymlens/contract"
)

// MaxSites is the number of distinct concurrency sites exported with their
// own name; the state of further sites is summed under contract.Other.
const MaxSites = 64

// Slots is a counting semaphore whose state the gym.concurrency.* gauges
// read at collection time: its limit, the slots in use and the units of
// work waiting. It works whether or not anything is exported; the
// registry that the collection reads holds it weakly, so a Slots nobody
// uses any more is collected and its series go away.
//
// The fast path of Acquire (a free slot) and Release are one channel
// operation each; only a caller that has to wait touches the waiting
// count.
type Slots struct {
	site    string
	ch      chan struct{}
	waiting atomic.Int64
}

// NewSlots returns a semaphore of limit slots (at least 1) for site.
func NewSlots(site string, limit int) *Slots {
	s := &Slots{site: site, ch: make(chan struct{}, max(limit, 1))}
	registry.add(s)
	return s
}

// Site returns the site the semaphore was made for.
func (s *Slots) Site() string { return s.site }

// Limit returns the number of slots.
func (s *Slots) Limit() int { return cap(s.ch) }

// Active returns the slots in use.
func (s *Slots) Active() int { return len(s.ch) }

// Waiting returns the callers blocked in Acquire.
func (s *Slots) Waiting() int { return int(s.waiting.Load()) }

// TryAcquire takes a slot if one is free.
func (s *Slots) TryAcquire() bool {
	select {
	case s.ch <- struct{}{}:
		return true
	default:
		return false
	}
}

// Wait blocks until it takes a slot or ctx ends, counted as waiting
// meanwhile. It returns ctx's error, wrapped, when ctx ended first.
func (s *Slots) Wait(ctx context.Context) error {
	s.waiting.Add(1)
	defer s.waiting.Add(-1)
	select {
	case s.ch <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("gym: wait for a %s slot: %w", s.site, context.Cause(ctx))
	}
}

// Close takes the semaphore out of the gauges at once: its site's series
// no longer count it (without Close it is counted until the garbage
// collector finds it unreachable). Acquire and Release still work after
// Close; only the reporting ends.
func (s *Slots) Close() { registry.remove(s) }

// Release gives a slot back. It reports false, and does nothing, when no
// slot is held (a Release without an Acquire).
func (s *Slots) Release() bool {
	select {
	case <-s.ch:
		return true
	default:
		return false
	}
}

// siteState is one site's summed state at one collection.
type siteState struct {
	site                   string
	limit, active, waiting int64
}

// slotsRegistry holds every live Slots weakly.
type slotsRegistry struct {
	mu    sync.Mutex
	slots []weak.Pointer[Slots]
}

var registry slotsRegistry

func (r *slotsRegistry) add(s *Slots) {
	r.mu.Lock()
	r.slots = append(r.slots, weak.Make(s))
	r.mu.Unlock()
}

func (r *slotsRegistry) remove(s *Slots) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.slots = slices.DeleteFunc(r.slots, func(w weak.Pointer[Slots]) bool { return w.Value() == s })
}

// concurrencySnapshot sums the live semaphores by site, in the order the
// sites first appeared, dropping the ones that were collected. Sites past
// MaxSites are summed under contract.Other.
func concurrencySnapshot() []siteState {
	r := &registry
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []siteState
	index := map[string]int{}
	live := r.slots[:0]
	for _, w := range r.slots {
		s := w.Value()
		if s == nil {
			continue
		}
		live = append(live, w)
		site := s.site
		j, ok := index[site]
		if !ok {
			if len(index) >= MaxSites {
				site = contract.Other
				j, ok = index[site]
			}
			if !ok {
				j = len(out)
				index[site] = j
				out = append(out, siteState{site: site})
			}
		}
		out[j].limit += int64(cap(s.ch))
		out[j].active += int64(len(s.ch))
		out[j].waiting += s.waiting.Load()
	}
	clear(r.slots[len(live):])
	r.slots = live
	return out
}
