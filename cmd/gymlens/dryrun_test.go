package main

// Tests of `gymlens env start` and `gymlens run` on a fleet whose config sets
// dry_run: true, run as real processes of the gymlens binary.

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/internal/testenv"
)

// dryRunResult is a finished gym process.
type dryRunResult struct {
	code           int
	stdout, stderr string
}

// runGymProcess runs the gymlens binary with args to its end, in its own
// process group; one still running after launchTimeout is killed, group
// and all, by its PID.
func runGymProcess(t *testing.T, args ...string) dryRunResult {
	t.Helper()
	cmd := exec.Command(gymBin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := testenv.Start(t, cmd, launchTimeout)
	res := dryRunResult{code: p.Wait(t), stdout: p.Stdout.String(), stderr: p.Stderr.String()}
	var ee *exec.ExitError
	if err := p.Err(); err != nil && !errors.As(err, &ee) {
		t.Fatalf("gym %v: %v", args, err)
	}
	return res
}

// fleetProcesses lists the live processes whose environment mentions
// runsDir: every child of a fleet carries its run directory in its
// telemetry file path, and so does whatever a child starts.
func fleetProcesses(runsDir string) []int {
	marker := []byte(runsDir + string(filepath.Separator))
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !bytes.Contains(env, marker) {
			continue
		}
		if stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil {
			if i := bytes.LastIndexByte(stat, ')'); i >= 0 && bytes.HasPrefix(stat[i+1:], []byte(" Z")) {
				continue // a zombie runs nothing
			}
		}
		out = append(out, pid)
	}
	return out
}

