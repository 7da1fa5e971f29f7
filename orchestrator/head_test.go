package orchestrator_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/gymlens/gymlens/gymconfig"
	"github.com/gymlens/gymlens/internal/testenv"
	"github.com/gymlens/gymlens/orchestrator"
)

// getBody GETs url and returns the status and body.
func getBody(t *testing.T, url string) (int, []byte) {
	t.Helper()
	res, err := httpClient.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return res.StatusCode, b
}

// stubFleet is a fleet document of n stub servers (this test binary, see
// runStub) plus head, prepended as it is.
func stubFleet(t *testing.T, head string, names ...string) orchestrator.Config {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	doc := head
	for _, n := range names {
		doc += fmt.Sprintf("%s:\n  resources_servers:\n    stub:\n      command: [%q]\n", n, exe)
	}
	return mustParse(t, doc)
}

func TestHeadServer(t *testing.T) {
	testenv.ClearTelemetry(t)
	runDir := t.TempDir()
	guardRunDir(t, runDir)
	before := time.Now()
	f := startFleet(t, orchestrator.DefaultConfig(), orchestrator.Options{RunDir: runDir})
	head := f.HeadURL()
	if !strings.HasPrefix(head, "http://127.0.0.1:") {
		t.Fatalf("HeadURL() = %q", head)
	}

	if code, body := getBody(t, head+"/"); code != http.StatusOK || string(body) != `{"status":"ok"}` {
		t.Errorf("GET / = %d %s", code, body)
	}
	if code, _ := getBody(t, head+"/nothing"); code != http.StatusNotFound {
		t.Errorf("GET /nothing = %d, want 404", code)
	}

	// Read the dict the way NeMo Gym's client does: a JSON string, whose
	// value is YAML.
	code, body := getBody(t, head+orchestrator.HeadConfigPath)
	var text string
	if err := json.Unmarshal(body, &text); code != http.StatusOK || err != nil {
		t.Fatalf("GET %s = %d %.200s: %v", orchestrator.HeadConfigPath, code, body, err)
	}
	var dict map[string]any
	if err := yaml.Unmarshal([]byte(text), &dict); err != nil {
		t.Fatalf("the dict is not YAML: %v\n%s", err, text)
	}
	if text != string(f.ConfigYAML()) {
		t.Errorf("head server dict differs from the fleet's")
	}
	hs, _ := dict["head_server"].(map[string]any)
	if got := fmt.Sprintf("http://%v:%v", hs["host"], hs["port"]); got != head {
		t.Errorf("head_server in the dict = %v, want %s", hs, head)
	}
	d, err := gymconfig.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	gc, err := d.Resolve(os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	urls := map[string]string{}
	for _, s := range f.Servers() {
		urls[s.Spec.Name] = s.URL
		u, err := gc.URL(s.Spec.Name)
		if err != nil || u != s.URL {
			t.Errorf("dict URL of %s = %q, %v; want %s", s.Spec.Name, u, err, s.URL)
		}
	}
	if len(gc.Instances) != 4 {
		t.Errorf("dict instances = %+v, want 4", gc.Instances)
	}
	disallowed, _ := dict["disallowed_ports"].([]any)
	_, headPort, _ := net.SplitHostPort(strings.TrimPrefix(head, "http://"))
	if !slices.ContainsFunc(disallowed, func(v any) bool { return fmt.Sprint(v) == headPort }) {
		t.Errorf("disallowed_ports %v lacks the head port %s", disallowed, headPort)
	}

	code, body = getBody(t, head+orchestrator.HeadInstancesPath)
	var list []map[string]any
	if err := json.Unmarshal(body, &list); code != http.StatusOK || err != nil {
		t.Fatalf("GET %s = %d %s: %v", orchestrator.HeadInstancesPath, code, body, err)
	}
	if len(list) != 4 {
		t.Fatalf("%d server instances, want 4: %s", len(list), body)
	}
	fields := []string{"config_path", "dir_path", "entrypoint", "host", "name", "pid", "port", "process_name", "server_type", "start_time", "status", "uptime_seconds", "url"}
	wantImpl := map[string]string{"arithmetic": "arithmetic", "policy_model": "policy_model", "simple_agent": "simple_agent", "simple_agent_environment_server": "legacy_agent"}
	cwd, _ := os.Getwd()
	for i, in := range list {
		keys := make([]string, 0, len(in))
		for k := range in {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if !slices.Equal(keys, fields) {
			t.Errorf("instance %d has fields %v, want %v", i, keys, fields)
		}
		s := f.Servers()[i]
		name := s.Spec.Name
		if in["process_name"] != name || in["config_path"] != name || in["name"] != wantImpl[name] || in["server_type"] != s.Spec.Type {
			t.Errorf("instance %d = %v, want %s (%s, %s)", i, in, name, wantImpl[name], s.Spec.Type)
		}
		if in["pid"] != float64(s.PID) || in["url"] != urls[name] || in["status"] != "success" {
			t.Errorf("%s: pid %v url %v status %v, want %d %s success", name, in["pid"], in["url"], in["status"], s.PID, urls[name])
		}
		if u, _ := url.Parse(urls[name]); in["host"] != u.Hostname() || fmt.Sprint(in["port"]) != u.Port() {
			t.Errorf("%s: host %v port %v, URL %s", name, in["host"], in["port"], urls[name])
		}
		if in["entrypoint"] != gymBin || in["dir_path"] != cwd {
			t.Errorf("%s: entrypoint %v dir_path %v, want %s in %s", name, in["entrypoint"], in["dir_path"], gymBin, cwd)
		}
		start, _ := in["start_time"].(float64)
		if start < float64(before.Unix())-1 || start > float64(time.Now().Unix())+1 {
			t.Errorf("%s: start_time %v, want between %v and now", name, in["start_time"], before.Unix())
		}
	}

	if err := f.Stop(ctxFor(t, 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := httpClient.Get(head + "/"); err == nil {
		t.Error("the head server still answers after Stop")
	}
}

// Without head_server in the config, a taken default port is no reason to
// fail: the head server takes a free one.
func TestHeadServerFallsBackToAFreePort(t *testing.T) {
	testenv.ClearTelemetry(t)
	runDir := t.TempDir()
	guardRunDir(t, runDir)
	defaultAddr := net.JoinHostPort(gymconfig.DefaultHost, strconv.Itoa(gymconfig.DefaultHeadPort))
	if ln, err := net.Listen("tcp", defaultAddr); err == nil {
		defer ln.Close()
	} // else something holds it already, which is the case under test too
	f := startFleet(t, stubFleet(t, "", "solo"), orchestrator.Options{RunDir: runDir, ExtraEnv: []string{stubEnv + "=plain"}})
	if f.HeadURL() == "http://"+defaultAddr {
		t.Fatalf("HeadURL() = %s, which was taken", f.HeadURL())
	}
	if code, body := getBody(t, f.HeadURL()+"/"); code != http.StatusOK || string(body) != `{"status":"ok"}` {
		t.Errorf("GET / = %d %s", code, body)
	}
}

func TestHeadServerPortZero(t *testing.T) {
	testenv.ClearTelemetry(t)
	runDir := t.TempDir()
	guardRunDir(t, runDir)
	f := startFleet(t, stubFleet(t, "head_server: {port: 0}\n", "solo"), orchestrator.Options{RunDir: runDir, ExtraEnv: []string{stubEnv + "=plain"}})
	u, err := url.Parse(f.HeadURL())
	if err != nil || u.Port() == "" || u.Port() == "0" {
		t.Fatalf("HeadURL() = %q", f.HeadURL())
	}
	if code, _ := getBody(t, f.HeadURL()+"/"); code != http.StatusOK {
		t.Errorf("GET / = %d", code)
	}
	if !strings.Contains(string(f.ConfigYAML()), "port: "+u.Port()) {
		t.Errorf("the dict does not carry the head port %s:\n%s", u.Port(), f.ConfigYAML())
	}
}

// A head port the config gives that is taken by the time the fleet starts
// stops Start before any server is spawned.
func TestHeadServerGivenPortTakenSpawnsNothing(t *testing.T) {
	testenv.ClearTelemetry(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cfg := mustParse(t, fmt.Sprintf("head_server: {host: 127.0.0.1, port: %d}\n", port)+trio)
	if ln, err = net.Listen("tcp", ln.Addr().String()); err != nil {
		t.Skipf("port %d was taken meanwhile: %v", port, err)
	}
	defer ln.Close()
	dir := t.TempDir()
	mark := filepath.Join(dir, "spawned")
	bin := writeScript(t, dir, "fake-gym", "touch '"+mark+"'\nexit 1\n")
	f, err := orchestrator.Start(ctxFor(t, 30*time.Second), cfg, orchestrator.Options{Binary: bin, RunDir: filepath.Join(dir, "run"), Logger: testLogger(t)})
	if f != nil {
		t.Error("Start returned a fleet although the head port was taken")
	}
	wantErr(t, err, fmt.Sprintf("head_server: 127.0.0.1:%d", port))
	if _, err := os.Stat(mark); err == nil {
		t.Error("a server was spawned although the head server could not listen")
	}
}
