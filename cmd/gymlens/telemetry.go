package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/lens"
	"github.com/gymlens/gymlens/orchestrator"
	"github.com/gymlens/gymlens/telemetry"
)

// telemetryCommand is "gymlens telemetry", a group of telemetry subcommands.
var telemetryCommand = command{
	name:    "telemetry",
	summary: "inspect the telemetry configuration",
	run: func(ctx context.Context, args []string, stdout, stderr io.Writer) int {
		return telemetryGroup.run(ctx, args, stdout, stderr)
	},
}

var telemetryGroup = group{
	path:     "gymlens telemetry",
	synopsis: "gymlens telemetry inspects how telemetry is configured, without setting it up.",
	commands: func() []command {
		return []command{
			{name: "check", summary: "show the effective configuration and whether this process would export", run: runTelemetryCheck},
		}
	},
}

const checkUsage = `Usage: gymlens telemetry check [flags]

Shows the telemetry configuration a Gym process would run with: every
setting with its effective value and where that value came from (the
environment, the telemetry: block of --config, or the built-in default),
the span groups it resolves to, the exporters, the OTLP protocol of each
signal, the service name, the resource attributes such a process would
report (as detected in this environment: host, GPUs, SLURM, Kubernetes;
process.pid is left out, it would be the server's), and whether a process
with the given rank and server name would export at all. The verdict is
lens.Decide's, the one lens.Setup acts on.

Nothing is set up: no exporter is created and no port or file is opened
apart from reading --config. RANK, WORLD_SIZE and LOCAL_RANK are read from
the environment like a server would; --rank, --world-size and --local-rank
override them.

With --fleet the answer is for a process of a fleet started by gymlens run:
--config is then a fleet config (default: the built-in fleet), gymlens run's
telemetry defaults apply (on, exported to the run directory, or over OTLP
when OTEL_EXPORTER_OTLP_ENDPOINT is set), and the process is the
orchestrator, or the server --server-name names, with the environment the
orchestrator gives it. The run id and the run directory are examples: each
run picks its own.

Exit status: 0 when the configuration is valid, whether or not it exports;
2 when it is not (each problem is printed on stderr) or the flags are bad.

Flags:
`

// checkFlags are the parsed flags of "gymlens telemetry check".
type checkFlags struct {
	configFile string
	// rank, worldSize and localRank are nil unless their flag was given;
	// lens.Decide reads the environment for the others.
	rank, worldSize, localRank *int
	serverName                 string
	serverType                 string
	fleet                      bool
	json                       bool
}

func runTelemetryCheck(_ context.Context, args []string, stdout, stderr io.Writer) int {
	var f checkFlags
	var rank, worldSize, localRank int
	fs := flag.NewFlagSet("gymlens telemetry check", flag.ContinueOnError)
	fs.StringVar(&f.configFile, "config", "", "Gym YAML `file` whose telemetry: block to read (optional; with --fleet, the fleet config)")
	fs.IntVar(&rank, "rank", 0, "this process's rank `N` (default $RANK, else 0)")
	fs.IntVar(&worldSize, "world-size", 0, "number of ranks `N` (default $WORLD_SIZE, else 1)")
	fs.IntVar(&localRank, "local-rank", 0, "this process's rank on its node `N` (default $LOCAL_RANK, else 0)")
	fs.StringVar(&f.serverName, "server-name", "", "server `name` in the fleet config, as given to telemetry.Init")
	fs.StringVar(&f.serverType, "server-type", "", "server `type`: "+strings.Join(roleNames(), ", "))
	fs.BoolVar(&f.fleet, "fleet", false, "answer for a process of a fleet started by gymlens run, with its defaults")
	fs.BoolVar(&f.json, "json", false, "print one JSON object instead of a table")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), checkUsage)
		fs.PrintDefaults()
	}
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	fs.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "rank":
			f.rank = &rank
		case "world-size":
			f.worldSize = &worldSize
		case "local-rank":
			f.localRank = &localRank
		}
	})

	rep, errs := check(f)
	if len(errs) > 0 {
		for _, line := range errorLines(errs) {
			fmt.Fprintf(stderr, "gymlens telemetry check: %s\n", line)
		}
		return exitUsage
	}
	if f.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintf(stderr, "gymlens telemetry check: %v\n", err)
			return exitUsage
		}
		return exitOK
	}
	rep.writeText(stdout)
	return exitOK
}

