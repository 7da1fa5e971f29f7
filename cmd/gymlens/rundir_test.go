package main

// Tests of the run directory's life: a run id given twice never merges two
// runs, a rerun is refused unless --resume, --resume checks the run's
// identity and completes what is missing, and what a run writes is
// private to its user and free of credentials. Every gym here is a real
// process of the gymlens binary.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/internal/testenv"
	"github.com/gymlens/gymlens/orchestrator"
	"github.com/gymlens/gymlens/protocol"
)

// gymWith runs the gymlens binary with args and extra environment (on top of
// the test's, whose telemetry variables testenv.ClearTelemetry cleared) to
// its end, in its own process group, killed by its PID if it outlives
// launchTimeout.
func gymWith(t *testing.T, env []string, args ...string) dryRunResult {
	t.Helper()
	cmd := exec.Command(gymBin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := testenv.Start(t, cmd, launchTimeout)
	return dryRunResult{code: p.Wait(t), stdout: p.Stdout.String(), stderr: p.Stderr.String()}
}

// rolloutKeys reads a rollouts file and returns its line count and its
// distinct (task index, rollout index) pairs. A cut last line counts as a
// line but not as a rollout.
func rolloutKeys(t *testing.T, path string) (lines int, keys map[[2]int]bool) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	keys = map[[2]int]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		lines++
		var row map[string]json.RawMessage
		if json.Unmarshal(sc.Bytes(), &row) != nil {
			continue
		}
		var task, roll int
		if json.Unmarshal(row[protocol.KeyTaskIndex], &task) != nil || json.Unmarshal(row[protocol.KeyRolloutIndex], &roll) != nil {
			t.Fatalf("%s: line %d without indexes: %s", path, lines, sc.Bytes())
		}
		keys[[2]int{task, roll}] = true
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines, keys
}

// Two gym runs started at once with the same run id (as two jobs of one
// SLURM_JOB_ID, or a RUN_ID set in a shell profile): exactly one runs,
// the other exits 2 before starting anything, saying how to resume, and
// the run directory holds one run's rollouts, each once.
func TestSameRunIDTwiceAtOnceRunsOnce(t *testing.T) {
	testenv.ClearTelemetry(t)
	runs := filepath.Join(t.TempDir(), "runs")
	const n = 60
	env := []string{"SLURM_JOB_ID=4242"}
	args := []string{"run", "--quiet", "--no-telemetry", "--rollouts", fmt.Sprint(n), "--concurrency", "4", "--model-latency-ms", "5", "--runs-dir", runs}
	var wg sync.WaitGroup
	res := make([]dryRunResult, 2)
	for i := range res {
		wg.Go(func() { res[i] = gymWith(t, env, args...) })
	}
	wg.Wait()
	codes := []int{res[0].code, res[1].code}
	won, lost := res[0], res[1]
	if won.code != exitOK {
		won, lost = lost, won
	}
	if won.code != exitOK || lost.code != exitUsage {
		t.Fatalf("exit statuses %v, want one 0 and one 2\nfirst stderr:\n%s\nsecond stderr:\n%s", codes, res[0].stderr, res[1].stderr)
	}
	runDir := filepath.Join(runs, "4242")
	for _, want := range []string{runDir + " already exists", "never reused", "--resume"} {
		if !strings.Contains(lost.stderr, want) {
			t.Errorf("the refused run's stderr lacks %q:\n%s", want, lost.stderr)
		}
	}
	lines, keys := rolloutKeys(t, filepath.Join(runDir, contract.RunRolloutsFile))
	t.Logf("refused run: %q; kept run: %d lines, %d distinct rollouts", strings.TrimSpace(lost.stderr), lines, len(keys))
	if lines != n || len(keys) != n {
		t.Errorf("rollouts.jsonl: %d lines, %d distinct rollouts; want %d of each", lines, len(keys), n)
	}
	entries, _ := os.ReadDir(runs)
	if len(entries) != 1 {
		t.Errorf("%d run directories, want 1", len(entries))
	}
	wantNothingRunning(t, runs)
}

// A rerun with the same run id is refused without --resume; --resume with
// another seed, dataset or --num-repeats is refused naming what differs;
// none of them touches the run. --resume of the same work runs only the
// rollouts that are missing: the run ends with each of its rollouts
// exactly once.
func TestRerunRefusedAndResumeCompletesTheRun(t *testing.T) {
	testenv.ClearTelemetry(t)
	runs := filepath.Join(t.TempDir(), "runs")
	const n = 40
	env := []string{lensRunIDVar + "=resume-me"}
	base := []string{"run", "--quiet", "--concurrency", "4", "--runs-dir", runs}
	args := slices.Concat(base, []string{"--rollouts", fmt.Sprint(n)})
	with := func(extra ...string) []string { return slices.Concat(args, extra) }
	if res := gymWith(t, env, args...); res.code != exitOK {
		t.Fatalf("first run: exit %d\n%s", res.code, res.stderr)
	}
	runDir := filepath.Join(runs, "resume-me")
	rollouts := filepath.Join(runDir, contract.RunRolloutsFile)

	// An interrupted run, as SIGKILL leaves it: the first 15 rollouts and
	// half of the 16th.
	full, err := os.ReadFile(rollouts)
	if err != nil {
		t.Fatal(err)
	}
	cut := 0
	for range 15 {
		cut += bytes.IndexByte(full[cut:], '\n') + 1
	}
	cut += (bytes.IndexByte(full[cut:], '\n')) / 2
	if err := os.WriteFile(rollouts, full[:cut], contract.RunFilePerm); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, runDir)

	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"rerun", with("--seed", "2"), []string{"already exists", "never reused", "--resume"}},
		{"other seed", with("--seed", "2", "--resume"), []string{"cannot resume", "--seed: 2 here, 1 in the run"}},
		{"other dataset", slices.Concat(base, []string{"--rollouts", fmt.Sprint(n + 1), "--resume"}), []string{"cannot resume", fmt.Sprintf("dataset: %d rows", n+1), fmt.Sprintf("%d rows", n)}},
		{"other repeats", with("--num-repeats", "2", "--resume"), []string{"cannot resume", "--num-repeats: 2 here, 1 in the run"}},
	} {
		res := gymWith(t, env, c.args...)
		if res.code != exitUsage {
			t.Errorf("%s: exit %d, want 2\n%s", c.name, res.code, res.stderr)
		}
		for _, w := range c.want {
			if !strings.Contains(res.stderr, w) {
				t.Errorf("%s: stderr lacks %q:\n%s", c.name, w, res.stderr)
			}
		}
		if after := snapshot(t, runDir); after != before {
			t.Errorf("%s: the refused run changed the run directory:\nbefore %s\nafter  %s", c.name, before, after)
		}
	}

	res := gymWith(t, env, with("--resume")...)
	if res.code != exitOK {
		t.Fatalf("resume: exit %d\n%s", res.code, res.stderr)
	}
	if !strings.Contains(res.stderr, "resuming run resume-me") {
		t.Errorf("resume does not say so:\n%s", res.stderr)
	}
	lines, keys := rolloutKeys(t, rollouts)
	t.Logf("resumed run: %d lines, %d distinct rollouts", lines, len(keys))
	if lines != n || len(keys) != n {
		t.Errorf("after --resume: %d lines, %d distinct rollouts; want %d of each", lines, len(keys), n)
	}
	wantPrivate(t, runDir)
	wantNothingRunning(t, runs)
}

