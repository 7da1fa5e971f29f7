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
	"net/http"

	"github.com/gymlens/gymlens/internal/jsonskim"
	"github.com/gymlens/gymlens/server"
)

// Open starts a request body of the streamed shape; Close ends it. In
// between, the elements of verify_responses, comma-separated.
const (
	Open  = `{"verify_responses":[`
	Close = `]}`
)

// CompleteHeader, set to CompleteValue on an /aggregate_metrics answer,
// says that its body is of the complete shape
// (jsonskim.CompleteAggregateMetrics: upstream's five members, each once,
// of its kind) and valid JSON, and is written as it is produced: a server
// that relays the answer may pass it on as it arrives, unread, with the
// header kept. gymlens's environments set it; an answer without it (NeMo
// Gym's servers send none) is read whole and checked as before. The last
// reader, the collector, still checks the answer's validity.
const (
	CompleteHeader = "Gymlens-Aggregate-Complete"
	CompleteValue  = "1"
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
	if err := s.list(`"verify_responses"`, check, fn); err != nil {
		return err
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

// list reads the opening of an object whose first member is the list
// named name (its encoded name) and the list, giving fn each element,
// an object, as soon as it has been read (checked as JSON when check is
// set); it stops after the list's closing bracket.
func (s *splitter) list(name string, check bool, fn func(elem []byte) error) error {
	for _, want := range []string{"{", name, ":", "["} {
		if err := s.expect(want); err != nil {
			return err
		}
	}
	if err := s.space(); err != nil {
		return err
	}
	if s.at(']') {
		s.pos++
		return nil
	}
	for {
		if !s.at('{') {
			return notStreamed(errors.New("an element of the list is not an object"))
		}
		elem, err := s.value()
		if err != nil {
			return err
		}
		if check && !json.Valid(elem) {
			return notStreamed(errors.New("an element of the list is not valid JSON"))
		}
		if err := fn(elem); err != nil {
			return err
		}
		if err := s.space(); err != nil {
			return err
		}
		if s.at(']') {
			s.pos++
			return nil
		}
		if !s.at(',') {
			return notStreamed(errors.New("no comma after an element of the list"))
		}
		s.pos++
		if err := s.space(); err != nil {
			return err
		}
	}
}

// EachGroup reads an /aggregate_metrics answer marked complete
// (CompleteHeader) from r as it arrives: it gives fn each element of
// group_level_metrics, the answer's first member, as soon as the element
// has been read (an object, as it came, unchecked: fn must copy it to
// keep it), then returns the rest of the answer, from what follows the
// list's closing bracket to its end. An answer that does not start with
// that list, or ends inside it, is an error.
func EachGroup(r io.Reader, fn func(elem []byte) error) (rest []byte, err error) {
	s := splitter{r: r, buf: make([]byte, 0, 64<<10)}
	if err := s.list(`"group_level_metrics"`, false, fn); err != nil {
		return nil, err
	}
	rest = append([]byte(nil), s.buf[s.pos:]...)
	if s.err != nil && s.err != io.EOF {
		return nil, s.err
	}
	if s.err == nil {
		more, err := io.ReadAll(s.r)
		if err != nil {
			return nil, err
		}
		rest = append(rest, more...)
	}
	return rest, nil
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

// Answer is the answer of a call Forward made: read whole (Raw), or,
// when the target marked it complete (CompleteHeader), still arriving,
// to be passed on as it does (Passed, then WriteTo).
type Answer struct {
	// Raw is the answer as it came, when it was read whole.
	Raw     server.RawJSON
	passing *passing
}

// Passed reports whether the answer is to be passed on as it arrives
// (WriteTo); else it is Raw.
func (a Answer) Passed() bool { return a.passing != nil }

// Header is the header a server passing the answer on answers with.
func (a Answer) Header() http.Header {
	return http.Header{CompleteHeader: {CompleteValue}}
}

// WriteTo copies a passed answer to w as it arrives and ends the call:
// its error is the copy's, or the call's (a cut answer among them). It
// must be called once for a passed answer.
func (a Answer) WriteTo(w io.Writer) (int64, error) {
	p := a.passing
	n, err := io.Copy(w, p.body)
	p.read <- err // the call's answer reader returns it
	r := <-p.done
	p.cancel()
	if err != nil {
		return n, err
	}
	return n, r.err
}

// passing is an answer being passed on: the call's body, a channel for
// the copy's verdict (room for one: the call may have ended first), and
// the call's own result.
type passing struct {
	body   io.Reader
	read   chan error
	done   chan forwarded
	cancel context.CancelFunc
}

// forwarded is the result of Forward's call.
type forwarded struct {
	raw server.RawJSON
	err error
}

// Forward passes an /aggregate_metrics request read from body on to url
// through client as it arrives (Each, then PostStream): the elements are
// sent once read, Batch bytes at a time, the rest and the list's close
// when body ends. A 2xx answer marked complete comes back to be passed on
// as it arrives (Answer.Passed); any other is read whole, as it came.
// When body is not of the streamed shape (an error wrapping
// server.ErrNotStreamed), no call is made, or, when that shows only after
// an element, the call is abandoned midway; the caller then answers the
// whole body its usual way. A failed call to url, or a non-2xx answer
// (*server.StatusError), is returned as it is.
func Forward(ctx context.Context, client *server.Client, url string, body io.Reader) (Answer, error) {
	ctx, cancel := context.WithCancel(ctx)
	passed := false
	defer func() {
		if !passed {
			cancel()
		}
	}()
	pr, pw := io.Pipe()
	// The call starts with the first element (or the end of an empty
	// list), so a body of another shape from its start makes none.
	var done chan forwarded
	pass := make(chan *passing, 1)
	write := func(b []byte) error {
		if done == nil {
			done = make(chan forwarded, 1)
			go func() {
				var raw server.RawJSON
				err := client.PostStream(ctx, url, pr, server.AnswerReader(func(h http.Header, answer io.Reader) error {
					if h.Get(CompleteHeader) != CompleteValue {
						var buf bytes.Buffer
						_, err := buf.ReadFrom(answer)
						raw = buf.Bytes()
						return err
					}
					p := &passing{body: answer, read: make(chan error, 1), done: done, cancel: cancel}
					pass <- p
					select {
					case err := <-p.read:
						return err
					case <-ctx.Done(): // the caller went away, or the body failed after the answer began
						return ctx.Err()
					}
				}))
				// A call that ended early stops the writes below.
				_ = pr.CloseWithError(errors.Join(err, errCallEnded))
				done <- forwarded{raw, err}
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
			return Answer{}, err
		}
		cancel()
		r := <-done
		if errors.Is(err, errCallEnded) && r.err != nil {
			return Answer{}, r.err // the call failed first
		}
		return Answer{}, err
	}
	_ = pw.Close()
	select {
	case p := <-pass:
		passed = true
		return Answer{passing: p}, nil
	case r := <-done:
		return Answer{Raw: r.raw}, r.err
	}
}

// errCallEnded is what a write to a call that has ended gets.
var errCallEnded = errors.New("aggstream: the call ended before its body")
