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

	"github.com/gymlens/gymlens/contract"
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
	// Exported marks a setting whose value an orchestrator writes into
	// every server's environment even when nothing set it (its default
	// then), as NeMo Gym's launcher does: a server built on another
	// telemetry library, with other defaults (NeMo Gym's Python servers
	// on nemo-lens), then reads what a gymlens server reads.
	Exported bool

	// value reads the setting's text into a Config and renders the result
	// back (see Config.Value); nil keeps the setting as text only, read
	// through Config.Source.
	value *valueCodec
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
	KeyOTLPTimeout          = "OTEL_EXPORTER_OTLP_TIMEOUT"
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
	// before `gymlens run` fails the run (see DefaultMaxSpanLoss).
	KeyMaxSpanLoss = "MAX_SPAN_LOSS"
	// KeySemconvStabilityOptIn picks the HTTP server metric conventions
	// (server/semconv.go): "http" new only, "http/dup" old and new.
	KeySemconvStabilityOptIn = "OTEL_SEMCONV_STABILITY_OPT_IN"
	// KeyHTTPBodySizes switches on the HTTP body size histograms
	// (http.server.request.body.size and its three siblings), which cost
	// a counting wrapper around every body on the hot path.
	KeyHTTPBodySizes = "HTTP_BODY_SIZES"
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

// DefaultOTLPTimeout is KeyOTLPTimeout's default, the specification's:
// the bound on one OTLP export (the exporters read the variable
// themselves) and, in lens, on a process's whole final flush, which
// traces, metrics and logs share (see Handle.Shutdown).
const DefaultOTLPTimeout = 10 * time.Second

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
// (queue full, failed exports, unflushed at shutdown) before `gymlens run`
// exits non-zero: 1 %. Losses below it are still reported.
const DefaultMaxSpanLoss = 0.01

