package main

// Tests of `gymlens serve` started as NeMo Gym's launcher starts a server:
// no arguments, only NEMO_GYM_CONFIG_DICT and NEMO_GYM_CONFIG_PATH in the
// environment, and a working directory of its own.

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gymlens/gymlens/internal/testenv"
)

// gymBin is the gymlens binary the launch tests start, built once by TestMain.
var gymBin string

func TestMain(m *testing.M) {
	// A fuzzing worker runs only a fuzz target, and no fuzz target starts
	// the binary: do not build it once per worker.
	flag.Parse()
	if f := flag.Lookup("test.fuzzworker"); f != nil && f.Value.String() == "true" {
		os.Exit(m.Run())
	}
	os.Exit(testenv.RunWithGym(m, "gym-launch-test-", ".", &gymBin))
}

// launchTimeout bounds every wait of a launch test: a server getting
// ready, a process exiting, one request.
const launchTimeout = 60 * time.Second

// launched is one process started under the launch contract.
type launched struct{ *testenv.Proc }

// launch starts `gymlens serve` with no arguments, in a new working
// directory, with an environment holding only the two launch variables
// (dict unset when it is "") and env ("VAR=value"). The process is killed
// by its PID and reaped when the test ends.
func launch(t *testing.T, dict, instance string, env ...string) *launched {
	t.Helper()
	cmd := exec.Command(gymBin, "serve")
	cmd.Dir = t.TempDir()
	cmd.Env = append([]string{"NEMO_GYM_CONFIG_PATH=" + instance}, env...)
	if dict != "" {
		cmd.Env = append(cmd.Env, "NEMO_GYM_CONFIG_DICT="+dict)
	}
	return &launched{testenv.Start(t, cmd, launchTimeout)}
}

// httpClient is a client of the test's own with a bounded timeout.
func httpClient(t *testing.T) *http.Client {
	c := &http.Client{Timeout: launchTimeout, Transport: &http.Transport{}}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// waitServing polls GET http://127.0.0.1:port/ until it answers, as the
// launcher does, and returns the body; the process exiting first, or an
// answer other than 200, fails the test.
func (p *launched) waitServing(t *testing.T, port int) []byte {
	t.Helper()
	status, body := p.WaitHTTP(t, "http://127.0.0.1:"+strconv.Itoa(port)+"/")
	if status != http.StatusOK {
		t.Fatalf("GET /: status %d: %s", status, body)
	}
	return body
}

// postJSON posts body to url and returns the status and the decoded
// answer.
func postJSON(t *testing.T, url, body string) (int, map[string]any) {
	t.Helper()
	res, err := httpClient(t).Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("POST %s: %d %s: %v", url, res.StatusCode, raw, err)
	}
	return res.StatusCode, m
}

// fleetDict is a whole fleet's config as a launcher hands it over:
// arithmetic, policy_model and simple_agent at the given ports, with
// interpolations left for the servers to resolve (the agent's max_steps
// from a top-level scalar, the model's seed from the environment with a
// default, its probability from the environment).
func fleetDict(resources, model, agent int, extra string) string {
	return fmt.Sprintf(`# a fleet, interpolations unresolved
head_server: {host: 127.0.0.1, port: 11000}
default_host: 127.0.0.1
steps: 4
policy_api_key: sk-launch-test-secret
%s
math:
  resources_servers:
    arithmetic:
      entrypoint: app.py
      domain: math
      host: ${default_host}
      port: %d
policy_model:
  responses_api_models:
    policy_model:
      host: 127.0.0.1
      port: %d
      seed: ${oc.env:MODEL_SEED,7}
      correct_probability: ${oc.env:MODEL_P}
math_simple_agent:
  responses_api_agents:
    simple_agent:
      host: 127.0.0.1
      port: %d
      max_steps: ${steps}
      resources_server: {type: resources_servers, name: math}
      model_server: {type: responses_api_models, name: policy_model}
      datasets: [{name: example, type: example, jsonl_fpath: data/example.jsonl}]
`, extra, resources, model, agent)
}

// arithmeticRow is a dataset row for arithmetic.
const arithmeticRow = `{"responses_create_params": {"input": [{"role": "user", "content": "What is 17 + 25?"}]}, "expected_answer": "42"}`

