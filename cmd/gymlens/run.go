package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/dataset"
	"github.com/gymlens/gymlens/lens"
	"github.com/gymlens/gymlens/protocol"
	"github.com/gymlens/gymlens/report"
	"github.com/gymlens/gymlens/rollout"
	"github.com/gymlens/gymlens/servers/model"
)

var runCommand = command{
	name:    "run",
	summary: "start the built-in fleet, collect rollouts, stop, summarise (the main job)",
	run:     runRun,
}

func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gymlens run", flag.ContinueOnError)
	n := fs.Int("rollouts", 100, "number of tasks of the built-in arithmetic dataset (ignored with --input)")
	input := fs.String("input", "", "NeMo Gym task JSONL to run instead of the built-in dataset")
	repeats := fs.Int("num-repeats", 1, "rollouts per task")
	limit := fs.Int("limit", 0, "use only the first N tasks (0: all)")
	concurrency := fs.Int("concurrency", 16, "rollouts in flight at once")
	seed := fs.Int64("seed", 1, "seed of the dataset and of the built-in policy")
	configPath := fs.String("config", "", "fleet config: NeMo Gym config dict YAML (server instances, telemetry:); default: the built-in fleet (arithmetic, policy_model, simple_agent and the environment server in front of it)")
	runsDir := fs.String("runs-dir", defaultRunsDir, "parent directory of run directories")
	latency := fs.Float64("model-latency-ms", 0, "built-in policy latency per call in ms, >= 0 (default: the model config's, 0)")
	correct := fs.Float64("correct-probability", 0, "built-in policy's chance of a right answer, in [0, 1] (default: the model config's, 0.8)")
	noTelemetry := fs.Bool("no-telemetry", false, "turn telemetry off (same as NEMO_GYM_OTEL_ENABLED=0)")
	quiet := fs.Bool("quiet", false, "no progress output")
	resume := fs.Bool("resume", false, "continue runs/<run id>/ when it exists (same run id: RUN_ID or SLURM_JOB_ID) and holds the same work (seed, dataset, num-repeats): only the rollouts it lacks run")
	lf := addLiveFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: gymlens run [--rollouts N] [flags]\n\n"+
			"Starts the fleet (telemetry on, exported to runs/<run id>/), runs N rollouts\n"+
			"of a seeded arithmetic dataset, stops the fleet cleanly and prints a summary.\n"+
			"OTEL_EXPORTER_OTLP_ENDPOINT switches export to OTLP; every NEMO_GYM_OTEL_*\n"+
			"variable works as in NeMo Gym and beats the config file.\n\n"+
			"With dry_run: true in the config, gymlens run collects nothing: it checks the\n"+
			"fleet as `gymlens env start` does under dry_run (every server run once, one at\n"+
			"a time, must exit 0 without listening), says so on stdout and exits 0 when\n"+
			"every server passed, 1 otherwise. Flags and --input are still checked.\n\n"+
			"A run directory is never reused: when runs/<run id>/ exists (the run id\n"+
			"comes from NEMO_GYM_OTEL_RUN_ID, telemetry.run_id or SLURM_JOB_ID), gymlens run\n"+
			"exits 2 unless --resume is given; --resume continues that run only if its\n"+
			"seed, dataset (row count and SHA-256, in run.json) and --num-repeats match\n"+
			"(exit 2 naming what differs), running just the rollouts it lacks and\n"+
			"retrying its failures. --resume with no such directory starts the run.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if *n < 1 || *concurrency < 1 || *repeats < 1 || *limit < 0 {
		fmt.Fprintln(stderr, "gymlens run: --rollouts, --concurrency and --num-repeats must be at least 1, --limit at least 0")
		return exitUsage
	}
	tracker, err := lf.tracker()
	if err != nil {
		fmt.Fprintf(stderr, "gymlens run: %v\n", err)
		return exitUsage
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	cfg, err := loadFleetConfig(*configPath)
	if err != nil {
		fmt.Fprintf(stderr, "gymlens run: %v\n", err)
		return exitUsage
	}
	// The flags tune the built-in policy: they become keys of its blocks in
	// the config dict, which is what the children read, and are checked
	// there, as the same keys written in the file are (a value given on the
	// command line is checked whatever it is).
	policies := 0
	for _, s := range cfg.Servers {
		if s.Type != contract.ServerTypeModel || s.External() || s.Impl != model.ServerName {
			continue
		}
		policies++
		keys := map[string]any{}
		if _, ok := s.Config["seed"]; !ok {
			keys["seed"] = *seed
		}
		if set["model-latency-ms"] {
			keys["latency_ms"] = *latency
		}
		if set["correct-probability"] {
			keys["correct_probability"] = *correct
		}
		for _, key := range slices.Sorted(maps.Keys(keys)) {
			path, _ := cfg.ImplPath(s.Name, key)
			if err := cfg.Set(path, keys[key]); err != nil {
				fmt.Fprintf(stderr, "gymlens run: %v\n", err)
				return exitUsage
			}
		}
	}
	if policies == 0 && (set["model-latency-ms"] || set["correct-probability"]) {
		fmt.Fprintf(stderr, "gymlens run: --model-latency-ms and --correct-probability tune the built-in policy (a %s server of impl %s), and this fleet has none\n", contract.ServerTypeModel, model.ServerName)
		return exitUsage
	}
	if *noTelemetry {
		os.Setenv(lens.PrimaryPrefix+lens.KeyEnabled, "0")
	}
	var rows []protocol.RunRequest
	if *input != "" {
		rows, err = readRows(*input)
		if err != nil {
			fmt.Fprintf(stderr, "gymlens run: %v\n", err)
			return exitUsage
		}
	}
	defaultAgent := ""
	if agents := cfg.Agents(); len(agents) > 0 {
		defaultAgent = agents[0].Name
	}
	if *input == "" {
		// The built-in dataset runs on the fleet's first agent, whatever
		// its name.
		rows = dataset.WithAgent(dataset.Arithmetic(*n, *seed), defaultAgent)
	}
	if *limit > 0 && *limit < len(rows) {
		rows = rows[:*limit] // tasks.jsonl then holds exactly what ran
	}
	// What identifies the work, checked by --resume; hashing the rows
	// also checks that tasks.jsonl can hold them, before anything exists.
	source := "built-in arithmetic dataset"
	if *input != "" {
		source = *input
	}
	ds, err := identifyDataset(source, rows)
	if err != nil {
		fmt.Fprintf(stderr, "gymlens run: %v\n", err)
		return exitUsage
	}
	id := runIdentity{Command: identityRun, Seed: seed, NumRepeats: *repeats, Dataset: ds}
	if cfg.DryRun() {
		return dryRunFleet(ctx, cfg, *runsDir, id, "gymlens run", "no rollouts collected under dry_run", stdout, stderr)
	}
	sess, err := openSession(cfg, *runsDir, true, id, *resume, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "gymlens run: %v\n", err)
		return exitUsage
	}
	closed := false
	closeSession := func() {
		if !closed {
			closed = true
			sess.close()
		}
	}
	defer closeSession()

	if stop := startCPUProfile("orchestrator", sess.log); stop != nil {
		defer stop()
	}
	if stop := startRunStats("orchestrator", sess.log); stop != nil {
		defer stop()
	}
	if sess.resumed {
		fmt.Fprintf(stderr, "gymlens run: resuming run %s (%s): its seed, dataset and --num-repeats match\n", sess.runID, sess.runDir)
	} else if err := writeRows(filepath.Join(sess.runDir, tasksFile), rows); err != nil {
		fmt.Fprintf(stderr, "gymlens run: %v\n", err)
		return 1
	}
	fleet, err := sess.start(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "gymlens run: %v\n", err)
		return 1
	}
	// A server that dies ends the collection gently: rollouts in flight
	// finish (and fail), no new ones start, and the fleet is stopped.
	stop := make(chan struct{})
	watchDone := make(chan struct{})
	defer close(watchDone)
	go func() {
		select {
		case ex := <-fleet.Exits():
			fmt.Fprintf(stderr, "gymlens run: server %s (%s) died: %v; finishing the rollouts in flight and stopping\n", ex.Name, ex.Where(), ex.Err)
			close(stop)
		case <-watchDone:
		}
	}()
	var progress io.Writer = stderr
	if *quiet {
		progress = nil
	}
	// The fleet as its head serves it: rollouts reach each agent through
	// the environment server in front of it, as NeMo Gym 0.7's collector
	// sends them.
	routes, err := rollout.FleetFromConfig(fleet.ConfigYAML(), os.LookupEnv)
	if err != nil {
		fmt.Fprintf(stderr, "gymlens run: %v\n", err)
		_ = sess.stopFleet(fleet)
		closeSession()
		return 1
	}
	// The run as it runs: the head's status API and live page show it.
	tracker.SetRunID(sess.runID)
	lf.show(fleet.Board(), tracker)
	if !*quiet && tracker != nil {
		printLiveWhere(stderr, fleet.HeadURL(), filepath.Join(sess.runDir, contract.RunHeadTokenFile))
	}
	sum, collectErr := rollout.Collect(ctx, rows, rollout.Options{
		Output:       filepath.Join(sess.runDir, contract.RunRolloutsFile),
		Resume:       sess.resumed,
		Agents:       routes.Agents,
		Environments: routes.Environments,
		TaskSources:  routes.TaskSources,
		DefaultAgent: defaultAgent,
		NumRepeats:   *repeats,
		Concurrency:  *concurrency,
		Progress:     progress,
		ProgressTTY:  isTerminal(stderr),
		Stop:         stop,
		Live:         tracker,
		LiveClient:   liveClient(fleet.HeadToken()),
	})

	// The live view's last word, kept with the run.
	if err := writeStatus(filepath.Join(sess.runDir, contract.RunStatusFile), tracker); err != nil {
		fmt.Fprintf(stderr, "gymlens run: %v\n", err)
	}
	stopErr := sess.stopFleet(fleet)
	closeSession()

	code := exitOK
	if collectErr != nil {
		if errors.Is(collectErr, context.Canceled) {
			how := "stopped cleanly"
			if stopErr != nil {
				how = "stopped, not cleanly (see below)"
			}
			fmt.Fprintf(stderr, "gymlens run: interrupted; the fleet was %s and the partial run is kept\n", how)
		} else if errors.Is(collectErr, rollout.ErrFailureRate) {
			fmt.Fprintf(stderr, "gymlens run: %v\ngym run: stopped early: %d of %d tasks not run (see %s; `gymlens rollouts collect --resume` continues)\n",
				collectErr, sum.Remaining(), sum.Total, rollout.FailuresPath(filepath.Join(sess.runDir, contract.RunRolloutsFile)))
		} else if errors.Is(collectErr, rollout.ErrFailedRollouts) {
			fmt.Fprintf(stderr, "gymlens run: %d rollouts failed after every attempt (see %s)\n", sum.Failed,
				rollout.FailuresPath(filepath.Join(sess.runDir, contract.RunRolloutsFile)))
		} else if errors.Is(collectErr, rollout.ErrStopped) {
			fmt.Fprintf(stderr, "gymlens run: stopped early after a server died: %d of %d tasks not run (rollouts.jsonl is kept; `gymlens rollouts collect` resumes it)\n",
				sum.Remaining(), sum.Total)
		} else {
			fmt.Fprintf(stderr, "gymlens run: collect: %v\n", collectErr)
		}
		code = 1
	}
	if stopErr != nil {
		fmt.Fprintf(stderr, "gymlens run: %v\n", stopErr)
		code = 1
	}
	// The summary draws DefaultSlowestK waterfalls; no other trace needs
	// to be kept in full, whatever the number of rollouts.
	k := report.DefaultSlowestK
	run, err := report.LoadWith(sess.runDir, report.LoadOptions{KeepSlowest: k})
	if err != nil {
		fmt.Fprintf(stderr, "gymlens run: read run back: %v\n", err)
		return 1
	}
	printSummary(stdout, sess.runID, sess.runDir, run.Summary(), sum)
	fmt.Fprintln(stdout)
	if err := report.WriteText(stdout, run, report.TextOptions{SlowestK: k}); err != nil {
		fmt.Fprintf(stderr, "gymlens run: report: %v\n", err)
		return 1
	}
	// Telemetry that lost more spans than telemetry.max_span_loss allows
	// fails the run: its traces cannot be trusted to be complete.
	if err := run.Summary().CheckSpanLoss(lens.MaxSpanLoss(os.LookupEnv)); err != nil {
		fmt.Fprintf(stderr, "gymlens run: %v\n", err)
		code = max(code, 1)
	}
	return code
}

