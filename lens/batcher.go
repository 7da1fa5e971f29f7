package lens

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
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
		s.interval = 5 * time.Second
	}
	if s.timeout <= 0 {
		s.timeout = 30 * time.Second
	}
	return s
}

// spanBatcher is the span processor lens installs. Like the SDK's batch
// span processor it holds finished spans in a bounded queue, exports them
// from a goroutine of its own at least once per interval, and drops (and
// counts) spans rather than block a caller when the queue is full. It
// differs where that matters on a busy server:
//
//   - Ending a span appends it under a mutex; the export goroutine is woken
//     only when wakeSize spans are waiting, not handed every span over a
//     channel.
//   - One export takes everything queued, up to the batch setting (2048 by
//     default, four times the SDK's 512). On a server whose cores are busy
//     serving, an export's duration is mostly the time its goroutines (the
//     exporter's, gRPC's) wait to be scheduled behind the request
//     goroutines, whatever its size. Measured here: 512-span OTLP exports
//     took 10-150 ms under load, so a fixed 512 per export fell behind a
//     server ending 26 000 spans/s and dropped a third of them with the
//     collector healthy; taking the backlog in one export kept up with
//     nothing dropped.
//   - Drops are logged at most once per interval, from a goroutine that
//     does not wait on exports.
type spanBatcher struct {
	set batchSettings
	exp sdktrace.SpanExporter
	log *slog.Logger

	mu    sync.Mutex
	queue []sdktrace.ReadOnlySpan
	spare []sdktrace.ReadOnlySpan

	exportMu sync.Mutex // one export at a time: the loop's or a flush's
	kick     chan struct{}
	stop     chan struct{}
	stopped  chan struct{}
	closed   atomic.Bool
	once     sync.Once

	dropped  atomic.Uint64
	reportMu sync.Mutex
	reported uint64        // drops already logged; under reportMu
	reporter chan struct{} // closed when reportLoop returned
}

func newSpanBatcher(exp sdktrace.SpanExporter, log *slog.Logger, set batchSettings) *spanBatcher {
	b := &spanBatcher{
		set:      set,
		exp:      exp,
		log:      log,
		queue:    make([]sdktrace.ReadOnlySpan, 0, wakeSize),
		spare:    make([]sdktrace.ReadOnlySpan, 0, wakeSize),
		kick:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
		stopped:  make(chan struct{}),
		reporter: make(chan struct{}),
	}
	go b.loop()
	go b.reportLoop()
	return b
}

// OnStart does nothing: only finished spans are exported.
func (b *spanBatcher) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd queues a finished, sampled span. It never blocks on export: when
// the queue is full the span is dropped and counted.
func (b *spanBatcher) OnEnd(s sdktrace.ReadOnlySpan) {
	if b.closed.Load() || !s.SpanContext().IsSampled() {
		return
	}
	b.mu.Lock()
	if len(b.queue) >= b.set.queue {
		b.mu.Unlock()
		b.dropped.Add(1)
		return
	}
	b.queue = append(b.queue, s)
	full := len(b.queue) == min(wakeSize, b.set.batch)
	b.mu.Unlock()
	if full {
		select {
		case b.kick <- struct{}{}:
		default:
		}
	}
}

func (b *spanBatcher) loop() {
	defer close(b.stopped)
	t := time.NewTicker(b.set.interval)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
		case <-b.kick:
		}
		ctx, cancel := context.WithTimeout(context.Background(), b.set.timeout)
		if err := b.export(ctx); err != nil {
			otel.Handle(err)
		}
		cancel()
	}
}

// export sends everything queued so far, in batches.
func (b *spanBatcher) export(ctx context.Context) error {
	b.exportMu.Lock()
	defer b.exportMu.Unlock()
	var errs []error
	for {
		b.mu.Lock()
		batch := b.queue
		b.queue, b.spare = b.spare[:0], nil
		b.mu.Unlock()
		if len(batch) == 0 {
			b.mu.Lock()
			b.spare = batch
			b.mu.Unlock()
			return errors.Join(errs...)
		}
		for start := 0; start < len(batch); start += b.set.batch {
			end := min(start+b.set.batch, len(batch))
			if err := b.exp.ExportSpans(ctx, batch[start:end]); err != nil {
				errs = append(errs, err)
			}
		}
		clear(batch) // let the spans go
		b.mu.Lock()
		b.spare = batch[:0]
		b.mu.Unlock()
		if ctx.Err() != nil {
			return errors.Join(append(errs, ctx.Err())...)
		}
	}
}

// reportLoop logs drops once per interval. It runs apart from the export
// loop, which is stuck in an export for up to exportTimeout exactly when the
// collector is slow or gone, which is when spans are dropped.
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

// ForceFlush exports everything queued, bounded by ctx.
func (b *spanBatcher) ForceFlush(ctx context.Context) error {
	return b.export(ctx)
}

// Shutdown stops the loop, exports what is queued and shuts the exporter
// down, all bounded by ctx. Later calls return nil.
func (b *spanBatcher) Shutdown(ctx context.Context) error {
	var err error
	b.once.Do(func() {
		b.closed.Store(true)
		close(b.stop)
		<-b.reporter
		// Whatever happens below, the drops so far are reported.
		defer b.reportDrops()
		select {
		case <-b.stopped:
		case <-ctx.Done():
			// The loop is stuck in an export; give up on what is queued.
			err = errors.Join(ctx.Err(), b.exp.Shutdown(ctx))
			return
		}
		err = errors.Join(b.export(ctx), b.exp.Shutdown(ctx))
	})
	return err
}

// Dropped returns how many spans were dropped because the queue was full.
func (b *spanBatcher) Dropped() uint64 { return b.dropped.Load() }
