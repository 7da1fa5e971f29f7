package lens

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"

	"github.com/gymlens/gymlens/lens/internal/tracer"
)

// wakeSize is how many queued spans wake the export goroutine before the
// interval is up: the OpenTelemetry specification's batch size. One export
// then takes everything queued, up to batchSettings.batch spans.
const wakeSize = 512

// batchSettings configure a spanBatcher (see the OTEL_BSP_* settings).
type batchSettings struct {
	queue    int           // most spans held; more are dropped and counted
	batch    int           // most spans in one export
	interval time.Duration // longest wait before queued spans are exported; also the drop-report period
	timeout  time.Duration // bound on one export
}

// batchSettingsFrom takes the batcher's settings from a loaded Config,
// falling back to the defaults where a field is unset (zero).
func batchSettingsFrom(cfg Config) batchSettings {
	s := batchSettings{queue: cfg.SpanQueueSize, batch: cfg.SpanBatchSize,
		interval: cfg.SpanScheduleDelay, timeout: cfg.SpanExportTimeout}
	if s.queue <= 0 {
		s.queue = DefaultSpanQueueSize
	}
	if s.batch <= 0 {
		s.batch = DefaultSpanBatchSize
	}
	s.batch = min(s.batch, s.queue)
	if s.interval <= 0 {
		s.interval = defaultScheduleDelay
	}
	if s.timeout <= 0 {
		s.timeout = defaultExportTimeout
	}
	return s
}

// exportWorkers is how many exports may be in flight at once. An export to
// a collector is mostly waiting (for the network, for the receiver, for its
// goroutines to be scheduled on a busy server); while one waits, a second
// can carry the spans that kept arriving.
const exportWorkers = 2

// spanBatcher is the span processor lens installs on its tracer. Like the
// SDK's batch span processor it holds finished spans in a bounded queue,
// exports them from goroutines of its own at least once per interval, and
// drops (and counts) spans rather than block a caller when the queue is
// full. It differs where that matters on a busy server:
//
//   - Ending a span appends it under a mutex; an export goroutine is woken
//     only when wakeSize spans are waiting, not handed every span over a
//     channel.
//   - One export takes everything queued, up to the batch setting (1024 by
//     default, twice the SDK's 512), and up to exportWorkers exports
//     run at once. On a server whose cores are busy serving, an export's
//     duration is mostly the time its goroutines (the exporter's, gRPC's)
//     wait to be scheduled behind the request goroutines, whatever its
//     size, so one small export at a time falls behind a busy server and
//     drops spans with the collector healthy (docs/performance.md, "HTTP
//     under load", has the measurements).
//   - Drops are logged at most once per interval, from a goroutine that
//     does not wait on exports.
type spanBatcher struct {
	set       batchSettings
	wakeEvery int // queued spans per wake-up: min(wakeSize, set.batch)
	exp       spanExporter
	log       *slog.Logger

	mu      sync.Mutex
	queue   []*tracer.Span
	active  int             // exports in flight; under mu
	waiters []chan struct{} // closed when active drops to 0; under mu

	abort   context.Context // parent of the workers' exports; cancelled by Shutdown
	cancel  context.CancelFunc
	kick    chan struct{}
	slots   chan struct{} // one per export in flight, workers' and flushes' alike
	stop    chan struct{}
	workers sync.WaitGroup
	closed  atomic.Bool
	once    sync.Once

	dropped  atomic.Uint64
	reportMu sync.Mutex
	reported uint64        // drops already logged; under reportMu
	reporter chan struct{} // closed when reportLoop returned
}

func newSpanBatcher(exp spanExporter, log *slog.Logger, set batchSettings) *spanBatcher {
	b := &spanBatcher{
		set:       set,
		wakeEvery: min(wakeSize, set.batch),
		exp:       exp,
		log:       log,
		queue:     make([]*tracer.Span, 0, wakeSize),
		kick:      make(chan struct{}, exportWorkers),
		slots:     make(chan struct{}, exportWorkers),
		stop:      make(chan struct{}),
		reporter:  make(chan struct{}),
	}
	b.abort, b.cancel = context.WithCancel(context.Background())
	for range exportWorkers {
		b.workers.Go(b.loop)
	}
	go b.reportLoop()
	return b
}

// OnEnd queues a finished span. It never blocks on export: when the queue
// is full the span is dropped and counted.
func (b *spanBatcher) OnEnd(s *tracer.Span) {
	if b.closed.Load() {
		return
	}
	b.mu.Lock()
	if b.closed.Load() {
		// Shutdown closed the batcher between the check above and the
		// lock; its final drain has run or will not see this span.
		b.mu.Unlock()
		return
	}
	if len(b.queue) >= b.set.queue {
		b.mu.Unlock()
		b.dropped.Add(1)
		return
	}
	b.queue = append(b.queue, s)
	// Every wakeSize spans, not just the first: while one worker is in a
	// long export the backlog keeps growing, and the next worker must hear
	// of it.
	wake := len(b.queue)%b.wakeEvery == 0
	b.mu.Unlock()
	if wake {
		select {
		case b.kick <- struct{}{}:
		default: // every worker has a wake-up pending already
		}
	}
}