// lensRunIDVar is the variable that names a run.
const lensRunIDVar = "NEMO_GYM_OTEL_RUN_ID"

// snapshot describes every file under dir by path, size and mode.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		fmt.Fprintf(&b, "%s:%d:%v ", rel, fi.Size(), fi.Mode())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// wantPrivate fails for any file under dir readable or writable by anyone
// but its owner beyond contract.RunFilePerm, and any directory beyond
// contract.RunDirPerm.
func wantPrivate(t *testing.T, dir string) {
	t.Helper()
	files, dirs := 0, 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		limit := fs.FileMode(contract.RunFilePerm)
		if fi.IsDir() {
			limit = contract.RunDirPerm
			dirs++
		} else {
			files++
		}
		if perm := fi.Mode().Perm(); perm&^limit != 0 {
			t.Errorf("%s: mode %v, more open than %v", path, perm, limit)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d files, %d directories checked", dir, files, dirs)
}

// A run given URLs with credentials (the OTLP endpoint in the
// environment, a model base URL in the fleet config, as user:password@
// and ?token=) keeps none of them in its run directory: config.yaml shows
// each URL with the credentials replaced, and every file and directory is
// private to the user.
func TestRunDirectoryHoldsNoCredentials(t *testing.T) {
	testenv.ClearTelemetry(t)
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	fleet := filepath.Join(dir, "fleet.yaml")
	doc := "policy_base_url: https://model-user:model-pass@models.invalid/v1?key=model-key#model-frag\n" +
		"telemetry: {enabled: true, exporter: file}\n" + string(orchestrator.DefaultConfigYAML())
	if err := os.WriteFile(fleet, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{
		lensRunIDVar + "=creds",
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://otlp-user:otlp-pass@127.0.0.1:4318/base?api_token=otlp-token",
	}
	res := gymWith(t, env, "run", "--quiet", "--rollouts", "3", "--config", fleet, "--runs-dir", runs)
	if res.code != exitOK {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
	runDir := filepath.Join(runs, "creds")
	cfg, err := os.ReadFile(filepath.Join(runDir, contract.RunConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"https://[REDACTED]@models.invalid/v1?[REDACTED]#[REDACTED]",
		"http://[REDACTED]@127.0.0.1:4318/base?[REDACTED]",
	} {
		if !bytes.Contains(cfg, []byte(want)) {
			t.Errorf("config.yaml lacks the scrubbed URL %s:\n%s", want, cfg)
		}
	}
	secrets := []string{"model-user", "model-pass", "model-key", "model-frag", "otlp-user", "otlp-pass", "otlp-token"}
	err = filepath.WalkDir(runDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, s := range secrets {
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("%s holds %q", path, s)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	wantPrivate(t, runDir)
	wantNothingRunning(t, runs)
}

// While one command holds a run directory, another cannot take it, not
// even with --resume; once it is released, a resume with the same work
// may.
func TestRunDirHeldIsRefused(t *testing.T) {
	runs := t.TempDir()
	seed := int64(1)
	id := runIdentity{Command: identityRun, Seed: &seed, NumRepeats: 1, Dataset: &datasetIdentity{Source: "s", Rows: 2, SHA256: "ab"}}
	held, err := openRunDir(runs, "held", id, false, "hint")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := openRunDir(runs, "held", id, true, "hint"); err == nil || !strings.Contains(err.Error(), "in use by another gym process") {
		t.Errorf("resume while held: %v, want it refused as in use", err)
	}
	held.close()
	again, err := openRunDir(runs, "held", id, true, "hint")
	if err != nil {
		t.Fatalf("resume once released: %v", err)
	}
	defer again.close()
	if !again.resumed {
		t.Error("an existing directory reopened is not marked resumed")
	}
	for _, bad := range []string{"", ".", "..", "a/b", "../x", "x\ny"} {
		if _, err := openRunDir(runs, bad, id, false, "hint"); err == nil || !strings.Contains(err.Error(), "plain directory name") {
			t.Errorf("run id %q: %v, want it refused", bad, err)
		}
	}
}
