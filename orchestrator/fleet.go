package orchestrator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gymlens/gymlens/lens"
	"github.com/gymlens/gymlens/server"
	"github.com/gymlens/gymlens/telemetry"
	"github.com/gymlens/gymlens/telemetry/metrics"
)

// ReadyPrefix starts the one line a server prints on stdout once it
// listens; the rest of the line is a JSON Ready object.
const ReadyPrefix = "GYM_READY "

// ServerConfigEnv carries a server's implementation config (a JSON object)
// from the orchestrator to the child.
const ServerConfigEnv = "GYM_SERVER_CONFIG"

// Ready is what a server reports once it listens.
type Ready struct {
	Addr        string `json:"addr"`
	MetricsAddr string `json:"metrics_addr,omitempty"`
	PID         int    `json:"pid"`
}

// Options tune Start.
type Options struct {
	// Binary is the gym executable to run servers with; "" means this
	// process's own executable.
	Binary string
	// RunDir receives logs/<name>.log and, when the file exporter is on,
	// telemetry/<name>.jsonl per server. Required.
	RunDir string
	// HealthTimeout bounds each server's start-up; 0 means 30 s.
	HealthTimeout time.Duration
	// StopTimeout is how long servers get to drain after SIGTERM before
	// SIGKILL; 0 means 15 s.
	StopTimeout time.Duration
	// Logger receives the orchestrator's own logs; nil means slog.Default().
	Logger *slog.Logger
	// ExtraEnv is added to every child's environment.
	ExtraEnv []string
}

// ServerInfo describes one running server.
type ServerInfo struct {
	Spec        ServerSpec
	URL         string
	MetricsAddr string
	PID         int
}

// Exit reports a server that ended while the fleet was running.
type Exit struct {
	Name string
	PID  int
	Err  error // from exec.Cmd.Wait: the exit status or signal
}

// Fleet is a running set of server processes.
type Fleet struct {
	opts Options
	log  *slog.Logger

	mu       sync.Mutex
	servers  []*child
	active   int
	stopping bool
	exits    chan Exit
	stopOnce sync.Once
	stopErr  error
}

type child struct {
	spec    ServerSpec
	cmd     *exec.Cmd
	info    ServerInfo
	tail    *tailBuffer
	logFile *os.File
	done    chan struct{} // closed when the process has been reaped
	waitErr error
	// stoppedByUs is set once the fleet sent SIGTERM, so the exit is
	// expected.
	stoppedByUs bool
}

// Start validates cfg, spawns every server, waits until each is healthy and
// records gym.servers.active. On any start-up failure it stops what it had
// started and returns an error naming the server and its last stderr lines.
// ctx bounds start-up only; stop the fleet with Stop.
func Start(ctx context.Context, cfg Config, opts Options) (*Fleet, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opts.RunDir == "" {
		return nil, errors.New("orchestrator: a run directory is required")
	}
	if opts.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("orchestrator: find own executable: %w", err)
		}
		opts.Binary = exe
	}
	if opts.HealthTimeout <= 0 {
		opts.HealthTimeout = 30 * time.Second
	}
	if opts.StopTimeout <= 0 {
		opts.StopTimeout = 15 * time.Second
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	for _, d := range []string{"logs", "telemetry"} {
		if err := os.MkdirAll(filepath.Join(opts.RunDir, d), 0o755); err != nil {
			return nil, fmt.Errorf("orchestrator: %w", err)
		}
	}
	f := &Fleet{opts: opts, log: log, exits: make(chan Exit, len(cfg.Servers))}

	// Peers first, then the agents that call them.
	var first, agents []ServerSpec
	for _, s := range cfg.Servers {
		if s.Type == telemetry.ServerTypeAgent {
			agents = append(agents, s)
		} else {
			first = append(first, s)
		}
	}
	for _, wave := range [][]ServerSpec{first, agents} {
		if err := f.startWave(ctx, wave); err != nil {
			stopCtx, cancel := context.WithTimeout(context.Background(), opts.StopTimeout+5*time.Second)
			_ = f.Stop(stopCtx)
			cancel()
			return nil, err
		}
	}
	f.mu.Lock()
	f.active = len(f.servers)
	n := f.active
	f.mu.Unlock()
	f.recordActive(n)
	// Export the start-up count now rather than at the next interval, so a
	// short run still shows it.
	if err := telemetry.Get().ForceFlush(ctx); err != nil {
		log.Debug("telemetry flush after start-up", "err", err)
	}
	log.Info("fleet started", "servers", n)
	return f, nil
}