func TestLaunchResourcesServerBindsItsBlocksPort(t *testing.T) {
	port := testenv.FreePort(t)
	dict := "exact:\n  resources_servers:\n    string_match:\n      host: 127.0.0.1\n      port: ${oc.env:EXACT_PORT}\n      entrypoint: app.py\n"
	p := launch(t, dict, "exact", "EXACT_PORT="+strconv.Itoa(port))
	if body := p.waitServing(t, port); string(body) != `{"status":"ok"}` {
		t.Errorf("GET /: %s, want {\"status\":\"ok\"}", body)
	}
	if want := fmt.Sprintf(`GYM_READY {"addr":"127.0.0.1:%d",`, port); !strings.HasPrefix(p.Stdout.String(), want) {
		t.Errorf("stdout %q, want it to start %q", p.Stdout, want)
	}
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	status, got := postJSON(t, base+"/verify", `{"responses_create_params": {"input": "Say hi"}, "expected_answer": "hi",
		"extraction_mode": "full_response", "response": {"id": "resp_1", "object": "response", "created_at": 1, "model": "m", "parallel_tool_calls": true,
		"tool_choice": "auto", "tools": [], "output": [{"type": "message", "id": "msg_1", "role": "assistant",
		"status": "completed", "content": [{"type": "output_text", "text": "hi", "annotations": []}]}]}}`)
	if status != http.StatusOK || got["reward"] != 1.0 {
		t.Fatalf("verify: %d %v", status, got)
	}
	// The instance name names the server: its session cookie and log.
	res, err := httpClient(t).Get(base + "/reverify_mode")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if c := res.Header.Get("Set-Cookie"); !strings.HasPrefix(c, "string_match___exact=") {
		t.Errorf("Set-Cookie %q, want the string_match___exact cookie", c)
	}
	p.WaitStderr(t, "server=exact") // the log names the instance
}

func TestLaunchFleetAgentFindsItsPeersByName(t *testing.T) {
	rp, mp, ap := testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t)
	dict := fleetDict(rp, mp, ap, "")
	env := []string{"MODEL_P=1"}
	procs := map[int]*launched{
		rp: launch(t, dict, "math", env...),
		mp: launch(t, dict, "policy_model", env...),
		ap: launch(t, dict, "math_simple_agent", env...),
	}
	for port, p := range procs {
		p.waitServing(t, port)
	}
	status, got := postJSON(t, fmt.Sprintf("http://127.0.0.1:%d/run", ap), arithmeticRow)
	if status != http.StatusOK || got["reward"] != 1.0 {
		t.Fatalf("run: %d %v\nagent stderr:\n%s", status, got, procs[ap].Stderr)
	}
	for _, p := range procs {
		for _, out := range []string{p.Stdout.String(), p.Stderr.String()} {
			if strings.Contains(out, "sk-launch-test-secret") {
				t.Errorf("a server printed the API key:\n%s", out)
			}
		}
	}
}

// TestLaunchServesDespiteUnresolvableValuesElsewhere: as in NeMo Gym, a
// server resolves only its own block and its peers' host and port, so
// variables only other servers need may be unset in its environment.
func TestLaunchServesDespiteUnresolvableValuesElsewhere(t *testing.T) {
	rp, mp, ap := testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t)
	const judge = `judge_key: ${oc.env:GYM_LAUNCH_TEST_UNSET_VAR}
judge_model:
  responses_api_models:
    policy_model:
      host: 127.0.0.1
      port: 1
      api_key: ${oc.env:GYM_LAUNCH_TEST_UNSET_VAR}`
	// MODEL_P is unset too: policy_model's correct_probability does not
	// resolve, and neither the resources server nor the agent reads it.
	dict := fleetDict(rp, mp, ap, judge)
	res := launch(t, dict, "math")
	agent := launch(t, dict, "math_simple_agent")
	res.waitServing(t, rp)
	agent.waitServing(t, ap)
	for name, p := range map[string]*launched{"math": res, "math_simple_agent": agent} {
		if !strings.HasPrefix(p.Stdout.String(), "GYM_READY ") {
			t.Errorf("%s: stdout %q, want the ready line", name, p.Stdout)
		}
	}
	// The servers that do read them still refuse to start.
	for _, c := range []struct{ instance, want string }{
		{"judge_model", `gymlens serve: NEMO_GYM_CONFIG_DICT: judge_model.responses_api_models.policy_model.api_key: ${oc.env:GYM_LAUNCH_TEST_UNSET_VAR}: oc.env: environment variable "GYM_LAUNCH_TEST_UNSET_VAR" is not set`},
		{"policy_model", `gymlens serve: NEMO_GYM_CONFIG_DICT: policy_model.responses_api_models.policy_model.correct_probability: ${oc.env:MODEL_P}: oc.env: environment variable "MODEL_P" is not set`},
	} {
		p := launch(t, dict, c.instance)
		if code := p.Wait(t); code != 2 || p.Stderr.String() != c.want+"\n" {
			t.Errorf("%s: exit %d\nstderr %q\nwant   %q", c.instance, code, p.Stderr, c.want+"\n")
		}
	}
}

