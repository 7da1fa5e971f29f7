package lens_test

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/lens"
)

// A recorder binds its attribute set once and records through the bound
// value. In a process lens set up, the Instrumenter is the handle's
// (h.Instrumenter()); here it is a caller's own meter provider.
func ExampleInstrumenter() {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(context.Background()) }()

	ins := lens.OnMeter(mp.Meter(contract.MeterScope))
	turns, err := ins.Float64Histogram(contract.AgentTurnCount)
	if err != nil {
		panic(err)
	}
	agent := turns.Bind(attribute.NewSet(attribute.String(contract.AttrAgentName, "simple_agent")))
	for _, n := range []float64{1, 3, 2} {
		agent.Record(n)
	}

	var rm metricdata.ResourceMetrics
	_ = reader.Collect(context.Background(), &rm)
	dp := rm.ScopeMetrics[0].Metrics[0].Data.(metricdata.Histogram[float64]).DataPoints[0]
	fmt.Println(rm.ScopeMetrics[0].Metrics[0].Name, dp.Count, dp.Sum)
	// Output: gym.agent.turn_count 3 6
}
