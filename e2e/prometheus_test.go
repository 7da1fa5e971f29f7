package e2e

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/dataset"
	"github.com/gymlens/gymlens/internal/servertest"
	"github.com/gymlens/gymlens/protocol"
	"github.com/gymlens/gymlens/rollout"
)

// promFleet is the default three servers, with a verifier that panics on
// the first nine tasks of the built-in dataset so that the counters carry
// failures too. Telemetry comes from the environment only.
const promFleet = `
arithmetic:
  resources_servers:
    arithmetic: {domain: math, panic_on_task_prefix: "arith-00000"}
policy_model:
  responses_api_models:
    policy_model: {}
simple_agent:
  responses_api_agents:
    simple_agent:
      resources_server: {type: resources_servers, name: arithmetic}
      model_server: {type: responses_api_models, name: policy_model}
`

// promRulesDir is deploy/prometheus, relative to this package.
const promRulesDir = "../deploy/prometheus"

// promName is the Prometheus name of the contract's instrument name.
func promName(name string) string { return contract.MustLookup(name).PrometheusName() }

// promDefaultLE are the le labels of a gym.* ms histogram: the
// OpenTelemetry default boundaries, then +Inf.
func promDefaultLE() []string {
	var le []string
	for _, b := range contract.DefaultBucketsMS {
		le = append(le, strconv.FormatFloat(b, 'f', -1, 64))
	}
	return append(le, "+Inf")
}

