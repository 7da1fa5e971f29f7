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

// Batcher defaults, the same as the SDK's batch span processor.
const (
	batchSize      = 512
	batchQueueSize = 2048
	batchInterval  = 5 * time.Second
	exportTimeout  = 30 * time.Second
)

// spanBatcher is the span processor lens installs. It does what the SDK's
// batch span processor does (bounded queue, batches of 512, an export at
// least every five seconds, drop rather than block when full) with one
// difference that matters on a busy server: ending a span appends it under
// a mutex and wakes the export goroutine only when a batch is full, where
// the SDK's processor hands every span to that goroutine over a channel and
// so may wake it once per span. It also counts dropped spans and reports
// them at most once per interval.
type spanBatcher struct {
	interval time.Duration
	exp      sdktrace.SpanExporter
	log      *slog.Logger

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

func newSpanBatcher(exp sdktrace.SpanExporter, log *slog.Logger) *spanBatcher {
	return newSpanBatcherEvery(exp, log, batchInterval)
}

// newSpanBatcherEvery is newSpanBatcher with its own export and report
// interval (tests use a short one).
func newSpanBatcherEvery(exp sdktrace.SpanExporter, log *slog.Logger, interval time.Duration) *spanBatcher {
	b := &spanBatcher{
		interval: interval,
		exp:      exp,
		log:      log,
		queue:    make([]sdktrace.ReadOnlySpan, 0, batchSize),
		spare:    make([]sdktrace.ReadOnlySpan, 0, batchSize),
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
	if len(b.queue) >= batchQueueSize {
		b.mu.Unlock()
		b.dropped.Add(1)
		return
	}
	b.queue = append(b.queue, s)
	full := len(b.queue) == batchSize
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
	t := time.NewTicker(b.interval)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
		case <-b.kick:
		}
		ctx, cancel := context.WithTimeout(context.Background(), exportTimeout)
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
		for start := 0; start < len(batch); start += batchSize {
			end := min(start+batchSize, len(batch))
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
	t := time.NewTicker(b.interval)
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