// loop is one export worker: it exports whatever is queued when it is
// woken (by OnEnd or by its interval timer) until the queue is empty.
func (b *spanBatcher) loop() {
	t := time.NewTicker(b.set.interval)
	defer t.Stop()
	var buf []*tracer.Span // this worker's batch, reused
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
		case <-b.kick:
		}
		ctx, cancel := context.WithTimeout(b.abort, b.set.timeout)
		var err error
		buf, err = b.drain(ctx, buf)
		if err != nil {
			otel.Handle(err)
		}
		cancel()
	}
}

// take moves up to a batch of queued spans into buf and counts an export
// in flight; it returns an empty batch, and counts nothing, when the queue
// is empty. Every take is followed by one call to done.
func (b *spanBatcher) take(buf []*tracer.Span) []*tracer.Span {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := min(len(b.queue), b.set.batch)
	if n == 0 {
		return buf[:0]
	}
	b.active++
	if n == len(b.queue) {
		// The usual case: everything queued fits one export. The queue
		// and the worker's buffer trade places, with no copy under the
		// lock every ending span takes.
		buf, b.queue = b.queue, buf[:0]
		return buf
	}
	buf = append(buf[:0], b.queue[:n]...)
	rest := copy(b.queue, b.queue[n:])
	clear(b.queue[rest:])
	b.queue = b.queue[:rest]
	return buf
}

// done ends an export counted by take, and wakes ForceFlush callers
// waiting for the last one.
func (b *spanBatcher) done(batch []*tracer.Span) {
	clear(batch) // let the spans go
	b.mu.Lock()
	defer b.mu.Unlock()
	b.active--
	if b.active == 0 {
		for _, w := range b.waiters {
			close(w)
		}
		b.waiters = nil
	}
}

// drain exports batches until the queue is empty or ctx ends, using buf
// for the batches; it returns buf for reuse. Each export holds one of the
// exportWorkers slots, so a flush running beside the workers does not add
// a third export in flight.
func (b *spanBatcher) drain(ctx context.Context, buf []*tracer.Span) ([]*tracer.Span, error) {
	var errs []error
	for {
		select {
		case b.slots <- struct{}{}:
		case <-ctx.Done():
			return buf, errors.Join(append(errs, ctx.Err())...)
		}
		buf = b.take(buf)
		if len(buf) == 0 {
			<-b.slots
			return buf, errors.Join(errs...)
		}
		if err := b.exp.export(ctx, buf); err != nil {
			errs = append(errs, err)
		}
		b.done(buf)
		<-b.slots
		if ctx.Err() != nil {
			return buf, errors.Join(append(errs, ctx.Err())...)
		}
	}
}

// idle waits until no export is in flight, bounded by ctx.
func (b *spanBatcher) idle(ctx context.Context) error {
	b.mu.Lock()
	if b.active == 0 {
		b.mu.Unlock()
		return nil
	}
	w := make(chan struct{})
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()
	select {
	case <-w:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// reportLoop logs drops once per interval. It runs apart from the export
// workers, which are stuck in exports for up to the export timeout exactly
// when the collector is slow or gone, which is when spans are dropped.
func (b *spanBatcher) reportLoop() {
	defer close(b.reporter)
	t := time.NewTicker(b.set.interval)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
			b.reportDrops()
		}
	}
}

func (b *spanBatcher) reportDrops() {
	b.reportMu.Lock()
	defer b.reportMu.Unlock()
	if n := b.dropped.Load(); n != b.reported {
		b.log.Warn("telemetry export queue full: spans dropped",
			"dropped_in_interval", n-b.reported, "dropped_total", n)
		b.reported = n
	}
}

// ForceFlush exports everything queued when it is called and waits for
// exports already in flight, all bounded by ctx: when it returns nil, every
// span that ended before the call has been handed to the exporter.
func (b *spanBatcher) ForceFlush(ctx context.Context) error {
	_, err := b.drain(ctx, nil)
	return errors.Join(err, b.idle(ctx))
}

// Shutdown stops the workers, exports what is queued and shuts the exporter
// down, all bounded by ctx. Later calls return nil.
func (b *spanBatcher) Shutdown(ctx context.Context) error {
	var err error
	b.once.Do(func() {
		// Under mu, so every span queued before this point is in the
		// queue the final flush below drains, and none is added after.
		b.mu.Lock()
		b.closed.Store(true)
		b.mu.Unlock()
		// Exports still running (an OTLP exporter retrying its last
		// batch for its own 30 s) end when ctx does, not later.
		stopAbort := context.AfterFunc(ctx, b.cancel)
		defer func() { stopAbort(); b.cancel() }()
		close(b.stop)
		<-b.reporter
		// Whatever happens below, the drops so far are reported.
		defer b.reportDrops()
		stopped := make(chan struct{})
		go func() { b.workers.Wait(); close(stopped) }()
		select {
		case <-stopped:
		case <-ctx.Done():
			// A worker is stuck in an export; give up on what is queued.
			err = errors.Join(ctx.Err(), b.exp.shutdown(ctx))
			return
		}
		err = errors.Join(b.ForceFlush(ctx), b.exp.shutdown(ctx))
	})
	return err
}

// Dropped returns how many spans were dropped because the queue was full.
func (b *spanBatcher) Dropped() uint64 { return b.dropped.Load() }
