package rollout_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"

	"github.com/gymlens/gymlens/rollout"
)

// A collection run that can be interrupted with Ctrl-C and started again
// with Resume: the second run skips every rollout the first one completed
// and runs the failed ones again.
func ExampleCollectFile() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	sum, err := rollout.CollectFile(ctx, "tasks.jsonl", rollout.Options{
		Agents:      map[string]string{"simple_agent": "http://127.0.0.1:8001"},
		Output:      "rollouts.jsonl",
		NumRepeats:  4,
		Concurrency: 32,
		Resume:      true,
		Progress:    os.Stderr,
		ProgressTTY: true,
	})
	switch {
	case errors.Is(err, rollout.ErrFailedRollouts):
		log.Printf("%v", err) // the rest ran; see rollouts_failures.jsonl
	case err != nil:
		log.Printf("collection stopped: %v (%d rollouts left)", err, sum.Remaining())
	}
	fmt.Printf("%d ok, %d failed, %d rewarded; p50 %.0f ms, p95 %.0f ms\n",
		sum.Succeeded, sum.Failed, sum.Rewarded,
		rollout.Percentile(sum.DurationsMS, 50), rollout.Percentile(sum.DurationsMS, 95))
}
