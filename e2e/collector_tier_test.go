package e2e

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gymlens/gymlens/contract"
)

// Environment of the collector-tier test: the binaries it runs, built by
// scripts/collector-tier.sh, which also sets requireTierVar so that a
// missing piece fails instead of skipping.
const (
	otelcolBinVar  = "GYMLENS_OTELCOL_BIN"
	jaegerBinVar   = "GYMLENS_JAEGER_BIN"
	requireTierVar = "GYMLENS_REQUIRE_COLLECTOR_TIER"
)

// tierFleet is multiHostFleet exporting over OTLP to each host's collector
// agent (OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4317: in each namespace, its own agent), with
// a resources server that fails every task whose id starts with
// arith-00000 (the first nine), so some rollouts fail.
const tierFleet = `
head_server: {host: HOST1, port: 11000}
policy_api_key: sk-e2e-never-written
arithmetic:
  resources_servers:
    arithmetic: {domain: math, host: HOST3, port: 12001, panic_on_task_prefix: arith-00000}
policy_model:
  responses_api_models:
    policy_model: {host: HOST2, port: 12002}
simple_agent:
  responses_api_agents:
    simple_agent: {}
telemetry:
  enabled: true
  exporter: otlp
`

// tierKeepPercent is the gateway's share of successful rollouts kept.
const tierKeepPercent = 25

