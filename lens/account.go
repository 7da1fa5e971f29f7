package lens

import (
	"context"
	"sync/atomic"
)

// queueAccount counts what became of the items (spans, log records) that
// a queue in front of one exporter was offered: each is dropped because
// the queue was full, pending, or handed to the exporter and then
// exported or failed. Every count but pending only grows; once the queue
// has shut down, pending is what it left behind. It also holds the
// queue's abort context, the parent of every export, cancelled when the
// queue's shutdown deadline passes so that no export outlives it.
type queueAccount struct {
	limit    int64
	pending  atomic.Int64 // admitted and not yet handed to the exporter
	dropped  atomic.Uint64
	handed   atomic.Uint64
	exported atomic.Uint64
	failed   atomic.Uint64
	shutDown atomic.Bool // shutdown returned: pending items are lost

	abort  context.Context
	cancel context.CancelFunc
}

func newQueueAccount(limit int) *queueAccount {
	a := &queueAccount{limit: int64(limit)}
	a.abort, a.cancel = context.WithCancel(context.Background())
	return a
}

// admit takes room for one item, or counts it dropped when the queue is
// full. It never blocks.
func (a *queueAccount) admit() bool {
	if a.pending.Add(1) > a.limit {
		a.pending.Add(-1)
		a.dropped.Add(1)
		return false
	}
	return true
}

// hand moves n items from the queue to the exporter.
func (a *queueAccount) hand(n uint64) {
	a.pending.Add(-int64(n))
	a.handed.Add(n)
}

// settle records the outcome of an export of n items, lost of them lost.
func (a *queueAccount) settle(n, lost uint64) {
	lost = min(lost, n)
	a.failed.Add(lost)
	a.exported.Add(n - lost)
}

// exportContext is ctx, also cancelled when the queue's shutdown deadline
// passes; call stop when the export returned.
func (a *queueAccount) exportContext(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(a.abort, cancel)
	return ctx, func() { stop(); cancel() }
}

// shutdown runs stop (the queue's own shutdown) bounded by ctx: when ctx
// ends, every export still running is cancelled. Afterwards, what is still
// pending counts as unflushed.
func (a *queueAccount) shutdown(ctx context.Context, stop func() error) error {
	stopAbort := context.AfterFunc(ctx, a.cancel)
	defer func() { stopAbort(); a.cancel() }()
	err := stop()
	a.shutDown.Store(true)
	return err
}

// queueCounts is a queueAccount read at one moment.
type queueCounts struct {
	offered, queueFull, unflushed, exported, failed uint64
}

// counts reads the account. Unflushed is only known once the queue has
// shut down; before, the items not yet handed to the exporter, and those
// in an export still running, are counted in offered only, still on their
// way.
func (a *queueAccount) counts() queueCounts {
	var c queueCounts
	// Later stages first: an item counts as handed before it counts as
	// exported or failed, so handed read afterwards covers them.
	c.failed = a.failed.Load()
	c.exported = a.exported.Load()
	handed := max(a.handed.Load(), c.exported+c.failed)
	c.queueFull = a.dropped.Load()
	pending := uint64(max(a.pending.Load(), 0))
	c.offered = c.queueFull + handed + pending
	if a.shutDown.Load() {
		c.unflushed = pending
		// An export still running when shutdown returned had its context
		// cancelled as shutdown ended: its items are lost, whenever it
		// gets round to returning.
		c.failed += handed - c.exported - c.failed
	}
	return c
}
