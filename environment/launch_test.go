package environment_test

// Tests of an SDK program (testdata/launchenv) started as NeMo Gym's
// launcher starts a server: no flags, only NEMO_GYM_CONFIG_DICT and
// NEMO_GYM_CONFIG_PATH in the environment, a working directory of its
// own.

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gymlens/gymlens/internal/testenv"
)

// launchTimeout bounds every wait of a launch test.
const launchTimeout = 60 * time.Second

// buildLaunchEnv builds testdata/launchenv into a temporary directory.
func buildLaunchEnv(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "launchenv")
	out, err := exec.Command("go", "build", "-o", bin, "./testdata/launchenv").CombinedOutput()
	if err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

// startProgram runs bin with args and exactly the environment env, in a new
// working directory; it is killed by its PID and reaped when the test
// ends.
func startProgram(t *testing.T, bin string, env []string, args ...string) *testenv.Proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Env = t.TempDir(), env
	return testenv.Start(t, cmd, launchTimeout)
}

// serving polls GET / on port until it answers and returns the body.
func serving(t *testing.T, p *testenv.Proc, port int) string {
	t.Helper()
	_, body := p.WaitHTTP(t, "http://127.0.0.1:"+strconv.Itoa(port)+"/")
	return string(body)
}

func postTo(t *testing.T, c *http.Client, url, body string) (int, string, http.Header) {
	t.Helper()
	res, err := c.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(raw), res.Header
}

// launchDict is a fleet config with the program as instance wallet_env
// (its own keys interpolated) and an agent referring to it.
func launchDict(port int, extra string) string {
	return fmt.Sprintf(`%s
default_host: 127.0.0.1
rule: strict
wallet_env:
  resources_servers:
    wallet:
      command: [./launchenv]
      host: ${default_host}
      port: %d
      domain: other
      grading_rule: ${rule}
      threshold: ${oc.env:WALLET_THRESHOLD,0.5}
      nested: {limit: 3}
wallet_agent:
  responses_api_agents:
    simple_agent:
      port: 1
      resources_server: {type: resources_servers, name: wallet_env}
      model_server: {type: responses_api_models, name: policy_model}
`, extra, port)
}

const launchVerifyBody = `{"responses_create_params": {"input": "Say hi"}, "expected_answer": "hi",
	"response": {"id": "resp_1", "object": "response", "created_at": 1, "model": "m", "parallel_tool_calls": true,
	"tool_choice": "auto", "tools": [], "output": [{"type": "message", "id": "msg_1", "role": "assistant",
	"status": "completed", "content": [{"type": "output_text", "text": "hi", "annotations": []}]}]}}`

func TestLaunchedProgram(t *testing.T) {
	bin := buildLaunchEnv(t)
	c := &http.Client{Timeout: launchTimeout, Transport: &http.Transport{}}
	t.Cleanup(c.CloseIdleConnections)

	t.Run("serves its block's host:port", func(t *testing.T) {
		port := testenv.FreePort(t)
		p := startProgram(t, bin, []string{"NEMO_GYM_CONFIG_DICT=" + launchDict(port, ""), "NEMO_GYM_CONFIG_PATH=wallet_env"})
		if body := serving(t, p, port); body != `{"status":"ok"}` {
			t.Errorf("GET /: %s", body)
		}
		base := "http://127.0.0.1:" + strconv.Itoa(port)
		status, body, header := postTo(t, c, base+"/verify", launchVerifyBody)
		if status != http.StatusOK || !strings.Contains(body, `"reward":1`) {
			t.Fatalf("verify: %d %s", status, body)
		}
		if ck := header.Get("Set-Cookie"); !strings.HasPrefix(ck, "launchenv___wallet_env=") {
			t.Errorf("Set-Cookie %q, want the instance's cookie", ck)
		}
		// The program reads its own block, resolved, without the
		// launcher's keys; the SDK did not refuse keys it does not know.
		status, body, _ = postTo(t, c, base+"/config", `{}`)
		var got map[string]any
		if err := json.Unmarshal([]byte(body), &got); status != http.StatusOK || err != nil {
			t.Fatalf("config: %d %s", status, body)
		}
		want := map[string]any{"launched": true, "config": map[string]any{
			"grading_rule": "strict", "threshold": "0.5", "nested": map[string]any{"limit": 3.0}}}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("config %v\nwant   %v", got, want)
		}
		for _, s := range []string{"msg=serving", "instance=wallet_env", "addr=127.0.0.1:" + strconv.Itoa(port)} {
			p.WaitStderr(t, s)
		}
	})

	t.Run("dry run exits 0 without listening", func(t *testing.T) {
		port := testenv.FreePort(t)
		p := startProgram(t, bin, []string{"NEMO_GYM_CONFIG_DICT=" + launchDict(port, "dry_run: true"), "NEMO_GYM_CONFIG_PATH=wallet_env"})
		if code := p.Wait(t); code != 0 || !strings.Contains(p.Stderr.String(), "dry run") {
			t.Fatalf("exit %d; stderr:\n%s", code, p.Stderr)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			t.Fatalf("port %d taken after a dry run: %v", port, err)
		}
		ln.Close()
	})

	t.Run("flags win over the launch variables", func(t *testing.T) {
		port := testenv.FreePort(t)
		p := startProgram(t, bin, []string{"NEMO_GYM_CONFIG_DICT=" + launchDict(1, ""), "NEMO_GYM_CONFIG_PATH=wallet_env"},
			"-addr", "127.0.0.1:"+strconv.Itoa(port), "-name", "by_hand")
		serving(t, p, port)
		p.WaitStderr(t, "instance=by_hand")
	})

	for _, bad := range []struct {
		name     string
		dict     string
		instance string
		want     string
	}{
		{"not a resources server", launchDict(1, ""), "wallet_agent",
			"launchenv: wallet_agent.responses_api_agents.simple_agent: an environment is a resources_servers server, not responses_api_agents"},
		{"no host", strings.Replace(launchDict(1, ""), "default_host: 127.0.0.1", "default_host: ''", 1), "wallet_env",
			`launchenv: wallet_env.resources_servers.wallet: the block needs a host and a port to listen on (got host "", port 1)`},
		{"dict unset", "", "wallet_env", `launchenv: NEMO_GYM_CONFIG_DICT is not set, but NEMO_GYM_CONFIG_PATH is ("wallet_env")`},
		{"no such instance", launchDict(1, ""), "walet_env", `launchenv: NEMO_GYM_CONFIG_PATH: no instance "walet_env" in NEMO_GYM_CONFIG_DICT (did you mean "wallet_env"?)`},
	} {
		t.Run(bad.name, func(t *testing.T) {
			env := []string{"NEMO_GYM_CONFIG_PATH=" + bad.instance}
			if bad.dict != "" {
				env = append(env, "NEMO_GYM_CONFIG_DICT="+bad.dict)
			}
			p := startProgram(t, bin, env)
			if code := p.Wait(t); code != 2 || p.Stderr.String() != bad.want+"\n" {
				t.Errorf("exit %d\nstderr %q\nwant   %q", code, p.Stderr, bad.want+"\n")
			}
		})
	}
}
