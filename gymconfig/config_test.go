package gymconfig_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/gymconfig"
	"github.com/gymlens/gymlens/internal/testenv"
	"github.com/gymlens/gymlens/lens"
)

func TestInstancesInDocumentOrder(t *testing.T) {
	c := mustResolve(t, fleet+"notes: {a: 1}\nruns: 3\nconfig_paths: [x.yaml]\nhead_server: {host: 127.0.0.1, port: 11000}\n", noEnv)
	var got []string
	for _, in := range c.Instances {
		got = append(got, in.Name+"/"+in.Type+"/"+in.Impl)
	}
	want := []string{
		"string_match/" + contract.ServerTypeResources + "/string_match",
		"simple_agent/" + contract.ServerTypeAgent + "/simple_agent",
		"policy_model/" + contract.ServerTypeModel + "/openai_model",
	}
	if !slices.Equal(got, want) {
		t.Errorf("instances %v, want %v", got, want)
	}
	m, _ := c.Instance("policy_model")
	if m.Block["openai_api_key"] != "dummy" || m.Block["openai_base_url"] != "http://127.0.0.1:8000/v1" {
		t.Errorf("model block not resolved: %v", m.Block)
	}
	if _, ok := c.Instance("notes"); ok {
		t.Error("a plain mapping is an instance")
	}
}

func TestInstanceDiscoveryErrors(t *testing.T) {
	for _, tc := range []struct{ name, doc, want string }{
		{"two types", "x:\n  resources_servers: {a: {}}\n  responses_api_agents: {b: {}}\n",
			`instance "x": has 2 server types (resources_servers, responses_api_agents); a server instance has exactly one`},
		{"two impls", "x:\n  resources_servers: {a: {}, b: {}}\n",
			`instance "x": x.resources_servers must be a mapping with exactly one implementation key, got 2 (a, b)`},
		{"no impl", "x:\n  resources_servers: {}\n",
			`instance "x": x.resources_servers must be a mapping with exactly one implementation key, got 0`},
		{"type not a mapping", "x:\n  resources_servers: [a]\n",
			`instance "x": x.resources_servers must be a mapping with exactly one implementation key, got 0`},
		{"impl not a mapping", "x:\n  responses_api_models:\n    openai_model: [1]\n",
			`instance "x": x.responses_api_models.openai_model must be a mapping, got a list`},
		{"impl a string", "x:\n  responses_api_models:\n    openai_model: text\n",
			`instance "x": x.responses_api_models.openai_model must be a mapping, got a string`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := mustParse(t, tc.doc).Resolve(noEnv)
			if err == nil || err.Error() != tc.want {
				t.Errorf("error\n  %v\nwant\n  %s", err, tc.want)
			}
		})
	}
	// A reserved key is never an instance, even when shaped like one.
	c := mustResolve(t, "telemetry:\n  resources_servers: {a: {}, b: {}}\n", noEnv)
	if len(c.Instances) != 0 {
		t.Errorf("reserved key taken as an instance: %v", c.Instances)
	}
}

func TestInstanceAccessors(t *testing.T) {
	c := mustResolve(t, fleet, noEnv)
	a, ok := c.Instance("simple_agent")
	if !ok {
		t.Fatal("no simple_agent")
	}
	if a.Host() != "127.0.0.1" || a.Port() != 17654 || a.Addr() != "127.0.0.1:17654" {
		t.Errorf("host %q port %d addr %q", a.Host(), a.Port(), a.Addr())
	}
	wantRefs := map[string]gymconfig.Ref{
		"resources_server": {Type: contract.ServerTypeResources, Name: "string_match"},
		"model_server":     {Type: contract.ServerTypeModel, Name: "policy_model"},
	}
	if got := a.Refs(); !reflect.DeepEqual(got, wantRefs) {
		t.Errorf("refs %v", got)
	}
	if got := a.ImplConfig(); !reflect.DeepEqual(got, map[string]any{"max_steps": 3}) {
		t.Errorf("impl config %v", got)
	}
	if u, err := c.URL("string_match"); err != nil || u != "http://127.0.0.1:14321" {
		t.Errorf("URL = %q, %v", u, err)
	}
	if argv, err := a.Command(); argv != nil || err != nil {
		t.Errorf("command %v, %v", argv, err)
	}
	// oc.env gives strings; a port given that way still reads as a number.
	c = mustResolve(t, "x:\n  resources_servers:\n    y: {host: '::1', port: '${oc.env:P}'}\n", testenv.Lookup(map[string]string{"P": "9001"}))
	x, _ := c.Instance("x")
	if x.Port() != 9001 || x.Addr() != "[::1]:9001" {
		t.Errorf("port %d addr %s", x.Port(), x.Addr())
	}
	// Unset host and port.
	e := gymconfig.Instance{Name: "e", Block: map[string]any{}}
	if e.Host() != "" || e.Port() != 0 {
		t.Errorf("empty block: host %q port %d", e.Host(), e.Port())
	}
}