// TestPrometheusScrapesFleet runs a fleet with the prometheus exporter and
// a real Prometheus 2.x that finds it through the file_sd configuration the
// orchestrator generated, then checks what PromQL sees against the ground
// truth in rollouts.jsonl.
//
// Rollouts run in two batches around Prometheus's first scrape. Batch A
// holds every failing verification and happens before Prometheus starts,
// so it shows in the counters' values but not in any rate; batch B runs
// between scrapes, so the 5 m recording rules see exactly batch B.
func TestPrometheusScrapesFleet(t *testing.T) {
	promBin, err1 := exec.LookPath("prometheus")
	promtool, err2 := exec.LookPath("promtool")
	if err1 != nil || err2 != nil {
		t.Skip("skipping: the prometheus and promtool binaries (Prometheus 2.x) are not on PATH; " +
			"install them with `apt-get install -y prometheus` (.ci/run does) to run this test")
	}
	testStart := time.Now()

	// The shipped rules are valid and do what their unit tests say, before
	// anything is started.
	mustPromtool(t, promtool, nil, "check", "rules", filepath.Join(promRulesDir, "rules.yml"))
	mustPromtool(t, promtool, nil, "test", "rules", filepath.Join(promRulesDir, "rules_test.yml"))

	dir := t.TempDir()
	cfgPath := writeFile(t, filepath.Join(dir, "fleet.yaml"), promFleet)
	fl := startPromFleet(t, filepath.Join(dir, "runs"), cfgPath)
	t.Logf("fleet up after %s: run %s", time.Since(testStart).Round(time.Millisecond), fl.runID)

	promDir := filepath.Join(fl.runDir, contract.RunPrometheusDir)
	targetsPath := filepath.Join(promDir, "targets.json")
	if _, err := os.Stat(targetsPath); err != nil {
		t.Fatalf("the orchestrator wrote no %s (%v): with the prometheus exporter it must call "+
			"orchestrator.WritePrometheusConfig once the fleet is up", targetsPath, err)
	}
	mustPromtool(t, promtool, nil, "check", "config", filepath.Join(promDir, "prometheus.yml"))
	targets := readPromTargets(t, targetsPath)
	if len(targets) != 5 {
		t.Fatalf("targets.json lists %d processes, want 5 (orchestrator, 3 servers, the agent's relay): %+v", len(targets), targets)
	}

	// A raw scrape of every process parses, and lints clean except for the
	// NeMo Gym names that carry "ms" (compatibility beats the lint).
	for _, tg := range targets {
		promCheckScrape(t, promtool, tg)
	}

	tasks := dataset.Arithmetic(30, 1)
	for i := range tasks {
		// Two collections append to one output: give every row its task
		// index up front, so batch B's rows do not reuse batch A's.
		idx := i
		tasks[i].TaskIndex = &idx
	}
	batchA, batchB := tasks[:12], tasks[12:]
	rollouts := filepath.Join(fl.runDir, contract.RunRolloutsFile)
	promCollect(t, fl.agentURL, filepath.Join(dir, "a.jsonl"), rollouts, batchA)
	afterA := time.Now()
	truthA := promReadTruth(t, rollouts)

	prom := startPrometheus(t, promBin, filepath.Join(promDir, "prometheus.yml"), filepath.Join(dir, "tsdb"))
	prom.waitScraped(t, afterA, 5, 25*time.Second)
	t.Logf("prometheus scraped all targets after %s", time.Since(testStart).Round(time.Millisecond))

	promCollect(t, fl.agentURL, filepath.Join(dir, "b.jsonl"), rollouts, batchB)
	afterB := time.Now()
	prom.waitEvaluated(t, prom.waitScraped(t, afterB, 5, 20*time.Second), 20*time.Second)
	t.Logf("prometheus scraped and evaluated after batch B at %s", time.Since(testStart).Round(time.Millisecond))

	truth := promReadTruth(t, rollouts)
	if truth.lines != len(tasks) || truth.verifyFailed == 0 || truth.verifyOK == 0 {
		t.Fatalf("rollouts.jsonl: %+v; want %d rollouts with verifications both failed and completed", truth, len(tasks))
	}

	// gym_servers_active: the server count, from the orchestrator's target
	// and nowhere else.
	serversActive := promName(contract.ServersActive)
	active := prom.query(t, serversActive)
	if len(active) != 1 {
		t.Fatalf("%s has %d series, want exactly 1 (the orchestrator's): %v", serversActive, len(active), active)
	}
	want := map[string]string{"job": "gym", "gym_server_type": contract.ServerTypeOrchestrator, "gym_server_name": "orchestrator", "gym_run_id": fl.runID}
	for k, v := range want {
		if active[0].labels[k] != v {
			t.Errorf("%s label %s = %q, want %q (labels %v)", serversActive, k, active[0].labels[k], v, active[0].labels)
		}
	}
	if active[0].value != 4 {
		t.Errorf("%s = %v, want 4 (three servers and the agent's relay)", serversActive, active[0].value)
	}
	t.Logf("%s = %v from %s", serversActive, active[0].value, active[0].labels["gym_server_name"])

	// Upstream's series names and buckets: the success-rate gauge and the
	// servers gauge have no unit (so no _ratio or other suffix), the gym
	// histograms' le labels are the OpenTelemetry default buckets, and the
	// rollout counter is gym.rollout.completed_total.
	verifyRate := promName(contract.VerifySuccessRate)
	if serversActive != "gym_servers_active" || verifyRate != "gym_verify_success_rate" {
		t.Errorf("the contract names the gauges %s and %s in Prometheus, upstream gym_servers_active and gym_verify_success_rate", serversActive, verifyRate)
	}
	if got := prom.query(t, verifyRate); len(got) != 1 || got[0].labels["gym_server_type"] != contract.ServerTypeResources {
		t.Errorf("%s = %v, want one series, from the resources server", verifyRate, got)
	}
	if got := prom.query(t, `{__name__=~"`+verifyRate+`_.+|`+serversActive+`_.+"}`); len(got) != 0 {
		t.Errorf("series with unit suffixes upstream lacks: %v", got)
	}
	wantLE := promDefaultLE()
	for _, name := range []string{contract.RolloutDuration, contract.VerifyDuration} {
		h := promName(name) + "_bucket"
		var le []string
		for _, s := range prom.query(t, "count by (le) ("+h+")") {
			le = append(le, s.labels["le"])
		}
		slices.SortFunc(le, func(a, b string) int { return cmp.Compare(promLE(a), promLE(b)) })
		if !slices.Equal(le, wantLE) {
			t.Errorf("%s le labels %v, want %v", h, le, wantLE)
		}
	}

	// Fleet success rates from the counters equal rollouts.jsonl.
	verifyCalls := promName(contract.VerifyCalls)
	verifyOutcome := promLabel(contract.AttrVerifyOutcome)
	verifyFrac := prom.scalar(t, `sum(`+verifyCalls+`{`+verifyOutcome+`="`+contract.OutcomeSuccess+`"}) / sum(`+verifyCalls+`)`)
	verifyTotal := prom.scalar(t, `sum(`+verifyCalls+`)`)
	wantVerify := float64(truth.verifyOK) / float64(truth.verifyOK+truth.verifyFailed)
	if verifyTotal != float64(truth.verifyOK+truth.verifyFailed) || !promNear(verifyFrac, wantVerify) {
		t.Errorf("verify from counters: rate %v over %v calls; rollouts.jsonl: %d completed, %d failed (rate %v)",
			verifyFrac, verifyTotal, truth.verifyOK, truth.verifyFailed, wantVerify)
	}
	t.Logf("verify success rate from counters = %v over %v calls (rollouts.jsonl: %v)", verifyFrac, verifyTotal, wantVerify)
	if got := prom.query(t, `count by (gym_server_type) (`+verifyCalls+`)`); len(got) != 1 || got[0].labels["gym_server_type"] != contract.ServerTypeResources {
		t.Errorf("%s comes from %v, want the resources server only", verifyCalls, got)
	}

	// gym_rollout_completed_total, from the agent only: one series per
	// outcome, counting every rollout of rollouts.jsonl and its failures.
	completed := promName(contract.RolloutCompleted)
	rolloutOutcome := promLabel(contract.AttrRolloutOutcome)
	if completed != "gym_rollout_completed_total" {
		t.Errorf("the contract names the rollout counter %s in Prometheus, upstream gym_rollout_completed_total", completed)
	}
	byOutcome := map[string]float64{}
	for _, s := range prom.query(t, `sum by (gym_server_type, `+rolloutOutcome+`) (`+completed+`)`) {
		if s.labels["gym_server_type"] != contract.ServerTypeAgent {
			t.Errorf("%s from %v, want the agent only", completed, s.labels)
		}
		byOutcome[s.labels[rolloutOutcome]] += s.value
	}
	if len(byOutcome) != 2 || byOutcome[contract.OutcomeSuccess] != float64(truth.ok) ||
		byOutcome[contract.OutcomeFailure] != float64(truth.lines-truth.ok) {
		t.Errorf("%s by outcome = %v; rollouts.jsonl: %d completed, %d failed", completed, byOutcome, truth.ok, truth.lines-truth.ok)
	}
	t.Logf("%s by outcome = %v", completed, byOutcome)
	if got := prom.query(t, `{__name__="gym_rollout_calls_total"}`); len(got) != 0 {
		t.Errorf("the removed gym.rollout.calls is still exported: %v", got)
	}

	// Request latency has a series per route, from the server that serves it.
	wantRoutes := map[string]string{"/run": "responses_api_agents", "/verify": "resources_servers", "/v1/responses": "responses_api_models"}
	byRoute := map[string]string{}
	for _, s := range prom.query(t, `sum by (http_route, gym_server_type) (http_server_request_duration_seconds_count)`) {
		byRoute[s.labels["http_route"]] = s.labels["gym_server_type"]
		if s.labels["http_route"] == "/run" && s.value != float64(truth.lines) {
			t.Errorf("/run requests counted %v, want %d (one per rollout)", s.value, truth.lines)
		}
	}
	for route, typ := range wantRoutes {
		if byRoute[route] != typ {
			t.Errorf("http_server_request_duration_seconds_count for route %s: from %q, want %s (have %v)", route, byRoute[route], typ, byRoute)
		}
	}

	// target_info carries the resource; it agrees with the file_sd labels.
	for _, s := range prom.query(t, "target_info") {
		if s.labels["nemo_gym_server_name"] != s.labels["gym_server_name"] || s.labels["nemo_run_id"] != fl.runID ||
			s.labels["nemo_gym_server_type"] != s.labels["gym_server_type"] {
			t.Errorf("target_info disagrees with its target's labels: %v", s.labels)
		}
	}

	// The recording rules, loaded from the generated config, evaluate over
	// the real series. Batch B had no failing verification, so the 5 m rate
	// is 1 where the cumulative fraction above is not.
	truthB := truth.minus(truthA)
	for _, rule := range prom.rules(t) {
		if rule.Health != "ok" {
			t.Errorf("rule %s: health %q, error %q", rule.Name, rule.Health, rule.LastError)
		}
	}
	sel := `{gym_run_id="` + fl.runID + `"}`
	if got := prom.scalar(t, "gym:verify_success_rate:ratio_rate5m"+sel); !promNear(got, float64(truthB.verifyOK)/float64(truthB.verifyOK+truthB.verifyFailed)) {
		t.Errorf("gym:verify_success_rate:ratio_rate5m = %v; batch B: %+v", got, truthB)
	} else {
		t.Logf("gym:verify_success_rate:ratio_rate5m = %v (batch B: %d of %d verifications completed)", got, truthB.verifyOK, truthB.verifyOK+truthB.verifyFailed)
	}
	if got := prom.scalar(t, "gym:rollout_success_rate:ratio_rate5m"+sel); !promNear(got, float64(truthB.ok)/float64(truthB.lines)) {
		t.Errorf("gym:rollout_success_rate:ratio_rate5m = %v; batch B: %+v", got, truthB)
	}
	if got := prom.scalar(t, "gym:rollout_duration_ms:p95_5m"+sel); math.IsNaN(got) || got <= 0 || got > 10000 {
		t.Errorf("gym:rollout_duration_ms:p95_5m = %v, want a duration in ms", got)
	} else {
		t.Logf("gym:rollout_duration_ms:p95_5m = %v", got)
	}
	p95 := map[string]float64{}
	for _, s := range prom.query(t, "gym:http_server_request_duration_seconds:p95_5m"+sel) {
		p95[s.labels["http_route"]] = s.value
	}
	for route := range wantRoutes {
		if v, ok := p95[route]; !ok || math.IsNaN(v) || v <= 0 {
			t.Errorf("gym:http_server_request_duration_seconds:p95_5m for %s = %v (present %v); have %v", route, v, ok, p95)
		}
	}
	t.Logf("gym:http_server_request_duration_seconds:p95_5m = %v", p95)
	if a := prom.alerts(t, "GymServersBelowStarted"); len(a) != 0 {
		t.Errorf("GymServersBelowStarted is %s with every server up", a[0].State)
	}

	// A server dies: the orchestrator lowers the gauge and the alert
	// expression holds (pending, as `for` has not passed yet).
	if err := syscall.Kill(fl.pids["policy_model"], syscall.SIGKILL); err != nil {
		t.Fatalf("kill policy_model (pid %d): %v", fl.pids["policy_model"], err)
	}
	promWaitGauge(t, targets[0], serversActive, 3, 10*time.Second)
	prom.waitEvaluated(t, prom.waitScraped(t, time.Now(), 1, 20*time.Second), 20*time.Second)
	if got := prom.scalar(t, serversActive); got != 3 {
		t.Errorf("%s after a server died = %v, want 3", serversActive, got)
	}
	alerts := prom.alerts(t, "GymServersBelowStarted")
	if len(alerts) != 1 || alerts[0].Labels["gym_run_id"] != fl.runID || (alerts[0].State != "pending" && alerts[0].State != "firing") {
		t.Errorf("GymServersBelowStarted after a server died: %+v, want one pending alert for run %s", alerts, fl.runID)
	} else {
		t.Logf("GymServersBelowStarted: %s, value %s", alerts[0].State, alerts[0].Value)
	}
	t.Logf("done after %s", time.Since(testStart).Round(time.Millisecond))
}

