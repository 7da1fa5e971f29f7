package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/gymconfig"
	"github.com/gymlens/gymlens/lens"
	"github.com/gymlens/gymlens/live"
	"github.com/gymlens/gymlens/telemetry"
	"github.com/gymlens/gymlens/telemetry/metrics"
)

// ReadyPrefix starts the one line `gymlens serve` prints on stdout once it
// listens; the rest of the line is a JSON Ready object. It is for people
// and scripts: the orchestrator waits for GET / to answer instead.
const ReadyPrefix = "GYM_READY "

// Ready is what `gymlens serve` reports once it listens.
type Ready struct {
	Addr        string `json:"addr"`
	MetricsAddr string `json:"metrics_addr,omitempty"`
	PID         int    `json:"pid"`
}

// maxPortRetries is how many times a server whose assigned port was taken
// between the orchestrator's probe and the child's bind is given a new one.
const maxPortRetries = 3

// pollInterval is how often a starting server's GET / is tried.
const pollInterval = 50 * time.Millisecond

// Liveness defaults: once the fleet is up, every server's GET / is probed
// every DefaultLivenessInterval (counted from the end of the previous
// probe), each probe waiting up to DefaultLivenessTimeout for an answer
// (any HTTP status counts, as for readiness). A server whose probes have
// gone unanswered for its budget (DefaultLivenessBudget unless the config
// or Options give another) is declared dead: killed and reported on Exits,
// within budget + LivenessInterval + LivenessTimeout, 64 s with these
// defaults. The budget outlasts a Python server that blocks its event
// loop for 30 s in one request (it accepts connections meanwhile, but
// answers none); upstream's launcher, once its servers are up, only
// checks that their processes still run (cli/env.py:761-765, every 60 s).
// A server that refuses the connection DefaultLivenessFailures times in a
// row (nothing listens on its port any more) is declared dead at once,
// budget or not.
//
// A server on another host is probed the same way; one that stops
// answering cannot be killed from here, so it is dropped from the fleet
// (and from gym.servers.active) and reported on Exits within the same
// bounds.
const (
	DefaultLivenessInterval = 2 * time.Second
	DefaultLivenessTimeout  = 2 * time.Second
	DefaultLivenessBudget   = 60 * time.Second
	DefaultLivenessFailures = 3
)

// DefaultJoinTimeout is how long Start waits, by default, for a server on
// another host to join.
const DefaultJoinTimeout = 5 * time.Minute

// activeFlushTimeout bounds the export forced after each change of
// gym.servers.active, so a slow collector cannot hold the fleet up.
const activeFlushTimeout = 2 * time.Second

// ErrUnresponsive is wrapped by the Exit.Err of a server the fleet killed
// because it stopped answering its liveness probes.
var ErrUnresponsive = errors.New("stopped answering GET /")

// Options tune Start.
type Options struct {
	// Binary is the gym executable to run built-in servers with; "" means
	// this process's own executable.
	Binary string
	// RunDir receives logs/<name>.log and, when the file exporter is on,
	// telemetry/<name>.jsonl per server. Required.
	RunDir string
	// HealthTimeout bounds each server's start-up; 0 means 30 s.
	HealthTimeout time.Duration
	// JoinTimeout bounds the wait for a server on another host to answer
	// (someone has to start it there with `gymlens serve --head`); 0 means
	// DefaultJoinTimeout.
	JoinTimeout time.Duration
	// StopTimeout is how long servers get to drain and flush their
	// telemetry after SIGTERM before SIGKILL; 0 means
	// contract.ServerStopTimeout (25 s: a server's own drain and flush
	// bounds plus a margin).
	StopTimeout time.Duration
	// LivenessInterval is the pause between two liveness probes (GET /)
	// of a running server; 0 means DefaultLivenessInterval, a negative
	// value turns liveness probing off.
	LivenessInterval time.Duration
	// LivenessTimeout bounds each liveness probe; 0 or less means
	// DefaultLivenessTimeout.
	LivenessTimeout time.Duration
	// LivenessBudget is how long a server's probes may go unanswered
	// before it is killed and reported on Exits, for servers whose config
	// gives none (ServerSpec.LivenessBudget); 0 or less means
	// DefaultLivenessBudget.
	LivenessBudget time.Duration
	// LivenessFailures is how many probes in a row must find the
	// connection refused before the server is declared dead, budget or
	// not; 0 or less means DefaultLivenessFailures.
	LivenessFailures int
	// Logger receives the orchestrator's own logs; nil means slog.Default().
	Logger *slog.Logger
	// ExtraEnv is added to every child's environment.
	ExtraEnv []string
	// HeadToken is the bearer token the head server asks for (see
	// headGuard); "" means a fresh random one. Either way it is written
	// to the run directory's head_token and handed to every child as
	// contract.EnvHeadToken.
	HeadToken string
}

