package interop

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gymlens/gymlens/dataset"
	"github.com/gymlens/gymlens/internal/testenv"
	"github.com/gymlens/gymlens/internal/upstream"
	"github.com/gymlens/gymlens/protocol"
)

// launchBound bounds everything one upstream launcher does: Ray's start,
// the servers' start-up, and its shutdown.
const launchBound = 4 * time.Minute

// release is one installed release of nemo-gym that the mixed fleets run.
type release struct {
	name string
	// python returns its interpreter, or skips the test (fails it under
	// CI=true) where it is not installed.
	python func(testing.TB) string
}

// The releases the mixed fleets run against: 0.7.0, the newest, and 0.6.0,
// which users still run (no environment servers; the same openai).
var (
	release070 = release{"0.7.0", upstream.Python}
	release060 = release{"0.6.0", upstream.TelemetryPython}
)

// bin is the path of one of the release's console scripts (gym, ...).
func (r release) bin(t testing.TB, name string) string {
	return filepath.Join(filepath.Dir(r.python(t)), name)
}

// cleanEnv is the test process's environment minus telemetry settings,
// plus what keeps upstream's Ray on loopback and quiet, plus extra. Its
// PATH leads with gymlens's binary and upstream 0.7.0's console scripts
// (where installed), as a user who has both has them: NeMo Gym's `gym`
// and gymlens's `gymlens` on one PATH.
func cleanEnv(extra ...string) []string {
	var env []string
	path := filepath.Dir(gymBin)
	if py, err := upstream.Find(); err == nil {
		path += string(os.PathListSeparator) + filepath.Dir(py)
	}
	for _, kv := range os.Environ() {
		name, value, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "NEMO_GYM_") || strings.HasPrefix(name, "NEMO_LENS_") ||
			strings.HasPrefix(name, "OTEL_") || strings.HasPrefix(name, "RAY_") || name == "SLURM_JOB_ID" {
			continue
		}
		if name == "PATH" {
			path += string(os.PathListSeparator) + value
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "PATH="+path)
	env = append(env, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0", "RAY_USAGE_STATS_ENABLED=0", "PYTHONDONTWRITEBYTECODE=1")
	return append(env, extra...)
}

// venvDir prepares the uv_venv_dir upstream's launcher is pointed at: for
// each <type>/<impl> it will start, a .venv that is upstream's own
// installed venv (with skip_venv_if_present the launcher activates it and
// installs nothing: uv cannot fetch an interpreter here).
func venvDir(t *testing.T, rel release, dirs ...string) string {
	t.Helper()
	venv := filepath.Dir(filepath.Dir(rel.python(t)))
	root := t.TempDir()
	for _, d := range dirs {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(venv, filepath.Join(root, d, ".venv")); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// upstreamFleet is a fleet started by upstream's launcher (gym env start).
type upstreamFleet struct {
	proc *testenv.Proc
	head string // http://127.0.0.1:PORT
	log  *testenv.Buffer
}

// startUpstreamFleet runs the release's `gym env start` in dir with the
// given config files and search directories and waits until its head
// server lists every server it started and each answers GET /, as
// upstream's clients find them. The fleet is stopped when the test ends.
func startUpstreamFleet(t *testing.T, rel release, dir string, headPort int, configs, searchDirs []string) *upstreamFleet {
	t.Helper()
	args := []string{"env", "start"}
	for _, s := range searchDirs {
		args = append(args, "--search-dir", s)
	}
	for _, c := range configs {
		args = append(args, "--config", c)
	}
	cmd := exec.Command(rel.bin(t, "gym"), args...)
	cmd.Dir = dir
	cmd.Env = cleanEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	log := &testenv.Buffer{}
	cmd.Stdout, cmd.Stderr = log, log
	f := &upstreamFleet{proc: testenv.Start(t, cmd, launchBound), head: fmt.Sprintf("http://127.0.0.1:%d", headPort), log: log}
	t.Cleanup(func() { f.stop(t) })
	waitFleet(t, f.head, f.proc, log, launchBound, 0)
	return f
}

// waitFleet polls a head server until its /server_instances lists servers
// (want of them, when want > 0) and every one answers GET /. The process
// proc ending first, or the bound passing, fails the test with log's end.
func waitFleet(t *testing.T, head string, proc *testenv.Proc, log fmt.Stringer, bound time.Duration, want int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	c := &http.Client{Timeout: 5 * time.Second}
	get := func(url string) ([]byte, bool) {
		res, err := c.Get(url)
		if err != nil {
			return nil, false
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		return b, err == nil && res.StatusCode == http.StatusOK
	}
	for {
		if raw, ok := get(head + "/server_instances"); ok {
			var insts []struct {
				URL string `json:"url"`
			}
			if json.Unmarshal(raw, &insts) == nil && len(insts) > 0 && (want == 0 || len(insts) == want) {
				up := 0
				for _, in := range insts {
					if _, ok := get(in.URL + "/"); ok {
						up++
					}
				}
				if up == len(insts) {
					return
				}
			}
		}
		select {
		case <-proc.Done():
			t.Fatalf("the fleet's launcher exited %d before its fleet was up:\n%s", proc.ExitCode(), tailLines(log.String(), 60))
		case <-ctx.Done():
			t.Fatalf("fleet not up after %s:\n%s", bound, tailLines(log.String(), 60))
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// stop ends the launcher as its docs say (SIGINT to its process group,
// which stops its servers and Ray), then kills whatever of the group is
// left after a bound.
func (f *upstreamFleet) stop(t *testing.T) {
	pid := f.proc.Cmd.Process.Pid
	_ = syscall.Kill(-pid, syscall.SIGINT)
	select {
	case <-f.proc.Done():
	case <-time.After(30 * time.Second):
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
}

// collectUpstream runs the release's collector (gym eval run --no-serve)
// in dir against the fleet whose head server is headPort and returns the
// output file's path. args are passed on (agent, repeats, ...); fleetLog,
// when not nil, is shown with a failure.
func collectUpstream(t *testing.T, rel release, dir string, headPort int, fleetLog fmt.Stringer, tasks string, args ...string) string {
	t.Helper()
	headCfg := filepath.Join(dir, "collect-head.yaml")
	writeFile(t, headCfg, fmt.Sprintf("head_server: {host: 127.0.0.1, port: %d}\n", headPort))
	out := filepath.Join(dir, "collected", "rollouts.jsonl")
	all := append([]string{"eval", "run", "--no-serve", "--config", headCfg, "-i", tasks, "-o", out, "--no-health-check"}, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, rel.bin(t, "gym"), all...)
	cmd.Dir = dir
	cmd.Env = cleanEnv()
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Run(); err != nil {
		fleet := ""
		if fleetLog != nil {
			fleet = "\nthe fleet's log:\n" + tailLines(fleetLog.String(), 30)
		}
		t.Fatalf("upstream's gym eval run: %v\n%s%s", err, tailLines(log.String(), 30), fleet)
	}
	return out
}

// readLines reads a JSONL file into one map per line.
func readLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeTasks writes rows as dir/tasks.jsonl, the dataset format, and
// returns the file's path.
func writeTasks(t *testing.T, dir string, rows []protocol.RunRequest) string {
	t.Helper()
	var buf bytes.Buffer
	if err := dataset.WriteRows(&buf, rows); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "tasks.jsonl")
	writeFile(t, path, buf.String())
	return path
}

// runGym runs gymlens's gym to completion and fails the test on an error.
func runGym(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, gymBin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("gymlens %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
