package lens

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
)

// SpanGroup identifies one span group: a family of instrumentation sites that
// is switched on or off as a whole. Its value is a bit position in the
// process gate, so at most MaxGroups groups exist.
type SpanGroup uint8

// MaxGroups is how many span groups one process can distinguish.
const MaxGroups = 64

// The generic (lens) span groups. Applications add their own starting at
// FirstCustomGroup.
const (
	GroupJob SpanGroup = iota
	GroupCheckpoint
	GroupEvaluate
	GroupModelInit
	GroupLoadCheckpoint
	GroupStep
	GroupForwardBackward
	GroupOptimizer

	// FirstCustomGroup is the first bit free for application groups.
	FirstCustomGroup
)

// PresetAll is the preset every GroupSet has: all defined groups.
const PresetAll = "all"

// GroupMask is a set of span groups.
type GroupMask uint64

// Has reports whether g is in the mask.
func (m GroupMask) Has(g SpanGroup) bool { return m&(1<<g) != 0 }

// gate is the process-wide set of enabled groups. It is written by Setup and
// Shutdown and read by Enabled on every instrumentation site.
var gate atomic.Uint64

// Enabled reports whether span group g is enabled in this process. It is
// false before Setup, after Shutdown, and in a process that does not export.
// It costs one atomic load and a bit test.
func Enabled(g SpanGroup) bool { return gate.Load()&(1<<g) != 0 }

// EnabledGroups returns the mask currently published to the gate.
func EnabledGroups() GroupMask { return GroupMask(gate.Load()) }

// GroupSet names span groups and presets, and resolves specifications such
// as "default, verify" against them. Build one at start-up; it is not safe to
// define groups concurrently with resolution.
type GroupSet struct {
	byName  map[string]SpanGroup
	names   [MaxGroups]string
	defined GroupMask
	presets map[string][]string
}

// PresetDefault is the preset SPAN_GROUPS names when unset. In a bare
// GroupSet it holds the job group; applications redefine it.
const PresetDefault = "default"

// NewGroupSet returns a set holding the generic lens groups (job, checkpoint,
// evaluate, model_init, load_checkpoint, step, forward_backward, optimizer),
// the "default" preset (job) and the implicit "all" preset.
func NewGroupSet() *GroupSet {
	s := &GroupSet{byName: map[string]SpanGroup{}, presets: map[string][]string{}}
	for g, name := range []string{"job", "checkpoint", "evaluate", "model_init",
		"load_checkpoint", "step", "forward_backward", "optimizer"} {
		if err := s.Define(name, SpanGroup(g)); err != nil {
			panic(err) // unreachable: the built-in names are distinct
		}
	}
	s.presets[PresetDefault] = []string{"job"}
	return s
}

// Define names the group g. Names are case-insensitive and must be unique,
// as must bit positions.
func (s *GroupSet) Define(name string, g SpanGroup) error {
	name = normalize(name)
	switch {
	case name == "":
		return fmt.Errorf("lens: empty span group name")
	case g >= MaxGroups:
		return fmt.Errorf("lens: span group %q: bit %d out of range", name, g)
	case s.defined.Has(g):
		return fmt.Errorf("lens: span group bit %d already used by %q", g, s.names[g])
	case s.has(name):
		return fmt.Errorf("lens: span group or preset %q already defined", name)
	}
	s.byName[name] = g
	s.names[g] = name
	s.defined |= 1 << g
	return nil
}

// DefinePreset names a preset: a shorthand for several groups (or other
// presets defined earlier). Defining an existing preset replaces it; "all"
// and group names cannot be used.
func (s *GroupSet) DefinePreset(name string, members ...string) error {
	name = normalize(name)
	if _, isGroup := s.byName[name]; name == "" || isGroup || name == PresetAll {
		return fmt.Errorf("lens: preset name %q is empty, a group, or reserved", name)
	}
	for _, m := range members {
		if normalize(m) == name || !s.has(normalize(m)) {
			return fmt.Errorf("lens: preset %q: unknown member %q", name, m)
		}
	}
	s.presets[name] = slices.Clone(members)
	return nil
}

func (s *GroupSet) has(name string) bool {
	_, g := s.byName[name]
	_, p := s.presets[name]
	return g || p || name == PresetAll
}

// Group returns the group named name.
func (s *GroupSet) Group(name string) (SpanGroup, bool) {
	g, ok := s.byName[normalize(name)]
	return g, ok
}

// Name returns the name of group g, or "" when g is not defined.
func (s *GroupSet) Name(g SpanGroup) string {
	if g >= MaxGroups {
		return ""
	}
	return s.names[g]
}

// Resolve turns a comma-separated list of presets and group names into a
// mask. Matching ignores case and surrounding spaces; an empty spec resolves
// to no group; an unknown name is an error listing every valid name.
func (s *GroupSet) Resolve(spec string) (GroupMask, error) {
	var m GroupMask
	for part := range strings.SplitSeq(spec, ",") {
		name := normalize(part)
		if name == "" {
			continue
		}
		pm, err := s.resolveName(name)
		if err != nil {
			return 0, err
		}
		m |= pm
	}
	return m, nil
}

// resolveName expands one name. Presets can only name groups or presets
// defined before them, so the recursion always ends.
func (s *GroupSet) resolveName(name string) (GroupMask, error) {
	if g, ok := s.byName[name]; ok {
		return 1 << g, nil
	}
	if name == PresetAll {
		return s.defined, nil
	}
	members, ok := s.presets[name]
	if !ok {
		return 0, fmt.Errorf("unknown span group %q (valid: %s)", name, strings.Join(s.ValidNames(), ", "))
	}
	var m GroupMask
	for _, mem := range members {
		mm, err := s.resolveName(normalize(mem))
		if err != nil {
			return 0, err
		}
		m |= mm
	}
	return m, nil
}

// Names returns the sorted names of the groups in m.
func (s *GroupSet) Names(m GroupMask) []string {
	var out []string
	for g := SpanGroup(0); g < MaxGroups; g++ {
		if m.Has(g) && s.defined.Has(g) {
			out = append(out, s.names[g])
		}
	}
	sort.Strings(out)
	return out
}

// Presets returns the sorted preset names, "all" included.
func (s *GroupSet) Presets() []string {
	out := []string{PresetAll}
	for p := range s.presets {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// ValidNames returns every name Resolve accepts, presets and groups, sorted.
func (s *GroupSet) ValidNames() []string {
	out := append(s.Presets(), s.Names(s.defined)...)
	sort.Strings(out)
	return out
}

func normalize(s string) string { return strings.ToLower(strings.TrimSpace(s)) }
