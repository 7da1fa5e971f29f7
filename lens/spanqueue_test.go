package lens

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// recordingExporter keeps every batch it is handed; block, when set, holds
// each export until it is closed or the export's ctx ends.
type recordingExporter struct {
	mu          sync.Mutex
	active      int // exports in progress
	maxInFlight int
	batches     []int
	total       int
	shutdown    int
	block       chan struct{}
}

func (e *recordingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.mu.Lock()
	e.active++
	e.maxInFlight = max(e.maxInFlight, e.active)
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		e.active--
		e.mu.Unlock()
	}()
	if e.block != nil {
		select {
		case <-e.block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.batches = append(e.batches, len(spans))
	e.total += len(spans)
	return nil
}

func (e *recordingExporter) Shutdown(context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.shutdown++
	return nil
}

func (e *recordingExporter) inFlight() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.active
}

func (e *recordingExporter) counts() (batches []int, total int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]int(nil), e.batches...), e.total
}

// defaultBatch are the settings a process gets without OTEL_BSP_* variables.
var defaultBatch = batchSettingsFrom(Config{})

// every20ms is defaultBatch with a short interval.
var every20ms = func() batchSettings { s := defaultBatch; s.interval = 20 * time.Millisecond; return s }()

// queueTestTracer makes real, ended SDK spans for the queue tests; it has
// no processor of its own, so the tests hand the spans over themselves.
var queueTestTracer = sdktrace.NewTracerProvider().Tracer("queue-test")

func sampledSpan(i int) sdktrace.ReadOnlySpan {
	_, s := queueTestTracer.Start(context.Background(), "s"+strconv.Itoa(i))
	s.End()
	return s.(sdktrace.ReadOnlySpan)
}

func TestSpanQueueExportsFullBatchesWithoutWaitingForTheInterval(t *testing.T) {
	exp := &recordingExporter{}
	b := newSpanQueue(exp, "test", "test", slog.New(slog.DiscardHandler), defaultBatch)
	for i := range defaultBatch.batch {
		b.OnEnd(sampledSpan(i))
	}
	// The batch is full: the loop was woken and exports it long before the
	// five-second interval. Poll, bounded.
	deadline := time.Now().Add(4 * time.Second)
	for {
		if _, total := exp.counts(); total == defaultBatch.batch {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a full batch was not exported before the interval")
		}
		time.Sleep(5 * time.Millisecond)
	}
	for i := range 10 {
		b.OnEnd(sampledSpan(i))
	}
	if err := b.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, total := exp.counts(); total != defaultBatch.batch+10 {
		t.Fatalf("exported %d spans, want %d", total, defaultBatch.batch+10)
	}
	if err := b.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := b.Shutdown(context.Background()); err != nil {
		t.Fatalf("second Shutdown: %v", err)
	}
	b.OnEnd(sampledSpan(1)) // after shutdown: ignored, no panic
	if exp.shutdown != 1 {
		t.Fatalf("exporter shut down %d times", exp.shutdown)
	}
}

func TestSpanQueueDropsWhenFullAndReportsOnce(t *testing.T) {
	exp := &recordingExporter{block: make(chan struct{})}
	var logs bytes.Buffer
	b := newSpanQueue(exp, "test", "test", slog.New(slog.NewTextHandler(&logs, nil)), defaultBatch)
	n := defaultBatch.queue*2 + 100
	for i := range n {
		b.OnEnd(sampledSpan(i)) // never blocks, even with the exporter stuck
	}
	if b.Dropped() == 0 {
		t.Fatal("nothing dropped with the exporter stuck and the queue overfull")
	}
	close(exp.block)
	if err := b.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, total := exp.counts()
	if uint64(total)+b.Dropped() != uint64(n) {
		t.Fatalf("exported %d + dropped %d != %d ended", total, b.Dropped(), n)
	}
	if c := strings.Count(logs.String(), "spans dropped"); c != 1 {
		t.Fatalf("drop reported %d times, want once:\n%s", c, logs.String())
	}
	for _, size := range func() []int { s, _ := exp.counts(); return s }() {
		if size > defaultBatch.batch {
			t.Fatalf("batch of %d spans exceeds %d", size, defaultBatch.batch)
		}
	}
}

func TestSpanQueueShutdownBoundedByContext(t *testing.T) {
	exp := &recordingExporter{block: make(chan struct{})} // never released
	b := newSpanQueue(exp, "test", "test", slog.New(slog.DiscardHandler), defaultBatch)
	b.OnEnd(sampledSpan(1))
	if err := shutdownWithin(t, b, 100*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown = %v, want the deadline", err)
	}
}

