package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gymlens/gymlens/lens/telfile"
	"github.com/gymlens/gymlens/rollout"
)

// Process faults: a server stopped under load, a server killed mid-run, a
// verifier that panics. Every process here is real and talks over loopback;
// every wait is bounded and every PID started is cleaned up.

// startServe runs `gymlens serve resources_servers --name arithmetic` with its
// telemetry in dir/telemetry/arithmetic.jsonl (so readRun(dir) reads it)
// and returns the process and the base URL it reported in its ready line.
func startServe(t *testing.T, dir string, extraEnv ...string) (*gymProc, string) {
	t.Helper()
	return serveArithmetic(t, gymEnv(append([]string{
		"NEMO_GYM_OTEL_ENABLED=1",
		"NEMO_GYM_OTEL_EXPORTER=file",
		"NEMO_GYM_OTEL_FILE_PATH=" + filepath.Join(dir, "telemetry", "arithmetic.jsonl"),
		"NEMO_GYM_OTEL_SPAN_GROUPS=all",
	}, extraEnv...)...))
}

// serveArithmetic starts `gymlens serve resources_servers --name arithmetic`
// with env and waits (bounded) for its ready line; it returns the process
// and the base URL it reported.
func serveArithmetic(t *testing.T, env []string) (*gymProc, string) {
	t.Helper()
	return serveWith(t, env, "resources_servers", "--name", "arithmetic")
}

// serveWith starts `gymlens serve` with args and env and waits (bounded) for
// its ready line; it returns the process and the base URL it reported.
func serveWith(t *testing.T, env []string, args ...string) (*gymProc, string) {
	t.Helper()
	ready := make(chan string, 1)
	stdout := &lineLog{onLine: func(line string, _ time.Time) {
		if rest, ok := strings.CutPrefix(line, "GYM_READY "); ok {
			var r struct{ Addr string }
			if json.Unmarshal([]byte(rest), &r) == nil && r.Addr != "" {
				select {
				case ready <- r.Addr:
				default:
				}
			}
		}
	}}
	p := startGymProc(t, env, stdout, &lineLog{}, append([]string{"serve"}, args...)...)
	select {
	case addr := <-ready:
		return p, "http://" + addr
	case <-p.done:
		t.Fatalf("gymlens serve exited before it was ready: %v\nstderr:\n%s", p.err, p.stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("gymlens serve printed no ready line within 30s\nstderr:\n%s", p.stderr.String())
	}
	return nil, ""
}

func TestSIGTERMUnderLoadExportsEveryCompletedSpan(t *testing.T) {
	checkVerifyBody(t, "load-0-0")
	dir := t.TempDir()
	srv, base := startServe(t, dir)

	const workers = 16
	tr := &http.Transport{MaxIdleConnsPerHost: workers, Proxy: nil}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 15 * time.Second}

	var (
		completed  atomic.Int64 // 200 responses received
		termSent   atomic.Bool
		mu         sync.Mutex
		problems   []string // anything other than 200 before SIGTERM, or a non-200 answer at all
		stopErrors []string // the error that ended each worker after SIGTERM
	)
	giveUp := time.Now().Add(30 * time.Second) // the server should be gone long before
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := 0; time.Now().Before(giveUp); i++ {
				res, err := client.Post(base+"/verify", "application/json",
					strings.NewReader(verifyBody(fmt.Sprintf("load-%d-%d", w, i))))
				if err != nil {
					mu.Lock()
					if termSent.Load() {
						stopErrors = append(stopErrors, err.Error())
					} else {
						problems = append(problems, "before SIGTERM: "+err.Error())
					}
					mu.Unlock()
					return
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != http.StatusOK {
					mu.Lock()
					problems = append(problems, fmt.Sprintf("status %d", res.StatusCode))
					mu.Unlock()
					return
				}
				completed.Add(1)
			}
			mu.Lock()
			problems = append(problems, "server still answering 30s into the test")
			mu.Unlock()
		})
	}

	time.Sleep(time.Second) // load runs; not a timing assertion
	atSIGTERM := completed.Load()
	termSent.Store(true)
	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code := srv.wait(t, 30*time.Second)
	wg.Wait()
	if len(problems) > 0 {
		t.Fatalf("load saw %d problems, first: %s", len(problems), problems[0])
	}
	if code != 0 {
		t.Fatalf("gymlens serve exited %d after SIGTERM\nstderr:\n%s", code, tail(srv.stderr.String(), 40))
	}
	if atSIGTERM == 0 {
		t.Fatal("no request completed before SIGTERM")
	}
	if strings.Contains(srv.stderr.String(), "spans dropped") {
		t.Errorf("server dropped spans:\n%s", tail(srv.stderr.String(), 20))
	}

	n := completed.Load()
	procs := readRun(t, dir)
	p := procs["arithmetic"]
	if p == nil {
		t.Fatalf("no telemetry from the server; files %v", names(procs))
	}
	serverSpans, verifySpans, other := 0, 0, 0
	for _, s := range p.spans {
		switch {
		case s.Name == "POST /verify" && s.Kind == telfile.KindServer:
			if jsonString(s.Attributes["http.response.status_code"]) == "200" {
				serverSpans++
			} else {
				other++
			}
		case s.Name == "gym.verify":
			verifySpans++
		}
	}
	calls := p.counterByOutcome("gym.verify.calls", "nemo.gym.verify.outcome")
	t.Logf("completed %d (%d before SIGTERM, %d after), workers stopped by: %s", n, atSIGTERM, n-atSIGTERM, errorSummary(stopErrors))
	t.Logf("spans: %d POST /verify SERVER with 200, %d gym.verify; gym.verify.calls %v", serverSpans, verifySpans, calls)
	if other != 0 {
		t.Errorf("%d POST /verify spans with a status other than 200", other)
	}
	if int64(serverSpans) != n {
		t.Errorf("%d POST /verify SERVER spans with status 200, want %d (one per completed request)", serverSpans, n)
	}
	if int64(verifySpans) != n {
		t.Errorf("%d gym.verify spans, want %d", verifySpans, n)
	}
	if calls["success"] != n || calls["failure"] != 0 {
		t.Errorf("last gym.verify.calls = %v, want success %d, failure 0", calls, n)
	}
	if got := p.histogramCount("gym.verify.duration_ms"); got != uint64(n) {
		t.Errorf("gym.verify.duration_ms count %d, want %d", got, n)
	}
}

