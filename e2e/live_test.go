package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/live"
)

// stallFleet is the built-in fleet whose policy model holds the first
// model call of tasks 3 and 17 for stallSeconds. The model knows a call's
// task from the /ng-rollout/<id>/ prefix of the agent's calls, which
// observability_enabled turns on without tracing.
const stallFleet = `
observability_enabled: true
arithmetic:
  resources_servers:
    arithmetic: {domain: math}
policy_model:
  responses_api_models:
    policy_model: {correct_probability: 0.9, latency_ms: 20, stall_tasks: [3, 17], stall_seconds: %d}
simple_agent:
  responses_api_agents:
    simple_agent: {}
`

// Strings planted where a careless status API would copy them: in every
// prompt, and in an OTLP header and a head-token-like setting.
const (
	plantedPrompt = "planted-prompt-6d1f0b"
	plantedHeader = "planted-header-a93e27"
)

// TestLiveViewOfAStalledRun runs a fleet in which two tasks stall, with
// tracing off, and watches it as a user would: the head's status API
// shows both as stalled within the rule's bound (no progress for
// max(stall factor x their stage's p95, the stall floor), polled each
// second) and as done once the run is over; the run's last snapshot
// (status.json) counts what the rollouts file holds; no snapshot carries a
// prompt or a header value. While the stall lasts, `gymlens top` runs in
// tmux (its screen captured: the fleet line and the stalled rows) and the
// live page is loaded in headless Chromium (its rendered rows read back,
// and a screenshot kept when GYMLENS_ARTIFACTS names a directory).
func TestLiveViewOfAStalledRun(t *testing.T) {
	const (
		stallSeconds = 45 // long enough for tmux and Chromium on a loaded machine
		rollouts     = 60
		stallFloor   = time.Second
		pollEvery    = time.Second // rollout.DefaultLiveEvery
	)
	dir := t.TempDir()
	cfg := writeFile(t, filepath.Join(dir, "fleet.yaml"), fmt.Sprintf(stallFleet, stallSeconds))
	var input strings.Builder
	for i := range rollouts {
		a, b := i%17+1, i%5+2
		fmt.Fprintf(&input, `{"responses_create_params":{"input":[{"role":"user","content":"What is %d + %d? (%s)"}]},"agent_ref":{"name":"simple_agent"},"expected_answer":"%d"}`+"\n",
			a, b, plantedPrompt, a+b)
	}
	in := writeFile(t, filepath.Join(dir, "tasks.jsonl"), input.String())
	runs := filepath.Join(dir, "runs")
	env := gymEnv("OTEL_EXPORTER_OTLP_HEADERS=authorization="+plantedHeader, "NEMO_GYM_OTEL_TRACES_ENABLED=false")
	stderr := &lineLog{}
	started := time.Now()
	run := startGymProc(t, env, &lineLog{}, stderr, "run", "--config", cfg, "--input", in, "--concurrency", "8",
		"--runs-dir", runs, "--stall-floor", stallFloor.String(), "--slow-floor", "500ms")

	// The head's address and token file, from the line that says where
	// to watch the run.
	watch := regexp.MustCompile(`gymlens top --head (\S+) --head-token-file (\S+)`)
	var head, tokenFile string
	waitFor(t, time.Minute, "gymlens run to say where to watch it", func() bool {
		m := watch.FindStringSubmatch(stderr.String())
		if m == nil {
			return false
		}
		head, tokenFile = m[1], m[2]
		return true
	})
	if !filepath.IsAbs(tokenFile) {
		t.Fatalf("token file %q is not absolute", tokenFile)
	}
	tokenBytes, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(tokenBytes))
	client := &live.Client{Base: head, Token: token}
	snapshots := 0
	checkClean := func(raw []byte) {
		t.Helper()
		snapshots++
		for _, planted := range []string{plantedPrompt, plantedHeader, token} {
			if bytes.Contains(raw, []byte(planted)) {
				t.Fatalf("a snapshot holds %q:\n%s", planted, raw)
			}
		}
	}

	// Both stalled tasks show as stalled within the bound: the call
	// began at the latest when the task's rollout started, the rule
	// needs the floor (the model call's p95 is ~20 ms, x10 is below it),
	// and the agent is asked every second.
	var stalledSeen time.Duration
	var stalled []live.Rollout
	waitFor(t, time.Duration(stallSeconds)*time.Second, "tasks 3 and 17 to show as stalled", func() bool {
		raw, err := client.Raw(ctxT(t, 10*time.Second), live.Filter{State: live.Stalled})
		if err != nil {
			return false
		}
		checkClean(raw)
		var s live.Snapshot
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatal(err)
		}
		stalled = s.Rollouts
		tasks := map[int]bool{}
		for _, r := range s.Rollouts {
			tasks[r.TaskIndex] = true
		}
		stalledSeen = time.Since(started)
		return len(tasks) == 2 && tasks[3] && tasks[17]
	})
	for _, r := range stalled {
		if r.State != live.Stalled || r.Stage != live.StageModel || r.Turn != 1 || r.RolloutID != fmt.Sprintf("%d-0", r.TaskIndex) {
			t.Errorf("stalled rollout %+v: want state stalled at model_call, turn 1, id <task>-0", r)
		}
		if bound := stallFloor + 2*pollEvery + time.Second; time.Duration(r.SinceProgressMS*float64(time.Millisecond)) > time.Duration(stallSeconds)*time.Second ||
			time.Duration(r.StageElapsedMS*float64(time.Millisecond)) < stallFloor {
			t.Errorf("stalled rollout %s: %v in its stage, %v without progress (floor %s, bound %s)", r.RolloutID,
				time.Duration(r.StageElapsedMS)*time.Millisecond, time.Duration(r.SinceProgressMS)*time.Millisecond, stallFloor, bound)
		}
	}
	t.Logf("stalled seen %s after the run started (%d snapshots read)", stalledSeen.Round(time.Millisecond), snapshots)

	t.Run("top in tmux", func(t *testing.T) { topInTmux(t, head, tokenFile) })
	t.Run("live page in chromium", func(t *testing.T) { livePageInChromium(t, head, token) })

	if code := run.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("gymlens run exited %d\n%s", code, tail(stderr.String(), 30))
	}
	runDirPath := runDir(t, runs)
	raw, err := os.ReadFile(filepath.Join(runDirPath, contract.RunStatusFile))
	if err != nil {
		t.Fatal(err)
	}
	checkClean(raw)
	var last live.Snapshot
	if err := json.Unmarshal(raw, &last); err != nil {
		t.Fatal(err)
	}
	lines := func(name string) int64 {
		b, _ := os.ReadFile(filepath.Join(runDirPath, name))
		return int64(bytes.Count(b, []byte("\n")))
	}
	done, failed := lines(contract.RunRolloutsFile), lines(contract.RunFailuresFile)
	if !last.Ended || last.Counts.Done != done || last.Counts.Failed != failed || done+failed != rollouts ||
		last.Counts.Stalled+last.Counts.Active+last.Counts.Queued+last.Counts.Slow+last.Counts.Retrying+last.Counts.Cancelled != 0 {
		t.Errorf("the last snapshot counts %+v (ended %v); the run wrote %d rollouts and %d failures of %d", last.Counts, last.Ended, done, failed, rollouts)
	}
	// The stalled tasks ended done: they are among the run's rollouts.
	out, _ := os.ReadFile(filepath.Join(runDirPath, contract.RunRolloutsFile))
	for _, task := range []int{3, 17} {
		if !bytes.Contains(out, []byte(fmt.Sprintf(`"_ng_task_index":%d,`, task))) && !bytes.Contains(out, []byte(fmt.Sprintf(`"_ng_task_index": %d,`, task))) {
			t.Errorf("task %d is not in the rollouts file", task)
		}
	}
}

