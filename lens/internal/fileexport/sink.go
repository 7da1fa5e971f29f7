package fileexport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.opentelemetry.io/otel/sdk/resource"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/lens/telfile"
)

// ErrClosed is returned by exports that reach a Sink after Close.
var ErrClosed = errors.New("fileexport: sink is closed")

// Sink appends complete JSON lines to one io.Writer; safe for concurrent use
// by all three exporters.
type Sink struct {
	mu         sync.Mutex
	w          io.Writer
	owned      *os.File // file opened by OpenFile, closed by Close
	syncable   *os.File // regular file to fsync on ForceFlush, if any
	resAttrs   map[string]any
	headerDone bool
	closed     bool
	// cut is set when a write failed part-way, leaving a partial line at
	// the end of the destination: the next write starts with a newline,
	// so the records it carries are not glued to the cut one (a reader
	// then skips a single corrupt line, see telfile.ReadSkipping).
	cut bool
}

// NewSink returns a Sink writing to w. res describes the producing process
// and goes into the header line; nil means an empty resource. The caller
// keeps ownership of w: Close does not close it.
func NewSink(w io.Writer, res *resource.Resource) *Sink {
	s := &Sink{w: w, resAttrs: resourceAttrs(res)}
	if f, ok := w.(*os.File); ok {
		// Only regular files can be fsynced; pipes and terminals fail.
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
			s.syncable = f
		}
	}
	return s
}

// OpenFile creates path's parent directories (contract.RunDirPerm) if needed and opens the
// file for appending (created with mode contract.RunFilePerm). The returned Sink closes the
// file on Close.
func OpenFile(path string, res *resource.Resource) (*Sink, error) {
	if err := os.MkdirAll(filepath.Dir(path), contract.RunDirPerm); err != nil {
		return nil, fmt.Errorf("fileexport: %w", err)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, contract.RunFilePerm)
	if err != nil {
		return nil, fmt.Errorf("fileexport: %w", err)
	}
	s := NewSink(f, res)
	s.owned = f
	return s, nil
}

// Close closes the underlying file if the Sink opened it (OpenFile). Later
// exports fail with ErrClosed. Close is idempotent.
func (s *Sink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.owned != nil {
		return s.owned.Close()
	}
	return nil
}

// WriteRecords appends lines, complete record lines another Sink
// encoded, preceded by this Sink's header if none has been written yet:
// the same records land in two places byte for byte.
func (s *Sink) WriteRecords(lines []byte) error { return s.write(lines) }

// write appends one encoded batch, preceded by the header if none has been
// written yet, using a single Write call.
func (s *Sink) write(batch []byte) error {
	if len(batch) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	out := batch
	if !s.headerDone {
		hdr, err := telfile.AppendLine(nil, &telfile.Resource{
			Format:     telfile.FormatVersion,
			TimeNS:     time.Now().UnixNano(),
			Attributes: s.resAttrs,
		})
		if err != nil {
			return fmt.Errorf("fileexport: encoding resource header: %w", err)
		}
		out = append(hdr, batch...)
	}
	if s.cut {
		out = append([]byte{'\n'}, out...)
	}
	n, err := s.w.Write(out)
	if err == nil && n < len(out) {
		err = io.ErrShortWrite
	}
	if err != nil {
		if n > 0 {
			s.cut = true
		}
		return fmt.Errorf("fileexport: %w", err)
	}
	s.cut = false
	s.headerDone = true
	return nil
}

// flush fsyncs the destination when it is a regular file.
func (s *Sink) flush() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.syncable == nil {
		return nil
	}
	if err := s.syncable.Sync(); err != nil {
		return fmt.Errorf("fileexport: %w", err)
	}
	return nil
}

// exporterBase holds what the three exporters share: the sink and a
// per-exporter shutdown flag.
type exporterBase struct {
	sink *Sink
	mu   sync.RWMutex
	done bool
}

// stopped reports whether Shutdown has been called; a stopped exporter
// accepts exports but writes nothing.
func (b *exporterBase) stopped() bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.done
}

// ForceFlush fsyncs the sink's file when it writes to a regular file. Each
// batch is already handed to the writer during export, so there is nothing
// buffered to push out.
func (b *exporterBase) ForceFlush(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if b.stopped() {
		return nil
	}
	return b.sink.flush()
}

// Shutdown stops this exporter only; the sink and the other exporters keep
// working. It never blocks, so it reports ctx's error only if ctx is
// already done.
func (b *exporterBase) Shutdown(ctx context.Context) error {
	b.mu.Lock()
	b.done = true
	b.mu.Unlock()
	return ctx.Err()
}

// encoder accumulates one batch of lines. A record that cannot be encoded is
// skipped and its error kept, so one bad value does not lose the batch.
type encoder struct {
	buf  []byte
	errs []error
}

func (e *encoder) add(entry telfile.Entry) {
	var err error
	e.buf, err = telfile.AppendLine(e.buf, entry)
	if err != nil {
		e.errs = append(e.errs, fmt.Errorf("fileexport: encoding %s: %w", entry.RecordType(), err))
	}
}

// flushTo writes the batch to the sink and returns every problem seen.
func (e *encoder) flushTo(s *Sink) error {
	if err := s.write(e.buf); err != nil {
		e.errs = append(e.errs, err)
	}
	return errors.Join(e.errs...)
}

// unixNanos converts t to Unix nanoseconds, mapping the zero time to 0.
func unixNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func resourceAttrs(res *resource.Resource) map[string]any {
	m := map[string]any{}
	if res == nil {
		return m
	}
	for it := res.Iter(); it.Next(); {
		kv := it.Attribute()
		m[string(kv.Key)] = attrValue(kv.Value)
	}
	return m
}
