package backends_test

import (
	"context"
	"fmt"
	"os"

	"github.com/gymlens/gymlens/report"
	"github.com/gymlens/gymlens/report/backends"
)

// A run spread over several hosts, read back from Jaeger and Prometheus
// and reported as a run directory is. (No output: it needs the backends.)
func ExampleFetch() {
	dir, err := os.MkdirTemp("", "run-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	stats, err := backends.Fetch(context.Background(), backends.Options{
		JaegerURL:     "http://jaeger.example:16686",
		PrometheusURL: "http://prometheus.example:9090",
		RunID:         "3dab12afed50",
		RunDir:        "runs/3dab12afed50", // the head host's: rollouts, failures, config
	}, dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	run, err := report.Load(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%d processes, %d traces read; %d rollouts\n", stats.Processes, stats.Traces, len(run.Rollouts))
	_ = report.WriteText(os.Stdout, run, report.TextOptions{SlowestK: 3})
}
