package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/gymlens/gymlens/report"
)

var reportCommand = command{
	name:    "report",
	summary: "report on a run directory: timings, verify success, slowest traces, problems",
	run:     runReport,
}

// exitUnreadable is the status for a run directory that cannot be read,
// or an HTML report that cannot be written.
const exitUnreadable = 1

func runReport(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gym report", flag.ContinueOnError)
	slowest := fs.Int("slowest", report.DefaultSlowestK, "number of slowest rollouts drawn as trace waterfalls (0: none)")
	width := fs.Int("width", report.DefaultWidth, fmt.Sprintf("line width in columns (at least %d)", report.MinWidth))
	htmlFile := fs.String("html", "", "also write the report as one self-contained HTML page to `FILE` (- for standard output)")
	quiet := fs.Bool("quiet", false, "with --html, do not print the text report")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: gym report RUN_DIR [--slowest K] [--width N] [--html FILE [--quiet]]\n\n"+
			"Reads a run directory (runs/<run id>/: telemetry/*.jsonl, rollouts.jsonl,\n"+
			"config.yaml) and prints its report: the run and its processes, rollout and\n"+
			"verify duration distributions, verify success per process and over time,\n"+
			"HTTP latency per server and route, active servers over time, the slowest\n"+
			"rollouts as trace waterfalls, and the problems found.\n\n"+
			"--html FILE also writes the same report as an HTML page with charts and\n"+
			"waterfalls that open on click. The page is one file that loads nothing\n"+
			"from anywhere, so it can be mailed or archived with the run. The text\n"+
			"report is still printed unless --quiet is given; with --html - the page\n"+
			"goes to standard output instead of the text report.\n\n"+
			"Exit status: 0 when the report was printed, 1 when the run directory\n"+
			"cannot be read or the HTML file cannot be written, 2 for a bad command\n"+
			"line.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	// Flags may come before or after the directory.
	dirs, code, done := parseArgs(fs, args, 1, "a run directory", stdout, stderr)
	if done {
		return code
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
	case *quiet && *htmlFile == "":
		fmt.Fprintln(stderr, "gym report: --quiet needs --html (it silences the text report in favour of the page)")
		return exitUsage
	}
	// Only the traces drawn as waterfalls are kept with every span, so a
	// large run is read in bounded memory.
	run, err := report.LoadWith(dirs[0], report.LoadOptions{KeepSlowest: *slowest})
	if err != nil {
		fmt.Fprintf(stderr, "gym report: %v\n", err)
		return exitUnreadable
	}
	if *htmlFile != "" {
		// The page is rendered in memory first, so a rendering failure
		// never truncates an existing file.
		var page bytes.Buffer
		err := report.WriteHTML(&page, run, report.HTMLOptions{SlowestK: *slowest})
		switch {
		case err != nil:
		case *htmlFile == "-":
			_, err = stdout.Write(page.Bytes())
		default:
			err = os.WriteFile(*htmlFile, page.Bytes(), 0o644)
		}
		if err != nil {
			var pe *os.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			fmt.Fprintf(stderr, "gym report: cannot write the HTML report to %s: %v\n", *htmlFile, err)
			return exitUnreadable
		}
		if *htmlFile == "-" || *quiet {
			return exitOK
		}
	}
	if err := report.WriteText(stdout, run, report.TextOptions{SlowestK: *slowest, Width: *width}); err != nil {
		fmt.Fprintf(stderr, "gym report: %v\n", err)
		return exitUnreadable
	}
	return exitOK
}
