package orchestrator

// A server's process: how the fleet starts it under NeMo Gym's launch
// contract, signals and reaps it, and keeps its last lines of output.

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/gymconfig"
	"github.com/gymlens/gymlens/lens"
	"github.com/gymlens/gymlens/telemetry"
)

type child struct {
	spec    ServerSpec
	cmd     *exec.Cmd
	info    ServerInfo
	tail    *tailBuffer
	output  *childOutput
	done    chan struct{} // closed when the process has been reaped and its output drained
	waitErr error
	// up is set once the server answered; only then is its death an Exit.
	up bool
	// stoppedByUs is set once the fleet sent SIGTERM, so the exit is
	// expected.
	stoppedByUs bool
	// counted is set while the child counts in gym.servers.active: from
	// the end of Start until it is reaped.
	counted bool
	// reaped is set when Wait has returned.
	reaped bool
	// hung is set when the liveness watcher killed the child (or, for a
	// remote one, gave up on it): why.
	hung error
	// remote is set for a server on another host: cmd and output are nil
	// and the fleet ends it with ended, not a signal.
	remote bool
	// reports is set for a server on another host that asked the head
	// whether the fleet is stopping, and so will send its telemetry
	// account when it leaves; account is closed once it has (see
	// account.go).
	reports     bool
	account     chan struct{}
	accountOnce sync.Once
}

// failure is why the child ended, as reported: the liveness watcher's
// verdict when it killed the child, else Wait's error.
func (c *child) failure() error {
	if c.hung != nil {
		return c.hung
	}
	return c.waitErr
}

// command returns the argv and working directory of spec: `<gym> serve`
// in the orchestrator's directory for a built-in; the block's command in
// the config file's directory for an external server, a relative
// program path (one with a slash) resolved against that directory.
func (f *Fleet) command(spec ServerSpec) (argv []string, dir string) {
	if !spec.External() {
		return []string{f.opts.Binary, "serve"}, f.cwd
	}
	dir = spec.Dir
	if dir == "" {
		dir = f.cwd
	}
	argv = slices.Clone(spec.Command)
	if strings.Contains(argv[0], "/") && !filepath.IsAbs(argv[0]) {
		argv[0] = filepath.Join(dir, argv[0])
	}
	return argv, dir
}

// ServerTelemetryEnv is the telemetry environment the orchestrator gives
// the server called name on top of its own, whatever the user set: its own
// file in the run directory and the address its prometheus exporter
// serves on. `gymlens telemetry check --fleet` reads it to answer for a
// server.
func ServerTelemetryEnv(runDir, name, metricsAddr string) []string {
	return []string{
		lens.PrimaryPrefix + lens.KeyFilePath + "=" + filepath.Join(runDir, contract.RunTelemetryDir, contract.TelemetryFileName(name)),
		lens.PrimaryPrefix + lens.KeyPrometheusAddr + "=" + metricsAddr,
	}
}

func (f *Fleet) spawn(spec ServerSpec) (*child, error) {
	argv, dir := f.command(spec)
	metricsAddr, err := pickMetricsAddr(spec.MetricsAddr)
	if err != nil {
		return nil, fmt.Errorf("server %q: metrics_addr: %w", spec.Name, err)
	}
	logFile, err := os.OpenFile(filepath.Join(f.opts.RunDir, contract.RunLogsDir, contract.LogFileName(spec.Name)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, contract.RunFilePerm)
	if err != nil {
		return nil, fmt.Errorf("server %q: %w", spec.Name, err)
	}
	f.mu.Lock()
	dictYAML := string(f.dict.YAML())
	f.mu.Unlock()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), f.opts.ExtraEnv...)
	cmd.Env = append(cmd.Env, ServerTelemetryEnv(f.opts.RunDir, spec.Name, metricsAddr)...)
	cmd.Env = append(cmd.Env,
		// The launch contract: the whole dict (secrets included, hence the
		// environment rather than the world-readable command line) and
		// which instance of it this process is.
		gymconfig.EnvConfigDict+"="+dictYAML,
		gymconfig.EnvConfigPath+"="+spec.Name,
		// The head token, for a server that asks the head server.
		contract.EnvHeadToken+"="+f.headToken,
	)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	sink := &logSink{name: spec.Name, log: f.log, f: logFile}
	// The orchestrator owns the child's output pipes and drains them for
	// as long as the child holds them, whatever becomes of the log file:
	// a child must never block on, or die of, its own output.
	output, stdout, stderr, err := newChildOutput(sink)
	if err != nil {
		sink.close()
		return nil, fmt.Errorf("server %q: %w", spec.Name, err)
	}
	c := &child{spec: spec, cmd: cmd, tail: newTailBuffer(20), output: output, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	started := time.Now()
	if err := cmd.Start(); err != nil {
		output.closeAll()
		sink.close()
		return nil, fmt.Errorf("server %q: start %s: %w", spec.Name, argv[0], err)
	}
	output.start(c.tail)
	c.info = ServerInfo{Spec: spec, PID: cmd.Process.Pid, Started: started, Command: argv, Dir: dir, URL: serverURL(spec)}
	if exportsPrometheus(cmd.Env) {
		c.info.MetricsAddr = metricsAddr
	}
	f.mu.Lock()
	f.servers = append(f.servers, c)
	f.mu.Unlock()
	go f.reap(c)
	return c, nil
}

