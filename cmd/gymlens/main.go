package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"text/tabwriter"

	"github.com/gymlens/gymlens/gymconfig"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// DefaultGCPercent is the garbage collector's target (GOGC) in every
// `gymlens serve` process unless GOGC is set in the environment.
//
// A gym server keeps a small live heap while it allocates tens of kilobytes
// per rollout, so with Go's default of 100 its heap never leaves the 4 MB
// minimum and a busy agent collects many times a second. At 400 the
// minimum heap is 16 MB and collections are that much rarer, for the price
// of a few megabytes more per server (up to five times its live heap).
// What it saves in CPU per rollout is measured in docs/performance.md
// (fleet throughput). The orchestrator keeps Go's default: its live heap
// (the task list, a run read back for the summary) is large enough that it
// collects rarely anyway, and five times it would be a lot of memory.
const DefaultGCPercent = 400

// tuneGC applies DefaultGCPercent unless the user chose a GOGC.
func tuneGC() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(DefaultGCPercent)
	}
}

// Exit statuses shared by every command.
const (
	exitOK    = 0
	exitUsage = 2 // bad command line or bad configuration
)

// command is one entry of a command table. run receives the arguments that
// follow the command's name and returns the process exit status.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

// group is a level of the command tree: the top-level gymlens command, or a
// command such as "telemetry" whose first argument picks a subcommand.
// commands is a function rather than a slice so that a table may refer back
// to a group's run method without an initialisation cycle.
type group struct {
	path     string // the words that reach this group, e.g. "gymlens telemetry"
	synopsis string // one paragraph printed at the top of the usage text
	commands func() []command
}

// gym is the root of the command tree. A new top-level command is added by
// writing its run function in a file of its own and listing it here.
var gym = group{
	path:     "gymlens",
	synopsis: "gymlens is the command-line tool of gymlens, the telemetry layer for NeMo Gym. (NeMo Gym's own command is gym; the two live side by side on one PATH.)",
	commands: func() []command {
		return []command{
			runCommand,
			envCommand,
			serveCommand,
			rolloutsCommand,
			telemetryCommand,
			reportCommand,
			topCommand,
		}
	},
}

// run is the whole program apart from process setup, so tests can drive it.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return gym.run(ctx, args, stdout, stderr)
}

func (g group) find(name string) (command, bool) {
	for _, c := range g.commands() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// run picks the subcommand named by args[0] and hands it the rest. "help"
// and -h print the usage on stdout; "help NAME ..." asks that command for
// its own help. A missing or unknown name is a usage error.
func (g group) run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintf(stderr, "%s: missing command\n\n", g.path)
		g.usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help":
		g.usage(stdout)
		return exitOK
	case "help":
		if len(args) == 1 {
			g.usage(stdout)
			return exitOK
		}
		c, ok := g.find(args[1])
		if !ok {
			return g.unknown(args[1], stderr)
		}
		rest := append(append([]string(nil), args[2:]...), "-h")
		return c.run(ctx, rest, stdout, stderr)
	}
	c, ok := g.find(args[0])
	if !ok {
		return g.unknown(args[0], stderr)
	}
	return c.run(ctx, args[1:], stdout, stderr)
}

// unknown reports a command name that is not one of g's, with the
// nearest one by edit distance when one is close.
func (g group) unknown(name string, stderr io.Writer) int {
	names := []string{"help"}
	for _, c := range g.commands() {
		names = append(names, c.name)
	}
	hint := ""
	if near := gymconfig.Nearest(name, names); near != "" {
		hint = fmt.Sprintf(" (did you mean %q?)", near)
	}
	fmt.Fprintf(stderr, "%s: unknown command %q%s\n\n", g.path, name, hint)
	g.usage(stderr)
	return exitUsage
}

func (g group) usage(w io.Writer) {
	fmt.Fprintf(w, "%s\n\nUsage:\n  %s <command> [arguments]\n\nCommands:\n", g.synopsis, g.path)
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	for _, c := range g.commands() {
		fmt.Fprintf(tw, "  %s\t%s\n", c.name, c.summary)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\nRun \"%s help <command>\" for more about a command.\n", g.path)
}

// parseFlags parses the flags of a command that takes no positional
// argument: see parseArgs.
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (code int, done bool) {
	_, code, done = parseArgs(fs, args, 0, "", stdout, stderr)
	return code, done
}

// parseArgs parses args with fs, which must use flag.ContinueOnError, for
// a command that takes at most maxArgs positional arguments (what, such as
// "a run directory", names them in the error). Flags may come before,
// between and after the positional arguments; "--" ends the flags. It
// returns the positional arguments and done=false when the command should
// go on. Otherwise it returns the exit status: -h prints the usage on
// stdout and succeeds; a bad flag, or one argument more than maxArgs,
// prints the error on stderr and is a usage error, so nothing on the
// command line is ever ignored. An extra argument naming an existing file,
// to a command with a --config flag, gets the hint "did you mean --config
// FILE?".
func parseArgs(fs *flag.FlagSet, args []string, maxArgs int, what string, stdout, stderr io.Writer) (positional []string, code int, done bool) {
	var msg bytes.Buffer
	fs.SetOutput(&msg)
	for {
		err := fs.Parse(args)
		switch {
		case errors.Is(err, flag.ErrHelp):
			fs.SetOutput(stdout)
			fs.Usage()
			return nil, exitOK, true
		case err != nil:
			_, _ = stderr.Write(msg.Bytes())
			return nil, exitUsage, true
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			positional = append(positional, rest...) // after "--": no more flags
			break
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
	fs.SetOutput(stderr)
	if len(positional) > maxArgs {
		extra := positional[maxArgs]
		takes := "takes no arguments, only flags"
		switch {
		case maxArgs == 1:
			takes = "takes one argument, " + what
		case maxArgs > 1:
			takes = fmt.Sprintf("takes at most %d arguments, %s", maxArgs, what)
		}
		hint := ""
		if fi, err := os.Stat(extra); err == nil && !fi.IsDir() && fs.Lookup("config") != nil {
			hint = fmt.Sprintf(" (did you mean --config %s?)", extra)
		}
		fmt.Fprintf(stderr, "%s: unexpected argument %q: %s %s%s\n", fs.Name(), extra, fs.Name(), takes, hint)
		return nil, exitUsage, true
	}
	return positional, 0, false
}
