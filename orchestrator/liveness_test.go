package orchestrator_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gymlens/gymlens/internal/testenv"
	"github.com/gymlens/gymlens/internal/upstream"
	"github.com/gymlens/gymlens/orchestrator"
)

// blockingServer is a stand-in for a NeMo Gym Python server whose verify
// blocks its event loop: it serves one request at a time, so while a POST
// /verify sleeps (argv[2] seconds) it answers nothing, GET / included, but
// the kernel still accepts connections (a backlog, as uvicorn's). It
// listens on 127.0.0.1:argv[1].
const blockingServer = `
import http.server, sys, time
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.ok()
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path == "/verify":
            time.sleep(float(sys.argv[2]))
        self.ok()
    def ok(self):
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "15")
        self.end_headers()
        self.wfile.write(b'{"status":"ok"}')
    def log_message(self, *args):
        pass
class S(http.server.HTTPServer):
    request_queue_size = 128
S(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
`

// blockingFleet writes blockingServer and a fleet file of one instance of
// it per name (each verify blocking block), with extra (top-level keys)
// and the per-server lines of perServer added, and loads it.
func blockingFleet(t *testing.T, block time.Duration, extra string, perServer map[string]string, names ...string) orchestrator.Config {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not on PATH")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "block.py"), []byte(blockingServer), 0o644); err != nil {
		t.Fatal(err)
	}
	doc := extra
	for _, name := range names {
		port := testenv.FreePort(t)
		doc += fmt.Sprintf(`%s:
  resources_servers:
    block:
      command: [python3, block.py, "%d", "%g"]
      domain: other
      host: 127.0.0.1
      port: %d
`, name, port, block.Seconds(), port)
		if line := perServer[name]; line != "" {
			doc += "      " + line + "\n"
		}
	}
	path := filepath.Join(dir, "fleet.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := orchestrator.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// waitLog waits, up to bound, until the log holds a line with every
// fragment, and fails the test if it never does.
func waitLog(t *testing.T, log *syncLog, bound time.Duration, fragments ...string) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		for line := range strings.Lines(log.String()) {
			all := true
			for _, f := range fragments {
				all = all && strings.Contains(line, f)
			}
			if all {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line with %q within %s", fragments, bound)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// serverByName returns the running server called name.
func serverByName(t *testing.T, f *orchestrator.Fleet, name string) orchestrator.ServerInfo {
	t.Helper()
	for _, s := range f.Servers() {
		if s.Spec.Name == name {
			return s
		}
	}
	t.Fatalf("no server %q in %+v", name, f.Servers())
	return orchestrator.ServerInfo{}
}

// Issue 36, item 3: with the default liveness budget the fleet keeps a
// server that answers nothing for 30 s while one verify blocks it (as a
// NeMo Gym Python server blocking its event loop does), while the same
// server with a short budget of its own (liveness_timeout_seconds in its
// block) is declared dead and reported. Probe interval and timeout are the
// defaults too.
func TestFleetLivenessBudgetOutlastsABlockedEventLoop(t *testing.T) {
	testenv.ClearTelemetry(t)
	const block = 30 * time.Second
	cfg := blockingFleet(t, block, "", map[string]string{"strict": "liveness_timeout_seconds: 1"}, "patient", "strict")
	runDir := t.TempDir()
	guardRunDir(t, runDir)
	logger, log := capturingLogger(t)
	f := startFleet(t, cfg, orchestrator.Options{RunDir: runDir, Logger: logger, ExtraEnv: []string{"NEMO_GYM_OTEL_ENABLED=0"}})

	verified := make(chan error, 2)
	client := &http.Client{Timeout: block + 30*time.Second}
	for _, name := range []string{"patient", "strict"} {
		url := f.URL(name) + "/verify"
		go func() {
			res, err := client.Post(url, "application/json", strings.NewReader("{}"))
			if err == nil {
				res.Body.Close()
				if res.StatusCode != http.StatusOK {
					err = fmt.Errorf("POST %s: %s", url, res.Status)
				}
			}
			verified <- err
		}()
	}

	// strict is killed once its probes go unanswered for 1 s.
	select {
	case ex := <-f.Exits():
		if ex.Name != "strict" {
			t.Fatalf("exit of %s (%v), want strict's", ex.Name, ex.Err)
		}
		if !errors.Is(ex.Err, orchestrator.ErrUnresponsive) || !strings.Contains(ex.Err.Error(), "over its 1s budget") {
			t.Errorf("strict's exit error %v, want ErrUnresponsive over its 1s budget", ex.Err)
		}
		t.Logf("strict reported: %v", ex.Err)
	case <-time.After(block):
		t.Fatalf("strict (budget 1 s) not reported while its verify blocked it for %s", block)
	}

	// patient's verify ends after the block; its probes failed meanwhile,
	// and it answers them again.
	var errs []error
	for range 2 {
		errs = append(errs, <-verified)
	}
	if ok := errs[0] == nil || errs[1] == nil; !ok {
		t.Fatalf("no verify came back after the block: %v", errs)
	}
	waitLog(t, log, 20*time.Second, "server did not answer its liveness probe", "server=patient")
	waitLog(t, log, 20*time.Second, "server answers its liveness probe again", "server=patient")
	noExitPending(t, f)
	if n := f.Active(); n != 1 {
		t.Errorf("Active() = %d after the block, want 1 (patient)", n)
	}
	if code := get(t, f.URL("patient")+"/"); code != http.StatusOK {
		t.Errorf("patient after the block: GET / = %d", code)
	}
	err := f.Stop(ctxFor(t, 30*time.Second))
	wantErr(t, err, `"strict" had died`, "stopped answering")
	if err != nil && strings.Contains(err.Error(), `"patient"`) {
		t.Errorf("Stop blames patient, which was kept: %v", err)
	}
	wantNoLeftovers(t, runDir)
}

// A server stopped with SIGSTOP is found and reported within the
// top-level liveness_timeout_seconds, while a server whose block gives a
// longer budget of its own, stopped alike, is not reported within the
// shorter one: the block's value takes precedence over the top level.
func TestFleetLivenessBudgetGlobalAndPerServer(t *testing.T) {
	testenv.ClearTelemetry(t)
	cfg := blockingFleet(t, 0, "liveness_timeout_seconds: 1\n", map[string]string{"lenient": "liveness_timeout_seconds: 600"}, "stopped", "lenient")
	runDir := t.TempDir()
	guardRunDir(t, runDir)
	logger, log := capturingLogger(t)
	opts := orchestrator.Options{
		RunDir: runDir, Logger: logger, ExtraEnv: []string{"NEMO_GYM_OTEL_ENABLED=0"},
		LivenessInterval: 200 * time.Millisecond, LivenessTimeout: 300 * time.Millisecond,
	}
	f := startFleet(t, cfg, opts)
	stopped, lenient := serverByName(t, f, "stopped"), serverByName(t, f, "lenient")
	sigstop(t, lenient.PID)
	sigstop(t, stopped.PID)

	select {
	case ex := <-f.Exits():
		if ex.Name != "stopped" || ex.PID != stopped.PID {
			t.Fatalf("exit of %s (pid %d), want stopped (pid %d): %v", ex.Name, ex.PID, stopped.PID, ex.Err)
		}
		if !errors.Is(ex.Err, orchestrator.ErrUnresponsive) || !strings.Contains(ex.Err.Error(), "over its 1s budget") {
			t.Errorf("exit error %v, want ErrUnresponsive over its 1s budget", ex.Err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the SIGSTOPped server with a 1 s budget was not reported in 30 s")
	}
	if !gone(stopped.PID) {
		t.Errorf("the stopped server (pid %d) still exists", stopped.PID)
	}
	// lenient has been failing its probes at least as long: once it has
	// failed more than 1 s worth of them, it is still in the fleet.
	waitLog(t, log, 20*time.Second, "server did not answer its liveness probe", "server=lenient", "failed_probes=6", "budget=10m0s")
	noExitPending(t, f)
	if n := f.Active(); n != 1 {
		t.Errorf("Active() = %d, want 1 (lenient)", n)
	}
	// Resumed, lenient answers again and stops when asked.
	if err := syscall.Kill(lenient.PID, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitLog(t, log, 20*time.Second, "server answers its liveness probe again", "server=lenient")
	err := f.Stop(ctxFor(t, 30*time.Second))
	wantErr(t, err, `"stopped" had died`)
	if err != nil && strings.Contains(err.Error(), `"lenient"`) {
		t.Errorf("Stop blames lenient, which stopped as asked: %v", err)
	}
	wantNoLeftovers(t, runDir)
}

// liveness_timeout_seconds is read at the top level (every server) and in
// a server block (that server, first); the block's key is taken out of
// the dict the servers get, the top-level one stays; Set keeps the
// blocks' values and reads new ones.
func TestParseConfigLivenessBudget(t *testing.T) {
	t.Setenv("GYMLENS_TEST_BUDGET", "2.5")
	cfg := mustParse(t, `liveness_timeout_seconds: 45
calc:
  resources_servers:
    arithmetic: {liveness_timeout_seconds: 5}
policy:
  responses_api_models:
    policy_model: {liveness_timeout_seconds: "${oc.env:GYMLENS_TEST_BUDGET}"}
other:
  resources_servers:
    arithmetic: {}
`)
	want := map[string]time.Duration{"calc": 5 * time.Second, "policy": 2500 * time.Millisecond, "other": 45 * time.Second}
	check := func(cfg orchestrator.Config) {
		t.Helper()
		if cfg.LivenessBudget != 45*time.Second {
			t.Errorf("Config.LivenessBudget = %s, want 45s", cfg.LivenessBudget)
		}
		for _, s := range cfg.Servers {
			if w, ok := want[s.Name]; ok && s.LivenessBudget != w {
				t.Errorf("%s: LivenessBudget = %s, want %s", s.Name, s.LivenessBudget, w)
			}
		}
		dict := string(cfg.Dict.YAML())
		if n := strings.Count(dict, orchestrator.KeyLivenessTimeoutSeconds); n != 1 || !strings.HasPrefix(dict, orchestrator.KeyLivenessTimeoutSeconds+": 45") {
			t.Errorf("the dict the servers get has %d liveness keys, want only the top-level one:\n%s", n, dict)
		}
	}
	check(cfg)

	path, _ := cfg.ImplPath("calc", "tolerance")
	if err := cfg.Set(path, 0.5); err != nil {
		t.Fatal(err)
	}
	check(cfg)
	if err := cfg.Set([]string{"other", "resources_servers", "arithmetic", orchestrator.KeyLivenessTimeoutSeconds}, 90); err != nil {
		t.Fatal(err)
	}
	want["other"] = 90 * time.Second
	check(cfg)
	if err := cfg.Set([]string{"calc", "resources_servers", "arithmetic", orchestrator.KeyLivenessTimeoutSeconds}, nil); err != nil {
		t.Fatal(err)
	}
	want["calc"] = 45 * time.Second // null: back to the top level's
	check(cfg)
	wantErr(t, cfg.Set([]string{orchestrator.KeyLivenessTimeoutSeconds}, 0), orchestrator.KeyLivenessTimeoutSeconds, "above 0")

	// Nothing given: every server's is 0, Options.LivenessBudget's to fill.
	for _, s := range orchestrator.DefaultConfig().Servers {
		if s.LivenessBudget != 0 {
			t.Errorf("default fleet: %s has budget %s, want 0", s.Name, s.LivenessBudget)
		}
	}
}

// A bad liveness_timeout_seconds is a configuration error, naming where.
func TestParseConfigRejectsBadLivenessBudgets(t *testing.T) {
	for _, v := range []string{"0", "-1", `"soon"`, "true", ".nan", "[1]", "{s: 1}", "1e12"} {
		t.Run(v, func(t *testing.T) {
			_, err := orchestrator.ParseConfig([]byte(trio + "liveness_timeout_seconds: " + v + "\n"))
			wantErr(t, err, "liveness_timeout_seconds: want a number of seconds above 0")
			_, err = orchestrator.ParseConfig([]byte(trio + "calc2:\n  resources_servers:\n    arithmetic:\n      liveness_timeout_seconds: " + v + "\n"))
			wantErr(t, err, "calc2.resources_servers.arithmetic.liveness_timeout_seconds: want a number of seconds above 0")
			if err != nil && strings.Contains(err.Error(), "unknown key") {
				t.Errorf("the bad value is also reported as an unknown key: %v", err)
			}
		})
	}
}

// Upstream's own Python resources server (string_match) starts and
// verifies under a fleet file with liveness_timeout_seconds at the top
// level and in its block: the top-level key is no server instance to
// upstream, and the block's is not in the dict the server gets
// (upstream's environment servers would refuse it, extra="forbid").
func TestUpstreamPythonServerWithLivenessSettings(t *testing.T) {
	python := upstream.Python(t)
	testenv.ClearTelemetry(t)
	sm := upstreamServerDir(t, python, "resources_servers", "string_match")
	dir := t.TempDir()
	doc := fmt.Sprintf(`liveness_timeout_seconds: 90
string_match:
  resources_servers:
    string_match:
      entrypoint: app.py
      domain: knowledge
      liveness_timeout_seconds: 120
      command: [%q, %q]
`, python, filepath.Join(sm, "app.py"))
	path := filepath.Join(dir, "fleet.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := orchestrator.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	f := startFleet(t, cfg, orchestrator.Options{HealthTimeout: 90 * time.Second, ExtraEnv: []string{"NEMO_GYM_OTEL_ENABLED=0"}})
	if s := serverByName(t, f, "string_match"); s.Spec.LivenessBudget != 120*time.Second {
		t.Errorf("string_match's budget = %s, want 120s", s.Spec.LivenessBudget)
	}
	got := blockOf(t, string(f.ConfigYAML()), "string_match")
	if _, ok := got[orchestrator.KeyLivenessTimeoutSeconds]; ok {
		t.Errorf("the server's block still has %s: %v", orchestrator.KeyLivenessTimeoutSeconds, got)
	}
	if !strings.Contains(string(f.ConfigYAML()), orchestrator.KeyLivenessTimeoutSeconds+": 90") {
		t.Errorf("the dict lost the top-level %s:\n%s", orchestrator.KeyLivenessTimeoutSeconds, f.ConfigYAML())
	}
	raw, _ := json.Marshal(with(answerVerify("Final answer: Lyon"), "expected_answer", "lyon"))
	res, err := httpClient.Post(f.URL("string_match")+"/verify", "application/json", bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(out), `"reward":1.0`) {
		t.Errorf("/verify = %d %s, want reward 1.0", res.StatusCode, out)
	}
	noExitPending(t, f)
	if err := f.Stop(ctxFor(t, 30*time.Second)); err != nil {
		t.Errorf("Stop: %v", err)
	}
}