// checkReport is everything "gymlens telemetry check" prints. The text output
// and the JSON output are two renderings of it.
type checkReport struct {
	ConfigFile    string           `json:"config_file"`
	YAMLBlock     bool             `json:"yaml_block"`
	Settings      []settingReport  `json:"settings"`
	SpanGroups    []string         `json:"span_groups"`
	Exporters     []string         `json:"exporters"`
	Signals       []string         `json:"signals"`
	Sampler       lens.SamplerInfo `json:"sampler"`
	OTLPProtocols otlpProtocols    `json:"otlp_protocols"`
	// MetricAggregation is lens.DescribeMetricAggregation's answer.
	MetricAggregation string         `json:"metric_aggregation"`
	Resource          map[string]any `json:"resource"`
	ServiceName       string         `json:"service_name"`
	ServerName        string         `json:"server_name"`
	ServerType        string         `json:"server_type"`
	Rank              int            `json:"rank"`
	WorldSize         int            `json:"world_size"`
	LocalRank         int            `json:"local_rank"`
	RankOrigin        string         `json:"rank_origin"`
	WorldSizeOrigin   string         `json:"world_size_origin"`
	LocalRankOrigin   string         `json:"local_rank_origin"`
	ExportStrategy    string         `json:"export_strategy"`
	StrategyExports   bool           `json:"strategy_selects_rank"`
	Enabled           bool           `json:"enabled"`
	Export            bool           `json:"export"`
	Reason            string         `json:"reason,omitempty"`
	// Fleet is set with --fleet: the answer is for a process of a gymlens run
	// fleet, and RunDir is an example of its run directory.
	Fleet  bool   `json:"fleet"`
	RunDir string `json:"run_dir,omitempty"`
}

// otlpProtocols is the protocol each signal's OTLP exporter would use.
type otlpProtocols struct {
	Traces  string `json:"traces"`
	Metrics string `json:"metrics"`
	Logs    string `json:"logs"`
}

// settingReport is one row of the settings table.
type settingReport struct {
	Key      string `json:"key"`
	Variable string `json:"variable"`
	YAMLKey  string `json:"yaml_key"`
	Value    string `json:"value"`
	Raw      string `json:"raw"`
	Origin   string `json:"origin"`
}

