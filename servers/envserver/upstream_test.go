package envserver_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gymlens/gymlens/internal/testenv"
	"github.com/gymlens/gymlens/internal/upstream"
)

// startUpstreamRelay runs upstream's own legacy_agent relay, under the
// launch contract, in front of agentURL, and returns its base URL. Ray is
// switched off on the class (the relay does not declare it, so it would
// start a local cluster); nothing else is changed.
func startUpstreamRelay(t *testing.T, agentURL string) string {
	t.Helper()
	python := upstream.Python(t)
	root := strings.TrimSpace(string(upstream.Run(t, time.Minute,
		"import nemo_gym, os; print(os.path.dirname(os.path.dirname(nemo_gym.__file__)))", nil)))
	dir := filepath.Join(root, "environment_servers", "legacy_agent")
	_, agentPort, _ := net.SplitHostPort(strings.TrimPrefix(agentURL, "http://"))
	port := testenv.FreePort(t)
	dict := fmt.Sprintf(`head_server: {host: 127.0.0.1, port: %d}
dry_run: false
agent:
  responses_api_agents:
    simple_agent: {entrypoint: app.py, host: 127.0.0.1, port: %s}
relay:
  environment_servers:
    legacy_agent:
      entrypoint: app.py
      host: 127.0.0.1
      port: %d
      agent_server: {type: responses_api_agents, name: agent}
`, testenv.FreePort(t), agentPort, port)
	const program = `import sys
sys.path.insert(0, sys.argv[1])
sys.argv = sys.argv[:1]
import app
app.LegacyAgentEnvironmentServer.ray_enabled = False
app.LegacyAgentEnvironmentServer.run_webserver()
`
	cmd := exec.Command(python, "-c", program, dir)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "NEMO_GYM_CONFIG_DICT="+dict, "NEMO_GYM_CONFIG_PATH=relay", "NEMO_GYM_OTEL_ENABLED=0")
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	})
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	c := plainClient(t)
	deadline := time.Now().Add(90 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/", nil)
		res, err := c.Do(req)
		cancel()
		if err == nil {
			res.Body.Close()
			return base
		}
		select {
		case <-done:
			t.Fatalf("upstream's relay exited:\n%s", logs.String())
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("upstream's relay did not answer within 90s:\n%s", logs.String())
		}
	}
}

// exchange is one /run through a relay: what the agent got and what the
// caller got back.
type exchange struct {
	agent                seen
	status               int
	body                 string
	header               http.Header
	agentCookiesReturned []string
}

