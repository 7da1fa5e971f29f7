package lens

import (
	"context"
	"fmt"

	sdklog "go.opentelemetry.io/otel/sdk/log"
)

// Log batching: the OpenTelemetry specification's defaults for the batch
// log record processor, which lens keeps itself (see logQueue).
const (
	logQueueSize = 2048
	logBatchSize = 512
)

// logQueue puts the SDK's batch log record processor in front of one
// exporter and accounts for every record emitted, as spanQueue does for
// spans: the SDK's processor drops records when its queue is full and
// tells nobody but its own log. A record emitted while logQueueSize
// records wait is dropped here and counted; the SDK's processor gets room
// for that many plus a batch, so it never drops one itself. Shutdown is
// bounded by its context: an export still running when it ends is
// cancelled and its records count as failed, what is still queued as
// unflushed.
type logQueue struct {
	bp    *sdklog.BatchProcessor
	acct  *queueAccount
	name  string
	ctype string
}

var _ sdklog.Processor = (*logQueue)(nil)

func newLogQueue(exp sdklog.Exporter, name, ctype string) *logQueue {
	q := &logQueue{acct: newQueueAccount(logQueueSize), name: name, ctype: ctype}
	q.bp = sdklog.NewBatchProcessor(countingLogExporter{exp, q.acct},
		sdklog.WithMaxQueueSize(logQueueSize+logBatchSize),
		sdklog.WithExportMaxBatchSize(logBatchSize))
	return q
}

// Enabled is the SDK processor's: every record.
func (q *logQueue) Enabled(ctx context.Context, p sdklog.EnabledParameters) bool {
	return q.bp.Enabled(ctx, p)
}

// OnEmit queues the record, or drops and counts it when the queue is full.
func (q *logQueue) OnEmit(ctx context.Context, r *sdklog.Record) error {
	if !q.acct.admit() {
		return nil
	}
	return q.bp.OnEmit(ctx, r)
}

// ForceFlush exports everything queued, bounded by ctx.
func (q *logQueue) ForceFlush(ctx context.Context) error { return q.bp.ForceFlush(ctx) }

// Shutdown flushes and stops the SDK's processor and the exporter,
// bounded by ctx.
func (q *logQueue) Shutdown(ctx context.Context) error {
	return q.acct.shutdown(ctx, func() error { return q.bp.Shutdown(ctx) })
}

// Stats returns the queue's account so far.
func (q *logQueue) Stats() LogStats {
	c := q.acct.counts()
	return LogStats{Exporter: q.name, ComponentType: q.ctype, Emitted: c.offered,
		QueueFull: c.queueFull, Unflushed: c.unflushed, Exported: c.exported, ExportFailed: c.failed}
}

// countingLogExporter tells its account when records leave the queue for
// the exporter, and whether the export delivered them.
type countingLogExporter struct {
	sdklog.Exporter
	acct *queueAccount
}

func (c countingLogExporter) Export(ctx context.Context, records []sdklog.Record) error {
	n := uint64(len(records))
	if n == 0 {
		return c.Exporter.Export(ctx, records)
	}
	c.acct.hand(n)
	ctx, stop := c.acct.exportContext(ctx)
	defer stop()
	if err := c.Exporter.Export(ctx, records); err != nil {
		c.acct.settle(n, n)
		return fmt.Errorf("lens: log export (%d records lost): %w", n, err)
	}
	c.acct.settle(n, 0)
	return nil
}

// LogStats is what became of the log records one exporter's queue was
// offered: once the handle has shut down, every record emitted is in
// exactly one of QueueFull, Unflushed, Exported and ExportFailed.
type LogStats struct {
	// Exporter and ComponentType name the exporter, as in SpanStats.
	Exporter, ComponentType string
	// Emitted counts the records offered to the queue.
	Emitted uint64
	// QueueFull counts the records dropped because the queue was full.
	QueueFull uint64
	// Unflushed counts the records still queued when shutdown ended; 0
	// before shutdown.
	Unflushed uint64
	// Exported counts the records the exporter delivered.
	Exported uint64
	// ExportFailed counts the records of exports that returned an error
	// or were still running when shutdown ended them.
	ExportFailed uint64
}

// Lost returns how many records never reached their destination.
func (s LogStats) Lost() uint64 { return s.QueueFull + s.Unflushed + s.ExportFailed }

// namedLogExporter is a log exporter with the names its accounting uses.
type namedLogExporter struct {
	sdklog.Exporter
	name, ctype string
}