func TestRefsShape(t *testing.T) {
	in := gymconfig.Instance{Block: map[string]any{
		"ok":         map[string]any{"type": "resources_servers", "name": "a"},
		"extra_key":  map[string]any{"type": "resources_servers", "name": "a", "x": 1},
		"bad_type":   map[string]any{"type": "databases", "name": "a"},
		"name_int":   map[string]any{"type": "resources_servers", "name": 3},
		"only_type":  map[string]any{"type": "resources_servers"},
		"not_a_map":  "resources_servers",
		"list_value": []any{"a"},
	}}
	if got := in.Refs(); !reflect.DeepEqual(got, map[string]gymconfig.Ref{"ok": {Type: "resources_servers", Name: "a"}}) {
		t.Errorf("refs %v", got)
	}
	impl := in.ImplConfig()
	if _, ok := impl["ok"]; ok || len(impl) != 6 {
		t.Errorf("impl config %v", impl)
	}
}

func TestCommand(t *testing.T) {
	for _, tc := range []struct {
		block map[string]any
		want  []string
		err   string
	}{
		{map[string]any{"command": []any{"./srv", "--x"}}, []string{"./srv", "--x"}, ""},
		{map[string]any{"command": nil}, nil, ""},
		{map[string]any{"command": "./srv --x"}, nil, "x.resources_servers.y.command: must be a non-empty list of strings (argv), got a string"},
		{map[string]any{"command": []any{}}, nil, "x.resources_servers.y.command: must be a non-empty list of strings (argv), got a list"},
		{map[string]any{"command": []any{"a", 3}}, nil, "x.resources_servers.y.command[1]: must be a string, got 3"},
		{map[string]any{"command": []any{""}}, nil, "x.resources_servers.y.command[0]: the program must not be empty"},
	} {
		in := gymconfig.Instance{Name: "x", Type: "resources_servers", Impl: "y", Block: tc.block}
		got, err := in.Command()
		if !slices.Equal(got, tc.want) || errString(err) != tc.err {
			t.Errorf("%v: %v, %v; want %v, %s", tc.block, got, err, tc.want, tc.err)
		}
	}
}

func TestURLErrors(t *testing.T) {
	c := mustResolve(t, fleet+"noport:\n  resources_servers:\n    y: {host: h}\n", noEnv)
	for name, want := range map[string]string{
		"string_mach": `no instance "string_mach" (did you mean "string_match"?)`,
		"noport":      `instance "noport" has no port`,
	} {
		if _, err := c.URL(name); errString(err) != want {
			t.Errorf("URL(%q): %v, want %s", name, err, want)
		}
	}
}

func TestCheckRefs(t *testing.T) {
	if err := mustResolve(t, fleet, noEnv).CheckRefs(); err != nil {
		t.Fatalf("valid fleet: %v", err)
	}
	for _, tc := range []struct{ from, to, want string }{
		{"name: string_match}", "name: strng_match}",
			`instance "simple_agent" field "resources_server" references resources_servers "strng_match", which is not defined (did you mean "string_match"?)`},
		{"name: policy_model}", "name: nothing_like_it}",
			`instance "simple_agent" field "model_server" references responses_api_models "nothing_like_it", which is not defined`},
		{"name: policy_model}", "name: string_match}",
			`instance "simple_agent" field "model_server" references responses_api_models "string_match", which is not defined ("string_match" is a resources_servers)`},
	} {
		doc := strings.Replace(fleet, tc.from, tc.to, 1)
		if err := mustResolve(t, doc, noEnv).CheckRefs(); errString(err) != tc.want {
			t.Errorf("error\n  %v\nwant\n  %s", err, tc.want)
		}
	}
}