// Settings lists every variable lens reads, in display order, each with
// how its text becomes part of a Config: adding a setting is a key
// constant, a Config field and a row here. Rows are parsed in this order,
// so a row that reads another's result (the OTLP protocol of one signal
// inherits the general one, explicit histogram boundaries check the
// aggregation, the span attribute length limit overrides the general one)
// comes after it.
var settings = []Setting{
	{Key: KeyEnabled, YAML: "enabled", Default: "false", Doc: "master switch; nothing is set up while false",
		value: boolValue(func(c *Config) *bool { return &c.Enabled })},
	{Key: KeySpanGroups, Exported: true, YAML: "span_groups", Default: "default", Doc: "comma-separated presets and span-group names to trace; empty means default, \",\" enables none",
		value: spanGroupsValue},
	{Key: KeyExporter, Exported: true, YAML: "exporter", Default: ExporterOTLP, Doc: "comma-separated exporters: otlp, console, prometheus, file, or none",
		value: exportersValue},
	{Key: KeyTracesEnabled, Exported: true, YAML: "traces_enabled", Default: "true", Doc: "export traces",
		value: boolValue(func(c *Config) *bool { return &c.TracesEnabled })},
	{Key: KeyMetricsEnabled, Exported: true, YAML: "metrics_enabled", Default: "true", Doc: "export metrics",
		value: boolValue(func(c *Config) *bool { return &c.MetricsEnabled })},
	{Key: KeyLogsEnabled, Exported: true, YAML: "logs_enabled", Default: "false", Doc: "bridge log/slog records to OpenTelemetry logs",
		value: boolValue(func(c *Config) *bool { return &c.LogsEnabled })},
	{Key: KeyExportStrategy, YAML: "export_strategy", Default: "all_ranks", Doc: "which ranks export: all_ranks, single_rank, sampled, first_rank_per_node, or a registered one",
		value: strategyValue},
	{Key: KeyExportRank, YAML: "export_rank", Default: "-1", Doc: "the exporting rank for single_rank; a negative rank means the last rank",
		value: rankValue},
	{Key: KeyExportSampleRate, YAML: "export_sample_rate", Default: "1.0", Doc: "fraction of ranks that export under sampled, in [0,1]",
		value: fractionValue(func(c *Config) *float64 { return &c.ExportSampleRate })},
	{Key: KeyRunID, YAML: "run_id", Default: "", Doc: "run id shared by every process of one fleet",
		value: textValue(func(c *Config) *string { return &c.RunID })},
	{Key: KeyServiceNamePerServer, Exported: true, YAML: "service_name_per_server", Default: "true", Doc: "name each server's service <service name>/<server name>",
		value: boolValue(func(c *Config) *bool { return &c.ServiceNamePerServer })},
	{Key: KeyFilePath, YAML: "file_path", Default: "", Doc: "JSON-lines file the file exporter appends to",
		value: textValue(func(c *Config) *string { return &c.FilePath })},
	{Key: KeyPrometheusAddr, YAML: "prometheus_addr", Default: DefaultPrometheusAddr, Doc: "listen address of the prometheus pull endpoint",
		value: textValue(func(c *Config) *string { return &c.PrometheusAddr })},
	{Key: KeyServiceName, Standard: true, Exported: true, YAML: "service_name", Default: defaultServiceName, Doc: "service name (group) of every process",
		value: serviceNameValue},
	{Key: KeyOTLPEndpoint, Standard: true, YAML: "otlp_endpoint", Default: "", Doc: "OTLP collector endpoint; the exporter's own default when empty",
		value: textValue(func(c *Config) *string { return &c.OTLPEndpoint })},
	{Key: KeyOTLPProtocol, Standard: true, YAML: "otlp_protocol", Default: ProtocolGRPC, Doc: "OTLP transport: grpc, http/protobuf or http/json",
		value: protocolValue(func(*Config) string { return ProtocolGRPC }, func(c *Config) *string { return &c.OTLPProtocol })},
	{Key: KeyOTLPTracesProtocol, Standard: true, YAML: "otlp_traces_protocol", Default: "", Doc: "OTLP transport of traces; OTEL_EXPORTER_OTLP_PROTOCOL when empty",
		value: protocolValue(otlpProtocol, func(c *Config) *string { return &c.TracesProtocol })},
	{Key: KeyOTLPMetricsProtocol, Standard: true, YAML: "otlp_metrics_protocol", Default: "", Doc: "OTLP transport of metrics; OTEL_EXPORTER_OTLP_PROTOCOL when empty",
		value: protocolValue(otlpProtocol, func(c *Config) *string { return &c.MetricsProtocol })},
	{Key: KeyOTLPLogsProtocol, Standard: true, YAML: "otlp_logs_protocol", Default: "", Doc: "OTLP transport of logs; OTEL_EXPORTER_OTLP_PROTOCOL when empty",
		value: protocolValue(otlpProtocol, func(c *Config) *string { return &c.LogsProtocol })},
	{Key: KeyOTLPTimeout, Standard: true, YAML: "otlp_timeout_ms", Default: strconv.FormatInt(DefaultOTLPTimeout.Milliseconds(), 10), Doc: "milliseconds one OTLP export may take; also the whole budget of a process's final flush, shared by traces, metrics and logs",
		value: millisValue(func(c *Config) *time.Duration { return &c.OTLPTimeout })},
	{Key: KeyMetricExportInterval, Standard: true, YAML: "metric_export_interval_ms", Default: "10000", Doc: "milliseconds between metric exports",
		value: millisValue(func(c *Config) *time.Duration { return &c.MetricExportInterval })},
	{Key: KeyHistogramAggregation, Standard: true, YAML: "histogram_aggregation", Default: HistogramExplicit, Doc: "aggregation of the gym.* duration histograms on every exporter: explicit_bucket_histogram or base2_exponential_bucket_histogram",
		value: aggregationValue},
	{Key: KeyHistogramBoundaries, YAML: "histogram_boundaries_ms", Default: "", Doc: "explicit bucket boundaries of the gym.* millisecond histograms, ascending and comma-separated (for example 100,1000,10000,60000,600000,3600000); empty keeps the OpenTelemetry default buckets, as NeMo Gym; not with base2_exponential_bucket_histogram",
		value: boundariesValue},
	{Key: KeySemconvStabilityOptIn, Standard: true, YAML: "semconv_stability_opt_in", Default: "http", Doc: "HTTP server metric conventions, a comma list as Python's instrumentation reads it: http (new only), http/dup (old and new); a list with neither means the old ones (Python's default when unset)"},
	{Key: KeyHTTPBodySizes, YAML: "http_body_sizes", Default: "false", Doc: "record the HTTP request and response body sizes, server and client side (http.server.request.body.size and its siblings, bytes); off, bodies are not wrapped",
		value: boolValue(func(c *Config) *bool { return &c.HTTPBodySizes })},
	{Key: KeyBSPScheduleDelay, Standard: true, YAML: "span_schedule_delay_ms", Default: strconv.FormatInt(defaultScheduleDelay.Milliseconds(), 10), Doc: "longest wait, in milliseconds, before queued spans are exported",
		value: millisValue(func(c *Config) *time.Duration { return &c.SpanScheduleDelay })},
	{Key: KeyBSPExportTimeout, Standard: true, YAML: "span_export_timeout_ms", Default: strconv.FormatInt(defaultExportTimeout.Milliseconds(), 10), Doc: "milliseconds one span export may take before it is abandoned",
		value: millisValue(func(c *Config) *time.Duration { return &c.SpanExportTimeout })},
	{Key: KeyBSPMaxQueueSize, Standard: true, YAML: "span_queue_size", Default: strconv.Itoa(DefaultSpanQueueSize), Doc: "finished spans held for export; further spans are dropped and counted",
		value: countValue(maxSpanQueueSize, func(c *Config) *int { return &c.SpanQueueSize })},
	{Key: KeyAttributeValueLengthLimit, Standard: true, YAML: "attribute_value_length_limit", Default: strconv.Itoa(DefaultAttributeValueLengthLimit), Doc: "longest span, event and link attribute value, in bytes (longer ones are truncated); negative for no limit",
		value: lengthLimitValue(true)},
	{Key: KeySpanAttributeValueLengthLimit, Standard: true, YAML: "span_attribute_value_length_limit", Default: "", Doc: "the attribute value length limit for spans; OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT when empty",
		value: lengthLimitValue(false)},
	{Key: KeyMaxSpanLoss, YAML: "max_span_loss", Default: strconv.FormatFloat(DefaultMaxSpanLoss, 'g', -1, 64), Doc: "fraction of a process's spans telemetry may lose (queue full, failed exports) before gymlens run exits 1, in [0,1]",
		value: fractionValue(func(c *Config) *float64 { return &c.MaxSpanLoss })},
	// A batch above the queue size is not an error: the processor caps it
	// at the queue size, as the OpenTelemetry SDK does.
	{Key: KeyBSPMaxExportBatch, Standard: true, YAML: "span_export_batch_size", Default: strconv.Itoa(DefaultSpanBatchSize), Doc: "most spans sent in one export; capped at the queue size",
		value: countValue(maxSpanQueueSize, func(c *Config) *int { return &c.SpanBatchSize })},
}

