package gymconfig_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/gymlens/gymlens/gymconfig"
	"github.com/gymlens/gymlens/internal/testenv"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var noEnv = testenv.Lookup(nil)

func mustParse(t *testing.T, doc string) *gymconfig.Dict {
	t.Helper()
	d, err := gymconfig.Parse([]byte(doc))
	if err != nil {
		t.Fatalf("Parse: %v\n%s", err, doc)
	}
	return d
}

func mustResolve(t *testing.T, doc string, env func(string) (string, bool)) *gymconfig.Config {
	t.Helper()
	c, err := mustParse(t, doc).Resolve(env)
	if err != nil {
		t.Fatalf("Resolve: %v\n%s", err, doc)
	}
	return c
}

// fleet is an upstream-shaped config dict: a resources server, an agent
// referencing it and a model, and the policy_* scalars.
const fleet = `policy_base_url: http://127.0.0.1:8000/v1
policy_api_key: dummy
policy_model_name: my-model
string_match:
  resources_servers:
    string_match:
      entrypoint: app.py
      domain: knowledge
      host: 127.0.0.1
      port: 14321
simple_agent:
  responses_api_agents:
    simple_agent:
      entrypoint: app.py
      host: 127.0.0.1
      port: 17654
      max_steps: 3
      resources_server: {type: resources_servers, name: string_match}
      model_server: {type: responses_api_models, name: policy_model}
      datasets: [{name: example, type: example, jsonl_fpath: data/example.jsonl}]
policy_model:
  responses_api_models:
    openai_model:
      entrypoint: app.py
      host: 127.0.0.1
      port: 15000
      openai_base_url: ${policy_base_url}
      openai_api_key: ${policy_api_key}
      openai_model: ${policy_model_name}
`
