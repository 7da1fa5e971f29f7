package lens_test

import (
	"context"
	"errors"
	"maps"
	"testing"

	"go.uber.org/goleak"

	"github.com/gymlens/gymlens/internal/testenv"
	"github.com/gymlens/gymlens/lens"
)

// TestMain fails the package when any test leaves a goroutine behind: every
// provider, reader, processor and HTTP server a test starts must be stopped.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// mustLoad runs the real configuration path on a map-backed environment.
func mustLoad(t *testing.T, vars map[string]string) lens.Config {
	t.Helper()
	cfg, err := lens.LoadConfig(lens.LoadOptions{Lookup: testenv.Lookup(vars)})
	if err != nil {
		t.Fatalf("LoadConfig(%v): %v", vars, err)
	}
	return cfg
}

// enabledVars returns the variables of an enabled configuration that
// exports nothing by itself (tests hand in their own exporter or reader),
// merged with extra.
func enabledVars(extra map[string]string) map[string]string {
	vars := map[string]string{
		"NEMO_GYM_OTEL_ENABLED":     "true",
		"NEMO_GYM_OTEL_SPAN_GROUPS": "job,step",
		"NEMO_GYM_OTEL_EXPORTER":    "none",
	}
	maps.Copy(vars, extra)
	return vars
}

// isolateTelemetry prepares a test that touches the process-wide telemetry
// state: it resets that state now and again when the test ends, and hides a
// RANK, WORLD_SIZE or LOCAL_RANK the environment may carry (Setup reads them). Such tests must not
// run in parallel with each other; t.Setenv enforces that.
func isolateTelemetry(t *testing.T) {
	t.Helper()
	for _, name := range []string{"RANK", "WORLD_SIZE", "LOCAL_RANK"} {
		t.Setenv(name, "")
	}
	lens.ResetForTesting()
	t.Cleanup(lens.ResetForTesting)
}

// mustSetup calls lens.Setup after isolating the test.
func mustSetup(t *testing.T, cfg lens.Config, opts lens.Options) *lens.Handle {
	t.Helper()
	isolateTelemetry(t)
	h, err := lens.Setup(context.Background(), cfg, opts)
	if err != nil {
		t.Fatalf("Setup: %v", err)
	}
	return h
}

// configErrors flattens a (possibly joined) error into its *ConfigError
// parts, failing the test on any part of another type.
func configErrors(t *testing.T, err error) []*lens.ConfigError {
	t.Helper()
	if err == nil {
		return nil
	}
	var parts []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		parts = j.Unwrap()
	} else {
		parts = []error{err}
	}
	var out []*lens.ConfigError
	for _, p := range parts {
		var ce *lens.ConfigError
		if !errors.As(p, &ce) {
			t.Fatalf("error part %v (%T) is not a *lens.ConfigError", p, p)
		}
		out = append(out, ce)
	}
	return out
}
