package gymconfig_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/gymlens/gymlens/gymconfig"
	"github.com/gymlens/gymlens/internal/testenv"
)

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ name, doc, want string }{
		{"syntax keeps the line", "a: 1\nb: 2\nc: d: e\n", "parse config YAML: yaml: line 3: mapping values are not allowed in this context"},
		{"top level list", "- a\n- b\n", "parse config YAML: line 1: the top level must be a mapping"},
		{"top level scalar", "just text\n", "parse config YAML: line 1: the top level must be a mapping"},
		{"duplicate key", "a: 1\nb: 2\na: 3\n", `line 3: mapping key "a" already defined at line 1`},
		{"nested duplicate key", "a:\n  x: 1\n  x: 2\n", `line 3: mapping key "x" already defined at line 2`},
		{"key that is a list", "? [a, b]\n: 1\n", "invalid map key"},
		{"alias bomb", testenv.AliasBomb("j: *i\n"), "excessive aliasing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := gymconfig.Parse([]byte(tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
	for _, doc := range []string{"", "\n", "~\n", "# only a comment\n"} {
		d, err := gymconfig.Parse([]byte(doc))
		if err != nil {
			t.Fatalf("%q: %v", doc, err)
		}
		if got, _ := d.Get(nil); !reflect.DeepEqual(got, map[string]any{}) {
			t.Errorf("%q: dict %v, want empty", doc, got)
		}
	}
}

func TestSetGetDelete(t *testing.T) {
	d := mustParse(t, "a:\n  b: ${x}\n  l: [1, {m: 2}]\nx: 3\n")
	if v, ok := d.Get([]string{"a", "b"}); !ok || v != "${x}" {
		t.Errorf("Get a.b = %v, %v (want the unresolved text)", v, ok)
	}
	if v, ok := d.Get([]string{"a", "l", "1", "m"}); !ok || v != 2 {
		t.Errorf("Get a.l.1.m = %v, %v", v, ok)
	}
	if _, ok := d.Get([]string{"a", "zz"}); ok {
		t.Error("Get of a missing key found something")
	}
	for _, s := range []struct {
		path []string
		v    any
	}{
		{[]string{"a", "b"}, "replaced"},
		{[]string{"new", "deep", "key"}, 7},
		{[]string{"a", "l", "0"}, "first"},
		{[]string{"m"}, map[string]any{"k": []any{"x", 1}}},
	} {
		if err := d.Set(s.path, s.v); err != nil {
			t.Fatalf("Set %v: %v", s.path, err)
		}
		if got, _ := d.Get(s.path); !reflect.DeepEqual(got, s.v) {
			t.Errorf("after Set %v = %v, Get gives %v", s.path, s.v, got)
		}
	}
	for path, want := range map[string]string{
		"x.y":   "set x.y: x is not a mapping",
		"a.l.5": `set a.l.5: a.l is a list without element "5"`,
		"":      "set: empty key path",
	} {
		var p []string
		if path != "" {
			p = strings.Split(path, ".")
		}
		if err := d.Set(p, 1); errString(err) != want {
			t.Errorf("Set %q: %v, want %s", path, err, want)
		}
	}
	d.Delete([]string{"new", "deep"})
	d.Delete([]string{"nothing", "here"})
	d.Delete([]string{"a", "l", "0"})
	got, _ := d.Get(nil)
	want := map[string]any{
		"a":   map[string]any{"b": "replaced", "l": []any{map[string]any{"m": 2}}},
		"x":   3,
		"new": map[string]any{},
		"m":   map[string]any{"k": []any{"x", 1}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("dict %v, want %v", got, want)
	}
}

func TestYAMLKeepsInterpolationsAndOrder(t *testing.T) {
	d := mustParse(t, fleet)
	out := string(d.YAML())
	for _, want := range []string{"openai_api_key: ${policy_api_key}", "openai_base_url: ${policy_base_url}"} {
		if !strings.Contains(out, want) {
			t.Errorf("YAML lacks %q:\n%s", want, out)
		}
	}
	if strings.Index(out, "string_match:") > strings.Index(out, "simple_agent:") || strings.Index(out, "simple_agent:") > strings.Index(out, "policy_model:") {
		t.Errorf("key order lost:\n%s", out)
	}
	// The YAML parses back to the same dict, and resolves the same.
	back := mustParse(t, out)
	a, _ := d.Get(nil)
	b, _ := back.Get(nil)
	if !reflect.DeepEqual(a, b) {
		t.Errorf("round trip changed the dict:\n%v\n%v", a, b)
	}
}

func TestAliasesAreExpandedIndependently(t *testing.T) {
	d := mustParse(t, "base: &b {host: h, port: 1}\nx:\n  resources_servers:\n    y: *b\nz:\n  resources_servers:\n    y: {<<: *b, port: 2}\n")
	if err := d.Set([]string{"x", "resources_servers", "y", "port"}, 9); err != nil {
		t.Fatal(err)
	}
	c, err := d.Resolve(noEnv)
	if err != nil {
		t.Fatal(err)
	}
	x, _ := c.Instance("x")
	z, _ := c.Instance("z")
	if x.Port() != 9 || z.Port() != 2 || c.Root["base"].(map[string]any)["port"] != 1 {
		t.Errorf("x %d z %d base %v: a Set through an alias leaked", x.Port(), z.Port(), c.Root["base"])
	}
	if strings.Contains(string(d.YAML()), "*b") {
		t.Errorf("YAML still has aliases:\n%s", d.YAML())
	}
}
