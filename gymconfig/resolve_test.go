package gymconfig_test

import (
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/gymlens/gymlens/internal/testenv"
)

func TestResolveValues(t *testing.T) {
	env := testenv.Lookup(map[string]string{"HOME_X": "/home/x", "PORT_X": "8123", "EMPTY_X": ""})
	for _, tc := range []struct {
		name string
		doc  string
		path []string // into Root
		want any
	}{
		{"absolute keeps int", "a: {b: 3}\nc: ${a.b}\n", []string{"c"}, 3},
		{"absolute keeps bool", "a: true\nc: ${a}\n", []string{"c"}, true},
		{"absolute keeps float", "a: 0.5\nc: ${a}\n", []string{"c"}, 0.5},
		{"absolute keeps null", "a: null\nc: ${a}\n", []string{"c"}, nil},
		{"absolute keeps mapping", "a: {b: 1, c: [x]}\nd: ${a}\n", []string{"d"}, map[string]any{"b": 1, "c": []any{"x"}}},
		{"absolute keeps list", "a: [1, 2]\nd: ${a}\n", []string{"d"}, []any{1, 2}},
		{"list index dotted", "a: [x, y]\nd: ${a.1}\n", []string{"d"}, "y"},
		{"list index bracket", "a: [{n: x}, {n: y}]\nd: ${a[1].n}\n", []string{"d"}, "y"},
		{"chain", "a: ${b}\nb: ${c}\nc: 7\n", []string{"a"}, 7},
		{"through an interpolated mapping", "a: {x: 1}\nb: ${a}\nc: ${b.x}\n", []string{"c"}, 1},
		{"relative sibling", "s: {a: 1, b: '${.a}'}\n", []string{"s", "b"}, 1},
		{"relative parent", "a: 2\ns: {b: '${..a}'}\n", []string{"s", "b"}, 2},
		{"relative grandparent", "a: 5\ns: {t: {b: '${...a}'}}\n", []string{"s", "t", "b"}, 5},
		{"relative into a sibling mapping", "s: {x: {y: 4}, b: '${.x.y}'}\n", []string{"s", "b"}, 4},
		{"relative in a list", "s: {v: 9, l: ['${..v}']}\n", []string{"s", "l"}, []any{9}},
		{"string interpolation", "h: localhost\np: 80\nu: http://${h}:${p}/v1\n", []string{"u"}, "http://localhost:80/v1"},
		{"string interpolation of bool and null", "b: true\nn: null\nf: 1.0\ns: ${b}-${n}-${f}\n", []string{"s"}, "True-None-1.0"},
		{"escaped", `s: 'cost \${x} ${y}'` + "\ny: 1\n", []string{"s"}, "cost ${x} 1"},
		{"escaped alone", `s: '\${x}'`, []string{"s"}, "${x}"},
		{"escaped backslash", `s: '\\${y}'` + "\ny: 1\n", []string{"s"}, `\1`},
		{"nested key", "k: b\na: {b: 3}\nc: ${a.${k}}\n", []string{"c"}, 3},
		{"whitespace", "a: 1\nc: ${ a }\n", []string{"c"}, 1},
		{"dollar without brace", "c: a$b\n", []string{"c"}, "a$b"},
		{"oc.env set", "h: ${oc.env:HOME_X}\n", []string{"h"}, "/home/x"},
		{"oc.env is a string", "p: ${oc.env:PORT_X}\n", []string{"p"}, "8123"},
		{"oc.env empty is set", "p: ${oc.env:EMPTY_X,dflt}\n", []string{"p"}, ""},
		{"oc.env default", "p: ${oc.env:UNSET_X,8000}\n", []string{"p"}, "8000"},
		{"oc.env default text", "p: ${oc.env:UNSET_X,abc}\n", []string{"p"}, "abc"},
		{"oc.env default quoted", "p: \"${oc.env:UNSET_X,'a, b'}\"\n", []string{"p"}, "a, b"},
		{"oc.env default null", "p: ${oc.env:UNSET_X,null}\n", []string{"p"}, nil},
		{"oc.env default empty", "p: ${oc.env:UNSET_X,}\n", []string{"p"}, ""},
		{"oc.env default bool", "p: ${oc.env:UNSET_X,true}\n", []string{"p"}, "True"},
		{"oc.env default interpolation", "m: my-model\np: ${oc.env:UNSET_X,${m}}\n", []string{"p"}, "my-model"},
		{"oc.env default interpolation keeps set var", "p: ${oc.env:HOME_X,${missing_but_unused}}\n", []string{"p"}, "/home/x"},
		{"oc.env in a string", "u: http://${oc.env:HOME_X}/x\n", []string{"u"}, "http:///home/x/x"},
		{"oc.env spaces", "p: '${oc.env: UNSET_X , 3 }'\n", []string{"p"}, "3"},
		{"literal ??? inside text", "s: what???\n", []string{"s"}, "what???"},
		{"alias", "a: &x {v: 1}\nb: *x\n", []string{"b", "v"}, 1},
		{"merge key", "base: &b {v: 1, w: 2}\nc: {<<: *b, w: 3}\n", []string{"c"}, map[string]any{"v": 1, "w": 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := mustResolve(t, tc.doc, env)
			var got any = c.Root
			for _, k := range tc.path {
				got = got.(map[string]any)[k]
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("%v = %#v, want %#v", tc.path, got, tc.want)
			}
		})
	}
}