// ServerInfo describes one running server.
type ServerInfo struct {
	// Spec is the server's instance, host and port filled in.
	Spec ServerSpec
	// URL is http://host:port.
	URL string
	// MetricsAddr is where the child's prometheus exporter serves
	// /metrics; "" when the child does not export to prometheus.
	MetricsAddr string
	// PID is the child's process id.
	PID int
	// Started is when the child was spawned.
	Started time.Time
	// Command is the argv the child runs, and Dir its working directory.
	Command []string
	Dir     string
	// Remote is set for a server on another host (its block's host is
	// not an address of this machine): the fleet did not start it, it
	// joined with `gymlens serve --head`, and PID, Command and Dir are empty.
	Remote bool
}

// Exit reports a server that ended while the fleet was running.
type Exit struct {
	Name string
	PID  int
	// Err is exec.Cmd.Wait's error (the exit status or signal), or, for a
	// server the fleet killed (or, on another host, dropped) because it
	// stopped answering, an error wrapping ErrUnresponsive.
	Err error
	// URL is the server's base URL, and Remote is set when it ran on
	// another host (PID is then 0).
	URL    string
	Remote bool
}

// Where names the server's process for a message: "pid N", or "on another
// host at URL".
func (e Exit) Where() string {
	if e.Remote {
		return "on another host at " + e.URL
	}
	return "pid " + strconv.Itoa(e.PID)
}

// Fleet is a running set of server processes and the head server.
type Fleet struct {
	opts Options
	log  *slog.Logger
	cwd  string
	head *headServer
	// headToken is the head server's bearer token (Options.HeadToken or
	// a generated one).
	headToken string
	// board answers the head's status API (see Board).
	board *live.Board

	mu       sync.Mutex
	dict     *gymconfig.Dict // the fleet's dict, hosts and ports filled in
	rnd      *rand.Rand
	assigned map[string]bool // instances whose port Defaults chose
	servers  []*child
	active   int
	stopping bool
	// stopFlushBy ends every telemetry flush of the stop: Stop's start
	// plus the export timeout.
	stopFlushBy time.Time
	exits       chan Exit
	stopOnce    sync.Once
	stopErr     error

	// quit is closed when Stop begins: the liveness watchers (watchers)
	// end.
	quit     chan struct{}
	watchers sync.WaitGroup
	probe    *http.Client
	// activeCh carries every change of gym.servers.active to the
	// recorder goroutine, which records and exports each in turn;
	// recorderDone is closed when it has ended. Both are nil until Start
	// first records the count.
	activeCh     chan activeChange
	recorderDone chan struct{}
}

// activeChange is one value of gym.servers.active; recorded is closed once
// it has been recorded (its export may still be under way).
type activeChange struct {
	n        int
	recorded chan struct{}
}