// TestCollectorTierAcrossHosts runs the deployment of
// deploy/otel-collector/ on four simulated hosts: the head (orchestrator,
// agent), host 2 (model server), host 3 (resources server), each with a
// collector agent, and an observability host with the gateway, Jaeger and
// Prometheus. It checks that every kept rollout is one trace across the
// three fleet hosts with CLIENT -> SERVER hops, that tail sampling kept
// every failed rollout and a share of the others near the configured one,
// and that gym_servers_active reaches Prometheus through the tier.
func TestCollectorTierAcrossHosts(t *testing.T) {
	tr := startTier(t, tierOptions{keepPercent: tierKeepPercent, prometheus: true, decisionWait: "3s"})
	head, obs := tr.head, tr.obs
	dir, service, obsClient := tr.dir, tr.service, tr.obsClient
	cfg := tr.fleetConfig(t)
	fleetEnv := []string{"NEMO_GYM_MAX_ROLLOUT_ATTEMPTS=1", "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4317", "OTEL_BSP_SCHEDULE_DELAY=200", "OTEL_METRIC_EXPORT_INTERVAL=1000"}
	model, res := tr.join(fleetEnv)
	const rollouts, failing = 160, 9
	run := service(head, "gymlens run", fleetEnv, gymBin, "run", "--config", cfg, "--rollouts", strconv.Itoa(rollouts),
		"--concurrency", "4", "--runs-dir", filepath.Join(dir, "runs"), "--quiet")
	run.wait(t, 4*time.Minute) // exit 1 is expected: nine rollouts fail
	if n := countLines(filepath.Join(runDir(t, filepath.Join(dir, "runs")), "rollouts.jsonl")); n != rollouts-failing {
		t.Fatalf("rollouts.jsonl has %d lines, want %d\nstderr:\n%s", n, rollouts-failing, tail(run.stderr.String(), 30))
	}
	runID := filepath.Base(runDir(t, filepath.Join(dir, "runs")))
	for _, p := range []*gymProc{model, res} {
		p.wait(t, 45*time.Second)
	}

	// Jaeger: the traces the gateway kept, after its decision wait.
	var kept map[string]*tierTrace
	var lastErr error
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("Jaeger: %d rollout traces, %d failed (last error: %v); services: %s", len(kept), countFailed(kept), lastErr,
				httpBody(obsClient, "http://127.0.0.1:16686/api/services"))
		}
	})
	// Settled: the count has not moved for longer than the gateway's
	// decision wait plus the agents' batching (the servers leave the
	// moment the run stops, so the last decisions are still seconds away
	// here; two equal polls 200 ms apart are not enough).
	const quiet = 5 * time.Second
	var changed time.Time
	waitFor(t, time.Minute, "the kept traces to settle in Jaeger", func() bool {
		got, err := jaegerRollouts(obsClient, "http://127.0.0.1:16686", runID)
		if lastErr = err; err != nil {
			return false
		}
		if kept == nil || len(got) != len(kept) {
			changed = time.Now()
		}
		kept = got
		return time.Since(changed) >= quiet && countFailed(kept) >= failing
	})
	failed := countFailed(kept)
	succeeded := len(kept) - failed
	if failed != failing {
		t.Errorf("%d failed rollouts in Jaeger, want every one of the %d", failed, failing)
	}
	// The share of the others: binomial, so within 4 standard deviations.
	n, p := float64(rollouts-failing), tierKeepPercent/100.0
	mean, sd := n*p, math.Sqrt(n*p*(1-p))
	if math.Abs(float64(succeeded)-mean) > 4*sd {
		t.Errorf("%d successful rollouts kept of %d, want %.0f ± %.0f (%d %%)", succeeded, rollouts-failing, mean, 4*sd, tierKeepPercent)
	}
	t.Logf("tail sampling kept %d of %d failed and %d of %d other rollouts (expected %.1f ± %.1f at 4 sd)",
		failed, failing, succeeded, rollouts-failing, mean, 4*sd)
	for id, tr := range kept {
		if problems := tr.hopProblems(); len(problems) > 0 {
			t.Errorf("trace %s: %s", id, strings.Join(problems, "; "))
		}
	}

	// Prometheus: the orchestrator's gauge, through agent and gateway.
	t.Cleanup(func() {
		if t.Failed() {
			var lines []string
			for _, l := range strings.Split(httpBody(obsClient, "http://127.0.0.1:8889/metrics"), "\n") {
				if strings.Contains(l, "servers_active") {
					lines = append(lines, l)
				}
			}
			t.Logf("gateway /metrics, servers_active lines: %q", lines)
		}
	})
	// The run lasted seconds, so only that its series arrived is asserted
	// here; the values are checked on the long-lived fleet below.
	waitFor(t, time.Minute, "the run's gym_servers_active to reach Prometheus", func() bool {
		_, ok := promValue(obsClient, fmt.Sprintf(`gym_servers_active{nemo_run_id=%q}`, runID))
		return ok
	})

	// gymlens report from the backends (the fleet exported nothing to files),
	// with the head's run directory for the rollouts.
	headRun := runDir(t, filepath.Join(dir, "runs"))
	rep := service(obs, "gymlens report", nil, gymBin, "report", "--jaeger", "http://127.0.0.1:16686",
		"--prometheus", "http://127.0.0.1:9090", "--run-id", runID, "--slowest", "3", headRun)
	if code := rep.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("gymlens report from the backends exited %d:\n%s", code, tail(rep.stderr.String(), 20))
	}
	out := rep.stdout.String()
	for _, want := range []string{
		// The rollouts file's counts, and the agents' own count from
		// Prometheus, agree.
		fmt.Sprintf("rollouts   %d (%d in rollouts.jsonl, %d in rollouts_failures.jsonl): %d failed", rollouts, rollouts-failing, failing, failing),
		fmt.Sprintf("agents counted %d failed of %d (gym.rollout.completed_total)", failing, rollouts),
		"Processes seen: 5", // the orchestrator, three servers, the agent's relay
		fmt.Sprintf("histogram gym.rollout.duration_ms: %d values at the last export", rollouts),
		fmt.Sprintf("arithmetic  %d of %d completed", rollouts-failing, rollouts),
		"HTTP server requests", "Active servers", "Slowest rollouts: 3",
		"Problems\n  none found",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("gymlens report from the backends lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("gymlens report from the backends:\n%s\nstderr:\n%s", out, rep.stderr.String())
	}

	// Host 3's server killed under gymlens env start: the gauge drops to 3.
	envModel, envRes := tr.join(fleetEnv)
	fleet := service(head, "gymlens env start", fleetEnv, gymBin, "env", "start", "--config", cfg, "--runs-dir", filepath.Join(dir, "env-runs"))
	waitFor(t, 2*time.Minute, "the second fleet to start", func() bool {
		return strings.Contains(fleet.stdout.String(), "on another host") && strings.Count(fleet.stdout.String(), "\n") >= 5
	})
	envRunID := strings.Fields(fleet.stdout.String())[1]
	waitFor(t, time.Minute, "gym_servers_active = 4 in Prometheus (three servers and the agent's relay)", func() bool {
		v, ok := promValue(obsClient, fmt.Sprintf(`gym_servers_active{nemo_run_id=%q}`, envRunID))
		return ok && v == 4
	})
	if err := syscall.Kill(envRes.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "gym_servers_active = 3 in Prometheus after host 3's server died", func() bool {
		v, ok := promValue(obsClient, fmt.Sprintf(`gym_servers_active{nemo_run_id=%q}`, envRunID))
		return ok && v == 3
	})
	_ = fleet.cmd.Process.Signal(syscall.SIGTERM)
	fleet.wait(t, time.Minute)
	envModel.wait(t, 45*time.Second)
}

