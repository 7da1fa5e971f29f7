package gym

import (
	"sync"
	"time"
)

// minCPUWindow is the shortest wall time a CPU reading covers. Two readers
// (say Prometheus and OTLP) each run the callback; a reading sooner than
// this after the last one repeats the last value instead of dividing a few
// ticks by a few microseconds.
const minCPUWindow = time.Second

// treeSampler reads the memory and CPU of this process and its
// descendants. It is nil on platforms with no reader.
type treeSampler struct {
	read func() (treeReading, bool)
	now  func() time.Time

	mu      sync.Mutex
	last    treeReading
	lastAt  time.Time
	percent float64
}

// treeReading is one walk of the process tree: the resident bytes of all
// of it and the CPU time (user+system) each process has used, by process
// identity (pid and start time, so a reused pid is a new process).
type treeReading struct {
	rssBytes uint64
	cpu      map[procKey]time.Duration
}

type procKey struct {
	pid   int
	start uint64
}

// sample returns the tree's resident memory in MiB and its CPU use in
// percent of one core since the previous sample (the first covers the
// time since the sampler was made). ok is false when the tree could not
// be read.
func (t *treeSampler) sample() (mib, percent float64, ok bool) {
	r, ok := t.read()
	if !ok {
		return 0, 0, false
	}
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if wall := now.Sub(t.lastAt); wall >= minCPUWindow || t.lastAt.IsZero() {
		var used time.Duration
		for k, cpu := range r.cpu {
			// A process new since the last reading counts from zero; one
			// that exited since takes its last window's time with it.
			if d := cpu - t.last.cpu[k]; d > 0 {
				used += d
			}
		}
		if !t.lastAt.IsZero() && wall > 0 {
			t.percent = 100 * float64(used) / float64(wall)
		}
		t.last, t.lastAt = r, now
	}
	return float64(r.rssBytes) / (1 << 20), t.percent, true
}

// newTreeSampler returns the platform's sampler with its first reading
// taken, or nil where the process tree cannot be read.
func newTreeSampler() *treeSampler {
	if readTree == nil {
		return nil
	}
	t := &treeSampler{read: readTree, now: time.Now}
	if r, ok := t.read(); ok {
		t.last, t.lastAt = r, t.now()
	}
	return t
}