// ---- the fleet ----

type promFleetProc struct {
	runID, runDir, agentURL string
	pids                    map[string]int
}

// startPromFleet starts `gymlens env start` with the prometheus exporter and
// waits (bounded) for its start-up report; startEnv's cleanup stops it.
func startPromFleet(t *testing.T, runs, cfgPath string) promFleetProc {
	t.Helper()
	e := startEnv(t, gymEnv("NEMO_GYM_OTEL_ENABLED=1", "NEMO_GYM_OTEL_EXPORTER=prometheus",
		// The orchestrator's own endpoint on a free port, never 9464.
		"NEMO_GYM_OTEL_PROMETHEUS_ADDR=127.0.0.1:0"), 4, "--config", cfgPath, "--runs-dir", runs)
	fl := promFleetProc{runID: e.runID, runDir: e.runDir, pids: map[string]int{}}
	for name, s := range e.servers {
		fl.pids[name] = s.pid
		if s.typ == contract.ServerTypeAgent {
			fl.agentURL = s.url
		}
	}
	if fl.agentURL == "" {
		t.Fatalf("no agent among the servers reported: %v", e.servers)
	}
	return fl
}

type promTarget struct {
	Targets []string          `json:"targets"`
	Labels  map[string]string `json:"labels"`
}

func readPromTargets(t *testing.T, path string) []promTarget {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var tg []promTarget
	if err := json.Unmarshal(b, &tg); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	for _, g := range tg {
		if len(g.Targets) != 1 {
			t.Fatalf("%s: want one target per process, got %+v", path, g)
		}
	}
	return tg
}

