package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// runGym runs the program with args and returns its exit status and output.
func runGym(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}} {
		code, out, errOut := runGym(t, args...)
		if code != 0 {
			t.Errorf("gymlens %v: exit %d, want 0", args, code)
		}
		if !strings.Contains(out, "Usage:") || !strings.Contains(out, "telemetry") {
			t.Errorf("gymlens %v: usage does not list the commands:\n%s", args, out)
		}
		if errOut != "" {
			t.Errorf("gymlens %v: unexpected stderr %q", args, errOut)
		}
	}
}

func TestNoCommand(t *testing.T) {
	code, out, errOut := runGym(t)
	if code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
	if out != "" || !strings.Contains(errOut, "telemetry") {
		t.Errorf("want usage on stderr only; stdout %q stderr %q", out, errOut)
	}
}

func TestUnknownCommand(t *testing.T) {
	for _, args := range [][]string{{"frobnicate"}, {"telemetry", "frobnicate"}, {"help", "frobnicate"}} {
		code, out, errOut := runGym(t, args...)
		if code != 2 {
			t.Errorf("gymlens %v: exit %d, want 2", args, code)
		}
		if out != "" {
			t.Errorf("gymlens %v: unexpected stdout %q", args, out)
		}
		if !strings.Contains(errOut, `unknown command "frobnicate"`) || !strings.Contains(errOut, "Usage:") {
			t.Errorf("gymlens %v: stderr lacks the error or the usage:\n%s", args, errOut)
		}
	}
}

func TestHelpForSubcommands(t *testing.T) {
	code, out, _ := runGym(t, "help", "telemetry")
	if code != 0 || !strings.Contains(out, "check") {
		t.Errorf("gymlens help telemetry: exit %d, output:\n%s", code, out)
	}
	for _, args := range [][]string{{"help", "telemetry", "check"}, {"telemetry", "check", "-h"}, {"telemetry", "help", "check"}} {
		code, out, errOut := runGym(t, args...)
		if code != 0 || !strings.Contains(out, "Usage: gymlens telemetry check") || !strings.Contains(out, "-world-size") {
			t.Errorf("gymlens %v: exit %d, stdout:\n%s\nstderr:\n%s", args, code, out, errOut)
		}
	}
}