// TestTailSamplingKeepsSlowRollouts checks the gateway's other rule: with
// no share of the rest kept, exactly the failed rollouts and the slow ones
// reach Jaeger. Tasks 1-9 fail (panic_on_task_prefix) and tasks 10-19 wait
// 500 ms in verification (delay_on_task_prefix), twice the 250 ms
// threshold; the others take milliseconds.
func TestTailSamplingKeepsSlowRollouts(t *testing.T) {
	tr := startTier(t, tierOptions{keepPercent: 0, slowMS: 250, decisionWait: "3s"})
	cfg := tr.fleetConfig(t, "panic_on_task_prefix: arith-00000", "panic_on_task_prefix: arith-00000, delay_on_task_prefix: arith-00001, delay_ms: 500")
	env := []string{"NEMO_GYM_MAX_ROLLOUT_ATTEMPTS=1", "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4317", "OTEL_BSP_SCHEDULE_DELAY=200"}
	tr.join(env)
	const rollouts = 40
	run := tr.service(tr.head, "gymlens run", env, gymBin, "run", "--config", cfg, "--rollouts", strconv.Itoa(rollouts),
		"--concurrency", "4", "--runs-dir", filepath.Join(tr.dir, "runs"), "--quiet")
	run.wait(t, 4*time.Minute) // exit 1: nine rollouts fail
	runID := filepath.Base(runDir(t, filepath.Join(tr.dir, "runs")))
	// Rollout ids are "<task index>-<rollout index>"; task ids start at 1.
	want := map[string]string{}
	for i := range 19 {
		want[fmt.Sprintf("%d-0", i)] = map[bool]string{true: "failed", false: "slow"}[i < 9]
	}
	var kept map[string]bool
	waitFor(t, time.Minute, "Jaeger to hold the failed and the slow rollouts", func() bool {
		traces, err := jaegerRollouts(tr.obsClient, "http://127.0.0.1:16686", runID)
		if err != nil {
			return false
		}
		kept = map[string]bool{}
		for _, x := range traces {
			for i, s := range x.Spans {
				if s.OperationName == "gym.rollout" {
					kept[x.tag(i, "nemo.gym.rollout.id")] = true
				}
			}
		}
		return len(kept) >= len(want)
	})
	time.Sleep(4 * time.Second) // one more decision wait: nothing else may arrive
	traces, err := jaegerRollouts(tr.obsClient, "http://127.0.0.1:16686", runID)
	if err != nil {
		t.Fatal(err)
	}
	kept = map[string]bool{}
	for _, x := range traces {
		for i, s := range x.Spans {
			if s.OperationName == "gym.rollout" {
				kept[x.tag(i, "nemo.gym.rollout.id")] = true
			}
		}
	}
	for id, why := range want {
		if !kept[id] {
			t.Errorf("%s rollout %s not kept", why, id)
		}
	}
	for id := range kept {
		if want[id] == "" {
			t.Errorf("rollout %s kept, though neither failed nor slow (the share of the rest is 0)", id)
		}
	}
	t.Logf("kept %d rollouts of %d: the 9 failed and the 10 slow", len(kept), rollouts)
}