// exportsPrometheus reports whether a child with environment env serves
// /metrics: lens.Decide has it export metrics, prometheus among the
// exporters.
func exportsPrometheus(env []string) bool {
	lookup := func(key string) (string, bool) {
		for i := len(env) - 1; i >= 0; i-- { // the last one wins, as in exec
			if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
				return v, true
			}
		}
		return "", false
	}
	lc, err := lens.LoadConfig(lens.LoadOptions{Lookup: lookup, Groups: telemetry.GroupSet()})
	if err != nil {
		return false
	}
	d, err := lens.Decide(lc, lens.DecideOptions{Lookup: lookup})
	return err == nil && d.Export && d.HasSignal(lens.SignalMetrics) && lc.HasExporter(lens.ExporterPrometheus)
}

// reap waits for the child and, when the fleet did not ask it to stop,
// reports the death and lowers gym.servers.active.
func (f *Fleet) reap(c *child) {
	err := c.cmd.Wait()
	// Whatever the child wrote last is in the log and the tail before
	// anyone is told it is gone.
	c.output.finish(outputGrace)
	f.ended(c, err)
}

// signal sends sig to the child's process group (the child leads its own,
// see Setpgid), so whatever the server started goes with it: a process
// left behind would keep the server's output pipes open, and Wait, hence
// Stop, would wait for it.
func (c *child) signal(sig syscall.Signal) {
	if c.cmd == nil || c.cmd.Process == nil {
		return
	}
	if err := syscall.Kill(-c.cmd.Process.Pid, sig); err != nil {
		_ = c.cmd.Process.Signal(sig)
	}
}

// kill SIGKILLs c's process group and waits until c is reaped.
func (f *Fleet) kill(c *child) {
	f.mu.Lock()
	c.stoppedByUs = true
	f.mu.Unlock()
	select {
	case <-c.done:
		return
	default:
	}
	c.signal(syscall.SIGKILL)
	<-c.done
}

// tailBuffer keeps the last n lines written to it.
type tailBuffer struct {
	mu      sync.Mutex
	n       int
	lines   []string
	partial string
}

func newTailBuffer(n int) *tailBuffer { return &tailBuffer{n: n} }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.partial + string(p)
	parts := strings.Split(s, "\n")
	t.partial = parts[len(parts)-1]
	for _, l := range parts[:len(parts)-1] {
		t.lines = append(t.lines, l)
		if len(t.lines) > t.n {
			t.lines = t.lines[len(t.lines)-t.n:]
		}
	}
	return len(p), nil
}

// Lines returns the kept lines, the unfinished last one included.
func (t *tailBuffer) Lines() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := append([]string(nil), t.lines...)
	if t.partial != "" {
		out = append(out, t.partial)
	}
	return out
}

// diedOf reports whether a process's wait error says the signal sig ended
// it. A server that ends by the very signal it was sent to stop has
// stopped as asked, whichever way it reports that: uvicorn (NeMo Gym's
// Python servers) shuts down cleanly and then raises the signal again on
// itself, so the status is "terminated"; Ray, which those servers start
// when they start Ray (nemo-gym 0.6.0 does, outside upstream's launcher),
// installs a handler that exits with the signal's number
// (ray/_private/worker.py:1676 in ray 2.60.0), and a shell wrapper exits
// with 128 plus it.
func diedOf(err error, sig syscall.Signal) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	if !ok {
		return false
	}
	if ws.Signaled() {
		return ws.Signal() == sig
	}
	return ws.Exited() && (ws.ExitStatus() == int(sig) || ws.ExitStatus() == 128+int(sig))
}
