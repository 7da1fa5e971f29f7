package main

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/gymconfig"
	"github.com/gymlens/gymlens/internal/runconfig"
	"github.com/gymlens/gymlens/lens"
	"github.com/gymlens/gymlens/orchestrator"
	"github.com/gymlens/gymlens/server"
	"github.com/gymlens/gymlens/telemetry"
)

// fleetSession is an orchestrator process's set-up: configuration applied
// to the environment, a run directory, and the orchestrator's own telemetry.
type fleetSession struct {
	cfg    orchestrator.Config
	runID  string
	runDir string
	// resumed is true when the run directory was made by an earlier run
	// (gymlens run --resume) and false when this session created it.
	resumed bool
	dir     *runDir
	log     *slog.Logger
	// stopBegan is when stopFleet began: the orchestrator's own last
	// flush shares the stop's one export timeout from then on.
	stopBegan time.Time
}

// defaultRunsDir is where gymlens run and gymlens env start create run
// directories unless --runs-dir says otherwise.
const defaultRunsDir = "runs"

// telemetryDefaults are applied when the fleet config has no telemetry
// block: export to the run directory, or over OTLP when the user points
// OTEL_EXPORTER_OTLP_ENDPOINT at a collector (read through lookup).
func telemetryDefaults(enabled bool, lookup func(string) (string, bool)) map[string]string {
	exporter := lens.ExporterFile
	if v, _ := lookup(lens.KeyOTLPEndpoint); strings.TrimSpace(v) != "" {
		exporter = lens.ExporterOTLP
	}
	d := map[string]string{lens.KeyExporter: exporter}
	if enabled {
		d[lens.KeyEnabled] = "1"
	}
	return d
}

// fleetTelemetry is the telemetry block a fleet command hands to
// ConfigureEnv: the fleet config's block, or telemetryDefaults when there is
// none (telemetry on when defaultOn, as for gymlens run), with the default
// exporter when the block names none. The config's block is not modified.
func fleetTelemetry(tel telemetry.Config, defaultOn bool, lookup func(string) (string, bool)) telemetry.Config {
	if !tel.Present {
		tel.Values = telemetryDefaults(defaultOn, lookup)
		return tel
	}
	if _, ok := tel.Values[lens.KeyExporter]; !ok {
		tel.Values = maps.Clone(tel.Values)
		tel.Values[lens.KeyExporter] = telemetryDefaults(false, lookup)[lens.KeyExporter]
	}
	return tel
}

// orchestratorEnv is what openSession sets for the orchestrator's own
// process once ConfigureEnv has run (lookup reads that environment): a free
// port for its /metrics unless the user chose one (a fixed default would
// collide with a second fleet on the host, and targets.json says where it
// landed), and its own file in the run directory, whatever the user gave.
func orchestratorEnv(runDir string, lookup func(string) (string, bool)) []telemetry.EnvVar {
	var out []telemetry.EnvVar
	if _, _, set := (lens.LoadOptions{Lookup: lookup}).LookupVar(lens.KeyPrometheusAddr); !set {
		out = append(out, telemetry.EnvVar{Name: lens.PrimaryPrefix + lens.KeyPrometheusAddr, Value: "127.0.0.1:0", From: "a free port"})
	}
	return append(out, telemetry.EnvVar{
		Name:  lens.PrimaryPrefix + lens.KeyFilePath,
		Value: filepath.Join(runDir, contract.RunTelemetryDir, contract.RunOrchestratorTelemetry),
		From:  "the run directory",
	})
}

