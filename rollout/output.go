package rollout

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// openOutput opens (creating it if needed) the output file for appending
// and returns the ids of the tasks it already records. A last line without
// its newline is the remains of an interrupted write: the file is truncated
// back to the end of the last complete line and the number of bytes removed
// is returned as repaired. Any complete line that is not a record with a
// task_id is an error, and the file is then left as it was. An output that
// is not a regular file (a pipe, /dev/stdout) is only written to: there is
// nothing to resume from.
func openOutput(path string) (f *os.File, done map[string]struct{}, repaired int64, err error) {
	f, err = os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("rollout: open output: %w", err)
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			f = nil
		}
	}()
	done = make(map[string]struct{})
	if fi, err := f.Stat(); err != nil {
		return nil, nil, 0, fmt.Errorf("rollout: output: %w", err)
	} else if !fi.Mode().IsRegular() {
		return f, done, 0, nil
	}
	br := bufio.NewReader(f)
	var complete int64 // offset just past the last complete line
	for lineNo := 1; ; lineNo++ {
		line, readErr := br.ReadBytes('\n')
		if errors.Is(readErr, io.EOF) {
			repaired = int64(len(line))
			break
		}
		if readErr != nil {
			return nil, nil, 0, fmt.Errorf("rollout: read output %s: %w", path, readErr)
		}
		complete += int64(len(line))
		trimmed := bytes.TrimSpace(line)
		if len(trimmed) == 0 {
			continue
		}
		var rec struct {
			TaskID string `json:"task_id"`
		}
		if err := json.Unmarshal(trimmed, &rec); err != nil {
			return nil, nil, 0, fmt.Errorf("rollout: output %s line %d is not a rollout record: %w", path, lineNo, err)
		}
		if rec.TaskID == "" {
			return nil, nil, 0, fmt.Errorf("rollout: output %s line %d is not a rollout record: no task_id", path, lineNo)
		}
		done[rec.TaskID] = struct{}{}
	}
	if repaired > 0 {
		if err := f.Truncate(complete); err != nil {
			return nil, nil, 0, fmt.Errorf("rollout: repair output %s: %w", path, err)
		}
	}
	return f, done, repaired, nil
}
