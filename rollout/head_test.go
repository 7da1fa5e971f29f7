package rollout_test

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/gymlens/gymlens/gymconfig"
	"github.com/gymlens/gymlens/internal/servertest"
	"github.com/gymlens/gymlens/rollout"
)

// headFleet is a fleet config as a head server holds it: interpolations
// unresolved, a model whose key comes from a variable the collector does
// not have (in its block and at the top level), two agents, one of which
// has a value of its own the collector cannot resolve (only host and
// port are read).
const headFleet = `head_server: {host: 127.0.0.1, port: 11000}
default_host: 127.0.0.1
agent_port: 17654
judge_api_key: ${oc.env:HEAD_TEST_UNSET_JUDGE_KEY}
policy_model:
  responses_api_models:
    openai_model:
      entrypoint: app.py
      host: 127.0.0.1
      port: 14000
      openai_api_key: ${oc.env:HEAD_TEST_UNSET_KEY}
string_match:
  resources_servers:
    string_match: {entrypoint: app.py, domain: knowledge, host: 127.0.0.1, port: 14321}
string_match_simple_agent:
  responses_api_agents:
    simple_agent:
      entrypoint: app.py
      host: ${default_host}
      port: ${agent_port}
      resources_server: {type: resources_servers, name: string_match}
      model_server: {type: responses_api_models, name: policy_model}
mcqa_agent:
  responses_api_agents:
    simple_agent:
      entrypoint: app.py
      host: ${oc.env:HEAD_TEST_AGENT_HOST,127.0.0.2}
      port: 17655
      judge_key: ${judge_api_key}
      resources_server: {type: resources_servers, name: string_match}
      model_server: {type: responses_api_models, name: policy_model}
string_match_environment_server:
  environment_servers:
    legacy_agent:
      entrypoint: app.py
      host: 127.0.0.1
      port: 17700
      agent_server: {type: responses_api_agents, name: string_match_simple_agent}
`

