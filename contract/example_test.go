package contract_test

import (
	"fmt"
	"path/filepath"

	"github.com/gymlens/gymlens/contract"
)

// Look an instrument up by name to learn how it is recorded and what a
// Prometheus query must ask for.
func ExampleLookup() {
	in, ok := contract.Lookup(contract.RolloutCompleted)
	fmt.Println(ok, in.Kind, in.Unit, in.Attrs, in.Source)
	fmt.Println(in.PrometheusName())

	// The rollout counter of earlier releases is upstream's now.
	_, ok = contract.Lookup("gym.rollout.calls")
	fmt.Println(ok)
	// Output:
	// true counter 1 [nemo.gym.rollout.outcome] NeMo Gym (attributed instruments)
	// gym_rollout_completed_total
	// false
}

// The exporter appends the unit to the name, even after an _ms already
// in it; a unit of 1 becomes _ratio on a gauge only, which is why the
// success rate and the server count carry no unit.
func ExampleInstrument_PrometheusName() {
	for _, name := range []string{
		contract.RolloutDuration,
		contract.VerifySuccessRate,
		contract.ServersActive,
		contract.VerifyCalls,
		contract.ConcurrencyLimit,
		contract.ConcurrencyActive,
		contract.HTTPServerRequestDuration,
		contract.GenAITokenUsage,
	} {
		fmt.Printf("%-32s %s\n", name, contract.MustLookup(name).PrometheusName())
	}
	// Output:
	// gym.rollout.duration_ms          gym_rollout_duration_ms_milliseconds
	// gym.verify.success_rate          gym_verify_success_rate
	// gym.servers.active               gym_servers_active
	// gym.verify.calls                 gym_verify_calls_total
	// gym.concurrency.limit            gym_concurrency_limit_ratio
	// gym.concurrency.active           gym_concurrency_active
	// http.server.request.duration     http_server_request_duration_seconds
	// gen_ai.client.token.usage        gen_ai_client_token_usage
}

// A CLIENT span is named after the method alone, as upstream's egress
// client names it; the route is in url.full.
func ExampleClientSpanName() {
	fmt.Println(contract.ClientSpanName("POST"))
	fmt.Println(contract.ClientSpanName("get"))
	// Output:
	// HTTP POST
	// HTTP GET
}

// Where a server's telemetry and log go in a run directory.
func ExampleTelemetryFileName() {
	run := filepath.Join("runs", "20260101-120000")
	fmt.Println(filepath.Join(run, contract.RunTelemetryDir, contract.TelemetryFileName("math_agent")))
	fmt.Println(filepath.Join(run, contract.RunTelemetryDir, contract.RunOrchestratorTelemetry))
	fmt.Println(filepath.Join(run, contract.RunLogsDir, contract.LogFileName("math_agent")))
	// Output:
	// runs/20260101-120000/telemetry/math_agent.jsonl
	// runs/20260101-120000/telemetry/orchestrator.jsonl
	// runs/20260101-120000/logs/math_agent.log
}
