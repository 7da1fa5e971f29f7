package rollout

import (
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"
)

// ttyRedrawEvery is how often the terminal progress bar is redrawn.
const ttyRedrawEvery = 200 * time.Millisecond

// barWidth is the number of cells between the brackets of the bar.
const barWidth = 20

// progress renders the collector's progress to a writer. Counts come from
// atomics the workers update; only the goroutine started by start, and
// after it has stopped finish, write to w, so w needs no locking.
type progress struct {
	w       io.Writer
	tty     bool
	every   time.Duration
	clock   clock
	total   int // every task of the run, skipped ones included
	skipped int // tasks the output already had
	started time.Time

	recorded *atomic.Int64 // rollouts written by this run
	failed   *atomic.Int64 // of which failed

	lastWidth int // width of the last bar drawn, to blank leftovers
	stop      chan struct{}
	stopped   chan struct{}
}

// start draws the first bar (terminal mode) and begins redrawing or
// printing periodically until finish. A nil writer disables everything.
func (p *progress) start() {
	if p.w == nil {
		return
	}
	every := p.every
	if p.tty {
		every = ttyRedrawEvery
		p.draw(false)
	}
	tick, stopTicker := p.clock.ticker(every)
	p.stop, p.stopped = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(p.stopped)
		defer stopTicker()
		for {
			select {
			case <-p.stop:
				return
			case <-tick:
				p.draw(false)
			}
		}
	}()
}

// finish stops the periodic output and writes the final state: the last
// bar and a newline in terminal mode, a last plain line otherwise.
func (p *progress) finish() {
	if p.w == nil {
		return
	}
	close(p.stop)
	<-p.stopped
	p.draw(true)
	if p.tty {
		_, _ = io.WriteString(p.w, "\n")
	}
}

func (p *progress) draw(final bool) {
	s := p.snapshot()
	if !p.tty {
		_, _ = io.WriteString(p.w, s.plain(final)+"\n")
		return
	}
	line := s.bar()
	width := len(line)
	if pad := p.lastWidth - width; pad > 0 {
		line += strings.Repeat(" ", pad) // blank what a longer bar left behind
	}
	p.lastWidth = width
	_, _ = io.WriteString(p.w, "\r"+line)
}

func (p *progress) snapshot() progressState {
	return progressState{
		total:    p.total,
		skipped:  p.skipped,
		recorded: int(p.recorded.Load()),
		failed:   int(p.failed.Load()),
		elapsed:  p.clock.now().Sub(p.started),
	}
}

// progressState is one moment of a run; its methods format it.
type progressState struct {
	total, skipped, recorded, failed int
	elapsed                          time.Duration
}

// done counts the tasks that have a line in the output: the skipped ones
// and the ones recorded since.
func (s progressState) done() int { return s.skipped + s.recorded }

func (s progressState) percent() int {
	if s.total <= 0 {
		return 100
	}
	return s.done() * 100 / s.total
}

// rate is rollouts recorded per second by this run (skipped tasks took no
// time, so they do not count).
func (s progressState) rate() float64 {
	if s.elapsed <= 0 {
		return 0
	}
	return float64(s.recorded) / s.elapsed.Seconds()
}

// eta estimates the time left at the current rate; ok is false while no
// rate is known.
func (s progressState) eta() (d time.Duration, ok bool) {
	left := s.total - s.done()
	if left <= 0 {
		return 0, true
	}
	r := s.rate()
	if r <= 0 {
		return 0, false
	}
	return time.Duration(float64(left) / r * float64(time.Second)), true
}

func (s progressState) etaString() string {
	d, ok := s.eta()
	if !ok {
		return "--"
	}
	return shortDuration(d)
}

// plain is the line printed periodically when the writer is not a terminal,
// e.g. "rollouts: 412/1000 (41%) 83.2/s eta 7s".
func (s progressState) plain(final bool) string {
	line := fmt.Sprintf("rollouts: %d/%d (%d%%) %.1f/s", s.done(), s.total, s.percent(), s.rate())
	if final {
		line += " elapsed " + shortDuration(s.elapsed)
	} else {
		line += " eta " + s.etaString()
	}
	if s.failed > 0 {
		line += fmt.Sprintf(" failed %d", s.failed)
	}
	return line
}

// bar is the terminal line, e.g.
// "[=========>          ] 412/1000  41%  83.2/s  ETA 7s".
func (s progressState) bar() string {
	filled := barWidth
	if s.total > 0 {
		filled = min(s.done()*barWidth/s.total, barWidth)
	}
	cells := strings.Repeat("=", filled)
	if filled < barWidth {
		cells += ">" + strings.Repeat(" ", barWidth-filled-1)
	}
	line := fmt.Sprintf("[%s] %d/%d %3d%%  %.1f/s  ETA %s", cells, s.done(), s.total, s.percent(), s.rate(), s.etaString())
	if s.failed > 0 {
		line += fmt.Sprintf("  %d failed", s.failed)
	}
	return line
}

// shortDuration formats d to whole seconds: "7s", "2m05s", "1h02m".
func shortDuration(d time.Duration) string {
	secs := int64(d.Round(time.Second) / time.Second)
	switch {
	case secs < 60:
		return fmt.Sprintf("%ds", max(secs, 0))
	case secs < 3600:
		return fmt.Sprintf("%dm%02ds", secs/60, secs%60)
	default:
		return fmt.Sprintf("%dh%02dm", secs/3600, secs%3600/60)
	}
}
