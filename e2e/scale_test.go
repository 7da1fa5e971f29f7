package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// scaleVar turns TestScaleFigures on: the number of rollouts per case.
// scripts/scale.sh sets it (and the tier's binaries).
const scaleVar = "GYMLENS_SCALE_ROLLOUTS"

// scaleCase is one measured configuration.
type scaleCase struct {
	name string
	// spanGroups is the fleet's telemetry span_groups (its preset).
	spanGroups string
	// sampler and arg, when set, are the SDK's head sampler.
	sampler, arg string
	// keepPercent is the gateway's tail-sampling share of the rest.
	keepPercent int
}

// TestScaleFigures measures, on the simulated hosts of
// TestCollectorTierAcrossHosts, what telemetry costs per rollout at the
// network and in the collectors, for docs/scale.md: spans per rollout
// (Jaeger, when it keeps everything), bytes per rollout the SDKs send to
// their agents (loopback of the model and resources hosts, which carry
// nothing else) and the agents send to the gateway (the observability
// host's interface), and the CPU time of the agents, the gateway and
// Jaeger per rollout. It prints one line per case; it asserts only that
// the figures could be taken.
func TestScaleFigures(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv(scaleVar))
	if n <= 0 {
		t.Skipf("set $%s (scripts/scale.sh does) to measure", scaleVar)
	}
	cases := []scaleCase{
		{name: "default preset, all kept", spanGroups: "default", keepPercent: 100},
		{name: "all span groups, all kept", spanGroups: "all", keepPercent: 100},
		{name: "default preset, tail 10 %", spanGroups: "default", keepPercent: 10},
		{name: "default preset, head 1 %", spanGroups: "default", sampler: "parentbased_traceidratio", arg: "0.01", keepPercent: 100},
	}
	var lines []string
	for _, c := range cases {
		var line string
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) { line = measureScale(t, c, n) })
		lines = append(lines, line)
	}
	t.Logf("| case | rollouts/s | spans/rollout | SDK→agent B/rollout (model+resources) | agents→gateway B/rollout | agents CPU µs/rollout | gateway CPU µs/rollout | Jaeger CPU µs/rollout |\n%s",
		strings.Join(lines, "\n"))
}

func measureScale(t *testing.T, c scaleCase, rollouts int) string {
	tr := startTier(t, tierOptions{keepPercent: c.keepPercent, decisionWait: "2s"})
	cfg := tr.fleetConfig(t, "panic_on_task_prefix: arith-00000", "panic_on_task_prefix: none",
		"exporter: otlp", "exporter: otlp\n  span_groups: "+c.spanGroups)
	env := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4317"}
	if c.sampler != "" {
		env = append(env, "OTEL_TRACES_SAMPLER="+c.sampler, "OTEL_TRACES_SAMPLER_ARG="+c.arg)
	}
	model, resources := tr.join(env)
	joined := []*gymProc{model, resources}
	collectors := append(append([]*gymProc{}, tr.agents...), tr.gateway, tr.jaeger)
	// Counted from just before the run to after every export settled,
	// start-up excluded.
	cpu0 := cpuTimes(t, collectors)
	lo0 := netBytes(t, tr.hostB, "lo") + netBytes(t, tr.hostC, "lo")
	gw0 := netBytes(t, tr.obs, "eth0")
	start := time.Now()
	run := tr.service(tr.head, "gymlens run", env, gymBin, "run", "--config", cfg, "--rollouts", strconv.Itoa(rollouts),
		"--concurrency", "8", "--runs-dir", filepath.Join(tr.dir, "runs"), "--quiet")
	if code := run.wait(t, 10*time.Minute); code != 0 {
		t.Fatalf("gymlens run exited %d:\n%s", code, tail(run.stderr.String(), 20))
	}
	elapsed := time.Since(start)
	for _, p := range joined {
		p.wait(t, time.Minute) // their last exports are in
	}
	// The agents' batches (1 s) and the gateway's decision wait (2 s).
	time.Sleep(5 * time.Second)
	cpu1 := cpuTimes(t, collectors)
	lo := netBytes(t, tr.hostB, "lo") + netBytes(t, tr.hostC, "lo") - lo0
	gw := netBytes(t, tr.obs, "eth0") - gw0
	runID := filepath.Base(runDir(t, filepath.Join(tr.dir, "runs")))
	spans := "-"
	if c.keepPercent == 100 && c.sampler == "" {
		traces, err := jaegerRollouts(tr.obsClient, "http://127.0.0.1:16686", runID)
		if err != nil {
			t.Fatal(err)
		}
		total := 0
		for _, x := range traces {
			total += len(x.Spans)
		}
		if len(traces) != rollouts {
			t.Errorf("%d rollout traces in Jaeger, want all %d", len(traces), rollouts)
		}
		spans = fmt.Sprintf("%.1f", float64(total)/float64(rollouts))
	}
	per := func(v float64) string { return fmt.Sprintf("%.0f", v/float64(rollouts)) }
	agentsCPU := 0.0
	for i := range tr.agents {
		agentsCPU += cpu1[i] - cpu0[i]
	}
	g := len(tr.agents)
	line := fmt.Sprintf("| %s | %.0f | %s | %s | %s | %s | %s | %s |", c.name, float64(rollouts)/elapsed.Seconds(), spans,
		per(float64(lo)), per(float64(gw)), per(agentsCPU*1e6), per((cpu1[g]-cpu0[g])*1e6), per((cpu1[g+1]-cpu0[g+1])*1e6))
	t.Log(line)
	return line
}

// cpuTimes reads each process's user+system CPU seconds from /proc.
func cpuTimes(t *testing.T, procs []*gymProc) []float64 {
	t.Helper()
	out := make([]float64, len(procs))
	for i, p := range procs {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
		if err != nil {
			t.Fatal(err)
		}
		// Fields after the command name (which is in parentheses);
		// utime and stime are the 14th and 15th fields, in clock ticks
		// (100 a second on Linux).
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
		ut, _ := strconv.ParseFloat(f[11], 64)
		st, _ := strconv.ParseFloat(f[12], 64)
		out[i] = (ut + st) / 100
	}
	return out
}

// netBytes reads the bytes received on an interface of h's namespace.
func netBytes(t *testing.T, h labHost, dev string) int64 {
	t.Helper()
	out, err := exec.Command("ip", "netns", "exec", h.ns, "cat", "/proc/net/dev").Output()
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(name) == dev {
			v, _ := strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
			return v
		}
	}
	t.Fatalf("no %s in %s's /proc/net/dev", dev, h.ns)
	return 0
}