// topInTmux runs `gymlens top` in a tmux pane and reads its screen.
func topInTmux(t *testing.T, head, tokenFile string) {
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		skipOrFail(t, "tmux is not installed (.ci/run installs it)")
	}
	socket := filepath.Join(t.TempDir(), "tmux.sock")
	tm := func(args ...string) (string, error) {
		out, err := exec.Command(tmux, append([]string{"-S", socket}, args...)...).CombinedOutput()
		return string(out), err
	}
	if out, err := tm("new-session", "-d", "-x", "200", "-y", "50", "-s", "top",
		gymBin+" top --head "+head+" --head-token-file "+tokenFile+" --interval 300ms"); err != nil {
		t.Fatalf("tmux new-session: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		// The server's PID, to end it by PID whatever happened.
		if out, err := tm("display-message", "-p", "#{pid}"); err == nil {
			var pid int
			if _, err := fmt.Sscan(out, &pid); err == nil && pid > 0 {
				_ = syscall.Kill(pid, syscall.SIGTERM)
			}
		}
	})
	var screen string
	waitFor(t, 15*time.Second, "top's screen to show the fleet line and two stalled rollouts", func() bool {
		screen, _ = tm("capture-pane", "-p", "-t", "top")
		return strings.Contains(screen, "gymlens top  run") && regexp.MustCompile(`(?m)^\S?\s*stalled\s+3\s`).MatchString(screen) &&
			regexp.MustCompile(`(?m)^\S?\s*stalled\s+17\s`).MatchString(screen)
	})
	if !regexp.MustCompile(`rollouts \d+/60 `).MatchString(screen) {
		t.Errorf("top's fleet line lacks the rollout count:\n%s", screen)
	}
	// A key: q ends it.
	if out, err := tm("send-keys", "-t", "top", "q"); err != nil {
		t.Fatalf("tmux send-keys: %v\n%s", err, out)
	}
	waitFor(t, 10*time.Second, "top to quit on q", func() bool {
		_, err := tm("has-session", "-t", "top")
		return err != nil
	})
	t.Logf("top's screen:\n%s", screen)
}

