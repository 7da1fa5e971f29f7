package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/orchestrator"
)

var envCommand = command{
	name:    "env",
	summary: "manage a fleet of servers (env start)",
	run: func(ctx context.Context, args []string, stdout, stderr io.Writer) int {
		return envGroup.run(ctx, args, stdout, stderr)
	},
}

var envGroup = group{
	path:     "gymlens env",
	synopsis: "gymlens env manages a fleet: an orchestrator process and one child process per server.",
	commands: func() []command {
		return []command{{name: "start", summary: "start a fleet and run it until Ctrl-C", run: runEnvStart}, scaffoldCommand}
	},
}

func runEnvStart(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gymlens env start", flag.ContinueOnError)
	configPath := fs.String("config", "", "fleet config: NeMo Gym config dict YAML (server instances, telemetry:); default: the built-in fleet (arithmetic, policy_model, simple_agent and the environment server in front of it)")
	runsDir := fs.String("runs-dir", defaultRunsDir, "parent directory of run directories")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: gymlens env start [--config FILE] [--runs-dir DIR]\n\n"+
			"Starts every server of the fleet as a child process, waits until each is\n"+
			"healthy and runs until SIGINT/SIGTERM; then stops the servers (SIGTERM,\n"+
			"SIGKILL after a deadline). Each server gets NeMo Gym's launch contract\n"+
			"(NEMO_GYM_CONFIG_DICT, NEMO_GYM_CONFIG_PATH); the head server (GET /,\n"+
			"/global_config_dict_yaml, /server_instances) runs on head_server,\n"+
			"127.0.0.1:11000 by default. A config error exits 2 before anything starts;\n"+
			"exits 1 if any server failed.\n\n"+
			"With dry_run: true in the config, each server is run once, one at a time,\n"+
			"under the same launch contract and must check its config and exit 0\n"+
			"without listening (within 30 s); one line per server and a summary are\n"+
			"printed, nothing is left running, and the exit status is 0 when every\n"+
			"server passed, 1 otherwise (a server that serves instead is killed).\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	cfg, err := loadFleetConfig(*configPath)
	if err != nil {
		fmt.Fprintf(stderr, "gymlens env start: %v\n", err)
		return exitUsage
	}
	if cfg.DryRun() {
		return dryRunFleet(ctx, cfg, *runsDir, runIdentity{Command: identityEnvStart}, "gymlens env start", "", stdout, stderr)
	}
	sess, err := openSession(cfg, *runsDir, false, runIdentity{Command: identityEnvStart}, false, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "gymlens env start: %v\n", err)
		return exitUsage
	}
	defer sess.close()
	fleet, err := sess.start(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "gymlens env start: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "run %s (%s)\n", sess.runID, sess.runDir)
	fmt.Fprintf(stdout, "head server %s\n", fleet.HeadURL())
	for _, s := range fleet.Servers() {
		if s.Remote {
			fmt.Fprintf(stdout, "  %-16s %-22s %s  on another host\n", s.Spec.Name, s.Spec.Type, s.URL)
			continue
		}
		fmt.Fprintf(stdout, "  %-16s %-22s %s  pid %d\n", s.Spec.Name, s.Spec.Type, s.URL, s.PID)
	}
	failed := false
	for running := true; running; {
		select {
		case <-ctx.Done():
			running = false
		case ex := <-fleet.Exits():
			failed = true
			fmt.Fprintf(stderr, "gymlens env start: server %s (%s) died: %v; %d still running\n", ex.Name, ex.Where(), ex.Err, fleet.Active())
			if fleet.Active() == 0 {
				fmt.Fprintln(stderr, "gymlens env start: no server left running")
				running = false
			}
		}
	}
	if err := sess.stopFleet(fleet); err != nil {
		fmt.Fprintf(stderr, "gymlens env start: %v\n", err)
		failed = true
	}
	if failed {
		return 1
	}
	return exitOK
}

// dryRunFleet checks a fleet whose config sets dry_run: true: in a new run
// directory (logs/<server>.log per server; id, its command marked as a dry
// run, in its identity file), orchestrator.DryRun runs every
// server once, one at a time, and each must exit 0 without listening. It
// prints a line per server and a summary on stdout (the summary ends with
// note when note is not ""), every failure on stderr, and returns 0 when
// all servers passed, 1 otherwise.
func dryRunFleet(ctx context.Context, cfg orchestrator.Config, runsDir string, id runIdentity, prog, note string, stdout, stderr io.Writer) int {
	id.Command += " (dry run)"
	sess, err := openSession(cfg, runsDir, false, id, false, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prog, err)
		return exitUsage
	}
	defer sess.close()
	results, err := orchestrator.DryRun(ctx, sess.cfg, orchestrator.Options{RunDir: sess.runDir, Logger: sess.log, HeadToken: os.Getenv(contract.EnvHeadToken)})
	failed := 0
	for _, r := range results {
		s := r.Server
		if r.Err != nil {
			failed++
			fmt.Fprintf(stdout, "dry run: %-16s %-22s FAILED (pid %d; see below)\n", s.Spec.Name, s.Spec.Type, s.PID)
			continue
		}
		fmt.Fprintf(stdout, "dry run: %-16s %-22s ok: config valid, exited 0 without listening (pid %d, %s)\n",
			s.Spec.Name, s.Spec.Type, s.PID, r.Elapsed.Round(time.Millisecond))
	}
	logs := filepath.Join(sess.runDir, contract.RunLogsDir)
	if note != "" {
		note = "; " + note
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prog, err)
		fmt.Fprintf(stdout, "dry run: FAILED: %d of %d servers passed%s (run %s, logs in %s)\n",
			len(results)-failed, len(sess.cfg.Servers), note, sess.runID, logs)
		return 1
	}
	fmt.Fprintf(stdout, "dry run: all %d servers passed; nothing is running%s (run %s, logs in %s)\n",
		len(results), note, sess.runID, logs)
	return exitOK
}
