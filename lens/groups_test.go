package lens_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/gymlens/gymlens/lens"
)

var baseGroupNames = []string{"job", "checkpoint", "evaluate", "model_init",
	"load_checkpoint", "step", "forward_backward", "optimizer"}

func TestNewGroupSetBaseGroups(t *testing.T) {
	s := lens.NewGroupSet()
	consts := []lens.SpanGroup{lens.GroupJob, lens.GroupCheckpoint, lens.GroupEvaluate, lens.GroupModelInit,
		lens.GroupLoadCheckpoint, lens.GroupStep, lens.GroupForwardBackward, lens.GroupOptimizer}
	for i, name := range baseGroupNames {
		g, ok := s.Group(name)
		if !ok || g != consts[i] {
			t.Errorf("Group(%q) = %d, %v; want %d", name, g, ok, consts[i])
		}
		if got := s.Name(consts[i]); got != name {
			t.Errorf("Name(%d) = %q, want %q", consts[i], got, name)
		}
	}
	if lens.FirstCustomGroup != lens.SpanGroup(len(baseGroupNames)) {
		t.Errorf("FirstCustomGroup = %d, want %d", lens.FirstCustomGroup, len(baseGroupNames))
	}
	if got := s.Name(lens.FirstCustomGroup); got != "" {
		t.Errorf("Name of an undefined bit = %q", got)
	}
	if got := s.Name(200); got != "" {
		t.Errorf("Name(200) = %q", got)
	}
	if _, ok := s.Group(" JOB "); !ok {
		t.Error("Group lookup is not case/space-insensitive")
	}
	if got := s.Presets(); !slices.Equal(got, []string{lens.PresetAll, lens.PresetDefault}) {
		t.Errorf("Presets() = %v, want all and default", got)
	}
	if m, err := s.Resolve(lens.PresetDefault); err != nil || m != maskOf(lens.GroupJob) {
		t.Errorf("bare default preset = %b, %v; want job", m, err)
	}
	want := append(slices.Clone(baseGroupNames), lens.PresetAll, lens.PresetDefault)
	slices.Sort(want)
	if got := s.ValidNames(); !slices.Equal(got, want) {
		t.Errorf("ValidNames() = %v, want %v", got, want)
	}
}

func maskOf(gs ...lens.SpanGroup) lens.GroupMask {
	var m lens.GroupMask
	for _, g := range gs {
		m |= 1 << g
	}
	return m
}

