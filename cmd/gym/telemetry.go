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
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/lens"
	"github.com/gymlens/gymlens/telemetry"
)

// telemetryCommand is "gym telemetry", a group of telemetry subcommands.
var telemetryCommand = command{
	name:    "telemetry",
	summary: "inspect the telemetry configuration",
	run: func(ctx context.Context, args []string, stdout, stderr io.Writer) int {
		return telemetryGroup.run(ctx, args, stdout, stderr)
	},
}

var telemetryGroup = group{
	path:     "gym telemetry",
	synopsis: "gym telemetry inspects how telemetry is configured, without setting it up.",
	commands: func() []command {
		return []command{
			{name: "check", summary: "show the effective configuration and whether this process would export", run: runTelemetryCheck},
		}
	},
}

const checkUsage = `Usage: gym telemetry check [flags]

Shows the telemetry configuration a Gym process would run with: every
setting with its effective value and where that value came from (the
environment, the telemetry: block of --config, or the built-in default),
the span groups it resolves to, the exporters, the OTLP protocol of each
signal, the service name, the resource attributes such a process would
report (as detected in this environment: host, GPUs, SLURM, Kubernetes;
process.pid is left out, it would be the server's), and whether a process
with the given rank and server name would export at all.

Nothing is set up: no exporter is created and no port or file is opened
apart from reading --config. RANK, WORLD_SIZE and LOCAL_RANK are read from
the environment like a server would; --rank and --world-size override the
first two.

Exit status: 0 when the configuration is valid, whether or not it exports;
2 when it is not (each problem is printed on stderr) or the flags are bad.

Flags:
`

// checkFlags are the parsed flags of "gym telemetry check".
type checkFlags struct {
	configFile string
	rank       int
	worldSize  int
	// rankName and worldName name where rank and worldSize came from, for
	// error messages: the flag or the environment variable.
	rankName, worldName string
	serverName          string
	serverType          string
	json                bool
}

func runTelemetryCheck(_ context.Context, args []string, stdout, stderr io.Writer) int {
	var f checkFlags
	fs := flag.NewFlagSet("gym telemetry check", flag.ContinueOnError)
	fs.StringVar(&f.configFile, "config", "", "Gym YAML `file` whose telemetry: block to read (optional)")
	fs.IntVar(&f.rank, "rank", 0, "this process's rank `N` (default $RANK, else 0)")
	fs.IntVar(&f.worldSize, "world-size", 0, "number of ranks `N` (default $WORLD_SIZE, else 1)")
	fs.StringVar(&f.serverName, "server-name", "", "server `name` in the fleet config, as given to telemetry.Init")
	fs.StringVar(&f.serverType, "server-type", "", "server `type`: "+strings.Join(serverTypes[1:], ", "))
	fs.BoolVar(&f.json, "json", false, "print one JSON object instead of a table")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), checkUsage)
		fs.PrintDefaults()
	}
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "gym telemetry check: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	f.rankName, f.worldName = "--rank", "--world-size"
	if !set["rank"] {
		f.rank, f.rankName = envInt("RANK", 0), "RANK"
	}
	if !set["world-size"] {
		// Like lens.ShouldExport, treat a world size below 1 in the
		// environment as a single process.
		f.worldSize, f.worldName = max(envInt("WORLD_SIZE", 1), 1), "WORLD_SIZE"
	}

	rep, errs := check(f)
	if len(errs) > 0 {
		for _, line := range errorLines(errs) {
			fmt.Fprintf(stderr, "gym telemetry check: %s\n", line)
		}
		return exitUsage
	}
	if f.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintf(stderr, "gym telemetry check: %v\n", err)
			return exitUsage
		}
		return exitOK
	}
	rep.writeText(stdout)
	return exitOK
}

// serverTypes are the values --server-type accepts; "" is a process outside
// the fleet.
var serverTypes = []string{
	"",
	contract.ServerTypeResources,
	contract.ServerTypeAgent,
	contract.ServerTypeModel,
	contract.ServerTypeOrchestrator,
}