// promLE parses an le label ("+Inf" included) for sorting.
func promLE(s string) float64 {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return math.NaN()
	}
	return f
}

// promLintExempt are the promtool lint findings accepted on a scrape:
// NeMo Gym names its duration histograms *_duration_ms (and others *_ms)
// with unit ms, and the exporter appends _milliseconds. Renaming them
// would break drop-in compatibility with NeMo Gym dashboards, so those
// two findings are accepted for every NeMo Gym instrument whose name
// carries its unit. The Go runtime instrumentation's go.goroutine.count
// (a semantic-convention name, an up-down counter) draws the _count
// finding; it is not gymlens's to rename either. Nothing else is
// accepted.
func promLintExempt() []string {
	out := []string{`go_goroutine_count non-histogram and non-summary metrics should not have "_count" suffix`}
	for _, in := range contract.Instruments() {
		if in.Unit != "ms" || (in.Source != contract.SourceGym && in.Source != contract.SourceGymNewer) {
			continue
		}
		name := in.PrometheusName()
		out = append(out, name+" metric names should not contain abbreviated units",
			name+` use base unit "seconds" instead of "milliseconds"`)
	}
	return out
}

// promCheckScrape feeds one raw /metrics page to `promtool check metrics`.
// Every page must pass, apart from the exempt findings.
func promCheckScrape(t *testing.T, promtool string, tg promTarget) {
	t.Helper()
	page := promFetch(t, "http://"+tg.Targets[0]+"/metrics")
	out, code := runPromtool(t, promtool, page, "check", "metrics")
	name := tg.Labels["gym_server_name"]
	switch {
	case code == 0:
		return
	case code == 3:
		exempt := promLintExempt()
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if !slices.Contains(exempt, strings.TrimSpace(l)) {
				t.Errorf("promtool check metrics on %s: %s", name, l)
			}
		}
	default:
		t.Errorf("promtool check metrics on %s: exit %d\n%s\npage:\n%s", name, code, out, page)
	}
}