// tierOptions shape one collector tier.
type tierOptions struct {
	// keepPercent is the gateway's GYM_TAIL_KEEP_PERCENT; decisionWait its
	// GYM_TAIL_DECISION_WAIT.
	keepPercent  int
	decisionWait string
	// slowMS is GYM_TAIL_SLOW_MS; 0 leaves the configuration's default.
	slowMS int
	// prometheus adds Prometheus, scraping the gateway every second.
	prometheus bool
}

// tier is a running collector tier on four simulated hosts: the fleet's
// three (head, hostB, hostC), each with a collector agent, and obs with
// the gateway, Jaeger and, when asked, Prometheus.
type tier struct {
	head, hostB, hostC, obs labHost
	dir                     string
	obsClient               *http.Client
	// agents, gateway and jaeger are the tier's processes.
	agents          []*gymProc
	gateway, jaeger *gymProc
	service         func(h labHost, name string, env []string, argv ...string) *gymProc
}

// fleetConfig writes tierFleet for the tier's hosts, with each pair of
// edits (old, new) applied, and returns its path.
func (tr *tier) fleetConfig(t *testing.T, edits ...string) string {
	t.Helper()
	r := strings.NewReplacer(append([]string{"HOST1", tr.head.ip, "HOST2", tr.hostB.ip, "HOST3", tr.hostC.ip}, edits...)...)
	return writeFile(t, filepath.Join(tr.dir, "fleet.yaml"), r.Replace(tierFleet))
}

// join starts the model server on hostB and the resources server on
// hostC with `gymlens serve --head`, each with env.
func (tr *tier) join(env []string) (model, resources *gymProc) {
	headURL := "http://" + tr.head.ip + ":11000"
	start := func(h labHost, name string) *gymProc {
		return tr.service(h, name, env, gymBin, "serve", "--head", headURL, "--name", name, "--runs-dir", filepath.Join(tr.dir, name))
	}
	return start(tr.hostB, "policy_model"), start(tr.hostC, "arithmetic")
}