// errorSummary groups error messages by their text after the last colon.
func errorSummary(errs []string) string {
	count := map[string]int{}
	for _, e := range errs {
		k := e
		if i := strings.LastIndex(e, ": "); i >= 0 {
			k = e[i+2:]
		}
		count[k]++
	}
	var parts []string
	for k, v := range count {
		parts = append(parts, fmt.Sprintf("%dx %q", v, k))
	}
	return strings.Join(parts, ", ")
}

var (
	serverUpRe   = regexp.MustCompile(`msg="server up".* server=(\S+) .*pid=(\d+)`)
	serverDiedRe = regexp.MustCompile(`msg="server died".* server=(\S+)`)
)

type timedLine struct {
	text string
	at   time.Time
}

func TestSIGKILLOfServerMidRun(t *testing.T) {
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	const rollouts = 300

	died := make(chan timedLine, 8)
	// At most 32 rollouts / 200 ms = 160 rollouts/s while the model lives:
	// the test has well over a second to kill it before the run is done.
	// One /run call per rollout: a rollout that failed is recorded as
	// failed at once, not retried, so every count is of rollouts.
	orch := startRun(t, gymEnv("OTEL_METRIC_EXPORT_INTERVAL=200", "NEMO_GYM_MAX_ROLLOUT_ATTEMPTS=1"), func(line string, at time.Time) {
		if serverDiedRe.MatchString(line) {
			select {
			case died <- timedLine{line, at}:
			default:
			}
		}
	}, "--rollouts", strconv.Itoa(rollouts), "--concurrency", "32", "--model-latency-ms", "200", "--runs-dir", runs)
	pids := orch.servers()
	modelPID := pids["policy_model"]
	servers := len(pids)
	if modelPID == 0 || servers != 4 { // three servers and the agent's relay
		t.Fatalf("server up lines gave %v\nstderr:\n%s", pids, orch.stderr.String())
	}

	// Wait for progress: a full wave of rollouts recorded (completed ones
	// in rollouts.jsonl, failed ones in its failures file), the next in
	// flight.
	run := runDir(t, runs)
	output := filepath.Join(run, "rollouts.jsonl")
	failures := rollout.FailuresPath(output)
	deadline := time.Now().Add(30 * time.Second)
	written := 0
	for written < 32 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d rollouts written 30s after the fleet started\nstderr:\n%s", written, orch.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
		written = countLines(output) + countLines(failures)
	}
	if written >= rollouts {
		t.Fatalf("the run finished (%d rollouts) before the model could be killed", written)
	}

	t0 := time.Now()
	if err := syscall.Kill(modelPID, syscall.SIGKILL); err != nil {
		t.Fatalf("kill model server %d: %v", modelPID, err)
	}
	var noticed time.Duration
	select {
	case l := <-died:
		noticed = l.at.Sub(t0)
		if m := serverDiedRe.FindStringSubmatch(l.text); m[1] != "policy_model" {
			t.Errorf("death reported for %s, want policy_model: %s", m[1], l.text)
		}
		if !strings.Contains(l.text, "pid="+strconv.Itoa(modelPID)) || !strings.Contains(l.text, "killed") {
			t.Errorf("death line lacks the PID or the signal: %s", l.text)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no \"server died\" line 10s after SIGKILL\nstderr:\n%s", orch.stderr.String())
	}
	t.Logf("orchestrator logged the death %s after SIGKILL (%d rollouts written before the kill)", noticed.Round(time.Millisecond), written)
	if noticed > 2*time.Second {
		t.Errorf("orchestrator noticed the death after %s, want at most 2s", noticed)
	}

	// The run stops by itself: the rollouts in flight fail and are
	// recorded, no new one starts.
	code := orch.wait(t, 60*time.Second)
	errOut := orch.stderr.String()
	if code != 1 {
		t.Errorf("gymlens run exited %d after a server died, want 1\nstderr:\n%s", code, tail(errOut, 30))
	}
	if !strings.Contains(errOut, "stopped early after a server died") {
		t.Errorf("gymlens run did not say it stopped early:\n%s", tail(errOut, 30))
	}
	if !strings.Contains(errOut, `server "policy_model" had died`) {
		t.Errorf("gymlens run did not name the dead server on exit:\n%s", tail(errOut, 30))
	}

	completed := readRolloutFile(t, output)
	failedLines := readRolloutFile(t, failures)
	lastOK := time.Time{}
	for _, r := range completed {
		if r.FailureClass != "" || r.FailureError != "" {
			t.Errorf("rollouts.jsonl holds a failure line for %s: class %q, error %q", r.TaskID, r.FailureClass, r.FailureError)
		}
		if r.attemptedAt().After(lastOK) {
			lastOK = r.attemptedAt()
		}
	}
	failed, inFlight := len(failedLines), 0
	for _, r := range failedLines {
		if r.FailureClass != rollout.FailureAgentRunError {
			t.Errorf("failed rollout %s has _ng_failure_class %q, want %q", r.TaskID, r.FailureClass, rollout.FailureAgentRunError)
		}
		// The agent answers /run with 500 naming the model call.
		if !strings.Contains(r.FailureError, "model call: ") {
			t.Errorf("rollout %s failed for another reason: %s", r.TaskID, r.FailureError)
		}
		if r.Meta.Attempts != 1 {
			t.Errorf("failed rollout %s took %d attempts, want 1", r.TaskID, r.Meta.Attempts)
		}
		if r.attemptedAt().Before(t0) {
			inFlight++
		}
	}
	total := len(completed) + failed
	t.Logf("rollouts.jsonl: %d lines; failures file: %d lines (%d of them in flight at the kill)", len(completed), failed, inFlight)
	if failed > 0 {
		t.Logf("first failure: %s", failedLines[0].FailureError)
	}
	if total >= rollouts {
		t.Errorf("%d rollouts recorded: the run went on through every task after the death", total)
	}
	if failed == 0 || failed > rollouts-written {
		t.Errorf("%d failed rollouts; want some, at most the %d not written before the kill", failed, rollouts-written)
	}
	if inFlight == 0 {
		t.Errorf("no rollout in flight at the kill was recorded as failed")
	}
	if lastOK.After(t0.Add(time.Second)) {
		t.Errorf("a rollout started %s after the kill succeeded", lastOK.Sub(t0))
	}
	if want := fmt.Sprintf("rollouts        %d (%d failed)", total, failed); !strings.Contains(orch.stdout.String(), want) {
		t.Errorf("summary lacks %q:\n%s", want, orch.stdout.String())
	}

	procs := readRun(t, run) // every file, the killed server's included, parses
	orchTel := procs["orchestrator"]
	if orchTel == nil {
		t.Fatalf("no orchestrator telemetry; files %v", names(procs))
	}
	vals := orchTel.metricValues("gym.servers.active")
	t.Logf("gym.servers.active over time: %v", dedupRuns(vals))
	// Three servers and the agent's relay, then one fewer, then none.
	if len(vals) == 0 || vals[0] != 4 || vals[len(vals)-1] != 0 || !hasValue(vals, 3) {
		t.Errorf("gym.servers.active = %v, want 4, then 3, then 0", dedupRuns(vals))
	}
	for i := 1; i < len(vals); i++ {
		if vals[i] > vals[i-1] {
			t.Errorf("gym.servers.active rose from %v to %v", vals[i-1], vals[i])
			break
		}
	}

	// No server is left: the orchestrator reaped them all.
	for name, pid := range orch.servers() {
		if gymAlive(pid) {
			t.Errorf("server %s (pid %d) still alive after gymlens run exited", name, pid)
		}
	}
}