// promCollect runs rows through the agent with `gymlens rollouts collect`,
// appending to output. One attempt per rollout, so every counter counts
// each rollout once.
func promCollect(t *testing.T, agentURL, input, output string, rows []protocol.RunRequest) {
	t.Helper()
	f, err := os.Create(input)
	if err != nil {
		t.Fatal(err)
	}
	if err := dataset.WriteRows(f, rows); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	res := runGym(t, 30*time.Second, gymEnv("NEMO_GYM_MAX_ROLLOUT_ATTEMPTS=1"), "rollouts", "collect",
		"--input", input, "--output", output, "--resume", "--agent-url", agentURL, "--concurrency", "4")
	// A failed rollout makes the command exit 1: that is expected here.
	if res.err != nil && !strings.Contains(res.stderr, "rollouts failed") {
		t.Fatalf("gymlens rollouts collect: %v\nstdout:\n%s\nstderr:\n%s", res.err, res.stdout, res.stderr)
	}
}

// promTruth is what rollouts.jsonl and its failures file say happened.
type promTruth struct {
	lines, ok              int
	verifyOK, verifyFailed int
}

func promReadTruth(t *testing.T, path string) promTruth {
	t.Helper()
	var tr promTruth
	for _, file := range []string{path, rollout.FailuresPath(path)} {
		b, err := os.ReadFile(file)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if l == "" {
				continue
			}
			var r struct {
				Error string `json:"_ng_failure_message"`
			}
			if err := json.Unmarshal([]byte(l), &r); err != nil {
				t.Fatalf("%s: %v: %q", file, err, l)
			}
			tr.add(r.Error, file != path)
		}
	}
	return tr
}