// startTier starts a tier, skipping (or, under scripts/collector-tier.sh,
// failing) the test when its binaries are not there.
func startTier(t *testing.T, o tierOptions) *tier {
	t.Helper()
	otelcol, jaeger := os.Getenv(otelcolBinVar), os.Getenv(jaegerBinVar)
	prometheus, promErr := exec.LookPath("prometheus")
	if otelcol == "" || jaeger == "" || o.prometheus && promErr != nil {
		msg := fmt.Sprintf("the collector tier needs $%s, $%s and prometheus on PATH; scripts/collector-tier.sh builds them and runs this test", otelcolBinVar, jaegerBinVar)
		if os.Getenv(requireTierVar) != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	lab := newNetLab(t, 4)
	tr := &tier{head: lab.hosts[0], hostB: lab.hosts[1], hostC: lab.hosts[2], obs: lab.hosts[3], dir: t.TempDir()}
	// The head binds a lab address, so every route of it wants the head
	// token: one for the whole tier, as a user would export it on every
	// host.
	base := gymEnv(contract.EnvHeadToken + "=e2e-tier-head-token-5c2d81f0")
	tr.service = func(h labHost, name string, env []string, argv ...string) *gymProc {
		p := startProc(t, append(base, env...), &lineLog{}, &lineLog{}, h.inNS(argv...)...)
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("%s (%s) stderr:\n%s", name, h.ns, tail(p.stderr.String(), 25))
			}
		})
		return p
	}
	// The observability host: Jaeger (OTLP on loopback only) and the
	// gateway in front of it.
	tr.jaeger = tr.service(tr.obs, "jaeger", []string{
		"JAEGER_OTLP_GRPC=127.0.0.1:14317", "JAEGER_OTLP_HTTP=127.0.0.1:14318",
		"JAEGER_QUERY_HTTP=127.0.0.1:16686", "JAEGER_QUERY_GRPC=127.0.0.1:16685",
	}, jaeger, "--config", filepath.Join(root, "tools", "jaeger", "config.yaml"))
	tr.gateway = tr.service(tr.obs, "gateway", []string{
		"GYM_GATEWAY_OTLP_GRPC=" + tr.obs.ip + ":4317", "GYM_JAEGER_OTLP=127.0.0.1:14317",
		"GYM_GATEWAY_PROMETHEUS=127.0.0.1:8889", fmt.Sprintf("GYM_TAIL_KEEP_PERCENT=%d", o.keepPercent),
		"GYM_TAIL_DECISION_WAIT=" + o.decisionWait, fmt.Sprintf("GYM_TAIL_SLOW_MS=%d", cmp.Or(o.slowMS, 30000)),
	}, otelcol, "--config", filepath.Join(root, "deploy", "otel-collector", "gateway.yaml"))
	ready := []string{"http://127.0.0.1:16686/api/services"}
	if o.prometheus {
		promCfg := writeFile(t, filepath.Join(tr.dir, "prometheus.yml"),
			"global: {scrape_interval: 1s}\nscrape_configs:\n  - job_name: gateway\n    static_configs: [{targets: ['127.0.0.1:8889']}]\n")
		tr.service(tr.obs, "prometheus", nil, prometheus, "--config.file="+promCfg, "--storage.tsdb.path="+filepath.Join(tr.dir, "tsdb"),
			"--web.listen-address=127.0.0.1:9090")
		ready = append(ready, "http://127.0.0.1:9090/-/ready")
	}
	// A collector agent on every fleet host.
	for _, h := range []labHost{tr.head, tr.hostB, tr.hostC} {
		tr.agents = append(tr.agents, tr.service(h, "agent", []string{"GYM_GATEWAYS=[" + tr.obs.ip + ":4317]"},
			otelcol, "--config", filepath.Join(root, "deploy", "otel-collector", "agent.yaml")))
	}
	tr.obsClient = tr.obs.client(10 * time.Second)
	waitFor(t, time.Minute, "the tier's backends to answer", func() bool {
		for _, u := range ready {
			if !httpOK(tr.obsClient, u) {
				return false
			}
		}
		return true
	})
	return tr
}

// httpOK reports whether GET url answers 200.
func httpOK(c *http.Client, url string) bool {
	res, err := c.Get(url)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode == http.StatusOK
}

// httpBody returns the body of GET url (at most 4 MiB), or the error.
func httpBody(c *http.Client, url string) string {
	res, err := c.Get(url)
	if err != nil {
		return err.Error()
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 4<<20))
	return string(b)
}

