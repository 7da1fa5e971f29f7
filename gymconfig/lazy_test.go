package gymconfig_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/gymlens/gymlens/gymconfig"
	"github.com/gymlens/gymlens/internal/testenv"
)

// judgeBlock is another server whose key comes from a variable the
// process under test does not have.
const judgeBlock = `
judge_model:
  responses_api_models:
    openai_model:
      host: 127.0.0.1
      port: 15001
      openai_api_key: ${oc.env:JUDGE_KEY}
`

func launchAs(t *testing.T, doc, instance string, env map[string]string) (*gymconfig.Launch, error) {
	t.Helper()
	m := map[string]string{gymconfig.EnvConfigDict: doc, gymconfig.EnvConfigPath: instance}
	for k, v := range env {
		m[k] = v
	}
	l, ok, err := gymconfig.LaunchFromEnv(testenv.Lookup(m))
	if err == nil && !ok {
		t.Fatalf("%s: not launched", instance)
	}
	return l, err
}

func TestLaunchIgnoresUnresolvableValuesOfOtherBlocks(t *testing.T) {
	doc := fleet + judgeBlock + "judge_key: ${oc.env:JUDGE_KEY}\nbroken: ${no_such_key}\nmissing: ???\n"
	// Resolving everything stays strict.
	if _, err := mustParse(t, doc).Resolve(noEnv); err == nil {
		t.Fatal("Resolve of the whole dict succeeded")
	}
	for _, name := range []string{"simple_agent", "string_match", "policy_model"} {
		l, err := launchAs(t, doc, name, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if l.Self.Name != name {
			t.Errorf("self %+v", l.Self)
		}
	}
	l, err := launchAs(t, doc, "policy_model", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"openai_base_url": "http://127.0.0.1:8000/v1", "openai_api_key": "dummy", "openai_model": "my-model"}
	if got := l.Self.ImplConfig(); !reflect.DeepEqual(got, want) {
		t.Errorf("impl config %v, want %v", got, want)
	}
	l, err = launchAs(t, doc, "simple_agent", nil)
	if err != nil {
		t.Fatal(err)
	}
	if u, err := l.PeerURL("model_server"); err != nil || u != "http://127.0.0.1:15000" {
		t.Errorf("PeerURL = %q, %v", u, err)
	}
	if dry, err := l.DryRun(); dry || err != nil {
		t.Errorf("DryRun = %v, %v", dry, err)
	}
	// The judge itself cannot start without its key.
	_, err = launchAs(t, doc, "judge_model", nil)
	if want := `NEMO_GYM_CONFIG_DICT: judge_model.responses_api_models.openai_model.openai_api_key: ${oc.env:JUDGE_KEY}: oc.env: environment variable "JUDGE_KEY" is not set`; errString(err) != want {
		t.Errorf("judge: error\n  %v\nwant\n  %s", err, want)
	}
	if l, err := launchAs(t, doc, "judge_model", map[string]string{"JUDGE_KEY": "jk"}); err != nil || l.Self.ImplConfig()["openai_api_key"] != "jk" {
		t.Errorf("judge with its key: %v", err)
	}
}

func TestLaunchSelfErrorsNameTheKeyPath(t *testing.T) {
	agent := "      max_steps: 3\n"
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"oc.env in the block", strings.Replace(fleet, agent, agent+"      judge_key: ${oc.env:JUDGE_KEY}\n", 1),
			`NEMO_GYM_CONFIG_DICT: simple_agent.responses_api_agents.simple_agent.judge_key: ${oc.env:JUDGE_KEY}: oc.env: environment variable "JUDGE_KEY" is not set`},
		{"reached through an interpolation", strings.Replace(fleet, agent, agent+"      judge_key: ${judge.key}\n", 1) + "judge: {key: '${oc.env:JUDGE_KEY}'}\n",
			`NEMO_GYM_CONFIG_DICT: judge.key: ${oc.env:JUDGE_KEY}: oc.env: environment variable "JUDGE_KEY" is not set`},
		{"reached through another block", strings.Replace(fleet, agent, agent+"      judge_key: ${judge_model.responses_api_models.openai_model.openai_api_key}\n", 1) + judgeBlock,
			`NEMO_GYM_CONFIG_DICT: judge_model.responses_api_models.openai_model.openai_api_key: ${oc.env:JUDGE_KEY}: oc.env: environment variable "JUDGE_KEY" is not set`},
		{"typo", strings.Replace(fleet, agent, agent+"      model: ${policy_model_nme}\n", 1),
			`NEMO_GYM_CONFIG_DICT: simple_agent.responses_api_agents.simple_agent.model: ${policy_model_nme}: no key "policy_model_nme" (did you mean "policy_model_name"?)`},
		{"missing value", strings.Replace(fleet, agent, agent+"      judge_key: ${judge_key}\n", 1) + "judge_key: ???\n",
			`NEMO_GYM_CONFIG_DICT: judge_key: missing mandatory value (???)`},
		{"missing in the block", strings.Replace(fleet, agent, "      max_steps: ???\n", 1),
			`NEMO_GYM_CONFIG_DICT: simple_agent.responses_api_agents.simple_agent.max_steps: missing mandatory value (???)`},
		{"cycle", strings.Replace(fleet, agent, agent+"      a: ${loop_a}\n", 1) + "loop_a: ${loop_b}\nloop_b: ${loop_a}\n",
			`NEMO_GYM_CONFIG_DICT: loop_b: ${loop_a}: reference cycle: simple_agent.responses_api_agents.simple_agent.a -> loop_a -> loop_b -> loop_a`},
		{"two implementations", strings.Replace(fleet, "    simple_agent:\n", "    other: {}\n    simple_agent:\n", 1),
			`NEMO_GYM_CONFIG_DICT: instance "simple_agent": simple_agent.responses_api_agents must be a mapping with exactly one implementation key, got 2 (other, simple_agent)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := launchAs(t, tc.doc, "simple_agent", nil)
			if errString(err) != tc.want {
				t.Errorf("error\n  %v\nwant\n  %s", err, tc.want)
			}
		})
	}
}

func TestLaunchPeerURLResolvesOnlyHostAndPort(t *testing.T) {
	model := "      host: 127.0.0.1\n      port: 15000\n"
	peer := "      host: ${default_host}\n      port: ${oc.env:PEER_PORT,15002}\n      secret: ${oc.env:PEER_ONLY_SECRET}\n"
	doc := strings.Replace(fleet, model, peer, 1) + "default_host: 127.0.0.9\n"
	l, err := launchAs(t, doc, "simple_agent", nil)
	if err != nil {
		t.Fatal(err)
	}
	if u, err := l.PeerURL("model_server"); err != nil || u != "http://127.0.0.9:15002" {
		t.Errorf("PeerURL = %q, %v", u, err)
	}
	l, err = launchAs(t, doc, "simple_agent", map[string]string{"PEER_PORT": "16000"})
	if err != nil {
		t.Fatal(err)
	}
	if u, err := l.PeerURL("model_server"); err != nil || u != "http://127.0.0.9:16000" {
		t.Errorf("PeerURL with PEER_PORT = %q, %v", u, err)
	}

	for _, tc := range []struct {
		name, peer, want string
	}{
		{"port unresolvable", "      host: 127.0.0.1\n      port: ${oc.env:PEER_PORT}\n",
			`instance "simple_agent" field "model_server": instance "policy_model" port: policy_model.responses_api_models.openai_model.port: ${oc.env:PEER_PORT}: oc.env: environment variable "PEER_PORT" is not set`},
		{"host through a broken reference", "      host: ${peer_host}\n      port: 1\n",
			`instance "simple_agent" field "model_server": instance "policy_model" host: policy_model.responses_api_models.openai_model.host: ${peer_host}: no key "peer_host"`},
		{"no host", "      port: 15000\n",
			`instance "simple_agent" field "model_server": instance "policy_model" has no host`},
		{"no port", "      host: 127.0.0.1\n",
			`instance "simple_agent" field "model_server": instance "policy_model" has no port`},
		{"port not a number", "      host: 127.0.0.1\n      port: ${oc.env:PEER_PORT,abc}\n",
			`instance "simple_agent" field "model_server": instance "policy_model" has no port`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := launchAs(t, strings.Replace(fleet, model, tc.peer, 1), "simple_agent", nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := l.PeerURL("model_server"); errString(err) != tc.want {
				t.Errorf("error\n  %v\nwant\n  %s", err, tc.want)
			}
			// The other peer is unaffected.
			if u, err := l.PeerURL("resources_server"); err != nil || u != "http://127.0.0.1:14321" {
				t.Errorf("resources_server: %q, %v", u, err)
			}
		})
	}
}

func TestLaunchDryRunIsReadLazily(t *testing.T) {
	for _, tc := range []struct {
		name, top string
		env       map[string]string
		want      bool
		err       string
	}{
		{"absent", "", nil, false, ""},
		{"true", "dry_run: true\n", nil, true, ""},
		{"from oc.env", "dry_run: ${oc.env:DRY,false}\n", map[string]string{"DRY": "true"}, true, ""},
		{"oc.env default", "dry_run: ${oc.env:DRY,false}\n", nil, false, ""},
		{"unresolvable", "dry_run: ${oc.env:DRY}\n", nil, false,
			`NEMO_GYM_CONFIG_DICT: dry_run: ${oc.env:DRY}: oc.env: environment variable "DRY" is not set`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := launchAs(t, fleet+tc.top, "string_match", tc.env)
			if err != nil {
				t.Fatal(err)
			}
			got, err := l.DryRun()
			if got != tc.want || errString(err) != tc.err {
				t.Errorf("DryRun = %v, %v; want %v, %q", got, err, tc.want, tc.err)
			}
		})
	}
}

func TestLazyValue(t *testing.T) {
	doc := "a: {b: '${c}', l: [x, '${oc.env:V,${a.b}}']}\nc: 3\nu: ${oc.env:UNSET}\nm: ???\n"
	z := mustParse(t, doc).Lazy(noEnv)
	for _, tc := range []struct {
		path []string
		want any
		err  string
	}{
		{[]string{"c"}, 3, ""},
		{[]string{"a", "b"}, 3, ""},
		{[]string{"a", "l", "1"}, "3", ""},
		{[]string{"a"}, map[string]any{"b": 3, "l": []any{"x", "3"}}, ""},
		{[]string{"a", "bb"}, nil, `no key "a.bb" (did you mean "a.b"?)`},
		{[]string{"u"}, nil, `u: ${oc.env:UNSET}: oc.env: environment variable "UNSET" is not set`},
		{[]string{"m"}, nil, `m: missing mandatory value (???)`},
		{[]string{"a", "l", "2"}, nil, `no element "2" in list "a.l" (2 elements)`},
	} {
		got, err := z.Value(tc.path...)
		if !reflect.DeepEqual(got, tc.want) || errString(err) != tc.err {
			t.Errorf("Value(%v) = %#v, %v; want %#v, %q", tc.path, got, err, tc.want, tc.err)
		}
	}
	// Keys holding dots are keys, not paths.
	z = mustParse(t, "'a.b': 1\na: {b: 2}\n").Lazy(noEnv)
	if v, err := z.Value("a.b"); v != 1 || err != nil {
		t.Errorf("Value(a.b) = %v, %v", v, err)
	}
}

func TestLazyInstances(t *testing.T) {
	doc := fleet + judgeBlock + "judge_key: ${oc.env:JUDGE_KEY}\n" +
		"templates: {agent: {responses_api_agents: {simple_agent: {host: 127.0.0.1, port: 17700}}}}\n" +
		"copy_agent: ${templates.agent}\n" +
		"head_server: {resources_servers: {}}\n" // reserved: never an instance
	z := mustParse(t, doc).Lazy(noEnv)
	refs, err := z.Instances()
	if err != nil {
		t.Fatal(err)
	}
	want := []gymconfig.Ref{
		{Type: "resources_servers", Name: "string_match"},
		{Type: "responses_api_agents", Name: "simple_agent"},
		{Type: "responses_api_models", Name: "policy_model"},
		{Type: "responses_api_models", Name: "judge_model"},
	}
	if !reflect.DeepEqual(refs, want) {
		t.Errorf("Instances = %v, want %v", refs, want)
	}
	// By name, a top-level interpolation is followed.
	in, found, err := z.Instance("copy_agent")
	if err != nil || !found || in.Type != "responses_api_agents" || in.Impl != "simple_agent" || in.Addr() != "127.0.0.1:17700" {
		t.Errorf("Instance(copy_agent) = %+v, %v, %v", in, found, err)
	}
	if u, err := z.URL("copy_agent"); err != nil || u != "http://127.0.0.1:17700" {
		t.Errorf("URL(copy_agent) = %q, %v", u, err)
	}
	for _, name := range []string{"policy_api_key", "head_server", "templates", "nope"} {
		if in, found, err := z.Instance(name); found || err != nil {
			t.Errorf("Instance(%s) = %+v, %v, %v; want not found", name, in, found, err)
		}
	}
	if _, err := z.URL("judge_modl"); errString(err) != `no instance "judge_modl" (did you mean "judge_model"?)` {
		t.Errorf("URL(judge_modl): %v", err)
	}
	if u, err := z.URL("judge_model"); err != nil || u != "http://127.0.0.1:15001" {
		t.Errorf("URL(judge_model) = %q, %v", u, err)
	}

	bad := mustParse(t, fleet+"two:\n  resources_servers: {a: {}}\n  responses_api_models: {b: {}}\n").Lazy(noEnv)
	if _, err := bad.Instances(); errString(err) != `instance "two": has 2 server types (resources_servers, responses_api_models); a server instance has exactly one` {
		t.Errorf("Instances of a bad shape: %v", err)
	}
}

// TestLazyAgreesWithResolve checks, on a dict that resolves as a whole,
// that lazy resolution gives the same instances, URLs and values.
func TestLazyAgreesWithResolve(t *testing.T) {
	for _, doc := range []string{
		fleet,
		fleet + "dry_run: ${oc.env:DRY,true}\n",
		"base: &b {host: 127.0.0.1, port: 1}\nx:\n  resources_servers:\n    y: {<<: *b, note: '\\${lit}'}\n",
		"h: {host: h1, port: '${p}'}\np: 9\nx: {resources_servers: {y: '${h}'}}\n",
	} {
		d := mustParse(t, doc)
		assertLazyAgrees(t, d, noEnv)
	}
}

func assertLazyAgrees(t *testing.T, d *gymconfig.Dict, env func(string) (string, bool)) {
	t.Helper()
	c, err := d.Resolve(env)
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	z := d.Lazy(env)
	for _, want := range c.Instances {
		got, found, err := z.Instance(want.Name)
		if err != nil || !found || !reflect.DeepEqual(got, want) {
			t.Errorf("Instance(%s) = %+v, %v, %v; want %+v", want.Name, got, found, err, want)
		}
		wu, werr := c.URL(want.Name)
		gu, gerr := z.URL(want.Name)
		if gu != wu || errString(gerr) != errString(werr) {
			t.Errorf("URL(%s) = %q, %v; want %q, %v", want.Name, gu, gerr, wu, werr)
		}
	}
	if all, err := z.Value(); err != nil || !reflect.DeepEqual(all, c.Root) {
		t.Errorf("Value() = %v, %v; want %v", all, err, c.Root)
	}
	if dry, err := z.DryRun(); err != nil || dry != c.DryRun() {
		t.Errorf("DryRun = %v, %v; want %v", dry, err, c.DryRun())
	}
}