// add counts one rollout. A verification succeeded when it completed,
// whatever the reward. One that failed reached the verifier and errored
// (the agent's 500 names the verify call); a rollout whose model call
// failed never reached it and counts for neither.
func (tr *promTruth) add(errText string, failed bool) {
	tr.lines++
	switch {
	case !failed:
		tr.ok++
		tr.verifyOK++
	case strings.Contains(errText, "verify: "):
		tr.verifyFailed++
	}
}

// minus is what happened since earlier was read: the rollouts of a later
// batch collected into the same files.
func (tr promTruth) minus(earlier promTruth) promTruth {
	return promTruth{
		lines: tr.lines - earlier.lines, ok: tr.ok - earlier.ok,
		verifyOK: tr.verifyOK - earlier.verifyOK, verifyFailed: tr.verifyFailed - earlier.verifyFailed,
	}
}

// promWaitGauge polls a process's /metrics until the gauge is want.
func promWaitGauge(t *testing.T, tg promTarget, gauge string, want float64, bound time.Duration) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		page := promFetch(t, "http://"+tg.Targets[0]+"/metrics")
		for _, l := range strings.Split(page, "\n") {
			if strings.HasPrefix(l, gauge+" ") || strings.HasPrefix(l, gauge+"{") {
				f := strings.Fields(l)
				if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil && v == want {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not become %v within %s:\n%s", gauge, want, bound, page)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ---- Prometheus ----

type promServer struct {
	base   string
	client *http.Client
	log    *lineLog
}

// startPrometheus runs a Prometheus 2.x on a free loopback port and waits
// (bounded) until it is ready. Cleanup stops it by PID.
func startPrometheus(t *testing.T, bin, config, storage string) *promServer {
	t.Helper()
	addr := servertest.FreeAddr(t)
	cmd := exec.Command(bin, "--config.file="+config, "--storage.tsdb.path="+storage,
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := &promServer{base: "http://" + addr, client: &http.Client{Timeout: 5 * time.Second}, log: &lineLog{}}
	cmd.Stdout, cmd.Stderr = p.log, p.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		if t.Failed() {
			t.Logf("prometheus log (tail):\n%s", tail(p.log.String(), 30))
		}
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		res, err := p.client.Get(p.base + "/-/ready")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return p
			}
		}
		select {
		case err := <-done:
			done <- err
			t.Fatalf("prometheus exited: %v\n%s", err, p.log.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready within 15 s\n%s", p.log.String())
		}
	}
}

// api GETs one endpoint of the HTTP API and decodes its data field.
func (p *promServer) api(t *testing.T, path string, params url.Values, data any) {
	t.Helper()
	u := p.base + path
	if params != nil {
		u += "?" + params.Encode()
	}
	res, err := p.client.Get(u)
	if err != nil {
		t.Fatalf("prometheus %s: %v", path, err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	var env struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil || env.Status != "success" {
		t.Fatalf("prometheus %s %v: status %d %s %v\n%s", path, params, res.StatusCode, env.Error, err, body)
	}
	if err := json.Unmarshal(env.Data, data); err != nil {
		t.Fatalf("prometheus %s: %v\n%s", path, err, env.Data)
	}
}

type promSample struct {
	labels map[string]string
	value  float64
}

// query runs an instant query that must return a vector.
func (p *promServer) query(t *testing.T, expr string) []promSample {
	t.Helper()
	var data struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		} `json:"result"`
	}
	p.api(t, "/api/v1/query", url.Values{"query": {expr}}, &data)
	if data.ResultType != "vector" {
		t.Fatalf("query %s: result type %q, want vector", expr, data.ResultType)
	}
	var out []promSample
	for _, r := range data.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("query %s: value %v: %v", expr, r.Value, err)
		}
		out = append(out, promSample{labels: r.Metric, value: v})
	}
	return out
}

// scalar runs a query that must return exactly one sample.
func (p *promServer) scalar(t *testing.T, expr string) float64 {
	t.Helper()
	res := p.query(t, expr)
	if len(res) != 1 {
		t.Fatalf("query %s: %d samples, want 1: %v", expr, len(res), res)
	}
	return res[0].value
}