func TestLaunchDryRunExitsWithoutListening(t *testing.T) {
	rp, mp, ap := testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t)
	// No peer runs: a dry run checks the config, not the fleet.
	dict := fleetDict(rp, mp, ap, "dry_run: true")
	for _, instance := range []string{"math", "policy_model", "math_simple_agent"} {
		p := launch(t, dict, instance, "MODEL_P=0.5")
		if code := p.Wait(t); code != 0 {
			t.Errorf("%s: dry run exited %d; stderr:\n%s", instance, code, p.Stderr)
		}
		if p.Stdout.String() != "" || !strings.Contains(p.Stderr.String(), "dry run") {
			t.Errorf("%s: stdout %q stderr %q, want no ready line and a dry run log line", instance, p.Stdout, p.Stderr)
		}
	}
	// Nothing listened: every port is still free.
	for _, port := range []int{rp, mp, ap} {
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			t.Errorf("port %d: %v", port, err)
			continue
		}
		ln.Close()
	}
}

func TestLaunchBadConfigsExit2WithOneLine(t *testing.T) {
	const agent = "math_simple_agent.responses_api_agents.simple_agent"
	good := fleetDict(10001, 10002, 10003, "")
	p1 := []string{"MODEL_P=1"}
	for _, c := range []struct {
		name, dict, instance string
		env                  []string
		want                 string
	}{
		{"unknown impl", strings.Replace(good, "    arithmetic:", "    arithmatic:", 1), "math", p1,
			`gymlens serve: math: no resources_servers implementation "arithmatic" (did you mean "arithmetic"? known: arithmetic, string_match, mcqa, equivalence_rule, counter; a server of your own needs a command: list in its block)`},
		{"unknown impl, nothing near", strings.Replace(good, "    arithmetic:", "    wallet:", 1), "math", p1,
			`gymlens serve: math: no resources_servers implementation "wallet" (known: arithmetic, string_match, mcqa, equivalence_rule, counter; a server of your own needs a command: list in its block)`},
		{"unknown key", strings.Replace(good, "max_steps:", "max_stpes:", 1), "math_simple_agent", p1,
			`gymlens serve: ` + agent + `.max_stpes: unknown key (did you mean "max_steps"?)`},
		{"bad value from oc.env", good, "policy_model", []string{"MODEL_P=1", "MODEL_SEED=seven"},
			`gymlens serve: policy_model.responses_api_models.policy_model.seed: want an integer, got string "seven"`},
		{"sensitive value", strings.Replace(good, "      seed: ${oc.env:MODEL_SEED,7}\n", "      seed: 1\n      upstream: {api_key: [\"${policy_api_key}\"]}\n", 1), "policy_model", p1,
			`gymlens serve: policy_model.responses_api_models.policy_model.upstream.api_key: want a string, got array`},
		{"invalid value", good, "policy_model", []string{"MODEL_P=1.5"},
			`gymlens serve: policy_model.responses_api_models.policy_model: model: correct_probability must be in [0, 1], got 1.5`},
		{"missing peer", strings.Replace(good, "name: math}", "name: maths}", 1), "math_simple_agent", p1,
			`gymlens serve: instance "math_simple_agent" field "resources_server" references resources_servers "maths", which is not defined (did you mean "math"?)`},
		{"no reference", strings.Replace(good, "      model_server:", "      modelserver:", 1), "math_simple_agent", p1,
			`gymlens serve: instance "math_simple_agent" has no reference field "model_server" (did you mean "modelserver"?)`},
		{"no port", strings.Replace(good, "      port: 10001\n", "", 1), "math", p1,
			`gymlens serve: math.resources_servers.arithmetic: the block needs a host and a port to listen on (got host "127.0.0.1", port 0)`},
		{"dict unset", "", "math", p1, `gymlens serve: NEMO_GYM_CONFIG_DICT is not set, but NEMO_GYM_CONFIG_PATH is ("math")`},
		{"broken yaml", good + "  oops: [\n", "math", p1,
			`gymlens serve: NEMO_GYM_CONFIG_DICT: parse config YAML: yaml: line 30: did not find expected node content`},
		{"no such instance", good, "maths", p1,
			`gymlens serve: NEMO_GYM_CONFIG_PATH: no instance "maths" in NEMO_GYM_CONFIG_DICT (did you mean "math"?)`},
		{"oc.env unset", good, "policy_model", nil,
			`gymlens serve: NEMO_GYM_CONFIG_DICT: policy_model.responses_api_models.policy_model.correct_probability: ${oc.env:MODEL_P}: oc.env: environment variable "MODEL_P" is not set`},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := launch(t, c.dict, c.instance, c.env...)
			code := p.Wait(t)
			if code != 2 || p.Stderr.String() != c.want+"\n" || p.Stdout.String() != "" {
				t.Errorf("exit %d\nstderr %q\nwant   %q\nstdout %q", code, p.Stderr, c.want+"\n", p.Stdout)
			}
		})
	}
}

