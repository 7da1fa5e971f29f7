package agent_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/internal/servertest"
	"github.com/gymlens/gymlens/server"
	"github.com/gymlens/gymlens/servers/agent"
)

// TestResponsesRoutes: outside callers get the episode on /v1/responses
// and its /ng-rollout/ twins, with their cookies going to the resources
// server, the prefix kept on the model calls, and the episode's cookies
// set on the answer.
func TestResponsesRoutes(t *testing.T) {
	params := `{"input":[{"role":"user","content":"weather?"}],"tools":[` + weatherTool + `]}`
	for _, c := range []struct{ path, modelPath string }{
		{"/v1/responses", "/v1/responses"},
		{"/ng-rollout/7-0/v1/responses", "/ng-rollout/7-0/v1/responses"},
		{"/ng-rollout/7-0/training-token-capture/v1/responses", "/ng-rollout/7-0/training-token-capture/v1/responses"},
	} {
		t.Run(c.path, func(t *testing.T) {
			f := newFixture(t, script(response("r1", functionCall("c1", "get_weather", `{"city":"SF"}`)),
				response("r2", message("m", "sunny"))), resourcesOptions{}, agent.Config{})
			a := post(t, f.agentURL+c.path, params, &http.Cookie{Name: "res", Value: "outside"})
			if a.status != http.StatusOK {
				t.Fatalf("status %d: %s", a.status, a.body)
			}
			want := []string{"model " + c.modelPath, "resources /get_weather", "model " + c.modelPath}
			if seq := f.log.sequence(); !slices.Equal(seq, want) {
				t.Errorf("calls %q, want %q", seq, want)
			}
			if got := f.log.to("resources", "/get_weather")[0].Cookies["res"]; got != "outside" {
				t.Errorf("tool call cookie res=%q, want the caller's", got)
			}
			resp := object(t, a.body)
			if resp["id"] != "r2" || resp["object"] != "response" || len(resp["output"].([]any)) != 3 {
				t.Errorf("answer %s: want the last response with 3 items", a.body)
			}
			cookies := map[string]string{}
			for _, ck := range (&http.Response{Header: a.header}).Cookies() {
				cookies[ck.Name] = ck.Value
			}
			if cookies["res"] != "tool1" || cookies["mdl"] != "m2" || !sessionID.MatchString(cookies["simple_agent___test"]) {
				t.Errorf("answer cookies %v, want res=tool1, mdl=m2 and the agent's session", cookies)
			}
		})
	}
	t.Run("validation", func(t *testing.T) {
		f := newFixture(t, script(response("r1", message("m", "x"))), resourcesOptions{}, agent.Config{})
		for body, loc := range map[string]string{
			`{"input":"hi","not_a_param":"k"}`:  `["body","not_a_param"]`,
			`{}`:                                `["body","input"]`,
			`{"input":"hi","tool_choice":null}`: `["body","tool_choice"]`,
		} {
			a := post(t, f.agentURL+"/v1/responses", body)
			if a.status != http.StatusUnprocessableEntity || !strings.Contains(string(a.body), `"loc":`+loc) {
				t.Errorf("%s: %d %s, want 422 at %s", body, a.status, a.body, loc)
				continue
			}
			servertest.CheckErrorBody(t, a.status, a.body)
		}
		if seq := f.log.sequence(); len(seq) != 0 {
			t.Errorf("refused bodies made calls %q", seq)
		}
	})
}

// TestWithoutServerOptions: a server built without ServerOptions (so
// without a session cookie of its own) still runs rollouts and still
// passes the inbound cookies on.
func TestWithoutServerOptions(t *testing.T) {
	f := newFixture(t, script(response("r1", message("m", "x"))), resourcesOptions{}, agent.Config{})
	s := server.New(server.Options{Name: "bare", Type: contract.ServerTypeAgent, Logger: quiet})
	if err := agent.Register(s, agent.Config{ModelURL: f.modelURL, ResourcesURL: f.resourcesURL}, servertest.Client(t)); err != nil {
		t.Fatal(err)
	}
	base, _ := servertest.Start(t, s)
	if a := post(t, base+"/run", minimalRow, &http.Cookie{Name: "inbound", Value: "yes"}); a.status != http.StatusOK {
		t.Fatalf("status %d: %s", a.status, a.body)
	}
	if c := f.log.to("resources", "/seed_session")[0].Cookies; c["inbound"] != "yes" {
		t.Errorf("seed cookies %v, want the inbound one", c)
	}
}

