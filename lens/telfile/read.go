package telfile

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// MaxLineBytes is the longest line a Scanner, and so Read, accepts. Lines
// are normally a few hundred bytes; the limit only exists so a corrupt
// file without newlines cannot exhaust memory.
const MaxLineBytes = 64 << 20

// ErrTruncated reports that the input ends in a partial line: the final line
// is not valid JSON and has no terminating newline, which is what a writer
// that died mid-write leaves behind. Everything before that line was
// delivered normally, so callers may treat this error as a warning.
var ErrTruncated = errors.New("truncated final line (partially written record)")

// Scanner splits a telemetry file into its lines, numbered from 1. It is
// the one line reader of the format: Read decodes what it yields, and a
// caller that goes back to chosen lines of a file (by the numbers Read
// reported) counts them with it too, so both agree on every number.
//
// A line ends at '\n', which Bytes leaves out. A last line without one is
// yielded all the same, and Unterminated says so: a writer that died in
// the middle of a record leaves such a line. Blank lines are yielded and
// counted like the others. A line longer than MaxLineBytes ends the scan
// with an error (see Err), so that a corrupt file without newlines cannot
// exhaust memory.
type Scanner struct {
	src          failReader
	sc           *bufio.Scanner
	line         int
	unterminated bool
}

// failReader remembers whether its reader failed, as opposed to ending.
type failReader struct {
	r   io.Reader
	err error
}

func (f *failReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		f.err = err
	}
	return n, err
}

// NewScanner returns a Scanner reading r from its current position.
func NewScanner(r io.Reader) *Scanner {
	s := &Scanner{src: failReader{r: r}}
	s.sc = bufio.NewScanner(&s.src)
	s.sc.Buffer(make([]byte, 0, 64<<10), MaxLineBytes)
	s.sc.Split(s.split)
	return s
}

// split is a bufio.SplitFunc like bufio.ScanLines, except that it keeps a
// trailing '\r' (the format never writes one, so it is data) and notes a
// last line that has no newline. bufio.Scanner hands over what is left
// when the reader fails as it does at the end of the input; that is not a
// last line, only the part of one read before the failure, so it is not
// yielded and Err reports the failure.
func (s *Scanner) split(data []byte, atEOF bool) (int, []byte, error) {
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		return i + 1, data[:i], nil
	}
	if atEOF && len(data) > 0 && s.src.err == nil {
		s.unterminated = true
		return len(data), data, nil
	}
	return 0, nil, nil
}

// Scan advances to the next line, which Bytes, Line and Unterminated then
// describe. It returns false at the end of the input or when reading
// fails; Err tells which.
func (s *Scanner) Scan() bool {
	if !s.sc.Scan() {
		return false
	}
	s.line++
	return true
}

// Bytes returns the current line without its newline. The slice is only
// valid until the next call to Scan, which may overwrite it.
func (s *Scanner) Bytes() []byte { return s.sc.Bytes() }

// Line returns the 1-based number of the current line. Once Scan has
// returned false it is the number of the last line yielded (0 for none),
// so a line that could not be read is number Line()+1.
func (s *Scanner) Line() int { return s.line }

// Unterminated reports whether the current line ran to the end of the
// input without a newline. Only the last line can; whether it is whole or
// cut short is for the caller to judge from its content.
func (s *Scanner) Unterminated() bool { return s.unterminated }

// Err returns the error that stopped Scan, or nil at a clean end of the
// input. A line over MaxLineBytes gives an error wrapping bufio.ErrTooLong
// that names the limit; any other error is the reader's.
func (s *Scanner) Err() error {
	err := s.sc.Err()
	if errors.Is(err, bufio.ErrTooLong) {
		return fmt.Errorf("longer than %d bytes: %w", MaxLineBytes, err)
	}
	return err
}

// Read decodes the telemetry lines in r and calls fn for each record, in
// order. Blank lines are skipped. It stops at the first problem and returns
// an error naming the 1-based line number; errors returned by fn are passed
// back wrapped in the same way. A partial last line yields an error wrapping
// ErrTruncated.
func Read(r io.Reader, fn func(Record) error) error {
	return ReadSkipping(r, fn, nil)
}

