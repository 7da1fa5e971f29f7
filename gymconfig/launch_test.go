package gymconfig_test

import (
	"strings"
	"testing"

	"github.com/gymlens/gymlens/gymconfig"
	"github.com/gymlens/gymlens/internal/testenv"
)

func TestLaunchFromEnv(t *testing.T) {
	l, ok, err := gymconfig.LaunchFromEnv(testenv.Lookup(map[string]string{
		gymconfig.EnvConfigDict: fleet,
		gymconfig.EnvConfigPath: "simple_agent",
	}))
	if err != nil || !ok {
		t.Fatalf("ok %v, err %v", ok, err)
	}
	if l.Self.Name != "simple_agent" || l.Self.Impl != "simple_agent" || l.Addr() != "127.0.0.1:17654" {
		t.Errorf("self %+v addr %s", l.Self, l.Addr())
	}
	for field, want := range map[string]string{
		"model_server":     "http://127.0.0.1:15000",
		"resources_server": "http://127.0.0.1:14321",
	} {
		if u, err := l.PeerURL(field); err != nil || u != want {
			t.Errorf("PeerURL(%s) = %q, %v; want %s", field, u, err, want)
		}
	}
	if _, err := l.PeerURL("model_sever"); errString(err) != `instance "simple_agent" has no reference field "model_sever" (did you mean "model_server"?)` {
		t.Errorf("PeerURL typo: %v", err)
	}
}

func TestLaunchFromEnvPeerNotDefined(t *testing.T) {
	doc := strings.Replace(fleet, "name: policy_model}", "name: policy_modl}", 1)
	l, _, err := gymconfig.LaunchFromEnv(testenv.Lookup(map[string]string{gymconfig.EnvConfigDict: doc, gymconfig.EnvConfigPath: "simple_agent"}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.PeerURL("model_server")
	if errString(err) != `instance "simple_agent" field "model_server" references responses_api_models "policy_modl", which is not defined (did you mean "policy_model"?)` {
		t.Errorf("error %v", err)
	}
}

func TestLaunchFromEnvNotLaunched(t *testing.T) {
	for _, env := range []map[string]string{
		nil,
		{gymconfig.EnvConfigPath: ""},
		{gymconfig.EnvConfigDict: fleet},
	} {
		l, ok, err := gymconfig.LaunchFromEnv(testenv.Lookup(env))
		if l != nil || ok || err != nil {
			t.Errorf("%v: %v, %v, %v", env, l, ok, err)
		}
	}
}

func TestLaunchFromEnvErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"dict unset", map[string]string{gymconfig.EnvConfigPath: "simple_agent"},
			`NEMO_GYM_CONFIG_DICT is not set, but NEMO_GYM_CONFIG_PATH is ("simple_agent")`},
		{"dict empty", map[string]string{gymconfig.EnvConfigPath: "simple_agent", gymconfig.EnvConfigDict: ""},
			`NEMO_GYM_CONFIG_DICT is not set, but NEMO_GYM_CONFIG_PATH is ("simple_agent")`},
		{"broken YAML", map[string]string{gymconfig.EnvConfigPath: "x", gymconfig.EnvConfigDict: "a: 1\nb: c: d\n"},
			"NEMO_GYM_CONFIG_DICT: parse config YAML: yaml: line 2: mapping values are not allowed in this context"},
		{"unresolvable", map[string]string{gymconfig.EnvConfigPath: "x", gymconfig.EnvConfigDict: "a: ${oc.env:NOPE}\nx: {resources_servers: {y: {key: '${a}'}}}\n"},
			`NEMO_GYM_CONFIG_DICT: a: ${oc.env:NOPE}: oc.env: environment variable "NOPE" is not set`},
		{"no such instance", map[string]string{gymconfig.EnvConfigPath: "simple_agnt", gymconfig.EnvConfigDict: fleet},
			`NEMO_GYM_CONFIG_PATH: no instance "simple_agnt" in NEMO_GYM_CONFIG_DICT (did you mean "simple_agent"?)`},
		{"not an instance", map[string]string{gymconfig.EnvConfigPath: "policy_api_key", gymconfig.EnvConfigDict: fleet},
			`NEMO_GYM_CONFIG_PATH: "policy_api_key" is a key of NEMO_GYM_CONFIG_DICT but not a server instance`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, ok, err := gymconfig.LaunchFromEnv(testenv.Lookup(tc.env))
			if l != nil || ok || errString(err) != tc.want {
				t.Errorf("%v, %v, error\n  %v\nwant\n  %s", l, ok, err, tc.want)
			}
		})
	}
}

func TestLaunchFromEnvResolvesWithTheSameLookup(t *testing.T) {
	doc := "key: ${oc.env:MY_KEY}\nx:\n  resources_servers:\n    y: {host: 127.0.0.1, port: '${oc.env:MY_PORT,9000}', secret_key: '${key}'}\n"
	l, ok, err := gymconfig.LaunchFromEnv(testenv.Lookup(map[string]string{
		gymconfig.EnvConfigDict: doc, gymconfig.EnvConfigPath: "x", "MY_KEY": "k1",
	}))
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if l.Addr() != "127.0.0.1:9000" || l.Self.ImplConfig()["secret_key"] != "k1" {
		t.Errorf("addr %s impl %v", l.Addr(), l.Self.ImplConfig())
	}
}