// startHead serves body (with status) on GET /global_config_dict_yaml
// and returns its URL and a client of the test's own.
func startHead(t *testing.T, status int, body string) (string, *http.Client) {
	t.Helper()
	h := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != rollout.PathHeadConfig {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	c := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(func() { c.CloseIdleConnections(); h.Close() })
	return h.URL, c
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func noEnv(string) (string, bool) { return "", false }

func TestHeadFleet(t *testing.T) {
	// The whole config needs variables the collector does not have.
	d, err := gymconfig.Parse([]byte(headFleet))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Resolve(noEnv); err == nil {
		t.Fatal("headFleet resolves as a whole; the test needs values only a lazy reading skips")
	}
	url, c := startHead(t, http.StatusOK, jsonString(headFleet))
	got, err := rollout.HeadFleet(context.Background(), c, url+"/", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"string_match_simple_agent": "http://127.0.0.1:17654", "mcqa_agent": "http://127.0.0.2:17655"}
	if !maps.Equal(got.Agents, want) {
		t.Errorf("agents %v, want %v", got.Agents, want)
	}
	wantEnv := map[string]rollout.EnvironmentServer{"string_match_environment_server": {
		URL: "http://127.0.0.1:17700", Impl: "legacy_agent", Agents: []string{"string_match_simple_agent"}}}
	if !reflect.DeepEqual(got.Environments, wantEnv) {
		t.Errorf("environment servers %v, want %v", got.Environments, wantEnv)
	}
	// Two agents reference string_match, so its rows cannot be routed by
	// task_source alone; each agent routes its own.
	if ts := got.TaskSources["string_match"]; ts.Agent != "" || !strings.Contains(ts.Err, "2 agents reference this resources server (mcqa_agent, string_match_simple_agent)") {
		t.Errorf("task_source string_match: %+v", ts)
	}
	if ts := got.TaskSources["mcqa_agent"]; ts.Agent != "mcqa_agent" {
		t.Errorf("task_source mcqa_agent: %+v", ts)
	}
	if ts := got.TaskSources["policy_model"]; ts.Agent != "" || !strings.Contains(ts.Err, "not an agent or resources server") {
		t.Errorf("task_source policy_model: %+v", ts)
	}

	// ${oc.env:...} is resolved with the collector's environment.
	env := func(k string) (string, bool) {
		if k == "HEAD_TEST_AGENT_HOST" {
			return "127.0.0.3", true
		}
		return "", false
	}
	got, err = rollout.HeadFleet(context.Background(), c, url, env)
	if err != nil || got.Agents["mcqa_agent"] != "http://127.0.0.3:17655" {
		t.Errorf("agents %v, %v", got.Agents, err)
	}
}

// Task sources resolve as upstream's resolve_dataset_agent: a dataset's
// agent pin, the declaring agent, the one agent naming the resources
// server; anything else says why.
func TestFleetTaskSources(t *testing.T) {
	const cfg = `
rs_one:
  resources_servers:
    x: {host: 127.0.0.1, port: 1, domain: other}
rs_pinned:
  resources_servers:
    x:
      host: 127.0.0.1
      port: 2
      datasets: [{name: a, agent: agent_b}, {name: b, agent: agent_b}]
rs_bad_pin:
  resources_servers:
    x: {host: 127.0.0.1, port: 3, datasets: [{name: a, agent: agent_a}]}
rs_two_pins:
  resources_servers:
    x: {host: 127.0.0.1, port: 4, datasets: [{name: a, agent: agent_a}, {name: b, agent: agent_b}]}
rs_orphan:
  resources_servers:
    x: {host: 127.0.0.1, port: 5}
agent_a:
  responses_api_agents:
    simple_agent: {host: 127.0.0.1, port: 6, resources_server: {type: resources_servers, name: rs_one}}
agent_b:
  responses_api_agents:
    simple_agent: {host: 127.0.0.1, port: 7, resources_server: {type: resources_servers, name: rs_pinned}}
agent_c:
  responses_api_agents:
    simple_agent: {host: 127.0.0.1, port: 8, resources_server: {type: resources_servers, name: rs_bad_pin},
      datasets: [{name: c, agent: agent_a}]}
`
	f, err := rollout.FleetFromConfig([]byte(cfg), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"rs_one": "agent_a", "rs_pinned": "agent_b", "agent_a": "agent_a", "agent_b": "agent_b",
		"rs_bad_pin":  `pins agent "agent_a", but no agent of that name references resources server "rs_bad_pin" (agents referencing it: agent_c)`,
		"rs_two_pins": "its datasets pin conflicting agents (agent_a, agent_b)",
		"rs_orphan":   `no agent in the running config references resources server "rs_orphan"`,
		"agent_c":     `dataset declared by agent "agent_c" pins agent "agent_a"`,
	} {
		ts, ok := f.TaskSources[name]
		switch {
		case !ok:
			t.Errorf("%s: no task source", name)
		case ts.Agent != "" && ts.Agent != want, ts.Agent == "" && !strings.Contains(ts.Err, want):
			t.Errorf("%s: %+v, want %s", name, ts, want)
		}
	}
	if len(f.Environments) != 0 {
		t.Errorf("environment servers %v in a config without any", f.Environments)
	}
}

func TestHeadFleetErrors(t *testing.T) {
	closed := "http://" + servertest.FreeAddr(t)
	noPort := strings.Replace(headFleet, "      port: 17655\n", "", 1)
	for name, c := range map[string]struct {
		status int
		body   string
		url    string // instead of the test head's
		want   []string
	}{
		"unreachable":   {url: closed, want: []string{"head server " + closed + ": GET /global_config_dict_yaml: ", "connection refused"}},
		"not a URL":     {url: "127.0.0.1:11000", want: []string{`head server URL "127.0.0.1:11000": want http://host:port`}},
		"raw YAML":      {status: 200, body: headFleet, want: []string{"GET /global_config_dict_yaml did not answer a JSON string (NeMo Gym's head API sends the config YAML as one): invalid character", `the answer begins "head_server:`}},
		"JSON object":   {status: 200, body: `{"a": 1}`, want: []string{"did not answer a JSON string", "cannot unmarshal object into Go value of type string"}},
		"status":        {status: 404, body: `{"detail":"Not Found"}`, want: []string{"GET /global_config_dict_yaml answered 404 Not Found: ", `Not Found`}},
		"broken YAML":   {status: 200, body: jsonString("a: [1,\n"), want: []string{": config: "}},
		"agent no port": {status: 200, body: jsonString(noPort), want: []string{`: config: instance "mcqa_agent" has no port`}},
		"unresolvable": {status: 200, body: jsonString(strings.Replace(headFleet, "port: ${agent_port}", "port: ${oc.env:HEAD_TEST_UNSET_PORT}", 1)),
			want: []string{`: config: instance "string_match_simple_agent" port: string_match_simple_agent.responses_api_agents.simple_agent.port: ${oc.env:HEAD_TEST_UNSET_PORT}: oc.env: environment variable "HEAD_TEST_UNSET_PORT" is not set`}},
		"bad reference": {status: 200, body: jsonString(strings.Replace(headFleet, "host: ${default_host}", "host: ${default_hots}", 1)),
			want: []string{`: config: instance "string_match_simple_agent" host: string_match_simple_agent.responses_api_agents.simple_agent.host: ${default_hots}: no key "default_hots" (did you mean "default_host"?)`}},
		"two types": {status: 200, body: jsonString(headFleet + "both:\n  resources_servers: {a: {}}\n  responses_api_agents: {b: {}}\n"),
			want: []string{`: config: instance "both": has 2 server types`}},
		"top not a map":  {status: 200, body: jsonString("- a\n- b\n"), want: []string{": config: "}},
		"empty response": {status: 200, body: ``, want: []string{"did not answer a JSON string", "unexpected end of JSON input"}},
	} {
		url, client := startHead(t, c.status, c.body)
		if c.url != "" {
			url = c.url
		}
		got, err := rollout.HeadFleet(context.Background(), client, url, noEnv)
		if err == nil {
			t.Errorf("%s: fleet %v, want an error", name, got)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", name, err, w)
			}
		}
	}
}
