package lens

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
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
// and accounts for every sampled span that ends: the SDK's processor tells
// neither what it drops nor what its exporter failed to deliver. It keeps
// the queue bound itself: a sampled span that ends while set.queue spans
// wait for an export is dropped here, counted and logged at most once per
// interval; the rest go to the SDK's processor, whose own queue is given
// room for set.queue plus a batch, so it never drops one of them. A span
// stops taking room once the exporter has been handed it; it then counts
// as exported or, when the export returned an error, as failed. Whatever
// shutdown left in the queue counts as unflushed (see Stats).
//
// It is an sdktrace.SpanProcessor; Shutdown flushes and stops the SDK's
// processor, which shuts the exporter down.
type spanQueue struct {
	bsp   sdktrace.SpanProcessor
	acct  *queueAccount
	name  string // the exporter's name, for Stats and the log
	ctype string // the exporter's component type, for Stats

	log *slog.Logger

	stop     chan struct{}
	reporter chan struct{} // closed when reportLoop returned
	once     sync.Once
	reportMu sync.Mutex
	reported uint64 // drops already logged; under reportMu
	every    time.Duration
}

var _ sdktrace.SpanProcessor = (*spanQueue)(nil)

// newSpanQueue starts the queue of exp; its accounting names it name, of
// component type ctype.
func newSpanQueue(exp sdktrace.SpanExporter, name, ctype string, log *slog.Logger, set batchSettings) *spanQueue {
	q := &spanQueue{
		name:     name,
		ctype:    ctype,
		acct:     newQueueAccount(set.queue),
		log:      log,
		stop:     make(chan struct{}),
		reporter: make(chan struct{}),
		every:    set.interval,
	}
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
	if q.acct.admit() {
		q.bsp.OnEnd(s)
	}
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
		close(q.stop)
		<-q.reporter
		err = q.acct.shutdown(ctx, func() error { return q.bsp.Shutdown(ctx) })
		q.reportDrops()
	})
	return err
}

// Dropped returns how many spans were dropped because the queue was full.
func (q *spanQueue) Dropped() uint64 { return q.acct.dropped.Load() }

// Stats returns the queue's account so far (see queueAccount.counts).
func (q *spanQueue) Stats() SpanStats {
	c := q.acct.counts()
	return SpanStats{Exporter: q.name, ComponentType: q.ctype, Ended: c.offered,
		QueueFull: c.queueFull, Unflushed: c.unflushed, Exported: c.exported, ExportFailed: c.failed}
}

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
	if n := q.acct.dropped.Load(); n != q.reported {
		q.log.Warn("telemetry export queue full: spans dropped",
			"dropped_in_interval", n-q.reported, "dropped_total", n)
		q.reported = n
	}
}

// countingExporter tells its queue when spans leave it for the exporter,
// and how many of them the export delivered.
type countingExporter struct {
	sdktrace.SpanExporter
	q *spanQueue
}

// ExportSpans hands spans to the exporter; from then on they no longer
// take room in the queue. A failed export counts its spans as lost: all of
// them, or as many as a lossError says.
func (c countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	n := uint64(len(spans))
	a := c.q.acct
	a.hand(n)
	ctx, stop := a.exportContext(ctx)
	defer stop()
	err := c.SpanExporter.ExportSpans(ctx, spans)
	if err == nil {
		a.settle(n, 0)
		return nil
	}
	lost := n
	var le *lossError
	if errors.As(err, &le) {
		lost = min(uint64(le.lost), n)
	}
	a.settle(n, lost)
	return fmt.Errorf("lens: span export (%d of %d spans lost): %w", lost, n, err)
}

// lossError is an export error that lost only some of the batch: an
// exporter that sends a batch in several requests (see budgetExporter)
// says how many spans the failed ones held.
type lossError struct {
	lost int
	err  error
}

func (e *lossError) Error() string { return e.err.Error() }
func (e *lossError) Unwrap() error { return e.err }

// SpanStats is what became of the spans one exporter's queue was offered:
// every sampled span that ended is in exactly one of QueueFull, Unflushed,
// Exported and ExportFailed once the handle has shut down.
type SpanStats struct {
	// Exporter is the exporter's name (an EXPORTER value, or "custom" for
	// Options.SpanExporter); ComponentType is its kind in the semantic
	// conventions' otel.component.type terms.
	Exporter, ComponentType string
	// Ended counts the sampled spans that ended and were offered.
	Ended uint64
	// QueueFull counts the spans dropped because the queue was full.
	QueueFull uint64
	// Unflushed counts the spans still queued when shutdown ended (its
	// deadline passed first); 0 before shutdown.
	Unflushed uint64
	// Exported counts the spans the exporter delivered.
	Exported uint64
	// ExportFailed counts the spans of exports that returned an error or,
	// once shut down, were still running when shutdown ended them.
	ExportFailed uint64
}

// Lost returns how many spans never reached their destination.
func (s SpanStats) Lost() uint64 { return s.QueueFull + s.Unflushed + s.ExportFailed }

// namedExporter is a span exporter with the names its accounting uses.
type namedExporter struct {
	sdktrace.SpanExporter
	name, ctype string
}
