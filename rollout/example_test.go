package rollout_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"

	"github.com/gymlens/gymlens/rollout"
)

// A collection run that can be interrupted with Ctrl-C and started again:
// the second run skips every task the first one recorded.
func ExampleCollectFile() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	sum, err := rollout.CollectFile(ctx, "tasks.jsonl", "rollouts.jsonl", rollout.Options{
		AgentURL:    "http://127.0.0.1:8001",
		Concurrency: 32,
		Progress:    os.Stderr,
		ProgressTTY: true,
	})
	if err != nil {
		log.Printf("collection stopped: %v (%d tasks left)", err, sum.Remaining())
	}
	fmt.Printf("%d ok, %d failed, %d correct; p50 %.0f ms, p95 %.0f ms\n",
		sum.Succeeded, sum.Failed, sum.Correct,
		rollout.Percentile(sum.DurationsMS, 50), rollout.Percentile(sum.DurationsMS, 95))
}
