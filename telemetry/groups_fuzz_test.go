package telemetry_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/gymlens/gymlens/telemetry"
)

// refGroups is DESIGN.md §6 written out: the groups and what each preset
// stands for. The fuzz target resolves against it independently of
// lens.GroupSet.
var refGroups = func() map[string][]string {
	groups := []string{"job", "checkpoint", "evaluate", "model_init", "load_checkpoint", "step",
		"forward_backward", "optimizer", "server", "http_client", "rollout", "verify", "agent",
		"model_call", "sandbox"}
	m := map[string][]string{
		"default":     {"job", "server", "http_client", "rollout"},
		"per_rollout": {"server", "http_client", "rollout", "verify", "agent", "model_call"},
		"all":         groups,
	}
	for _, g := range groups {
		m[g] = []string{g}
	}
	return m
}()

// refResolve resolves spec against refGroups; ok is false when a name is
// unknown.
func refResolve(spec string) (names []string, ok bool) {
	set := map[string]bool{}
	for part := range strings.SplitSeq(spec, ",") {
		name := strings.ToLower(strings.TrimSpace(part))
		if name == "" {
			continue
		}
		members, known := refGroups[name]
		if !known {
			return nil, false
		}
		for _, m := range members {
			set[m] = true
		}
	}
	for n := range set {
		names = append(names, n)
	}
	slices.Sort(names)
	return names, true
}

// shout upper-cases the ASCII letters of spec and pads every comma with
// spaces and tabs. Only ASCII is upper-cased: full Unicode upper-casing
// maps some non-ASCII letters onto ASCII ones (ſ to S, ı to I), which
// would turn a name that is rightly unknown into a known one.
func shout(spec string) string {
	b := []byte(spec)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return " \t" + strings.ReplaceAll(string(b), ",", "  ,\t ") + "  "
}

func FuzzResolveSpanGroups(f *testing.F) {
	for _, seed := range []string{
		"", " ", ",", ",,,", "default", "per_rollout", "all", "ALL", " Default , verify ",
		"job,job,JOB", "server,http_client", "sandbox, model_call ,agent", "default,per_rollout",
		"nope", "default,nope", "job;step", "job step", "Server\t,\nrollout", "\u00a0verify\u00a0",
		"ſerver", "model_ınit", "job,\x00", "verify,", ",verify", "all,,,default",
		"forward_backward,optimizer,load_checkpoint,evaluate,checkpoint,step,model_init",
	} {
		f.Add(seed)
	}
	valid := telemetry.GroupSet().ValidNames()
	f.Fuzz(func(t *testing.T, spec string) {
		got, err := telemetry.ResolveSpanGroups(spec)
		want, ok := refResolve(spec)
		if ok != (err == nil) {
			t.Fatalf("ResolveSpanGroups(%q) = %q, %v; the documented rules say valid=%v", spec, got, err, ok)
		}
		if err != nil {
			for _, name := range valid {
				if !strings.Contains(err.Error(), name) {
					t.Errorf("error %q does not list the valid name %q", err, name)
				}
			}
		} else {
			if !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != len(got) {
				t.Errorf("ResolveSpanGroups(%q) = %q: not sorted and unique", spec, got)
			}
			if !slices.Equal(got, want) {
				t.Errorf("ResolveSpanGroups(%q) = %q, want %q", spec, got, want)
			}
		}

		// Case and the spaces around commas do not matter.
		loud := shout(spec)
		got2, err2 := telemetry.ResolveSpanGroups(loud)
		if (err == nil) != (err2 == nil) || !slices.Equal(got, got2) {
			t.Errorf("ResolveSpanGroups(%q) = %q, %v but ResolveSpanGroups(%q) = %q, %v", spec, got, err, loud, got2, err2)
		}
	})
}
