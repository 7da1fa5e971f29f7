package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/gymconfig"
	"github.com/gymlens/gymlens/lens"
	"github.com/gymlens/gymlens/orchestrator"
	"github.com/gymlens/gymlens/server"
	"github.com/gymlens/gymlens/servers/registry"
	"github.com/gymlens/gymlens/telemetry"
)

var serveCommand = command{
	name:    "serve",
	summary: "run one server of a fleet (the orchestrator starts these)",
	run:     runServe,
}

// shutdownTelemetry flushes and stops this process's telemetry, bounded by
// contract.TelemetryFlushTimeout.
func shutdownTelemetry() error {
	ctx, cancel := context.WithTimeout(context.Background(), contract.TelemetryFlushTimeout)
	defer cancel()
	return telemetry.Shutdown(ctx)
}

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	tuneGC()
	if len(args) == 0 {
		l, launched, err := gymconfig.LaunchFromEnv(os.LookupEnv)
		if err != nil {
			fmt.Fprintf(stderr, "gymlens serve: %v\n", err)
			return exitUsage
		}
		if launched {
			return serveLaunched(ctx, l, stdout, stderr, nil)
		}
	}
	if wantsHead(args) {
		return runJoin(ctx, args, stdout, stderr)
	}
	fs := flag.NewFlagSet("gymlens serve", flag.ContinueOnError)
	name := fs.String("name", "", "server name in the fleet (required)")
	impl := fs.String("impl", "", "implementation (default: the type's): "+implList())
	addr := fs.String("addr", "127.0.0.1:0", "listen address; an empty host (\":0\") is 127.0.0.1, every interface must be written 0.0.0.0")
	configJSON := fs.String("config-json", "", "implementation config as a JSON object")
	modelURL := fs.String("model-url", "", "agent only: base URL of the model server")
	resourcesURL := fs.String("resources-url", "", "agent only: base URL of the resources server")
	agentURL := fs.String("agent-url", "", "environment server only: base URL of the agent it relays to")
	maxBody := fs.Int64("max-body-bytes", server.DefaultMaxBodyBytes, "request body limit (overrides $"+server.EnvPrefix+"MAX_BODY_BYTES)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: gymlens serve <resources_servers|responses_api_models|responses_api_agents|environment_servers> --name NAME [flags]\n"+
			"       gymlens serve    (with $%s and $%s set, as a fleet's launcher starts it)\n"+
			"       gymlens serve --head http://HOST:PORT --name NAME   (joins a fleet from another host; --head -h for more)\n\n"+
			"Runs one server until SIGINT or SIGTERM, then drains in-flight requests\n"+
			"and flushes telemetry. Once listening it prints one line to stdout:\n"+
			"%s{\"addr\":...}\n\n"+
			"Without arguments it follows NeMo Gym's launch contract: $%s is the\n"+
			"fleet's config (YAML, interpolations unresolved) and $%s the name of\n"+
			"this server's instance in it; the server binds its block's host:port,\n"+
			"takes its implementation config from the rest of the block and finds an\n"+
			"agent's model and resources servers by their references. As in NeMo\n"+
			"Gym, only this server's block (and what its interpolations reach) and\n"+
			"its peers' host and port are resolved: a variable another server needs\n"+
			"may be unset here. With dry_run: true it checks all of that and exits 0\n"+
			"without listening.\n\nFlags:\n",
			gymconfig.EnvConfigDict, gymconfig.EnvConfigPath, orchestrator.ReadyPrefix,
			gymconfig.EnvConfigDict, gymconfig.EnvConfigPath)
		fs.PrintDefaults()
	}
	if len(args) == 0 || args[0] == "" || args[0][0] == '-' {
		if code, done := parseFlags(fs, args, stdout, stderr); done {
			return code
		}
		fmt.Fprintln(stderr, "gymlens serve: missing server type")
		return exitUsage
	}
	serverType := args[0]
	if code, done := parseFlags(fs, args[1:], stdout, stderr); done {
		return code
	}
	if *name == "" {
		fmt.Fprintln(stderr, "gymlens serve: --name is required")
		return exitUsage
	}
	// Checked here to exit 2 before anything starts; the server reads it
	// the same way when it listens (an empty host is loopback).
	if _, err := contract.ListenAddr(*addr); err != nil {
		fmt.Fprintf(stderr, "gymlens serve: --addr: %v\n", err)
		return exitUsage
	}
	maxBodySet := false
	fs.Visit(func(f *flag.Flag) { maxBodySet = maxBodySet || f.Name == "max-body-bytes" })
	if !maxBodySet {
		*maxBody = 0 // the environment's or the default
	} else if *maxBody <= 0 {
		fmt.Fprintf(stderr, "gymlens serve: --max-body-bytes %d: want a whole number of bytes above 0\n", *maxBody)
		return exitUsage
	}
	if *impl == "" {
		*impl = registry.Default(serverType)
	}
	entry, ok := registry.Lookup(serverType, *impl)
	if !ok {
		fmt.Fprintf(stderr, "gymlens serve: %s: no implementation %q for server type %q (known: %s)\n", *name, *impl, serverType, implList())
		return exitUsage
	}
	cfg, err := entry.Decode([]byte(*configJSON))
	if err == nil {
		err = entry.Validate(cfg)
	}
	if err != nil {
		printConfigError(stderr, *name, err)
		return exitUsage
	}
	return serveOne(ctx, serveSpec{
		name: *name, typ: serverType, impl: entry, cfg: cfg, addr: *addr,
		peers:   registry.Peers{Instance: *name, ModelURL: *modelURL, ResourcesURL: *resourcesURL, AgentURL: *agentURL},
		maxBody: *maxBody,
	}, stdout, stderr)
}

