package orchestrator_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gymlens/gymlens/internal/testenv"
	"github.com/gymlens/gymlens/orchestrator"
)

// A server whose auto-assigned port was taken between the orchestrator's
// probe and its own bind is started again on another port.
func TestFleetRetriesATakenAssignedPort(t *testing.T) {
	testenv.ClearTelemetry(t)
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	guardRunDir(t, runDir)
	bin := writeScript(t, dir, "gym-wrapper", `if [ "$NEMO_GYM_CONFIG_PATH" = arithmetic ] && [ ! -e "$OUT/tried" ]; then
  printf '%s' "$NEMO_GYM_CONFIG_DICT" > "$OUT/first"
  touch "$OUT/tried"
  echo "listen tcp 127.0.0.1:1: bind: address already in use" >&2
  exit 1
fi
exec `+gymBin+` "$@"
`)
	f := startFleet(t, orchestrator.DefaultConfig(), orchestrator.Options{Binary: bin, RunDir: runDir, ExtraEnv: []string{"OUT=" + dir}})
	first, err := os.ReadFile(filepath.Join(dir, "first"))
	if err != nil {
		t.Fatalf("the first attempt never ran: %v", err)
	}
	was := blockOf(t, string(first), "arithmetic")["port"]
	now := blockOf(t, string(f.ConfigYAML()), "arithmetic")["port"]
	if was == now || now == nil {
		t.Errorf("arithmetic port %v, then %v: want a new one", was, now)
	}
	if n := f.Active(); n != 4 || len(f.Servers()) != 4 {
		t.Errorf("Active() = %d, Servers() = %+v; want 4, the failed attempt forgotten", n, f.Servers())
	}
	if code := get(t, f.URL("arithmetic")+"/health"); code != 200 {
		t.Errorf("arithmetic after the retry: /health = %d", code)
	}
	noExitPending(t, f)
}

// A fixed port is the user's: a server that cannot bind it is not moved.
func TestFleetDoesNotMoveAFixedPort(t *testing.T) {
	testenv.ClearTelemetry(t)
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	guardRunDir(t, runDir)
	bin := writeScript(t, dir, "fake-gym", `echo run >> "$OUT/runs"
echo "listen tcp: bind: address already in use" >&2
exit 1
`)
	port := testenv.FreePort(t)
	cfg := mustParse(t, fmt.Sprintf("calc:\n  resources_servers:\n    arithmetic: {port: %d}\n", port))
	_, err := orchestrator.Start(ctxFor(t, 30*time.Second), cfg, orchestrator.Options{Binary: bin, RunDir: runDir, Logger: testLogger(t), ExtraEnv: []string{"OUT=" + dir}})
	wantErr(t, err, `"calc"`, "address already in use")
	if runs, _ := os.ReadFile(filepath.Join(dir, "runs")); string(runs) != "run\n" {
		t.Errorf("the server ran %q times, want once", runs)
	}
	wantNoLeftovers(t, runDir)
}

// buildWallet builds the SDK's wallet example into dir/bin/wallet, or
// returns "" when the example is not in this tree.
func buildWallet(t *testing.T, dir string) string {
	t.Helper()
	src := filepath.Join("..", "examples", "wallet")
	if _, err := os.Stat(filepath.Join(src, "main.go")); err != nil {
		return ""
	}
	out := filepath.Join(dir, "bin", "wallet")
	cmd := exec.Command("go", "build", "-o", out, "./"+filepath.ToSlash(src))
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the wallet example: %v\n%s", err, b)
	}
	return out
}

