// Package testenv gives tests a clean, restorable process environment.
package testenv

import (
	"maps"
	"os"
	"strings"
	"testing"

	"github.com/gymlens/gymlens/lens"
)

// Unset removes each variable for the rest of the test and restores its old
// value afterwards. Like t.Setenv it cannot be used in parallel tests.
func Unset(t testing.TB, names ...string) {
	t.Helper()
	for _, name := range names {
		t.Setenv(name, "") // registers the restoration
		if err := os.Unsetenv(name); err != nil {
			t.Fatal(err)
		}
	}
}

// ClearTelemetry unsets every variable gymlens telemetry reads: the
// NEMO_GYM_OTEL_* and NEMO_LENS_* families, OTEL_*, SLURM_JOB_ID and the
// rank variables. Every setting's variables are registered even when unset,
// so whatever the test (or code under test) writes to them is undone.
func ClearTelemetry(t testing.TB) {
	t.Helper()
	names := []string{"SLURM_JOB_ID", "RANK", "WORLD_SIZE", "LOCAL_RANK"}
	for _, s := range lens.Settings() {
		if s.Standard {
			names = append(names, s.Key)
		} else {
			names = append(names, lens.PrimaryPrefix+s.Key, lens.FallbackPrefix+s.Key)
		}
	}
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "NEMO_GYM_OTEL_") || strings.HasPrefix(name, "NEMO_LENS_") || strings.HasPrefix(name, "OTEL_") {
			names = append(names, name)
		}
	}
	Unset(t, names...)
}

// Lookup returns an environment lookup (the os.LookupEnv shape that
// configuration loaders take) backed by a copy of m, so a test sees exactly
// the variables it names and nothing from the process environment. A nil
// m has no variables.
func Lookup(m map[string]string) func(string) (string, bool) {
	m = maps.Clone(m)
	return func(name string) (string, bool) {
		v, ok := m[name]
		return v, ok
	}
}
