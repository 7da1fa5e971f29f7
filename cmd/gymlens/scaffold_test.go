package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/environment/envtest"
	"github.com/gymlens/gymlens/gymconfig"
	"github.com/gymlens/gymlens/internal/testenv"
	"github.com/gymlens/gymlens/protocol"
)

// scaffoldedFiles lists the files of <root>/<type>/<impl>.
func scaffoldedFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(dir, path)
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(files)
	return files
}

// loadInstance parses a scaffolded configs/<impl>.yaml as NeMo Gym's config
// and returns its one instance.
func loadInstance(t *testing.T, path string) gymconfig.Instance {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	d, err := gymconfig.Parse(raw)
	if err != nil {
		t.Fatalf("%s: %v\n%s", path, err, raw)
	}
	cfg, err := d.Resolve(func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatalf("%s: %v\n%s", path, err, raw)
	}
	if len(cfg.Instances) != 1 {
		t.Fatalf("%s: %d instances, want 1\n%s", path, len(cfg.Instances), raw)
	}
	return cfg.Instances[0]
}

func TestScaffoldWritesServerDir(t *testing.T) {
	root := t.TempDir()
	code, out, errOut := runGym(t, "env", "scaffold", "--impl", "string_match", "--out", root, "--domain", "knowledge")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	dir := filepath.Join(root, contract.ServerTypeResources, "string_match")
	if got, want := scaffoldedFiles(t, dir), []string{"app.py", "configs/string_match.yaml", "requirements.txt"}; !slices.Equal(got, want) {
		t.Fatalf("files %v, want %v", got, want)
	}
	self, _ := os.Executable()
	self, _ = filepath.EvalSymlinks(self)
	config := filepath.Join(dir, "configs", "string_match.yaml")
	for _, want := range []string{
		"wrote " + filepath.Join(dir, "app.py") + "\n",
		"wrote " + filepath.Join(dir, "requirements.txt") + "\n",
		"wrote " + config + "\n",
		"app.py execs " + self + " (set $" + EnvGymBinary + " to run another binary)\n",
		"start it with NeMo Gym: gymlens env start --search-dir " + root + " --config " + config + "\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}

	inst := loadInstance(t, config)
	if inst.Name != "string_match" || inst.Type != contract.ServerTypeResources || inst.Impl != "string_match" {
		t.Errorf("instance %s %s %s", inst.Name, inst.Type, inst.Impl)
	}
	if inst.Block["entrypoint"] != "app.py" || inst.Block["domain"] != "knowledge" || len(inst.ImplConfig()) != 0 {
		t.Errorf("block %v, impl config %v", inst.Block, inst.ImplConfig())
	}

	app, _ := os.ReadFile(filepath.Join(dir, "app.py"))
	for _, want := range []string{"BINARY = " + strconv.Quote(self), `ARGS = ["serve"]`, `OVERRIDE = "` + EnvGymBinary + `"`, "os.execv(binary, [binary] + ARGS)"} {
		if !bytes.Contains(app, []byte(want)) {
			t.Errorf("app.py lacks %q:\n%s", want, app)
		}
	}
	req, _ := os.ReadFile(filepath.Join(dir, "requirements.txt"))
	for _, line := range strings.Split(strings.TrimRight(string(req), "\n"), "\n") {
		if !strings.HasPrefix(line, "#") {
			t.Errorf("requirements.txt line %q is not a comment", line)
		}
	}
	if len(req) == 0 {
		t.Error("requirements.txt is empty; upstream's grep -v of it would select nothing")
	}
}

func TestScaffoldAgentAndModel(t *testing.T) {
	root := t.TempDir()
	code, out, errOut := runGym(t, "env", "scaffold", "--impl", "simple_agent", "--name", "sm_agent", "--out", root,
		"--resources-server", "string_match")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	config := filepath.Join(root, contract.ServerTypeAgent, "simple_agent", "configs", "simple_agent.yaml")
	inst := loadInstance(t, config)
	refs := inst.Refs()
	if inst.Name != "sm_agent" || refs["resources_server"] != (gymconfig.Ref{Type: contract.ServerTypeResources, Name: "string_match"}) ||
		refs["model_server"] != (gymconfig.Ref{Type: contract.ServerTypeModel, Name: "policy_model"}) {
		t.Errorf("instance %s refs %v", inst.Name, refs)
	}
	if _, ok := inst.Block["domain"]; ok || len(inst.ImplConfig()) != 0 {
		t.Errorf("block %v", inst.Block)
	}
	raw, _ := os.ReadFile(config)
	if !strings.Contains(string(raw), "      # configuration keys of simple_agent, with their defaults:\n") ||
		!strings.Contains(string(raw), "      # skip_verification: false\n") || strings.Contains(string(raw), "model_url") {
		t.Errorf("defaults comment:\n%s", raw)
	}

	code, out, errOut = runGym(t, "env", "scaffold", "--impl", "policy_model", "--out", root)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	inst = loadInstance(t, filepath.Join(root, contract.ServerTypeModel, "policy_model", "configs", "policy_model.yaml"))
	if inst.Type != contract.ServerTypeModel || len(inst.Refs()) != 0 {
		t.Errorf("model instance %+v", inst)
	}
}

func TestScaffoldUserBinary(t *testing.T) {
	root := t.TempDir()
	bin := filepath.Join(t.TempDir(), "my-env")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runGym(t, "env", "scaffold", "--binary", bin, "--type", contract.ServerTypeResources, "--impl", "my-env",
		"--name", "my_env", "--out", root)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	dir := filepath.Join(root, contract.ServerTypeResources, "my-env")
	if !strings.Contains(out, "app.py execs "+bin+" (set $GYMLENS_MY_ENV_BINARY to run another binary)") {
		t.Errorf("stdout:\n%s", out)
	}
	app, _ := os.ReadFile(filepath.Join(dir, "app.py"))
	if !bytes.Contains(app, []byte("BINARY = "+strconv.Quote(bin))) || !bytes.Contains(app, []byte("ARGS = []")) {
		t.Errorf("app.py:\n%s", app)
	}
	inst := loadInstance(t, filepath.Join(dir, "configs", "my-env.yaml"))
	if inst.Name != "my_env" || inst.Impl != "my-env" || inst.Block["domain"] != "other" {
		t.Errorf("instance %+v", inst)
	}
}

func TestScaffoldUsageErrors(t *testing.T) {
	notExec := filepath.Join(t.TempDir(), "data.txt")
	if err := os.WriteFile(notExec, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "--impl is required"},
		{[]string{"--impl", "string_mach"}, `no built-in implementation "string_mach" (known: `},
		{[]string{"--impl", "string_mach"}, `did you mean "string_match"?`},
		{[]string{"--impl", "string_match", "--type", contract.ServerTypeAgent}, `no built-in implementation "string_match" of responses_api_agents (known: simple_agent)`},
		{[]string{"--impl", "string_match", "--type", "resource_servers"}, `--type "resource_servers" is not a server type`},
		{[]string{"--impl", "../x"}, `--impl "../x": want a directory name`},
		{[]string{"--impl", "string_match", "--name", "head_server"}, `--name "head_server" is one of NeMo Gym's reserved top-level keys`},
		{[]string{"--impl", "string_match", "--name", "a.b"}, `--name "a.b": want letters`},
		{[]string{"--impl", "string_match", "--domain", "maths"}, `--domain "maths" is not one of upstream's domains`},
		{[]string{"--impl", "string_match", "--domain", "maths"}, `did you mean "math"?`},
		{[]string{"--impl", "policy_model", "--domain", "math"}, "--domain applies to resources_servers only"},
		{[]string{"--impl", "simple_agent"}, "--resources-server is required for simple_agent"},
		{[]string{"--impl", "string_match", "--model-server", "m"}, "--resources-server and --model-server apply to responses_api_agents only"},
		{[]string{"--impl", "mine", "--binary", notExec, "--type", contract.ServerTypeResources}, "is not an executable file"},
		{[]string{"--impl", "mine", "--binary", notExec + ".missing", "--type", contract.ServerTypeResources}, "--binary: stat"},
		{[]string{"--impl", "mine", "--binary", notExec}, "--type is required with --binary"},
		{[]string{"--impl", "string_match", "extra"}, `unexpected argument "extra"`},
		{[]string{"--bogus"}, "flag provided but not defined: -bogus"},
	} {
		root := t.TempDir()
		args := append([]string{"env", "scaffold", "--out", root}, c.args...)
		code, out, errOut := runGym(t, args...)
		if code != 2 || !strings.Contains(errOut, c.want) || out != "" {
			t.Errorf("gymlens %v: exit %d, stdout %q, stderr %q; want exit 2 and %q", args, code, out, errOut, c.want)
		}
		if entries, _ := os.ReadDir(root); len(entries) != 0 {
			t.Errorf("gymlens %v: wrote %d entries into --out", args, len(entries))
		}
	}
}

