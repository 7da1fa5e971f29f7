package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/dataset"
	"github.com/gymlens/gymlens/gymconfig"
	"github.com/gymlens/gymlens/live"
	"github.com/gymlens/gymlens/orchestrator"
	"github.com/gymlens/gymlens/protocol"
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
	path:     "gymlens rollouts",
	synopsis: "gymlens rollouts runs tasks through a fleet's agent server.",
	commands: func() []command {
		return []command{{name: "collect", summary: "run every task of a JSONL file, one output line per rollout", run: runCollect}}
	},
}

func runCollect(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gymlens rollouts collect", flag.ContinueOnError)
	var input, output string
	fs.StringVar(&input, "input", "", "NeMo Gym task JSONL: responses_create_params, task fields, agent_ref (required)")
	fs.StringVar(&input, "i", "", "short for --input")
	fs.StringVar(&output, "output", "", "rollouts JSONL; (task, rollout) pairs already in it are skipped (required)")
	fs.StringVar(&output, "o", "", "short for --output")
	agentURL := fs.String("agent-url", "", "base URL of the agent server, called directly (this or --head is required)")
	headURL := fs.String("head", "", "base URL of a NeMo Gym head server (http://host:11000): its config's environment servers and agents, instead of --agent-url")
	tokenFile := fs.String("head-token-file", "", "with --head: file holding the fleet's head token (the run directory's "+contract.RunHeadTokenFile+"); default: $"+contract.EnvHeadToken)
	var agentName string
	fs.StringVar(&agentName, "agent", "simple_agent", "agent name the URL serves and the agent of rows with neither agent_ref nor task_source; given explicitly, the agent of every row (as NeMo Gym 0.7's --agent)")
	fs.StringVar(&agentName, "a", "simple_agent", "short for --agent")
	concurrency := fs.Int("concurrency", 8, "rollouts in flight at once")
	repeats := fs.Int("num-repeats", 1, "rollouts per task")
	limit := fs.Int("limit", 0, "use only the first N lines of the input (0: all)")
	noAggregate := fs.Bool("disable-aggregation", false, "do not ask the agent for aggregate metrics")
	resume := fs.Bool("resume", false, "continue an existing output: skip the (task, rollout) pairs it completed, retry its failures")
	statusAddr := fs.String("status-addr", "127.0.0.1:0", "where this run's status API (and live page) listens, for gymlens top --head; \"\" for none. Off loopback it needs the head token. With --head, the head server relays it too")
	lf := addLiveFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: gymlens rollouts collect -i tasks.jsonl -o rollouts.jsonl (--agent-url URL | --head URL) [flags]\n\n"+
			"Runs each task (num-repeats times) through the agent's POST /run and writes\n"+
			"NeMo Gym's output line per rollout as it finishes. A rollout whose /run\n"+
			"fails is retried up to $NEMO_GYM_MAX_ROLLOUT_ATTEMPTS times (default 3), then\n"+
			"written to <stem>_failures.jsonl; the command then exits 1. An existing\n"+
			"output is continued with --resume (only what is not done yet runs) and\n"+
			"never overwritten without it.\n\n"+
			"With --head the fleet comes from a running fleet's head server (NeMo Gym's\n"+
			"or gymlens env start's): GET /global_config_dict_yaml. A row's agent_ref.name\n"+
			"picks the agent (a row without one: its task_source, resolved as NeMo Gym\n"+
			"resolves it), and the row goes to the environment server that names that\n"+
			"agent, whose answers carry _ng_environment_server and _ng_result_type; an\n"+
			"agent no environment server names is called directly (a log line says so).\n"+
			"--agent given explicitly replaces every row's agent_ref, with a warning, as\n"+
			"NeMo Gym 0.7's --agent does; --agent-url calls that one agent directly.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if *agentURL != "" && *headURL != "" {
		fmt.Fprintln(stderr, "gymlens rollouts collect: --agent-url and --head are exclusive: give the agent's URL or the head server's, not both")
		return exitUsage
	}
	if input == "" || output == "" || (*agentURL == "" && *headURL == "") {
		fmt.Fprintln(stderr, "gymlens rollouts collect: --input, --output and --agent-url (or --head) are required")
		return exitUsage
	}
	if *concurrency < 1 || *repeats < 1 || *limit < 0 {
		fmt.Fprintln(stderr, "gymlens rollouts collect: --concurrency and --num-repeats must be at least 1, --limit at least 0")
		return exitUsage
	}
	tracker, err := lf.tracker()
	if err != nil {
		fmt.Fprintf(stderr, "gymlens rollouts collect: %v\n", err)
		return exitUsage
	}
	if !*resume {
		// The output and its failures file are one record of the run:
		// neither is overwritten without being asked to.
		for _, path := range []string{output, rollout.FailuresPath(output)} {
			if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() && fi.Size() > 0 {
				fmt.Fprintf(stderr, "gymlens rollouts collect: %s already holds rollouts: pass --resume to continue it, or choose another output\n", path)
				return exitUsage
			}
		}
	}
	rows, err := readRows(input)
	if err != nil {
		fmt.Fprintf(stderr, "gymlens rollouts collect: %v\n", err)
		return exitUsage
	}
	agentSet := false
	fs.Visit(func(f *flag.Flag) { agentSet = agentSet || f.Name == "agent" || f.Name == "a" })
	fleet := rollout.Fleet{Agents: map[string]string{agentName: *agentURL}}
	// The head token: the head's, for its routes and the fleet's servers'
	// /gymlens/ routes (the agents' episodes), and this run's status API.
	token := ""
	if *headURL != "" {
		if token, err = headToken(*tokenFile); err != nil {
			fmt.Fprintf(stderr, "gymlens rollouts collect: %v\n", err)
			return exitUsage
		}
		if fleet, err = headFleet(ctx, *headURL, token, rows, *limit, agentName, agentSet); err != nil {
			fmt.Fprintf(stderr, "gymlens rollouts collect: %v\n", err)
			return exitUsage
		}
	}
	if *statusAddr != "" && tracker != nil {
		board := &live.Board{}
		lf.show(board, tracker)
		st, err := listenStatus(*statusAddr, token, board)
		if err != nil {
			fmt.Fprintf(stderr, "gymlens rollouts collect: %v\n", err)
			return exitUsage
		}
		defer st.close()
		fmt.Fprintf(stderr, "gymlens rollouts collect: status API at %s%s (gymlens top --head %s)\n", st.base, live.StatusPath, st.base)
		if *headURL != "" {
			offerStatus(ctx, *headURL, token, st.base, stderr)
		}
	}
	override, fallback := "", agentName
	if agentSet {
		override, fallback = agentName, ""
	}
	if _, err := telemetry.Init(telemetry.InitOptions{ServerName: "collector"}); err != nil {
		fmt.Fprintf(stderr, "gymlens rollouts collect: telemetry is off: %v\n", err)
	}
	defer func() { _ = shutdownTelemetry() }()
	sum, err := rollout.Collect(ctx, rows, rollout.Options{
		Output: output, Resume: *resume, Agents: fleet.Agents, Environments: fleet.Environments,
		TaskSources: fleet.TaskSources, AgentOverride: override, DefaultAgent: fallback,
		NumRepeats: *repeats, Limit: *limit, Concurrency: *concurrency, DisableAggregation: *noAggregate,
		Progress: stderr, ProgressTTY: isTerminal(stderr),
		Live: tracker, LiveClient: liveClient(token),
	})
	printCollectSummary(stdout, output, sum)
	if err != nil {
		fmt.Fprintf(stderr, "gymlens rollouts collect: %v\n", err)
		if errors.Is(err, rollout.ErrInvalidInput) {
			return exitUsage
		}
		return 1
	}
	return exitOK
}

