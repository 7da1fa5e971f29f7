package rollout_test

import (
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/gymlens/gymlens/dataset"
	"github.com/gymlens/gymlens/rollout"
)

// TestCollectStreamedAggregation runs one collection three times against
// an agent that reads the streamed /aggregate_metrics request as it comes,
// one that refuses it (503), so that the collector sends the results again
// in one body at the end (the buffered request, as before streaming), and
// one that drops its connection once the first result is in. Each run
// writes the same aggregate metrics file, of real per-task metrics.
func TestCollectStreamedAggregation(t *testing.T) {
	rows := dataset.Arithmetic(1500, 1)
	var files [3][]byte
	for i, mode := range []streamMode{readStreams, refuseStreams, dropStreams} {
		agent := startAgent(t, nil)
		agent.mu.Lock()
		agent.aggregateStreams, agent.realMetrics = mode, true
		agent.mu.Unlock()
		out := outPath(t)
		sum, err := rollout.Collect(context.Background(), rows, options(agent, out))
		if err != nil || sum.Succeeded != len(rows) || len(sum.Metrics) != 1 {
			t.Fatalf("mode %d: %+v, %v", mode, sum, err)
		}
		if files[i], err = os.ReadFile(rollout.AggregateMetricsPath(out)); err != nil {
			t.Fatal(err)
		}
		agent.mu.Lock()
		calls, aggs := agent.aggregateCalls, agent.aggregates
		agent.mu.Unlock()
		wantCalls := map[streamMode]int{readStreams: 1, refuseStreams: 2, dropStreams: 2}[mode]
		if calls != wantCalls || len(aggs) != 1 || len(aggs[0].VerifyResponses) != len(rows) {
			t.Errorf("mode %d: %d /aggregate_metrics calls (want %d), %d answered", mode, calls, wantCalls, len(aggs))
		}
	}
	if len(files[0]) < 100_000 {
		t.Fatalf("aggregate metrics file of %d bytes: %.300s", len(files[0]), files[0])
	}
	if !bytes.Equal(files[0], files[1]) {
		t.Errorf("streamed and buffered aggregation wrote different files")
	}
	if !bytes.Equal(files[2], files[1]) {
		t.Errorf("the fallback after a dropped stream wrote a different file")
	}
}
