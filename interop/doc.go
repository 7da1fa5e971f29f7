// Package interop holds the tests that run gymlens beside the released
// NeMo Gym: upstream's own launcher, agents, servers and collector (as
// scripts/upstream.sh installs them from PyPI) in fleets mixed with
// gymlens's processes, on loopback. It has no code of its own; its tests
// are what scripts/interop-upstream.sh runs and reports check by check.
//
// Each test skips with one line naming scripts/upstream.sh where upstream
// is not installed, and fails instead under CI=true.
package interop