// checkReport is everything "gym telemetry check" prints. The text output
// and the JSON output are two renderings of it.
type checkReport struct {
	ConfigFile      string           `json:"config_file"`
	YAMLBlock       bool             `json:"yaml_block"`
	Settings        []settingReport  `json:"settings"`
	SpanGroups      []string         `json:"span_groups"`
	Exporters       []string         `json:"exporters"`
	Signals         []string         `json:"signals"`
	Sampler         lens.SamplerInfo `json:"sampler"`
	OTLPProtocols   otlpProtocols    `json:"otlp_protocols"`
	Resource        map[string]any   `json:"resource"`
	ServiceName     string           `json:"service_name"`
	ServerName      string           `json:"server_name"`
	ServerType      string           `json:"server_type"`
	Rank            int              `json:"rank"`
	WorldSize       int              `json:"world_size"`
	LocalRank       int              `json:"local_rank"`
	ExportStrategy  string           `json:"export_strategy"`
	StrategyExports bool             `json:"strategy_selects_rank"`
	Enabled         bool             `json:"enabled"`
	Export          bool             `json:"export"`
	Reason          string           `json:"reason,omitempty"`
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
	if !slices.Contains(serverTypes, f.serverType) {
		errs = append(errs, fmt.Errorf("unknown server type %q (valid: %s)",
			f.serverType, strings.Join(serverTypes[1:], ", ")))
	}
	if f.worldSize < 1 {
		errs = append(errs, fmt.Errorf("%s=%d: must be at least 1", f.worldName, f.worldSize))
	} else if f.rank < 0 || f.rank >= f.worldSize {
		errs = append(errs, fmt.Errorf("%s=%d: must be in [0, %d) for %s=%d",
			f.rankName, f.rank, f.worldSize, f.worldName, f.worldSize))
	}

	var yamlCfg telemetry.Config
	if f.configFile != "" {
		doc, err := os.ReadFile(f.configFile)
		if err != nil {
			return nil, append(errs, err)
		}
		yamlCfg, err = telemetry.ConfigFromYAML(doc)
		if err != nil {
			return nil, append(errs, fmt.Errorf("%s: %w", f.configFile, err))
		}
	}
	cfg, err := yamlCfg.Effective()
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	groups, err := telemetry.ResolveSpanGroups(cfg.SpanGroups)
	if err != nil { // Effective validated SPAN_GROUPS already
		return nil, []error{err}
	}
	localRank := envInt("LOCAL_RANK", 0)
	selects, err := lens.ShouldExport(cfg, f.rank, f.worldSize, localRank)
	if err != nil {
		return nil, []error{err}
	}

	rep := &checkReport{
		ConfigFile:      f.configFile,
		YAMLBlock:       yamlCfg.Present,
		SpanGroups:      groups,
		Exporters:       slices.Clone(cfg.Exporters),
		Signals:         signals(cfg),
		Sampler:         lens.DescribeSampler(os.Getenv),
		OTLPProtocols:   otlpProtocols{Traces: cfg.TracesProtocol, Metrics: cfg.MetricsProtocol, Logs: cfg.LogsProtocol},
		Resource:        resource(cfg, f),
		ServiceName:     serviceName(cfg, f.serverName),
		ServerName:      f.serverName,
		ServerType:      f.serverType,
		Rank:            f.rank,
		WorldSize:       f.worldSize,
		LocalRank:       localRank,
		ExportStrategy:  cfg.ExportStrategy,
		StrategyExports: selects,
		Enabled:         cfg.Enabled,
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
			YAMLKey:  "telemetry." + telemetry.YAMLKey(s.Key),
			Value:    effectiveValue(cfg, s.Key, src.Value),
			Raw:      src.Value,
			Origin:   src.Origin,
		})
	}
	rep.Export, rep.Reason = verdict(cfg, rep)
	return rep, nil
}

