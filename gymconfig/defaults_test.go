package gymconfig_test

import (
	"math/rand/v2"
	"net"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gymlens/gymlens/gymconfig"
)

// unfixed is the fleet without host and port in two of its blocks.
func unfixed(extra string) string {
	doc := strings.Replace(fleet, "      host: 127.0.0.1\n      port: 14321\n", "", 1)
	doc = strings.Replace(doc, "      host: 127.0.0.1\n      port: 15000\n", "", 1)
	return extra + doc
}

func TestDefaultsFillsHostsPortsAndHead(t *testing.T) {
	for seed := range uint64(20) {
		d := mustParse(t, unfixed("port_range_low: 30100\nport_range_high: 30120\ndisallowed_ports: [30101, 30102, 30103, 30104, 30105, 30106]\nskip_verification: true\nskip_verification_reward: 0.5\n"))
		assigned, err := d.Defaults(noEnv, rand.New(rand.NewPCG(seed, 1)))
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if !slices.Equal(assigned, []string{"string_match", "policy_model"}) {
			t.Errorf("assigned %v", assigned)
		}
		// The YAML carries everything Defaults filled; interpolations stay.
		out := d.YAML()
		if !strings.Contains(string(out), "openai_api_key: ${policy_api_key}") {
			t.Errorf("interpolation lost:\n%s", out)
		}
		c := mustResolve(t, string(out), noEnv)
		seen := map[int]bool{}
		for _, in := range c.Instances {
			p := in.Port()
			if in.Host() != gymconfig.DefaultHost {
				t.Errorf("%s: host %q", in.Name, in.Host())
			}
			if in.Name == "simple_agent" {
				if p != 17654 {
					t.Errorf("fixed port changed to %d", p)
				}
			} else if p < 30100 || p > 30120 || (p >= 30101 && p <= 30106) {
				t.Errorf("seed %d: %s got port %d, outside the range or disallowed", seed, in.Name, p)
			}
			if seen[p] {
				t.Errorf("port %d given twice", p)
			}
			seen[p] = true
		}
		sm, _ := c.Instance("string_match")
		pm, _ := c.Instance("policy_model")
		wantDisallowed := []any{11000, sm.Port(), 17654, pm.Port(), 30101, 30102, 30103, 30104, 30105, 30106}
		if got := c.Root[gymconfig.KeyDisallowedPorts]; !reflect.DeepEqual(got, wantDisallowed) {
			t.Errorf("disallowed_ports %v, want %v", got, wantDisallowed)
		}
		if host, port := c.HeadServer(); host != gymconfig.DefaultHost || port != gymconfig.DefaultHeadPort {
			t.Errorf("head %s:%d", host, port)
		}
		if hs, ok := c.Root[gymconfig.KeyHeadServer].(map[string]any); !ok || hs["port"] != 11000 || hs["host"] != "127.0.0.1" {
			t.Errorf("head_server not written: %v", c.Root[gymconfig.KeyHeadServer])
		}
		agent, _ := c.Instance("simple_agent")
		if agent.Block[gymconfig.KeySkipVerification] != true || agent.Block[gymconfig.KeySkipVerificationReward] != 0.5 {
			t.Errorf("skip_verification not copied: %v", agent.Block)
		}
		if _, ok := sm.Block[gymconfig.KeySkipVerification]; ok {
			t.Error("skip_verification copied into a resources server")
		}
	}
}

func TestDefaultsDefaultsAndKeepsWhatIsGiven(t *testing.T) {
	doc := unfixed("default_host: 127.0.0.2\nhead_server: {host: 127.0.0.3, port: 12000}\nskip_verification: true\n")
	doc = strings.Replace(doc, "      max_steps: 3\n", "      max_steps: 3\n      skip_verification: false\n", 1)
	d := mustParse(t, doc)
	if _, err := d.Defaults(noEnv, rand.New(rand.NewPCG(7, 7))); err != nil {
		t.Fatal(err)
	}
	c := mustResolve(t, string(d.YAML()), noEnv)
	for _, in := range c.Instances {
		want := "127.0.0.2"
		if in.Name == "simple_agent" {
			want = "127.0.0.1"
		}
		if in.Host() != want {
			t.Errorf("%s: host %s, want %s", in.Name, in.Host(), want)
		}
		if p := in.Port(); in.Name != "simple_agent" && (p < gymconfig.DefaultPortRangeLow || p > gymconfig.DefaultPortRangeHigh) {
			t.Errorf("%s: port %d outside the default range", in.Name, p)
		}
	}
	if c.Root[gymconfig.KeyPortRangeLow] != gymconfig.DefaultPortRangeLow || c.Root[gymconfig.KeyPortRangeHigh] != gymconfig.DefaultPortRangeHigh {
		t.Errorf("port range not written: %v %v", c.Root[gymconfig.KeyPortRangeLow], c.Root[gymconfig.KeyPortRangeHigh])
	}
	if host, port := c.HeadServer(); host != "127.0.0.3" || port != 12000 {
		t.Errorf("head server changed to %s:%d", host, port)
	}
	if dp := c.Root[gymconfig.KeyDisallowedPorts].([]any); dp[0] != 12000 {
		t.Errorf("disallowed_ports %v does not start with the head port", dp)
	}
	agent, _ := c.Instance("simple_agent")
	if agent.Block[gymconfig.KeySkipVerification] != false {
		t.Errorf("agent's own skip_verification overwritten: %v", agent.Block)
	}
}

func TestDefaultsSkipsABusyPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	busy := l.Addr().(*net.TCPAddr).Port
	doc := "port_range_low: " + strconv.Itoa(busy) + "\nport_range_high: " + strconv.Itoa(busy) + "\nx:\n  resources_servers:\n    y: {domain: d}\n"
	_, err = mustParse(t, doc).Defaults(noEnv, rand.New(rand.NewPCG(1, 1)))
	if err == nil || !strings.Contains(err.Error(), `instance "x": no free port in port_range_low..port_range_high (`+strconv.Itoa(busy)+".."+strconv.Itoa(busy)+`) on host "127.0.0.1"`) {
		t.Errorf("error %v", err)
	}
}

func TestDefaultsErrors(t *testing.T) {
	server := "x:\n  resources_servers:\n    y: {domain: d}\n"
	for _, tc := range []struct{ name, doc, want string }{
		{"empty range", "port_range_low: 30010\nport_range_high: 30000\n" + server,
			"port_range_low..port_range_high: 30010..30000 is an empty range"},
		{"all disallowed", "port_range_low: 30000\nport_range_high: 30001\ndisallowed_ports: [30000, 30001]\n" + server,
			`instance "x": no free port in port_range_low..port_range_high (30000..30001): every port is disallowed or taken`},
		{"range not a port", "port_range_low: abc\n" + server, `port_range_low: abc is not a port number`},
		{"bad fixed port", "x:\n  resources_servers:\n    y: {port: 70000}\n", `x.resources_servers.y.port: 70000 is not a port number`},
		{"port given twice", "x:\n  resources_servers:\n    y: {port: 14000}\nz:\n  resources_servers:\n    y: {port: 14000}\n",
			`z.resources_servers.y.port: port 14000 is also given to "x"`},
		{"head port given", "x:\n  resources_servers:\n    y: {port: 11000}\n", `x.resources_servers.y.port: port 11000 is also given to head_server`},
		{"disallowed not a list", "disallowed_ports: 5\n" + server, "disallowed_ports: must be a list of ports, got int"},
		{"does not resolve", "a: ${nope}\n" + server, `a: ${nope}: no key "nope"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := mustParse(t, tc.doc)
			before := string(d.YAML())
			_, err := d.Defaults(noEnv, rand.New(rand.NewPCG(1, 2)))
			if errString(err) != tc.want {
				t.Errorf("error\n  %v\nwant\n  %s", err, tc.want)
			}
			if string(d.YAML()) != before {
				t.Errorf("a failed Defaults changed the dict")
			}
		})
	}
}

func TestReassign(t *testing.T) {
	d := mustParse(t, unfixed("port_range_low: 30200\nport_range_high: 30210\n"))
	if _, err := d.Defaults(noEnv, rand.New(rand.NewPCG(3, 3))); err != nil {
		t.Fatal(err)
	}
	before := mustResolve(t, string(d.YAML()), noEnv)
	old, _ := before.Instance("string_match")
	port, err := d.Reassign(noEnv, rand.New(rand.NewPCG(4, 4)), "string_match")
	if err != nil {
		t.Fatal(err)
	}
	after := mustResolve(t, string(d.YAML()), noEnv)
	sm, _ := after.Instance("string_match")
	pm, _ := after.Instance("policy_model")
	if sm.Port() != port || port == old.Port() || port == pm.Port() || port < 30200 || port > 30210 {
		t.Errorf("reassigned port %d (block %d, old %d, model %d)", port, sm.Port(), old.Port(), pm.Port())
	}
	dp := after.Root[gymconfig.KeyDisallowedPorts].([]any)
	if !slices.Contains(dp, any(port)) || !slices.Contains(dp, any(old.Port())) {
		t.Errorf("disallowed_ports %v lacks the new %d or the old %d", dp, port, old.Port())
	}
	if _, err := d.Reassign(noEnv, nil, "strng_match"); errString(err) != `reassign port: no instance "strng_match" (did you mean "string_match"?)` {
		t.Errorf("error %v", err)
	}
}
