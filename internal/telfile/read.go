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

// MaxLineBytes is the longest line Read accepts. Lines are normally a few
// hundred bytes; the limit only exists so a corrupt file without newlines
// cannot exhaust memory.
const MaxLineBytes = 64 << 20

// ErrTruncated reports that the input ends in a partial line: the final line
// is not valid JSON and has no terminating newline, which is what a writer
// that died mid-write leaves behind. Everything before that line was
// delivered normally, so callers may treat this error as a warning.
var ErrTruncated = errors.New("truncated final line (partially written record)")

// Read decodes the telemetry lines in r and calls fn for each record, in
// order. Blank lines are skipped. It stops at the first problem and returns
// an error naming the 1-based line number; errors returned by fn are passed
// back wrapped in the same way. A partial last line yields an error wrapping
// ErrTruncated.
func Read(r io.Reader, fn func(Record) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxLineBytes)
	unterminated := false
	sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			return i + 1, data[:i], nil
		}
		if atEOF && len(data) > 0 {
			unterminated = true
			return len(data), data, nil
		}
		return 0, nil, nil
	})

	line := 0
	for sc.Scan() {
		line++
		text := sc.Bytes()
		if len(bytes.TrimSpace(text)) == 0 {
			continue
		}
		rec, err := decodeLine(text, line)
		if err != nil {
			if unterminated && errors.Is(err, errSyntax) {
				return fmt.Errorf("line %d: %w", line, ErrTruncated)
			}
			return fmt.Errorf("line %d: %w", line, err)
		}
		if err := fn(rec); err != nil {
			return fmt.Errorf("line %d: %w", line, err)
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return fmt.Errorf("line %d: longer than %d bytes: %w", line+1, MaxLineBytes, err)
		}
		return fmt.Errorf("after line %d: %w", line, err)
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
			err = checkFormat(rec.Resource.Format)
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
