package orchestrator_test

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gymlens/gymlens/internal/testenv"
	"github.com/gymlens/gymlens/orchestrator"
)

// runDry runs orchestrator.DryRun on doc with the test's gym binary and
// logger, killing whatever a result's PID left behind at the end of the
// test.
func runDry(t *testing.T, doc string, opts orchestrator.Options) ([]orchestrator.DryRunResult, error) {
	t.Helper()
	if opts.Binary == "" {
		opts.Binary = gymBin
	}
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	res, err := orchestrator.DryRun(ctxFor(t, 60*time.Second), mustParse(t, doc), opts)
	for _, r := range res {
		killOnCleanup(t, r.Server.PID)
	}
	return res, err
}

// wantUnbound fails when something listens on host:port.
func wantUnbound(t *testing.T, what, host string, port int) {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		t.Errorf("%s's port %s:%d is still bound: %v", what, host, port, err)
		return
	}
	ln.Close()
}

// The built-in fleet under dry_run: every server runs as `gymlens serve`
// under the launch contract, says its config is valid and exits 0; no
// process, port or head server is left, and gym.servers.active is never
// recorded.
func TestDryRunBuiltins(t *testing.T) {
	testenv.ClearTelemetry(t)
	reader := orchestratorTelemetry(t)
	runDir := t.TempDir()
	guardRunDir(t, runDir)
	headPort := testenv.FreePort(t)
	doc := fmt.Sprintf("dry_run: true\nhead_server: {port: %d}\n%s", headPort, orchestrator.DefaultConfigYAML())
	res, err := runDry(t, doc, orchestrator.Options{RunDir: runDir})
	if err != nil {
		t.Fatalf("DryRun: %v", err)
	}
	var names []string
	for _, r := range res {
		name := r.Server.Spec.Name
		names = append(names, name)
		if r.Err != nil {
			t.Errorf("%s: %v", name, r.Err)
		}
		if r.Server.PID <= 0 || !gone(r.Server.PID) {
			t.Errorf("%s: pid %d still exists (or never ran)", name, r.Server.PID)
		}
		if got := r.Server.Command; len(got) != 2 || got[0] != gymBin || got[1] != "serve" {
			t.Errorf("%s ran %q, want [%s serve]", name, got, gymBin)
		}
		if r.Server.Spec.Port <= 0 {
			t.Errorf("%s: no port filled in: %+v", name, r.Server.Spec)
		} else {
			wantUnbound(t, name, "127.0.0.1", r.Server.Spec.Port)
		}
		log, err := os.ReadFile(filepath.Join(runDir, "logs", name+".log"))
		if err != nil || !bytes.Contains(log, []byte("dry run: the configuration is valid; not listening")) ||
			!bytes.Contains(log, []byte("server="+name)) {
			t.Errorf("log of %s = %q (%v), want the child's dry-run line naming it", name, log, err)
		}
	}
	if want := "arithmetic policy_model simple_agent simple_agent_environment_server"; strings.Join(names, " ") != want {
		t.Errorf("servers run: %q, want %q (document order)", names, want)
	}
	wantUnbound(t, "the head server", "127.0.0.1", headPort)
	if v, ok := activeGauge(t, reader); ok {
		t.Errorf("%s recorded (%d) by a dry run, which leaves nothing running", serversActive, v)
	}
	wantNoLeftovers(t, runDir)
}

// Servers run one at a time, each one to its end before the next starts,
// and every one runs although an earlier one failed; the error names the
// failed server and quotes its stderr.
func TestDryRunSerialAndFailureNamesServer(t *testing.T) {
	testenv.ClearTelemetry(t)
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	guardRunDir(t, runDir)
	ok := writeScript(t, dir, "ok", `echo "start $NEMO_GYM_CONFIG_PATH" >> "$OUT/order"
sleep 0.2
echo "end $NEMO_GYM_CONFIG_PATH" >> "$OUT/order"
`)
	broken := writeScript(t, dir, "broken", `echo "start $NEMO_GYM_CONFIG_PATH" >> "$OUT/order"
echo "checking $NEMO_GYM_CONFIG_PATH" >&2
echo "bad config: no such dataset" >&2
echo "end $NEMO_GYM_CONFIG_PATH" >> "$OUT/order"
exit 1
`)
	doc := fmt.Sprintf(`dry_run: true
head_server: {port: 0}
first:
  resources_servers:
    mine: {command: [%q]}
wrecked:
  resources_servers:
    mine: {command: [%q]}
last:
  resources_servers:
    mine: {command: [%q]}
`, ok, broken, ok)
	res, err := runDry(t, doc, orchestrator.Options{RunDir: runDir, ExtraEnv: []string{"OUT=" + dir}})
	wantErr(t, err, `server "wrecked" failed the dry run`, "exit status 1", "bad config: no such dataset", "checking wrecked")
	if strings.Contains(err.Error(), `"first"`) || strings.Contains(err.Error(), `"last"`) {
		t.Errorf("the error names servers that passed: %v", err)
	}
	if len(res) != 3 {
		t.Fatalf("%d results, want 3: %+v", len(res), res)
	}
	for i, want := range []bool{true, false, true} {
		if passed := res[i].Err == nil; passed != want {
			t.Errorf("%s: passed %v, want %v (%v)", res[i].Server.Spec.Name, passed, want, res[i].Err)
		}
	}
	order, _ := os.ReadFile(filepath.Join(dir, "order"))
	if want := "start first\nend first\nstart wrecked\nend wrecked\nstart last\nend last\n"; string(order) != want {
		t.Errorf("order of the runs:\n%s\nwant one at a time:\n%s", order, want)
	}
	wantNoLeftovers(t, runDir)
}

