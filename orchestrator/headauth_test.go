package orchestrator_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/internal/testenv"
	"github.com/gymlens/gymlens/live"
	"github.com/gymlens/gymlens/orchestrator"
)

// headGet GETs url with the Authorization header auth ("" for none) and
// returns the status and body.
func headGet(t *testing.T, url, auth string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	res, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, string(b)
}

// The head token on a head server bound to loopback: written 0600 to the
// run directory and handed to every server; NeMo Gym's routes answer
// without it (upstream's clients on this host send none), gymlens's own
// answer only with it; a wrong token, another scheme or a token with a
// character more is refused; the telemetry environment holds no secret
// value, only the secret's name.
func TestHeadTokenOnLoopback(t *testing.T) {
	testenv.ClearTelemetry(t)
	const token = "planted-head-token-7f3a9c2e"
	const header = "planted-otlp-header-b81d"
	const password = "planted-endpoint-password-5e0c"
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer "+header)
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://user:"+password+"@127.0.0.1:4318/v1/traces")
	t.Setenv("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "http/protobuf")
	runDir := t.TempDir()
	guardRunDir(t, runDir)
	f := startFleet(t, stubFleet(t, "", "a"), orchestrator.Options{RunDir: runDir, HeadToken: token, ExtraEnv: []string{stubEnv + "=plain"}})
	head := f.HeadURL()

	path := filepath.Join(runDir, contract.RunHeadTokenFile)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600", path, fi.Mode().Perm())
	}
	if b, _ := os.ReadFile(path); strings.TrimSpace(string(b)) != token {
		t.Errorf("%s holds %q, want the token", path, b)
	}

	// Every server gets the token in its environment.
	for _, in := range f.Servers() {
		env, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(in.PID), "environ"))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(strings.Split(string(env), "\x00"), contract.EnvHeadToken+"="+token) {
			t.Errorf("server %s (pid %d) was not given %s", in.Spec.Name, in.PID, contract.EnvHeadToken)
		}
	}

	right := "Bearer " + token
	for _, c := range []struct {
		route    string
		upstream bool
		ok       int
	}{
		{"/", true, http.StatusOK},
		{orchestrator.HeadConfigPath, true, http.StatusOK},
		{orchestrator.HeadInstancesPath, true, http.StatusOK},
		{"/nothing", true, http.StatusNotFound},
		{orchestrator.HeadTelemetryPath, false, http.StatusOK},
		{"/gymlens/nothing", false, http.StatusNotFound},
		// POST only: a GET finds nothing, behind the token as well.
		{orchestrator.HeadAccountPath, false, http.StatusNotFound},
		{orchestrator.HeadStatusSourcePath, false, http.StatusNotFound},
		// No run is shown yet: 503, behind the token.
		{live.StatusPath, false, http.StatusServiceUnavailable},
	} {
		for _, auth := range []string{"", "Bearer wrong-token-0000000000", "Basic " + token, "Bearer " + token + "x", right, "bearer  " + token} {
			want := c.ok
			if !c.upstream && auth != right && auth != "bearer  "+token {
				want = http.StatusUnauthorized
			}
			code, body := headGet(t, head+c.route, auth)
			if code != want {
				t.Errorf("GET %s with %q: %d %.120s, want %d", c.route, auth, code, body, want)
			}
			if code == http.StatusUnauthorized && !strings.Contains(body, contract.EnvHeadToken) {
				t.Errorf("GET %s: the 401 does not say what it wants: %s", c.route, body)
			}
		}
	}

	code, body := headGet(t, head+orchestrator.HeadTelemetryPath, right)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", orchestrator.HeadTelemetryPath, code, body)
	}
	for _, secret := range []string{header, password, token} {
		if strings.Contains(body, secret) {
			t.Errorf("the telemetry environment holds a secret value: %s", body)
		}
	}
	var tel orchestrator.TelemetryEnv
	if err := json.Unmarshal([]byte(body), &tel); err != nil {
		t.Fatal(err)
	}
	if want := []string{"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"}; strings.Join(tel.Secrets, ",") != strings.Join(want, ",") {
		t.Errorf("secrets %v, want %v", tel.Secrets, want)
	}
	if tel.Env["OTEL_EXPORTER_OTLP_METRICS_PROTOCOL"] != "http/protobuf" {
		t.Errorf("a setting that is no secret is missing: %v", tel.Env)
	}
	if got := f.JoinCommand("a"); strings.Contains(got, token) || !strings.Contains(got, "--head-token-file") {
		t.Errorf("JoinCommand = %q: want the token's file, never the token", got)
	}
}

// A generated token when none is given: long and random, different per
// fleet; a given one that cannot travel in a header is refused before
// anything starts.
func TestHeadTokenGeneratedAndChecked(t *testing.T) {
	testenv.ClearTelemetry(t)
	var tokens []string
	for range 2 {
		runDir := t.TempDir()
		guardRunDir(t, runDir)
		f := startFleet(t, stubFleet(t, "", "a"), orchestrator.Options{RunDir: runDir, ExtraEnv: []string{stubEnv + "=plain"}})
		b, err := os.ReadFile(filepath.Join(runDir, contract.RunHeadTokenFile))
		if err != nil {
			t.Fatal(err)
		}
		tok := strings.TrimSpace(string(b))
		if len(tok) != 64 {
			t.Errorf("generated token %q: want 64 hex characters", tok)
		}
		if code, _ := headGet(t, f.HeadURL()+orchestrator.HeadTelemetryPath, "Bearer "+tok); code != http.StatusOK {
			t.Errorf("the generated token is refused: %d", code)
		}
		tokens = append(tokens, tok)
	}
	if tokens[0] == tokens[1] {
		t.Error("two fleets got the same token")
	}
	for _, bad := range []string{"short", "has a space in it somewhere", "tab\tinside-the-token-xx"} {
		if err := orchestrator.CheckHeadToken(bad); err == nil || !strings.Contains(err.Error(), contract.EnvHeadToken) {
			t.Errorf("CheckHeadToken(%q) = %v, want an error naming %s", bad, err, contract.EnvHeadToken)
		}
	}
	if _, err := mustParse(t, orchestrator.HeadOpenKey+": maybe\na:\n  resources_servers:\n    stub: {command: [x]}\n").HeadOpen(); err == nil {
		t.Errorf("%s: maybe was accepted", orchestrator.HeadOpenKey)
	}
}