// An external server (command:) is started under the launch contract from
// the config file's directory, counts in gym.servers.active like the
// built-ins, and is listed by the head server.
func TestFleetExternalServer(t *testing.T) {
	testenv.ClearTelemetry(t)
	reader := orchestratorTelemetry(t)
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	guardRunDir(t, runDir)
	prog := buildWallet(t, dir)
	impl, command := "wallet", `[./bin/wallet]`
	if prog == "" { // no SDK example here: the gymlens binary serves as one
		prog, impl, command = gymBin, "arithmetic", fmt.Sprintf("[%q, serve]", gymBin)
	}
	doc := `wallet:
  resources_servers:
    ` + impl + `:
      command: ` + command + `
      domain: games
policy_model:
  responses_api_models:
    policy_model: {}
simple_agent:
  responses_api_agents:
    simple_agent: {}
`
	path := filepath.Join(dir, "fleet.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := orchestrator.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	f := startFleet(t, cfg, orchestrator.Options{RunDir: runDir, ExtraEnv: []string{"NEMO_GYM_OTEL_ENABLED=0"}})
	// Three servers and the relay generated for the agent.
	wantActive(t, reader, 4)
	var w orchestrator.ServerInfo
	for _, s := range f.Servers() {
		if s.Spec.Name == "wallet" {
			w = s
		}
	}
	if w.PID == 0 || !w.Spec.External() {
		t.Fatalf("no external wallet in %+v", f.Servers())
	}
	if args := cmdline(t, w.PID); args[0] != prog {
		t.Errorf("wallet runs %q, want %s", args, prog)
	}
	if cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", w.PID)); err != nil || cwd != dir {
		t.Errorf("wallet runs in %q (%v), want the config's directory %s", cwd, err, dir)
	}
	if env := environ(t, w.PID); env["NEMO_GYM_CONFIG_PATH"] != "wallet" || env["NEMO_GYM_CONFIG_DICT"] != string(f.ConfigYAML()) {
		t.Errorf("wallet's launch environment: path %q", env["NEMO_GYM_CONFIG_PATH"])
	}
	// Reachable where the dict says, and answering (any status counts).
	res, err := httpClient.Get(w.URL + "/")
	if err != nil {
		t.Fatalf("GET %s/: %v", w.URL, err)
	}
	res.Body.Close()
	var listed bool
	for _, in := range f.Instances() {
		if in.ProcessName == "wallet" {
			listed = in.PID != nil && *in.PID == w.PID && in.Entrypoint == prog && in.DirPath == dir && in.Name == impl
		}
	}
	if !listed {
		t.Errorf("head server instances %+v do not list the wallet (pid %d, %s in %s)", f.Instances(), w.PID, prog, dir)
	}
	if err := f.Stop(ctxFor(t, 30*time.Second)); err != nil {
		t.Errorf("Stop: %v", err)
	}
	wantActive(t, reader, 0)
	wantNoLeftovers(t, runDir)
}

// signalServer is an external server that answers GET / on the port of its
// first argument and, on SIGTERM, does what uvicorn (NeMo Gym's Python
// servers) does: stops, then raises the signal again on itself, so that it
// ends "terminated" rather than with status 0. With "exit3" as its second
// argument it exits with status 3 instead.
const signalServer = `
import http.server, os, signal, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b'{"status":"ok"}')
    def log_message(self, *args):
        pass
srv = http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H)
def stop(sig, frame):
    if sys.argv[2:] == ["exit3"]:
        os._exit(3)
    if sys.argv[2:] == ["exit-signum"]:  # Ray's handler: sys.exit(signum)
        sys.exit(sig)
    if sys.argv[2:] == ["exit-128"]:  # a shell's report of the signal
        os._exit(128 + sig)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)
signal.signal(signal.SIGTERM, stop)
srv.serve_forever()
`

// A server that ends by the SIGTERM the fleet sent it has stopped as
// asked (NeMo Gym's Python servers end so: by the signal itself under
// uvicorn, with its number as the exit status under Ray's handler); one
// that exits with another error status on it has not, and Stop says so.
func TestFleetStopAcceptsAServerEndedByItsSignal(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not on PATH")
	}
	testenv.ClearTelemetry(t)
	for _, tc := range []struct {
		mode, want string
	}{{"", ""}, {"exit-signum", ""}, {"exit-128", ""}, {"exit3", `server "sig" stopped with exit status 3`}} {
		t.Run("mode="+tc.mode, func(t *testing.T) {
			dir := t.TempDir()
			runDir := filepath.Join(dir, "run")
			guardRunDir(t, runDir)
			if err := os.WriteFile(filepath.Join(dir, "sig.py"), []byte(signalServer), 0o644); err != nil {
				t.Fatal(err)
			}
			port := testenv.FreePort(t)
			doc := fmt.Sprintf(`sig:
  resources_servers:
    sig:
      command: [python3, sig.py, "%d", "%s"]
      domain: other
      host: 127.0.0.1
      port: %d
`, port, tc.mode, port)
			path := filepath.Join(dir, "fleet.yaml")
			if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg, err := orchestrator.LoadConfig(path)
			if err != nil {
				t.Fatal(err)
			}
			f := startFleet(t, cfg, orchestrator.Options{RunDir: runDir, ExtraEnv: []string{"NEMO_GYM_OTEL_ENABLED=0"}})
			err = f.Stop(ctxFor(t, 30*time.Second))
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Stop: %v, want nil for a server ended by the SIGTERM it was sent (%s)", err, tc.mode)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Stop: %v, want an error naming %q", err, tc.want)
			}
		})
	}
}
