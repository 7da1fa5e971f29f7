package orchestrator_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.yaml.in/yaml/v3"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/dataset"
	"github.com/gymlens/gymlens/internal/testenv"
	"github.com/gymlens/gymlens/lens/telfile"
	"github.com/gymlens/gymlens/orchestrator"
	"github.com/gymlens/gymlens/protocol"
	"github.com/gymlens/gymlens/telemetry"
)

const serversActive = "gym.servers.active"

var httpClient = &http.Client{Timeout: 10 * time.Second}

// leftovers lists the live processes whose environment mentions runDir.
// Every child of a fleet carries its run directory in its telemetry file
// path, and whatever a child starts inherits that environment, so this
// finds strays however they came about.
func leftovers(runDir string) []int {
	marker := []byte(filepath.Join(runDir, "telemetry") + string(filepath.Separator))
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !bytes.Contains(env, marker) || !alive(pid) {
			continue
		}
		out = append(out, pid)
	}
	return out
}

// killLeftovers SIGKILLs whatever leftovers finds.
func killLeftovers(runDir string) {
	for _, pid := range leftovers(runDir) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// guardRunDir makes the end of the test kill every process started for
// runDir that is still running.
func guardRunDir(t *testing.T, runDir string) {
	t.Helper()
	t.Cleanup(func() { killLeftovers(runDir) })
}

// wantNoLeftovers fails when any process of runDir still runs.
func wantNoLeftovers(t *testing.T, runDir string) {
	t.Helper()
	// Re-parented grandchildren are reaped by init, not by the fleet:
	// give that a moment.
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := leftovers(runDir)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("processes of the fleet still running: %v", left)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func get(t *testing.T, url string) int {
	t.Helper()
	res, err := httpClient.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

// cmdline returns a process's arguments.
func cmdline(t *testing.T, pid int) []string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
}

// environ returns a process's environment.
func environ(t *testing.T, pid int) map[string]string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, kv := range strings.Split(string(b), "\x00") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	return env
}

// blockOf returns instance name's block in a config dict YAML.
func blockOf(t *testing.T, dictYAML, name string) map[string]any {
	t.Helper()
	var dict map[string]any
	if err := yaml.Unmarshal([]byte(dictYAML), &dict); err != nil {
		t.Fatalf("dict YAML: %v\n%s", err, dictYAML)
	}
	inst, _ := dict[name].(map[string]any)
	for _, typ := range inst {
		for _, block := range typ.(map[string]any) {
			return block.(map[string]any)
		}
	}
	t.Fatalf("no instance %q in the dict:\n%s", name, dictYAML)
	return nil
}

func noExitPending(t *testing.T, f *orchestrator.Fleet) {
	t.Helper()
	select {
	case ex := <-f.Exits():
		t.Errorf("unexpected exit reported: %+v", ex)
	default:
	}
}

func TestFleetStartHealthStop(t *testing.T) {
	testenv.ClearTelemetry(t)
	runDir := t.TempDir()
	guardRunDir(t, runDir)
	f := startFleet(t, orchestrator.DefaultConfig(), orchestrator.Options{RunDir: runDir})

	servers := f.Servers()
	// The built-in fleet's four: resources, model, agent and the
	// environment server in front of the agent.
	if len(servers) != 4 {
		t.Fatalf("Servers() = %+v, want 4", servers)
	}
	if n := f.Active(); n != 4 {
		t.Errorf("Active() = %d, want 4", n)
	}
	urls := map[string]string{}
	pids := map[int]bool{}
	for i, s := range servers {
		if !strings.HasPrefix(s.URL, "http://127.0.0.1:") {
			t.Errorf("%s: URL %q, want a loopback http URL", s.Spec.Name, s.URL)
		}
		if s.PID <= 0 || pids[s.PID] || s.PID == os.Getpid() {
			t.Errorf("%s: bad or repeated PID %d", s.Spec.Name, s.PID)
		}
		pids[s.PID] = true
		if s.Spec.Impl == "" || s.Spec.Type == "" {
			t.Errorf("%s: spec not filled in: %+v", s.Spec.Name, s.Spec)
		}
		// Agents start after the servers they call, and the environment
		// server fronting the agent after it.
		if s.Spec.Type == contract.ServerTypeAgent && i != len(servers)-2 {
			t.Errorf("agent %s started at position %d, want after its peers and before its environment server", s.Spec.Name, i)
		}
		if s.Spec.Type == contract.ServerTypeEnvironment && i != len(servers)-1 {
			t.Errorf("environment server %s started at position %d, before the agent it fronts", s.Spec.Name, i)
		}
		if got := f.URL(s.Spec.Name); got != s.URL {
			t.Errorf("URL(%q) = %q, want %q", s.Spec.Name, got, s.URL)
		}
		if pgid, err := syscall.Getpgid(s.PID); err != nil || pgid != s.PID {
			t.Errorf("%s: process group %d (%v), want its own (%d)", s.Spec.Name, pgid, err, s.PID)
		}
		if code := get(t, s.URL+"/health"); code != http.StatusOK {
			t.Errorf("GET %s/health = %d", s.URL, code)
		}
		urls[s.Spec.Name] = s.URL
	}
	if f.URL("nobody") != "" {
		t.Error("URL of an unknown server is not empty")
	}
	if f.AgentURL() != urls["simple_agent"] {
		t.Errorf("AgentURL() = %q, want %q", f.AgentURL(), urls["simple_agent"])
	}
	// Every child is `gymlens serve` with no arguments: the launch contract
	// tells it who it is and where its peers are.
	for _, s := range servers {
		if args := cmdline(t, s.PID); !slices.Equal(args, []string{gymBin, "serve"}) {
			t.Errorf("%s runs %q, want %q", s.Spec.Name, args, []string{gymBin, "serve"})
		}
		env := environ(t, s.PID)
		if env["NEMO_GYM_CONFIG_PATH"] != s.Spec.Name {
			t.Errorf("%s: NEMO_GYM_CONFIG_PATH = %q", s.Spec.Name, env["NEMO_GYM_CONFIG_PATH"])
		}
		if env["NEMO_GYM_CONFIG_DICT"] != string(f.ConfigYAML()) {
			t.Errorf("%s: NEMO_GYM_CONFIG_DICT is not the fleet's dict:\n%s", s.Spec.Name, env["NEMO_GYM_CONFIG_DICT"])
		}
		block := blockOf(t, env["NEMO_GYM_CONFIG_DICT"], s.Spec.Name)
		if got := fmt.Sprintf("http://%v:%v", block["host"], block["port"]); got != s.URL {
			t.Errorf("%s: the dict says %s, the server runs at %s", s.Spec.Name, got, s.URL)
		}
	}
	agent := blockOf(t, string(f.ConfigYAML()), "simple_agent")
	if ref, _ := agent["model_server"].(map[string]any); ref["name"] != "policy_model" {
		t.Errorf("agent model_server = %v", agent["model_server"])
	}

	if err := f.Stop(ctxFor(t, 30*time.Second)); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	for _, s := range servers {
		if !gone(s.PID) {
			t.Errorf("%s (pid %d) still exists after Stop", s.Spec.Name, s.PID)
		}
		if _, err := os.Stat(filepath.Join(runDir, "logs", s.Spec.Name+".log")); err != nil {
			t.Errorf("log of %s: %v", s.Spec.Name, err)
		}
	}
	if n := f.Active(); n != 0 {
		t.Errorf("Active() after Stop = %d", n)
	}
	if err := f.Stop(ctxFor(t, 5*time.Second)); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	// An orderly stop is not a death.
	noExitPending(t, f)
	wantNoLeftovers(t, runDir)
}

// orchestratorTelemetry initialises this process as the orchestrator, with
// a manual reader to read gym.servers.active from.
func orchestratorTelemetry(t *testing.T) *sdkmetric.ManualReader {
	t.Helper()
	t.Setenv("NEMO_GYM_OTEL_ENABLED", "1")
	t.Setenv("NEMO_GYM_OTEL_EXPORTER", "none")
	telemetry.ResetForTesting()
	t.Cleanup(telemetry.ResetForTesting)
	reader := sdkmetric.NewManualReader()
	h, err := telemetry.Init(telemetry.InitOptions{ServerName: "orchestrator", ServerType: contract.ServerTypeOrchestrator, MetricReader: reader})
	if err != nil || !h.MetricsExporting() {
		t.Fatalf("telemetry.Init: exporting=%v err=%v", h.MetricsExporting(), err)
	}
	return reader
}

// activeGauge collects the reader and returns gym.servers.active; ok is
// false when the metric was never recorded.
func activeGauge(t *testing.T, r *sdkmetric.ManualReader) (v int64, ok bool) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("collect: %v", err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != serversActive {
				continue
			}
			switch g := m.Data.(type) {
			case metricdata.Gauge[int64]:
				if len(g.DataPoints) == 1 {
					return g.DataPoints[0].Value, true
				}
			case metricdata.Gauge[float64]:
				if len(g.DataPoints) == 1 {
					return int64(g.DataPoints[0].Value), true
				}
			}
			t.Fatalf("%s: want a one-point gauge, got %T %+v", m.Name, m.Data, m.Data)
		}
	}
	return 0, false
}