// defaultServiceName is the service name when OTEL_SERVICE_NAME is unset.
const defaultServiceName = "nemo-gym"

// yamlKeyOf returns the telemetry-block key of setting key, or "".
func yamlKeyOf(key string) string {
	for _, s := range settings {
		if s.Key == key {
			return s.YAML
		}
	}
	return ""
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
		if s.value != nil && s.value.show != nil {
			return s.value.show(&c)
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
	OTLPTimeout          time.Duration // KeyOTLPTimeout (see DefaultOTLPTimeout)
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
	// HTTPBodySizes is KeyHTTPBodySizes: the HTTP body size histograms
	// are recorded.
	HTTPBodySizes bool

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
	l := &loader{raw: raw, groups: opts.Groups}
	for _, s := range settings {
		if s.value != nil {
			s.value.parse(l, s.Key, &cfg)
		}
	}
	return cfg, errors.Join(l.errs...)
}

// loader is one LoadConfig call's state: the text of every setting and the
// bad values found so far.
type loader struct {
	raw    map[string]Source
	errs   []error
	groups *GroupSet
}

// text is a setting's text, trimmed.
func (l *loader) text(key string) string { return strings.TrimSpace(l.raw[key].Value) }

// bad records that setting key's value is wrong, naming where it came from.
func (l *loader) bad(key, reason string) {
	src := l.raw[key]
	name := strings.TrimPrefix(src.Origin, "env ")
	if src.Origin == "default" {
		name = "default " + key
	}
	l.errs = append(l.errs, &ConfigError{Name: name, Value: src.Value, Reason: reason})
}

// valueCodec is how one setting's text becomes part of a Config (parse,
// which reports a bad value through the loader) and how the result reads
// back (show; nil shows the trimmed text).
type valueCodec struct {
	parse func(l *loader, key string, c *Config)
	show  func(c *Config) string
	// boolean marks a true/false setting (ParseBool's spellings).
	boolean bool
}

// Boolean reports whether the setting is a true/false switch, read with
// ParseBool.
func (s Setting) Boolean() bool { return s.value != nil && s.value.boolean }

func boolValue(field func(*Config) *bool) *valueCodec {
	return &valueCodec{
		parse: func(l *loader, key string, c *Config) {
			b, err := ParseBool(l.raw[key].Value)
			if err != nil {
				l.bad(key, err.Error())
			}
			*field(c) = b
		},
		show:    func(c *Config) string { return strconv.FormatBool(*field(c)) },
		boolean: true,
	}
}

func textValue(field func(*Config) *string) *valueCodec {
	return &valueCodec{
		parse: func(l *loader, key string, c *Config) { *field(c) = l.text(key) },
		show:  func(c *Config) string { return *field(c) },
	}
}

// fractionValue reads a number in [0, 1].
func fractionValue(field func(*Config) *float64) *valueCodec {
	return &valueCodec{
		parse: func(l *loader, key string, c *Config) {
			switch f, err := ParseFloat(l.text(key)); {
			case err != nil:
				l.bad(key, err.Error())
			case f < 0 || f > 1:
				l.bad(key, "must be in [0, 1]")
			default:
				*field(c) = f
			}
		},
		show: func(c *Config) string { return strconv.FormatFloat(*field(c), 'g', -1, 64) },
	}
}

// millisValue reads a positive whole number of milliseconds.
func millisValue(field func(*Config) *time.Duration) *valueCodec {
	return &valueCodec{
		parse: func(l *loader, key string, c *Config) {
			ms, err := ParseInt(l.text(key))
			switch {
			case err != nil:
				l.bad(key, "not an integer number of milliseconds")
			case ms <= 0 || ms > maxMillisecondSetting:
				l.bad(key, fmt.Sprintf("must be a positive number of milliseconds (at most %d)", maxMillisecondSetting))
			default:
				*field(c) = time.Duration(ms) * time.Millisecond
			}
		},
		show: func(c *Config) string { return strconv.FormatInt(field(c).Milliseconds(), 10) },
	}
}

// countValue reads a whole number between 1 and limit.
func countValue(limit int, field func(*Config) *int) *valueCodec {
	return &valueCodec{
		parse: func(l *loader, key string, c *Config) {
			n, err := ParseInt(l.text(key))
			switch {
			case err != nil:
				l.bad(key, "not an integer")
			case n <= 0 || n > int64(limit):
				l.bad(key, fmt.Sprintf("must be between 1 and %d", limit))
			default:
				*field(c) = int(n)
			}
		},
		show: func(c *Config) string { return strconv.Itoa(*field(c)) },
	}
}

// protocolValue reads an OTLP transport; empty takes inherit's.
func protocolValue(inherit func(*Config) string, field func(*Config) *string) *valueCodec {
	return &valueCodec{
		parse: func(l *loader, key string, c *Config) {
			p := strings.ToLower(l.text(key))
			switch p {
			case "":
				p = inherit(c)
			case ProtocolGRPC, ProtocolHTTPProtobuf, ProtocolHTTPJSON:
			default:
				l.bad(key, "must be grpc, http/protobuf or http/json")
			}
			*field(c) = p
		},
		show: func(c *Config) string { return *field(c) },
	}
}

// otlpProtocol is what a signal's own protocol setting inherits.
func otlpProtocol(c *Config) string { return c.OTLPProtocol }

var spanGroupsValue = &valueCodec{
	parse: func(l *loader, key string, c *Config) {
		c.SpanGroups = l.text(key)
		if l.groups != nil {
			if _, err := l.groups.Resolve(c.SpanGroups); err != nil {
				l.bad(key, err.Error())
			}
		}
	},
	show: func(c *Config) string { return c.SpanGroups },
}

var exportersValue = &valueCodec{
	parse: func(l *loader, key string, c *Config) {
		exps, err := parseExporters(l.text(key))
		if err != nil {
			l.bad(key, err.Error())
		}
		c.Exporters = exps
	},
	show: func(c *Config) string { return strings.Join(c.Exporters, ",") },
}

var strategyValue = &valueCodec{
	parse: func(l *loader, key string, c *Config) {
		c.ExportStrategy = strings.ToLower(l.text(key))
		if _, err := lookupStrategy(c.ExportStrategy); err != nil {
			l.bad(key, err.Error())
		}
	},
	show: func(c *Config) string { return c.ExportStrategy },
}

// rankValue reads a 32-bit rank; any negative one means the last rank, as
// in nemo-lens.
var rankValue = &valueCodec{
	parse: func(l *loader, key string, c *Config) {
		if n, err := ParseInt(l.text(key)); err != nil || n < math.MinInt32 || n > math.MaxInt32 {
			l.bad(key, "not an integer")
		} else {
			c.ExportRank = int(n)
		}
	},
	show: func(c *Config) string { return strconv.Itoa(c.ExportRank) },
}

var serviceNameValue = &valueCodec{
	parse: func(l *loader, key string, c *Config) {
		if c.ServiceName = l.text(key); c.ServiceName == "" {
			c.ServiceName = defaultServiceName
		}
	},
	show: func(c *Config) string { return c.ServiceName },
}

var aggregationValue = &valueCodec{
	parse: func(l *loader, key string, c *Config) {
		c.HistogramAggregation = strings.ToLower(l.text(key))
		if c.HistogramAggregation != HistogramExplicit && c.HistogramAggregation != HistogramBase2Exponential {
			l.bad(key, "must be "+HistogramExplicit+" or "+HistogramBase2Exponential)
		}
	},
	show: func(c *Config) string { return c.HistogramAggregation },
}

// boundariesValue reads explicit boundaries, which the base2 exponential
// aggregation (parsed before) cannot take.
var boundariesValue = &valueCodec{
	parse: func(l *loader, key string, c *Config) {
		b := l.text(key)
		if b == "" {
			return
		}
		bounds, err := parseBoundaries(b)
		switch {
		case err != nil:
			l.bad(key, err.Error())
		case c.HistogramAggregation == HistogramBase2Exponential:
			l.bad(key, "explicit boundaries cannot be combined with "+KeyHistogramAggregation+"="+HistogramBase2Exponential)
		default:
			c.HistogramBoundariesMS = bounds
		}
	},
}

// lengthLimitValue reads an attribute value length limit: a positive
// number of bytes, or negative for none. The general row (general true)
// sets the limit, DefaultAttributeValueLengthLimit when unset; the span
// row, after it, overrides it when set.
func lengthLimitValue(general bool) *valueCodec {
	return &valueCodec{
		parse: func(l *loader, key string, c *Config) {
			if general {
				c.AttributeValueLengthLimit = DefaultAttributeValueLengthLimit
			}
			t := l.text(key)
			if t == "" {
				return
			}
			n, err := ParseInt(t)
			switch {
			case err != nil:
				l.bad(key, "not an integer")
			case n == 0:
				l.bad(key, "must be a positive number of bytes, or negative for no limit")
			case n < 0:
				c.AttributeValueLengthLimit = -1
			case n > math.MaxInt32:
				l.bad(key, fmt.Sprintf("must be at most %d", math.MaxInt32))
			default:
				c.AttributeValueLengthLimit = int(n)
			}
		},
		show: func(c *Config) string { return strconv.Itoa(c.AttributeValueLengthLimit) },
	}
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

// ParseBool accepts the words of contract.BoolWord (1/true/yes/on and
// 0/false/no/off in any case, surrounding spaces ignored). Anything else
// is an error.
func ParseBool(s string) (bool, error) {
	if v, ok := contract.BoolWord(s); ok {
		return v, nil
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