// printCollectSummary prints what a collection did, each rollout of the
// run counted once: completed (written to output), failed (written to the
// failures file), discarded (_ng_no_persist), skipped (done by an earlier
// run) and not run (the run ended first); the durations are of this run's
// rollouts.
func printCollectSummary(w io.Writer, output string, sum rollout.Summary) {
	d := sum.DurationsMS
	fmt.Fprintf(w, "rollouts: %d completed, %d failed", sum.Succeeded, sum.Failed)
	if sum.Discarded > 0 {
		fmt.Fprintf(w, ", %d discarded", sum.Discarded)
	}
	fmt.Fprintf(w, ", %d skipped (already in %s), %d not run, of %d; %d rewarded; p50 %.1f ms, p95 %.1f ms\n",
		sum.Skipped, output, sum.Remaining(), sum.Total, sum.Rewarded, rollout.Percentile(d, 50), rollout.Percentile(d, 95))
}

// headFleet reads a running fleet through its head server and checks
// that every agent the rows name (the first limit rows, 0 for all; rows
// with neither agent_ref nor task_source take defaultAgent) is one of
// its agents, as is defaultAgent when it was given explicitly (it then
// routes every row).
func headFleet(ctx context.Context, headURL, token string, rows []protocol.RunRequest, limit int, defaultAgent string, explicit bool) (rollout.Fleet, error) {
	// A client of its own: the token goes to the head server only.
	client := &http.Client{Transport: &orchestrator.BearerTransport{Token: token, Base: http.DefaultTransport.(*http.Transport).Clone()}}
	defer client.CloseIdleConnections()
	fleet, err := rollout.HeadFleet(ctx, client, headURL, os.LookupEnv)
	if err != nil {
		return fleet, err
	}
	known := slices.Sorted(maps.Keys(fleet.Agents))
	if len(known) == 0 {
		return fleet, fmt.Errorf("head server %s: its config has no agent (no %s instance)", headURL, contract.ServerTypeAgent)
	}
	if limit > 0 && limit < len(rows) {
		rows = rows[:limit]
	}
	needed := map[string][]int{}
	var order []string
	if explicit {
		needed[defaultAgent], order = nil, []string{defaultAgent}
	}
	for i := range rows {
		if explicit {
			break // every row goes to defaultAgent
		}
		name, present, err := dataset.AgentName(&rows[i])
		if err != nil {
			continue // the collector reports it, naming the row
		}
		if !present {
			if rows[i].Fields.Has(rollout.KeyTaskSource) {
				continue // resolved by the collector
			}
			name = defaultAgent
		}
		if name == "" {
			continue
		}
		if _, seen := needed[name]; !seen {
			order = append(order, name)
		}
		needed[name] = append(needed[name], i+1)
	}
	for _, name := range order {
		if _, ok := fleet.Agents[name]; ok {
			continue
		}
		var what []string
		if explicit && name == defaultAgent {
			what = append(what, "--agent")
		}
		switch lines := needed[name]; {
		case len(lines) == 1:
			what = append(what, "row "+lineList(lines))
		case len(lines) > 1:
			what = append(what, "rows "+lineList(lines))
		}
		msg := fmt.Sprintf("agent %q (%s) is not in the config of head server %s (its agents: %s)", name, strings.Join(what, ", "), headURL, strings.Join(known, ", "))
		if n := gymconfig.Nearest(name, known); n != "" {
			msg += fmt.Sprintf("; did you mean %q?", n)
		}
		if !explicit && name == defaultAgent {
			msg += "; rows with neither agent_ref nor task_source take --agent (default " + defaultAgent + ")"
		}
		return fleet, errors.New(msg)
	}
	return fleet, nil
}

// lineList shows row numbers compactly: the first five, then a count.
func lineList(lines []int) string {
	const show = 5
	parts := make([]string, 0, show+1)
	for i, l := range lines {
		if i == show {
			parts = append(parts, fmt.Sprintf("and %d more", len(lines)-show))
			break
		}
		parts = append(parts, strconv.Itoa(l))
	}
	return strings.Join(parts, ", ")
}
