package gymconfig_test

import (
	"testing"

	"github.com/gymlens/gymlens/gymconfig"
	"github.com/gymlens/gymlens/internal/testenv"
)

// FuzzResolve checks that Parse and Resolve never panic, are bounded on
// alias and interpolation bombs, and that a dict that resolves still
// resolves after going through its own YAML; that lazy resolution never
// panics and, on a dict that resolves, agrees with Resolve.
func FuzzResolve(f *testing.F) {
	for _, seed := range []string{
		fleet,
		"",
		"a: ${b}\nb: ${a}\n",
		"a: {x: '${a}'}\n",
		"a: ${.x}\n",
		"s: {t: '${...x}'}\n",
		"a: '${oc.env:X,${oc.env:Y,${b}}}'\nb: 1\n",
		"a: \"${oc.env:X,'q,}'}\"\n",
		"a: ${foo:bar}\n",
		"a: '\\${x} \\\\${y}'\ny: 2\n",
		"a: ${b\n",
		"a: ???\n",
		"a: [1, {b: '${a[0]}'}]\n",
		"a: '${a.${a}}'\n",
		"x0: [a]\nx1: ['${x0}', '${x0}']\nx2: ['${x1}', '${x1}']\n",
		"base: &b {port: 1}\nx:\n  resources_servers:\n    y: {<<: *b}\n",
		"x:\n  resources_servers: {a: {}, b: {}}\n",
		testenv.AliasBomb("j: *i\n"),
		testenv.AliasBomb("j: '${i}'\n"),
	} {
		f.Add([]byte(seed))
	}
	env := testenv.Lookup(map[string]string{"X": "x", "PORT": "8080"})
	f.Fuzz(func(t *testing.T, doc []byte) {
		if len(doc) > 64<<10 {
			t.Skip("document too large")
		}
		d, err := gymconfig.Parse(doc)
		if err != nil {
			return
		}
		lazy := d.Lazy(env)
		refs, _ := lazy.Instances()
		for _, r := range refs {
			_, _, _ = lazy.Instance(r.Name)
			_, _ = lazy.URL(r.Name)
		}
		_, _ = lazy.DryRun()
		c, err := d.Resolve(env)
		if err != nil {
			return
		}
		assertLazyAgrees(t, d, env)
		_ = c.Redacted()
		_ = c.CheckRefs()
		for _, in := range c.Instances {
			_, _ = in.Command()
			_ = in.ImplConfig()
			_ = in.Addr()
		}
		back, err := gymconfig.Parse(d.YAML())
		if err != nil {
			t.Fatalf("own YAML does not parse: %v\n%s", err, d.YAML())
		}
		if _, err := back.Resolve(env); err != nil {
			t.Fatalf("resolved before its YAML round trip, not after: %v\n%s", err, d.YAML())
		}
	})
}
