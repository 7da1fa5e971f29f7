package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/gymlens/gymlens/rollout"
	"github.com/gymlens/gymlens/telemetry"
)

var rolloutsCommand = command{
	name:    "rollouts",
	summary: "collect rollouts against a running fleet (rollouts collect)",
	run: func(ctx context.Context, args []string, stdout, stderr io.Writer) int {
		return rolloutsGroup.run(ctx, args, stdout, stderr)
	},
}

var rolloutsGroup = group{
	path:     "gym rollouts",
	synopsis: "gym rollouts runs tasks through a fleet's agent server.",
	commands: func() []command {
		return []command{{name: "collect", summary: "run every task of a JSONL file, one output line per rollout", run: runCollect}}
	},
}

func runCollect(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gym rollouts collect", flag.ContinueOnError)
	input := fs.String("input", "", "tasks, one JSON object per line (required)")
	output := fs.String("output", "", "rollouts, one JSON object per line; tasks already in it are skipped (required)")
	agentURL := fs.String("agent-url", "", "base URL of the agent server (required)")
	concurrency := fs.Int("concurrency", 8, "rollouts in flight at once")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: gym rollouts collect --input tasks.jsonl --output rollouts.jsonl --agent-url URL\n\n"+
			"Runs each task through the agent's POST /run, writing each rollout as it\n"+
			"finishes. A failed rollout is written with its error; the run goes on.\n"+
			"Re-running with the same output resumes where it stopped.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if *input == "" || *output == "" || *agentURL == "" {
		fmt.Fprintln(stderr, "gym rollouts collect: --input, --output and --agent-url are required")
		return exitUsage
	}
	if _, err := telemetry.Init(telemetry.InitOptions{ServerName: "collector"}); err != nil {
		fmt.Fprintf(stderr, "gym rollouts collect: telemetry is off: %v\n", err)
	}
	defer func() { _ = shutdownTelemetry() }()
	sum, err := rollout.CollectFile(ctx, *input, *output, rollout.Options{
		AgentURL: *agentURL, Concurrency: *concurrency, Progress: stderr, ProgressTTY: isTerminal(stderr),
	})
	d := sum.DurationsMS
	fmt.Fprintf(stdout, "rollouts: %d run, %d skipped (already in %s), %d failed, %d rewarded; p50 %.1f ms, p95 %.1f ms\n",
		sum.Total-sum.Skipped, sum.Skipped, *output, sum.Failed, sum.Correct, rollout.Percentile(d, 50), rollout.Percentile(d, 95))
	if err != nil {
		fmt.Fprintf(stderr, "gym rollouts collect: %v\n", err)
		return 1
	}
	return exitOK
}
