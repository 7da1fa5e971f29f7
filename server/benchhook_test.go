package server

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestBenchHookFollowsBuildTag runs this test binary again with the
// benchmark variable set and checks what New makes of it: an uninstrumented
// server in a build with the gymbench tag (go test -tags gymbench), an
// ordinary one otherwise, so a user's build cannot be switched to the
// baseline by the environment.
func TestBenchHookFollowsBuildTag(t *testing.T) {
	if os.Getenv("GYMLENS_BENCH_HOOK_CHILD") == "1" {
		s := New(Options{Name: "hook"})
		if s.opts.uninstrumented {
			os.Stdout.WriteString("hook-child: uninstrumented\n")
		} else {
			os.Stdout.WriteString("hook-child: instrumented\n")
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestBenchHookFollowsBuildTag$", "-test.v")
	cmd.Env = append(os.Environ(), "GYMLENS_BENCH_HOOK_CHILD=1", "GYMLENS_BENCH_UNINSTRUMENTED=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	want := "hook-child: instrumented"
	if gymbenchBuild {
		want = "hook-child: uninstrumented"
	}
	if !strings.Contains(string(out), want+"\n") {
		t.Errorf("gymbench build %v, GYMLENS_BENCH_UNINSTRUMENTED=1: child said\n%s\nwant %q", gymbenchBuild, out, want)
	}
}