func TestServeWithoutArgumentsOrLaunchIsAUsageError(t *testing.T) {
	testenv.Unset(t, "NEMO_GYM_CONFIG_PATH", "NEMO_GYM_CONFIG_DICT")
	code, out, errOut := runGym(t, "serve")
	if code != 2 || out != "" || errOut != "gymlens serve: missing server type\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// Arguments mean flag mode even with the launch variables set.
	t.Setenv("NEMO_GYM_CONFIG_PATH", "math")
	code, _, errOut = runGym(t, "serve", "resources_servers")
	if code != 2 || errOut != "gymlens serve: --name is required\n" {
		t.Errorf("flag mode: exit %d, stderr %q", code, errOut)
	}
}

func TestServeHelpDescribesTheLaunchContract(t *testing.T) {
	code, out, _ := runGym(t, "serve", "-h")
	if code != 0 || !strings.Contains(out, "NEMO_GYM_CONFIG_DICT") || !strings.Contains(out, "dry_run") {
		t.Errorf("exit %d, help:\n%s", code, out)
	}
}

// TestServeBadLimitIsAUsageError: a GYM_SERVER_* variable the runtime
// cannot take is exit 2, naming the variable and what it accepts, before
// the server listens.
func TestServeBadLimitIsAUsageError(t *testing.T) {
	testenv.Unset(t, "NEMO_GYM_CONFIG_PATH", "NEMO_GYM_CONFIG_DICT")
	t.Setenv("GYM_SERVER_IDLE_TIMEOUT", "10")
	code, out, errOut := runGym(t, "serve", "resources_servers", "--name", "math", "--addr", "127.0.0.1:0")
	if code != 2 || out != "" || !strings.Contains(errOut, `GYM_SERVER_IDLE_TIMEOUT="10": want a duration above 0`) {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	t.Setenv("GYM_SERVER_IDLE_TIMEOUT", "")
	code, _, errOut = runGym(t, "serve", "resources_servers", "--name", "math", "--max-body-bytes", "0")
	if code != 2 || !strings.Contains(errOut, "--max-body-bytes 0: want a whole number of bytes above 0") {
		t.Errorf("--max-body-bytes 0: exit %d, stderr %q", code, errOut)
	}
}