// promValue runs an instant query and returns its single value.
func promValue(c *http.Client, query string) (float64, bool) {
	res, err := c.Get("http://127.0.0.1:9090/api/v1/query?query=" + url.QueryEscape(query))
	if err != nil {
		return 0, false
	}
	defer res.Body.Close()
	var r struct {
		Data struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if json.NewDecoder(res.Body).Decode(&r) != nil || len(r.Data.Result) != 1 {
		return 0, false
	}
	s, _ := r.Data.Result[0].Value[1].(string)
	v, err := strconv.ParseFloat(s, 64)
	return v, err == nil
}

// tierTrace is one rollout's trace as Jaeger's query API returns it.
type tierTrace struct {
	TraceID string `json:"traceID"`
	Spans   []struct {
		SpanID        string `json:"spanID"`
		OperationName string `json:"operationName"`
		ProcessID     string `json:"processID"`
		References    []struct {
			RefType string `json:"refType"`
			SpanID  string `json:"spanID"`
		} `json:"references"`
		Tags []struct {
			Key   string `json:"key"`
			Value any    `json:"value"`
		} `json:"tags"`
	} `json:"spans"`
	Processes map[string]struct {
		ServiceName string `json:"serviceName"`
		Tags        []struct {
			Key   string `json:"key"`
			Value any    `json:"value"`
		} `json:"tags"`
	} `json:"processes"`
}

// tag returns span i's tag key, or "".
func (tr *tierTrace) tag(i int, key string) string {
	for _, kv := range tr.Spans[i].Tags {
		if kv.Key == key {
			return fmt.Sprint(kv.Value)
		}
	}
	return ""
}

// serverType is the nemo.gym.server.type of span i's process.
func (tr *tierTrace) serverType(i int) string {
	for _, kv := range tr.Processes[tr.Spans[i].ProcessID].Tags {
		if kv.Key == "nemo.gym.server.type" {
			return fmt.Sprint(kv.Value)
		}
	}
	return ""
}

// failed reports whether the rollout's gym.rollout span is in error.
func (tr *tierTrace) failed() bool {
	for i, s := range tr.Spans {
		if s.OperationName == "gym.rollout" && tr.tag(i, "otel.status_code") == "ERROR" {
			return true
		}
	}
	return false
}

// hopProblems checks the trace reaches the agent, the model server and the
// resources server, and that every SERVER span has a CLIENT parent in
// another process of the trace.
func (tr *tierTrace) hopProblems() []string {
	var out []string
	byID := map[string]int{}
	types := map[string]bool{}
	for i, s := range tr.Spans {
		byID[s.SpanID] = i
		types[tr.serverType(i)] = true
	}
	for _, want := range []string{"responses_api_agents", "responses_api_models", "resources_servers"} {
		if !types[want] {
			out = append(out, "no span from "+want)
		}
	}
	for i, s := range tr.Spans {
		if tr.tag(i, "span.kind") != "server" {
			continue
		}
		ok := false
		for _, ref := range s.References {
			if j, found := byID[ref.SpanID]; found && ref.RefType == "CHILD_OF" && tr.tag(j, "span.kind") == "client" && tr.Spans[j].ProcessID != s.ProcessID {
				ok = true
			}
		}
		if !ok {
			out = append(out, fmt.Sprintf("SERVER span %s (%s) has no CLIENT parent in another process", s.OperationName, tr.serverType(i)))
		}
	}
	return out
}

// jaegerRollouts returns the rollout traces (those with a gym.rollout span)
// of run runID that Jaeger holds, by trace id.
func jaegerRollouts(c *http.Client, base, runID string) (map[string]*tierTrace, error) {
	q := url.Values{"service": {"nemo-gym/simple_agent"}, "limit": {"5000"}, "lookback": {"1h"}}
	res, err := c.Get(base + "/api/traces?" + q.Encode())
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	var r struct {
		Data []*tierTrace `json:"data"`
	}
	if err := json.NewDecoder(res.Body).Decode(&r); err != nil {
		return nil, err
	}
	out := map[string]*tierTrace{}
	for _, tr := range r.Data {
		ofRun, rollout := false, false
		for _, p := range tr.Processes {
			for _, kv := range p.Tags {
				ofRun = ofRun || kv.Key == "nemo.run.id" && fmt.Sprint(kv.Value) == runID
			}
		}
		for _, s := range tr.Spans {
			rollout = rollout || s.OperationName == "gym.rollout"
		}
		if ofRun && rollout {
			out[tr.TraceID] = tr
		}
	}
	return out, nil
}

// countFailed counts the failed rollouts among traces.
func countFailed(traces map[string]*tierTrace) int {
	n := 0
	for _, tr := range traces {
		if tr.failed() {
			n++
		}
	}
	return n
}