// serveSpec is one server, checked and ready to start.
type serveSpec struct {
	name, typ string
	impl      registry.Impl
	cfg       any
	peers     registry.Peers
	addr      string
	// maxBody is --max-body-bytes; 0 leaves the body limit to the
	// environment (server.ApplyEnv) or its default.
	maxBody int64
	// dryRun stops after registering the routes (on a server that never
	// listens), before telemetry, any profile and the listener.
	dryRun bool
	// stopped, when not nil, gets the telemetry handle once telemetry
	// has shut down (see serveLaunched).
	stopped func(*lens.Handle)
}

// serveLaunched serves the instance a fleet's launcher started this
// process as (NeMo Gym's launch contract): every problem with the config
// is one line on stderr and exit status 2, before anything listens.
//
// stopped, when not nil, is called with the process's telemetry handle
// once its telemetry has shut down (the handle is nil when telemetry is
// off).
func serveLaunched(ctx context.Context, l *gymconfig.Launch, stdout, stderr io.Writer, stopped func(*lens.Handle)) int {
	self := l.Self
	path := self.Name + "." + self.Type + "." + self.Impl
	entry, ok := registry.Lookup(self.Type, self.Impl)
	if !ok {
		known := registry.Names(self.Type)
		hint := ""
		if near := gymconfig.Nearest(self.Impl, known); near != "" {
			hint = fmt.Sprintf("did you mean %q? ", near)
		}
		fmt.Fprintf(stderr, "gymlens serve: %s: no %s implementation %q (%sknown: %s; a server of your own needs a command: list in its block)\n",
			self.Name, self.Type, self.Impl, hint, strings.Join(known, ", "))
		return exitUsage
	}
	implConfig := self.ImplConfig()
	raw, err := json.Marshal(implConfig)
	if err != nil {
		fmt.Fprintf(stderr, "gymlens serve: %s: %v\n", path, err)
		return exitUsage
	}
	cfg, err := entry.DecodeAt(raw, path)
	if err != nil {
		printConfigError(stderr, "", err)
		return exitUsage
	}
	if err := entry.Validate(cfg); err != nil {
		printConfigError(stderr, path, err)
		return exitUsage
	}
	peers := registry.Peers{Instance: self.Name}
	if self.Type == contract.ServerTypeAgent {
		// An agent's reference fields, and the config key that may give
		// the same URL directly instead.
		agentPeers := []struct{ ref, urlKey string }{
			{"model_server", "model_url"},
			{"resources_server", "resources_url"},
		}
		refs := self.Refs()
		for _, p := range agentPeers {
			_, hasRef := refs[p.ref]
			if _, hasURL := implConfig[p.urlKey]; hasURL && !hasRef {
				continue
			}
			u, err := l.PeerURL(p.ref)
			if err != nil {
				fmt.Fprintf(stderr, "gymlens serve: %v\n", err)
				return exitUsage
			}
			if p.ref == "model_server" {
				peers.ModelURL, peers.ModelName = u, refs[p.ref].Name
			} else {
				peers.ResourcesURL, peers.ResourcesName = u, refs[p.ref].Name
			}
		}
		// Upstream reads the key with a default of false; so does this.
		if v, err := l.Fleet().Value(keyObservabilityEnabled); err == nil {
			peers.ObservabilityEnabled = v == true || v == "true"
		}
	}
	if self.Type == contract.ServerTypeEnvironment {
		// An environment server relays to the agent its agent_server
		// reference names.
		if _, hasRef := self.Refs()[gymconfig.KeyAgentServer]; hasRef {
			u, err := l.PeerURL(gymconfig.KeyAgentServer)
			if err != nil {
				fmt.Fprintf(stderr, "gymlens serve: %v\n", err)
				return exitUsage
			}
			peers.AgentURL, peers.AgentName = u, self.Refs()[gymconfig.KeyAgentServer].Name
		}
	}
	if self.Port() <= 0 || self.Host() == "" {
		fmt.Fprintf(stderr, "gymlens serve: %s: the block needs a host and a port to listen on (got host %q, port %d)\n", path, self.Host(), self.Port())
		return exitUsage
	}
	dryRun, err := l.DryRun()
	if err != nil {
		fmt.Fprintf(stderr, "gymlens serve: %v\n", err)
		return exitUsage
	}
	return serveOne(ctx, serveSpec{
		name: self.Name, typ: self.Type, impl: entry, cfg: cfg, addr: l.Addr(), peers: peers,
		dryRun: dryRun, stopped: stopped,
	}, stdout, stderr)
}