// verdict says whether the process would export and, when it would not, the
// first reason in the order lens.Setup checks them.
func verdict(cfg lens.Config, rep *checkReport) (bool, string) {
	if !cfg.Enabled {
		src, _ := cfg.Source(lens.KeyEnabled)
		if src.Origin == "default" {
			return false, fmt.Sprintf("telemetry is disabled by default (set %s%s=1 or telemetry.%s: true)",
				lens.PrimaryPrefix, lens.KeyEnabled, telemetry.YAMLKey(lens.KeyEnabled))
		}
		return false, fmt.Sprintf("telemetry is disabled by %s=%s", src.Origin, strings.TrimSpace(src.Value))
	}
	if !rep.StrategyExports {
		return false, strategyReason(cfg, rep)
	}
	if cfg.HasExporter(lens.ExporterNone) {
		src, _ := cfg.Source(lens.KeyExporter)
		return false, fmt.Sprintf("the exporter is none (%s)", src.Origin)
	}
	if len(rep.Signals) == 0 {
		return false, "traces, metrics and logs are all disabled"
	}
	if cfg.HasExporter(lens.ExporterFile) && cfg.FilePath == "" {
		return false, fmt.Sprintf("set-up would fail: the file exporter needs %s%s "+
			"(the orchestrator sets it for each process it starts)", lens.PrimaryPrefix, lens.KeyFilePath)
	}
	return true, ""
}

func strategyReason(cfg lens.Config, rep *checkReport) string {
	where := fmt.Sprintf("rank %d of %d", rep.Rank, rep.WorldSize)
	switch cfg.ExportStrategy {
	case lens.StrategySingleRank:
		exportRank, note := cfg.ExportRank, ""
		if exportRank < 0 {
			exportRank, note = rep.WorldSize-1, ", the last rank"
		}
		return fmt.Sprintf("export strategy %s exports only from rank %d (EXPORT_RANK=%d%s); this is %s",
			cfg.ExportStrategy, exportRank, cfg.ExportRank, note, where)
	case lens.StrategySampled:
		return fmt.Sprintf("export strategy %s at EXPORT_SAMPLE_RATE=%s leaves out %s",
			cfg.ExportStrategy, strconv.FormatFloat(cfg.ExportSampleRate, 'g', -1, 64), where)
	case lens.StrategyFirstRankPerNode:
		return fmt.Sprintf("export strategy %s exports only from LOCAL_RANK 0; this process has LOCAL_RANK %d",
			cfg.ExportStrategy, rep.LocalRank)
	}
	return fmt.Sprintf("export strategy %s rules out %s", cfg.ExportStrategy, where)
}

// resource lists the resource attributes a process with these flags would
// report, mirroring telemetry.Init's Gym attributes on top of what lens
// adds and detects. process.pid is left out: it would be the server's.
func resource(cfg lens.Config, f checkFlags) map[string]any {
	gymAttrs := []attribute.KeyValue{
		attribute.String(contract.AttrServiceGroup, cfg.ServiceName),
		attribute.String(contract.AttrVersion, contract.Version),
	}
	if f.serverName != "" {
		gymAttrs = append(gymAttrs, attribute.String(contract.AttrServerName, f.serverName))
	}
	if f.serverType != "" {
		gymAttrs = append(gymAttrs, attribute.String(contract.AttrServerType, f.serverType))
	}
	out := map[string]any{}
	for _, kv := range lens.ResourceAttributes(cfg, lens.Options{
		ServiceName: serviceName(cfg, f.serverName),
		Attributes:  gymAttrs,
		Rank:        f.rank,
		WorldSize:   f.worldSize,
	}) {
		if kv.Key != semconv.ProcessPIDKey {
			out[string(kv.Key)] = kv.Value.AsInterface()
		}
	}
	return out
}

// serviceName is the service name a server called serverName would report,
// mirroring telemetry.Init.
func serviceName(cfg lens.Config, serverName string) string {
	if cfg.ServiceNamePerServer && serverName != "" {
		return cfg.ServiceName + "/" + serverName
	}
	return cfg.ServiceName
}

