package metrics_test

import (
	"context"
	"fmt"
	"os"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/telemetry"
	"github.com/gymlens/gymlens/telemetry/metrics"
)

// A resources server records every verification. Here a manual reader
// stands in for the exporter so the example can print what would be sent.
func ExampleRecordVerify() {
	os.Setenv("NEMO_GYM_OTEL_ENABLED", "1")
	os.Setenv("NEMO_GYM_OTEL_EXPORTER", "none")
	defer os.Unsetenv("NEMO_GYM_OTEL_ENABLED")
	defer os.Unsetenv("NEMO_GYM_OTEL_EXPORTER")
	defer telemetry.ResetForTesting()

	reader := sdkmetric.NewManualReader()
	if _, err := telemetry.Init(telemetry.InitOptions{
		ServerName: "arithmetic", ServerType: contract.ServerTypeResources, MetricReader: reader,
	}); err != nil {
		fmt.Println(err)
		return
	}
	metrics.RecordVerify(12*time.Millisecond, true)
	metrics.RecordVerify(15*time.Millisecond, true)
	metrics.RecordVerify(11*time.Millisecond, true)
	metrics.RecordVerify(40*time.Millisecond, false) // the verifier errored

	var rm metricdata.ResourceMetrics
	_ = reader.Collect(context.Background(), &rm)
	for _, sm := range rm.ScopeMetrics { // nemo.lens, and the Go runtime's
		for _, m := range sm.Metrics {
			if g, ok := m.Data.(metricdata.Gauge[float64]); ok && m.Name == contract.VerifySuccessRate {
				fmt.Println(m.Name, g.DataPoints[0].Value)
			}
		}
	}
	// Output: gym.verify.success_rate 0.75
}

// Only the orchestrator may set gym.servers.active.
func ExampleRecordActiveServers() {
	defer telemetry.ResetForTesting()
	_, _ = telemetry.Init(telemetry.InitOptions{ServerName: "policy_model", ServerType: contract.ServerTypeModel})
	fmt.Println(metrics.RecordActiveServers(3))
	// Output: metrics: gym.servers.active may only be recorded by the orchestrator
}
