package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/lens/telfile"
)

// multiHostFleet puts the agent on the head's host, the model server on
// host 2 and the resources server on host 3 (HOST1..HOST3 are replaced by
// the simulated hosts' addresses).
const multiHostFleet = `
head_server: {host: HOST1, port: 11000}
policy_api_key: sk-e2e-never-written
arithmetic:
  resources_servers:
    arithmetic: {domain: math, host: HOST3, port: 12001}
policy_model:
  responses_api_models:
    policy_model: {correct_probability: 0.7, host: HOST2, port: 12002}
simple_agent:
  responses_api_agents:
    simple_agent: {}
telemetry:
  enabled: true
  exporter: file
  span_groups: all
`

// TestServersOnOtherHosts runs one fleet over three simulated hosts: the
// orchestrator and the agent on the head's host, the model server and the
// resources server each on a host of its own, started there with
// `gymlens serve --head`. Every rollout is one trace across the three hosts,
// each hop a CLIENT span on one side and its SERVER child on the other;
// the joined servers take the fleet's run id and leave when the run ends.
// Then, with `gymlens env start`, the head lists the joined servers in
// /server_instances, and when host 3's server is killed the fleet drops
// it within the liveness bound and gym.servers.active goes from 4 to 3
// (the agent's relay, generated on the head's host, counts too).
func TestServersOnOtherHosts(t *testing.T) {
	lab := newNetLab(t, 3)
	head, hostB, hostC := lab.hosts[0], lab.hosts[1], lab.hosts[2]
	dir := t.TempDir()
	// The peers by host name, resolved on each host, as a cluster's DNS
	// would; the head by address.
	cfgText := strings.NewReplacer("HOST1", head.ip, "HOST2", hostB.name, "HOST3", hostC.name).Replace(multiHostFleet)
	cfg := writeFile(t, filepath.Join(dir, "fleet.yaml"), cfgText)
	headURL := "http://" + head.ip + ":11000"
	// The head binds an address other than loopback, so every route of it
	// wants the head token: the orchestrator takes it from the
	// environment, the model's host gets it the same way, the resources
	// server's host as a copy of the file.
	const token = "e2e-head-token-4b9d0c7a1f"
	tokenFile := writeFile(t, filepath.Join(dir, "head_token_copy"), token+"\n")
	env := gymEnv("NEMO_GYM_MAX_ROLLOUT_ATTEMPTS=1", contract.EnvHeadToken+"="+token)
	envNoToken := gymEnv("NEMO_GYM_MAX_ROLLOUT_ATTEMPTS=1")

	join := func(h labHost, name, runs string) *gymProc {
		if name == "arithmetic" {
			return startProc(t, envNoToken, &lineLog{}, &lineLog{},
				h.inNS(gymBin, "serve", "--head", headURL, "--name", name, "--runs-dir", runs, "--head-token-file", tokenFile)...)
		}
		return startProc(t, env, &lineLog{}, &lineLog{},
			h.inNS(gymBin, "serve", "--head", headURL, "--name", name, "--runs-dir", runs)...)
	}

	t.Run("run", func(t *testing.T) {
		runsHead, runsB, runsC := filepath.Join(dir, "runs-head"), filepath.Join(dir, "runs-b"), filepath.Join(dir, "runs-c")
		// Started before the orchestrator: they wait for its head server.
		model := join(hostB, "policy_model", runsB)
		res := join(hostC, "arithmetic", runsC)
		const rollouts = 12
		run := startProc(t, env, &lineLog{}, &lineLog{}, head.inNS(gymBin, "run", "--config", cfg,
			"--rollouts", fmt.Sprint(rollouts), "--concurrency", "4", "--runs-dir", runsHead, "--quiet")...)
		if code := run.wait(t, 3*time.Minute); code != 0 {
			t.Fatalf("gymlens run exited %d\nstdout:\n%s\nstderr:\n%s\nmodel host stderr:\n%s\nresources host stderr:\n%s",
				code, run.stdout, tail(run.stderr.String(), 40), tail(model.stderr.String(), 20), tail(res.stderr.String(), 20))
		}
		// The head told the joined servers the fleet was stopping, and
		// each left, drained and flushed, and handed the head its
		// telemetry account before the head server closed.
		for _, p := range []*gymProc{model, res} {
			if code := p.wait(t, 45*time.Second); code != 0 {
				t.Fatalf("joined server exited %d\nstderr:\n%s", code, tail(p.stderr.String(), 30))
			}
			for _, want := range []string{"the fleet is stopping; leaving it", "telemetry account handed to the head server"} {
				if !strings.Contains(p.stderr.String(), want) {
					t.Errorf("joined server's log lacks %q:\n%s", want, tail(p.stderr.String(), 10))
				}
			}
		}

		runDirHead := runDir(t, runsHead)
		runID := filepath.Base(runDirHead)
		procs := readRun(t, runDirHead)
		// The run's summary covers the servers on the other hosts: their
		// accounts are in the head's run directory, and each counts the
		// spans that server wrote to its own file on its own host.
		remoteSpans := map[string]int{}
		for name, runs := range map[string]string{"policy_model": runsB, "arithmetic": runsC} {
			remoteSpans[name] = len(readRun(t, filepath.Join(runs, runID))[name].spans)
		}
		for name, n := range remoteSpans {
			p := procs[name]
			if p == nil {
				t.Fatalf("no telemetry account of %s in the head's run directory; have %v", name, names(procs))
			}
			if len(p.spans) != 0 {
				t.Errorf("the head's copy of %s's telemetry holds %d spans, want its account only", name, len(p.spans))
			}
			exported := p.lastMetric(contract.SDKSpanExported)
			if exported == nil {
				t.Fatalf("%s's account in the head's run directory has no %s", name, contract.SDKSpanExported)
			}
			var ok, lost int64
			for _, pt := range exported.Points {
				v, _ := pt.Value.Int64()
				if pt.Attributes[contract.AttrErrorType] == nil {
					ok += v
				} else {
					lost += v
				}
			}
			if ok != int64(n) || lost != 0 || n == 0 {
				t.Errorf("%s's account: %d spans exported, %d lost; its own file holds %d", name, ok, lost, n)
			}
			if p.resource["nemo.run.id"] != runID {
				t.Errorf("%s's account names run %v, want %s", name, p.resource["nemo.run.id"], runID)
			}
		}
		accounted := 0
		for _, p := range procs {
			if p.lastMetric(contract.SDKSpanExported) != nil {
				accounted++
			}
		}
		if want := fmt.Sprintf("telemetry lost no spans (%d processes accounted for", accounted); accounted < 5 || !strings.Contains(run.stdout.String(), want) {
			t.Errorf("gymlens run's summary lacks %q (the head's host's processes and both others):\n%s", want, run.stdout)
		}
		// Same run id on every host: each joined server's file is under
		// runs/<the fleet's run id>/ on its own host.
		for name, runs := range map[string]string{"policy_model": runsB, "arithmetic": runsC} {
			if got := filepath.Base(runDir(t, runs)); got != runID {
				t.Fatalf("%s's run directory is %s, the fleet's run id is %s", name, got, runID)
			}
			for n, p := range readRun(t, filepath.Join(runs, runID)) {
				procs[n] = p
			}
		}
		for _, name := range []string{"orchestrator", "simple_agent", "policy_model", "arithmetic"} {
			p := procs[name]
			if p == nil {
				t.Fatalf("no telemetry from %s; have %v", name, names(procs))
			}
			if got := p.resource["nemo.run.id"]; got != runID {
				t.Errorf("%s's nemo.run.id is %v, want %s", name, got, runID)
			}
		}

		// Each rollout trace reaches both other hosts, every SERVER span
		// there the child of a CLIENT span of the agent's.
		agentClients := map[string]*telfile.Span{}
		var rolloutTraces []string
		for _, s := range procs["simple_agent"].spans {
			if s.Kind == telfile.KindClient {
				agentClients[s.SpanID] = s
			}
			if s.Name == "gym.rollout" {
				rolloutTraces = append(rolloutTraces, s.TraceID)
			}
		}
		if len(rolloutTraces) != rollouts {
			t.Fatalf("%d gym.rollout spans, want %d", len(rolloutTraces), rollouts)
		}
		for _, name := range []string{"policy_model", "arithmetic"} {
			inTrace := map[string]bool{}
			servers := 0
			for _, s := range procs[name].spans {
				if s.Kind != telfile.KindServer {
					continue
				}
				servers++
				inTrace[s.TraceID] = true
				parent := agentClients[s.ParentSpanID]
				if parent == nil || parent.TraceID != s.TraceID || !s.ParentRemote {
					t.Errorf("%s SERVER span %s (%s) has no CLIENT parent in the agent's trace", name, s.Name, s.SpanID)
				}
			}
			for _, tr := range rolloutTraces {
				if !inTrace[tr] {
					t.Errorf("rollout trace %s has no span from %s (on its own host)", tr, name)
				}
			}
			t.Logf("%s: %d SERVER spans, all children of the agent's CLIENT spans", name, servers)
		}
	})

	t.Run("liveness", func(t *testing.T) {
		runsHead := filepath.Join(dir, "env-head")
		model := join(hostB, "policy_model", filepath.Join(dir, "env-b"))
		res := join(hostC, "arithmetic", filepath.Join(dir, "env-c"))
		stderr := &lineLog{}
		fleet := startProc(t, env, &lineLog{}, stderr, head.inNS(gymBin, "env", "start", "--config", cfg, "--runs-dir", runsHead)...)
		client := head.client(5 * time.Second)
		instances := func() map[string]map[string]any {
			req, err := http.NewRequest(http.MethodGet, headURL+"/server_instances", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+token)
			res, err := client.Do(req)
			if err != nil {
				return nil
			}
			defer res.Body.Close()
			var list []map[string]any
			if json.NewDecoder(res.Body).Decode(&list) != nil {
				return nil
			}
			out := map[string]map[string]any{}
			for _, in := range list {
				out[fmt.Sprint(in["config_path"])] = in
			}
			return out
		}
		var got map[string]map[string]any
		waitFor(t, 2*time.Minute, "the head to list four running servers (three and the agent's relay)", func() bool {
			got = instances()
			return len(got) == 4 && got["arithmetic"]["status"] == "success" && got["policy_model"]["status"] == "success"
		})
		for name, h := range map[string]labHost{"policy_model": hostB, "arithmetic": hostC} {
			if got[name]["host"] != h.name {
				t.Errorf("/server_instances: %s host %v, want %s", name, got[name]["host"], h.name)
			}
			if pid, ok := got[name]["pid"]; !ok || pid != nil {
				t.Errorf("/server_instances: %s pid %v, want null (a process on another host)", name, pid)
			}
		}

		// From another host, every route of the head wants the token: NeMo
		// Gym's too, the head being bound to an address other than
		// loopback.
		other := hostB.client(5 * time.Second)
		for _, route := range []string{"/", "/global_config_dict_yaml", "/server_instances", "/gymlens/telemetry_env", "/nothing"} {
			for _, auth := range []string{"", "Bearer wrong-token-000000000", "Bearer " + token} {
				req, err := http.NewRequest(http.MethodGet, headURL+route, nil)
				if err != nil {
					t.Fatal(err)
				}
				if auth != "" {
					req.Header.Set("Authorization", auth)
				}
				res, err := other.Do(req)
				if err != nil {
					t.Fatalf("GET %s from host 2: %v", route, err)
				}
				body, _ := io.ReadAll(res.Body)
				res.Body.Close()
				want := http.StatusUnauthorized
				if auth == "Bearer "+token {
					want = http.StatusOK
					if route == "/nothing" {
						want = http.StatusNotFound
					}
				}
				if res.StatusCode != want {
					t.Errorf("GET %s from host 2 with %q: %d %.100s, want %d", route, auth, res.StatusCode, body, want)
				}
				if res.StatusCode != http.StatusOK && strings.Contains(string(body), "sk-e2e-never-written") {
					t.Errorf("GET %s from host 2 with %q gave the config's secret away", route, auth)
				}
			}
		}

		killed := time.Now()
		if err := syscall.Kill(res.cmd.Process.Pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		// Liveness: 3 failed probes, 2 s apart, each up to 2 s: 12 s.
		const bound = 12*time.Second + 5*time.Second
		waitFor(t, bound, "the fleet to drop host 3's server", func() bool {
			return strings.Contains(stderr.String(), "server arithmetic") && strings.Contains(stderr.String(), "dropped from the fleet")
		})
		t.Logf("host 3's server dropped %s after SIGKILL (bound %s)", time.Since(killed).Round(100*time.Millisecond), bound)
		if got := instances(); got["arithmetic"]["status"] != "connection_error" || got["policy_model"]["status"] != "success" {
			t.Errorf("/server_instances after the kill: arithmetic %v, policy_model %v", got["arithmetic"]["status"], got["policy_model"]["status"])
		}
		_ = fleet.cmd.Process.Signal(syscall.SIGTERM)
		fleet.wait(t, time.Minute)
		if code := model.wait(t, 45*time.Second); code != 0 {
			t.Errorf("the model server exited %d after the fleet stopped:\n%s", code, tail(model.stderr.String(), 20))
		}
		orch := readRun(t, runDir(t, runsHead))["orchestrator"]
		values := orch.metricValues("gym.servers.active")
		if !slices.Contains(values, 4) || !slices.Contains(values, 3) || slices.Index(values, 3) < slices.Index(values, 4) {
			t.Errorf("gym.servers.active exported %v, want 4 then 3", values)
		}
		t.Logf("gym.servers.active: %v", values)
	})
}

// waitFor polls cond every 200 ms until it holds, failing the test with
// what after bound.
func waitFor(t *testing.T, bound time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", bound, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
