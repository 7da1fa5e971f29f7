package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/gymlens/gymlens/orchestrator"
	"github.com/gymlens/gymlens/server"
	"github.com/gymlens/gymlens/servers/agent"
	"github.com/gymlens/gymlens/servers/model"
	"github.com/gymlens/gymlens/servers/resources"
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
	impl := fs.String("impl", "", "implementation: arithmetic, policy_model or simple_agent (default: the type's)")
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
		*impl = orchestrator.DefaultImpl(serverType)
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

	s := server.New(server.Options{Name: *name, Type: serverType, Addr: *addr, MaxBodyBytes: *maxBody, Logger: base,
		Uninstrumented: *uninstrumented})
	if err := register(s, serverType, *impl, *configJSON, *modelURL, *resourcesURL); err != nil {
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

// register wires the named implementation onto s.
func register(s *server.Server, serverType, impl, configJSON, modelURL, resourcesURL string) error {
	decode := func(dst any) error {
		if configJSON == "" {
			return nil
		}
		if err := json.Unmarshal([]byte(configJSON), dst); err != nil {
			return fmt.Errorf("--config-json: %w", err)
		}
		return nil
	}
	switch {
	case serverType == telemetry.ServerTypeResources && impl == orchestrator.ImplArithmetic:
		var cfg resources.Config
		if err := decode(&cfg); err != nil {
			return err
		}
		return resources.Register(s, cfg)
	case serverType == telemetry.ServerTypeModel && impl == orchestrator.ImplPolicyModel:
		cfg := model.Defaults()
		if err := decode(&cfg); err != nil {
			return err
		}
		return model.Register(s, cfg)
	case serverType == telemetry.ServerTypeAgent && impl == orchestrator.ImplSimpleAgent:
		var cfg agent.Config
		if err := decode(&cfg); err != nil {
			return err
		}
		if modelURL != "" {
			cfg.ModelURL = modelURL
		}
		if resourcesURL != "" {
			cfg.ResourcesURL = resourcesURL
		}
		return agent.Register(s, cfg, server.NewClient(server.ClientOptions{}))
	}
	return fmt.Errorf("no implementation %q for server type %q", impl, serverType)
}
