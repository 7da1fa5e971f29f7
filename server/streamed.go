package server

import (
	"bufio"
	"io"
	"net/http"
)

// Streamed is an answer written as it is produced, for one too large to
// build whole before its first byte goes out (an /aggregate_metrics
// answer of a large collection, or one passed on from a peer as it
// arrives). A typed handler (Handle, HandleStream) returning one answers
// 200 with Header's entries and Content-Type application/json, and Write
// is called with the body's writer; what it writes reaches the wire in
// pieces of StreamedChunk bytes (and the rest when it returns). Write must
// produce one valid JSON value; the runtime trusts it, as it trusts a
// RawJSON.
//
// An error of Write before any byte was sent is answered as the handler's
// error would be; after that the answer cannot be taken back, so the
// connection is closed without the body's end, and the caller sees a cut
// answer, not a complete one.
type Streamed struct {
	Header http.Header
	Write  func(w io.Writer) error
}

// StreamedChunk is how many bytes of a Streamed answer are sent at a
// time: each piece is a chunk on the wire and a wake-up of its reader.
const StreamedChunk = 64 << 10

// WriteStreamed answers v on w as a typed handler answers a Streamed
// result (see Streamed), for a plain handler (HandleFunc) that passes an
// answer on as it arrives. An error of v.Write after the first byte
// panics with http.ErrAbortHandler, which the server turns into a closed
// connection: the handler must not recover it.
func WriteStreamed(w http.ResponseWriter, v Streamed) {
	out := &streamedWriter{w: w, header: v.Header}
	buf := bufio.NewWriterSize(out, StreamedChunk)
	err := v.Write(buf)
	if err == nil {
		err = buf.Flush()
	}
	switch {
	case err == nil && !out.started:
		out.start() // an empty body: the status and header still go
	case err != nil && !out.started:
		writeError(w, err)
	case err != nil:
		// Sent in part: only a cut connection says it is not whole.
		panic(http.ErrAbortHandler)
	}
}

// streamedWriter writes a Streamed answer's pieces, the header before
// the first, each flushed to the wire at once.
type streamedWriter struct {
	w       http.ResponseWriter
	header  http.Header
	started bool
}

func (s *streamedWriter) start() {
	s.started = true
	for k, vs := range s.header {
		s.w.Header()[k] = vs
	}
	s.w.Header().Set("Content-Type", "application/json")
	s.w.WriteHeader(http.StatusOK)
}

func (s *streamedWriter) Write(b []byte) (int, error) {
	if !s.started {
		s.start()
	}
	n, err := s.w.Write(b)
	if err != nil {
		return n, err
	}
	return n, http.NewResponseController(s.w).Flush()
}

// AnswerReader, given to a Client call for its answer (PostStream), reads
// a 2xx answer as it arrives rather than whole: it is called with the
// answer's header and body, and the call returns once it has, with its
// error. For an answer passed on to another caller while it is still
// arriving.
type AnswerReader func(header http.Header, body io.Reader) error