// ReadSkipping is Read, except that a corrupt line before the last one
// (not JSON, or JSON that is not a record of the format) is handed to skip
// with its number and what is wrong with it, and reading goes on: a writer
// that kept appending after a short write (a full disk) leaves such a line
// in the middle of a file, and the records after it are whole. A nil skip
// makes it Read. What still stops it: a resource header from a newer
// format (the lines after it cannot be read the same way), an error from
// fn, a line over MaxLineBytes, a failing reader, and a partial last line
// (ErrTruncated, as for Read).
func ReadSkipping(r io.Reader, fn func(Record) error, skip func(line int, err error)) error {
	sc := NewScanner(r)
	for sc.Scan() {
		line, text := sc.Line(), sc.Bytes()
		if len(bytes.TrimSpace(text)) == 0 {
			continue
		}
		rec, err := decodeLine(text, line)
		if err != nil {
			if sc.Unterminated() && errors.Is(err, errSyntax) {
				return fmt.Errorf("line %d: %w", line, ErrTruncated)
			}
			if skip != nil && !errors.Is(err, errFormat) {
				skip(line, err)
				continue
			}
			return fmt.Errorf("line %d: %w", line, err)
		}
		if err := fn(rec); err != nil {
			return fmt.Errorf("line %d: %w", line, err)
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return fmt.Errorf("line %d: %w", sc.Line()+1, err)
		}
		return fmt.Errorf("after line %d: %w", sc.Line(), err)
	}
	return nil
}

// ReadFile opens path and reads it with Read. Errors are prefixed with the
// path.
func ReadFile(path string, fn func(Record) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err // *os.PathError already names the file
	}
	defer f.Close()
	if err := Read(f, fn); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// errSyntax marks lines that are not JSON at all, as opposed to JSON with
// unexpected content.
var errSyntax = errors.New("invalid JSON")

// errFormat marks a resource header whose format version this reader
// does not understand.
var errFormat = errors.New("unsupported format")

func decodeLine(text []byte, line int) (Record, error) {
	if !json.Valid(text) {
		// Let the decoder describe what is wrong.
		var v any
		err := json.Unmarshal(text, &v)
		if err == nil {
			err = errors.New("not a single JSON value")
		}
		return Record{}, fmt.Errorf("%w: %v", errSyntax, err)
	}
	var head struct {
		Type *string `json:"type"`
	}
	if err := json.Unmarshal(text, &head); err != nil {
		return Record{}, fmt.Errorf("not a JSON object with a string \"type\" field: %w", err)
	}
	if head.Type == nil {
		return Record{}, errors.New(`missing "type" field`)
	}
	rec := Record{Type: *head.Type, Line: line}
	var err error
	switch rec.Type {
	case TypeResource:
		rec.Resource = new(Resource)
		if err = json.Unmarshal(text, rec.Resource); err == nil {
			if err = checkFormat(rec.Resource.Format); err != nil {
				return Record{}, fmt.Errorf("bad %s record: %w: %w", rec.Type, errFormat, err)
			}
		}
	case TypeSpan:
		rec.Span = new(Span)
		err = json.Unmarshal(text, rec.Span)
	case TypeMetric:
		rec.Metric = new(Metric)
		err = json.Unmarshal(text, rec.Metric)
	case TypeLog:
		rec.Log = new(Log)
		err = json.Unmarshal(text, rec.Log)
	default:
		return Record{}, fmt.Errorf("unknown record type %q", rec.Type)
	}
	if err != nil {
		return Record{}, fmt.Errorf("bad %s record: %w", rec.Type, err)
	}
	return rec, nil
}

func checkFormat(v int) error {
	switch {
	case v > FormatVersion:
		return fmt.Errorf("file is from a newer format (format %d; this reader understands up to %d)", v, FormatVersion)
	case v < 1:
		return fmt.Errorf("invalid format version %d", v)
	}
	return nil
}