// Start fills the config dict's defaults (hosts, ports, head server),
// serves the head API, spawns every server under NeMo Gym's launch
// contract, waits until each answers and records gym.servers.active. On
// any start-up failure it stops what it had started and returns an error
// naming the server and its last stderr lines. ctx bounds start-up only;
// stop the fleet with Stop. A config with dry_run: true is refused before
// anything starts: its servers exit instead of serving, so run DryRun.
func Start(ctx context.Context, cfg Config, opts Options) (*Fleet, error) {
	if cfg.DryRun() {
		return nil, fmt.Errorf("orchestrator: the config sets %s: true, so its servers exit instead of serving; use DryRun to check them", gymconfig.KeyDryRun)
	}
	f, err := newFleet(cfg, opts)
	if err != nil {
		return nil, err
	}
	specs, err := f.filledSpecs(cfg.Servers)
	if err != nil {
		f.abort()
		return nil, err
	}
	// Peers first, then the agents that call them, then the environment
	// servers that call the agents.
	var first, agents, envs []ServerSpec
	for _, s := range specs {
		switch s.Type {
		case contract.ServerTypeAgent:
			agents = append(agents, s)
		case contract.ServerTypeEnvironment:
			envs = append(envs, s)
		default:
			first = append(first, s)
		}
	}
	for _, wave := range [][]ServerSpec{first, agents, envs} {
		if err := f.startWave(ctx, wave); err != nil {
			f.abort()
			return nil, err
		}
	}
	f.mu.Lock()
	// Servers that died during the agents' wave were reported already and
	// do not count.
	for _, c := range f.servers {
		if !c.reaped {
			c.counted = true
			f.active++
		}
	}
	n := f.active
	f.activeCh = make(chan activeChange, len(f.servers)+2)
	f.recorderDone = make(chan struct{})
	go f.recordLoop()
	f.mu.Unlock()
	// The recorder exports the count at once (in the background), so a
	// short run still shows it.
	f.setActive(n)
	f.startWatchers()
	f.log.Info("fleet started", "servers", n, "head_server", f.HeadURL(),
		"head_token_file", filepath.Join(f.opts.RunDir, contract.RunHeadTokenFile))
	return f, nil
}

