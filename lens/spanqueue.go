package lens

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// batchSettings configure the batch span processor of one exporter (see
// the OTEL_BSP_* settings).
type batchSettings struct {
	queue    int           // most spans held; more are dropped and counted
	batch    int           // most spans in one export
	interval time.Duration // longest wait before queued spans are exported; also the drop-report period
	timeout  time.Duration // bound on one export
}

// batchSettingsFrom takes the processor's settings from a loaded Config,
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

// spanQueue puts the SDK's batch span processor in front of one exporter
// and counts the spans it had to drop, which the SDK's processor does not
// tell. It keeps the queue bound itself: a sampled span that ends while
// set.queue spans wait for an export is dropped here, counted
// and logged at most once per interval; the rest go to the SDK's processor,
// whose own queue is given room for set.queue plus a batch, so it never
// drops one of them. A span stops counting once the exporter has been
// handed it (exported or not).
//
// It is an sdktrace.SpanProcessor; Shutdown flushes and stops the SDK's
// processor, which shuts the exporter down.
type spanQueue struct {
	bsp     sdktrace.SpanProcessor
	limit   int64
	pending atomic.Int64 // spans handed to bsp and not yet to the exporter
	dropped atomic.Uint64
	log     *slog.Logger

	abort  context.Context // parent of every export; cancelled when Shutdown's ctx ends or it returns
	cancel context.CancelFunc

	stop     chan struct{}
	reporter chan struct{} // closed when reportLoop returned
	once     sync.Once
	reportMu sync.Mutex
	reported uint64 // drops already logged; under reportMu
	every    time.Duration
}

var _ sdktrace.SpanProcessor = (*spanQueue)(nil)

func newSpanQueue(exp sdktrace.SpanExporter, log *slog.Logger, set batchSettings) *spanQueue {
	q := &spanQueue{
		limit:    int64(set.queue),
		log:      log,
		stop:     make(chan struct{}),
		reporter: make(chan struct{}),
		every:    set.interval,
	}
	q.abort, q.cancel = context.WithCancel(context.Background())
	q.bsp = sdktrace.NewBatchSpanProcessor(countingExporter{exp, q},
		sdktrace.WithMaxQueueSize(set.queue+set.batch),
		sdktrace.WithMaxExportBatchSize(set.batch),
		sdktrace.WithBatchTimeout(set.interval),
		sdktrace.WithExportTimeout(set.timeout))
	go q.reportLoop()
	return q
}

// OnStart does nothing: the batch processor only looks at ended spans.
func (q *spanQueue) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd queues a sampled span, or drops and counts it when the queue is
// full. It never blocks.
func (q *spanQueue) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return // the batch processor ignores these too
	}
	if q.pending.Add(1) > q.limit {
		q.pending.Add(-1)
		q.dropped.Add(1)
		return
	}
	q.bsp.OnEnd(s)
}

// ForceFlush exports everything queued, bounded by ctx.
func (q *spanQueue) ForceFlush(ctx context.Context) error { return q.bsp.ForceFlush(ctx) }

// Shutdown flushes and stops the batch processor and the exporter, then
// logs the drops not yet reported, all bounded by ctx: an export still
// running when ctx ends (an OTLP exporter retrying for its own timeout) is
// cancelled, not left behind. Later calls return nil.
func (q *spanQueue) Shutdown(ctx context.Context) error {
	var err error
	q.once.Do(func() {
		stopAbort := context.AfterFunc(ctx, q.cancel)
		defer func() { stopAbort(); q.cancel() }()
		close(q.stop)
		<-q.reporter
		err = q.bsp.Shutdown(ctx)
		q.reportDrops()
	})
	return err
}

// Dropped returns how many spans were dropped because the queue was full.
func (q *spanQueue) Dropped() uint64 { return q.dropped.Load() }

// reportLoop logs drops once per interval, from a goroutine of its own:
// drops happen when exports are slow, so the export goroutine is the one
// that cannot be relied on to tell.
func (q *spanQueue) reportLoop() {
	defer close(q.reporter)
	t := time.NewTicker(q.every)
	defer t.Stop()
	for {
		select {
		case <-q.stop:
			return
		case <-t.C:
			q.reportDrops()
		}
	}
}

func (q *spanQueue) reportDrops() {
	q.reportMu.Lock()
	defer q.reportMu.Unlock()
	if n := q.dropped.Load(); n != q.reported {
		q.log.Warn("telemetry export queue full: spans dropped",
			"dropped_in_interval", n-q.reported, "dropped_total", n)
		q.reported = n
	}
}

// countingExporter tells its queue when spans leave it for the exporter.
type countingExporter struct {
	sdktrace.SpanExporter
	q *spanQueue
}

// ExportSpans hands spans to the exporter; from then on they no longer
// take room in the queue, whatever the export's outcome.
func (c countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	c.q.pending.Add(-int64(len(spans)))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(c.q.abort, cancel)
	defer stop()
	if err := c.SpanExporter.ExportSpans(ctx, spans); err != nil {
		return fmt.Errorf("lens: span export: %w", err)
	}
	return nil
}
