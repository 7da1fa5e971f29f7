package dataset

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	protocol "github.com/gymlens/gymlens/internal/legacyproto"
)

// WriteJSONL writes tasks to w, one JSON object per line, in order. It
// refuses (before writing anything) a task that fails Task.Validate or
// repeats an earlier id, so that what it writes ReadJSONL can read back.
func WriteJSONL(w io.Writer, tasks []protocol.Task) error {
	if err := CheckTasks(tasks); err != nil {
		return fmt.Errorf("dataset: %w", err)
	}
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false) // keep questions such as "a < b" readable
	for _, t := range tasks {
		if err := enc.Encode(t); err != nil { // Encode ends each value with '\n'
			return fmt.Errorf("dataset: write: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("dataset: write: %w", err)
	}
	return nil
}

// CheckTasks rejects a task that fails Task.Validate or repeats an earlier
// task's id; the error names the task by its 1-based position.
func CheckTasks(tasks []protocol.Task) error {
	first := make(map[string]int, len(tasks))
	for i, t := range tasks {
		if err := t.Validate(); err != nil {
			return fmt.Errorf("task %d: %w", i+1, err)
		}
		if j, dup := first[t.ID]; dup {
			return fmt.Errorf("task %d: duplicate id %q (also task %d)", i+1, t.ID, j)
		}
		first[t.ID] = i + 1
	}
	return nil
}

// ReadJSONL reads a task file written by WriteJSONL (or by hand): one JSON
// task per line, blank lines skipped, the last line with or without a
// trailing newline. Lines may be of any length. Every task must pass
// Task.Validate, and a repeated id is an error that names both lines. Errors
// name the 1-based line they are about.
func ReadJSONL(r io.Reader) ([]protocol.Task, error) {
	br := bufio.NewReader(r)
	var tasks []protocol.Task
	lineOf := make(map[string]int)
	for lineNo := 1; ; lineNo++ {
		line, readErr := br.ReadBytes('\n')
		if readErr != nil && !errors.Is(readErr, io.EOF) {
			return nil, fmt.Errorf("dataset: line %d: read: %w", lineNo, readErr)
		}
		if trimmed := bytes.TrimSpace(line); len(trimmed) > 0 {
			var t protocol.Task
			if err := json.Unmarshal(trimmed, &t); err != nil {
				return nil, fmt.Errorf("dataset: line %d: %w", lineNo, err)
			}
			if err := t.Validate(); err != nil {
				return nil, fmt.Errorf("dataset: line %d: %w", lineNo, err)
			}
			if prev, dup := lineOf[t.ID]; dup {
				return nil, fmt.Errorf("dataset: line %d: duplicate task id %q (first on line %d)", lineNo, t.ID, prev)
			}
			lineOf[t.ID] = lineNo
			tasks = append(tasks, t)
		}
		if readErr != nil { // io.EOF: the last line has been handled
			return tasks, nil
		}
	}
}