// livePageInChromium loads the live page in headless Chromium and reads
// back what its script drew.
func livePageInChromium(t *testing.T, head, token string) {
	var chrome string
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			chrome = p
			break
		}
	}
	if chrome == "" {
		skipOrFail(t, "no Chromium installed (.ci/run installs it)")
	}
	page := head + live.PagePath + "#token=" + token
	// The page is served without the token (it holds no data), its data
	// is not.
	res, err := http.Get(head + live.PagePath)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !bytes.Contains(body, []byte("<title>gymlens live</title>")) {
		t.Fatalf("GET %s without a token: %d\n%.300s", live.PagePath, res.StatusCode, body)
	}
	// No external asset: nothing loaded from elsewhere.
	for _, ext := range []string{" src=", "<link", "@import", "url("} {
		if bytes.Contains(body, []byte(ext)) {
			t.Errorf("the live page loads something (%q)", ext)
		}
	}
	profile := t.TempDir()
	args := func(extra ...string) []string {
		return append([]string{"--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
			"--user-data-dir=" + profile, "--virtual-time-budget=6000", "--window-size=1280,1100"}, append(extra, page)...)
	}
	ctx := ctxT(t, 60*time.Second)
	dom, err := exec.CommandContext(ctx, chrome, args("--dump-dom")...).Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom: %v", err)
	}
	for _, want := range []string{`class="state stalled"`, `<td>3-0</td>`, `<td>17-0</td>`, "model_call", "simple_agent"} {
		if !bytes.Contains(dom, []byte(want)) {
			t.Errorf("the live page as drawn lacks %q:\n%.3000s", want, dom)
		}
	}
	if !bytes.Contains(dom, []byte("<polyline")) {
		t.Errorf("the live page drew no chart")
	}
	shot := filepath.Join(t.TempDir(), "live.png")
	if dir := os.Getenv("GYMLENS_ARTIFACTS"); dir != "" {
		shot = filepath.Join(dir, "live-page.png")
	}
	if out, err := exec.CommandContext(ctx, chrome, args("--screenshot="+shot)...).CombinedOutput(); err != nil {
		t.Fatalf("chromium --screenshot: %v\n%s", err, out)
	}
	if fi, err := os.Stat(shot); err != nil || fi.Size() < 10<<10 {
		t.Errorf("screenshot %s: %v, %v", shot, err, fi)
	}
	t.Logf("live page screenshot: %s", shot)
}