// wantNothingRunning fails when a process of runsDir is still alive, and
// kills it.
func wantNothingRunning(t *testing.T, runsDir string) {
	t.Helper()
	if left := fleetProcesses(runsDir); len(left) > 0 {
		t.Errorf("processes of the dry run still running: %v", left)
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// runDirOf returns the one run directory under runsDir.
func runDirOf(t *testing.T, runsDir string) string {
	t.Helper()
	entries, err := os.ReadDir(runsDir)
	if err != nil || len(entries) != 1 {
		t.Fatalf("run directories in %s: %v (%v), want one", runsDir, entries, err)
	}
	return filepath.Join(runsDir, entries[0].Name())
}

// dryFleet is the built-in fleet under dry_run with every port fixed (to
// ports free a moment ago), so the test can check none stays bound.
func dryFleet(t *testing.T) (doc string, ports map[string]int) {
	ports = map[string]int{"head": testenv.FreePort(t), "arithmetic": testenv.FreePort(t), "policy_model": testenv.FreePort(t), "simple_agent": testenv.FreePort(t)}
	doc = fmt.Sprintf(`dry_run: true
head_server: {port: %d}
arithmetic:
  resources_servers:
    arithmetic: {port: %d}
policy_model:
  responses_api_models:
    policy_model: {port: %d}
simple_agent:
  responses_api_agents:
    simple_agent:
      port: %d
      resources_server: {type: resources_servers, name: arithmetic}
      model_server: {type: responses_api_models, name: policy_model}
`, ports["head"], ports["arithmetic"], ports["policy_model"], ports["simple_agent"])
	return doc, ports
}

func wantPortsFree(t *testing.T, ports map[string]int) {
	t.Helper()
	for name, port := range ports {
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			t.Errorf("%s's port %d is still bound: %v", name, port, err)
			continue
		}
		ln.Close()
	}
}

// `gymlens env start` on a dry_run fleet of built-ins: one line per server,
// a final line, exit 0; the children said their config is valid, and no
// process or port is left.
func TestEnvStartDryRunPasses(t *testing.T) {
	testenv.ClearTelemetry(t)
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	doc, ports := dryFleet(t)
	cfg := filepath.Join(dir, "fleet.yaml")
	if err := os.WriteFile(cfg, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	res := runGymProcess(t, "env", "start", "--config", cfg, "--runs-dir", runs)
	if res.code != exitOK {
		t.Fatalf("exit %d, want 0\nstdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(res.stdout, "\n"), "\n")
	// The agent's generated environment server is the fourth.
	if len(lines) != 5 {
		t.Fatalf("stdout has %d lines, want 4 servers and a summary:\n%s", len(lines), res.stdout)
	}
	for i, name := range []string{"arithmetic", "policy_model", "simple_agent", "simple_agent_environment_server"} {
		if !strings.HasPrefix(lines[i], "dry run: "+name+" ") || !strings.Contains(lines[i], "ok: config valid, exited 0 without listening (pid ") {
			t.Errorf("line %d = %q, want %s passed", i+1, lines[i], name)
		}
	}
	runDir := runDirOf(t, runs)
	if want := fmt.Sprintf("dry run: all 4 servers passed; nothing is running (run %s, logs in %s)", filepath.Base(runDir), filepath.Join(runDir, "logs")); lines[4] != want {
		t.Errorf("summary = %q\nwant      %q", lines[4], want)
	}
	for _, name := range []string{"arithmetic", "policy_model", "simple_agent", "simple_agent_environment_server"} {
		log, err := os.ReadFile(filepath.Join(runDir, "logs", name+".log"))
		if err != nil || !bytes.Contains(log, []byte("dry run: the configuration is valid; not listening")) {
			t.Errorf("log of %s = %q (%v), want the child's dry-run line", name, log, err)
		}
	}
	wantNothingRunning(t, runs)
	wantPortsFree(t, ports)
}

// A command: server that exits 1 under dry run: exit 1, the server and
// its stderr on stderr, the others still run and pass.
func TestEnvStartDryRunFailureExits1(t *testing.T) {
	testenv.ClearTelemetry(t)
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	script := filepath.Join(dir, "wallet")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho \"wallet: no ledger configured for $NEMO_GYM_CONFIG_PATH\" >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	doc := `dry_run: true
head_server: {port: 0}
wallet:
  resources_servers:
    wallet: {command: [./wallet]}
arithmetic:
  resources_servers:
    arithmetic: {}
`
	cfg := filepath.Join(dir, "fleet.yaml")
	if err := os.WriteFile(cfg, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	res := runGymProcess(t, "env", "start", "--config", cfg, "--runs-dir", runs)
	if res.code != 1 {
		t.Fatalf("exit %d, want 1\nstdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
	}
	for _, want := range []string{
		`gymlens env start: server "wallet" failed the dry run: exited with exit status 1 (dry_run wants exit status 0)`,
		"last stderr lines:\n    wallet: no ledger configured for wallet\n",
	} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, res.stderr)
		}
	}
	for _, want := range []string{
		"dry run: wallet ", "FAILED (pid ",
		"dry run: arithmetic ", "ok: config valid",
		"dry run: FAILED: 1 of 2 servers passed (run ",
	} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, res.stdout)
		}
	}
	wantNothingRunning(t, runs)
}

// A config error stays a usage error under dry_run: exit 2 before any run
// directory or process exists.
func TestEnvStartDryRunConfigErrorExits2(t *testing.T) {
	testenv.ClearTelemetry(t)
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	cfg := filepath.Join(dir, "fleet.yaml")
	doc := "dry_run: true\npolicy_model:\n  responses_api_models:\n    policy_model:\n      corect_probability: 0.5\n"
	if err := os.WriteFile(cfg, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	res := runGymProcess(t, "env", "start", "--config", cfg, "--runs-dir", runs)
	want := "gymlens env start: fleet config " + cfg + `: policy_model.responses_api_models.policy_model.corect_probability: unknown key (did you mean "correct_probability"?)` + "\n"
	if res.code != exitUsage || res.stdout != "" || res.stderr != want {
		t.Errorf("exit %d, stdout %q\nstderr: %s\nwant:   %s", res.code, res.stdout, res.stderr, want)
	}
	if _, err := os.Stat(runs); !os.IsNotExist(err) {
		t.Errorf("%s was created (%v)", runs, err)
	}
}

// `gymlens run` on a dry_run fleet checks it the same way, collects nothing
// and says so.
func TestRunDryRunCollectsNothing(t *testing.T) {
	testenv.ClearTelemetry(t)
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	doc, ports := dryFleet(t)
	cfg := filepath.Join(dir, "fleet.yaml")
	if err := os.WriteFile(cfg, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	res := runGymProcess(t, "run", "--quiet", "--rollouts", "5", "--config", cfg, "--runs-dir", runs)
	if res.code != exitOK {
		t.Fatalf("exit %d, want 0\nstdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
	}
	if want := "dry run: all 4 servers passed; nothing is running; no rollouts collected under dry_run (run "; !strings.Contains(res.stdout, want) {
		t.Errorf("stdout lacks %q:\n%s", want, res.stdout)
	}
	if n := strings.Count(res.stdout, "ok: config valid, exited 0 without listening"); n != 4 {
		t.Errorf("%d servers passed on stdout, want 4 (the built-in fleet's environment server included):\n%s", n, res.stdout)
	}
	runDir := runDirOf(t, runs)
	for _, f := range []string{contract.RunRolloutsFile, tasksFile} {
		if _, err := os.Stat(filepath.Join(runDir, f)); !os.IsNotExist(err) {
			t.Errorf("a dry run wrote %s (%v)", f, err)
		}
	}
	wantNothingRunning(t, runs)
	wantPortsFree(t, ports)
}