func TestScaffoldRefusesToOverwrite(t *testing.T) {
	root := t.TempDir()
	args := []string{"env", "scaffold", "--impl", "mcqa", "--out", root}
	if code, out, errOut := runGym(t, args...); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	dir := filepath.Join(root, contract.ServerTypeResources, "mcqa")
	app := filepath.Join(dir, "app.py")
	if err := os.WriteFile(app, []byte("# mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runGym(t, args...)
	want := "gymlens env scaffold: not overwriting " + app + ", " + filepath.Join(dir, "requirements.txt") + ", " +
		filepath.Join(dir, "configs", "mcqa.yaml") + ": pass --force to replace\n"
	if code != 2 || out != "" || errOut != want {
		t.Fatalf("exit %d, stdout %q, stderr %q; want exit 2 and %q", code, out, errOut, want)
	}
	if b, _ := os.ReadFile(app); string(b) != "# mine\n" {
		t.Fatalf("app.py was overwritten: %q", b)
	}
	if code, out, errOut := runGym(t, append(args, "--force")...); code != 0 {
		t.Fatalf("--force: exit %d\n%s%s", code, out, errOut)
	}
	if b, _ := os.ReadFile(app); !bytes.Contains(b, []byte("os.execv")) {
		t.Fatalf("--force did not rewrite app.py: %q", b)
	}

	// A pyproject.toml next to a requirements.txt is an error upstream.
	if err := os.WriteFile(filepath.Join(dir, "pyproject.toml"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = runGym(t, append(args, "--force")...)
	if code != 2 || !strings.Contains(errOut, "has a pyproject.toml") {
		t.Fatalf("pyproject.toml: exit %d, stderr %q", code, errOut)
	}
}

// realPython returns the path of the python3 interpreter itself (not a
// version manager's shim), or skips the test.
func realPython(t *testing.T) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed: the launch of app.py as NeMo Gym does it cannot be tested")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	exe, err := exec.CommandContext(ctx, py, "-c", "import sys; print(sys.executable)").Output()
	if err != nil || strings.TrimSpace(string(exe)) == "" {
		t.Skipf("python3 does not run (%v): the launch of app.py cannot be tested", err)
	}
	return strings.TrimSpace(string(exe))
}

// launchedChild is a server process started the way NeMo Gym's launcher
// starts one; out holds its stdout and stderr together.
type launchedChild struct {
	*testenv.Proc
	out *testenv.Buffer
}

// launchAsUpstream runs `python app.py` in dir as upstream's run_command
// does: cwd the server directory, the environment inherited (here a
// minimal one) plus PYTHONPATH=<dir>, UV_CACHE_DIR, NEMO_GYM_CONFIG_DICT and
// NEMO_GYM_CONFIG_PATH. Its waits are bounded by 30 s; the process is
// killed by its PID when the test ends.
func launchAsUpstream(t *testing.T, python, dir string, configDict []byte, instance string, extraEnv ...string) *launchedChild {
	t.Helper()
	env := []string{"PATH=" + os.Getenv("PATH")}
	if home, ok := os.LookupEnv("HOME"); ok {
		env = append(env, "HOME="+home)
	}
	env = append(env,
		"PYTHONPATH="+dir,
		"UV_CACHE_DIR="+t.TempDir(),
		gymconfig.EnvConfigDict+"="+string(configDict),
		gymconfig.EnvConfigPath+"="+instance,
	)
	env = append(env, extraEnv...)
	cmd := exec.Command(python, "app.py")
	cmd.Dir, cmd.Env = dir, env
	out := &testenv.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	return &launchedChild{testenv.Start(t, cmd, 30*time.Second), out}
}

// wait returns the child's exit error, failing the test if it outlives
// its bound.
func (c *launchedChild) wait(t *testing.T) error {
	t.Helper()
	c.Wait(t)
	return c.Err()
}

// scaffoldFleet scaffolds a built-in string_match resources server with
// the gymlens binary bin and returns its directory and the YAML of a whole
// fleet config holding its block, with host and port filled in as
// upstream's parser fills them before spawning servers.
func scaffoldFleet(t *testing.T, bin string, port int, dryRun bool) (dir string, dict []byte) {
	t.Helper()
	root := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "env", "scaffold", "--impl", "string_match", "--domain", "knowledge", "--out", root).CombinedOutput()
	if err != nil {
		t.Fatalf("gymlens env scaffold: %v\n%s", err, out)
	}
	dir = filepath.Join(root, contract.ServerTypeResources, "string_match")
	block, err := os.ReadFile(filepath.Join(dir, "configs", "string_match.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// The rest of the fleet is Python servers, as a NeMo Gym config has them.
	fleet := string(block) + `
policy_base_url: http://127.0.0.1:1/v1
policy_api_key: dummy
policy_model_name: test-model
policy_model:
  responses_api_models:
    openai_model:
      entrypoint: app.py
      openai_base_url: ${policy_base_url}
      openai_api_key: ${policy_api_key}
      openai_model: ${policy_model_name}
string_match_simple_agent:
  responses_api_agents:
    simple_agent:
      entrypoint: app.py
      resources_server: {type: resources_servers, name: string_match}
      model_server: {type: responses_api_models, name: policy_model}
`
	d, err := gymconfig.Parse([]byte(fleet))
	if err != nil {
		t.Fatalf("%v\n%s", err, fleet)
	}
	head := testenv.FreePort(t)
	for _, set := range []struct {
		path []string
		v    any
	}{
		{[]string{"head_server"}, map[string]any{"host": "127.0.0.1", "port": head}},
		{[]string{"dry_run"}, dryRun},
		{[]string{"string_match", "resources_servers", "string_match", "host"}, "127.0.0.1"},
		{[]string{"string_match", "resources_servers", "string_match", "port"}, port},
		{[]string{"policy_model", "responses_api_models", "openai_model", "host"}, "127.0.0.1"},
		{[]string{"policy_model", "responses_api_models", "openai_model", "port"}, port + 1},
		{[]string{"string_match_simple_agent", "responses_api_agents", "simple_agent", "host"}, "127.0.0.1"},
		{[]string{"string_match_simple_agent", "responses_api_agents", "simple_agent", "port"}, port + 2},
		{[]string{"disallowed_ports"}, []any{head, port, port + 1, port + 2}},
	} {
		if err := d.Set(set.path, set.v); err != nil {
			t.Fatal(err)
		}
	}
	return dir, d.YAML()
}

func TestScaffoldedServerUnderUpstreamLaunch(t *testing.T) {
	python := realPython(t)
	bin := gymBin // built by TestMain (launch_test.go)
	port := testenv.FreePort(t)
	dir, dict := scaffoldFleet(t, bin, port, false)
	child := launchAsUpstream(t, python, dir, dict, "string_match")

	// Readiness as upstream polls it: GET / until anything answers.
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	client := &http.Client{Timeout: 5 * time.Second}
	status, b := child.WaitHTTP(t, base+"/")
	health := fmt.Sprintf("%d %s", status, bytes.TrimSpace(b))
	if health != `200 {"status":"ok"}` {
		t.Errorf("GET / answered %s", health)
	}

	// app.py replaced itself: the process upstream started is the Go server.
	if runtime.GOOS == "linux" {
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", child.Cmd.Process.Pid))
		if want, _ := filepath.EvalSymlinks(bin); err != nil || exe != want {
			t.Errorf("pid %d runs %q (%v), want the gymlens binary %s", child.Cmd.Process.Pid, exe, err, want)
		}
	}

	for answer, want := range map[string]float64{"Answer: Paris": 1, "Answer: Lyon": 0} {
		body, err := json.Marshal(envtest.Verify(envtest.Row("Capital of France?", map[string]any{"expected_answer": "Paris"}),
			envtest.Answer(answer)))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Post(base+protocol.PathVerify, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var res struct {
			Reward *float64 `json:"reward"`
		}
		if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &res) != nil || res.Reward == nil || *res.Reward != want {
			t.Errorf("POST /verify (%s): %d %s; want reward %v", answer, resp.StatusCode, raw, want)
		}
	}

	// Stopped as a fleet stops it, the server drains and exits 0.
	if err := syscall.Kill(child.Cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := child.wait(t); err != nil {
		t.Errorf("after SIGINT: %v; output:\n%s", err, child.out.String())
	}
}

func TestScaffoldedServerDryRun(t *testing.T) {
	python := realPython(t)
	bin := gymBin // built by TestMain (launch_test.go)
	port := testenv.FreePort(t)
	dir, dict := scaffoldFleet(t, bin, port, true)

	child := launchAsUpstream(t, python, dir, dict, "string_match")
	if err := child.wait(t); err != nil {
		t.Fatalf("dry_run: %v, want exit 0; output:\n%s", err, child.out.String())
	}
	if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second); err == nil {
		c.Close()
		t.Errorf("something listens on the server's port after a dry run")
	}

	// The override variable replaces the baked-in binary.
	child = launchAsUpstream(t, python, dir, dict, "string_match", EnvGymBinary+"="+filepath.Join(t.TempDir(), "no-such-gym"))
	err := child.wait(t)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 127 || !strings.Contains(child.out.String(), "app.py: cannot run ") ||
		!strings.Contains(child.out.String(), "(set $"+EnvGymBinary+" to the Go server's path)") {
		t.Errorf("override to a missing binary: %v; output:\n%s", err, child.out.String())
	}

	// A program of the user's own (here a script that runs gymlens serve) is
	// exec'd the same way.
	script := filepath.Join(t.TempDir(), "my-env")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nexec "+strconv.Quote(bin)+" serve\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if code, out, errOut := runGym(t, "env", "scaffold", "--binary", script, "--type", contract.ServerTypeResources,
		"--impl", "string_match", "--out", root); code != 0 {
		t.Fatalf("scaffold --binary: exit %d\n%s%s", code, out, errOut)
	}
	child = launchAsUpstream(t, python, filepath.Join(root, contract.ServerTypeResources, "string_match"), dict, "string_match")
	if err := child.wait(t); err != nil {
		t.Fatalf("dry_run through --binary: %v, want exit 0; output:\n%s", err, child.out.String())
	}
}