// skipOrFail skips a test that needs a tool this machine lacks, unless
// GYMLENS_UI_TOOLS=required (as .ci/run sets it): then it fails.
func skipOrFail(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("GYMLENS_UI_TOOLS") == "required" {
		t.Fatal(why)
	}
	t.Skip(why)
}

// TestLiveViewOfACollectorBesideEnvStart watches a run made of
// `gymlens env start` and `gymlens rollouts collect --head`: the collector
// serves its own status API (and says where), names it to the head, and
// the head's /gymlens/status relays it, so that `gymlens top --head` works
// against either; a stalled task shows as stalled through both, and the
// collector's listener wants the head token.
func TestLiveViewOfACollectorBesideEnvStart(t *testing.T) {
	const stallSeconds = 30
	dir := t.TempDir()
	cfg := writeFile(t, filepath.Join(dir, "fleet.yaml"), fmt.Sprintf(stallFleet, stallSeconds))
	var input strings.Builder
	for i := range 20 {
		fmt.Fprintf(&input, `{"responses_create_params":{"input":[{"role":"user","content":"What is %d + 1?"}]},"agent_ref":{"name":"simple_agent"},"expected_answer":"%d"}`+"\n", i, i+1)
	}
	in := writeFile(t, filepath.Join(dir, "tasks.jsonl"), input.String())
	e := startEnv(t, gymEnv("NEMO_GYM_OTEL_TRACES_ENABLED=false"), 4, "--config", cfg, "--runs-dir", filepath.Join(dir, "runs"))
	tokenFile := filepath.Join(e.runDir, contract.RunHeadTokenFile)
	tokenBytes, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(tokenBytes))
	head := &live.Client{Base: e.head, Token: token}
	if _, err := head.Snapshot(ctxT(t, 10*time.Second), live.Filter{}); err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("the head's status before any collection: %v, want 503", err)
	}

	stderr := &lineLog{}
	collect := startGymProc(t, gymEnv(), &lineLog{}, stderr, "rollouts", "collect", "--head", e.head, "--head-token-file", tokenFile,
		"-i", in, "-o", filepath.Join(dir, "rollouts.jsonl"), "--concurrency", "4", "--stall-floor", "1s")
	addr := regexp.MustCompile(`status API at (http://\S+)/gymlens/status`)
	var own string
	waitFor(t, time.Minute, "the collector to say where its status API is", func() bool {
		m := addr.FindStringSubmatch(stderr.String())
		if m != nil {
			own = m[1]
		}
		return m != nil
	})
	for name, c := range map[string]*live.Client{"the collector's own": {Base: own, Token: token}, "the head's, relayed": head} {
		waitFor(t, time.Duration(stallSeconds)*time.Second, name+" status API to show task 3 stalled", func() bool {
			s, err := c.Snapshot(ctxT(t, 10*time.Second), live.Filter{State: live.Stalled})
			return err == nil && len(s.Rollouts) == 1 && s.Rollouts[0].TaskIndex == 3 && s.Rollouts[0].Stage == live.StageModel
		})
	}
	if _, err := (&live.Client{Base: own}).Snapshot(ctxT(t, 10*time.Second), live.Filter{}); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("the collector's status API without the token: %v, want 401", err)
	}
	if code := collect.wait(t, 2*time.Minute); code != 0 {
		failures, _ := os.ReadFile(filepath.Join(dir, "rollouts_failures.jsonl"))
		t.Fatalf("gymlens rollouts collect exited %d\n%s\nfailures:\n%.3000s", code, tail(stderr.String(), 5), failures)
	}
}
