package lens

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
)

// Variables a launcher (torchrun, SLURM wrappers, the orchestrator) sets to
// place a process in a distributed job. Decide reads them for every
// placement field its caller leaves open.
const (
	EnvRank      = "RANK"
	EnvWorldSize = "WORLD_SIZE"
	EnvLocalRank = "LOCAL_RANK"
)

// Origins of a placement value in a Decision.
const (
	// OriginDefault marks a placement value nobody set: rank 0, world
	// size 1, local rank 0.
	OriginDefault = "default"
	// OriginCaller marks a value the caller gave (DecideOptions.Origin
	// replaces this word when set).
	OriginCaller = "caller"
)

// Signal names, as they appear in Decision.Signals.
const (
	SignalTraces  = "traces"
	SignalMetrics = "metrics"
	SignalLogs    = "logs"
)

// DecideOptions say what Decide knows beyond the configuration: where the
// process sits and whether the caller brings exporters of its own.
type DecideOptions struct {
	// Rank, WorldSize and LocalRank are the caller's placement. A nil
	// field is read from RANK, WORLD_SIZE or LOCAL_RANK; a variable that is
	// unset or blank means 0, 1 and 0.
	Rank, WorldSize, LocalRank *int
	// Origin names the caller's values in the Decision and in errors (for
	// example "flag"); empty means OriginCaller.
	Origin string
	// Lookup reads a variable; nil means os.LookupEnv.
	Lookup func(string) (string, bool)
	// OwnSpanExporter, OwnMetricReader and OwnLogExporter say that the
	// caller hands in a span exporter, a metric reader or a log exporter
	// of its own (Options.SpanExporter, MetricReader, LogExporter): that
	// signal then has somewhere to go whatever EXPORTER says.
	OwnSpanExporter, OwnMetricReader, OwnLogExporter bool
}

// Decision is whether, and why, one process exports telemetry. lens.Setup
// acts on it and `gymlens telemetry check` prints it.
type Decision struct {
	// Enabled is the ENABLED setting.
	Enabled bool
	// Rank, WorldSize and LocalRank are the placement the strategy saw.
	Rank, WorldSize, LocalRank int
	// RankOrigin, WorldSizeOrigin and LocalRankOrigin say where each came
	// from: "env RANK" and so on, the caller's Origin, or OriginDefault.
	RankOrigin, WorldSizeOrigin, LocalRankOrigin string
	// Strategy is the export strategy's name; Selected is its verdict
	// for this process (false when telemetry is disabled).
	Strategy string
	Selected bool
	// Signals are the signals that would be set up, in the order traces,
	// metrics, logs: enabled, and with an exporter that carries them.
	Signals []string
	// Export is the answer: the process builds providers and exports.
	Export bool
	// Reason says why not, when Export is false.
	Reason string
	// SetupErr is set when the decision is to export but building the
	// exporters is bound to fail (the file exporter without FILE_PATH);
	// Export is then false and Reason says so. Setup returns this error.
	SetupErr error
}

// HasSignal reports whether signal (SignalTraces, ...) would be set up.
func (d Decision) HasSignal(signal string) bool {
	for _, s := range d.Signals {
		if s == signal {
			return true
		}
	}
	return false
}

// Decide works out whether the process described by cfg and opts exports,
// and why not when it does not. It is the one place that decision is made:
// Setup follows it, and `gymlens telemetry check` prints it. The error reports
// a placement that cannot be used (a rank variable that is not an integer,
// a world size below 1, a rank outside [0, world size)), an unknown export
// strategy or one that panicked; the Decision is still filled in as far as
// it got. The placement is checked even when telemetry is disabled, so a
// check sees every problem; Setup ignores it then.
func Decide(cfg Config, opts DecideOptions) (d Decision, err error) {
	d.Enabled = cfg.Enabled
	d.Strategy = cfg.ExportStrategy
	d.Signals = signalsOf(cfg, opts)
	lookup := opts.Lookup
	if lookup == nil {
		lookup = os.LookupEnv
	}
	origin := opts.Origin
	if origin == "" {
		origin = OriginCaller
	}
	var errs []error
	place := func(given *int, name string, def int) (int, string) {
		if given != nil {
			return *given, origin
		}
		v, ok := lookup(name)
		if !ok || strings.TrimSpace(v) == "" {
			return def, OriginDefault
		}
		n, perr := ParseInt(v)
		if perr != nil || n < math.MinInt32 || n > math.MaxInt32 {
			errs = append(errs, &ConfigError{Name: name, Value: v, Reason: "not an integer"})
			return def, "env " + name
		}
		return int(n), "env " + name
	}
	d.Rank, d.RankOrigin = place(opts.Rank, EnvRank, 0)
	d.WorldSize, d.WorldSizeOrigin = place(opts.WorldSize, EnvWorldSize, 1)
	d.LocalRank, d.LocalRankOrigin = place(opts.LocalRank, EnvLocalRank, 0)
	if len(errs) == 0 {
		switch {
		case d.WorldSize < 1:
			errs = append(errs, fmt.Errorf("lens: world size %d (%s) must be at least 1", d.WorldSize, d.WorldSizeOrigin))
		case d.Rank < 0 || d.Rank >= d.WorldSize:
			errs = append(errs, fmt.Errorf("lens: rank %d (%s) outside world size %d (%s): must be in [0, %d)",
				d.Rank, d.RankOrigin, d.WorldSize, d.WorldSizeOrigin, d.WorldSize))
		}
	}
	if len(errs) == 0 {
		d.Selected, err = applyStrategy(cfg, d.Rank, d.WorldSize, d.LocalRank)
		if err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		d.Selected = false
		d.Reason = "the configuration is not usable: " + err.Error()
		return d, err
	}
	d.Export, d.Reason, d.SetupErr = verdict(cfg, d)
	return d, nil
}