func (f *Fleet) startWave(ctx context.Context, specs []ServerSpec) error {
	errs := make([]error, len(specs))
	var wg sync.WaitGroup
	for i, spec := range specs {
		wg.Go(func() { errs[i] = f.startOne(ctx, spec) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (f *Fleet) startOne(ctx context.Context, spec ServerSpec) error {
	args := []string{"serve", spec.Type, "--name", spec.Name, "--impl", spec.Impl}
	if spec.Addr != "" {
		args = append(args, "--addr", spec.Addr)
	}
	// Always set, empty when the spec has no config, so a value in the
	// orchestrator's own environment never reaches a server by accident.
	configEnv := []string{ServerConfigEnv + "="}
	if len(spec.Config) > 0 {
		b, err := json.Marshal(spec.Config)
		if err != nil {
			return fmt.Errorf("server %q: config: %w", spec.Name, err)
		}
		// Through the environment rather than the command line: a config
		// may hold an API key, and command lines are world-readable.
		configEnv = append(configEnv, ServerConfigEnv+"="+string(b))
	}
	if spec.Type == telemetry.ServerTypeAgent {
		args = append(args, "--model-url", f.URL(spec.ModelServer), "--resources-url", f.URL(spec.ResourcesServer))
	}
	logFile, err := os.OpenFile(filepath.Join(f.opts.RunDir, "logs", spec.Name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("server %q: %w", spec.Name, err)
	}
	cmd := exec.Command(f.opts.Binary, args...)
	cmd.Env = append(os.Environ(), f.opts.ExtraEnv...)
	cmd.Env = append(cmd.Env, f.childTelemetryEnv(spec)...)
	cmd.Env = append(cmd.Env, configEnv...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	// A grandchild that escaped the process group could hold the output
	// pipes open; stop waiting for them this long after the child exits.
	cmd.WaitDelay = 5 * time.Second
	c := &child{spec: spec, cmd: cmd, tail: newTailBuffer(20), logFile: logFile, done: make(chan struct{})}
	readyc := make(chan Ready, 1)
	cmd.Stderr = io.MultiWriter(logFile, c.tail)
	// exec copies stdout through this writer and Wait returns only after
	// the copy is done, so no line is lost when the process ends.
	cmd.Stdout = &stdoutWriter{log: logFile, ready: readyc}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("server %q: start %s: %w", spec.Name, f.opts.Binary, err)
	}
	c.info = ServerInfo{Spec: spec, PID: cmd.Process.Pid}
	f.mu.Lock()
	f.servers = append(f.servers, c)
	f.mu.Unlock()

	go f.reap(c)

	timeout := time.NewTimer(f.opts.HealthTimeout)
	defer timeout.Stop()
	var ready Ready
	select {
	case ready = <-readyc:
	case <-c.done:
		return f.startError(c, fmt.Errorf("exited during start-up: %v", c.waitErr))
	case <-timeout.C:
		return f.startError(c, fmt.Errorf("no ready line within %s", f.opts.HealthTimeout))
	case <-ctx.Done():
		return f.startError(c, ctx.Err())
	}
	f.mu.Lock()
	c.info.URL = "http://" + ready.Addr
	c.info.MetricsAddr = ready.MetricsAddr
	f.mu.Unlock()
	if err := waitHealthy(ctx, c, timeout.C); err != nil {
		return f.startError(c, err)
	}
	f.log.Info("server up", "server", spec.Name, "type", spec.Type, "url", c.info.URL, "pid", c.info.PID)
	return nil
}

// childTelemetryEnv gives each process a telemetry file of its own (files
// are never shared between processes) and its prometheus endpoint address:
// the spec's metrics_addr, or a free loopback port, so none collide.
func (f *Fleet) childTelemetryEnv(spec ServerSpec) []string {
	metrics := spec.MetricsAddr
	if metrics == "" {
		metrics = "127.0.0.1:0"
	}
	return []string{
		lens.PrimaryPrefix + lens.KeyFilePath + "=" + filepath.Join(f.opts.RunDir, "telemetry", spec.Name+".jsonl"),
		lens.PrimaryPrefix + lens.KeyPrometheusAddr + "=" + metrics,
	}
}

func (f *Fleet) startError(c *child, err error) error {
	lines := c.tail.Lines()
	msg := fmt.Sprintf("server %q failed to start: %v", c.spec.Name, err)
	if len(lines) > 0 {
		msg += "\n  last stderr lines:\n    " + strings.Join(lines, "\n    ")
	}
	return errors.New(msg)
}

func waitHealthy(ctx context.Context, c *child, timeout <-chan time.Time) error {
	client := &http.Client{Timeout: 2 * time.Second}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.info.URL+server.HealthPath, nil)
		res, err := client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("health answered %d", res.StatusCode)
		}
		select {
		case <-tick.C:
		case <-c.done:
			return fmt.Errorf("exited before it was healthy: %v", c.waitErr)
		case <-timeout:
			return fmt.Errorf("not healthy in time: %v", err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// stdoutWriter forwards a child's stdout to its log, line by line, and
// picks out the ready line.
type stdoutWriter struct {
	log     io.Writer
	ready   chan<- Ready
	sent    bool
	partial []byte
}

func (w *stdoutWriter) Write(p []byte) (int, error) {
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		line := w.partial[:i+1]
		if !w.sent && bytes.HasPrefix(line, []byte(ReadyPrefix)) {
			var rd Ready
			if json.Unmarshal(bytes.TrimPrefix(line, []byte(ReadyPrefix)), &rd) == nil {
				w.ready <- rd
				w.sent = true
				w.partial = w.partial[i+1:]
				continue
			}
		}
		_, _ = w.log.Write(line)
		w.partial = w.partial[i+1:]
	}
	if len(w.partial) > 64<<10 { // an endless line: pass it on as it is
		_, _ = w.log.Write(w.partial)
		w.partial = w.partial[:0]
	}
	return len(p), nil
}

// reap waits for the child and, when the fleet did not ask it to stop,
// reports the death and lowers gym.servers.active.
func (f *Fleet) reap(c *child) {
	err := c.cmd.Wait()
	f.mu.Lock()
	c.waitErr = err
	expected := c.stoppedByUs || f.stopping
	wasActive := f.active > 0 && !expected
	if wasActive {
		f.active--
	}
	n := f.active
	f.mu.Unlock()
	close(c.done)
	c.logFile.Close()
	if expected {
		return
	}
	status := "exit status 0"
	if err != nil {
		status = err.Error()
	}
	f.log.Error("server died", "server", c.spec.Name, "pid", c.info.PID, "status", status)
	if wasActive {
		f.recordActive(n)
	}
	f.exits <- Exit{Name: c.spec.Name, PID: c.info.PID, Err: err}
}

func (f *Fleet) recordActive(n int) {
	if err := metrics.RecordActiveServers(n); err != nil && !errors.Is(err, metrics.ErrNotOrchestrator) {
		f.log.Debug("gym.servers.active not recorded", "err", err)
	}
}

// Exits delivers servers that died while the fleet ran.
func (f *Fleet) Exits() <-chan Exit { return f.exits }

// Active returns how many servers are running.
func (f *Fleet) Active() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.active
}

// URL returns the base URL of the named server, or "" when unknown.
func (f *Fleet) URL(name string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.servers {
		if c.spec.Name == name {
			return c.info.URL
		}
	}
	return ""
}

// Servers describes every server started, in start order.
func (f *Fleet) Servers() []ServerInfo {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]ServerInfo, len(f.servers))
	for i, c := range f.servers {
		out[i] = c.info
	}
	return out
}

// AgentURL returns the URL of the first agent server.
func (f *Fleet) AgentURL() string {
	for _, s := range f.Servers() {
		if s.Spec.Type == telemetry.ServerTypeAgent {
			return s.URL
		}
	}
	return ""
}

// AgentURLs maps each agent server's name to its URL.
func (f *Fleet) AgentURLs() map[string]string {
	out := map[string]string{}
	for _, s := range f.Servers() {
		if s.Spec.Type == telemetry.ServerTypeAgent {
			out[s.Spec.Name] = s.URL
		}
	}
	return out
}

// Stop sends SIGTERM to every server, waits for them to drain and flush
// (up to the stop timeout, or ctx), SIGKILLs the rest and records
// gym.servers.active = 0. It returns an error naming every server that
// died on its own, failed to stop cleanly or had to be killed. Stop is
// idempotent.
func (f *Fleet) Stop(ctx context.Context) error {
	f.stopOnce.Do(func() { f.stopErr = f.stop(ctx) })
	return f.stopErr
}

func (f *Fleet) stop(ctx context.Context) error {
	f.mu.Lock()
	f.stopping = true
	servers := append([]*child(nil), f.servers...)
	f.mu.Unlock()

	var errs []error
	for _, c := range servers {
		select {
		case <-c.done:
			// Already gone: the reaper reported it unless it was ours.
			if !c.stoppedByUs && c.waitErr != nil {
				errs = append(errs, fmt.Errorf("server %q had died: %v", c.spec.Name, c.waitErr))
			}
			continue
		default:
		}
		f.mu.Lock()
		c.stoppedByUs = true
		f.mu.Unlock()
		c.signal(syscall.SIGTERM)
	}
	// One deadline for every server: a closed Done channel stays ready,
	// where a timer's channel fires once, for the first server only.
	drain, cancel := context.WithTimeout(ctx, f.opts.StopTimeout)
	defer cancel()
	for _, c := range servers {
		select {
		case <-c.done:
		case <-drain.Done():
		}
		select {
		case <-c.done:
			if c.stoppedByUs && c.waitErr != nil {
				errs = append(errs, fmt.Errorf("server %q stopped with %v", c.spec.Name, c.waitErr))
			}
		default:
			c.signal(syscall.SIGKILL)
			<-c.done
			errs = append(errs, fmt.Errorf("server %q did not stop within %s: killed", c.spec.Name, f.opts.StopTimeout))
		}
	}
	f.mu.Lock()
	f.active = 0
	f.mu.Unlock()
	f.recordActive(0)
	return errors.Join(errs...)
}

// signal sends sig to the child's process group (the child leads its own,
// see Setpgid), so whatever the server started goes with it: a process
// left behind would keep the server's output pipes open, and Wait, hence
// Stop, would wait for it.
func (c *child) signal(sig syscall.Signal) {
	if err := syscall.Kill(-c.cmd.Process.Pid, sig); err != nil {
		_ = c.cmd.Process.Signal(sig)
	}
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
