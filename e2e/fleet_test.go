package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
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

	"go.yaml.in/yaml/v3"

	"github.com/gymlens/gymlens/lens/telfile"
	"github.com/gymlens/gymlens/rollout"
)

// failingFleet makes the resources server panic on the first nine tasks of
// the built-in dataset, so some verifications (and their rollouts) fail.
const failingFleet = `
policy_api_key: sk-e2e-never-written
arithmetic:
  resources_servers:
    arithmetic: {domain: math, panic_on_task_prefix: "arith-00000"}
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

func TestGymRunOneTracePerRolloutAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, filepath.Join(dir, "fleet.yaml"), failingFleet)
	runs := filepath.Join(dir, "runs")
	const n = 30
	// One attempt per rollout, so the 9 failing rollouts are 9 verifications.
	res := runGym(t, 3*time.Minute, gymEnv("NEMO_GYM_MAX_ROLLOUT_ATTEMPTS=1"), "run", "--rollouts", "30", "--concurrency", "4",
		"--config", cfg, "--runs-dir", runs, "--quiet")
	// Failed rollouts make gymlens run exit 1, after the whole run.
	if code := exitCode(res.err); code != 1 || !strings.Contains(res.stderr, "9 rollouts failed after every attempt") {
		t.Fatalf("gymlens run: exit %d (%v), want 1 naming 9 failed rollouts\nstdout:\n%s\nstderr:\n%s", code, res.err, res.stdout, res.stderr)
	}
	for _, want := range []string{"rollouts        30 (9 failed)", "servers seen    5", "traces found"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("summary lacks %q:\n%s", want, res.stdout)
		}
	}
	run := runDir(t, runs)
	procs := readRun(t, run)
	for _, name := range []string{"orchestrator", "arithmetic", "policy_model", "simple_agent"} {
		if procs[name] == nil {
			t.Fatalf("no telemetry from %s; files: %v", name, names(procs))
		}
	}
	agent, model, res2 := procs["simple_agent"], procs["policy_model"], procs["arithmetic"]

	// Index every span by id, with the process that exported it.
	type owned struct {
		span *telfile.Span
		proc string
	}
	byID := map[string]owned{}
	for name, p := range procs {
		for _, s := range p.spans {
			byID[s.SpanID] = owned{s, name}
		}
	}

	// One trace per rollout, holding spans from all three servers.
	rolloutTraces := map[string]string{} // rollout id -> trace id
	for _, s := range agent.spans {
		if s.Name == "gym.rollout" {
			id, _ := s.Attributes["nemo.gym.rollout.id"].(string)
			if id == "" {
				t.Fatalf("gym.rollout span without nemo.gym.rollout.id: %+v", s)
			}
			rolloutTraces[id] = s.TraceID
			// The rest of the rollout's identity, as the live view names
			// it: task index, repeat and attempt (one attempt each here).
			task, repeat, _ := strings.Cut(id, "-")
			if got := fmt.Sprint(s.Attributes["nemo.gym.task.id"], "-", s.Attributes["nemo.gym.rollout.repeat"], "/", s.Attributes["nemo.gym.rollout.attempt"]); got != task+"-"+repeat+"/0" {
				t.Errorf("gym.rollout span of %s: task.id-repeat/attempt %s, want %s-%s/0", id, got, task, repeat)
			}
		}
	}
	if len(rolloutTraces) != n {
		t.Fatalf("%d gym.rollout spans, want %d", len(rolloutTraces), n)
	}
	distinct := map[string]bool{}
	for _, tr := range rolloutTraces {
		distinct[tr] = true
	}
	if len(distinct) != n {
		t.Fatalf("%d rollouts share %d traces; want one trace each", n, len(distinct))
	}
	// The model and resources servers label their spans with the rollout id
	// they received as baggage.
	traceRollout := map[string]string{}
	for id, tr := range rolloutTraces {
		traceRollout[tr] = id
	}
	for _, p := range []*procData{model, res2} {
		for _, s := range p.spans {
			if s.Name != "gym.verify" && s.Name != "gym.model.responses" {
				continue
			}
			if got, _ := s.Attributes["nemo.gym.rollout.id"].(string); got == "" || got != traceRollout[s.TraceID] {
				t.Errorf("%s span: nemo.gym.rollout.id %q, want %q", s.Name, got, traceRollout[s.TraceID])
			}
		}
	}
	// The id is upstream's ("<task index>-<rollout index>"), on every span
	// of the rollout's trace in every process, and the agent's calls carry
	// it in their path (/ng-rollout/<id>/...): telemetry is exporting.
	upstreamID := regexp.MustCompile(`^[0-9]+-[0-9]+(-a[0-9]+)?$`)
	inRollout, prefixed := map[string]int{}, 0
	for name, p := range procs {
		for _, s := range p.spans {
			want, ok := traceRollout[s.TraceID]
			if !ok {
				continue // the job's trace
			}
			inRollout[name]++
			if !upstreamID.MatchString(want) {
				t.Fatalf("rollout id %q is not upstream's <task>-<rollout>", want)
			}
			if got, _ := s.Attributes["nemo.gym.rollout.id"].(string); got != want {
				t.Errorf("%s span %q (%v): nemo.gym.rollout.id %q, want %q", name, s.Name, s.Kind, got, want)
			}
			if name == "simple_agent" && s.Kind == telfile.KindClient {
				if full, _ := s.Attributes["url.full"].(string); !strings.Contains(full, "/ng-rollout/"+want+"/") {
					t.Errorf("agent CLIENT span url.full %q lacks /ng-rollout/%s/", full, want)
				} else {
					prefixed++
				}
			}
		}
	}
	for _, name := range []string{"orchestrator", "arithmetic", "policy_model", "simple_agent"} {
		if inRollout[name] == 0 {
			t.Errorf("no span of %s in a rollout's trace (%v)", name, inRollout)
		}
	}
	// Per rollout: seed_session, the model call, verify.
	if prefixed < 3*n {
		t.Errorf("%d prefixed agent CLIENT spans, want at least %d", prefixed, 3*n)
	}
	// Each rollout's trace links back to the collection's gym.job span, and
	// the run directory keeps the link.
	var jobSpan *telfile.Span
	for _, sp := range procs["orchestrator"].spans {
		if sp.Name == "gym.job" {
			jobSpan = sp
		}
	}
	if jobSpan == nil {
		t.Fatal("no gym.job span in the orchestrator's file")
	}
	linked := 0
	for _, sp := range procs["orchestrator"].spans {
		if sp.Kind == telfile.KindClient && len(sp.Links) == 1 && sp.Links[0].SpanID == jobSpan.SpanID && sp.Links[0].TraceID == jobSpan.TraceID {
			linked++
		}
	}
	if linked != n {
		t.Errorf("%d rollout CLIENT spans link to gym.job, want %d", linked, n)
	}
	procsInTrace := map[string]map[string]bool{}
	for name, p := range procs {
		for _, s := range p.spans {
			if procsInTrace[s.TraceID] == nil {
				procsInTrace[s.TraceID] = map[string]bool{}
			}
			procsInTrace[s.TraceID][name] = true
		}
	}
	for id, trace := range rolloutTraces {
		for _, want := range []string{"simple_agent", "policy_model", "arithmetic"} {
			if !procsInTrace[trace][want] {
				t.Errorf("rollout %s: trace %s has no span from %s (has %v)", id, trace, want, procsInTrace[trace])
			}
		}
	}

	// Every SERVER span of the model and resources servers hangs off the
	// agent's CLIENT span for that call.
	checked := 0
	for _, p := range []*procData{model, res2} {
		for _, s := range p.spans {
			if s.Kind != telfile.KindServer {
				continue
			}
			parent, ok := byID[s.ParentSpanID]
			if !ok {
				t.Errorf("%s SERVER span %s: parent %s never exported", p.serverType(), s.Name, s.ParentSpanID)
				continue
			}
			if parent.span.Kind != telfile.KindClient || parent.proc != "simple_agent" || parent.span.TraceID != s.TraceID || !s.ParentRemote {
				t.Errorf("SERVER span %s: parent is %s span %q in %s", s.Name, parent.span.Kind, parent.span.Name, parent.proc)
			}
			checked++
		}
	}
	if checked < 2*n {
		t.Errorf("checked %d SERVER spans, want at least %d", checked, 2*n)
	}

	// gym.servers.active: only the orchestrator writes it, and it shows
	// the four servers (three and the agent's relay) once started and 0
	// after shutdown.
	for name, p := range procs {
		if vals := p.metricValues("gym.servers.active"); len(vals) > 0 && name != "orchestrator" {
			t.Errorf("%s exported gym.servers.active %v", name, vals)
		}
	}
	vals := procs["orchestrator"].metricValues("gym.servers.active")
	if len(vals) < 2 || vals[0] != 4 || vals[len(vals)-1] != 0 {
		t.Errorf("orchestrator gym.servers.active over time = %v, want 4 first and 0 last", vals)
	}

	// Verify counts match the rollouts: 9 panicking verifications, 21 that
	// completed (right or wrong answers alike).
	calls := res2.counterByOutcome("gym.verify.calls", "nemo.gym.verify.outcome")
	if calls["success"] != n-9 || calls["failure"] != 9 {
		t.Errorf("gym.verify.calls = %v, want success %d failure 9", calls, n-9)
	}
	if got := res2.histogramCount("gym.verify.duration_ms"); got != n {
		t.Errorf("gym.verify.duration_ms count %d, want %d", got, n)
	}
	// Rollouts whose verification failed still have their duration.
	if got := agent.histogramCount("gym.rollout.duration_ms"); got != n {
		t.Errorf("gym.rollout.duration_ms count %d, want %d", got, n)
	}
	rcalls := agent.counterByOutcome("gym.rollout.completed_total", "nemo.gym.rollout.outcome")
	if rcalls["failure"] != 9 || rcalls["success"] != n-9 {
		t.Errorf("gym.rollout.completed_total = %v", rcalls)
	}
	// http.server.request.duration carries the route pattern.
	routes := map[string]bool{}
	for _, p := range procs {
		if m := p.lastMetric("http.server.request.duration"); m != nil {
			for _, pt := range m.Points {
				routes[pt.Attributes["http.route"].(string)] = true
			}
		}
	}
	for _, r := range []string{"/run", "/verify", "/v1/responses"} {
		if !routes[r] {
			t.Errorf("no http.server.request.duration for route %s (have %v)", r, routes)
		}
	}

	// rollouts.jsonl has a line per completed rollout, the failures file
	// one per failed rollout, with its error.
	lines := readLines(t, filepath.Join(run, "rollouts.jsonl"))
	fails := readObjects(t, filepath.Join(run, "rollouts_failures.jsonl"))
	for _, f := range fails {
		idx, _ := f["_ng_task_index"].(float64)
		msg, _ := f["_ng_failure_message"].(string)
		// The agent answers /run with 500 naming the verify call: upstream's
		// agent_run_error.
		if idx >= 9 || !strings.Contains(msg, "verify") || f["_ng_failure_class"] != rollout.FailureAgentRunError || f["_ng_failure_http_status"] != 500.0 {
			t.Errorf("failure line for task %v: class %v, status %v, error %q", f["_ng_task_index"], f["_ng_failure_class"], f["_ng_failure_http_status"], msg)
		}
	}
	if len(lines) != n-9 || len(fails) != 9 {
		t.Errorf("rollouts.jsonl: %d lines, failures: %d; want %d and 9", len(lines), len(fails), n-9)
	}
	// The run's config.yaml: the fleet's dict with the secret replaced.
	written, err := os.ReadFile(filepath.Join(run, "config.yaml"))
	if err != nil {
		t.Fatalf("effective config not written: %v", err)
	}
	if w := string(written); strings.Contains(w, "sk-e2e-never-written") || !strings.Contains(w, "policy_api_key:") ||
		!strings.Contains(w, "panic_on_task_prefix: arith-00000") || !strings.Contains(w, "head_server_url: http://") {
		t.Errorf("config.yaml is not the redacted fleet:\n%s", w)
	}
}

func TestGymRunInterruptedLeavesCompleteFiles(t *testing.T) {
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	cmd := exec.Command(gymBin, "run", "--rollouts", "100000", "--concurrency", "8",
		"--model-latency-ms", "5", "--runs-dir", runs)
	cmd.Env = gymEnv("OTEL_METRIC_EXPORT_INTERVAL=200")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out bytes.Buffer
	cmd.Stdout = &out
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	// Wait for the first progress line: rollouts are then in flight.
	progress := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		signalled := false
		for sc.Scan() {
			if !signalled && strings.Contains(sc.Text(), "fleet started") {
				signalled = true
				close(progress)
			}
		}
	}()
	select {
	case <-progress:
	case <-time.After(2 * time.Minute):
		t.Fatal("fleet never started")
	}
	// Interrupt once rollouts are being written (bounded wait; the run
	// prepares its 100 000 rows first).
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		files, _ := filepath.Glob(filepath.Join(runs, "*", "rollouts.jsonl"))
		if len(files) == 1 {
			if fi, err := os.Stat(files[0]); err == nil && fi.Size() > 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no rollout written within 2 minutes of the fleet's start")
		}
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("gymlens run did not stop after SIGINT")
	}
	if err == nil {
		t.Fatalf("interrupted run exited 0\n%s", out.String())
	}
	run := runDir(t, runs)
	procs := readRun(t, run) // fails on any truncated or corrupt line
	if len(procs) != 5 {
		t.Fatalf("telemetry from %v, want 5 processes (the orchestrator, three servers, the relay)", names(procs))
	}
	lines := readLines(t, filepath.Join(run, "rollouts.jsonl"))
	if len(lines) == 0 || len(lines) >= 100000 {
		t.Fatalf("%d rollouts written", len(lines))
	}
	for _, l := range lines {
		if !json.Valid([]byte(l)) {
			t.Fatalf("partial rollout line %q", l)
		}
	}
	// Each completed rollout's spans were flushed: the agent exported at
	// least one gym.rollout span per written rollout.
	rolloutSpans := 0
	for _, s := range procs["simple_agent"].spans {
		if s.Name == "POST /run" {
			rolloutSpans++
		}
	}
	if rolloutSpans < len(lines) {
		t.Errorf("%d /run SERVER spans for %d written rollouts", rolloutSpans, len(lines))
	}
	if !strings.Contains(out.String(), "rollouts") {
		t.Errorf("no summary after interrupt:\n%s", out.String())
	}
}

func TestEnvStartMalformedBodiesAre422AndNotCounted(t *testing.T) {
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	fleet := startEnv(t, gymEnv("NEMO_GYM_OTEL_ENABLED=1", "NEMO_GYM_OTEL_SPAN_GROUPS=all"), 4, "--runs-dir", runs)
	urls := fleet.urls()
	checkHeadServer(t, fleet.head, urls, fleet.runDir)

	post := func(url, body string) (int, string) {
		res, err := http.Post(url, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	good := `{"responses_create_params":{"input":[{"role":"user","content":"What is 1 + 1?"}]},"expected_answer":"2",` +
		`"response":{"id":"r","object":"response","created_at":1,"model":"m","output":[{"type":"message","id":"m1",` +
		`"role":"assistant","content":[{"type":"output_text","text":"2","annotations":[]}]}],` +
		`"parallel_tool_calls":true,"tool_choice":"auto","tools":[]}}`
	for body, want := range map[string]string{
		`{"responses_create_params": {"input": "q"`:                                              `"json_invalid"`,
		strings.Replace(good, `"expected_answer":"2"`, `"expected_answer":7`, 1):                 `"loc":["body","expected_answer"]`,
		strings.Replace(good, `"content":"What is 1 + 1?"}]}`, `"content":"q"}],"store2":1}`, 1): `"loc":["body","responses_create_params","store2"]`,
		strings.Replace(good, `"id":"m1",`, ``, 1):                                               `"loc":["body","response","output",0,"id"]`,
		``: `"json_invalid"`,
	} {
		code, got := post(urls["arithmetic"]+"/verify", body)
		if code != http.StatusUnprocessableEntity || !strings.Contains(got, want) {
			t.Errorf("POST /verify %q -> %d %s; want 422 naming %s", body, code, got, want)
		}
	}
	code, got := post(urls["arithmetic"]+"/verify", good)
	if code != http.StatusOK || !strings.Contains(got, `"reward":1`) {
		t.Fatalf("good /verify -> %d %s", code, got)
	}
	fleet.stop(t, time.Minute)
	procs := readRun(t, fleet.runDir)
	calls := procs["arithmetic"].counterByOutcome("gym.verify.calls", "nemo.gym.verify.outcome")
	if calls["success"] != 1 || calls["failure"] != 0 {
		t.Errorf("gym.verify.calls = %v after 5 malformed and 1 good request; want success 1, failure 0", calls)
	}
	statuses := map[string]int{}
	if m := procs["arithmetic"].lastMetric("http.server.request.duration"); m != nil {
		for _, pt := range m.Points {
			statuses[jsonString(pt.Attributes["http.response.status_code"])] += int(pt.Count)
		}
	}
	if statuses["422"] != 5 || statuses["200"] != 1 {
		t.Errorf("request durations by status %v, want 5x422 and 1x200", statuses)
	}
}

// checkHeadServer reads the head server the way NeMo Gym's clients do:
// the config dict as a JSON string holding YAML, whose server blocks say
// where each server runs, and the server list. The run directory's
// config.yaml names the head server too.
func checkHeadServer(t *testing.T, head string, urls map[string]string, run string) {
	t.Helper()
	get := func(path string) []byte {
		res, err := http.Get(head + path)
		if err != nil {
			t.Fatalf("GET %s%s: %v", head, path, err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s%s = %d %s", head, path, res.StatusCode, b)
		}
		return b
	}
	var text string
	if err := json.Unmarshal(get("/global_config_dict_yaml"), &text); err != nil {
		t.Fatalf("/global_config_dict_yaml is not a JSON string: %v", err)
	}
	var raw map[string]any
	if err := yaml.Unmarshal([]byte(text), &raw); err != nil {
		t.Fatalf("the dict is not YAML: %v\n%s", err, text)
	}
	found := 0
	for name := range urls {
		inst, _ := raw[name].(map[string]any)
		for _, v := range inst {
			impls, _ := v.(map[string]any)
			for _, block := range impls {
				b, _ := block.(map[string]any)
				found++
				if got := fmt.Sprintf("http://%v:%v", b["host"], b["port"]); got != urls[name] {
					t.Errorf("dict: %s at %s, env start printed %s", name, got, urls[name])
				}
			}
		}
	}
	if found != 4 {
		t.Errorf("dict has %d of the 4 servers (three and the agent's relay):\n%s", found, text)
	}
	var list []struct {
		ProcessName string `json:"process_name"`
		URL         string `json:"url"`
		PID         int    `json:"pid"`
	}
	if err := json.Unmarshal(get("/server_instances"), &list); err != nil || len(list) != 4 {
		t.Fatalf("/server_instances: %+v, %v", list, err)
	}
	for _, in := range list {
		if in.URL != urls[in.ProcessName] || in.PID <= 0 || !gymAlive(in.PID) {
			t.Errorf("/server_instances entry %+v, want url %s and a live pid", in, urls[in.ProcessName])
		}
	}
	cfg, err := os.ReadFile(filepath.Join(run, "config.yaml"))
	if err != nil || !strings.Contains(string(cfg), "head_server_url: "+head+"\n") {
		t.Errorf("config.yaml lacks head_server_url %s (%v):\n%s", head, err, cfg)
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}

// exitCode is the exit status err reports (0 for nil, -1 when it is not
// an exit).
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return strings.Trim(string(b), `"`)
}
