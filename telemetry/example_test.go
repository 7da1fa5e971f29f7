package telemetry_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/telemetry"
)

// Each server process calls Init once at start-up and Shutdown on the way
// out. With telemetry disabled (the default) Init returns a nil handle,
// which is safe to use.
func ExampleInit() {
	os.Unsetenv("NEMO_GYM_OTEL_ENABLED")
	defer telemetry.ResetForTesting()
	h, err := telemetry.Init(telemetry.InitOptions{
		ServerName: "arithmetic",
		ServerType: contract.ServerTypeResources,
	})
	if err != nil {
		slog.Warn("telemetry off: bad configuration", "err", err)
	}
	defer telemetry.Shutdown(context.Background())
	fmt.Println(h.IsExporting(), telemetry.Role())
	// Output: false resources_servers
}

// The orchestrator reads the fleet's YAML and hands the telemetry settings
// to the servers it spawns through the environment.
func ExampleConfigureEnv() {
	os.Setenv("NEMO_GYM_OTEL_RUN_ID", "run-42") // a user's choice wins
	defer os.Unsetenv("NEMO_GYM_OTEL_RUN_ID")
	defer os.Unsetenv("NEMO_GYM_OTEL_ENABLED")
	defer os.Unsetenv("NEMO_GYM_OTEL_SPAN_GROUPS")
	cfg, err := telemetry.ConfigFromYAML([]byte(`
telemetry:
  enabled: true
  span_groups: [per_rollout]
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	runID, err := telemetry.ConfigureEnv(cfg)
	fmt.Println(runID, err, os.Getenv("NEMO_GYM_OTEL_SPAN_GROUPS"))
	// Output: run-42 <nil> per_rollout
}

func ExampleResolveSpanGroups() {
	groups, err := telemetry.ResolveSpanGroups("default, verify")
	fmt.Println(groups, err)
	// Output: [http_client job rollout server verify] <nil>
}
