package telemetry

import (
	"sync"

	"github.com/gymlens/gymlens/lens"
)

// Gym span groups. GroupJob is lens's own job group; the others are Gym's.
const (
	GroupJob    = lens.GroupJob
	GroupServer = lens.FirstCustomGroup + iota - 1
	GroupHTTPClient
	GroupRollout
	GroupVerify
	GroupAgent
	GroupModelCall
	GroupSandbox
)

// Gym presets.
const (
	// PresetDefault traces job runs, server ingress, client egress and rollouts.
	PresetDefault = "default"
	// PresetPerRollout traces everything inside one rollout, but not jobs.
	PresetPerRollout = "per_rollout"
	// PresetAll enables every group.
	PresetAll = lens.PresetAll
)

// GroupSet returns the span groups and presets Gym resolves against: lens's
// generic groups plus Gym's. The set is built once and must not be changed.
var GroupSet = sync.OnceValue(func() *lens.GroupSet {
	s := lens.NewGroupSet()
	for name, g := range map[string]lens.SpanGroup{
		"server": GroupServer, "http_client": GroupHTTPClient, "rollout": GroupRollout,
		"verify": GroupVerify, "agent": GroupAgent, "model_call": GroupModelCall,
		"sandbox": GroupSandbox,
	} {
		must(s.Define(name, g))
	}
	// server and http_client are the two halves of propagation: every
	// preset carries both.
	must(s.DefinePreset(PresetDefault, "job", "server", "http_client", "rollout"))
	must(s.DefinePreset(PresetPerRollout, "server", "http_client", "rollout", "verify", "agent", "model_call"))
	return s
})

func must(err error) {
	if err != nil {
		panic(err) // unreachable: the names above are fixed and distinct
	}
}

// ResolveSpanGroups resolves a span-group specification (presets and group
// names, comma-separated, case- and space-insensitive) to sorted group names.
// An empty spec resolves to none; an unknown name is an error listing every
// valid name.
func ResolveSpanGroups(spec string) ([]string, error) {
	m, err := GroupSet().Resolve(spec)
	if err != nil {
		return nil, err
	}
	return GroupSet().Names(m), nil
}
