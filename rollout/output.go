package rollout

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/protocol"
)

// FailuresPath returns the failures file of the output file output:
// <stem>_failures.jsonl beside it, as upstream names it. Failed rollouts
// and results carrying _ng_failure_class go there.
func FailuresPath(output string) string { return sibling(output, "_failures.jsonl") }

// MaterializedInputsPath returns the materialized inputs file of output:
// <stem>_materialized_inputs.jsonl, the rows of the run as they were
// expanded (task and rollout indexes, agent_ref, resolved from
// task_source or replaced by an agent override), one per rollout.
func MaterializedInputsPath(output string) string {
	return sibling(output, "_materialized_inputs.jsonl")
}

// AggregateMetricsPath returns the aggregate metrics file of output:
// <stem>_aggregate_metrics.json, a JSON list with one AgentMetrics per
// environment server (or agent called directly).
func AggregateMetricsPath(output string) string { return sibling(output, "_aggregate_metrics.json") }

// sibling returns the file beside path named after path's stem (its
// name without the last extension) and suffix.
func sibling(path, suffix string) string {
	dir, name := filepath.Split(path)
	if ext := filepath.Ext(name); ext != name {
		name = strings.TrimSuffix(name, ext)
	}
	return dir + name + suffix
}

// key identifies a rollout: its task index and rollout index.
type key struct{ task, rollout int }

// outputs are the files a run appends to, and what an earlier run left
// in them.
type outputs struct {
	out, failures *os.File
	// done holds the rollouts the output records as completed.
	done map[key]struct{}
	// lastAttempt holds, for each rollout the failures file records, the
	// highest attempt index recorded.
	lastAttempt map[key]int
	// prior are the output's results as /aggregate_metrics takes them
	// (nil unless asked for).
	prior []priorResult
	// repaired counts the bytes of cut last lines removed.
	repaired int64
}

func (o *outputs) close() error {
	return errors.Join(o.out.Close(), o.failures.Close())
}

// openOutputs opens the output and failures files for appending. With
// resume, it reads what they hold first: the output's completed rollouts
// (and, with aggregate, their results), the failures file's attempts. A
// last line without its newline is the remains of an interrupted write:
// it is cut off, and its rollout runs again. Any complete line that is
// not a JSON object with both indexes (output) or not a JSON object
// (failures file) is an error, and the files are then left as they were.
// Without resume both files are emptied. An output that is not a regular
// file (a pipe, /dev/stdout) is only written to.
func openOutputs(path string, resume, aggregate bool) (_ *outputs, err error) {
	o := &outputs{done: map[key]struct{}{}, lastAttempt: map[key]int{}}
	o.out, err = os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, contract.RunFilePerm)
	if err != nil {
		return nil, fmt.Errorf("rollout: open output: %w", err)
	}
	defer func() {
		if err != nil {
			_ = o.out.Close()
			if o.failures != nil {
				_ = o.failures.Close()
			}
		}
	}()
	fi, err := o.out.Stat()
	if err != nil {
		return nil, fmt.Errorf("rollout: output: %w", err)
	}
	regular := fi.Mode().IsRegular()
	failPath := FailuresPath(path)

	// Read everything first, so an error leaves both files untouched.
	var outEnd, failEnd int64 = -1, -1 // where to cut each file; -1 keeps it
	if resume && regular {
		end, err := scanLines(o.out, path, func(line []byte) error { return o.addDone(line, aggregate) })
		if err != nil {
			return nil, err
		}
		outEnd = end
	}
	if resume {
		f, err := os.Open(failPath)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return nil, fmt.Errorf("rollout: open failures file: %w", err)
		default:
			end, err := scanLines(f, failPath, o.addFailure)
			_ = f.Close()
			if err != nil {
				return nil, err
			}
			failEnd = end
		}
	}

	flags := os.O_WRONLY | os.O_APPEND | os.O_CREATE
	if !resume {
		flags |= os.O_TRUNC
		if regular {
			outEnd = 0
		}
	}
	if o.failures, err = os.OpenFile(failPath, flags, contract.RunFilePerm); err != nil {
		return nil, fmt.Errorf("rollout: open failures file: %w", err)
	}
	for _, cut := range []struct {
		f   *os.File
		end int64
	}{{o.out, outEnd}, {o.failures, failEnd}} {
		if cut.end < 0 {
			continue
		}
		fi, err := cut.f.Stat()
		if err != nil {
			return nil, fmt.Errorf("rollout: %w", err)
		}
		if fi.Size() > cut.end {
			if resume {
				o.repaired += fi.Size() - cut.end
			}
			if err := cut.f.Truncate(cut.end); err != nil {
				return nil, fmt.Errorf("rollout: repair %s: %w", cut.f.Name(), err)
			}
		}
	}
	return o, nil
}