func TestResolveErrors(t *testing.T) {
	env := testenv.Lookup(map[string]string{"SET_X": "1"})
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"typo with suggestion", fleet + "\nx: ${policy_api_kye}\n", `x: ${policy_api_kye}: no key "policy_api_kye" (did you mean "policy_api_key"?)`},
		{"typo deep in a server block", strings.Replace(fleet, "${policy_api_key}", "${policy_api_kye}", 1),
			`policy_model.responses_api_models.openai_model.openai_api_key: ${policy_api_kye}: no key "policy_api_kye" (did you mean "policy_api_key"?)`},
		{"nested typo", "a: {port: 1}\nb: ${a.prot}\n", `b: ${a.prot}: no key "a.prot" (did you mean "a.port"?)`},
		{"no suggestion", "alpha: 1\nb: ${zzzzzzzz}\n", `b: ${zzzzzzzz}: no key "zzzzzzzz"`},
		{"into a scalar", "a: 1\nb: ${a.c}\n", `b: ${a.c}: no key "a.c": "a" is not a mapping`},
		{"list index out of range", "a: [1]\nb: ${a.3}\n", `b: ${a.3}: no element "3" in list "a" (1 elements)`},
		{"relative typo", "s: {port: 1, b: '${.prot}'}\n", `s.b: ${.prot}: no key "s.prot" (did you mean "s.port"?)`},
		{"relative above the top", "s: ${...x}\n", `s: ${...x}: relative interpolation "...x" goes above the top level`},
		{"in a list", "alpha: 1\nl: [x, '${beta}']\n", `l[1]: ${beta}: no key "beta"`},
		{"innermost location", "first: ${second}\nsecond: ${third}\n", `second: ${third}: no key "third"`},
		{"env unset", "k: ${oc.env:UNSET_X}\n", `k: ${oc.env:UNSET_X}: oc.env: environment variable "UNSET_X" is not set`},
		{"env too many args", "k: ${oc.env:A,b,c}\n", `k: ${oc.env:A,b,c}: oc.env takes a variable name and an optional default, got 3 arguments`},
		{"env no args", "k: ${oc.env:}\n", `k: ${oc.env:}: oc.env takes a variable name and an optional default, got 0 arguments`},
		{"env default broken", "k: ${oc.env:UNSET_X,${nope}}\n", `k: ${nope}: no key "nope"`},
		{"unknown resolver", "k: ${foo:bar}\n", `k: ${foo:bar}: unknown resolver "foo"`},
		{"unknown resolver suggestion", "k: ${oc.evn:SET_X}\n", `k: ${oc.evn:SET_X}: unknown resolver "oc.evn" (did you mean "oc.env"?)`},
		{"missing", "a: {b: '???'}\n", `a.b: missing mandatory value (???)`},
		{"missing in a list, all listed", "l: [1, '???']\nm: ???\n", `l[1]: missing mandatory value (???); m: missing mandatory value (???)`},
		{"missing referenced", "a: ???\nb: ${a}\n", `a: missing mandatory value (???)`},
		{"self cycle", "a: ${a}\n", `a: ${a}: reference cycle: a -> a`},
		{"cycle", "a: ${b}\nb: ${c}\nc: ${a}\n", `c: ${a}: reference cycle: a -> b -> c -> a`},
		{"cycle through a mapping", "a: {x: '${a}'}\n", `a.x: ${a}: reference cycle: a.x -> a.x`},
		{"cycle through a path", "a: ${a.x}\n", `a: ${a.x}: reference cycle: a -> a`},
		{"string cycle", "a: x${b}\nb: y${a}\n", `b: ${a}: reference cycle: a -> b -> a`},
		{"unclosed", "a: ${b\n", `a: unclosed interpolation "${b"`},
		{"empty", "a: ${}\n", `a: ${}: empty interpolation`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := mustParse(t, tc.doc).Resolve(env)
			if err == nil || err.Error() != tc.want {
				t.Errorf("error\n  %v\nwant\n  %s", err, tc.want)
			}
		})
	}
}

func TestResolveDepthIsBounded(t *testing.T) {
	var b strings.Builder
	for i := range 200 {
		b.WriteString("k" + itoa(i) + ": ${k" + itoa(i+1) + "}\n")
	}
	b.WriteString("k200: end\n")
	_, err := mustParse(t, b.String()).Resolve(noEnv)
	if err == nil || !strings.Contains(err.Error(), "interpolations nested deeper than 64 levels") {
		t.Errorf("error %v", err)
	}
}

func TestResolveInterpolationBombIsBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("x0: [a, b, c, d]\n")
	for i := 1; i <= 30; i++ {
		b.WriteString("x" + itoa(i) + ": ['${x" + itoa(i-1) + "}', '${x" + itoa(i-1) + "}']\n")
	}
	_, err := mustParse(t, b.String()).Resolve(noEnv)
	if err == nil || !strings.Contains(err.Error(), "config too large to resolve") {
		t.Errorf("error %v", err)
	}
}

func TestResolvedValuesAreNotShared(t *testing.T) {
	c := mustResolve(t, "a: {x: [1]}\nb: ${a}\nc: ${a}\n", noEnv)
	c.Root["b"].(map[string]any)["x"].([]any)[0] = 2
	if c.Root["a"].(map[string]any)["x"].([]any)[0] != 1 || c.Root["c"].(map[string]any)["x"].([]any)[0] != 1 {
		t.Errorf("resolved copies share storage: %v", c.Root)
	}
}

func TestResolveNilLookupUsesTheProcessEnvironment(t *testing.T) {
	t.Setenv("GYMCONFIG_TEST_VAR", "from-env")
	c := mustResolve(t, "v: ${oc.env:GYMCONFIG_TEST_VAR}\n", nil)
	if c.Root["v"] != "from-env" {
		t.Errorf("v = %v", c.Root["v"])
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
