package lens

import (
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Default variable prefixes. Every lens setting KEY is read from
// PrimaryPrefix+KEY first and from FallbackPrefix+KEY when the primary
// variable is unset or empty.
const (
	PrimaryPrefix  = "NEMO_GYM_OTEL_"
	FallbackPrefix = "NEMO_LENS_"
)

// Exporter names accepted by the EXPORTER setting.
const (
	ExporterOTLP       = "otlp"
	ExporterConsole    = "console"
	ExporterPrometheus = "prometheus"
	ExporterFile       = "file"
	ExporterNone       = "none"
)

// OTLP transport protocols accepted by OTEL_EXPORTER_OTLP_PROTOCOL and its
// per-signal variants.
const (
	ProtocolGRPC         = "grpc"
	ProtocolHTTPProtobuf = "http/protobuf"
	// ProtocolHTTPJSON is OTLP/HTTP with the JSON encoding of the
	// protobuf messages (hex trace and span ids).
	ProtocolHTTPJSON = "http/json"
)

// Histogram aggregations accepted by
// OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION. They apply to the
// gym.* duration histograms on every exporter.
const (
	HistogramExplicit         = "explicit_bucket_histogram"
	HistogramBase2Exponential = "base2_exponential_bucket_histogram"
)

// DefaultPrometheusAddr is where the prometheus exporter listens unless
// PROMETHEUS_ADDR says otherwise: loopback only, so a fleet never exposes its
// metrics beyond the machine by accident.
const DefaultPrometheusAddr = "127.0.0.1:9464"

// Setting describes one configuration variable.
type Setting struct {
	// Key is the suffix after the prefix (for example "ENABLED"), or the full
	// variable name when Standard is true.
	Key string
	// Standard marks an OpenTelemetry-standard variable read without prefix.
	Standard bool
	// YAML is the setting's key in a Gym YAML file's telemetry: block (for
	// example "enabled", "otlp_endpoint").
	YAML string
	// Default is the value used when neither environment nor overlay sets it.
	Default string
	// Doc is a one-line description.
	Doc string

	// show renders the parsed value (see Config.Value); nil shows the
	// trimmed text.
	show func(Config) string
}

// Setting keys. The prefixed ones are read as PrimaryPrefix+Key, falling back
// to FallbackPrefix+Key; the OTEL_* ones are read as written.
const (
	KeyEnabled              = "ENABLED"
	KeySpanGroups           = "SPAN_GROUPS"
	KeyExporter             = "EXPORTER"
	KeyTracesEnabled        = "TRACES_ENABLED"
	KeyMetricsEnabled       = "METRICS_ENABLED"
	KeyLogsEnabled          = "LOGS_ENABLED"
	KeyExportStrategy       = "EXPORT_STRATEGY"
	KeyExportRank           = "EXPORT_RANK"
	KeyExportSampleRate     = "EXPORT_SAMPLE_RATE"
	KeyRunID                = "RUN_ID"
	KeyServiceNamePerServer = "SERVICE_NAME_PER_SERVER"
	KeyFilePath             = "FILE_PATH"
	KeyPrometheusAddr       = "PROMETHEUS_ADDR"
	KeyServiceName          = "OTEL_SERVICE_NAME"
	KeyOTLPEndpoint         = "OTEL_EXPORTER_OTLP_ENDPOINT"
	KeyOTLPProtocol         = "OTEL_EXPORTER_OTLP_PROTOCOL"
	KeyOTLPTracesProtocol   = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	KeyOTLPMetricsProtocol  = "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL"
	KeyOTLPLogsProtocol     = "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL"
	KeyMetricExportInterval = "OTEL_METRIC_EXPORT_INTERVAL"
	KeyBSPScheduleDelay     = "OTEL_BSP_SCHEDULE_DELAY"
	KeyBSPExportTimeout     = "OTEL_BSP_EXPORT_TIMEOUT"
	KeyBSPMaxQueueSize      = "OTEL_BSP_MAX_QUEUE_SIZE"
	KeyBSPMaxExportBatch    = "OTEL_BSP_MAX_EXPORT_BATCH_SIZE"
	KeyHistogramAggregation = "OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION"
	// KeyHistogramBoundaries sets explicit bucket boundaries, in
	// milliseconds, on the gym.* duration histograms.
	KeyHistogramBoundaries = "HISTOGRAM_BOUNDARIES_MS"
	// KeyAttributeValueLengthLimit bounds every span, event and link
	// attribute value (strings and byte slices, in bytes; slices element
	// by element); KeySpanAttributeValueLengthLimit, when set, overrides it
	// for spans, as the OpenTelemetry specification has it.
	KeyAttributeValueLengthLimit     = "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT"
	KeySpanAttributeValueLengthLimit = "OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT"
	// KeyMaxSpanLoss is the fraction of its spans a process may lose
	// before `gym run` fails the run (see DefaultMaxSpanLoss).
	KeyMaxSpanLoss = "MAX_SPAN_LOSS"
	// KeySemconvStabilityOptIn picks the HTTP server metric conventions
	// (server/semconv.go): "http" new only, "http/dup" old and new.
	KeySemconvStabilityOptIn = "OTEL_SEMCONV_STABILITY_OPT_IN"
)

// Span batching defaults. The interval and timeout are the OpenTelemetry
// specification's; the queue is four times its 2048 and the largest export
// twice its 512, because an export's cost on a busy server is mostly the
// wait for the export's goroutines to be scheduled, not the spans in it.
// They are handed to the SDK's batch span processor (see spanQueue). The batch stays at 1024 so that one export request
// stays well under the 4 MiB a collector's gRPC receiver accepts by
// default, even when some spans carry exception stack traces.
const (
	DefaultSpanQueueSize  = 8192
	DefaultSpanBatchSize  = 1024
	maxSpanQueueSize      = 1 << 20
	defaultScheduleDelay  = 5 * time.Second
	defaultExportTimeout  = 30 * time.Second
	maxMillisecondSetting = int64(math.MaxInt64 / time.Millisecond)
)

// DefaultAttributeValueLengthLimit is the attribute value length limit
// unless OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT or
// OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT says otherwise (the SDK's own
// default is no limit: one 4 MiB task id then made a whole batch exceed a
// collector's 4 MiB message limit and lost every span in it). 8 KiB keeps
// an exception's stack trace readable. It cannot by itself keep a batch
// under 4 MiB (1024 spans with one 8 KiB value each already make 8 MiB),
// which is why OTLP exports are also split by size (see
// MaxExportRequestBytes); what it bounds is the single span: with the
// SDK's count limit of 128 attributes, a span's attribute values come to
// at most 1 MiB, so any span fits in a request by itself.
const DefaultAttributeValueLengthLimit = 8192

// DefaultMaxSpanLoss is the fraction of its ended spans a process may lose
// (queue full, failed exports, unflushed at shutdown) before `gym run`
// exits non-zero: 1 %. Losses below it are still reported.
const DefaultMaxSpanLoss = 0.01

// Settings lists every variable lens reads, in display order.
var settings = []Setting{
	{Key: KeyEnabled, YAML: "enabled", Default: "false", Doc: "master switch; nothing is set up while false", show: showBool(func(c Config) bool { return c.Enabled })},
	{Key: KeySpanGroups, YAML: "span_groups", Default: "default", Doc: "comma-separated presets and span-group names to trace; empty means default, \",\" enables none", show: func(c Config) string { return c.SpanGroups }},
	{Key: KeyExporter, YAML: "exporter", Default: ExporterOTLP, Doc: "comma-separated exporters: otlp, console, prometheus, file, or none", show: func(c Config) string { return strings.Join(c.Exporters, ",") }},
	{Key: KeyTracesEnabled, YAML: "traces_enabled", Default: "true", Doc: "export traces", show: showBool(func(c Config) bool { return c.TracesEnabled })},
	{Key: KeyMetricsEnabled, YAML: "metrics_enabled", Default: "true", Doc: "export metrics", show: showBool(func(c Config) bool { return c.MetricsEnabled })},
	{Key: KeyLogsEnabled, YAML: "logs_enabled", Default: "false", Doc: "bridge log/slog records to OpenTelemetry logs", show: showBool(func(c Config) bool { return c.LogsEnabled })},
	{Key: KeyExportStrategy, YAML: "export_strategy", Default: "all_ranks", Doc: "which ranks export: all_ranks, single_rank, sampled, first_rank_per_node, or a registered one", show: func(c Config) string { return c.ExportStrategy }},
	{Key: KeyExportRank, YAML: "export_rank", Default: "-1", Doc: "the exporting rank for single_rank; a negative rank means the last rank", show: func(c Config) string { return strconv.Itoa(c.ExportRank) }},
	{Key: KeyExportSampleRate, YAML: "export_sample_rate", Default: "1.0", Doc: "fraction of ranks that export under sampled, in [0,1]", show: func(c Config) string { return strconv.FormatFloat(c.ExportSampleRate, 'g', -1, 64) }},
	{Key: KeyRunID, YAML: "run_id", Default: "", Doc: "run id shared by every process of one fleet"},
	{Key: KeyServiceNamePerServer, YAML: "service_name_per_server", Default: "true", Doc: "name each server's service <service name>/<server name>", show: showBool(func(c Config) bool { return c.ServiceNamePerServer })},
	{Key: KeyFilePath, YAML: "file_path", Default: "", Doc: "JSON-lines file the file exporter appends to"},
	{Key: KeyPrometheusAddr, YAML: "prometheus_addr", Default: DefaultPrometheusAddr, Doc: "listen address of the prometheus pull endpoint"},
	{Key: KeyServiceName, Standard: true, YAML: "service_name", Default: "nemo-gym", Doc: "service name (group) of every process", show: func(c Config) string { return c.ServiceName }},
	{Key: KeyOTLPEndpoint, Standard: true, YAML: "otlp_endpoint", Default: "", Doc: "OTLP collector endpoint; the exporter's own default when empty"},
	{Key: KeyOTLPProtocol, Standard: true, YAML: "otlp_protocol", Default: ProtocolGRPC, Doc: "OTLP transport: grpc, http/protobuf or http/json", show: func(c Config) string { return c.OTLPProtocol }},
	{Key: KeyOTLPTracesProtocol, Standard: true, YAML: "otlp_traces_protocol", Default: "", Doc: "OTLP transport of traces; OTEL_EXPORTER_OTLP_PROTOCOL when empty", show: func(c Config) string { return c.TracesProtocol }},
	{Key: KeyOTLPMetricsProtocol, Standard: true, YAML: "otlp_metrics_protocol", Default: "", Doc: "OTLP transport of metrics; OTEL_EXPORTER_OTLP_PROTOCOL when empty", show: func(c Config) string { return c.MetricsProtocol }},
	{Key: KeyOTLPLogsProtocol, Standard: true, YAML: "otlp_logs_protocol", Default: "", Doc: "OTLP transport of logs; OTEL_EXPORTER_OTLP_PROTOCOL when empty", show: func(c Config) string { return c.LogsProtocol }},
	{Key: KeyMetricExportInterval, Standard: true, YAML: "metric_export_interval_ms", Default: "10000", Doc: "milliseconds between metric exports", show: showMillis(func(c Config) time.Duration { return c.MetricExportInterval })},
	{Key: KeyHistogramAggregation, Standard: true, YAML: "histogram_aggregation", Default: HistogramExplicit, Doc: "aggregation of the gym.* duration histograms on every exporter: explicit_bucket_histogram or base2_exponential_bucket_histogram", show: func(c Config) string { return c.HistogramAggregation }},
	{Key: KeyHistogramBoundaries, YAML: "histogram_boundaries_ms", Default: "", Doc: "explicit bucket boundaries of the gym.* millisecond histograms, ascending and comma-separated (for example 100,1000,10000,60000,600000,3600000); empty keeps the OpenTelemetry default buckets, as NeMo Gym; not with base2_exponential_bucket_histogram"},
	{Key: KeySemconvStabilityOptIn, Standard: true, YAML: "semconv_stability_opt_in", Default: "http", Doc: "HTTP server metric conventions, a comma list as Python's instrumentation reads it: http (new only), http/dup (old and new); a list with neither means the old ones (Python's default when unset)"},
	{Key: KeyBSPScheduleDelay, Standard: true, YAML: "span_schedule_delay_ms", Default: strconv.FormatInt(defaultScheduleDelay.Milliseconds(), 10), Doc: "longest wait, in milliseconds, before queued spans are exported", show: showMillis(func(c Config) time.Duration { return c.SpanScheduleDelay })},
	{Key: KeyBSPExportTimeout, Standard: true, YAML: "span_export_timeout_ms", Default: strconv.FormatInt(defaultExportTimeout.Milliseconds(), 10), Doc: "milliseconds one span export may take before it is abandoned", show: showMillis(func(c Config) time.Duration { return c.SpanExportTimeout })},
	{Key: KeyBSPMaxQueueSize, Standard: true, YAML: "span_queue_size", Default: strconv.Itoa(DefaultSpanQueueSize), Doc: "finished spans held for export; further spans are dropped and counted", show: func(c Config) string { return strconv.Itoa(c.SpanQueueSize) }},
	{Key: KeyAttributeValueLengthLimit, Standard: true, YAML: "attribute_value_length_limit", Default: strconv.Itoa(DefaultAttributeValueLengthLimit), Doc: "longest span, event and link attribute value, in bytes (longer ones are truncated); negative for no limit", show: func(c Config) string { return strconv.Itoa(c.AttributeValueLengthLimit) }},
	{Key: KeySpanAttributeValueLengthLimit, Standard: true, YAML: "span_attribute_value_length_limit", Default: "", Doc: "the attribute value length limit for spans; OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT when empty", show: func(c Config) string { return strconv.Itoa(c.AttributeValueLengthLimit) }},
	{Key: KeyMaxSpanLoss, YAML: "max_span_loss", Default: strconv.FormatFloat(DefaultMaxSpanLoss, 'g', -1, 64), Doc: "fraction of a process's spans telemetry may lose (queue full, failed exports) before gym run exits 1, in [0,1]", show: func(c Config) string { return strconv.FormatFloat(c.MaxSpanLoss, 'g', -1, 64) }},
	{Key: KeyBSPMaxExportBatch, Standard: true, YAML: "span_export_batch_size", Default: strconv.Itoa(DefaultSpanBatchSize), Doc: "most spans sent in one export; capped at the queue size", show: func(c Config) string { return strconv.Itoa(c.SpanBatchSize) }},
}

// yamlKeyOf returns the telemetry-block key of setting key, or "".
func yamlKeyOf(key string) string {
	for _, s := range settings {
		if s.Key == key {
			return s.YAML
		}
	}
	return ""
}

func showBool(get func(Config) bool) func(Config) string {
	return func(c Config) string { return strconv.FormatBool(get(c)) }
}

func showMillis(get func(Config) time.Duration) func(Config) string {
	return func(c Config) string { return strconv.FormatInt(get(c).Milliseconds(), 10) }
}

// Value renders the effective value of setting key as parsed, so that "1"
// and "yes" both read as true and an inherited OTLP protocol shows the
// protocol; a setting kept as text shows its trimmed text, an unknown key
// "".
func (c Config) Value(key string) string {
	for _, s := range settings {
		if s.Key != key {
			continue
		}
		if s.show != nil {
			return s.show(c)
		}
		src, _ := c.Source(key)
		return strings.TrimSpace(src.Value)
	}
	return ""
}

// Settings returns a copy of the table of every variable lens reads, in
// display order.
func Settings() []Setting { return slices.Clone(settings) }

// Source says where one effective configuration value came from.
type Source struct {
	// Key is the setting key (see Setting.Key).
	Key string
	// Value is the raw text that was parsed.
	Value string
	// Origin is "env NAME", the overlay's label (for example
	// "yaml telemetry.enabled"), or "default".
	Origin string
}

// Config is the effective, parsed lens configuration.
type Config struct {
	Enabled              bool
	SpanGroups           string
	Exporters            []string
	TracesEnabled        bool
	MetricsEnabled       bool
	LogsEnabled          bool
	ExportStrategy       string
	ExportRank           int
	ExportSampleRate     float64
	RunID                string
	ServiceNamePerServer bool
	FilePath             string
	PrometheusAddr       string
	ServiceName          string
	OTLPEndpoint         string
	// OTLPProtocol is OTEL_EXPORTER_OTLP_PROTOCOL; TracesProtocol,
	// MetricsProtocol and LogsProtocol are what each signal uses: its own
	// OTEL_EXPORTER_OTLP_<SIGNAL>_PROTOCOL, else OTLPProtocol.
	OTLPProtocol         string
	TracesProtocol       string
	MetricsProtocol      string
	LogsProtocol         string
	MetricExportInterval time.Duration
	// HistogramAggregation is HistogramExplicit (the OpenTelemetry default
	// buckets) or HistogramBase2Exponential, for the gym.* histograms.
	HistogramAggregation string
	// HistogramBoundariesMS are explicit bucket boundaries for the gym.*
	// millisecond histograms; nil keeps the SDK's default buckets.
	HistogramBoundariesMS []float64
	// SpanScheduleDelay, SpanExportTimeout, SpanQueueSize and SpanBatchSize
	// configure the batch span processor (the OTEL_BSP_* variables).
	// SpanBatchSize is the value given; the processor uses at most SpanQueueSize of it.
	SpanScheduleDelay time.Duration
	SpanExportTimeout time.Duration
	SpanQueueSize     int
	SpanBatchSize     int
	// AttributeValueLengthLimit is the span attribute value length limit
	// in effect: OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT, else
	// OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT; -1 means no limit.
	AttributeValueLengthLimit int
	// MaxSpanLoss is KeyMaxSpanLoss, a fraction in [0, 1].
	MaxSpanLoss float64

	// Sources holds one entry per setting, in display order.
	Sources []Source
}

// HasExporter reports whether name is among the configured exporters.
func (c Config) HasExporter(name string) bool { return slices.Contains(c.Exporters, name) }

// Source returns where the setting key got its value.
func (c Config) Source(key string) (Source, bool) {
	for _, s := range c.Sources {
		if s.Key == key {
			return s, true
		}
	}
	return Source{}, false
}

// LoadOptions tune LoadConfig. The zero value reads the process environment
// with the default prefixes.
type LoadOptions struct {
	// Prefix and Fallback default to PrimaryPrefix and FallbackPrefix.
	Prefix, Fallback string
	// Lookup reads a variable; nil means os.LookupEnv.
	Lookup func(string) (string, bool)
	// Overlay holds values that sit between the environment and the
	// defaults (a YAML block, say), keyed by setting key. The environment
	// always wins over it.
	Overlay map[string]string
	// OverlayOrigin names each overlay value's origin; it receives the key.
	// Nil means "overlay <key>".
	OverlayOrigin func(key string) string
	// Defaults replaces individual built-in defaults, keyed by setting key.
	Defaults map[string]string
	// Groups, when set, validates SPAN_GROUPS against this set.
	Groups *GroupSet
}

// ConfigError is one bad configuration value.
type ConfigError struct {
	// Name is the variable (or overlay origin) that held the value.
	Name string
	// Value is the offending text.
	Value string
	// Reason says what is wrong with it.
	Reason string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("%s=%q: %s", e.Name, e.Value, e.Reason)
}

// LookupVar finds the value of setting key in the environment: the primary
// prefix first, then the fallback. It returns the variable name that held
// it. Empty values (and values of spaces only) count as unset, as they do
// for nemo-lens.
func (o LoadOptions) LookupVar(key string) (name, value string, ok bool) {
	lookup := o.Lookup
	if lookup == nil {
		lookup = os.LookupEnv
	}
	for _, n := range o.varNames(key) {
		if v, found := lookup(n); found && strings.TrimSpace(v) != "" {
			return n, v, true
		}
	}
	return "", "", false
}

func (o LoadOptions) varNames(key string) []string {
	if isStandard(key) {
		return []string{key}
	}
	p, f := o.Prefix, o.Fallback
	if p == "" {
		p = PrimaryPrefix
	}
	if f == "" {
		f = FallbackPrefix
	}
	return []string{p + key, f + key}
}

func isStandard(key string) bool { return strings.HasPrefix(key, "OTEL_") }

// LoadConfig reads every setting, strictly. Each bad value becomes a
// *ConfigError; all of them are returned joined, together with a Config whose
// Enabled field is still meaningful when ENABLED itself parsed.
func LoadConfig(opts LoadOptions) (Config, error) {
	var cfg Config
	var errs []error
	raw := make(map[string]Source, len(settings))
	for _, s := range settings {
		src := Source{Key: s.Key, Value: s.Default, Origin: "default"}
		if d, ok := opts.Defaults[s.Key]; ok {
			src.Value = d
		}
		if v, ok := opts.Overlay[s.Key]; ok && strings.TrimSpace(v) != "" {
			origin := "overlay " + s.Key
			if opts.OverlayOrigin != nil {
				origin = opts.OverlayOrigin(s.Key)
			}
			src.Value, src.Origin = v, origin
		}
		if name, v, ok := opts.LookupVar(s.Key); ok {
			src.Value, src.Origin = v, "env "+name
		}
		raw[s.Key] = src
		cfg.Sources = append(cfg.Sources, src)
	}
	bad := func(key, reason string) {
		src := raw[key]
		name := strings.TrimPrefix(src.Origin, "env ")
		if src.Origin == "default" {
			name = "default " + key
		}
		errs = append(errs, &ConfigError{Name: name, Value: src.Value, Reason: reason})
	}
	boolean := func(key string) bool {
		b, err := ParseBool(raw[key].Value)
		if err != nil {
			bad(key, err.Error())
		}
		return b
	}
	text := func(key string) string { return strings.TrimSpace(raw[key].Value) }

	cfg.Enabled = boolean(KeyEnabled)
	cfg.TracesEnabled = boolean(KeyTracesEnabled)
	cfg.MetricsEnabled = boolean(KeyMetricsEnabled)
	cfg.LogsEnabled = boolean(KeyLogsEnabled)
	cfg.ServiceNamePerServer = boolean(KeyServiceNamePerServer)

	cfg.SpanGroups = text(KeySpanGroups)
	if opts.Groups != nil {
		if _, err := opts.Groups.Resolve(cfg.SpanGroups); err != nil {
			bad(KeySpanGroups, err.Error())
		}
	}

	exps, err := parseExporters(text(KeyExporter))
	if err != nil {
		bad(KeyExporter, err.Error())
	}
	cfg.Exporters = exps

	cfg.ExportStrategy = strings.ToLower(text(KeyExportStrategy))
	if _, err := lookupStrategy(cfg.ExportStrategy); err != nil {
		bad(KeyExportStrategy, err.Error())
	}
	if n, err := ParseInt(text(KeyExportRank)); err != nil || n < math.MinInt32 || n > math.MaxInt32 {
		bad(KeyExportRank, "not an integer")
	} else {
		// Any negative rank means the last one, as in nemo-lens.
		cfg.ExportRank = int(n)
	}
	if f, err := ParseFloat(text(KeyExportSampleRate)); err != nil {
		bad(KeyExportSampleRate, err.Error())
	} else if f < 0 || f > 1 {
		bad(KeyExportSampleRate, "must be in [0, 1]")
	} else {
		cfg.ExportSampleRate = f
	}

	cfg.RunID = text(KeyRunID)
	cfg.FilePath = text(KeyFilePath)
	cfg.PrometheusAddr = text(KeyPrometheusAddr)
	cfg.ServiceName = text(KeyServiceName)
	if cfg.ServiceName == "" {
		cfg.ServiceName = "nemo-gym"
	}
	cfg.OTLPEndpoint = text(KeyOTLPEndpoint)
	protocol := func(key, inherit string) string {
		p := strings.ToLower(text(key))
		if p == "" {
			return inherit
		}
		switch p {
		case ProtocolGRPC, ProtocolHTTPProtobuf, ProtocolHTTPJSON:
		default:
			bad(key, "must be grpc, http/protobuf or http/json")
		}
		return p
	}
	cfg.OTLPProtocol = protocol(KeyOTLPProtocol, ProtocolGRPC)
	cfg.TracesProtocol = protocol(KeyOTLPTracesProtocol, cfg.OTLPProtocol)
	cfg.MetricsProtocol = protocol(KeyOTLPMetricsProtocol, cfg.OTLPProtocol)
	cfg.LogsProtocol = protocol(KeyOTLPLogsProtocol, cfg.OTLPProtocol)
	cfg.HistogramAggregation = strings.ToLower(text(KeyHistogramAggregation))
	if cfg.HistogramAggregation != HistogramExplicit && cfg.HistogramAggregation != HistogramBase2Exponential {
		bad(KeyHistogramAggregation, "must be "+HistogramExplicit+" or "+HistogramBase2Exponential)
	}
	if b := strings.TrimSpace(text(KeyHistogramBoundaries)); b != "" {
		bounds, err := parseBoundaries(b)
		switch {
		case err != nil:
			bad(KeyHistogramBoundaries, err.Error())
		case cfg.HistogramAggregation == HistogramBase2Exponential:
			bad(KeyHistogramBoundaries, "explicit boundaries cannot be combined with "+KeyHistogramAggregation+"="+HistogramBase2Exponential)
		default:
			cfg.HistogramBoundariesMS = bounds
		}
	}
	millis := func(key string) time.Duration {
		ms, err := ParseInt(text(key))
		if err != nil {
			bad(key, "not an integer number of milliseconds")
			return 0
		}
		if ms <= 0 || ms > maxMillisecondSetting {
			bad(key, fmt.Sprintf("must be a positive number of milliseconds (at most %d)", maxMillisecondSetting))
			return 0
		}
		return time.Duration(ms) * time.Millisecond
	}
	count := func(key string, limit int) int {
		n, err := ParseInt(text(key))
		if err != nil {
			bad(key, "not an integer")
			return 0
		}
		if n <= 0 || n > int64(limit) {
			bad(key, fmt.Sprintf("must be between 1 and %d", limit))
			return 0
		}
		return int(n)
	}
	cfg.MetricExportInterval = millis(KeyMetricExportInterval)
	cfg.SpanScheduleDelay = millis(KeyBSPScheduleDelay)
	cfg.SpanExportTimeout = millis(KeyBSPExportTimeout)
	cfg.SpanQueueSize = count(KeyBSPMaxQueueSize, maxSpanQueueSize)
	cfg.SpanBatchSize = count(KeyBSPMaxExportBatch, maxSpanQueueSize)
	lengthLimit := func(key string) (int, bool) {
		t := text(key)
		if t == "" {
			return 0, false
		}
		n, err := ParseInt(t)
		switch {
		case err != nil:
			bad(key, "not an integer")
		case n == 0:
			bad(key, "must be a positive number of bytes, or negative for no limit")
		case n < 0:
			return -1, true
		case n > math.MaxInt32:
			bad(key, fmt.Sprintf("must be at most %d", math.MaxInt32))
		default:
			return int(n), true
		}
		return 0, false
	}
	if n, ok := lengthLimit(KeySpanAttributeValueLengthLimit); ok {
		cfg.AttributeValueLengthLimit = n
	} else if n, ok := lengthLimit(KeyAttributeValueLengthLimit); ok {
		cfg.AttributeValueLengthLimit = n
	} else {
		cfg.AttributeValueLengthLimit = DefaultAttributeValueLengthLimit
	}
	if f, err := ParseFloat(text(KeyMaxSpanLoss)); err != nil {
		bad(KeyMaxSpanLoss, err.Error())
	} else if f < 0 || f > 1 {
		bad(KeyMaxSpanLoss, "must be in [0, 1]")
	} else {
		cfg.MaxSpanLoss = f
	}
	// A batch above the queue size is not an error: the processor caps it at
	// the queue size, as the OpenTelemetry SDK does.
	return cfg, errors.Join(errs...)
}

func parseExporters(spec string) ([]string, error) {
	var out []string
	for part := range strings.SplitSeq(spec, ",") {
		name := strings.ToLower(strings.TrimSpace(part))
		if name == "" {
			continue
		}
		switch name {
		case ExporterOTLP, ExporterConsole, ExporterPrometheus, ExporterFile, ExporterNone:
		default:
			return nil, fmt.Errorf("unknown exporter %q (valid: otlp, console, prometheus, file, none)", name)
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	if len(out) == 0 {
		return []string{ExporterNone}, nil
	}
	if len(out) > 1 && slices.Contains(out, ExporterNone) {
		return nil, errors.New("none cannot be combined with other exporters")
	}
	return out, nil
}

// ParseBool accepts 1/true/yes/on and 0/false/no/off in any case, with
// surrounding spaces ignored. Anything else is an error.
func ParseBool(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "1", "true", "yes", "on":
		return true, nil
	case "0", "false", "no", "off":
		return false, nil
	}
	return false, errors.New("not a boolean (use 1/true/yes/on or 0/false/no/off)")
}

// ParseFloat parses a finite float; NaN and infinities are rejected.
func ParseFloat(s string) (float64, error) {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		return 0, errors.New("not a number")
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, errors.New("not a finite number")
	}
	return f, nil
}

// parseBoundaries reads comma-separated, strictly ascending, finite bucket
// boundaries.
func parseBoundaries(text string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(text, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("%q is not a finite number", strings.TrimSpace(f))
		}
		if len(out) > 0 && v <= out[len(out)-1] {
			return nil, fmt.Errorf("boundaries must be strictly ascending: %v after %v", v, out[len(out)-1])
		}
		out = append(out, v)
	}
	return out, nil
}

// MaxSpanLoss reads KeyMaxSpanLoss (with the default prefixes) through
// lookup, nil meaning os.LookupEnv. An unset or malformed value gives
// DefaultMaxSpanLoss; LoadConfig is where a malformed one is reported.
func MaxSpanLoss(lookup func(string) (string, bool)) float64 {
	_, v, ok := LoadOptions{Lookup: lookup}.LookupVar(KeyMaxSpanLoss)
	if !ok {
		return DefaultMaxSpanLoss
	}
	f, err := ParseFloat(v)
	if err != nil || f < 0 || f > 1 {
		return DefaultMaxSpanLoss
	}
	return f
}
