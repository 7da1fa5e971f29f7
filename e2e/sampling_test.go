package e2e

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/gymlens/gymlens/report"
)

// sampledFleet is a fleet whose rollouts all succeed, exporting every span
// group to the run directory.
const sampledFleet = `
policy_api_key: sk-e2e-never-written
arithmetic:
  resources_servers:
    arithmetic: {domain: math}
policy_model:
  responses_api_models:
    policy_model: {correct_probability: 0.7}
simple_agent:
  responses_api_agents:
    simple_agent: {}
telemetry:
  enabled: true
  exporter: file
  span_groups: all
`

// TestGymRunSamplerKeepsOrDropsWholeRollouts runs a fleet with the SDK's
// sampler set by the standard environment variables, which every process
// inherits. A rollout's trace starts in the orchestrator; the agent, model
// and resources servers follow the sampled flag they receive, so each
// rollout's trace is either in all four files or in none, and gymlens report
// finds no span whose parent is missing.
func TestGymRunSamplerKeepsOrDropsWholeRollouts(t *testing.T) {
	for _, tc := range []struct {
		sampler, arg string
		rollouts     int
		// kept: "all", "none" or "some" of the rollouts' traces.
		kept string
	}{
		{"parentbased_traceidratio", "0.5", 60, "some"},
		{"parentbased_traceidratio", "1", 8, "all"},
		{"parentbased_traceidratio", "0", 8, "none"},
		{"always_off", "", 8, "none"},
	} {
		t.Run(tc.sampler+"="+tc.arg, func(t *testing.T) {
			dir := t.TempDir()
			cfg := writeFile(t, filepath.Join(dir, "fleet.yaml"), sampledFleet)
			runs := filepath.Join(dir, "runs")
			env := gymEnv("NEMO_GYM_MAX_ROLLOUT_ATTEMPTS=1", "OTEL_TRACES_SAMPLER="+tc.sampler)
			if tc.arg != "" {
				env = append(env, "OTEL_TRACES_SAMPLER_ARG="+tc.arg)
			}
			res := runGym(t, 3*time.Minute, env, "run", "--rollouts", fmt.Sprint(tc.rollouts), "--concurrency", "4",
				"--config", cfg, "--runs-dir", runs, "--quiet")
			if res.err != nil {
				t.Fatalf("gymlens run: %v\nstdout:\n%s\nstderr:\n%s", res.err, res.stdout, res.stderr)
			}
			run := runDir(t, runs)
			procs := readRun(t, run)
			servers := []string{"simple_agent", "policy_model", "arithmetic"}
			for _, name := range append([]string{"orchestrator"}, servers...) {
				if procs[name] == nil {
					t.Fatalf("no telemetry file from %s; files: %v", name, names(procs))
				}
			}

			// The traces of the kept rollouts: those of the agent's
			// gym.rollout spans. The job's trace (gym.job, with the
			// closing /aggregate_metrics calls) is a trace of its own,
			// sampled as one too.
			rolloutTraces, jobTraces := map[string]bool{}, map[string]bool{}
			for _, s := range procs["simple_agent"].spans {
				if s.Name == "gym.rollout" {
					rolloutTraces[s.TraceID] = true
				}
			}
			for _, s := range procs["orchestrator"].spans {
				if s.Name == "gym.job" {
					jobTraces[s.TraceID] = true
				}
			}
			// Which processes exported spans of each trace.
			procsInTrace := map[string]map[string]bool{}
			spanNames := map[string][]string{}
			for name, p := range procs {
				for _, s := range p.spans {
					spanNames[s.TraceID] = append(spanNames[s.TraceID], name+":"+s.Name)
					if procsInTrace[s.TraceID] == nil {
						procsInTrace[s.TraceID] = map[string]bool{}
					}
					procsInTrace[s.TraceID][name] = true
				}
			}
			for tr, in := range procsInTrace {
				inServers := 0
				for _, name := range servers {
					if in[name] {
						inServers++
					}
				}
				switch {
				case inServers == 0 || jobTraces[tr]:
					continue // the job's trace; gymlens report checks it has its parents
				case !rolloutTraces[tr]:
					t.Errorf("trace %s has spans from %v but no gym.rollout span: %v", tr, in, spanNames[tr])
				case inServers != len(servers) || !in["orchestrator"]:
					t.Errorf("rollout trace %s is partial: spans from %v only", tr, in)
				}
			}
			kept := len(rolloutTraces)
			switch tc.kept {
			case "all":
				if kept != tc.rollouts {
					t.Errorf("%d rollout traces kept, want all %d", kept, tc.rollouts)
				}
			case "none":
				for name, p := range procs {
					if len(p.spans) != 0 {
						t.Errorf("%s exported %d spans with sampling off (first %q)", name, len(p.spans), p.spans[0].Name)
					}
				}
			case "some":
				if kept == 0 || kept == tc.rollouts {
					t.Errorf("%d of %d rollout traces kept at ratio %s, want some", kept, tc.rollouts, tc.arg)
				}
			}
			t.Logf("%s=%s: %d of %d rollout traces kept", tc.sampler, tc.arg, kept, tc.rollouts)

			// Every output line names its rollout's trace, kept or dropped
			// (a dropped one gets no traceresponse from the agent: the
			// collector's CLIENT span, which the agent continued, names
			// it), one trace per rollout; the kept traces are among them.
			lineTraces := map[string]bool{}
			for _, line := range readObjects(t, filepath.Join(run, "rollouts.jsonl")) {
				book, _ := line["_gymlens"].(map[string]any)
				id, _ := book["trace_id"].(string)
				if len(id) != 32 || lineTraces[id] {
					t.Errorf("output line with trace_id %q (empty, malformed or repeated)", id)
				}
				lineTraces[id] = true
			}
			if len(lineTraces) != tc.rollouts {
				t.Errorf("%d distinct trace ids in rollouts.jsonl, want %d", len(lineTraces), tc.rollouts)
			}
			for tr := range rolloutTraces {
				if !lineTraces[tr] {
					t.Errorf("kept rollout trace %s is named by no output line", tr)
				}
			}

			// Metrics do not depend on sampling: every rollout counted.
			if got := procs["simple_agent"].histogramCount("gym.rollout.duration_ms"); got != uint64(tc.rollouts) {
				t.Errorf("gym.rollout.duration_ms count %d, want %d", got, tc.rollouts)
			}

			loaded, err := report.Load(run)
			if err != nil {
				t.Fatalf("gymlens report's loader: %v", err)
			}
			for _, p := range loaded.Problems() {
				if p.Kind == report.ProblemBrokenTrace {
					t.Errorf("broken trace in gymlens report's problems: %+v", p)
				}
			}
		})
	}
}