// gymAlive reports whether pid is a running (not zombie) gym process. A PID
// that now belongs to another program does not count.
func gymAlive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
		return false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && bytes.HasPrefix(cmdline, []byte(gymBin))
}

// dedupRuns drops consecutive repeats.
func dedupRuns(vals []float64) []float64 {
	var out []float64
	for i, v := range vals {
		if i == 0 || v != vals[i-1] {
			out = append(out, v)
		}
	}
	return out
}

func hasValue(vals []float64, want float64) bool {
	for _, v := range vals {
		if v == want {
			return true
		}
	}
	return false
}

func TestPanickingVerifierKeepsServing(t *testing.T) {
	checkVerifyBody(t, "boom-0")
	dir := t.TempDir()
	// The fault matches the row's task_id field; gymlens serve takes the
	// config from --config-json (it reads no config variable).
	srv, base := serveWith(t, gymEnv(
		"NEMO_GYM_OTEL_ENABLED=1",
		"NEMO_GYM_OTEL_EXPORTER=file",
		"NEMO_GYM_OTEL_FILE_PATH="+filepath.Join(dir, "telemetry", "arithmetic.jsonl"),
		"NEMO_GYM_OTEL_SPAN_GROUPS=all",
	), "resources_servers", "--name", "arithmetic", "--config-json", `{"panic_on_task_prefix":"boom-"}`)
	client := &http.Client{Timeout: 10 * time.Second}
	post := func(id string) (int, []byte) {
		t.Helper()
		res, err := client.Post(base+"/verify", "application/json", strings.NewReader(verifyBody(id)))
		if err != nil {
			t.Fatalf("POST /verify %s: %v\nstderr:\n%s", id, err, tail(srv.stderr.String(), 20))
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, b
	}
	const rounds = 4
	for i := range rounds {
		code, body := post(fmt.Sprintf("boom-%d", i))
		// Upstream answers an uncaught exception with 500 and a JSON
		// string body.
		var msg string
		if code != http.StatusInternalServerError || json.Unmarshal(body, &msg) != nil || msg == "" {
			t.Errorf("panicking verification -> %d %s; want 500 with a JSON string body", code, body)
		}
		id := fmt.Sprintf("ok-%d", i)
		code, body = post(id)
		var v struct {
			Reward          *float64 `json:"reward"`
			TaskID          string   `json:"task_id"`
			ExpectedAnswer  string   `json:"expected_answer"`
			ExtractedAnswer *string  `json:"extracted_answer"`
		}
		if code != http.StatusOK || json.Unmarshal(body, &v) != nil || v.Reward == nil || *v.Reward != 1 ||
			v.TaskID != id || v.ExpectedAnswer != "2" || v.ExtractedAnswer == nil || *v.ExtractedAnswer != "2" {
			t.Errorf("normal verification after a panic -> %d %s; want 200, reward 1, the row echoed, answer 2 extracted", code, body)
		}
	}
	select {
	case <-srv.done:
		t.Fatalf("server exited after panics: %v", srv.err)
	default:
	}
	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := srv.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("gymlens serve exited %d, want 0 (it must never crash)\nstderr:\n%s", code, tail(srv.stderr.String(), 30))
	}
	if got := strings.Count(srv.stderr.String(), `msg="handler panicked"`); got != rounds {
		t.Errorf("%d panics logged, want %d", got, rounds)
	}

	p := readRun(t, dir)["arithmetic"]
	if p == nil {
		t.Fatal("no telemetry from the server")
	}
	calls := p.counterByOutcome("gym.verify.calls", "nemo.gym.verify.outcome")
	t.Logf("gym.verify.calls %v after %d panics and %d normal verifications", calls, rounds, rounds)
	if calls["failure"] != rounds || calls["success"] != rounds {
		t.Errorf("gym.verify.calls = %v, want failure %d, success %d", calls, rounds, rounds)
	}
	if vals := p.metricValues("gym.verify.success_rate"); len(vals) == 0 || vals[len(vals)-1] != 0.5 {
		t.Errorf("gym.verify.success_rate over time %v, want 0.5 last", vals)
	}
	failedSpans := 0
	for _, s := range p.spans {
		if s.Name == "gym.verify" && s.Status == telfile.StatusError {
			failedSpans++
		}
	}
	if failedSpans != rounds {
		t.Errorf("%d gym.verify spans with error status, want %d", failedSpans, rounds)
	}
	statuses := map[string]uint64{}
	if m := p.lastMetric("http.server.request.duration"); m != nil {
		for _, pt := range m.Points {
			statuses[jsonString(pt.Attributes["http.response.status_code"])] += pt.Count
		}
	}
	if statuses["500"] != rounds || statuses["200"] != rounds {
		t.Errorf("request durations by status %v, want %d x 500 and %d x 200", statuses, rounds, rounds)
	}
}
