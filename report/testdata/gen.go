//go:build ignore

// gen regenerates the run-small fixture: it builds the gymlens binary, runs a
// small fleet whose resources server fails some verifications, and copies
// the resulting run directory to testdata/run-small.
//
// Run it from the report/testdata directory:
//
//	go run gen.go
//
// then rewrite the golden report with
//
//	cd .. && go test . -run TestGolden -update
package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// runID names the run, so the fixture's directory and the ids inside it
// do not change from one regeneration to the next.
const runID = "run-small"

// fleet is the built-in three-server fleet, except that the resources
// server panics on arith-000010, -11 and -12: three of the twelve
// verifications (and so their rollouts) fail.
const fleet = `arithmetic:
  resources_servers:
    arithmetic: {domain: math, panic_on_task_prefix: "arith-00001"}
policy_model:
  responses_api_models:
    policy_model: {}
simple_agent:
  responses_api_agents:
    simple_agent:
      resources_server: {type: resources_servers, name: arithmetic}
      model_server: {type: responses_api_models, name: policy_model}
`

// args make the run last long enough (about 0.75 s) for several metric
// exports: two rollouts at a time, 120 ms of model latency each.
var args = []string{"run", "--rollouts", "12", "--seed", "7", "--concurrency", "2",
	"--model-latency-ms", "120", "--config", "fleet.yaml", "--runs-dir", "runs", "--quiet"}

// env is added to a copy of the caller's environment from which every
// telemetry variable was removed, so the fixture does not depend on the
// shell it was made in.
var env = []string{
	"NEMO_GYM_OTEL_SPAN_GROUPS=all",
	"OTEL_METRIC_EXPORT_INTERVAL=200",
	"NEMO_GYM_OTEL_RUN_ID=" + runID,
}

func main() {
	if err := generate(); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func generate() error {
	here, err := os.Getwd()
	if err != nil {
		return err
	}
	if filepath.Base(here) != "testdata" || filepath.Base(filepath.Dir(here)) != "report" {
		return fmt.Errorf("run me from report/testdata, not %s", here)
	}
	work, err := os.MkdirTemp("", "gymlens-fixture-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	bin := filepath.Join(work, "gymlens")
	// -trimpath keeps this machine's directories out of the stack traces
	// the server logs hold.
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "github.com/gymlens/gymlens/cmd/gymlens")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("build gym: %w", err)
	}
	if err := os.WriteFile(filepath.Join(work, "fleet.yaml"), []byte(fleet), 0o644); err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = work
	cmd.Env = append(cleanEnv(), env...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	// The failing verifications make gymlens run exit 1, by design.
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			return fmt.Errorf("gymlens run: %w", err)
		}
	}

	dst := filepath.Join(here, runID)
	if err := os.RemoveAll(dst); err != nil {
		return err
	}
	if err := copyDir(filepath.Join(work, "runs", runID), dst); err != nil {
		return err
	}
	fmt.Printf("wrote %s\nnow run: cd .. && go test . -run TestGolden -update\n", dst)
	return nil
}

func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "NEMO_GYM_OTEL_") || strings.HasPrefix(name, "NEMO_LENS_") ||
			strings.HasPrefix(name, "OTEL_") || name == "SLURM_JOB_ID" {
			continue
		}
		out = append(out, kv)
	}
	return out
}

func copyDir(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
}
