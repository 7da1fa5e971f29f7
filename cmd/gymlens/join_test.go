package main

// Tests of `gymlens serve --head`: a server joining a fleet from another host
// reads its block and the fleet's telemetry settings from the head server.
// Here the head is a stand-in on loopback shaped as the orchestrator's
// (and NeMo Gym's) head API; the three-host run against a real
// orchestrator is e2e's TestServersOnOtherHosts.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gymlens/gymlens/internal/testenv"
	"github.com/gymlens/gymlens/lens"
	"github.com/gymlens/gymlens/lens/telfile"
	"github.com/gymlens/gymlens/orchestrator"
)

// testHead serves a head API: the dict as a JSON string, and the
// telemetry environment when tel is not nil (a NeMo Gym head has no such
// route, so it answers 404).
func testHead(t *testing.T, dict string, tel *orchestrator.TelemetryEnv) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET "+orchestrator.HeadConfigPath, func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(dict)
	})
	if tel != nil {
		mux.HandleFunc("GET "+orchestrator.HeadTelemetryPath, func(w http.ResponseWriter, _ *http.Request) {
			_ = json.NewEncoder(w).Encode(tel)
		})
	}
	head := httptest.NewServer(mux)
	t.Cleanup(head.Close)
	return head
}

func TestServeHeadUsageErrors(t *testing.T) {
	shortToken := filepath.Join(t.TempDir(), "head_token")
	if err := os.WriteFile(shortToken, []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	head := testHead(t, "arithmetic:\n  resources_servers:\n    arithmetic: {domain: math, host: 127.0.0.1, port: 1}\n", nil)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--head"}, "flag needs an argument"},
		{[]string{"serve", "--head", "ftp://h:1", "--name", "a"}, "want http://HOST:PORT"},
		{[]string{"serve", "--head", "http://127.0.0.1:1"}, "--name is required"},
		{[]string{"serve", "--head", "http://127.0.0.1:1", "--name", "a", "--wait", "0s"}, "--wait"},
		{[]string{"serve", "--head=" + head.URL, "--name", "arithmetc"}, `no instance "arithmetc"`},
		{[]string{"serve", "--head", head.URL, "--name", "arithmetic", "--head-token-file", "/nonexistent/head_token"}, "--head-token-file"},
		{[]string{"serve", "--head", head.URL, "--name", "arithmetic", "--head-token-file", shortToken}, "at least 16 characters"},
	} {
		code, stdout, stderr := runGym(t, tc.args...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("gymlens %v: exit %d, stderr %q; want exit 2 and %q", tc.args, code, stderr, tc.want)
		}
		if stdout != "" {
			t.Errorf("gymlens %v: stdout %q", tc.args, stdout)
		}
	}
}

// A joined server takes the fleet's run id and settings (its own
// environment wins, except for the run id), writes its spans under
// runs/<run id>/ on its host, and leaves with exit 0 once the head is gone.
func TestServeHeadJoinsTheRunAndLeavesWithTheHead(t *testing.T) {
	port := testenv.FreePort(t)
	dict := fmt.Sprintf("arithmetic:\n  resources_servers:\n    arithmetic: {domain: math, host: 127.0.0.1, port: %d}\n", port)
	head := testHead(t, dict, &orchestrator.TelemetryEnv{RunID: "fleet-run-7", Env: map[string]string{
		lens.PrimaryPrefix + lens.KeyRunID:      "fleet-run-7",
		lens.PrimaryPrefix + lens.KeyEnabled:    "1",
		lens.PrimaryPrefix + lens.KeyExporter:   "file",
		lens.PrimaryPrefix + lens.KeySpanGroups: "all",
		"OTEL_SERVICE_NAME":                     "from-the-head",
	}})
	runs := t.TempDir()
	cmd := exec.Command(gymBin, "serve", "--head", head.URL, "--name", "arithmetic", "--runs-dir", runs)
	cmd.Env = append(os.Environ(),
		lens.PrimaryPrefix+lens.KeyRunID+"=this-host-only", // the fleet's wins
		"OTEL_SERVICE_NAME=this-host")                      // this host's wins
	p := testenv.Start(t, cmd, launchTimeout)
	if status, _ := p.WaitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d/", port)); status != http.StatusOK {
		t.Fatalf("GET / answered %d", status)
	}
	head.Close()
	if code := p.Wait(t); code != 0 {
		t.Fatalf("exit %d after the head went away\nstderr:\n%s", code, p.Stderr)
	}
	if !strings.Contains(p.Stderr.String(), "the head server is gone") {
		t.Errorf("no word of why it left:\n%s", p.Stderr)
	}
	file := filepath.Join(runs, "fleet-run-7", "telemetry", "arithmetic.jsonl")
	var resource map[string]any
	if err := telfile.ReadFile(file, func(r telfile.Record) error {
		if r.Resource != nil {
			resource = r.Resource.Attributes
		}
		return nil
	}); err != nil {
		t.Fatalf("the joined server's telemetry file: %v", err)
	}
	if resource["nemo.run.id"] != "fleet-run-7" || resource["nemo.gym.service_group"] != "this-host" {
		t.Errorf("resource %v: want the fleet's run id and this host's OTEL_SERVICE_NAME", resource)
	}
}

// NeMo Gym's own head server has no telemetry route: the server joins
// with its own environment's settings, and says so.
func TestServeHeadJoinsANeMoGymHead(t *testing.T) {
	port := testenv.FreePort(t)
	dict := fmt.Sprintf("arithmetic:\n  resources_servers:\n    arithmetic: {domain: math, host: 127.0.0.1, port: %d}\n", port)
	head := testHead(t, dict, nil)
	cmd := exec.Command(gymBin, "serve", "--head", head.URL+"/", "--name", "arithmetic", "--runs-dir", t.TempDir())
	p := testenv.Start(t, cmd, launchTimeout)
	if status, _ := p.WaitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d/", port)); status != http.StatusOK {
		t.Fatalf("GET / answered %d", status)
	}
	p.WaitStderr(t, "publishes no telemetry environment")
}