// check works out the report for f, or every reason the configuration (or
// the flags) cannot be used. It reads f.configFile and the environment and
// touches nothing else.
func check(f checkFlags) (*checkReport, []error) {
	var errs []error
	if !contract.IsRole(f.serverType) {
		errs = append(errs, fmt.Errorf("unknown server type %q (valid: %s)",
			f.serverType, strings.Join(roleNames(), ", ")))
	}
	env := checkEnv{base: os.LookupEnv}
	var yamlCfg telemetry.Config
	switch {
	case f.fleet:
		fc, err := loadFleetConfig(f.configFile)
		if err != nil {
			return nil, append(errs, err)
		}
		if env, err = fleetEnv(fc, &f); err != nil {
			return nil, append(errs, err)
		}
		// A fleet's processes read only their environment: the block
		// reaches them through ConfigureEnv's writes, which fleetEnv
		// holds, and not at all while telemetry is off.
		yamlCfg = telemetry.Config{Present: fc.Telemetry.Present}
	case f.configFile != "":
		doc, err := os.ReadFile(f.configFile)
		if err != nil {
			return nil, append(errs, err)
		}
		yamlCfg, err = telemetry.ConfigFromYAML(doc)
		if err != nil {
			return nil, append(errs, fmt.Errorf("%s: %w", f.configFile, err))
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	cfg, err := lens.LoadConfig(lens.LoadOptions{
		Lookup:        env.lookup,
		Overlay:       yamlCfg.Values,
		OverlayOrigin: func(key string) string { return "yaml telemetry." + telemetry.YAMLKey(key) },
		Groups:        telemetry.GroupSet(),
	})
	if err != nil {
		errs = append(errs, err)
	}
	env.relabel(&cfg) // before Decide: its reasons name origins
	d, err := lens.Decide(cfg, lens.DecideOptions{
		Rank: f.rank, WorldSize: f.worldSize, LocalRank: f.localRank,
		Origin: "flag", Lookup: env.lookup,
	})
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	groups, err := telemetry.ResolveSpanGroups(cfg.SpanGroups)
	if err != nil { // LoadConfig validated SPAN_GROUPS already
		return nil, []error{err}
	}

	rep := &checkReport{
		ConfigFile:        f.configFile,
		YAMLBlock:         yamlCfg.Present,
		SpanGroups:        groups,
		Exporters:         slices.Clone(cfg.Exporters),
		Signals:           d.Signals,
		Sampler:           lens.DescribeSampler(os.Getenv),
		OTLPProtocols:     otlpProtocols{Traces: cfg.TracesProtocol, Metrics: cfg.MetricsProtocol, Logs: cfg.LogsProtocol},
		MetricAggregation: lens.DescribeMetricAggregation(cfg, os.Getenv),
		Resource:          resource(cfg, f, d),
		ServiceName:       telemetry.ServiceName(cfg, f.serverName),
		ServerName:        f.serverName,
		ServerType:        f.serverType,
		Rank:              d.Rank,
		WorldSize:         d.WorldSize,
		LocalRank:         d.LocalRank,
		RankOrigin:        d.RankOrigin,
		WorldSizeOrigin:   d.WorldSizeOrigin,
		LocalRankOrigin:   d.LocalRankOrigin,
		ExportStrategy:    cfg.ExportStrategy,
		StrategyExports:   d.Selected,
		Enabled:           cfg.Enabled,
		Export:            d.Export,
		Reason:            d.Reason,
		Fleet:             f.fleet,
		RunDir:            env.runDir,
	}
	if rep.SpanGroups == nil {
		rep.SpanGroups = []string{}
	}
	for _, s := range lens.Settings() {
		src, _ := cfg.Source(s.Key)
		variable := s.Key
		if !s.Standard {
			variable = lens.PrimaryPrefix + s.Key
		}
		rep.Settings = append(rep.Settings, settingReport{
			Key:      s.Key,
			Variable: variable,
			YAMLKey:  "telemetry." + s.YAML,
			Value:    cfg.Value(s.Key),
			Raw:      src.Value,
			Origin:   src.Origin,
		})
	}
	return rep, nil
}

// checkEnv is the environment the checked process would see: the real one
// (base) under the variables a fleet command would set for it (set, each
// with where it comes from). Without --fleet, set is empty.
type checkEnv struct {
	base   func(string) (string, bool)
	set    map[string]telemetry.EnvVar
	runDir string
}

func (e checkEnv) lookup(name string) (string, bool) {
	if v, ok := e.set[name]; ok {
		return v.Value, true
	}
	return e.base(name)
}

// relabel names gymlens run as the origin of every value it would set, so the
// settings table does not credit the user's environment with them.
func (e checkEnv) relabel(cfg *lens.Config) {
	for i, src := range cfg.Sources {
		name, fromEnv := strings.CutPrefix(src.Origin, "env ")
		if v, ok := e.set[name]; ok && fromEnv {
			cfg.Sources[i].Origin = "gymlens run: " + v.From
		}
	}
}

// fleetEnv works out the environment gymlens run would give the process f
// names, with the functions gymlens run and the orchestrator use themselves:
// the fleet's telemetry defaults, ConfigureEnv's writes, the orchestrator's
// own variables and, for a server, what the orchestrator adds for it. It
// sets f.serverName and f.serverType from the fleet config.
func fleetEnv(fc orchestrator.Config, f *checkFlags) (checkEnv, error) {
	env := checkEnv{base: os.LookupEnv, set: map[string]telemetry.EnvVar{}}
	tel := fleetTelemetry(fc.Telemetry, true, os.LookupEnv)
	vars, runID, err := telemetry.PlanEnv(tel, os.LookupEnv)
	if err != nil {
		return env, err
	}
	if runID == "" { // telemetry off: the run still gets a directory
		runID = telemetry.NewRunID()
	}
	for _, v := range vars {
		if _, inBlock := fc.Telemetry.Values[settingKeyOf(v.Name)]; strings.HasPrefix(v.From, "yaml ") && !inBlock {
			v.From = "default"
		}
		env.set[v.Name] = v
	}
	env.runDir = filepath.Join(defaultRunsDir, runID)
	for _, v := range orchestratorEnv(env.runDir, env.lookup) {
		env.set[v.Name] = v
	}
	wantType := contract.ServerTypeOrchestrator
	if f.serverName == "" {
		f.serverName = "orchestrator"
	}
	if f.serverName != "orchestrator" {
		i := slices.IndexFunc(fc.Servers, func(s orchestrator.ServerSpec) bool { return s.Name == f.serverName })
		if i < 0 {
			names := make([]string, 0, len(fc.Servers))
			for _, s := range fc.Servers {
				names = append(names, s.Name)
			}
			return env, fmt.Errorf("--server-name %s: no such server in the fleet (servers: %s)", f.serverName, strings.Join(names, ", "))
		}
		spec := fc.Servers[i]
		wantType = spec.Type
		addr := spec.MetricsAddr
		if addr == "" {
			addr = "127.0.0.1:0" // the orchestrator picks a free port
		}
		for _, kv := range orchestrator.ServerTelemetryEnv(env.runDir, spec.Name, addr) {
			name, value, _ := strings.Cut(kv, "=")
			env.set[name] = telemetry.EnvVar{Name: name, Value: value, From: "the orchestrator, for " + spec.Name}
		}
	}
	if f.serverType != "" && f.serverType != wantType {
		return env, fmt.Errorf("--server-type %s: the fleet's %s is a %s", f.serverType, f.serverName, wantType)
	}
	f.serverType = wantType
	return env, nil
}

// settingKeyOf returns the lens setting key a variable name sets.
func settingKeyOf(name string) string {
	if k, ok := strings.CutPrefix(name, lens.PrimaryPrefix); ok {
		return k
	}
	return name
}

// resource lists the resource attributes a process with these flags would
// report: telemetry.Init's Gym attributes on top of what lens adds and
// detects. process.pid is left out: it would be the server's.
func resource(cfg lens.Config, f checkFlags, d lens.Decision) map[string]any {
	out := map[string]any{}
	for _, kv := range lens.ResourceAttributes(cfg, lens.Options{
		ServiceName: telemetry.ServiceName(cfg, f.serverName),
		Attributes:  telemetry.GymAttributes(cfg, f.serverName, f.serverType),
		Rank:        d.Rank,
		WorldSize:   d.WorldSize,
	}) {
		if kv.Key != semconv.ProcessPIDKey {
			out[string(kv.Key)] = kv.Value.AsInterface()
		}
	}
	return out
}

func (r *checkReport) writeText(w io.Writer) {
	file := "(none)"
	if r.ConfigFile != "" {
		file = r.ConfigFile
		if !r.YAMLBlock {
			file += " (no telemetry: block)"
		}
	}
	fmt.Fprintf(w, "config file: %s\n", file)
	if r.Fleet {
		fmt.Fprintf(w, "fleet:       as started by gymlens run (run directory, for example, %s)\n", r.RunDir)
	}
	fmt.Fprintln(w)

	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SETTING\tVALUE\tSOURCE")
	for _, s := range r.Settings {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Key, orNone(s.Value, "(empty)"), s.Origin)
	}
	_ = tw.Flush()
	fmt.Fprintln(w)

	server := "(none)"
	if r.ServerName != "" || r.ServerType != "" {
		server = strings.TrimSpace(r.ServerName + " " + parens(r.ServerType))
	}
	verdict := "would export"
	if !r.Export {
		verdict = "would not export: " + r.Reason
	}
	strategy := r.ExportStrategy + " (rules out this rank)"
	if r.StrategyExports {
		strategy = r.ExportStrategy + " (selects this rank)"
	}
	tw = tabwriter.NewWriter(w, 0, 4, 1, ' ', 0)
	for _, row := range [][2]string{
		{"span groups", orNone(strings.Join(r.SpanGroups, ", "), "(none)")},
		{"exporters", orNone(strings.Join(r.Exporters, ", "), "(none)")},
		{"signals", orNone(strings.Join(r.Signals, ", "), "(none)")},
		{"sampler", samplerText(r.Sampler)},
		{"otlp protocols", fmt.Sprintf("traces %s, metrics %s, logs %s",
			r.OTLPProtocols.Traces, r.OTLPProtocols.Metrics, r.OTLPProtocols.Logs)},
		{"aggregation", r.MetricAggregation},
		{"server", server},
		{"service name", r.ServiceName},
		{"process", fmt.Sprintf("rank %d of %d, local rank %d (%s)", r.Rank, r.WorldSize, r.LocalRank, placementOrigins(r))},
		{"export strategy", strategy},
		{"verdict", verdict},
	} {
		fmt.Fprintf(tw, "%s:\t%s\n", row[0], row[1])
	}
	_ = tw.Flush()

	fmt.Fprintln(w, "\nresource:")
	keys := slices.Sorted(maps.Keys(r.Resource))
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, k := range keys {
		fmt.Fprintf(tw, "  %s\t%v\n", k, r.Resource[k])
	}
	_ = tw.Flush()
}

// samplerText is the sampler row: the name, its ratio, where it came from
// and what the SDK will make of a bad value.
func samplerText(s lens.SamplerInfo) string {
	out := s.Name
	if s.Arg != "" {
		out += " " + s.Arg
	}
	if s.FromEnv {
		out += " (" + lens.KeyTracesSampler + ")"
	} else {
		out += " (the SDK's default)"
	}
	if s.Problem != "" {
		out += "; " + s.Problem
	}
	return out
}

// placementOrigins says where rank, world size and local rank came from,
// once when they share an origin.
func placementOrigins(r *checkReport) string {
	if r.RankOrigin == r.WorldSizeOrigin && r.RankOrigin == r.LocalRankOrigin {
		return r.RankOrigin
	}
	return fmt.Sprintf("rank: %s, world size: %s, local rank: %s", r.RankOrigin, r.WorldSizeOrigin, r.LocalRankOrigin)
}

func orNone(s, none string) string {
	if s == "" {
		return none
	}
	return s
}

func parens(s string) string {
	if s == "" {
		return ""
	}
	return "(" + s + ")"
}

// errorLines flattens errs into one line per problem. Joined errors are
// split into their parts, each keeping the prefix its wrappers added (the
// config file name, say), and a multi-line message is split at its newlines.
func errorLines(errs []error) []string {
	var lines []string
	var walk func(err error, prefix string)
	walk = func(err error, prefix string) {
		if m, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range m.Unwrap() {
				walk(e, prefix)
			}
			return
		}
		if inner := errors.Unwrap(err); inner != nil && hasJoined(inner) {
			msg, innerMsg := err.Error(), inner.Error()
			if strings.HasSuffix(msg, innerMsg) {
				prefix += strings.TrimSuffix(msg, innerMsg)
			}
			walk(inner, prefix)
			return
		}
		for line := range strings.SplitSeq(err.Error(), "\n") {
			if line = strings.TrimSpace(line); line != "" {
				lines = append(lines, prefix+line)
			}
		}
	}
	for _, err := range errs {
		walk(err, "")
	}
	return lines
}

func hasJoined(err error) bool {
	for ; err != nil; err = errors.Unwrap(err) {
		if _, ok := err.(interface{ Unwrap() []error }); ok {
			return true
		}
	}
	return false
}

// roleNames lists the values --server-type accepts besides "" (a process
// outside the fleet): the server types and the orchestrator.
func roleNames() []string {
	return append(contract.ServerTypes(), contract.ServerTypeOrchestrator)
}