// indexes are the members that identify a rollout in a line.
type indexes struct {
	TaskIndex    *int `json:"_ng_task_index"`
	RolloutIndex *int `json:"_ng_rollout_index"`
	AttemptIndex *int `json:"_ng_attempt_index"`
}

// addDone records a line of the output.
func (o *outputs) addDone(line []byte, aggregate bool) error {
	var ix indexes
	if err := json.Unmarshal(line, &ix); err != nil {
		return fmt.Errorf("is not a rollout line: %w", err)
	}
	if ix.TaskIndex == nil || ix.RolloutIndex == nil {
		return fmt.Errorf("is not a rollout line: no %s and %s", protocol.KeyTaskIndex, protocol.KeyRolloutIndex)
	}
	o.done[key{*ix.TaskIndex, *ix.RolloutIndex}] = struct{}{}
	if !aggregate {
		return nil
	}
	var result protocol.Fields
	if err := result.UnmarshalJSON(line); err != nil {
		return fmt.Errorf("is not a rollout line: %w", err)
	}
	var ref struct {
		Name string `json:"name"`
	}
	_, _ = result.Decode(protocol.KeyAgentRef, &ref)
	server, _, _ := stringField(result, KeyEnvironmentServer)
	if ref.Name != "" || server != "" {
		o.prior = append(o.prior, priorResult{server: server, agent: ref.Name, entry: metricsEntry(result)})
	}
	return nil
}

// addFailure records a line of the failures file; a line without both
// indexes is ignored, as upstream ignores it.
func (o *outputs) addFailure(line []byte) error {
	var ix indexes
	if err := json.Unmarshal(line, &ix); err != nil {
		return fmt.Errorf("is not a failure line: %w", err)
	}
	if ix.TaskIndex == nil || ix.RolloutIndex == nil {
		return nil
	}
	k := key{*ix.TaskIndex, *ix.RolloutIndex}
	attempt := 0
	if ix.AttemptIndex != nil {
		attempt = *ix.AttemptIndex
	}
	if last, ok := o.lastAttempt[k]; !ok || attempt > last {
		o.lastAttempt[k] = attempt
	}
	return nil
}

// scanLines calls fn with every complete, non-blank line of f (trimmed)
// and returns the offset just past the last complete line. An error from
// fn is returned naming path and the 1-based line.
func scanLines(f *os.File, path string, fn func([]byte) error) (end int64, err error) {
	br := bufio.NewReader(f)
	for lineNo := 1; ; lineNo++ {
		line, readErr := br.ReadBytes('\n')
		if errors.Is(readErr, io.EOF) {
			return end, nil
		}
		if readErr != nil {
			return 0, fmt.Errorf("rollout: read %s: %w", path, readErr)
		}
		end += int64(len(line))
		if trimmed := bytes.TrimSpace(line); len(trimmed) > 0 {
			if err := fn(trimmed); err != nil {
				return 0, fmt.Errorf("rollout: %s line %d %w", path, lineNo, err)
			}
		}
	}
}

// writeRows writes rows to path, one JSON line each, replacing the file.
func writeRows(path string, rows []protocol.RunRequest) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, contract.RunFilePerm)
	if err != nil {
		return fmt.Errorf("rollout: materialized inputs: %w", err)
	}
	bw := bufio.NewWriter(f)
	for i := range rows {
		b, err := rows[i].MarshalJSON()
		if err != nil {
			_ = f.Close()
			return fmt.Errorf("rollout: materialized inputs: %w", err)
		}
		_, _ = bw.Write(b)
		_ = bw.WriteByte('\n')
	}
	if err := errors.Join(bw.Flush(), f.Close()); err != nil {
		return fmt.Errorf("rollout: materialized inputs: %w", err)
	}
	return nil
}
