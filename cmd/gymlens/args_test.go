package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gymlens/gymlens/internal/testenv"
	"github.com/gymlens/gymlens/server"
)

// Nothing on a command line is ignored: an argument a command does not
// take, and every flag after it, is a usage error (exit 2) that creates
// nothing, with a hint when the argument names a file that --config
// would read.
func TestExtraArgumentsAreUsageErrors(t *testing.T) {
	testenv.ClearTelemetry(t)
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	fleet := filepath.Join(dir, "fleet.yaml")
	if err := os.WriteFile(fleet, []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "extra", "--rollouts", "5", "--runs-dir", runs}, `gymlens run: unexpected argument "extra": gymlens run takes no arguments, only flags` + "\n"},
		{[]string{"run", "--runs-dir", runs, "--rollouts", "5", "extra"}, `gymlens run: unexpected argument "extra"`},
		{[]string{"run", "--runs-dir", runs, "--", "--rollouts", "5"}, `gymlens run: unexpected argument "--rollouts"`},
		{[]string{"env", "start", fleet, "--runs-dir", runs}, `gymlens env start: unexpected argument "` + fleet + `": gymlens env start takes no arguments, only flags (did you mean --config ` + fleet + `?)`},
		{[]string{"rollouts", "collect", "-i", fleet, "-o", filepath.Join(runs, "o.jsonl"), "--agent-url", "http://127.0.0.1:1", "more"}, `gymlens rollouts collect: unexpected argument "more"`},
		{[]string{"telemetry", "check", "extra"}, `gymlens telemetry check: unexpected argument "extra"`},
		{[]string{"serve", "resources_servers", "--name", "x", "extra"}, `gymlens serve: unexpected argument "extra"`},
		{[]string{"report", dir, runs}, `gymlens report: unexpected argument "` + runs + `": gymlens report takes one argument, a run directory`},
	} {
		code, out, errOut := runGym(t, c.args...)
		if code != exitUsage || out != "" || !strings.Contains(errOut, c.want) {
			t.Errorf("gymlens %q: exit %d, stdout %q, stderr %q; want exit 2 and %q", c.args, code, out, errOut, c.want)
		}
	}
	if _, err := os.Stat(runs); !os.IsNotExist(err) {
		t.Errorf("a refused command created %s (%v)", runs, err)
	}
}

// A flag tuning the built-in policy is checked whatever its value, as the
// same key in the file is, before anything is created: a negative value
// is not taken for "unset".
func TestModelFlagsOutOfRangeExit2(t *testing.T) {
	testenv.ClearTelemetry(t)
	runs := filepath.Join(t.TempDir(), "runs")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--correct-probability", "2"}, "correct_probability must be in [0, 1], got 2"},
		{[]string{"--correct-probability", "-0.5"}, "correct_probability must be in [0, 1], got -0.5"},
		{[]string{"--model-latency-ms", "-3"}, "latency_ms must be a finite number >= 0, got -3"},
	} {
		code, out, errOut := runGym(t, append([]string{"run", "--quiet", "--runs-dir", runs}, c.args...)...)
		if code != exitUsage || out != "" || !strings.Contains(errOut, c.want) {
			t.Errorf("gymlens run %q: exit %d, stdout %q, stderr %q; want exit 2 and %q", c.args, code, out, errOut, c.want)
		}
	}
	if _, err := os.Stat(runs); !os.IsNotExist(err) {
		t.Errorf("gymlens run created %s (%v)", runs, err)
	}
}

// An unknown command gets the nearest command of its group.
func TestUnknownCommandSuggests(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"runn"}, `gymlens: unknown command "runn" (did you mean "run"?)`},
		{[]string{"raport"}, `gymlens: unknown command "raport" (did you mean "report"?)`},
		{[]string{"env", "strat"}, `gymlens env: unknown command "strat" (did you mean "start"?)`},
		{[]string{"rollouts", "colect"}, `gymlens rollouts: unknown command "colect" (did you mean "collect"?)`},
		{[]string{"telemetry", "chek"}, `gymlens telemetry: unknown command "chek" (did you mean "check"?)`},
		{[]string{"help", "serv"}, `gymlens: unknown command "serv" (did you mean "serve"?)`},
		{[]string{"xyzzy"}, `gymlens: unknown command "xyzzy"` + "\n"},
	} {
		code, _, errOut := runGym(t, c.args...)
		if code != exitUsage || !strings.Contains(errOut, c.want) {
			t.Errorf("gymlens %q: exit %d, stderr %q; want exit 2 and %q", c.args, code, errOut, c.want)
		}
	}
}

// FuzzParseArgs checks parseArgs on any command line: it never panics,
// never returns more positional arguments than allowed, and every
// argument it returns is one of the command line's, in order.
func FuzzParseArgs(f *testing.F) {
	for _, seed := range []string{"", "a", "a\x00--n\x005", "--n\x005\x00b", "--\x00--n", "-h", "--bogus", "a\x00b\x00c", "-n=3\x00-\x00--", "--s\x00"} {
		f.Add(seed, 1)
	}
	f.Fuzz(func(t *testing.T, line string, max int) {
		max = ((max % 3) + 3) % 3
		var args []string
		if line != "" {
			args = strings.Split(line, "\x00")
		}
		fs := flag.NewFlagSet("fuzz", flag.ContinueOnError)
		fs.Int("n", 0, "")
		fs.String("s", "", "")
		fs.Bool("b", false, "")
		var out, errOut strings.Builder
		pos, code, done := parseArgs(fs, args, max, "things", &out, &errOut)
		if done {
			if code != exitOK && code != exitUsage {
				t.Fatalf("exit %d", code)
			}
			if pos != nil {
				t.Fatalf("positional arguments %q returned with done", pos)
			}
			return
		}
		if len(pos) > max {
			t.Fatalf("%d positional arguments, at most %d allowed: %q", len(pos), max, pos)
		}
		i := 0
		for _, p := range pos {
			for i < len(args) && args[i] != p {
				i++
			}
			if i == len(args) {
				t.Fatalf("positional %q is not an argument of %q (in order)", p, args)
			}
			i++
		}
	})
}

// A bad runtime limit in the environment every server inherits is refused
// by the commands that start a fleet, with exit 2 and nothing created,
// instead of by each child once the run directory exists.
func TestFleetCommandsRefuseBadServerLimits(t *testing.T) {
	testenv.ClearTelemetry(t)
	t.Setenv(server.EnvPrefix+"IDLE_TIMEOUT", "soon")
	runs := filepath.Join(t.TempDir(), "runs")
	for _, args := range [][]string{
		{"run", "--quiet", "--rollouts", "1", "--runs-dir", runs},
		{"env", "start", "--runs-dir", runs},
	} {
		code, out, errOut := runGym(t, args...)
		if code != exitUsage || out != "" || !strings.Contains(errOut, server.EnvPrefix+"IDLE_TIMEOUT") {
			t.Errorf("gymlens %q: exit %d, stdout %q, stderr %q; want exit 2 naming the variable", args, code, out, errOut)
		}
	}
	if _, err := os.Stat(runs); !os.IsNotExist(err) {
		t.Errorf("a fleet command created %s (%v)", runs, err)
	}
}
