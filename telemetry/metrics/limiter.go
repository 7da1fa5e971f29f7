package metrics

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/gymlens/gymlens/lens/instruments/gym"
	"github.com/gymlens/gymlens/telemetry"
)

// Limiter is a counting semaphore that bounds the units of work in flight
// at one site (contract.Site*), and the source of that site's
// gym.concurrency.* metrics:
//
//   - gym.concurrency.limit, .active, .available and .queue_depth are read
//     from the semaphore at collection time, summed over the site's live
//     limiters, so the four always agree (active + available = limit);
//   - gym.concurrency.queue_wait_duration_ms records how long each
//     admission waited (0 when a slot was free);
//   - gym.concurrency.admission_cancelled_total counts the callers whose
//     context ended before they got a slot.
//
// It works the same with telemetry off, where it costs a channel
// operation and a gate check per Acquire. The zero value is not usable;
// make one with NewLimiter. A Limiter is safe for concurrent use.
type Limiter struct {
	slots *gym.Slots
	site  *binding[siteSeries]
}

// NewLimiter returns a limiter of limit slots (at least 1) for site.
func NewLimiter(site string, limit int) *Limiter {
	return &Limiter{slots: gym.NewSlots(site, limit), site: sites.get(site)}
}

// Acquire takes a slot, waiting for one as long as ctx allows. It returns
// nil with a slot held (give it back with Release), or ctx's error, wrapped,
// with none: also when ctx had already ended, so cancelled work never
// starts.
func (l *Limiter) Acquire(ctx context.Context) error {
	if ctx.Err() != nil {
		return l.cancelled(ctx)
	}
	if l.slots.TryAcquire() {
		if ins := telemetry.Instruments(); ins != nil {
			l.waited(ins, 0)
		}
		return nil
	}
	start := time.Now()
	if l.slots.Wait(ctx) != nil {
		return l.cancelled(ctx)
	}
	if ins := telemetry.Instruments(); ins != nil {
		l.waited(ins, time.Since(start))
	}
	return nil
}

// Close ends the limiter's part in its site's gym.concurrency.* gauges, at
// once: call it when the work it admits is over. It does not wait for or
// affect slots still held.
func (l *Limiter) Close() { l.slots.Close() }

// Release gives back the slot an Acquire took. A Release with no slot
// held does nothing but log at debug.
func (l *Limiter) Release() {
	if !l.slots.Release() {
		slog.Debug("metrics: limiter released more slots than it gave", "site", l.slots.Site())
	}
}

func (l *Limiter) waited(ins *gym.Instruments, d time.Duration) {
	defer guard()
	l.site.in(ins).wait.Record(ms(d))
}

// cancelled counts an admission ctx ended and returns the error Acquire
// gives for it.
func (l *Limiter) cancelled(ctx context.Context) error {
	if ins := telemetry.Instruments(); ins != nil {
		func() {
			defer guard()
			l.site.in(ins).cancelled.Add(1)
		}()
	}
	return fmt.Errorf("metrics: acquire a %s slot: %w", l.slots.Site(), context.Cause(ctx))
}