func TestDryRunAndHeadServer(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		dry  bool
		host string
		port int
	}{
		{"", false, gymconfig.DefaultHost, gymconfig.DefaultHeadPort},
		{"dry_run: true\n", true, gymconfig.DefaultHost, gymconfig.DefaultHeadPort},
		{"dry_run: '${oc.env:DRY,false}'\n", false, gymconfig.DefaultHost, gymconfig.DefaultHeadPort},
		{"dry_run: '${oc.env:DRY_SET,false}'\n", true, gymconfig.DefaultHost, gymconfig.DefaultHeadPort},
		{"default_host: 10.0.0.2\n", false, "10.0.0.2", gymconfig.DefaultHeadPort},
		{"default_host: 10.0.0.2\nhead_server: {port: 12000}\n", false, "10.0.0.2", 12000},
		{"head_server: {host: 0.0.0.0, port: 12001}\n", false, "0.0.0.0", 12001},
	} {
		c := mustResolve(t, tc.doc, testenv.Lookup(map[string]string{"DRY_SET": "true"}))
		host, port := c.HeadServer()
		if c.DryRun() != tc.dry || host != tc.host || port != tc.port {
			t.Errorf("%q: dry %v head %s:%d", tc.doc, c.DryRun(), host, port)
		}
	}
}

func TestRedacted(t *testing.T) {
	c := mustResolve(t, fleet+"hf_token: hf_abc\nkeys_list: {api_key: [a, b]}\nnested: {secret: {a: 1, b: [x]}, plain: 1}\nno_key: ~\nx_api_key: null\n", noEnv)
	r := c.Redacted()
	if r["policy_api_key"] != lens.Redacted || r["hf_token"] != lens.Redacted {
		t.Errorf("top-level secrets: %v %v", r["policy_api_key"], r["hf_token"])
	}
	if r["policy_base_url"] != "http://127.0.0.1:8000/v1" || r["policy_model_name"] != "my-model" {
		t.Errorf("non-secret values changed: %v", r)
	}
	m := r["policy_model"].(map[string]any)["responses_api_models"].(map[string]any)["openai_model"].(map[string]any)
	if m["openai_api_key"] != lens.Redacted || m["openai_model"] != "my-model" || m["port"] != 15000 {
		t.Errorf("model block: %v", m)
	}
	nested := r["nested"].(map[string]any)
	if !reflect.DeepEqual(nested["secret"], map[string]any{"a": lens.Redacted, "b": []any{lens.Redacted}}) || nested["plain"] != 1 {
		t.Errorf("nested: %v", nested)
	}
	// Not a sensitive key itself, but api_key below is.
	if got := r["keys_list"].(map[string]any)["api_key"]; !reflect.DeepEqual(got, []any{lens.Redacted, lens.Redacted}) {
		t.Errorf("list under a sensitive key: %v", got)
	}
	if r["x_api_key"] != nil {
		t.Errorf("null secret became %v", r["x_api_key"])
	}
	// Root itself is untouched.
	if c.Root["policy_api_key"] != "dummy" {
		t.Errorf("Redacted changed Root: %v", c.Root["policy_api_key"])
	}
}

func TestReservedAndLauncherKeys(t *testing.T) {
	for _, k := range []string{"config_paths", "head_server", "default_host", "port_range_low", "disallowed_ports", "dry_run", "telemetry", "skip_verification", "skip_verification_reward", "hf_token", "ray_head_node_address"} {
		if !gymconfig.IsReserved(k) {
			t.Errorf("%s not reserved", k)
		}
	}
	for _, k := range []string{"policy_base_url", "policy_api_key", "string_match", "servers"} {
		if gymconfig.IsReserved(k) {
			t.Errorf("%s reserved", k)
		}
	}
	for _, k := range strings.Fields("entrypoint host port num_workers domain verified verified_url description value datasets command metrics_addr") {
		if !gymconfig.IsLauncherKey(k) {
			t.Errorf("%s not a launcher key", k)
		}
	}
	for _, k := range []string{"max_steps", "resources_server", "openai_api_key"} {
		if gymconfig.IsLauncherKey(k) {
			t.Errorf("%s is a launcher key", k)
		}
	}
}

func TestNearest(t *testing.T) {
	known := []string{"enabled", "span_groups", "exporter", "otlp_endpoint"}
	for key, want := range map[string]string{
		"enabeld":     "enabled",
		"ENABLED":     "enabled",
		"span_grups":  "span_groups",
		"exporters":   "exporter",
		"colour":      "",
		"":            "",
		"otlp_endpnt": "otlp_endpoint",
		"xyz":         "",
	} {
		if got := gymconfig.Nearest(key, known); got != want {
			t.Errorf("Nearest(%q) = %q, want %q", key, got, want)
		}
	}
	// Short keys allow distance 2; the nearest wins, ties go to the first.
	if got := gymconfig.Nearest("ab", []string{"xy", "ac", "ad"}); got != "ac" {
		t.Errorf("Nearest(ab) = %q, want ac", got)
	}
	if got := gymconfig.Nearest("abc", nil); got != "" {
		t.Errorf("no known keys: %q", got)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
