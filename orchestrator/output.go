package orchestrator

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/gymlens/gymlens/gymconfig"
)

// outputGrace is how long a child's output pipes are drained after the
// child was reaped: a grandchild that escaped the process group may hold
// them open, and the fleet does not wait for it longer than this.
const outputGrace = 5 * time.Second

// drainBufSize is the read buffer of each output pipe's drainer.
const drainBufSize = 32 << 10

// logSink is a child's log file as its drainers write to it. A write that
// fails (a full disk: ENOSPC) is counted and dropped, never returned: the
// drainers must go on reading the child's pipes whatever the disk does,
// because a child whose pipe stops being read blocks, and one whose pipe
// is closed dies of SIGPIPE on its next line. Every write is tried, so
// logging resumes by itself once the disk has room again, with a line
// saying how much was lost.
type logSink struct {
	name string // the server, for the logs
	log  *slog.Logger

	mu       sync.Mutex
	f        *os.File
	lost     int64 // bytes not written, in total
	gap      int64 // bytes lost since the last successful write
	firstErr error // the first write error, logged once
}

// Write writes p to the log file; it always reports success.
func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gap > 0 {
		note := fmt.Sprintf("\n[gym: %d bytes of this server's output were lost: %v]\n", s.gap, s.firstErr)
		if _, err := s.f.WriteString(note); err == nil {
			s.gap = 0
		}
	}
	n, err := s.f.Write(p)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	if err != nil {
		s.lost += int64(len(p) - n)
		s.gap += int64(len(p) - n)
		if s.firstErr == nil {
			s.firstErr = err
			s.log.Warn("server log write failed; the server's output is dropped (and counted) until writes succeed again, the server keeps running",
				"server", s.name, "log", s.f.Name(), "err", err)
		}
	}
	return len(p), nil
}

// close closes the log file and reports what was lost, if anything.
func (s *logSink) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lost > 0 {
		s.log.Warn("server log incomplete", "server", s.name, "log", s.f.Name(), "lost_bytes", s.lost, "err", s.firstErr)
	}
	_ = s.f.Close()
}

// Lost returns how many bytes of output the log file missed.
func (s *logSink) Lost() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lost
}

// childOutput owns a child's stdout and stderr pipes: the orchestrator
// creates them (the child gets the write ends, so os/exec starts no copy
// goroutine of its own) and drains each in a goroutine until EOF. Output
// goes to the log sink, stderr also to the tail buffer. Nothing a writer
// does can stop the draining.
type childOutput struct {
	sink    *logSink
	readers []*os.File
	writers []*os.File // the child's ends, closed here once it has started
	wg      sync.WaitGroup
}

// newChildOutput makes the pipes; stdout and stderr are the write ends to
// hand the child.
func newChildOutput(sink *logSink) (out *childOutput, stdout, stderr *os.File, err error) {
	out = &childOutput{sink: sink}
	for range 2 {
		r, w, perr := os.Pipe()
		if perr != nil {
			out.closeAll()
			return nil, nil, nil, fmt.Errorf("output pipe: %w", perr)
		}
		out.readers = append(out.readers, r)
		out.writers = append(out.writers, w)
	}
	return out, out.writers[0], out.writers[1], nil
}

// start closes the orchestrator's copies of the write ends (the child has
// its own now; EOF comes when it and whatever inherited them are gone) and
// starts draining: stdout to the sink, stderr to the sink and tail.
func (o *childOutput) start(tail io.Writer) {
	for _, w := range o.writers {
		_ = w.Close()
	}
	o.writers = nil
	sinks := []io.Writer{o.sink, writers{o.sink, tail}}
	for i, r := range o.readers {
		o.wg.Go(func() { drain(r, sinks[i]) })
	}
}

// writers writes to every writer, ignoring their errors (neither the sink
// nor the tail buffer returns one).
type writers []io.Writer

func (ws writers) Write(p []byte) (int, error) {
	for _, w := range ws {
		_, _ = w.Write(p)
	}
	return len(p), nil
}

// drain copies r to w until r ends, a line at a time with every URL in it
// scrubbed of credentials (gymconfig.ScrubURLs): a child's log is in the
// run directory, and a server may print an endpoint with its token. A
// line longer than maxLogLine is passed on in parts. w never fails, so
// only EOF or the closing of r (see finish) ends it.
func drain(r *os.File, w io.Writer) {
	buf := make([]byte, drainBufSize)
	var line, out []byte
	for {
		n, err := r.Read(buf)
		out = out[:0]
		for chunk := buf[:n]; len(chunk) > 0; {
			i := bytes.IndexByte(chunk, '\n')
			if i < 0 {
				line = append(line, chunk...)
				if len(line) >= maxLogLine {
					out, line = appendScrubbed(out, line), line[:0]
				}
				break
			}
			line = append(line, chunk[:i+1]...)
			out, line = appendScrubbed(out, line), line[:0]
			chunk = chunk[i+1:]
		}
		if err != nil {
			out = appendScrubbed(out, line)
		}
		if len(out) > 0 {
			_, _ = w.Write(out)
		}
		if err != nil {
			return
		}
	}
}

// maxLogLine bounds how much of one line drain holds before passing it on.
const maxLogLine = 64 << 10

// appendScrubbed appends line to out with its URLs scrubbed.
func appendScrubbed(out, line []byte) []byte {
	if !bytes.Contains(line, []byte("://")) {
		return append(out, line...)
	}
	return append(out, gymconfig.ScrubURLs(string(line))...)
}

// finish waits for the drainers to reach EOF, up to grace, then closes the
// read ends (which ends any drainer still reading), waits for them and
// closes the log. Called once the child has been reaped.
func (o *childOutput) finish(grace time.Duration) {
	done := make(chan struct{})
	go func() {
		o.wg.Wait()
		close(done)
	}()
	t := time.NewTimer(grace)
	select {
	case <-done:
	case <-t.C:
	}
	t.Stop()
	o.closeAll()
	<-done
	o.sink.close()
}

// closeAll closes every pipe end still open.
func (o *childOutput) closeAll() {
	for _, f := range append(o.readers, o.writers...) {
		if err := f.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
			o.sink.log.Debug("close output pipe", "server", o.sink.name, "err", err)
		}
	}
}