// newFleet checks cfg and opts, fills in opts' defaults, creates the run
// directory's logs/ and telemetry/, binds and serves the head server and
// fills the dict's hosts and ports: everything Start and DryRun share
// before the first child is spawned. On error nothing is left running.
func newFleet(cfg Config, opts Options) (*Fleet, error) {
	if cfg.Dict == nil || len(cfg.Servers) == 0 {
		return nil, errors.New("orchestrator: no servers configured (use ParseConfig, LoadConfig or DefaultConfig)")
	}
	if opts.RunDir == "" {
		return nil, errors.New("orchestrator: a run directory is required")
	}
	runDir, err := filepath.Abs(opts.RunDir)
	if err != nil {
		return nil, fmt.Errorf("orchestrator: %w", err)
	}
	opts.RunDir = runDir // children may run elsewhere
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
	if opts.JoinTimeout <= 0 {
		opts.JoinTimeout = DefaultJoinTimeout
	}
	if opts.StopTimeout <= 0 {
		opts.StopTimeout = contract.ServerStopTimeout
	}
	if opts.LivenessInterval == 0 {
		opts.LivenessInterval = DefaultLivenessInterval
	}
	if opts.LivenessTimeout <= 0 {
		opts.LivenessTimeout = DefaultLivenessTimeout
	}
	if opts.LivenessBudget <= 0 {
		opts.LivenessBudget = DefaultLivenessBudget
	}
	if opts.LivenessFailures <= 0 {
		opts.LivenessFailures = DefaultLivenessFailures
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	cwd, err := os.Getwd()
	if err != nil {
		return nil, fmt.Errorf("orchestrator: %w", err)
	}
	// A copy: the caller's Config stays as it was, startable again.
	d, err := gymconfig.Parse(cfg.Dict.YAML())
	if err != nil {
		return nil, fmt.Errorf("orchestrator: %w", err)
	}
	open, err := cfg.HeadOpen()
	if err != nil {
		return nil, fmt.Errorf("orchestrator: %w", err)
	}
	token := opts.HeadToken
	if token == "" {
		if token, err = NewHeadToken(); err != nil {
			return nil, fmt.Errorf("orchestrator: %w", err)
		}
	} else if err := CheckHeadToken(token); err != nil {
		return nil, fmt.Errorf("orchestrator: %w", err)
	}
	for _, sub := range []string{contract.RunLogsDir, contract.RunTelemetryDir} {
		if err := os.MkdirAll(filepath.Join(opts.RunDir, sub), contract.RunDirPerm); err != nil {
			return nil, fmt.Errorf("orchestrator: %w", err)
		}
	}
	// A full disk does not stop the fleet (the token is in memory; its
	// own servers get it in their environment), but the user is told
	// where else to find it.
	if err := writeHeadToken(opts.RunDir, token); err != nil {
		log.Warn("the head token could not be written to the run directory; servers on other hosts need it through "+contract.EnvHeadToken, "err", err)
	}
	f := &Fleet{
		opts: opts, log: log, cwd: cwd, dict: d, headToken: token,
		rnd:   rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
		exits: make(chan Exit, len(cfg.Servers)),
		quit:  make(chan struct{}),
		board: &live.Board{},
	}
	ln, err := listenHead(cfg, log)
	if err != nil {
		return nil, err
	}
	// The configured host (a name such as localhost stays a name) and the
	// port actually bound.
	headHost, _ := cfg.resolved.HeadServer()
	_, headPortText, _ := net.SplitHostPort(ln.Addr().String())
	headPort, _ := strconv.Atoi(headPortText)
	if err := d.Set([]string{gymconfig.KeyHeadServer}, map[string]any{"host": headHost, "port": headPort}); err != nil {
		ln.Close()
		return nil, fmt.Errorf("orchestrator: %w", err)
	}
	assigned, err := d.Defaults(os.LookupEnv, f.rnd)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("orchestrator: fill in hosts and ports: %w", err)
	}
	// The rest of what upstream's parser writes: its Python servers read
	// some of these keys unguarded (dry_run).
	if err := d.LauncherDefaults(os.LookupEnv, gymconfig.LauncherSettings{WorkingDir: cwd}); err != nil {
		ln.Close()
		return nil, fmt.Errorf("orchestrator: %w", err)
	}
	f.assigned = map[string]bool{}
	for _, name := range assigned {
		f.assigned[name] = true
	}
	if open && !isLoopbackHost(headHost) {
		log.Warn("the head server's NeMo Gym routes answer without the head token: anyone who can reach it reads the config dict, secrets included",
			"head_server", net.JoinHostPort(headHost, headPortText), "because", HeadOpenKey+": true")
	}
	f.head = serveHead(ln, headHost, headPort, f, newHeadGuard(token, headHost, open))
	return f, nil
}

// StopDeadline is how long a caller should give Stop: the servers'
// StopTimeout and time to reap and report the ones that had to be killed.
func (f *Fleet) StopDeadline() time.Duration { return f.opts.StopTimeout + 5*time.Second }

// abort stops a fleet whose start failed.
func (f *Fleet) abort() {
	stopCtx, cancel := context.WithTimeout(context.Background(), f.StopDeadline())
	_ = f.Stop(stopCtx)
	cancel()
}

// listenHead binds the head server: head_server's port when the config
// gives one (0: any free port), else DefaultHeadPort, falling back to a
// free port with a warning when that one is taken (a second fleet on the
// host, say).
func listenHead(cfg Config, log *slog.Logger) (net.Listener, error) {
	host, port := cfg.resolved.HeadServer()
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		return ln, nil
	}
	if headPortGiven(cfg.Dict) {
		return nil, fmt.Errorf("%s: %s: %w", gymconfig.KeyHeadServer, addr, err)
	}
	ln, err2 := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err2 != nil {
		return nil, fmt.Errorf("%s: %s: %w (and no free port: %v)", gymconfig.KeyHeadServer, addr, err, err2)
	}
	log.Warn("head server port taken, using a free one; set head_server: {port: N} to choose", "wanted", addr, "addr", ln.Addr().String())
	return ln, nil
}

