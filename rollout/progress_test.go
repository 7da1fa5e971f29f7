package rollout

import (
	"bytes"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock is a clock the test moves by hand, with a ticker that fires
// only when the test sends on tick.
type fakeClock struct {
	nanos atomic.Int64
	tick  chan time.Time
	every time.Duration
}

func newFakeClock() *fakeClock { return &fakeClock{tick: make(chan time.Time)} }

func (c *fakeClock) set(d time.Duration) { c.nanos.Store(int64(d)) }

func (c *fakeClock) clock() clock {
	return clock{
		now: func() time.Time { return time.Unix(0, c.nanos.Load()) },
		ticker: func(d time.Duration) (<-chan time.Time, func()) {
			c.every = d
			return c.tick, func() {}
		},
	}
}

// signalWriter tells the test when each write has landed.
type signalWriter struct {
	buf   bytes.Buffer
	wrote chan struct{}
}

func (w *signalWriter) Write(p []byte) (int, error) {
	n, err := w.buf.Write(p)
	w.wrote <- struct{}{}
	return n, err
}

// newProgress returns a progress for 1000 tasks of which 100 were skipped,
// started at time 0 of a fake clock.
func newProgress(tty bool) (*progress, *fakeClock, *signalWriter) {
	fc := newFakeClock()
	w := &signalWriter{wrote: make(chan struct{}, 16)}
	p := &progress{
		w: w, tty: tty, every: 5 * time.Second, clock: fc.clock(),
		total: 1000, skipped: 100, started: time.Unix(0, 0),
		recorded: new(atomic.Int64), failed: new(atomic.Int64),
	}
	return p, fc, w
}

// step sets the state, fires one tick and waits for the resulting write.
func step(p *progress, fc *fakeClock, w *signalWriter, at time.Duration, recorded, failed int64) {
	fc.set(at)
	p.recorded.Store(recorded)
	p.failed.Store(failed)
	fc.tick <- time.Time{}
	<-w.wrote
}

func TestProgressPlain(t *testing.T) {
	p, fc, w := newProgress(false)
	p.start()
	if fc.every != 5*time.Second {
		t.Fatalf("plain lines every %v, want ProgressEvery", fc.every)
	}
	step(p, fc, w, 4*time.Second, 300, 0)
	step(p, fc, w, 10*time.Second, 800, 2)
	fc.set(11250 * time.Millisecond)
	p.recorded.Store(900)
	p.finish()
	want := "rollouts: 400/1000 (40%) 75.0/s eta 8s\n" +
		"rollouts: 900/1000 (90%) 80.0/s eta 1s failed 2\n" +
		"rollouts: 1000/1000 (100%) 80.0/s elapsed 11s failed 2\n"
	if got := w.buf.String(); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

func TestProgressTTY(t *testing.T) {
	p, fc, w := newProgress(true)
	p.start()
	<-w.wrote // the bar is drawn at once
	if fc.every != ttyRedrawEvery {
		t.Fatalf("redrawn every %v", fc.every)
	}
	step(p, fc, w, time.Second, 10, 0)
	step(p, fc, w, 4*time.Second, 300, 0)
	fc.set(11250 * time.Millisecond)
	p.recorded.Store(900)
	p.failed.Store(3)
	p.finish()
	want := "\r[==>                 ] 100/1000  10%  0.0/s  ETA --" +
		"\r[==>                 ] 110/1000  11%  10.0/s  ETA 1m29s" +
		"\r[========>           ] 400/1000  40%  75.0/s  ETA 8s   " + // blanks the longer ETA
		"\r[====================] 1000/1000 100%  80.0/s  ETA 0s  3 failed" +
		"\n"
	if got := w.buf.String(); got != want {
		t.Fatalf("got\n%q\nwant\n%q", got, want)
	}
}

func TestProgressNilWriter(t *testing.T) {
	p := &progress{clock: clock{}} // no writer: start and finish do nothing
	p.start()
	p.finish()
}

func TestProgressStateEdges(t *testing.T) {
	empty := progressState{}
	if empty.percent() != 100 || empty.etaString() != "0s" || !strings.HasPrefix(empty.bar(), "[====================] 0/0 100%") {
		t.Fatalf("no tasks: %q", empty.bar())
	}
	stalled := progressState{total: 10, elapsed: time.Minute}
	if stalled.rate() != 0 || stalled.etaString() != "--" {
		t.Fatalf("nothing done yet: rate %v eta %q", stalled.rate(), stalled.etaString())
	}
	for d, want := range map[time.Duration]string{
		0: "0s", 400 * time.Millisecond: "0s", 7 * time.Second: "7s", 59499 * time.Millisecond: "59s",
		125 * time.Second: "2m05s", 3720 * time.Second: "1h02m", -time.Second: "0s",
	} {
		if got := shortDuration(d); got != want {
			t.Errorf("shortDuration(%v) = %q, want %q", d, got, want)
		}
	}
}