// A command: server that ignores dry_run and serves is killed as soon as
// it answers, and reported with its stderr; its port is free again.
func TestDryRunKillsAServerThatServes(t *testing.T) {
	testenv.ClearTelemetry(t)
	runDir := t.TempDir()
	guardRunDir(t, runDir)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	doc := fmt.Sprintf("dry_run: true\nhead_server: {port: 0}\nserver_ignoring_dry_run:\n  resources_servers:\n    stub:\n      command: [%q]\n", exe)
	const timeout = 30 * time.Second
	begin := time.Now()
	res, err := runDry(t, doc, orchestrator.Options{RunDir: runDir, HealthTimeout: timeout, ExtraEnv: []string{stubEnv + "=plain"}})
	if took := time.Since(begin); took > timeout/2 {
		t.Errorf("DryRun took %s: the serving server should be caught when it answers, not at the %s timeout", took, timeout)
	}
	wantErr(t, err, `server "server_ignoring_dry_run" failed the dry run`, "instead of exiting (it ignores dry_run): killed", "stub serving server_ignoring_dry_run")
	if len(res) != 1 {
		t.Fatalf("%d results, want 1", len(res))
	}
	if pid := res[0].Server.PID; !gone(pid) {
		t.Errorf("the serving stub (pid %d) still exists", pid)
	}
	wantUnbound(t, "the stub", "127.0.0.1", res[0].Server.Spec.Port)
	wantNoLeftovers(t, runDir)
}

// A server that neither exits nor listens is killed at HealthTimeout,
// with what it started (its process group).
func TestDryRunTimeoutKillsTheProcessGroup(t *testing.T) {
	testenv.ClearTelemetry(t)
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	guardRunDir(t, runDir)
	hang := writeScript(t, dir, "hang", `sleep 60 &
echo $! > "$OUT/sleep.pid"
echo "thinking forever" >&2
wait
`)
	doc := fmt.Sprintf("dry_run: true\nhead_server: {port: 0}\nslow:\n  resources_servers:\n    mine: {command: [%q]}\n", hang)
	res, err := runDry(t, doc, orchestrator.Options{RunDir: runDir, HealthTimeout: 500 * time.Millisecond, ExtraEnv: []string{"OUT=" + dir}})
	wantErr(t, err, `server "slow" failed the dry run`, "still running after 500ms", "killed", "thinking forever")
	if len(res) != 1 || !gone(res[0].Server.PID) {
		t.Errorf("the hung server is still there: %+v", res)
	}
	sleepPID := readPID(t, filepath.Join(dir, "sleep.pid"))
	if sleepPID == 0 {
		t.Fatal("the script never started its sleep")
	}
	if !waitGone(sleepPID, 5*time.Second) {
		killOnCleanup(t, sleepPID)
		t.Errorf("the server's own child (pid %d) survived", sleepPID)
	}
	wantNoLeftovers(t, runDir)
}

// Start refuses a dry_run fleet and DryRun a real one, before anything
// is created.
func TestStartAndDryRunRefuseTheOtherMode(t *testing.T) {
	testenv.ClearTelemetry(t)
	dry := mustParse(t, "dry_run: true\n"+string(orchestrator.DefaultConfigYAML()))
	if !dry.DryRun() || orchestrator.DefaultConfig().DryRun() {
		t.Fatalf("Config.DryRun: %v for dry_run: true, %v for the default fleet", dry.DryRun(), orchestrator.DefaultConfig().DryRun())
	}
	runDir := filepath.Join(t.TempDir(), "run")
	f, err := orchestrator.Start(ctxFor(t, 10*time.Second), dry, orchestrator.Options{Binary: gymBin, RunDir: runDir, Logger: testLogger(t)})
	if f != nil {
		t.Fatal("Start returned a fleet for a dry_run config")
	}
	wantErr(t, err, "dry_run: true", "DryRun")
	_, err = orchestrator.DryRun(ctxFor(t, 10*time.Second), orchestrator.DefaultConfig(), orchestrator.Options{Binary: gymBin, RunDir: runDir, Logger: testLogger(t)})
	wantErr(t, err, "does not set dry_run: true", "Start")
	if _, err := os.Stat(runDir); !os.IsNotExist(err) {
		t.Errorf("the run directory was created: %v", err)
	}
}
