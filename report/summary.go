package report

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/gymlens/gymlens/internal/telfile"
)

// Process is one process seen in the telemetry files.
type Process struct {
	File        string
	ServiceName string
	ServerName  string
	ServerType  string
	RunID       string
	Spans       int
	Metrics     int
}

// Summary is the short account `gym run` prints.
type Summary struct {
	Processes []Process
	// Traces is the number of distinct trace ids among exported spans.
	Traces int
	Spans  int
	// Rollouts counts lines in rollouts.jsonl; Failed those with an error;
	// Correct those rewarded.
	Rollouts, Failed, Correct int
	// DurationsMS are the rollout durations the agent reported.
	DurationsMS []float64
	// Notes lists recoverable problems met while reading (a truncated last
	// line, say).
	Notes []string
}

// SuccessFraction is the fraction of rollouts that were rewarded.
func (s Summary) SuccessFraction() float64 {
	if s.Rollouts == 0 {
		return 0
	}
	return float64(s.Correct) / float64(s.Rollouts)
}

// Summarize reads dir/telemetry/*.jsonl and dir/rollouts.jsonl.
func Summarize(dir string) (Summary, error) {
	var sum Summary
	files, err := filepath.Glob(filepath.Join(dir, "telemetry", "*.jsonl"))
	if err != nil {
		return sum, err
	}
	sort.Strings(files)
	traces := map[string]bool{}
	for _, f := range files {
		p := Process{File: filepath.Base(f)}
		err := telfile.ReadFile(f, func(r telfile.Record) error {
			switch {
			case r.Resource != nil:
				p.ServiceName = str(r.Resource.Attributes["service.name"])
				p.ServerName = str(r.Resource.Attributes["nemo.gym.server.name"])
				p.ServerType = str(r.Resource.Attributes["nemo.gym.server.type"])
				p.RunID = str(r.Resource.Attributes["nemo.run.id"])
			case r.Span != nil:
				p.Spans++
				traces[r.Span.TraceID] = true
			case r.Metric != nil:
				p.Metrics++
			}
			return nil
		})
		if errors.Is(err, telfile.ErrTruncated) {
			sum.Notes = append(sum.Notes, fmt.Sprintf("%s: %v (skipped)", f, err))
		} else if err != nil {
			return sum, err
		}
		sum.Spans += p.Spans
		sum.Processes = append(sum.Processes, p)
	}
	sum.Traces = len(traces)
	if err := readRollouts(filepath.Join(dir, "rollouts.jsonl"), &sum); err != nil {
		return sum, err
	}
	return sum, nil
}

type rolloutLine struct {
	TaskID     string  `json:"task_id"`
	Reward     float64 `json:"reward"`
	Correct    bool    `json:"correct"`
	Error      string  `json:"error"`
	DurationMS float64 `json:"duration_ms"`
}

func readRollouts(path string, sum *Summary) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		var r rolloutLine
		if err := json.Unmarshal([]byte(text), &r); err != nil {
			sum.Notes = append(sum.Notes, fmt.Sprintf("%s:%d: unreadable rollout line skipped: %v", path, line, err))
			continue
		}
		sum.Rollouts++
		if r.Error != "" {
			sum.Failed++
		}
		if r.Correct {
			sum.Correct++
		}
		sum.DurationsMS = append(sum.DurationsMS, r.DurationMS)
	}
	return sc.Err()
}

func str(v any) string {
	s, _ := v.(string)
	return s
}
