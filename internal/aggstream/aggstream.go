// Package aggstream reads an /aggregate_metrics request as it arrives and
// passes it on the same way.
//
// NeMo Gym's collector sends /aggregate_metrics once, every result of a
// collection in one body, after the last rollout; each server on the way
// (environment server, agent, resources server) then reads the whole body
// before it starts. gymlens's collector opens the request when the first
// result arrives and sends each result as it comes, and the servers read
// (and pass on) each element of verify_responses once it is complete,
// so that by the end of the collection only the last results and the
// answer are left to do. The body on the wire is the same JSON; a server
// that reads it whole (NeMo Gym's) sees no difference.
package aggstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/gymlens/gymlens/internal/jsonskim"
	"github.com/gymlens/gymlens/server"
)

// Open starts a request body of the streamed shape; Close ends it. In
// between, the elements of verify_responses, comma-separated.
const (
	Open  = `{"verify_responses":[`
	Close = `]}`
)

// Batch is how many bytes of a streamed body are sent at least at a time
// (but the last): every write is a chunk of its own on the wire and a
// wake-up of each server on the way, which, result by result, cost more
// than reading the whole body at the end did.
const Batch = 64 << 10

// Each reads an /aggregate_metrics request from r and gives fn each
// element of its verify_responses list as soon as the element has been
// read: an object, as it came (fn must copy it to keep it), checked as
// JSON when check is set (a caller whose fn decodes it need not). The
// body must be one object whose first member is verify_responses, a list
// of objects, its name written without escapes (whitespace anywhere JSON
// allows it); members after it are read (checked when check is set) and
// dropped, as upstream's model drops them, unless one is named
// verify_responses again; for anything else, a body that ends early or a failed read
// included, Each stops and returns an error wrapping
// server.ErrNotStreamed, and the caller reads the body its usual way. An
// error of fn ends Each with that error.
func Each(r io.Reader, check bool, fn func(elem []byte) error) error {
	s := splitter{r: r, buf: make([]byte, 0, 64<<10)}
	for _, want := range []string{"{", `"verify_responses"`, ":", "["} {
		if err := s.expect(want); err != nil {
			return err
		}
	}
	if err := s.space(); err != nil {
		return err
	}
	if s.at(']') {
		s.pos++
	} else {
		for {
			if !s.at('{') {
				return notStreamed(errors.New("an element of verify_responses is not an object"))
			}
			elem, err := s.value()
			if err != nil {
				return err
			}
			if check && !json.Valid(elem) {
				return notStreamed(errors.New("an element of verify_responses is not valid JSON"))
			}
			if err := fn(elem); err != nil {
				return err
			}
			if err := s.space(); err != nil {
				return err
			}
			if s.at(']') {
				s.pos++
				break
			}
			if !s.at(',') {
				return notStreamed(errors.New("no comma after an element of verify_responses"))
			}
			s.pos++
			if err := s.space(); err != nil {
				return err
			}
		}
	}
	// Members after the list are dropped, as the decoding of the whole
	// body drops them; a second verify_responses (the last one counts
	// there), or a name with an escape that could spell it, is not taken.
	for {
		if err := s.space(); err != nil {
			return err
		}
		if s.at('}') {
			s.pos++
			break
		}
		if err := s.expect(","); err != nil {
			return err
		}
		if err := s.space(); err != nil {
			return err
		}
		if !s.at('"') {
			return notStreamed(errors.New("a member name was expected"))
		}
		name, err := s.value()
		if err != nil {
			return err
		}
		if bytes.IndexByte(name, '\\') >= 0 || string(name) == `"verify_responses"` {
			return notStreamed(errors.New("a second verify_responses"))
		}
		if err := s.expect(":"); err != nil {
			return err
		}
		if err := s.space(); err != nil {
			return err
		}
		v, err := s.value()
		if err != nil {
			return err
		}
		if check && !json.Valid(v) {
			return notStreamed(errors.New("a member is not valid JSON"))
		}
	}
	if err := s.space(); !errors.Is(err, io.EOF) {
		if err == nil {
			err = errors.New("more after the object")
		}
		return notStreamed(err)
	}
	return nil
}

// splitter reads a body in chunks, keeping from the start of the value
// being read on.
type splitter struct {
	r   io.Reader
	buf []byte
	pos int
	err error // of the last read; io.EOF at the end
}

