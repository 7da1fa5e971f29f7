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
	"time"

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

// telemetryFlushTimeout bounds the final telemetry flush of a process.
const telemetryFlushTimeout = 10 * time.Second

// shutdownTelemetry flushes and stops this process's telemetry, bounded by
// telemetryFlushTimeout.
func shutdownTelemetry() error {
	ctx, cancel := context.WithTimeout(context.Background(), telemetryFlushTimeout)
	defer cancel()
	return telemetry.Shutdown(ctx)
}

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	tuneGC()
	fs := flag.NewFlagSet("gym serve", flag.ContinueOnError)
	name := fs.String("name", "", "server name in the fleet (required)")
	impl := fs.String("impl", "", "implementation (default: the type's): "+implList())
	addr := fs.String("addr", "127.0.0.1:0", "listen address")
	configJSON := fs.String("config-json", "", "implementation config as a JSON object (default: $"+orchestrator.ServerConfigEnv+")")
	modelURL := fs.String("model-url", "", "agent only: base URL of the model server")
	resourcesURL := fs.String("resources-url", "", "agent only: base URL of the resources server")
	maxBody := fs.Int64("max-body-bytes", server.DefaultMaxBodyBytes, "request body limit")
	uninstrumented := fs.Bool("uninstrumented", false, "benchmark baseline: install no ingress instrumentation (no SERVER spans, no request metrics)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: gym serve <resources_servers|responses_api_models|responses_api_agents> --name NAME [flags]\n\n"+
			"Runs one server until SIGINT or SIGTERM, then drains in-flight requests\n"+
			"and flushes telemetry. Once listening it prints one line to stdout:\n"+
			"%s{\"addr\":...}\n\nFlags:\n", orchestrator.ReadyPrefix)
		fs.PrintDefaults()
	}
	if len(args) == 0 || args[0] == "" || args[0][0] == '-' {
		if code, done := parseFlags(fs, args, stdout, stderr); done {
			return code
		}
		fmt.Fprintln(stderr, "gym serve: missing server type")
		return exitUsage
	}
	serverType := args[0]
	if code, done := parseFlags(fs, args[1:], stdout, stderr); done {
		return code
	}
	if *name == "" {
		fmt.Fprintln(stderr, "gym serve: --name is required")
		return exitUsage
	}
	if *configJSON == "" {
		*configJSON = os.Getenv(orchestrator.ServerConfigEnv)
	}
	base := slog.New(slog.NewTextHandler(stderr, nil))
	log := base.With("server", *name)
	slog.SetDefault(log)
	if stop := startCPUProfile(*name, log); stop != nil {
		defer stop()
	}
	if stop := startRunStats(*name, log); stop != nil {
		defer stop()
	}

	if *impl == "" {
		*impl = registry.Default(serverType)
	}
	entry, ok := registry.Lookup(serverType, *impl)
	if !ok {
		fmt.Fprintf(stderr, "gym serve: %s: no implementation %q for server type %q (known: %s)\n", *name, *impl, serverType, implList())
		return exitUsage
	}
	cfg, err := entry.Decode([]byte(*configJSON))
	if err == nil {
		err = entry.Validate(cfg)
	}
	if err != nil {
		fmt.Fprintf(stderr, "gym serve: %s: %v\n", *name, err)
		return exitUsage
	}
	h, err := telemetry.Init(telemetry.InitOptions{ServerName: *name, ServerType: serverType})
	if err != nil {
		log.Warn("telemetry is off", "err", err)
	}
	defer func() {
		if err := shutdownTelemetry(); err != nil {
			log.Warn("telemetry flush", "err", err)
		}
	}()

	opts := entry.Options(*name)
	opts.Name, opts.Type, opts.Addr, opts.MaxBodyBytes, opts.Logger = *name, serverType, *addr, *maxBody, base
	opts.Uninstrumented = *uninstrumented
	s := server.New(opts)
	if err := entry.Register(s, cfg, registry.Peers{Instance: *name, ModelURL: *modelURL, ResourcesURL: *resourcesURL}); err != nil {
		fmt.Fprintf(stderr, "gym serve: %s: %v\n", *name, err)
		return exitUsage
	}
	bound, err := s.Listen()
	if err != nil {
		fmt.Fprintf(stderr, "gym serve: %v\n", err)
		return 1
	}
	ready, _ := json.Marshal(orchestrator.Ready{Addr: bound.String(), MetricsAddr: h.PrometheusAddr(), PID: os.Getpid()})
	fmt.Fprintf(stdout, "%s%s\n", orchestrator.ReadyPrefix, ready)
	log.Info("serving", "addr", bound.String(), "type", serverType, "impl", *impl)
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
	for _, t := range registry.Types() {
		parts = append(parts, t+": "+strings.Join(registry.Names(t), ", "))
	}
	return strings.Join(parts, "; ")
}