func runThrough(t *testing.T, relay string, agent *fakeAgent) exchange {
	t.Helper()
	n := len(agent.requests())
	body := []byte(`{"responses_create_params": {"input": "hi"}, "x": [1,  2]}`)
	req, err := http.NewRequest(http.MethodPost, relay+"/run", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Custom", "kept")
	req.Header.Add("X-Multi", "a")
	req.Header.Add("X-Multi", "b")
	req.Header.Set("X-NeMo-Gym-Session-Token", "tok")
	req.Header.Set("Keep-Alive", "timeout=9")
	req.AddCookie(&http.Cookie{Name: "a", Value: "1"})
	req.AddCookie(&http.Cookie{Name: "b", Value: "2"})
	res, err := plainClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(res.Body)
	res.Body.Close()
	reqs := agent.requests()
	if len(reqs) != n+1 {
		t.Fatalf("the agent got %d requests, want 1", len(reqs)-n)
	}
	ex := exchange{agent: reqs[n], status: res.StatusCode, body: string(out), header: res.Header}
	for _, c := range res.Header.Values("Set-Cookie") {
		if !strings.HasPrefix(c, "LegacyAgentEnvironmentServer___") {
			ex.agentCookiesReturned = append(ex.agentCookiesReturned, c)
		}
	}
	slices.Sort(ex.agentCookiesReturned)
	return ex
}

// TestUpstreamRelayAgrees sends the same /run through upstream's
// Python relay and ours, in front of the same agent, and compares what
// the agent received (body, cookies, the caller's headers) and what the
// caller got back (status, body, the agent's cookies and headers).
func TestUpstreamRelayAgrees(t *testing.T) {
	upstream.Python(t)
	agent := newFakeAgent(t, func(w http.ResponseWriter, _ *http.Request) {
		h := w.Header()
		h.Add("Set-Cookie", "SimpleAgent___agent=one; Path=/; HttpOnly")
		h.Add("Set-Cookie", "second=two; Path=/")
		h.Set("Traceresponse", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
		h.Set("X-Agent", "yes")
		h.Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, `{"reward": 0.5,  "odd": "spacing"}`)
	})
	theirs := runThrough(t, startUpstreamRelay(t, agent.srv.URL), agent)
	ours := runThrough(t, startRelay(t, agent.srv.URL), agent)

	checks := 0
	same := func(what string, a, b any) {
		t.Helper()
		checks++
		if fmt.Sprint(a) != fmt.Sprint(b) {
			t.Errorf("%s: upstream %v, ours %v", what, a, b)
		}
	}
	same("status", theirs.status, ours.status)
	same("body", theirs.body, ours.body)
	same("agent's cookies passed back", theirs.agentCookiesReturned, ours.agentCookiesReturned)
	for _, h := range []string{"Traceresponse", "X-Agent", "Content-Type", "Keep-Alive"} {
		same("response header "+h, theirs.header.Values(h), ours.header.Values(h))
	}
	same("body the agent got", string(theirs.agent.Body), string(ours.agent.Body))
	same("cookies the agent got", theirs.agent.Cookies, ours.agent.Cookies)
	same("Cookie headers the agent got", len(theirs.agent.Header.Values("Cookie")), len(ours.agent.Header.Values("Cookie")))
	for _, h := range []string{"X-Custom", "X-Multi", "X-Nemo-Gym-Session-Token", "Content-Type", "Keep-Alive", "Connection"} {
		same("request header "+h, strings.Join(theirs.agent.Header.Values(h), ","), strings.Join(ours.agent.Header.Values(h), ","))
	}
	t.Logf("%d checks of one /run through upstream's relay and ours", checks)
}

// TestUpstreamRelayAggregateAndErrorsAgree posts the same bodies to
// upstream's relay and ours, in front of one agent that fails /run and
// some /aggregate_metrics calls, and compares status and body of each.
func TestUpstreamRelayAggregateAndErrorsAgree(t *testing.T) {
	upstream.Python(t)
	agent := newFakeAgent(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/run" {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, `"ValueError('boom')"`)
			return
		}
		_, _ = io.WriteString(w, `{"agent_metrics":{"mean/reward":0.5},"group_level_metrics":[{"k":1}],"unknown":1}`)
	})
	failing := newFakeAgent(t, func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusUnprocessableEntity)
		_, _ = io.WriteString(w, `{"detail":"it's \"bad\""}`)
	})
	relays := map[string][2]string{
		"agent":   {startUpstreamRelay(t, agent.srv.URL), startRelay(t, agent.srv.URL)},
		"failing": {startUpstreamRelay(t, failing.srv.URL), startRelay(t, failing.srv.URL)},
	}
	c := plainClient(t)
	post := func(url, body string) (int, string) {
		res, err := c.Post(url, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(res.Body)
		res.Body.Close()
		return res.StatusCode, string(out)
	}
	cases := []struct{ agent, path, body string }{
		{"agent", "/run", `{}`},
		{"agent", "/aggregate_metrics", `{"verify_responses":[{"reward":1,"_ng_task_index":0}],"other":1}`},
		{"agent", "/aggregate_metrics", `{}`},
		{"agent", "/aggregate_metrics", `{"verify_responses":{}}`},
		{"agent", "/aggregate_metrics", `{"verify_responses":[1,{"a":1},"x"]}`},
		{"agent", "/aggregate_metrics", `[]`},
		{"failing", "/aggregate_metrics", `{"verify_responses":[]}`},
	}
	agree := 0
	for _, tc := range cases {
		r := relays[tc.agent]
		s1, b1 := post(r[0]+tc.path, tc.body)
		s2, b2 := post(r[1]+tc.path, tc.body)
		// Upstream's 500 names its instance, "relay"; ours here too.
		b1 = strings.ReplaceAll(b1, "LegacyAgentEnvironmentServer___relay", "<relay>")
		b2 = strings.ReplaceAll(b2, "LegacyAgentEnvironmentServer___relay", "<relay>")
		if s1 != s2 || b1 != b2 {
			t.Errorf("%s %s %s:\nupstream %d %s\nours     %d %s", tc.agent, tc.path, tc.body, s1, b1, s2, b2)
			continue
		}
		agree++
	}
	t.Logf("%d bodies, %d agree", len(cases), agree)
}