// fill reads more of the body: some, or, when grow is set, at least as
// much again as is kept (so a long value is scanned a bounded number of
// times) unless the body ends first.
func (s *splitter) fill(grow bool) {
	if s.err != nil {
		return
	}
	if s.pos > 0 { // drop what has been read
		s.buf = s.buf[:copy(s.buf, s.buf[s.pos:])]
		s.pos = 0
	}
	need := 1
	if grow {
		need = max(need, len(s.buf))
	}
	if cap(s.buf)-len(s.buf) < max(need, 32<<10) {
		s.buf = append(s.buf, make([]byte, max(need, 32<<10))...)[:len(s.buf)]
	}
	empty := 0
	for got := 0; got < need && s.err == nil; {
		n, err := s.r.Read(s.buf[len(s.buf):cap(s.buf)])
		s.buf = s.buf[:len(s.buf)+n]
		got += n
		s.err = err
		if n > 0 {
			empty = 0
		} else if empty++; empty == 100 {
			s.err = io.ErrNoProgress
		}
	}
}

// space skips whitespace; its error, once the body has ended, wraps
// server.ErrNotStreamed and the read's (io.EOF when it ended well).
func (s *splitter) space() error {
	for {
		for s.pos < len(s.buf) {
			switch s.buf[s.pos] {
			case ' ', '\t', '\n', '\r':
				s.pos++
				continue
			}
			return nil
		}
		if s.err != nil {
			return notStreamed(s.err)
		}
		s.fill(false)
	}
}

// at reports whether the next byte is c; space has been skipped.
func (s *splitter) at(c byte) bool { return s.pos < len(s.buf) && s.buf[s.pos] == c }

// expect reads want after whitespace.
func (s *splitter) expect(want string) error {
	if err := s.space(); err != nil {
		return err
	}
	for len(s.buf)-s.pos < len(want) && s.err == nil {
		s.fill(false)
	}
	if len(s.buf)-s.pos < len(want) || string(s.buf[s.pos:s.pos+len(want)]) != want {
		return notStreamed(fmt.Errorf("%q was expected", want))
	}
	s.pos += len(want)
	return nil
}

// value reads the value that starts at the next byte (its outline: see
// jsonskim.ValueEnd); the bytes are valid until the next read.
func (s *splitter) value() ([]byte, error) {
	for {
		end, ok := jsonskim.ValueEnd(s.buf, s.pos)
		if ok && end == len(s.buf) && s.err == nil && !bytes.ContainsAny(s.buf[s.pos:s.pos+1], `{["`) {
			ok = false // a number or literal may go on in the next read
		}
		if ok {
			v := s.buf[s.pos:end]
			s.pos = end
			return v, nil
		}
		if s.err != nil {
			return nil, notStreamed(errors.Join(errors.New("the body ends inside an element"), s.err))
		}
		s.fill(true)
	}
}

func notStreamed(cause error) error {
	return fmt.Errorf("%w: %w", server.ErrNotStreamed, cause)
}

// Forward passes an /aggregate_metrics request read from body on to url
// through client as it arrives (Each, then PostStream): the elements are
// sent once read, Batch bytes at a time, the rest and the list's close
// when body ends, and the answer of url
// returned as it came. When body is not of the streamed shape (an error
// wrapping server.ErrNotStreamed), no call is made, or, when that shows
// only after an element, the call is abandoned midway; the caller then
// answers the whole body its usual way. A failed call to
// url, or a non-2xx answer (*server.StatusError), is returned as it is.
func Forward(ctx context.Context, client *server.Client, url string, body io.Reader) (server.RawJSON, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pr, pw := io.Pipe()
	type result struct {
		raw server.RawJSON
		err error
	}
	// The call starts with the first element (or the end of an empty
	// list), so a body of another shape from its start makes none.
	var done chan result
	write := func(b []byte) error {
		if done == nil {
			done = make(chan result, 1)
			go func() {
				var raw server.RawJSON
				err := client.PostStream(ctx, url, pr, &raw)
				// A call that ended early stops the writes below.
				_ = pr.CloseWithError(errors.Join(err, errCallEnded))
				done <- result{raw, err}
			}()
		}
		_, err := pw.Write(b)
		return err
	}
	buf := append(make([]byte, 0, 2*Batch), Open...)
	n := 0
	err := Each(body, true, func(elem []byte) error {
		if n > 0 {
			buf = append(buf, ',')
		}
		n++
		buf = append(buf, elem...)
		if len(buf) < Batch {
			return nil
		}
		err := write(buf)
		buf = buf[:0]
		return err
	})
	if err == nil {
		err = write(append(buf, Close...))
	}
	if err != nil {
		_ = pw.CloseWithError(err)
		if done == nil {
			return nil, err
		}
		cancel()
		r := <-done
		if errors.Is(err, errCallEnded) && r.err != nil {
			return nil, r.err // the call failed first
		}
		return nil, err
	}
	_ = pw.Close()
	r := <-done
	return r.raw, r.err
}

// errCallEnded is what a write to a call that has ended gets.
var errCallEnded = errors.New("aggstream: the call ended before its body")
