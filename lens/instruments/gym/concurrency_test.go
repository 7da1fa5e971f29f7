package gym

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/gymlens/gymlens/contract"
)

func siteOf(t *testing.T, site string) (siteState, bool) {
	t.Helper()
	for _, s := range concurrencySnapshot() {
		if s.site == site {
			return s, true
		}
	}
	return siteState{}, false
}

func TestSlotsCountAndWait(t *testing.T) {
	s := NewSlots("test_slots", 2)
	if s.Limit() != 2 || s.Site() != "test_slots" {
		t.Fatalf("limit %d site %q", s.Limit(), s.Site())
	}
	if !s.TryAcquire() || !s.TryAcquire() || s.TryAcquire() {
		t.Fatal("two slots did not admit exactly two")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Wait(ctx) }()
	for s.Waiting() != 1 {
		runtime.Gosched()
	}
	if st, ok := siteOf(t, "test_slots"); !ok || st != (siteState{"test_slots", 2, 2, 1}) {
		t.Fatalf("snapshot %+v %v, want limit 2 active 2 waiting 1", st, ok)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait after cancel: %v", err)
	}
	if s.Waiting() != 0 || s.Active() != 2 {
		t.Fatalf("after a cancelled wait: waiting %d active %d", s.Waiting(), s.Active())
	}
	go func() { done <- s.Wait(context.Background()) }()
	for s.Waiting() != 1 {
		runtime.Gosched()
	}
	if !s.Release() {
		t.Fatal("Release of a held slot failed")
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	s.Release()
	s.Release()
	if s.Release() {
		t.Fatal("Release with nothing held succeeded")
	}
	if s.Active() != 0 {
		t.Fatalf("active %d", s.Active())
	}
	if NewSlots("test_min", 0).Limit() != 1 {
		t.Fatal("limit 0 not raised to 1")
	}
	runtime.KeepAlive(s)
}

// Limiters of one site are summed; past MaxSites, sites are summed under
// contract.Other; a collected Slots leaves the snapshot.
func TestConcurrencySnapshotSumsCapsAndForgets(t *testing.T) {
	a, b := NewSlots("test_sum", 3), NewSlots("test_sum", 4)
	a.TryAcquire()
	b.TryAcquire()
	b.TryAcquire()
	if st, _ := siteOf(t, "test_sum"); st.limit != 7 || st.active != 3 {
		t.Fatalf("summed %+v, want limit 7 active 3", st)
	}
	var many []*Slots
	for i := range MaxSites + 5 {
		many = append(many, NewSlots(fmt.Sprintf("test_many_%d", i), 1))
	}
	snap := concurrencySnapshot()
	if len(snap) != MaxSites+1 || snap[len(snap)-1].site != contract.Other {
		t.Fatalf("%d sites, last %q; want %d and %s", len(snap), snap[len(snap)-1].site, MaxSites+1, contract.Other)
	}
	runtime.KeepAlive(a)
	runtime.KeepAlive(b)
	runtime.KeepAlive(many)
	// Drop them all; after a GC the registry forgets them.
	a, b, many = nil, nil, nil
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		if _, ok := siteOf(t, "test_sum"); !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("collected limiters still in the snapshot")
		}
	}
}

// A closed semaphore leaves its site's sums at once, while it is still
// reachable; one of the same site left open stays counted.
func TestSlotsCloseLeavesTheGauges(t *testing.T) {
	const site = "test-close"
	open, closed := NewSlots(site, 2), NewSlots(site, 5)
	if s, ok := siteOf(t, site); !ok || s.limit != 7 {
		t.Fatalf("before Close: %+v, %v; want limit 7", s, ok)
	}
	closed.Close()
	if s, ok := siteOf(t, site); !ok || s.limit != 2 {
		t.Fatalf("after Close: %+v, %v; want limit 2", s, ok)
	}
	if !closed.TryAcquire() || !closed.Release() {
		t.Error("a closed semaphore must still admit and release")
	}
	open.Close()
	if s, ok := siteOf(t, site); ok {
		t.Errorf("both closed, site still reported: %+v", s)
	}
	runtime.KeepAlive(open)
	runtime.KeepAlive(closed)
}