// filledSpecs returns specs with host and port from the filled-in dict.
func (f *Fleet) filledSpecs(specs []ServerSpec) ([]ServerSpec, error) {
	f.mu.Lock()
	gc, err := f.dict.Resolve(os.LookupEnv)
	f.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("orchestrator: %w", err)
	}
	out := make([]ServerSpec, len(specs))
	for i, s := range specs {
		inst, ok := gc.Instance(s.Name)
		if !ok {
			return nil, fmt.Errorf("orchestrator: instance %q missing after defaults", s.Name)
		}
		s.Host, s.Port = inst.Host(), inst.Port()
		out[i] = s
	}
	return out, nil
}

func (f *Fleet) startWave(ctx context.Context, specs []ServerSpec) error {
	errs := make([]error, len(specs))
	var wg sync.WaitGroup
	for i, spec := range specs {
		if spec.remote {
			wg.Go(func() { errs[i] = f.joinRemote(ctx, spec) })
			continue
		}
		wg.Go(func() { errs[i] = f.startOne(ctx, spec) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// startOne spawns one server and waits until it answers; a server whose
// auto-assigned port was taken meanwhile is given another one, up to
// maxPortRetries times.
func (f *Fleet) startOne(ctx context.Context, spec ServerSpec) error {
	for attempt := 0; ; attempt++ {
		c, err := f.spawn(spec)
		if err != nil {
			return err
		}
		err = f.waitReady(ctx, c)
		if err == nil {
			f.mu.Lock()
			c.up = true
			f.mu.Unlock()
			f.log.Info("server up", "server", spec.Name, "type", spec.Type, "impl", spec.Impl, "url", c.info.URL, "pid", c.info.PID)
			return nil
		}
		if attempt >= maxPortRetries || !f.assigned[spec.Name] || !exitedOnBusyPort(c) {
			return f.startError(c, err)
		}
		f.forget(c)
		f.mu.Lock()
		port, rerr := f.dict.Reassign(os.LookupEnv, f.rnd, spec.Name)
		f.mu.Unlock()
		if rerr != nil {
			return f.startError(c, fmt.Errorf("%v; no other port: %v", err, rerr))
		}
		f.log.Warn("server's port was taken before it could bind; trying another", "server", spec.Name, "port", spec.Port, "new_port", port)
		spec.Port = port
	}
}

// exitedOnBusyPort reports whether c ended with "address already in use".
func exitedOnBusyPort(c *child) bool {
	select {
	case <-c.done:
	default:
		return false
	}
	for _, l := range c.tail.Lines() {
		if strings.Contains(l, "address already in use") {
			return true
		}
	}
	return false
}

// forget drops a child that failed to start (and was reaped) from the
// fleet.
func (f *Fleet) forget(c *child) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.servers = slices.DeleteFunc(f.servers, func(x *child) bool { return x == c })
}

func (f *Fleet) startError(c *child, err error) error {
	lines := c.tail.Lines()
	msg := fmt.Sprintf("server %q failed to start: %v", c.spec.Name, err)
	if len(lines) > 0 {
		msg += "\n  last stderr lines:\n    " + strings.Join(lines, "\n    ")
	}
	return errors.New(msg)
}

// waitReady polls GET http://host:port/ until it answers with any HTTP
// status (NeMo Gym's rule), the process exits, HealthTimeout passes or ctx
// ends.
func (f *Fleet) waitReady(ctx context.Context, c *child) error {
	return f.waitAnswer(ctx, c, f.opts.HealthTimeout)
}

// waitAnswer polls GET http://host:port/ of c until it answers with any
// HTTP status, c ends, limit passes or ctx ends.
func (f *Fleet) waitAnswer(ctx context.Context, c *child, limit time.Duration) error {
	client := &http.Client{Timeout: 2 * time.Second}
	defer client.CloseIdleConnections()
	timeout := time.NewTimer(limit)
	defer timeout.Stop()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		select {
		case <-c.done:
			return fmt.Errorf("exited during start-up: %v", c.waitErr)
		default:
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.info.URL+"/", nil)
		res, err := client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
			res.Body.Close()
			return nil
		}
		select {
		case <-tick.C:
		case <-c.done:
			return fmt.Errorf("exited during start-up: %v", c.waitErr)
		case <-timeout.C:
			return fmt.Errorf("GET %s/ not answered within %s: %v", c.info.URL, limit, err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// ended takes c out of the fleet: its process was reaped with err, or,
// for a server on another host, the fleet gave up on it or stopped. It
// lowers gym.servers.active when c counted and reports c on Exits unless
// its end was expected. A second call does nothing.
func (f *Fleet) ended(c *child, err error) {
	f.mu.Lock()
	if c.reaped {
		f.mu.Unlock()
		return
	}
	c.waitErr = err
	c.reaped = true
	// A server that never came up is Start's to report, not an Exit.
	expected := c.stoppedByUs || f.stopping || !c.up
	counted := c.counted
	c.counted = false
	if counted {
		f.active--
	}
	n := f.active
	hung := c.hung
	f.mu.Unlock()
	// Every change of the count is recorded, an orderly stop's included,
	// before anyone hears of the exit.
	if counted {
		f.setActive(n)
	}
	close(c.done)
	if expected {
		return
	}
	status := "exit status 0"
	if err != nil {
		status = err.Error()
	}
	switch {
	case hung != nil && c.remote:
		f.log.Error("server on another host stopped answering; it is out of the fleet", "server", c.spec.Name, "url", c.info.URL, "reason", hung)
	case hung != nil:
		f.log.Error("server killed: it stopped answering", "server", c.spec.Name, "pid", c.info.PID, "reason", hung, "status", status)
	default:
		f.log.Error("server died", "server", c.spec.Name, "pid", c.info.PID, "status", status)
	}
	f.exits <- Exit{Name: c.spec.Name, PID: c.info.PID, Err: c.failure(), URL: c.info.URL, Remote: c.remote}
}

// setActive hands the recorder a new value of gym.servers.active and waits
// until it has been recorded (not exported). A no-op before Start records
// the first count or after Stop ended the recorder.
func (f *Fleet) setActive(n int) {
	f.mu.Lock()
	ch := f.activeCh
	f.mu.Unlock()
	if ch == nil {
		return
	}
	change := activeChange{n: n, recorded: make(chan struct{})}
	ch <- change
	<-change.recorded
}

// recordLoop records each value of gym.servers.active in turn and forces
// an export after each one: the metric is a gauge, so a value replaced
// before the next periodic export would never be seen (a death and the
// stop that follows it would read 3, 0 instead of 3, 2, 1, 0). Each
// export is bounded by activeFlushTimeout; the next value is recorded
// after it.
func (f *Fleet) recordLoop() {
	defer close(f.recorderDone)
	for ch := range f.activeCh {
		f.recordActive(ch.n)
		close(ch.recorded)
		// Each count is flushed at once, bounded; while the fleet stops,
		// every flush also ends with the stop's one export timeout, so a
		// collector that never answers costs the stop that once, not once
		// per server (what is not sent then is counted lost).
		deadline := time.Now().Add(activeFlushTimeout)
		f.mu.Lock()
		if f.stopping && f.stopFlushBy.Before(deadline) {
			deadline = f.stopFlushBy
		}
		f.mu.Unlock()
		if time.Until(deadline) <= 0 {
			continue
		}
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		if err := telemetry.Get().ForceFlush(ctx); err != nil {
			f.log.Debug("telemetry flush after a change of gym.servers.active", "err", err)
		}
		cancel()
	}
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

// HeadURL returns the head server's base URL (http://host:port), where
// NeMo Gym clients read the fleet's config dict and server list.
func (f *Fleet) HeadURL() string {
	if f.head == nil {
		return ""
	}
	return f.head.url
}

// ConfigYAML returns the fleet's config dict as the children got it:
// hosts, ports and head server filled in, interpolations unresolved.
func (f *Fleet) ConfigYAML() []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dict.YAML()
}

// Redacted returns the fleet's resolved config dict, hosts and ports
// filled in, with every secret replaced (see Config.Redacted).
func (f *Fleet) Redacted() (map[string]any, error) {
	f.mu.Lock()
	gc, err := f.dict.Resolve(os.LookupEnv)
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return gc.Redacted(), nil
}

// AgentURL returns the URL of the first agent server.
func (f *Fleet) AgentURL() string {
	for _, s := range f.Servers() {
		if s.Spec.Type == contract.ServerTypeAgent {
			return s.URL
		}
	}
	return ""
}

// AgentURLs maps each agent server's name to its URL.
func (f *Fleet) AgentURLs() map[string]string {
	out := map[string]string{}
	for _, s := range f.Servers() {
		if s.Spec.Type == contract.ServerTypeAgent {
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
	budget := telemetry.Get().Config().OTLPTimeout
	if budget <= 0 {
		budget = lens.DefaultOTLPTimeout
	}
	f.mu.Lock()
	f.stopping = true
	f.stopFlushBy = time.Now().Add(budget)
	servers := append([]*child(nil), f.servers...)
	f.mu.Unlock()
	// No liveness verdict while the servers drain.
	close(f.quit)
	f.watchers.Wait()
	if f.probe != nil {
		f.probe.CloseIdleConnections()
	}

	var errs []error
	for _, c := range servers {
		select {
		case <-c.done:
			// Already gone: the reaper reported it unless it was ours.
			if !c.stoppedByUs && c.failure() != nil {
				errs = append(errs, fmt.Errorf("server %q had died: %v", c.spec.Name, c.failure()))
			}
			continue
		default:
		}
		f.mu.Lock()
		c.stoppedByUs = true
		f.mu.Unlock()
		if c.remote {
			// Not ours to stop: it leaves when the head says the fleet
			// is stopping (HeadStoppingPath), or once the head is gone.
			continue
		}
		c.signal(syscall.SIGTERM)
	}
	// One deadline for every server: a closed Done channel stays ready,
	// where a timer's channel fires once, for the first server only.
	drain, cancel := context.WithTimeout(ctx, f.opts.StopTimeout)
	defer cancel()
	// Servers on other hosts flush as these do, and hand their accounts
	// in meanwhile.
	f.awaitAccounts(drain, servers)
	for _, c := range servers {
		if c.remote {
			f.ended(c, nil)
			continue
		}
		select {
		case <-c.done:
		case <-drain.Done():
		}
		select {
		case <-c.done:
			if c.stoppedByUs && c.waitErr != nil && !diedOf(c.waitErr, syscall.SIGTERM) {
				errs = append(errs, fmt.Errorf("server %q stopped with %v", c.spec.Name, c.waitErr))
			}
		default:
			c.signal(syscall.SIGKILL)
			<-c.done
			errs = append(errs, fmt.Errorf("server %q did not stop within %s: killed", c.spec.Name, f.opts.StopTimeout))
		}
	}
	// Every server has been reaped, so the reapers recorded each step down
	// to 0; the recorder ends once it has exported them.
	f.mu.Lock()
	ch := f.activeCh
	f.activeCh = nil
	f.active = 0
	f.mu.Unlock()
	if ch != nil {
		close(ch)
		select {
		case <-f.recorderDone:
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("gym.servers.active: export not finished: %w", ctx.Err()))
		}
	}
	if f.head != nil {
		if err := f.head.close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("head server: %w", err))
		}
	}
	return errors.Join(errs...)
}