func wantActive(t *testing.T, r *sdkmetric.ManualReader, want int64) {
	t.Helper()
	if v, ok := activeGauge(t, r); !ok || v != want {
		t.Errorf("%s = %d (recorded %v), want %d", serversActive, v, ok, want)
	}
}

func TestFleetServerDeathLowersActive(t *testing.T) {
	testenv.ClearTelemetry(t)
	reader := orchestratorTelemetry(t)
	runDir := t.TempDir()
	guardRunDir(t, runDir)
	// The children inherit this process's environment; keep them quiet.
	f := startFleet(t, orchestrator.DefaultConfig(), orchestrator.Options{
		RunDir: runDir, ExtraEnv: []string{"NEMO_GYM_OTEL_ENABLED=0"},
	})
	wantActive(t, reader, 4)

	var victim orchestrator.ServerInfo
	for _, s := range f.Servers() {
		if s.Spec.Name == "policy_model" {
			victim = s
		}
	}
	if victim.PID == 0 {
		t.Fatalf("no policy_model in %+v", f.Servers())
	}
	if err := syscall.Kill(victim.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case ex := <-f.Exits():
		if ex.Name != victim.Spec.Name || ex.PID != victim.PID {
			t.Errorf("exit of %s (pid %d), want %s (pid %d)", ex.Name, ex.PID, victim.Spec.Name, victim.PID)
		}
		if ex.Err == nil {
			t.Error("a SIGKILLed server exited without an error")
		} else if ee := (*exec.ExitError)(nil); !errors.As(ex.Err, &ee) {
			t.Errorf("exit error %T %v, want *exec.ExitError", ex.Err, ex.Err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no exit reported within 10 s of killing a server")
	}
	if n := f.Active(); n != 3 {
		t.Errorf("Active() = %d after one death, want 3", n)
	}
	wantActive(t, reader, 3)
	for _, s := range f.Servers() {
		if s.Spec.Name != victim.Spec.Name && get(t, s.URL+"/health") != http.StatusOK {
			t.Errorf("%s is not healthy after its neighbour died", s.Spec.Name)
		}
	}

	err := f.Stop(ctxFor(t, 30*time.Second))
	wantErr(t, err, `"policy_model"`)
	for _, name := range []string{"arithmetic", "simple_agent"} {
		if err != nil && strings.Contains(err.Error(), `"`+name+`"`) {
			t.Errorf("Stop blames %s, which stopped cleanly: %v", name, err)
		}
	}
	wantActive(t, reader, 0)
	if n := f.Active(); n != 0 {
		t.Errorf("Active() after Stop = %d", n)
	}
	for _, s := range f.Servers() {
		if !gone(s.PID) {
			t.Errorf("%s (pid %d) still exists after Stop", s.Spec.Name, s.PID)
		}
	}
	noExitPending(t, f)
}

func TestFleetStartFailureReportsStderr(t *testing.T) {
	testenv.ClearTelemetry(t)
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	guardRunDir(t, runDir)
	bin := writeScript(t, dir, "fake-gym", `echo $$ > "$PIDDIR/$NEMO_GYM_CONFIG_PATH.pid"
echo "starting $NEMO_GYM_CONFIG_PATH" >&2
echo "boom: cannot bind" >&2
exit 3
`)
	f, err := orchestrator.Start(ctxFor(t, 60*time.Second), orchestrator.DefaultConfig(), orchestrator.Options{
		Binary: bin, RunDir: runDir, Logger: testLogger(t), ExtraEnv: []string{"PIDDIR=" + dir},
	})
	if f != nil {
		t.Fatal("Start returned a fleet although every server failed")
	}
	wantErr(t, err, `"arithmetic"`, `"policy_model"`, "boom: cannot bind", "exit status 3")
	for _, name := range []string{"arithmetic", "policy_model"} {
		pid := readPID(t, filepath.Join(dir, name+".pid"))
		if pid == 0 {
			t.Errorf("%s never ran", name)
			continue
		}
		if !gone(pid) {
			killOnCleanup(t, pid)
			t.Errorf("%s (pid %d) still exists", name, pid)
		}
		log, err := os.ReadFile(filepath.Join(runDir, "logs", name+".log"))
		if err != nil || !bytes.Contains(log, []byte("boom: cannot bind")) {
			t.Errorf("log of %s = %q (%v), want the stderr line", name, log, err)
		}
	}
	// The agent waits for its peers: it must never have been started.
	if _, err := os.Stat(filepath.Join(dir, "simple_agent.pid")); err == nil {
		t.Error("the agent was started although its peers failed")
	}
	if strings.Contains(err.Error(), "simple_agent") {
		t.Errorf("error mentions the agent, which never started: %v", err)
	}
	wantNoLeftovers(t, runDir)
}

// A real server that fails takes the healthy ones down with it.
func TestFleetStartFailureStopsHealthyServers(t *testing.T) {
	testenv.ClearTelemetry(t)
	runDir := t.TempDir()
	guardRunDir(t, runDir)
	// A bad config never reaches a child (ParseConfig rejects it before
	// anything is spawned), so the model server fails through a wrapper
	// that runs the real binary for every other server.
	bin := writeScript(t, t.TempDir(), "gym-wrapper", `case "$NEMO_GYM_CONFIG_PATH" in
policy_model) echo "config: this model server refuses to start" >&2; exit 2;;
esac
exec `+gymBin+` "$@"
`)
	cfg := orchestrator.DefaultConfig()
	f, err := orchestrator.Start(ctxFor(t, 60*time.Second), cfg, orchestrator.Options{Binary: bin, RunDir: runDir, Logger: testLogger(t)})
	if f != nil {
		t.Fatal("Start returned a fleet although a server failed")
	}
	wantErr(t, err, `"policy_model"`, "config")
	if strings.Contains(err.Error(), `"arithmetic"`) {
		t.Errorf("error blames arithmetic, which started fine: %v", err)
	}
	// arithmetic did run (it starts alongside the model server) ...
	if log, _ := os.ReadFile(filepath.Join(runDir, "logs", "arithmetic.log")); !bytes.Contains(log, []byte("serving")) {
		t.Errorf("arithmetic never served; log: %q", log)
	}
	// ... and was stopped with the rest.
	wantNoLeftovers(t, runDir)
}

func TestFleetStartTimeouts(t *testing.T) {
	cfg := mustParse(t, "stuck:\n  resources_servers:\n    arithmetic: {}\n")
	cases := []struct {
		name   string
		script string
		want   string
	}{
		{
			name: "never answers",
			script: `echo $$ > "$PIDDIR/main.pid"
echo "still loading" >&2
exec sleep 120
`,
			want: "not answered within 2s",
		},
		{
			// The server started a process of its own, which holds the
			// server's stdout and stderr open.
			name: "server with a child",
			script: `echo $$ > "$PIDDIR/main.pid"
sleep 120 &
echo $! > "$PIDDIR/grandchild.pid"
wait
`,
			want: "not answered",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			testenv.ClearTelemetry(t)
			dir := t.TempDir()
			runDir := filepath.Join(dir, "run")
			guardRunDir(t, runDir)
			bin := writeScript(t, dir, "fake-gym", tc.script)
			type result struct {
				f   *orchestrator.Fleet
				err error
			}
			done := make(chan result, 1)
			go func() {
				f, err := orchestrator.Start(context.Background(), cfg, orchestrator.Options{
					Binary: bin, RunDir: runDir, Logger: testLogger(t), HealthTimeout: 2 * time.Second, StopTimeout: 2 * time.Second,
					ExtraEnv: []string{"PIDDIR=" + dir},
				})
				done <- result{f, err}
			}()
			var res result
			select {
			case res = <-done:
			case <-time.After(30 * time.Second):
				// Unblock Start before failing, so nothing outlives the test.
				killLeftovers(runDir)
				res = <-done
				t.Errorf("Start did not return within 30 s (HealthTimeout 2 s, StopTimeout 2 s): %v", res.err)
			}
			if res.f != nil {
				t.Fatal("Start returned a fleet for a server that never answered")
			}
			wantErr(t, res.err, `"stuck"`, tc.want)
			if pid := readPID(t, filepath.Join(dir, "main.pid")); pid == 0 {
				t.Error("the script never ran")
			} else if !gone(pid) {
				killOnCleanup(t, pid)
				t.Errorf("server pid %d still exists after Start returned", pid)
			}
			if pid := readPID(t, filepath.Join(dir, "grandchild.pid")); pid != 0 && !waitGone(pid, 5*time.Second) {
				killOnCleanup(t, pid)
				t.Errorf("the server's own child (pid %d) outlived it", pid)
			}
			wantNoLeftovers(t, runDir)
		})
	}
}

func TestFleetStartCancelled(t *testing.T) {
	testenv.ClearTelemetry(t)
	runDir := t.TempDir()
	guardRunDir(t, runDir)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f, err := orchestrator.Start(ctx, orchestrator.DefaultConfig(), orchestrator.Options{Binary: gymBin, RunDir: runDir, Logger: testLogger(t)})
	if f != nil {
		t.Fatal("Start returned a fleet for a cancelled context")
	}
	wantErr(t, err, context.Canceled.Error())
	wantNoLeftovers(t, runDir)
}

func TestStartNeedsRunDir(t *testing.T) {
	_, err := orchestrator.Start(context.Background(), orchestrator.DefaultConfig(), orchestrator.Options{Binary: gymBin, Logger: testLogger(t)})
	wantErr(t, err, "run directory")
}

// Servers that ignore SIGTERM are killed once the stop timeout passes, all
// of them, and Stop says which. The servers are this test binary as a stub
// (see runStub), run through command: blocks.
func TestFleetStopKillsStubbornServers(t *testing.T) {
	testenv.ClearTelemetry(t)
	runDir := t.TempDir()
	guardRunDir(t, runDir)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var doc strings.Builder
	for _, n := range []string{"first", "second", "third"} {
		fmt.Fprintf(&doc, "%s:\n  resources_servers:\n    stub:\n      command: [%q]\n", n, exe)
	}
	f := startFleet(t, mustParse(t, doc.String()), orchestrator.Options{
		RunDir: runDir, StopTimeout: time.Second, ExtraEnv: []string{stubEnv + "=stubborn"},
	})
	if n := len(f.Servers()); n != 3 {
		t.Fatalf("%d servers, want 3", n)
	}
	done := make(chan error, 1)
	go func() { done <- f.Stop(context.Background()) }()
	select {
	case err = <-done:
	case <-time.After(20 * time.Second):
		killLeftovers(runDir)
		err = <-done
		t.Errorf("Stop did not return within 20 s with a 1 s stop timeout: %v", err)
	}
	wantErr(t, err, `"first"`, `"second"`, `"third"`, "killed")
	for _, s := range f.Servers() {
		if !gone(s.PID) {
			t.Errorf("%s (pid %d) still exists after Stop", s.Spec.Name, s.PID)
		}
	}
	if err2 := f.Stop(context.Background()); err2 == nil || err2.Error() != err.Error() {
		t.Errorf("second Stop = %v, want the first result again", err2)
	}
}

// A server learns everything from its environment, never from its command
// line: the whole dict (secrets included) and its own instance name, which
// beat whatever the orchestrator's own environment holds; ExtraEnv beats
// the inherited environment.
func TestFleetChildEnvironment(t *testing.T) {
	testenv.ClearTelemetry(t)
	t.Setenv("GYMLENS_TEST_INHERITED", "from-parent")
	t.Setenv("GYMLENS_TEST_OVERRIDE", "from-parent")
	t.Setenv("NEMO_GYM_CONFIG_PATH", "not-me")
	t.Setenv("NEMO_GYM_CONFIG_DICT", "stale: true")
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	guardRunDir(t, runDir)
	bin := writeScript(t, dir, "fake-gym", `printf '%s\n' "$@" > "$OUT/args"
env -0 > "$OUT/env"
echo "refusing to run" >&2
exit 1
`)
	cfg := mustParse(t, "remote:\n  responses_api_models:\n    policy_model:\n      seed: 9\n      upstream: {base_url: http://127.0.0.1:9/v1, model: m, api_key: sk-secret-123}\n")
	_, err := orchestrator.Start(ctxFor(t, 30*time.Second), cfg, orchestrator.Options{
		Binary: bin, RunDir: runDir, Logger: testLogger(t),
		ExtraEnv: []string{"OUT=" + dir, "GYMLENS_TEST_OVERRIDE=from-options"},
	})
	wantErr(t, err, `"remote"`, "refusing to run")

	args, _ := os.ReadFile(filepath.Join(dir, "args"))
	if string(args) != "serve\n" {
		t.Errorf("args = %q, want just serve", args)
	}
	envText, _ := os.ReadFile(filepath.Join(dir, "env"))
	env := map[string]string{}
	for _, kv := range strings.Split(string(envText), "\x00") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	if env["NEMO_GYM_CONFIG_PATH"] != "remote" {
		t.Errorf("NEMO_GYM_CONFIG_PATH = %q, want remote", env["NEMO_GYM_CONFIG_PATH"])
	}
	block := blockOf(t, env["NEMO_GYM_CONFIG_DICT"], "remote")
	if up, _ := block["upstream"].(map[string]any); up["api_key"] != "sk-secret-123" || block["seed"] != 9 {
		t.Errorf("server block in the environment = %v", block)
	}
	if block["host"] != "127.0.0.1" || block["port"] == nil {
		t.Errorf("host and port not filled in: %v", block)
	}
	if env["GYMLENS_TEST_INHERITED"] != "from-parent" || env["GYMLENS_TEST_OVERRIDE"] != "from-options" {
		t.Errorf("inherited %q, override %q", env["GYMLENS_TEST_INHERITED"], env["GYMLENS_TEST_OVERRIDE"])
	}
	if want := filepath.Join(runDir, "telemetry", "remote.jsonl"); env["NEMO_GYM_OTEL_FILE_PATH"] != want {
		t.Errorf("NEMO_GYM_OTEL_FILE_PATH = %q, want %q", env["NEMO_GYM_OTEL_FILE_PATH"], want)
	}
	if a := env["NEMO_GYM_OTEL_PROMETHEUS_ADDR"]; !strings.HasPrefix(a, "127.0.0.1:") || strings.HasSuffix(a, ":0") {
		t.Errorf("NEMO_GYM_OTEL_PROMETHEUS_ADDR = %q, want a free loopback port chosen in advance", a)
	}
}

// procFile is what one child exported.
type procFile struct {
	resource map[string]any
	metrics  map[string]*telfile.Metric // last record of each
	spans    int
}

func readTelemetry(t *testing.T, path string) procFile {
	t.Helper()
	p := procFile{metrics: map[string]*telfile.Metric{}}
	resources := 0
	err := telfile.ReadFile(path, func(r telfile.Record) error {
		switch {
		case r.Resource != nil:
			resources++
			p.resource = r.Resource.Attributes
		case r.Metric != nil:
			p.metrics[r.Metric.Name] = r.Metric
		case r.Span != nil:
			p.spans++
		}
		return nil
	})
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	if resources != 1 {
		t.Errorf("%s: %d resource headers, want 1", path, resources)
	}
	return p
}

func TestFleetTelemetryFilePerProcess(t *testing.T) {
	testenv.ClearTelemetry(t)
	runDir := t.TempDir()
	guardRunDir(t, runDir)
	f := startFleet(t, orchestrator.DefaultConfig(), orchestrator.Options{
		RunDir:   runDir,
		ExtraEnv: []string{"NEMO_GYM_OTEL_ENABLED=1", "NEMO_GYM_OTEL_EXPORTER=file"},
	})

	row := dataset.Arithmetic(1, 7)[0]
	body, _ := json.Marshal(row)
	res, err := httpClient.Post(f.AgentURL()+"/run", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("POST /run: %v", err)
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("POST /run = %d: %s", res.StatusCode, raw)
	}
	var run protocol.VerifyResponse
	if err := json.Unmarshal(raw, &run); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	if err := run.Validate(); err != nil {
		t.Errorf("rollout answer %s: %v", raw, err)
	}
	if want, _ := row.Fields.Get("expected_answer"); !run.Fields.Has("expected_answer") || string(must(run.Fields.Get("expected_answer"))) != string(want) {
		t.Errorf("rollout answer %s does not echo the task's expected_answer %s", raw, want)
	}

	if err := f.Stop(ctxFor(t, 30*time.Second)); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	byName := map[string]procFile{}
	for _, s := range f.Servers() {
		name := s.Spec.Name
		if !gone(s.PID) {
			t.Errorf("%s (pid %d) still exists after Stop", name, s.PID)
		}
		if _, err := os.Stat(filepath.Join(runDir, "logs", name+".log")); err != nil {
			t.Errorf("log of %s: %v", name, err)
		}
		p := readTelemetry(t, filepath.Join(runDir, "telemetry", name+".jsonl"))
		if got := p.resource[contract.AttrServerName]; got != name {
			t.Errorf("%s.jsonl: %s = %v", name, contract.AttrServerName, got)
		}
		if got := p.resource[contract.AttrServerType]; got != s.Spec.Type {
			t.Errorf("%s.jsonl: %s = %v, want %s", name, contract.AttrServerType, got, s.Spec.Type)
		}
		if _, ok := p.metrics[serversActive]; ok {
			t.Errorf("%s wrote %s; only the orchestrator may", name, serversActive)
		}
		byName[name] = p
	}
	if len(byName) != 4 {
		t.Fatalf("telemetry of %d servers, want 4", len(byName))
	}
	// The rollout went through every process and each one exported it.
	if m := byName["simple_agent"].metrics["gym.rollout.duration_ms"]; m == nil || len(m.Points) != 1 || m.Points[0].Count != 1 {
		t.Errorf("agent gym.rollout.duration_ms = %+v, want one rollout", m)
	}
	if m := byName["arithmetic"].metrics["gym.verify.duration_ms"]; m == nil || len(m.Points) != 1 || m.Points[0].Count != 1 {
		t.Errorf("resources gym.verify.duration_ms = %+v, want one verification", m)
	}
	files, _ := filepath.Glob(filepath.Join(runDir, "telemetry", "*"))
	if len(files) != 4 {
		t.Errorf("telemetry files %v, want one per server", files)
	}
}

// must drops the found flag of a lookup that the test checked already.
func must(raw json.RawMessage, _ bool) json.RawMessage { return raw }

// A server whose host is not this machine is not spawned: Start waits for
// it to join from its own host, and when it does not within JoinTimeout,
// says so with the command that joins it, and stops what it started.
func TestFleetRemoteServerThatNeverJoins(t *testing.T) {
	testenv.ClearTelemetry(t)
	runDir := t.TempDir()
	guardRunDir(t, runDir)
	// 192.0.2.0/24 is TEST-NET-1: never an address of this host.
	cfg, err := orchestrator.ParseConfig([]byte(`
arithmetic:
  resources_servers:
    arithmetic: {domain: math, host: 192.0.2.7, port: 12001}
policy_model:
  responses_api_models:
    policy_model: {}
simple_agent:
  responses_api_agents:
    simple_agent: {}
`))
	if err != nil {
		t.Fatal(err)
	}
	f, err := orchestrator.Start(ctxFor(t, 60*time.Second), cfg, orchestrator.Options{
		Binary: gymBin, RunDir: runDir, Logger: testLogger(t), JoinTimeout: 500 * time.Millisecond,
	})
	if f != nil {
		t.Fatal("Start returned a fleet although a server never joined")
	}
	wantErr(t, err, `"arithmetic" on another host (http://192.0.2.7:12001) did not join`, "gymlens serve --head http://", "--name arithmetic")
	if _, statErr := os.Stat(filepath.Join(runDir, "logs", "arithmetic.log")); statErr == nil {
		t.Error("the remote server got a log file here, as if spawned")
	}
	wantNoLeftovers(t, runDir)
}
