package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gymlens/gymlens/internal/testenv"
	"github.com/gymlens/gymlens/lens/telfile"
)

// gymBin is the gymlens binary, built once for the whole test binary.
var gymBin string

func TestMain(m *testing.M) {
	os.Exit(testenv.RunWithGym(m, "gymlens-e2e-", "../cmd/gymlens", &gymBin))
}

// gymEnv is a clean environment for a child gym process: the machine's
// variables minus anything telemetry-related, plus extra.
func gymEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "NEMO_GYM_OTEL_") || strings.HasPrefix(name, "NEMO_LENS_") ||
			strings.HasPrefix(name, "OTEL_") || name == "SLURM_JOB_ID" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

type result struct {
	stdout, stderr string
	err            error
}

// runGym runs the gymlens binary to completion, bounded by timeout. The child
// is killed by PID (its whole process group) if it outlives the bound.
func runGym(t *testing.T, timeout time.Duration, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(gymBin, args...)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return result{out.String(), errb.String(), err}
	case <-time.After(timeout):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		t.Fatalf("gym %v did not finish within %s\nstdout:\n%s\nstderr:\n%s", args, timeout, out.String(), errb.String())
	}
	return result{}
}

// runDir returns the only run directory under runs.
func runDir(t *testing.T, runs string) string {
	t.Helper()
	entries, err := os.ReadDir(runs)
	if err != nil || len(entries) != 1 {
		t.Fatalf("want one run directory in %s, got %v (%v)", runs, entries, err)
	}
	return filepath.Join(runs, entries[0].Name())
}

// procData is everything one process exported.
type procData struct {
	file     string
	resource map[string]any
	spans    []*telfile.Span
	metrics  []*telfile.Metric
}

func (p *procData) serverType() string {
	s, _ := p.resource["nemo.gym.server.type"].(string)
	return s
}

// readRun parses every telemetry file strictly: any error, truncation
// included, fails the test.
func readRun(t *testing.T, dir string) map[string]*procData {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "telemetry", "*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no telemetry files in %s (%v)", dir, err)
	}
	out := map[string]*procData{}
	for _, f := range files {
		p := &procData{file: f}
		err := telfile.ReadFile(f, func(r telfile.Record) error {
			switch {
			case r.Resource != nil:
				p.resource = r.Resource.Attributes
			case r.Span != nil:
				p.spans = append(p.spans, r.Span)
			case r.Metric != nil:
				p.metrics = append(p.metrics, r.Metric)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("telemetry file not complete and parseable: %v", err)
		}
		out[strings.TrimSuffix(filepath.Base(f), ".jsonl")] = p
	}
	return out
}

// lastMetric returns the last exported record of the named metric.
func (p *procData) lastMetric(name string) *telfile.Metric {
	var last *telfile.Metric
	for _, m := range p.metrics {
		if m.Name == name {
			last = m
		}
	}
	return last
}

// metricValues returns every exported value of a single-point metric, in
// export order.
func (p *procData) metricValues(name string) []float64 {
	var out []float64
	for _, m := range p.metrics {
		if m.Name == name && len(m.Points) == 1 {
			out = append(out, m.Points[0].Value.Float64())
		}
	}
	return out
}

// counterByOutcome reads the last value of an outcome counter.
func (p *procData) counterByOutcome(name, key string) map[string]int64 {
	out := map[string]int64{}
	m := p.lastMetric(name)
	if m == nil {
		return out
	}
	for _, pt := range m.Points {
		v, _ := pt.Value.Int64()
		out[fmt.Sprint(pt.Attributes[key])] = v
	}
	return out
}

func (p *procData) histogramCount(name string) uint64 {
	m := p.lastMetric(name)
	if m == nil || len(m.Points) != 1 {
		return 0
	}
	return m.Points[0].Count
}

func names(m map[string]*procData) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func writeFile(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// ctxT is a context bounded by the test's deadline (or a fixed bound).
func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
