package registry_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/internal/servertest"
	"github.com/gymlens/gymlens/protocol"
	"github.com/gymlens/gymlens/server"
	"github.com/gymlens/gymlens/servers/agent"
	"github.com/gymlens/gymlens/servers/model"
	"github.com/gymlens/gymlens/servers/registry"
	"github.com/gymlens/gymlens/servers/resources/arithmetic"
)

func lookup(t *testing.T, typ, name string) registry.Impl {
	t.Helper()
	impl, ok := registry.Lookup(typ, name)
	if !ok {
		t.Fatalf("no %s %s", typ, name)
	}
	return impl
}

const agentPath = "simple_agent.responses_api_agents.simple_agent"

func TestDecodeAtUnknownKeyNamesPathAndNearest(t *testing.T) {
	a := lookup(t, "responses_api_agents", "simple_agent")
	m := lookup(t, "responses_api_models", "policy_model")
	c := lookup(t, "resources_servers", "counter")
	for _, tc := range []struct {
		impl registry.Impl
		path string
		raw  string
		want string
	}{
		{a, agentPath, `{"max_stpes": 3}`, agentPath + `.max_stpes: unknown key (did you mean "max_steps"?)`},
		{a, "config", `{"zzzzzzzz": 3}`, `config.zzzzzzzz: unknown key (known: execute_tools, max_steps, model, model_url, resources_url, skip_verification, skip_verification_reward)`},
		{m, "pm.responses_api_models.policy_model", `{"upstream": {"base_ur": "http://x"}}`,
			`pm.responses_api_models.policy_model.upstream.base_ur: unknown key (did you mean "base_url"?)`},
		{c, "config", `{"x": 1}`, `config.x: unknown key (this implementation takes no configuration)`},
		{a, "config", `[1]`, `config: want a mapping, got a list`},
		{a, "config", `{"max_steps": 1.5}`, `config.max_steps: want an integer, got number 1.5`},
		{a, "config", `{"max_steps": "three"}`, `config.max_steps: want an integer, got string "three"`},
		{a, "config", `{"skip_verification": "maybe"}`, `config.skip_verification: want a boolean, got string "maybe"`},
		{a, "config", `{"skip_verification_reward": "inf"}`, `config.skip_verification_reward: want a number, got string "inf"`},
		{a, "config", `{"model_url": 5}`, `config.model_url: want a string, got number`},
		{a, "config", `{"model": {}}`, `config.model: want a string, got object`},
	} {
		_, err := tc.impl.DecodeAt([]byte(tc.raw), tc.path)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s %s: error %v\nwant %s", tc.impl.Name, tc.raw, err, tc.want)
		}
	}
}

func TestDecodeReportsEveryUnknownKey(t *testing.T) {
	_, err := lookup(t, "responses_api_agents", "simple_agent").Decode([]byte(`{"max_stpes": 3, "modl_url": "x"}`))
	want := "config.max_stpes: unknown key (did you mean \"max_steps\"?)\nconfig.modl_url: unknown key (did you mean \"model_url\"?)"
	if err == nil || err.Error() != want {
		t.Fatalf("error %v\nwant %s", err, want)
	}
}

