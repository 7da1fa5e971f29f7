package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/lens"
	"github.com/gymlens/gymlens/orchestrator"
	"github.com/gymlens/gymlens/telemetry"
)

// fleetSession is an orchestrator process's set-up: configuration applied
// to the environment, a run directory, and the orchestrator's own telemetry.
type fleetSession struct {
	cfg    orchestrator.Config
	runID  string
	runDir string
	log    *slog.Logger
}

// telemetryDefaults are applied when the fleet config has no telemetry
// block: export to the run directory, or over OTLP when the user points
// OTEL_EXPORTER_OTLP_ENDPOINT at a collector.
func telemetryDefaults(enabled bool) map[string]string {
	exporter := lens.ExporterFile
	if strings.TrimSpace(os.Getenv(lens.KeyOTLPEndpoint)) != "" {
		exporter = lens.ExporterOTLP
	}
	d := map[string]string{lens.KeyExporter: exporter}
	if enabled {
		d[lens.KeyEnabled] = "1"
	}
	return d
}

// openSession writes the telemetry settings into the environment (user
// variables win), creates runs/<run id>/ and initialises the orchestrator's
// telemetry there.
func openSession(cfg orchestrator.Config, runsDir string, defaultOn bool, stderr io.Writer) (*fleetSession, error) {
	if !cfg.Telemetry.Present {
		cfg.Telemetry.Values = telemetryDefaults(defaultOn)
	} else if _, ok := cfg.Telemetry.Values[lens.KeyExporter]; !ok {
		cfg.Telemetry.Values[lens.KeyExporter] = telemetryDefaults(false)[lens.KeyExporter]
	}
	runID, err := telemetry.ConfigureEnv(cfg.Telemetry)
	if err != nil {
		return nil, err
	}
	if runID == "" { // telemetry off: the run still needs a directory
		runID = telemetry.NewRunID()
	}
	runDir := filepath.Join(runsDir, runID)
	if err := os.MkdirAll(filepath.Join(runDir, contract.RunTelemetryDir), 0o755); err != nil {
		return nil, fmt.Errorf("run directory: %w", err)
	}
	// A free port for the orchestrator's own /metrics unless the user chose
	// one: a fixed default would collide with a second fleet on the host,
	// and targets.json says where it landed.
	if _, _, set := (lens.LoadOptions{}).LookupVar(lens.KeyPrometheusAddr); !set {
		if err := os.Setenv(lens.PrimaryPrefix+lens.KeyPrometheusAddr, "127.0.0.1:0"); err != nil {
			return nil, err
		}
	}
	// The orchestrator's own file; every server gets one of its own.
	if err := os.Setenv(lens.PrimaryPrefix+lens.KeyFilePath, filepath.Join(runDir, contract.RunTelemetryDir, contract.RunOrchestratorTelemetry)); err != nil {
		return nil, err
	}
	log := slog.New(slog.NewTextHandler(stderr, nil)).With("process", "orchestrator")
	slog.SetDefault(log)
	if _, err := telemetry.Init(telemetry.InitOptions{ServerName: "orchestrator", ServerType: contract.ServerTypeOrchestrator}); err != nil {
		log.Warn("telemetry is off", "err", err)
	}
	s := &fleetSession{cfg: cfg, runID: runID, runDir: runDir, log: log}
	if err := s.writeEffectiveConfig(nil); err != nil {
		return nil, err
	}
	return s, nil
}

// writeEffectiveConfig records what this run used in config.yaml: the
// fleet's config dict (resolved, every secret replaced) under `fleet:`, a
// `servers:` summary (name, type, impl, and the URLs once the fleet runs),
// the head server's URL once known, and the effective telemetry settings
// with where each came from. fleet is nil before the fleet started.
func (s *fleetSession) writeEffectiveConfig(fleet *orchestrator.Fleet) error {
	eff, _ := lens.LoadConfig(lens.LoadOptions{Groups: telemetry.GroupSet()})
	tel := map[string]any{}
	sources := map[string]string{}
	for _, src := range eff.Sources {
		key := telemetry.YAMLKey(src.Key)
		if key == "" {
			key = strings.ToLower(src.Key)
		}
		tel[key] = src.Value
		sources[key] = src.Origin
	}
	type serverFacts struct {
		Name    string `yaml:"name"`
		Type    string `yaml:"type"`
		Impl    string `yaml:"impl"`
		URL     string `yaml:"url,omitempty"`
		PID     int    `yaml:"pid,omitempty"`
		Command string `yaml:"command,omitempty"`
	}
	var servers []serverFacts
	dict := s.cfg.Redacted()
	doc := map[string]any{
		"run_id":            s.runID,
		"telemetry":         tel,
		"telemetry_sources": sources,
	}
	if fleet == nil {
		for _, spec := range s.cfg.Servers {
			servers = append(servers, serverFacts{Name: spec.Name, Type: spec.Type, Impl: spec.Impl})
		}
	} else {
		for _, info := range fleet.Servers() {
			f := serverFacts{Name: info.Spec.Name, Type: info.Spec.Type, Impl: info.Spec.Impl, URL: info.URL, PID: info.PID}
			if info.Spec.External() {
				f.Command = strings.Join(info.Command, " ")
			}
			servers = append(servers, f)
		}
		doc["head_server_url"] = fleet.HeadURL()
		if d, err := fleet.Redacted(); err == nil {
			dict = d
		}
	}
	doc["servers"] = servers
	doc["fleet"] = dict
	b, err := yaml.Marshal(doc)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(s.runDir, contract.RunConfigFile), b, 0o644)
}

func (s *fleetSession) start(ctx context.Context) (*orchestrator.Fleet, error) {
	fleet, err := orchestrator.Start(ctx, s.cfg, orchestrator.Options{RunDir: s.runDir, Logger: s.log})
	if err != nil {
		return nil, err
	}
	// Now with the head server's URL and every server's address.
	if err := s.writeEffectiveConfig(fleet); err != nil {
		s.log.Warn("config.yaml not updated with the running fleet", "err", err)
	}
	// With the prometheus exporter, tell a Prometheus where every process
	// serves /metrics: runs/<id>/prometheus/{targets.json,prometheus.yml}.
	if err := orchestrator.WritePrometheusConfig(s.runDir, s.runID, telemetry.Get().PrometheusAddr(), fleet.Servers(), 0); err != nil {
		s.log.Warn("prometheus scrape configuration not written", "err", err)
	}
	return fleet, nil
}

// close flushes the orchestrator's telemetry.
func (s *fleetSession) close() {
	if err := shutdownTelemetry(); err != nil {
		s.log.Warn("telemetry flush", "err", err)
	}
}

// loadFleetConfig reads the fleet config file at path, or the built-in
// fleet when path is empty.
func loadFleetConfig(path string) (orchestrator.Config, error) {
	if path == "" {
		return orchestrator.DefaultConfig(), nil
	}
	return orchestrator.LoadConfig(path)
}