// openSession writes the telemetry settings into the environment (user
// variables win), creates runs/<run id>/ (or, with resume, reopens it when
// its identity matches id; see openRunDir) and initialises the
// orchestrator's telemetry there. A run directory that may not be used is
// an error returned before anything is created.
func openSession(cfg orchestrator.Config, runsDir string, defaultOn bool, id runIdentity, resume bool, stderr io.Writer) (*fleetSession, error) {
	// The head server's settings, checked before anything is created.
	if token, set := os.LookupEnv(contract.EnvHeadToken); set {
		if err := orchestrator.CheckHeadToken(token); err != nil {
			return nil, err
		}
	}
	if _, err := cfg.HeadOpen(); err != nil {
		return nil, err
	}
	cfg.Telemetry = fleetTelemetry(cfg.Telemetry, defaultOn, os.LookupEnv)
	runID, err := telemetry.ConfigureEnv(cfg.Telemetry)
	if err != nil {
		return nil, err
	}
	if runID == "" { // telemetry off: the run still needs a directory, named alike
		if runID, err = cfg.Telemetry.RunID(os.LookupEnv); err != nil {
			return nil, err
		}
		if runID == "" {
			runID = telemetry.NewRunID()
		}
	}
	id.RunID = runID
	id.CreatedAt = time.Now().UTC()
	hint := "choose another run id (" + lens.PrimaryPrefix + lens.KeyRunID + ", telemetry.run_id or SLURM_JOB_ID)"
	if id.Command == identityRun {
		hint = "pass --resume to continue that run (the seed, the dataset and --num-repeats must match), or " + hint
	}
	dir, err := openRunDir(runsDir, runID, id, resume, hint)
	if err != nil {
		return nil, err
	}
	runDir := dir.path
	for _, v := range orchestratorEnv(runDir, os.LookupEnv) {
		if err := os.Setenv(v.Name, v.Value); err != nil {
			dir.close()
			return nil, err
		}
	}
	log := slog.New(slog.NewTextHandler(stderr, nil)).With("process", "orchestrator")
	slog.SetDefault(log)
	if _, err := telemetry.Init(telemetry.InitOptions{ServerName: "orchestrator", ServerType: contract.ServerTypeOrchestrator}); err != nil {
		log.Warn("telemetry is off", "err", err)
	}
	s := &fleetSession{cfg: cfg, runID: runID, runDir: runDir, resumed: dir.resumed, dir: dir, log: log}
	if err := s.writeEffectiveConfig(nil); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// writeEffectiveConfig records what this run used in config.yaml: the
// fleet's config dict (resolved, every secret replaced, every URL scrubbed
// of credentials: gymconfig.ScrubURLs, as is every URL below) under `fleet:`, a
// `servers:` summary (name, type, impl, and the URLs once the fleet runs),
// the head server's URL once known, and the effective telemetry settings
// with where each came from. fleet is nil before the fleet started.
func (s *fleetSession) writeEffectiveConfig(fleet *orchestrator.Fleet) error {
	eff, _ := lens.LoadConfig(lens.LoadOptions{Groups: telemetry.GroupSet()})
	file := runconfig.File{RunID: s.runID, Fleet: s.cfg.Redacted()}
	for _, src := range eff.Sources {
		file.SetTelemetry(src.Key, gymconfig.ScrubURLs(src.Value), src.Origin) // an OTLP endpoint may carry a token
	}
	if fleet == nil {
		for _, spec := range s.cfg.Servers {
			file.Servers = append(file.Servers, runconfig.Server{Name: spec.Name, Type: spec.Type, Impl: spec.Impl})
		}
	} else {
		for _, info := range fleet.Servers() {
			f := runconfig.Server{Name: info.Spec.Name, Type: info.Spec.Type, Impl: info.Spec.Impl, URL: gymconfig.ScrubURLs(info.URL), PID: info.PID}
			if info.Spec.External() {
				f.Command = gymconfig.ScrubURLs(strings.Join(info.Command, " "))
			}
			file.Servers = append(file.Servers, f)
		}
		file.HeadServerURL = gymconfig.ScrubURLs(fleet.HeadURL())
		if d, err := fleet.Redacted(); err == nil {
			file.Fleet = d
		}
	}
	b, err := file.Marshal()
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(s.runDir, contract.RunConfigFile), b, contract.RunFilePerm)
}

func (s *fleetSession) start(ctx context.Context) (*orchestrator.Fleet, error) {
	fleet, err := orchestrator.Start(ctx, s.cfg, orchestrator.Options{RunDir: s.runDir, Logger: s.log, HeadToken: os.Getenv(contract.EnvHeadToken)})
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

// stopFleet stops fleet (bounded by its stop deadline) and starts the
// stop's telemetry budget: every server flushes on SIGTERM at once, and
// the orchestrator's own last flush (close) ends one export timeout
// after the stop began, so stopping costs one export timeout in all,
// whatever the fleet's size; what did not make it is counted.
func (s *fleetSession) stopFleet(fleet *orchestrator.Fleet) error {
	s.stopBegan = time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), fleet.StopDeadline())
	defer cancel()
	return fleet.Stop(ctx)
}

// minLastFlush is what the orchestrator's last flush gets at least, even
// when the servers' stop used up the export timeout: enough to send its
// last values to a collector that answers.
const minLastFlush = time.Second

// close flushes the orchestrator's telemetry (within the stop's budget
// once stopFleet ran) and releases the run directory.
func (s *fleetSession) close() {
	var err error
	if h := telemetry.Get(); h != nil && !s.stopBegan.IsZero() {
		deadline := s.stopBegan.Add(h.Config().OTLPTimeout)
		if floor := time.Now().Add(minLastFlush); deadline.Before(floor) {
			deadline = floor
		}
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		err = telemetry.Shutdown(ctx)
		cancel()
	} else {
		err = shutdownTelemetry()
	}
	if err != nil {
		s.log.Warn("telemetry flush", "err", err)
	}
	s.dir.close()
}

// loadFleetConfig reads the fleet config file at path, or the built-in
// fleet when path is empty.
func loadFleetConfig(path string) (orchestrator.Config, error) {
	// Every server the fleet starts reads the runtime's limits from the
	// environment it inherits; a bad one is a usage error here, before a
	// run directory or a process exists, not in each child.
	if err := server.ApplyEnv(&server.Options{}, os.LookupEnv); err != nil {
		return orchestrator.Config{}, err
	}
	if path == "" {
		return orchestrator.DefaultConfig(), nil
	}
	return orchestrator.LoadConfig(path)
}