// applyStrategy runs the configured strategy, turning a panic into an
// error.
func applyStrategy(cfg Config, rank, world, local int) (ok bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			ok, err = false, fmt.Errorf("lens: export strategy %q panicked: %v", cfg.ExportStrategy, r)
		}
	}()
	return ShouldExport(cfg, rank, world, local)
}

// signalsOf lists the signals that are enabled and have an exporter that
// carries them: every exporter but prometheus carries all three, prometheus
// carries metrics, none carries nothing.
func signalsOf(cfg Config, opts DecideOptions) []string {
	all, metrics := false, false
	for _, e := range cfg.Exporters {
		switch e {
		case ExporterOTLP, ExporterConsole, ExporterFile:
			all, metrics = true, true
		case ExporterPrometheus:
			metrics = true
		}
	}
	out := []string{}
	if cfg.TracesEnabled && (all || opts.OwnSpanExporter) {
		out = append(out, SignalTraces)
	}
	if cfg.MetricsEnabled && (metrics || opts.OwnMetricReader) {
		out = append(out, SignalMetrics)
	}
	if cfg.LogsEnabled && (all || opts.OwnLogExporter) {
		out = append(out, SignalLogs)
	}
	return out
}

// verdict gives the answer and the first reason against exporting, in the
// order Setup meets them.
func verdict(cfg Config, d Decision) (bool, string, error) {
	if !cfg.Enabled {
		src, _ := cfg.Source(KeyEnabled)
		if src.Origin == "" || src.Origin == "default" {
			hint := PrimaryPrefix + KeyEnabled + "=1"
			if y := yamlKeyOf(KeyEnabled); y != "" {
				hint += " or telemetry." + y + ": true"
			}
			return false, "telemetry is disabled by default (set " + hint + ")", nil
		}
		return false, fmt.Sprintf("telemetry is disabled by %s=%s", src.Origin, strings.TrimSpace(src.Value)), nil
	}
	if !d.Selected {
		return false, strategyReason(cfg, d), nil
	}
	if len(d.Signals) == 0 {
		switch {
		case cfg.HasExporter(ExporterNone):
			src, _ := cfg.Source(KeyExporter)
			return false, fmt.Sprintf("the exporter is none (%s)", src.Origin), nil
		case !cfg.TracesEnabled && !cfg.MetricsEnabled && !cfg.LogsEnabled:
			return false, "traces, metrics and logs are all disabled", nil
		}
		return false, "no configured exporter carries an enabled signal (prometheus carries metrics only)", nil
	}
	if cfg.HasExporter(ExporterFile) && cfg.FilePath == "" {
		err := fmt.Errorf("lens: the file exporter needs %s%s (the orchestrator sets it per process)", PrimaryPrefix, KeyFilePath)
		return false, "set-up would fail: " + strings.TrimPrefix(err.Error(), "lens: "), err
	}
	return true, "", nil
}

func strategyReason(cfg Config, d Decision) string {
	where := fmt.Sprintf("rank %d of %d", d.Rank, d.WorldSize)
	switch normalize(cfg.ExportStrategy) {
	case StrategySingleRank:
		exportRank, note := cfg.ExportRank, ""
		if exportRank < 0 {
			exportRank, note = d.WorldSize-1, ", the last rank"
		}
		return fmt.Sprintf("export strategy %s exports only from rank %d (EXPORT_RANK=%d%s); this is %s",
			cfg.ExportStrategy, exportRank, cfg.ExportRank, note, where)
	case StrategySampled:
		return fmt.Sprintf("export strategy %s at EXPORT_SAMPLE_RATE=%s leaves out %s",
			cfg.ExportStrategy, strconv.FormatFloat(cfg.ExportSampleRate, 'g', -1, 64), where)
	case StrategyFirstRankPerNode:
		return fmt.Sprintf("export strategy %s exports only from LOCAL_RANK 0; this process has LOCAL_RANK %d",
			cfg.ExportStrategy, d.LocalRank)
	}
	return fmt.Sprintf("export strategy %s rules out %s", cfg.ExportStrategy, where)
}

// ParseInt reads a decimal integer the way Python's int() reads text, so
// that a variable means the same to a gymlens process and to a Python one
// of the fleet: surrounding white space is ignored, a sign is allowed, and
// single underscores may separate digits ("1_000"). Anything else is an
// error. Every integer lens reads from the environment goes through it.
func ParseInt(s string) (int64, error) {
	t := strings.TrimSpace(s)
	body := strings.TrimLeft(t, "+-")
	if len(t)-len(body) > 1 {
		return 0, errors.New("not an integer")
	}
	if strings.Contains(body, "_") {
		if strings.HasPrefix(body, "_") || strings.HasSuffix(body, "_") || strings.Contains(body, "__") {
			return 0, errors.New("not an integer")
		}
		t = strings.ReplaceAll(t, "_", "")
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil {
		return 0, errors.New("not an integer")
	}
	return n, nil
}