// testGroupSet adds two application groups and a few presets, including a
// preset built from another preset.
func testGroupSet(t *testing.T) (*lens.GroupSet, lens.SpanGroup, lens.SpanGroup) {
	t.Helper()
	s := lens.NewGroupSet()
	server, client := lens.FirstCustomGroup, lens.FirstCustomGroup+1
	for name, g := range map[string]lens.SpanGroup{"server": server, "http_client": client} {
		if err := s.Define(name, g); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []struct {
		name    string
		members []string
	}{
		{"edges", []string{"server", "HTTP_Client"}},
		{"default", []string{"job", "edges"}},
		{"training", []string{"step", "forward_backward", "optimizer"}},
		{"everything_trained", []string{"default", "training"}},
	} {
		if err := s.DefinePreset(p.name, p.members...); err != nil {
			t.Fatal(err)
		}
	}
	return s, server, client
}

func TestGroupSetResolve(t *testing.T) {
	s, server, client := testGroupSet(t)
	all := maskOf(lens.GroupJob, lens.GroupCheckpoint, lens.GroupEvaluate, lens.GroupModelInit,
		lens.GroupLoadCheckpoint, lens.GroupStep, lens.GroupForwardBackward, lens.GroupOptimizer, server, client)
	cases := map[string]lens.GroupMask{
		"":                    0,
		",,":                  0,
		" , ":                 0,
		"job":                 maskOf(lens.GroupJob),
		"job,step":            maskOf(lens.GroupJob, lens.GroupStep),
		" JOB ,  Step ":       maskOf(lens.GroupJob, lens.GroupStep),
		"job,,job,":           maskOf(lens.GroupJob),
		"edges":               maskOf(server, client),
		"default":             maskOf(lens.GroupJob, server, client),
		"DEFAULT, evaluate":   maskOf(lens.GroupJob, server, client, lens.GroupEvaluate),
		"everything_trained":  maskOf(lens.GroupJob, server, client, lens.GroupStep, lens.GroupForwardBackward, lens.GroupOptimizer),
		"all":                 all,
		" ALL , job":          all,
		"training,checkpoint": maskOf(lens.GroupStep, lens.GroupForwardBackward, lens.GroupOptimizer, lens.GroupCheckpoint),
	}
	for spec, want := range cases {
		got, err := s.Resolve(spec)
		if err != nil || got != want {
			t.Errorf("Resolve(%q) = %b, %v; want %b", spec, got, err, want)
		}
	}
}

func TestGroupSetResolveUnknownListsValidNames(t *testing.T) {
	s, _, _ := testGroupSet(t)
	m, err := s.Resolve("job, verfy")
	if err == nil {
		t.Fatal("unknown group accepted")
	}
	if m != 0 {
		t.Errorf("mask %b returned with an error", m)
	}
	msg := err.Error()
	if !strings.Contains(msg, `"verfy"`) {
		t.Errorf("error %q does not name the unknown group", msg)
	}
	valid := s.ValidNames()
	for _, name := range append(slices.Clone(baseGroupNames), "server", "http_client", "all", "default", "edges", "training", "everything_trained") {
		if !slices.Contains(valid, name) {
			t.Errorf("ValidNames() lacks %q", name)
		}
		if !strings.Contains(msg, name) {
			t.Errorf("error %q does not list valid name %q", msg, name)
		}
	}
	if !slices.IsSorted(valid) {
		t.Errorf("ValidNames() not sorted: %v", valid)
	}
}

func TestGroupSetAllTracksDefinedGroups(t *testing.T) {
	s := lens.NewGroupSet()
	before, err := s.Resolve("all")
	if err != nil || before != maskOf(lens.GroupJob, lens.GroupCheckpoint, lens.GroupEvaluate, lens.GroupModelInit,
		lens.GroupLoadCheckpoint, lens.GroupStep, lens.GroupForwardBackward, lens.GroupOptimizer) {
		t.Fatalf("Resolve(all) = %b, %v", before, err)
	}
	if err := s.Define("top_bit", 63); err != nil {
		t.Fatal(err)
	}
	after, _ := s.Resolve("all")
	if after != before|1<<63 {
		t.Errorf("Resolve(all) after defining bit 63 = %b", after)
	}
	if names := s.Names(after); len(names) != len(baseGroupNames)+1 || !slices.IsSorted(names) || !slices.Contains(names, "top_bit") {
		t.Errorf("Names(all) = %v", names)
	}
}

func TestGroupSetNamesIgnoresUndefinedBits(t *testing.T) {
	s := lens.NewGroupSet()
	got := s.Names(maskOf(lens.GroupStep, lens.GroupJob, 40))
	if !slices.Equal(got, []string{"job", "step"}) {
		t.Errorf("Names = %v, want [job step]", got)
	}
}

func TestGroupSetDefineRejects(t *testing.T) {
	s := lens.NewGroupSet()
	if err := s.DefinePreset("myset", "job"); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		bit  lens.SpanGroup
	}{
		{"job", lens.FirstCustomGroup},   // duplicate name
		{" Job ", lens.FirstCustomGroup}, // duplicate name, other spelling
		{"all", lens.FirstCustomGroup},   // the implicit preset
		{"myset", lens.FirstCustomGroup}, // a preset's name
		{"fresh", lens.GroupStep},        // bit already used
		{"fresh", lens.MaxGroups},        // out of range
		{"fresh", 255},                   // far out of range
		{"   ", lens.FirstCustomGroup},   // empty name
	}
	for _, c := range cases {
		if err := s.Define(c.name, c.bit); err == nil {
			t.Errorf("Define(%q, %d) accepted", c.name, c.bit)
		}
	}
	// None of the failed calls may have changed the set.
	if _, ok := s.Group("fresh"); ok {
		t.Error("a rejected Define left a group behind")
	}
	if g, _ := s.Group("job"); g != lens.GroupJob {
		t.Errorf("job moved to bit %d", g)
	}
	if err := s.Define("fresh", lens.MaxGroups-1); err != nil {
		t.Errorf("highest bit rejected: %v", err)
	}
}

func TestGroupSetDefinePresetRejects(t *testing.T) {
	s := lens.NewGroupSet()
	if err := s.DefinePreset("p", "job"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		members []string
	}{
		{"", []string{"job"}},
		{"all", []string{"job"}},
		{"job", []string{"step"}},
		{"q", []string{"job", "nope"}},
		{"self", []string{"self"}}, // members must exist first, so no cycles
	} {
		if err := s.DefinePreset(c.name, c.members...); err == nil {
			t.Errorf("DefinePreset(%q, %v) accepted", c.name, c.members)
		}
	}
	if m, err := s.Resolve("p"); err != nil || m != maskOf(lens.GroupJob) {
		t.Errorf("preset p changed by rejected definitions: %b, %v", m, err)
	}
	// Redefining a preset replaces it (applications redefine "default").
	if err := s.DefinePreset("p", "step"); err != nil {
		t.Fatal(err)
	}
	if m, err := s.Resolve("p"); err != nil || m != maskOf(lens.GroupStep) {
		t.Errorf("redefined preset p = %b, %v; want step", m, err)
	}
}

func TestGroupMaskHas(t *testing.T) {
	m := maskOf(lens.GroupJob, 63)
	if !m.Has(lens.GroupJob) || !m.Has(63) || m.Has(lens.GroupStep) {
		t.Errorf("Has wrong for %b", m)
	}
	for _, g := range []lens.SpanGroup{64, 65, 127, 255} {
		if lens.GroupMask(^uint64(0)).Has(g) {
			t.Errorf("full mask Has(%d)", g)
		}
	}
}

func TestEnabledFalseWithoutSetup(t *testing.T) {
	isolateTelemetry(t)
	if m := lens.EnabledGroups(); m != 0 {
		t.Errorf("EnabledGroups() = %b before Setup", m)
	}
	for g := range lens.SpanGroup(255) {
		if lens.Enabled(g) {
			t.Errorf("Enabled(%d) before Setup", g)
		}
	}
}