// shutdownWithin shuts b down under a deadline of d and returns its error;
// the test fails if Shutdown has not returned 10 s later (it ignored ctx).
func shutdownWithin(t *testing.T, b *spanQueue, d time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- b.Shutdown(ctx) }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown ignored its context")
		return nil
	}
}

// waitInFlight waits (bounded) until exp has an export in progress.
func waitInFlight(t *testing.T, exp *recordingExporter) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); exp.inFlight() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no export started")
		}
	}
}

func TestSpanQueueShutdownWhileLoopExportIsStuck(t *testing.T) {
	exp := &recordingExporter{block: make(chan struct{})}
	b := newSpanQueue(exp, "test", "test", slog.New(slog.DiscardHandler), defaultBatch)
	for i := range defaultBatch.batch { // a full batch: the loop starts exporting and blocks
		b.OnEnd(sampledSpan(i))
	}
	waitInFlight(t, exp)
	if err := shutdownWithin(t, b, 100*time.Millisecond); err == nil {
		t.Fatal("Shutdown reported success with the export stuck")
	}
	close(exp.block)
}

// Drops are reported while the export loop is stuck in a slow export,
// which is exactly when they happen (a collector that never answers).
func TestSpanQueueReportsDropsWhileExportIsStuck(t *testing.T) {
	exp := &recordingExporter{block: make(chan struct{})}
	logs := &lockedBuffer{}
	b := newSpanQueue(exp, "test", "test", slog.New(slog.NewTextHandler(logs, nil)), every20ms)
	for i := range defaultBatch.queue * 2 { // the first full batch blocks the loop
		b.OnEnd(sampledSpan(i))
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), "spans dropped") {
		if time.Now().After(deadline) {
			t.Fatal("no drop report while the export was stuck")
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(exp.block)
	if err := b.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestBatchSettingsFromConfig(t *testing.T) {
	cfg, err := LoadConfig(LoadOptions{Lookup: func(k string) (string, bool) {
		v, ok := map[string]string{"OTEL_BSP_MAX_QUEUE_SIZE": "100", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "40",
			"OTEL_BSP_SCHEDULE_DELAY": "250", "OTEL_BSP_EXPORT_TIMEOUT": "1000"}[k]
		return v, ok
	}})
	if err != nil {
		t.Fatal(err)
	}
	got := batchSettingsFrom(cfg)
	want := batchSettings{queue: 100, batch: 40, interval: 250 * time.Millisecond, timeout: time.Second}
	if got != want {
		t.Errorf("settings %+v, want %+v", got, want)
	}
	// A batch above the queue, given or by default, is capped at the queue.
	for _, env := range []map[string]string{
		{"OTEL_BSP_MAX_QUEUE_SIZE": "500", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "600"},
		{"OTEL_BSP_MAX_QUEUE_SIZE": "1000"},
	} {
		cfg, err := LoadConfig(LoadOptions{Lookup: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
		if err != nil {
			t.Fatalf("%v: %v", env, err)
		}
		if got := batchSettingsFrom(cfg); got.batch != got.queue {
			t.Errorf("%v: batch %d, want capped at the queue %d", env, got.batch, got.queue)
		}
	}
	if d := batchSettingsFrom(Config{}); d.queue != DefaultSpanQueueSize || d.batch != DefaultSpanBatchSize ||
		d.interval != 5*time.Second || d.timeout != 30*time.Second {
		t.Errorf("settings of a zero Config: %+v", d)
	}
}

// TestSpanQueueConcurrentAccounting: spans ended from many goroutines while
// flushes run beside the workers are each exported once or counted as
// dropped, never lost and never sent twice.
func TestSpanQueueConcurrentAccounting(t *testing.T) {
	exp := &recordingExporter{}
	set := defaultBatch
	set.queue, set.batch = 1000, 300 // small, so the queue fills and drops happen
	b := newSpanQueue(exp, "test", "test", slog.New(slog.DiscardHandler), set)
	const writers, each = 8, 5000
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				b.OnEnd(sampledSpan(w*each + i))
			}
		})
	}
	flushes := make(chan struct{})
	go func() {
		defer close(flushes)
		for range 20 {
			if err := b.ForceFlush(context.Background()); err != nil {
				t.Error(err)
			}
		}
	}()
	wg.Wait()
	<-flushes
	if err := b.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, total := exp.counts()
	if got := uint64(total) + b.Dropped(); got != writers*each {
		t.Fatalf("exported %d + dropped %d = %d, want %d ended", total, b.Dropped(), got, writers*each)
	}
}