// tasksFile is the run directory's copy of the dataset that was run.
const tasksFile = contract.RunTasksFile

func writeRows(path string, rows []protocol.RunRequest) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, contract.RunFilePerm)
	if err != nil {
		return err
	}
	if err := dataset.WriteRows(f, rows); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func readRows(path string) ([]protocol.RunRequest, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rows, err := dataset.ReadRows(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return rows, nil
}

func printSummary(w io.Writer, runID, runDir string, rep report.Summary, sum rollout.Summary) {
	fmt.Fprintf(w, "\nrun %s  (%s)\n", runID, runDir)
	fmt.Fprintf(w, "  rollouts        %d (%d failed), %.1f/s over %s\n", rep.Rollouts, rep.Failed,
		sum.Rate(), sum.Elapsed.Round(time.Millisecond))
	if sum.AggregationElapsed > 0 {
		fmt.Fprintf(w, "  phases          rollouts %.3f s, aggregation %.3f s\n",
			(sum.Elapsed - sum.AggregationElapsed).Seconds(), sum.AggregationElapsed.Seconds())
	}
	fmt.Fprintf(w, "  success         %.3f (%d of %d rewarded)\n", rep.SuccessFraction(), rep.Rewarded, rep.Rollouts)
	d := rep.DurationsMS
	fmt.Fprintf(w, "  rollout time    p50 %.1f ms   p95 %.1f ms\n", rollout.Percentile(d, 50), rollout.Percentile(d, 95))
	if len(rep.Processes) == 0 {
		fmt.Fprintf(w, "  telemetry       no telemetry files in the run directory (off, or exported elsewhere: OTLP or prometheus)\n")
	} else {
		fmt.Fprintf(w, "  servers seen    %d:", len(rep.Processes))
		for _, p := range rep.Processes {
			fmt.Fprintf(w, " %s", p.ServiceName)
		}
		fmt.Fprintf(w, "\n  traces found    %d (%d spans)\n", rep.Traces, rep.Spans)
	}
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