// TestAggregateMetricsForwarded: the resources server aggregates; its
// answer comes back with upstream's members (those it lacks at their
// defaults); its failure is a 500. A body without verify_responses, which
// upstream requires, is a 422 and is not forwarded.
func TestAggregateMetricsForwarded(t *testing.T) {
	f := newFixture(t, script(response("r1", message("m", "x"))), resourcesOptions{}, agent.Config{})
	body := `{"verify_responses":[{"reward":1,"expected_answer":"x","response":{"usage":null}},{"reward":0}]}`
	a := post(t, f.agentURL+"/aggregate_metrics", body)
	if a.status != http.StatusOK {
		t.Fatalf("status %d: %s", a.status, a.body)
	}
	sameJSON(t, "forwarded body", object(t, f.log.to("resources", "/aggregate_metrics")[0].Body), value(t, body))
	want := object(t, []byte(aggregateAnswer))
	delete(want, "extra")
	want["perf_summary"], want["repeat_level_metrics"] = nil, []any{}
	sameJSON(t, "answer", object(t, a.body), want)

	a = post(t, f.agentURL+"/aggregate_metrics", `{}`)
	if a.status != http.StatusUnprocessableEntity || !strings.Contains(string(a.body), `"loc":["body","verify_responses"]`) {
		t.Fatalf("empty body: status %d: %s, want 422 at verify_responses", a.status, a.body)
	}
	if n := f.log.count("resources", "/aggregate_metrics"); n != 1 {
		t.Fatalf("the refused body was forwarded: %d aggregate calls", n)
	}

	// A collection's results arrive in one body, which the server's own
	// decoded-size budget (DefaultMaxDecodedBytes) would refuse: five
	// objects an entry, each charged 4 KiB, 200 MB for the run.
	entry := `{"reward":1,"task_index":3,"response":{"usage":{"input_tokens":9,"output_tokens":4,"input_tokens_details":{"cached_tokens":0},"output_tokens_details":{"reasoning_tokens":0}}}}`
	const n = 10000
	whole := `{"verify_responses":[` + strings.Repeat(entry+",", n-1) + entry + `]}`
	if a := post(t, f.agentURL+"/aggregate_metrics", whole); a.status != http.StatusOK {
		t.Fatalf("a run of %d results: status %d: %.200s", n, a.status, a.body)
	}

	failing := newFixture(t, script(response("r1", message("m", "x"))), resourcesOptions{aggregateStatus: 500}, agent.Config{})
	if a := post(t, failing.agentURL+"/aggregate_metrics", body); a.status != http.StatusInternalServerError {
		t.Errorf("resources 500: status %d (%s), want 500", a.status, a.body)
	} else {
		servertest.CheckErrorBody(t, a.status, a.body)
	}
}

func TestConfig(t *testing.T) {
	for name, cfg := range map[string]agent.Config{
		"empty":              {},
		"no resources":       {ModelURL: "http://127.0.0.1:1"},
		"relative model":     {ModelURL: "/model", ResourcesURL: "http://127.0.0.1:2"},
		"unsupported scheme": {ModelURL: "ftp://h", ResourcesURL: "http://127.0.0.1:2"},
	} {
		if err := cfg.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	good := agent.Config{ModelURL: "http://127.0.0.1:1", ResourcesURL: "https://r.example/base/"}
	if err := good.Validate(); err != nil {
		t.Errorf("valid config refused: %v", err)
	}
	if err := agent.Register(server.New(server.Options{}), good, nil); err == nil {
		t.Error("nil client accepted")
	}
	if err := agent.Register(server.New(server.Options{}), agent.Defaults(), server.NewClient(server.ClientOptions{})); err == nil {
		t.Error("defaults without URLs accepted")
	}
	if d := agent.Defaults(); d.MaxSteps != nil || d.SkipVerification || d.SkipVerificationReward != 0 || d.Model != "" {
		t.Errorf("defaults %+v, want upstream's", d)
	}
	if o := agent.ServerOptions("math_agent"); o.SessionCookie != "simple_agent___math_agent" || o.Middleware != nil {
		t.Errorf("ServerOptions: cookie %q, middleware set %v", o.SessionCookie, o.Middleware != nil)
	}

	const js = `{"model_url":"http://m:1","resources_url":"http://r:2","max_steps":5,"skip_verification":true,"skip_verification_reward":0.5,"model":"x"}`
	const yml = "model_url: http://m:1\nresources_url: http://r:2\nmax_steps: 5\nskip_verification: true\nskip_verification_reward: 0.5\nmodel: x\n"
	var fromJSON, fromYAML agent.Config
	if err := json.Unmarshal([]byte(js), &fromJSON); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(yml), &fromYAML); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]agent.Config{"json": fromJSON, "yaml": fromYAML} {
		if c.ModelURL != "http://m:1" || c.ResourcesURL != "http://r:2" || c.MaxSteps == nil || *c.MaxSteps != 5 ||
			!c.SkipVerification || c.SkipVerificationReward != 0.5 || c.Model != "x" {
			t.Errorf("%s: decoded %+v", name, c)
		}
	}
	var null agent.Config
	if err := json.Unmarshal([]byte(`{"max_steps":null}`), &null); err != nil || null.MaxSteps != nil {
		t.Errorf("max_steps null: %v, %v", null.MaxSteps, err)
	}
}
