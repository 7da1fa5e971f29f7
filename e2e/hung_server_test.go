package e2e

import (
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gymlens/gymlens/orchestrator"
)

// Issue 16, item 2: a server stopped with SIGSTOP answers nothing and never
// exits. gymlens run must notice it (liveness probes DefaultLivenessInterval
// apart, each with DefaultLivenessTimeout, unanswered for
// DefaultLivenessBudget: 64 s with the defaults), kill it and end the run,
// where it used to crawl on at one timed-out rollout per client timeout.
func TestGymRunEndsWhenAServerHangs(t *testing.T) {
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	bound := orchestrator.DefaultLivenessBudget + orchestrator.DefaultLivenessInterval + orchestrator.DefaultLivenessTimeout

	killed := make(chan timedLine, 1)
	// More rollouts than can run before the hang; after it none can
	// complete, so only the hang detection can end this run.
	orch := startRun(t, gymEnv("NEMO_GYM_OTEL_ENABLED=0"), func(line string, at time.Time) {
		if strings.Contains(line, `msg="server killed: it stopped answering"`) {
			select {
			case killed <- timedLine{line, at}:
			default:
			}
		}
	}, "--rollouts", "20000", "--concurrency", "16", "--model-latency-ms", "5", "--runs-dir", runs, "--quiet")
	// Some rollouts first, so the run is under way.
	output := filepath.Join(runDir(t, runs), "rollouts.jsonl")
	deadline := time.Now().Add(30 * time.Second)
	for countLines(output) < 50 {
		if time.Now().After(deadline) {
			t.Fatalf("fewer than 50 rollouts 30 s after the start\nstderr:\n%s", tail(orch.stderr.String(), 30))
		}
		time.Sleep(20 * time.Millisecond)
	}
	pids := orch.servers()
	model := pids["policy_model"]
	if model == 0 {
		t.Fatalf("no policy_model PID in %v", pids)
	}
	t0 := time.Now()
	if err := syscall.Kill(model, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	select {
	case l := <-killed:
		took := l.at.Sub(t0)
		t.Logf("hung model server killed %s after SIGSTOP (bound %s)", took.Round(time.Millisecond), bound)
		if !strings.Contains(l.text, "server=policy_model") {
			t.Errorf("killed another server: %s", l.text)
		}
		// Scheduling slack on a loaded machine, not another probe round.
		if took > bound+2*time.Second {
			t.Errorf("hang detected after %s, want within %s", took, bound)
		}
	case <-orch.done:
		t.Fatalf("gymlens run ended before the hang was detected: %v\nstderr:\n%s", orch.err, tail(orch.stderr.String(), 30))
	case <-time.After(bound + 30*time.Second):
		t.Fatalf("hung server not killed %s after SIGSTOP\nstderr:\n%s", bound+30*time.Second, tail(orch.stderr.String(), 30))
	}
	code := orch.wait(t, 60*time.Second)
	errOut := orch.stderr.String()
	t.Logf("gymlens run exited %d %s after SIGSTOP", code, time.Since(t0).Round(time.Millisecond))
	if code != 1 {
		t.Errorf("gymlens run exited %d, want 1\nstderr:\n%s", code, tail(errOut, 30))
	}
	for _, want := range []string{"server policy_model (pid " + strconv.Itoa(model) + ") died: stopped answering GET /",
		"stopped early after a server died"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, tail(errOut, 30))
		}
	}
	for name, pid := range orch.servers() {
		if gymAlive(pid) {
			t.Errorf("server %s (pid %d) still alive after gymlens run exited", name, pid)
		}
	}
}

// Issue 16, item 10: an interrupted run whose stop had to kill a server
// (stopped with SIGSTOP, it cannot act on SIGTERM) must not say the fleet
// stopped cleanly next to the "killed" line.
func TestGymRunInterruptedStopReportsAKill(t *testing.T) {
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	orch := startRun(t, gymEnv("NEMO_GYM_OTEL_ENABLED=0"), nil,
		"--rollouts", "20000", "--concurrency", "8", "--model-latency-ms", "5", "--runs-dir", runs, "--quiet")
	output := filepath.Join(runDir(t, runs), "rollouts.jsonl")
	for deadline := time.Now().Add(30 * time.Second); countLines(output) < 20; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("fewer than 20 rollouts 30 s after the start\nstderr:\n%s", tail(orch.stderr.String(), 30))
		}
	}
	resources := orch.servers()["arithmetic"]
	// Stop the resources server and interrupt at once, well inside the
	// liveness bound: the stop, not the probes, meets the hung server.
	if err := syscall.Kill(resources, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := orch.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	code := orch.wait(t, 90*time.Second)
	errOut := orch.stderr.String()
	if code != 1 {
		t.Errorf("gymlens run exited %d, want 1\nstderr:\n%s", code, tail(errOut, 30))
	}
	if !strings.Contains(errOut, `server "arithmetic" did not stop within`) || !strings.Contains(errOut, "killed") {
		t.Errorf("stderr does not report the kill:\n%s", tail(errOut, 30))
	}
	if strings.Contains(errOut, "stopped cleanly") {
		t.Errorf("stderr says the fleet stopped cleanly although a server was killed:\n%s", tail(errOut, 30))
	}
	if !strings.Contains(errOut, "interrupted; the fleet was stopped, not cleanly") {
		t.Errorf("stderr lacks the interrupted line:\n%s", tail(errOut, 30))
	}
}
