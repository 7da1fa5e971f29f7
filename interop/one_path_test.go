package interop

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gymlens/gymlens/internal/upstream"
)

// lookPath finds name on the PATH of env, as a shell with that
// environment would.
func lookPath(env []string, name string) string {
	for _, kv := range env {
		if path, ok := strings.CutPrefix(kv, "PATH="); ok {
			for _, dir := range filepath.SplitList(path) {
				if p := filepath.Join(dir, name); isExecutable(p) {
					return p
				}
			}
		}
	}
	return ""
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// NeMo Gym installs a console script named gym; gymlens's command is
// gymlens. With both on one PATH (as every mixed fleet here runs), each
// name reaches its own program: upstream's answers its version, ours its
// usage, and neither shadows the other.
func TestUpstreamBothCommandsOnOnePath(t *testing.T) {
	py := upstream.Python(t)
	env := cleanEnv()
	gym, gymlens := lookPath(env, "gym"), lookPath(env, "gymlens")
	if gym != filepath.Join(filepath.Dir(py), "gym") {
		t.Fatalf("gym on the fleet's PATH is %q, want upstream's console script next to %s", gym, py)
	}
	if gymlens != gymBin {
		t.Fatalf("gymlens on the fleet's PATH is %q, want %s", gymlens, gymBin)
	}
	run := func(bin string, args ...string) string {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		// Upstream's CLI writes Hydra's outputs/ into its working directory.
		cmd.Dir = t.TempDir()
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v: %v\n%s", bin, args, err, out)
		}
		return string(out)
	}
	if out := run(gym, "--version"); !strings.Contains(out, "0.7.0") {
		t.Errorf("gym --version: %q, want NeMo Gym 0.7.0", out)
	}
	if out := run(gymlens, "help"); !strings.Contains(out, "gymlens is the command-line tool of gymlens") {
		t.Errorf("gymlens help: %q", out)
	}
}