type promRule struct {
	Name      string `json:"name"`
	Health    string `json:"health"`
	LastError string `json:"lastError"`
}

func (p *promServer) rules(t *testing.T) []promRule {
	t.Helper()
	var data struct {
		Groups []struct {
			Rules []promRule `json:"rules"`
		} `json:"groups"`
	}
	p.api(t, "/api/v1/rules", nil, &data)
	var out []promRule
	for _, g := range data.Groups {
		out = append(out, g.Rules...)
	}
	if len(out) == 0 {
		t.Fatal("prometheus loaded no rules from the generated configuration")
	}
	return out
}

type promAlert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"`
	Value  string            `json:"value"`
}

func (p *promServer) alerts(t *testing.T, name string) []promAlert {
	t.Helper()
	var data struct {
		Alerts []promAlert `json:"alerts"`
	}
	p.api(t, "/api/v1/alerts", nil, &data)
	var out []promAlert
	for _, a := range data.Alerts {
		if a.Labels["alertname"] == name {
			out = append(out, a)
		}
	}
	return out
}

// waitScraped waits until at least n targets are up and every up target
// was last scraped (the scrape started) after since. It returns the
// latest scrape time.
func (p *promServer) waitScraped(t *testing.T, since time.Time, n int, bound time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		var data struct {
			ActiveTargets []struct {
				Labels     map[string]string `json:"labels"`
				Health     string            `json:"health"`
				LastScrape time.Time         `json:"lastScrape"`
				LastError  string            `json:"lastError"`
			} `json:"activeTargets"`
		}
		p.api(t, "/api/v1/targets", url.Values{"state": {"active"}}, &data)
		up, fresh := 0, true
		var latest time.Time
		var status []string
		for _, tg := range data.ActiveTargets {
			status = append(status, fmt.Sprintf("%s=%s@%s %s", tg.Labels["gym_server_name"], tg.Health,
				tg.LastScrape.Format("15:04:05.000"), tg.LastError))
			if tg.Health != "up" {
				continue
			}
			up++
			fresh = fresh && tg.LastScrape.After(since)
			if tg.LastScrape.After(latest) {
				latest = tg.LastScrape
			}
		}
		if up >= n && fresh {
			return latest
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus: want %d targets up and scraped after %s within %s; have %v",
				n, since.Format("15:04:05.000"), bound, status)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitEvaluated waits until every rule group was evaluated after since
// (plus a margin for the scrape to be stored).
func (p *promServer) waitEvaluated(t *testing.T, since time.Time, bound time.Duration) {
	t.Helper()
	since = since.Add(250 * time.Millisecond)
	deadline := time.Now().Add(bound)
	for {
		var data struct {
			Groups []struct {
				Name           string    `json:"name"`
				LastEvaluation time.Time `json:"lastEvaluation"`
			} `json:"groups"`
		}
		p.api(t, "/api/v1/rules", nil, &data)
		ok := len(data.Groups) > 0
		for _, g := range data.Groups {
			ok = ok && g.LastEvaluation.After(since)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus rule groups not evaluated after %s within %s: %+v", since.Format("15:04:05.000"), bound, data.Groups)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ---- small helpers ----

func mustPromtool(t *testing.T, promtool string, stdin []byte, args ...string) {
	t.Helper()
	if out, code := runPromtool(t, promtool, string(stdin), args...); code != 0 {
		t.Fatalf("promtool %s: exit %d\n%s", strings.Join(args, " "), code, out)
	}
}

// runPromtool runs promtool (bounded) and returns its combined output and
// exit code.
func runPromtool(t *testing.T, promtool, stdin string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.CommandContext(ctxT(t, 30*time.Second), promtool, args...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &ee) && ee.ExitCode() > 0:
		return string(out), ee.ExitCode()
	}
	t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	return "", -1
}

func promFetch(t *testing.T, u string) string {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	res, err := c.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", u, res.StatusCode, err)
	}
	return string(b)
}

func promNear(a, b float64) bool { return math.Abs(a-b) <= 1e-9 }

// promLabel is the Prometheus label name of an attribute key.
func promLabel(key string) string { return strings.ReplaceAll(key, ".", "_") }