// keyObservabilityEnabled is NeMo Gym's top-level config key that turns
// on rollout correlation: the rollout-id path prefix on a rollout's calls.
const keyObservabilityEnabled = "observability_enabled"

// printConfigError writes err, one problem a line, each "gymlens serve: "
// and prefix (when not empty) first.
func printConfigError(w io.Writer, prefix string, err error) {
	if prefix != "" {
		prefix += ": "
	}
	for line := range strings.SplitSeq(err.Error(), "\n") {
		fmt.Fprintf(w, "gymlens serve: %s%s\n", prefix, line)
	}
}

// serveOne registers spec's implementation on a new server and, unless
// it is a dry run, listens, prints the ready line and serves until ctx
// ends.
func serveOne(ctx context.Context, spec serveSpec, stdout, stderr io.Writer) int {
	base := slog.New(slog.NewTextHandler(stderr, nil))
	log := base.With("server", spec.name)
	slog.SetDefault(log)
	opts := spec.impl.Options(spec.name)
	opts.Name, opts.Type, opts.Addr, opts.Logger = spec.name, spec.typ, spec.addr, base
	// The runtime's limits (timeouts, caps) come from the environment,
	// the fleet's for every server it starts.
	if err := server.ApplyEnv(&opts, os.LookupEnv); err != nil {
		fmt.Fprintf(stderr, "gymlens serve: %s: %v\n", spec.name, err)
		return exitUsage
	}
	if spec.maxBody > 0 {
		opts.MaxBodyBytes = spec.maxBody
	}
	// Registering on a server that never listens checks what only
	// Register checks (an agent's peer URLs) before telemetry, whose
	// prometheus exporter listens, or a profile starts.
	if err := spec.impl.Register(server.New(opts), spec.cfg, spec.peers); err != nil {
		printConfigError(stderr, spec.name, err)
		return exitUsage
	}
	if spec.dryRun {
		log.Info("dry run: the configuration is valid; not listening", "type", spec.typ, "impl", spec.impl.Name, "addr", spec.addr)
		return exitOK
	}
	if stop := startCPUProfile(spec.name, log); stop != nil {
		defer stop()
	}
	if stop := startRunStats(spec.name, log); stop != nil {
		defer stop()
	}
	h, err := telemetry.Init(telemetry.InitOptions{ServerName: spec.name, ServerType: spec.typ})
	if err != nil {
		log.Warn("telemetry is off", "err", err)
	}
	defer func() {
		if err := shutdownTelemetry(); err != nil {
			log.Warn("telemetry flush", "err", err)
		}
		if spec.stopped != nil {
			spec.stopped(h)
		}
	}()
	s := server.New(opts)
	if err := spec.impl.Register(s, spec.cfg, spec.peers); err != nil {
		printConfigError(stderr, spec.name, err)
		return exitUsage
	}
	bound, err := s.Listen()
	if err != nil {
		fmt.Fprintf(stderr, "gymlens serve: %s: %v\n", spec.name, err)
		return 1
	}
	ready, _ := json.Marshal(orchestrator.Ready{Addr: bound.String(), MetricsAddr: h.PrometheusAddr(), PID: os.Getpid()})
	fmt.Fprintf(stdout, "%s%s\n", orchestrator.ReadyPrefix, ready)
	log.Info("serving", "addr", bound.String(), "type", spec.typ, "impl", spec.impl.Name)
	if err := s.Serve(ctx); err != nil {
		log.Error("serve", "err", err)
		return 1
	}
	log.Info("stopped")
	return exitOK
}

// implList names every built-in implementation, by server type.
func implList() string {
	var parts []string
	for _, t := range contract.ServerTypes() {
		if names := registry.Names(t); len(names) > 0 {
			parts = append(parts, t+": "+strings.Join(names, ", "))
		}
	}
	return strings.Join(parts, "; ")
}