func signals(cfg lens.Config) []string {
	out := []string{}
	if cfg.TracesEnabled {
		out = append(out, "traces")
	}
	if cfg.MetricsEnabled {
		out = append(out, "metrics")
	}
	if cfg.LogsEnabled {
		out = append(out, "logs")
	}
	return out
}

// effectiveValue renders the parsed value of setting key, so that "1" and
// "yes" both read as true. Keys it does not know show their raw text.
func effectiveValue(cfg lens.Config, key, raw string) string {
	switch key {
	case lens.KeyEnabled:
		return strconv.FormatBool(cfg.Enabled)
	case lens.KeyTracesEnabled:
		return strconv.FormatBool(cfg.TracesEnabled)
	case lens.KeyMetricsEnabled:
		return strconv.FormatBool(cfg.MetricsEnabled)
	case lens.KeyLogsEnabled:
		return strconv.FormatBool(cfg.LogsEnabled)
	case lens.KeyServiceNamePerServer:
		return strconv.FormatBool(cfg.ServiceNamePerServer)
	case lens.KeySpanGroups:
		return cfg.SpanGroups
	case lens.KeyExporter:
		return strings.Join(cfg.Exporters, ",")
	case lens.KeyExportStrategy:
		return cfg.ExportStrategy
	case lens.KeyExportRank:
		return strconv.Itoa(cfg.ExportRank)
	case lens.KeyExportSampleRate:
		return strconv.FormatFloat(cfg.ExportSampleRate, 'g', -1, 64)
	case lens.KeyRunID:
		return cfg.RunID
	case lens.KeyFilePath:
		return cfg.FilePath
	case lens.KeyPrometheusAddr:
		return cfg.PrometheusAddr
	case lens.KeyServiceName:
		return cfg.ServiceName
	case lens.KeyOTLPEndpoint:
		return cfg.OTLPEndpoint
	case lens.KeyOTLPProtocol:
		return cfg.OTLPProtocol
	case lens.KeyOTLPTracesProtocol:
		return cfg.TracesProtocol
	case lens.KeyOTLPMetricsProtocol:
		return cfg.MetricsProtocol
	case lens.KeyOTLPLogsProtocol:
		return cfg.LogsProtocol
	case lens.KeyMetricExportInterval:
		return strconv.FormatInt(int64(cfg.MetricExportInterval/time.Millisecond), 10)
	case lens.KeyHistogramAggregation:
		return cfg.HistogramAggregation
	case lens.KeyBSPScheduleDelay:
		return strconv.FormatInt(int64(cfg.SpanScheduleDelay/time.Millisecond), 10)
	case lens.KeyBSPExportTimeout:
		return strconv.FormatInt(int64(cfg.SpanExportTimeout/time.Millisecond), 10)
	case lens.KeyBSPMaxQueueSize:
		return strconv.Itoa(cfg.SpanQueueSize)
	case lens.KeyBSPMaxExportBatch:
		return strconv.Itoa(cfg.SpanBatchSize)
	}
	return strings.TrimSpace(raw)
}

func (r *checkReport) writeText(w io.Writer) {
	file := "(none)"
	if r.ConfigFile != "" {
		file = r.ConfigFile
		if !r.YAMLBlock {
			file += " (no telemetry: block)"
		}
	}
	fmt.Fprintf(w, "config file: %s\n\n", file)

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
		{"server", server},
		{"service name", r.ServiceName},
		{"process", fmt.Sprintf("rank %d of %d, local rank %d", r.Rank, r.WorldSize, r.LocalRank)},
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

// envInt reads an integer variable the way telemetry.Init does: unset or
// unparsable means def.
func envInt(name string, def int) int {
	if n, err := strconv.Atoi(strings.TrimSpace(os.Getenv(name))); err == nil {
		return n
	}
	return def
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
