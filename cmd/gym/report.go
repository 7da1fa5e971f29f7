package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/gymlens/gymlens/report"
)

var reportCommand = command{
	name:    "report",
	summary: "report on a run directory: timings, verify success, slowest traces, problems",
	run:     runReport,
}

// exitUnreadable is the status for a run directory that cannot be read.
const exitUnreadable = 1

func runReport(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gym report", flag.ContinueOnError)
	slowest := fs.Int("slowest", report.DefaultSlowestK, "number of slowest rollouts drawn as trace waterfalls (0: none)")
	width := fs.Int("width", report.DefaultWidth, fmt.Sprintf("line width in columns (at least %d)", report.MinWidth))
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: gym report RUN_DIR [--slowest K] [--width N]\n\n"+
			"Reads a run directory (runs/<run id>/: telemetry/*.jsonl, rollouts.jsonl,\n"+
			"config.yaml) and prints its report: the run and its processes, rollout and\n"+
			"verify duration distributions, verify success per process and over time,\n"+
			"HTTP latency per server and route, active servers over time, the slowest\n"+
			"rollouts as trace waterfalls, and the problems found.\n\n"+
			"Exit status: 0 when the report was printed, 1 when the run directory\n"+
			"cannot be read, 2 for a bad command line.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	// Flags may come before or after the directory.
	var dirs []string
	for {
		if code, done := parseFlags(fs, args, stdout, stderr); done {
			return code
		}
		if fs.NArg() == 0 {
			break
		}
		dirs = append(dirs, fs.Arg(0))
		args = fs.Args()[1:]
	}
	switch {
	case len(dirs) != 1:
		fmt.Fprintf(stderr, "gym report: want exactly one run directory, got %d\n", len(dirs))
		fs.Usage()
		return exitUsage
	case *slowest < 0:
		fmt.Fprintln(stderr, "gym report: --slowest must not be negative")
		return exitUsage
	case *width < report.MinWidth:
		fmt.Fprintf(stderr, "gym report: --width must be at least %d\n", report.MinWidth)
		return exitUsage
	}
	run, err := report.Load(dirs[0])
	if err != nil {
		fmt.Fprintf(stderr, "gym report: %v\n", err)
		return exitUnreadable
	}
	if err := report.WriteText(stdout, run, report.TextOptions{SlowestK: *slowest, Width: *width}); err != nil {
		fmt.Fprintf(stderr, "gym report: %v\n", err)
		return exitUnreadable
	}
	return exitOK
}
