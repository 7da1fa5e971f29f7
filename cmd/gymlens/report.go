package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/gymlens/gymlens/report"
	"github.com/gymlens/gymlens/report/backends"
)

var reportCommand = command{
	name:    "report",
	summary: "report on a run directory: timings, verify success, slowest traces, problems",
	run:     runReport,
}

// exitUnreadable is the status for a run directory that cannot be read,
// or an HTML report that cannot be written.
const exitUnreadable = 1

func runReport(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gymlens report", flag.ContinueOnError)
	slowest := fs.Int("slowest", report.DefaultSlowestK, "number of slowest rollouts drawn as trace waterfalls (0: none)")
	width := fs.Int("width", report.DefaultWidth, fmt.Sprintf("line width in columns (at least %d)", report.MinWidth))
	htmlFile := fs.String("html", "", "also write the report as one self-contained HTML page to `FILE` (- for standard output)")
	quiet := fs.Bool("quiet", false, "with --html, do not print the text report")
	jaegerURL := fs.String("jaeger", "", "read the run's traces from Jaeger's query service at `URL` (http://host:16686) instead of a run directory")
	promURL := fs.String("prometheus", "", "read the run's metrics from Prometheus at `URL` (http://host:9090)")
	runID := fs.String("run-id", "", "with --jaeger/--prometheus: the run to read (its nemo.run.id)")
	since := fs.Duration("since", backends.DefaultLookback, "with --jaeger/--prometheus: how far back to look for the run")
	save := fs.String("save", "", "with --jaeger/--prometheus: keep what was read as a run directory `DIR` (new), instead of a temporary one")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: gymlens report RUN_DIR [--slowest K] [--width N] [--html FILE [--quiet]]\n"+
			"       gymlens report --run-id ID --jaeger URL --prometheus URL [RUN_DIR] [--since D] [--save DIR] [flags]\n\n"+
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
			"With --jaeger and/or --prometheus the run is read from the backends a\n"+
			"fleet exported to, by its run id: spans from Jaeger (what the collector\n"+
			"tier kept), every metric series from Prometheus, each process's in one\n"+
			"place whichever host it ran on. RUN_DIR, if given, is the head host's run\n"+
			"directory, whose rollouts, failures and config complete the report.\n\n"+
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
	fromBackends := *jaegerURL != "" || *promURL != ""
	switch {
	case fromBackends && *runID == "":
		fmt.Fprintln(stderr, "gymlens report: --jaeger and --prometheus need --run-id")
		return exitUsage
	case !fromBackends && (*runID != "" || *save != ""):
		fmt.Fprintln(stderr, "gymlens report: --run-id and --save go with --jaeger or --prometheus")
		return exitUsage
	case fromBackends && *since <= 0:
		fmt.Fprintln(stderr, "gymlens report: --since must be above 0")
		return exitUsage
	case fromBackends && !validBase(*jaegerURL):
		fmt.Fprintf(stderr, "gymlens report: --jaeger %q: want http://HOST:PORT\n", *jaegerURL)
		return exitUsage
	case fromBackends && !validBase(*promURL):
		fmt.Fprintf(stderr, "gymlens report: --prometheus %q: want http://HOST:PORT\n", *promURL)
		return exitUsage
	case !fromBackends && len(dirs) != 1:
		fmt.Fprintf(stderr, "gymlens report: want exactly one run directory, got %d\n", len(dirs))
		fs.Usage()
		return exitUsage
	case *slowest < 0:
		fmt.Fprintln(stderr, "gymlens report: --slowest must not be negative")
		return exitUsage
	case *width < report.MinWidth:
		fmt.Fprintf(stderr, "gymlens report: --width must be at least %d\n", report.MinWidth)
		return exitUsage
	case *quiet && *htmlFile == "":
		fmt.Fprintln(stderr, "gymlens report: --quiet needs --html (it silences the text report in favour of the page)")
		return exitUsage
	}
	dir := ""
	if len(dirs) == 1 {
		dir = dirs[0]
	}
	if fromBackends {
		read, cleanup, err := fetchRun(ctx, backends.Options{
			JaegerURL: *jaegerURL, PrometheusURL: *promURL, RunID: *runID,
			Since: time.Now().Add(-*since), RunDir: dir,
		}, *save, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "gymlens report: %v\n", err)
			return exitUnreadable
		}
		defer cleanup()
		dir = read
	}
	// Only the traces drawn as waterfalls are kept with every span, so a
	// large run is read in bounded memory.
	run, err := report.LoadWith(dir, report.LoadOptions{KeepSlowest: *slowest})
	if err != nil {
		fmt.Fprintf(stderr, "gymlens report: %v\n", err)
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
			fmt.Fprintf(stderr, "gymlens report: cannot write the HTML report to %s: %v\n", *htmlFile, err)
			return exitUnreadable
		}
		if *htmlFile == "-" || *quiet {
			return exitOK
		}
	}
	if err := report.WriteText(stdout, run, report.TextOptions{SlowestK: *slowest, Width: *width}); err != nil {
		fmt.Fprintf(stderr, "gymlens report: %v\n", err)
		return exitUnreadable
	}
	return exitOK
}

// validBase accepts "" or an http(s) URL with a host.
func validBase(raw string) bool {
	if raw == "" {
		return true
	}
	u, err := url.Parse(raw)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// fetchRun reads a run from the backends into save (which must not exist)
// or a temporary directory, says on stderr what it read, and returns the
// directory and what removes it (nothing for save).
func fetchRun(ctx context.Context, opts backends.Options, save string, stderr io.Writer) (string, func(), error) {
	dir, cleanup := save, func() {}
	if save == "" {
		tmp, err := os.MkdirTemp("", "gym-report-")
		if err != nil {
			return "", nil, err
		}
		dir, cleanup = tmp, func() { _ = os.RemoveAll(tmp) }
	} else if err := os.Mkdir(save, 0o700); err != nil {
		return "", nil, fmt.Errorf("--save: %w", err)
	}
	st, err := backends.Fetch(ctx, opts, dir)
	if err != nil {
		cleanup()
		return "", nil, err
	}
	fmt.Fprintf(stderr, "gymlens report: run %s from the backends: %d processes, %d traces (%d spans), %d metric series",
		opts.RunID, st.Processes, st.Traces, st.Spans, st.Series)
	if len(st.Copied) > 0 {
		fmt.Fprintf(stderr, "; %s from %s", strings.Join(st.Copied, ", "), opts.RunDir)
	}
	fmt.Fprintln(stderr)
	if len(st.TraceLimitHit) > 0 {
		fmt.Fprintf(stderr, "gymlens report: Jaeger returned the trace limit for %s; it may hold more traces of the run\n", strings.Join(st.TraceLimitHit, ", "))
	}
	if save != "" {
		fmt.Fprintf(stderr, "gymlens report: saved as a run directory: %s\n", save)
	}
	return dir, cleanup, nil
}