func TestDecodeCoercesStringsAsPydanticLaxMode(t *testing.T) {
	a := lookup(t, "responses_api_agents", "simple_agent")
	for _, tc := range []struct {
		raw      string
		steps    int
		skip     bool
		skipRew  float64
		modelURL string
	}{
		{`{"max_steps": "7", "skip_verification": "true", "skip_verification_reward": "0.25"}`, 7, true, 0.25, ""},
		{`{"max_steps": " 8 ", "skip_verification": "Yes", "skip_verification_reward": "1e-1"}`, 8, true, 0.1, ""},
		{`{"max_steps": "9.00", "skip_verification": "off", "skip_verification_reward": "-2"}`, 9, false, -2, ""},
		{`{"max_steps": 10.0, "skip_verification": 1, "skip_verification_reward": 3}`, 10, true, 3, ""},
		{`{"max_steps": 11, "skip_verification": "0", "model_url": "http://m"}`, 11, false, 0, "http://m"},
	} {
		got, err := a.Decode([]byte(tc.raw))
		if err != nil {
			t.Errorf("%s: %v", tc.raw, err)
			continue
		}
		c := got.(*agent.Config)
		if c.MaxSteps == nil || *c.MaxSteps != tc.steps || c.SkipVerification != tc.skip ||
			c.SkipVerificationReward != tc.skipRew || c.ModelURL != tc.modelURL {
			t.Errorf("%s: decoded %+v (max_steps %v)", tc.raw, c, c.MaxSteps)
		}
	}
	// Nested structs are coerced too, and strings stay strings.
	got, err := lookup(t, "responses_api_models", "policy_model").Decode(
		[]byte(`{"seed": "42", "correct_probability": "0.5", "model": "123", "upstream": {"timeout_ms": "1500"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if c := got.(*model.Config); c.Seed != 42 || c.CorrectProbability != 0.5 || c.Model != "123" || c.Upstream.TimeoutMS != 1500 {
		t.Errorf("decoded %+v", c)
	}
}

func TestDecodeStartsFromDefaultsAndAcceptsNone(t *testing.T) {
	r := lookup(t, "resources_servers", "arithmetic")
	for _, raw := range []string{"", " ", "null", "{}"} {
		got, err := r.Decode([]byte(raw))
		if err != nil {
			t.Errorf("%q: %v", raw, err)
			continue
		}
		if c := got.(*arithmetic.Config); *c != arithmetic.Defaults() {
			t.Errorf("%q: %+v, want the defaults", raw, c)
		}
	}
	m := lookup(t, "responses_api_models", "policy_model")
	got, err := m.Decode([]byte(`{"seed": 3}`))
	if err != nil {
		t.Fatal(err)
	}
	want := model.Defaults()
	want.Seed = 3
	if c := got.(*model.Config); c.CorrectProbability != want.CorrectProbability || c.Seed != 3 {
		t.Errorf("decoded %+v, want the defaults with seed 3", c)
	}
}

func TestDecodeNeverShowsSensitiveValues(t *testing.T) {
	m := lookup(t, "responses_api_models", "policy_model")
	for _, raw := range []string{
		`{"openai_api_kye": "sk-secret-value"}`,
		`{"upstream": {"api_key": 12345678}}`,
		`{"openai_api_key": ["sk-secret-value"]}`,
		`{"openai_api_key": 12345678}`,
	} {
		_, err := m.DecodeAt([]byte(raw), "pm")
		if err == nil {
			t.Errorf("%s: no error", raw)
			continue
		}
		if strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "12345678") {
			t.Errorf("%s: error shows the value: %v", raw, err)
		}
	}
}

func TestLookupAndNames(t *testing.T) {
	if _, ok := registry.Lookup("responses_api_agents", "arithmetic"); ok {
		t.Error("arithmetic found as an agent")
	}
	if got := registry.Default("resources_servers"); got != "arithmetic" {
		t.Errorf("default resources server %q", got)
	}
	if got := strings.Join(registry.Names("resources_servers"), ","); got != "arithmetic,string_match,mcqa,equivalence_rule,counter" {
		t.Errorf("resources servers %s", got)
	}
}

// Each environment's row, built from its package's constructor alone,
// serves that environment: a server built with the row's options and
// registered by the row answers the environment's routes under the
// rollout prefix and sets the session cookie named for the
// implementation and the instance.
func TestEnvironmentRowsServeTheirEnvironment(t *testing.T) {
	const instance = "env_1"
	for _, name := range registry.Names(contract.ServerTypeResources) {
		impl := lookup(t, contract.ServerTypeResources, name)
		opts := impl.Options(instance)
		cookie := contract.SessionCookieName(name, instance)
		if opts.Type != contract.ServerTypeResources || opts.RolloutPrefix != server.PrefixResources || opts.SessionCookie != cookie {
			t.Errorf("%s: options %+v", name, opts)
		}
		cfg, err := impl.Decode(nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := impl.Validate(cfg); err != nil {
			t.Errorf("%s: defaults refused: %v", name, err)
		}
		opts.Name = instance
		s := server.New(opts)
		if err := impl.Register(s, cfg, registry.Peers{Instance: instance}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		base, _ := servertest.Start(t, s)
		res, err := http.Get(base + "/ng-rollout/r-1" + protocol.PathReverifyMode)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		var mode string
		if res.StatusCode != http.StatusOK || json.Unmarshal(body, &mode) != nil || mode == "" {
			t.Errorf("%s: reverify_mode %d %s", name, res.StatusCode, body)
		}
		if c := res.Cookies(); len(c) != 1 || c[0].Name != cookie {
			t.Errorf("%s: cookies %v, want one named %s", name, c, cookie)
		}
	}
}

// A configuration the environment refuses is refused by the row's
// Validate and by its Register, which builds the environment.
func TestEnvironmentRowRefusesBadConfig(t *testing.T) {
	impl := lookup(t, contract.ServerTypeResources, arithmetic.ServerName)
	cfg, err := impl.Decode([]byte(`{"tolerance": -1}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := impl.Validate(cfg); err == nil {
		t.Error("Validate accepted a negative tolerance")
	}
	if err := impl.Register(server.New(impl.Options("a")), cfg, registry.Peers{}); err == nil {
		t.Error("Register accepted a negative tolerance")
	}
}
