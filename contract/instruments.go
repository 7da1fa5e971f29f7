package contract

import "strings"

// Kind is how an instrument is recorded and what it exports.
type Kind uint8

// Instrument kinds.
const (
	// Histogram is a synchronous float64 histogram.
	Histogram Kind = iota + 1
	// Counter is a monotonic int64 sum, recorded synchronously or
	// observed from a tally (Instrument.Observed).
	Counter
	// UpDownCounter is a non-monotonic int64 sum.
	UpDownCounter
	// Gauge is a last-value gauge, recorded synchronously or observed.
	Gauge
)

// String names the kind as the docs do.
func (k Kind) String() string {
	switch k {
	case Histogram:
		return "histogram"
	case Counter:
		return "counter"
	case UpDownCounter:
		return "up-down counter"
	case Gauge:
		return "gauge"
	}
	return "unknown"
}

// Source says whose contract an instrument follows.
type Source uint8

// Sources.
const (
	// SourceGym is NeMo Gym's module, at the nemo-lens commit Gym pins.
	SourceGym Source = iota + 1
	// SourceGymNewer is NeMo Gym's newer attributed-instruments catalogue.
	SourceGymNewer
	// SourceSemconv is the OpenTelemetry semantic conventions.
	SourceSemconv
	// SourceGymlens is gymlens's own, beyond upstream.
	SourceGymlens
)

// String names the source as the docs do.
func (s Source) String() string {
	switch s {
	case SourceGym:
		return "NeMo Gym"
	case SourceGymNewer:
		return "NeMo Gym (attributed instruments)"
	case SourceSemconv:
		return "OpenTelemetry semantic conventions"
	case SourceGymlens:
		return "gymlens"
	}
	return "unknown"
}

// Instrument is one metric of the contract.
type Instrument struct {
	Name string
	Kind Kind
	// Float is true for a float64 instrument (every histogram but the
	// token-usage one, the success-rate and process gauges), false for
	// int64.
	Float bool
	// Observed is true for an instrument read by a callback at export
	// time rather than recorded at a call site.
	Observed bool
	// Unit is the UCUM unit; "" for none (upstream sets none on two of
	// its instruments, and a unit changes the Prometheus name).
	Unit        string
	Description string
	// Attrs are the attribute keys a point may carry, in order.
	Attrs []string
	// Boundaries are the explicit bucket boundaries a histogram sets;
	// nil means the SDK's default (DefaultBucketsMS).
	Boundaries []float64
	Source     Source
}

// PrometheusName is the name the OpenTelemetry Prometheus exporter gives
// the instrument (without the _bucket, _sum and _count suffixes of a
// histogram): dots become underscores, the unit is appended as a word
// (ms: milliseconds, s: seconds, MiBy: mebibytes, %: percent; "1" only on
// a Gauge, as ratio: the exporter adds no _ratio to an UpDownCounter,
// though Prometheus types both gauge; a {annotation} unit adds nothing),
// and a counter ends in _total.
func (i Instrument) PrometheusName() string {
	name := strings.ReplaceAll(i.Name, ".", "_")
	suffix := ""
	switch i.Unit {
	case "ms":
		suffix = "milliseconds"
	case "s":
		suffix = "seconds"
	case "MiBy":
		suffix = "mebibytes"
	case "By":
		suffix = "bytes"
	case "%":
		suffix = "percent"
	case "1":
		if i.Kind == Gauge {
			suffix = "ratio"
		}
	}
	if suffix != "" && !strings.HasSuffix(name, "_"+suffix) {
		name += "_" + suffix
	}
	if i.Kind == Counter && !strings.HasSuffix(name, "_total") {
		name += "_total"
	}
	return name
}

// DefaultBucketsMS are the OpenTelemetry SDK's default explicit bucket
// boundaries, which every gym.* duration histogram exports (upstream sets
// none). Treat it as read-only.
var DefaultBucketsMS = []float64{0, 5, 10, 25, 50, 75, 100, 250, 500, 750, 1000,
	2500, 5000, 7500, 10000}

// HTTPDurationBucketsS are the boundaries, in seconds, the semantic
// conventions advise for http.server.request.duration.
var HTTPDurationBucketsS = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25,
	0.5, 0.75, 1, 2.5, 5, 7.5, 10}

// GenAIDurationBucketsS are the boundaries, in seconds, the GenAI
// semantic conventions advise for gen_ai.client.operation.duration.
var GenAIDurationBucketsS = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64,
	1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}

// GenAITokenBuckets are the boundaries the GenAI semantic conventions
// advise for gen_ai.client.token.usage.
var GenAITokenBuckets = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536,
	262144, 1048576, 4194304, 16777216, 67108864}

// Instrument names.
const (
	// NeMo Gym's module.
	RolloutDuration       = "gym.rollout.duration_ms"
	VerifyDuration        = "gym.verify.duration_ms"
	VerifySuccessRate     = "gym.verify.success_rate"
	ServersActive         = "gym.servers.active"
	ServerRequestDuration = "gym.server.request_duration_ms"

	// NeMo Gym's attributed instruments.
	RolloutCompleted         = "gym.rollout.completed_total"
	ConcurrencyQueueWait     = "gym.concurrency.queue_wait_duration_ms"
	ConcurrencyLimit         = "gym.concurrency.limit"
	ConcurrencyActive        = "gym.concurrency.active"
	ConcurrencyAvailable     = "gym.concurrency.available"
	ConcurrencyQueueDepth    = "gym.concurrency.queue_depth"
	ConcurrencyAdmissionCanc = "gym.concurrency.admission_cancelled_total"
	ModelCallDuration        = "gym.model.call_duration_ms"
	ModelTimeToFirstByte     = "gym.model.time_to_first_byte_ms"
	HTTPTimeouts             = "gym.http.timeout_total"
	HTTPRetries              = "gym.http.retry_total"
	AgentTurnCount           = "gym.agent.turn_count"
	AgentTurnDuration        = "gym.agent.turn_duration_ms"
	ToolCallDuration         = "gym.tool.call_duration_ms"
	ProcessTreeMemoryUsed    = "gym.process_tree.memory_used_mib"
	ProcessTreeCPUPercent    = "gym.process_tree.cpu_percent"

	// gymlens's own.
	VerifyCalls = "gym.verify.calls"

	// Semantic conventions.
	HTTPServerRequestDuration = "http.server.request.duration"
	HTTPServerActiveRequests  = "http.server.active_requests"
	HTTPServerDurationOld     = "http.server.duration"
	// The HTTP body sizes, recorded only when NEMO_GYM_OTEL_HTTP_BODY_SIZES
	// is on (server/instrument.go, server/client.go).
	HTTPServerRequestBodySize  = "http.server.request.body.size"
	HTTPServerResponseBodySize = "http.server.response.body.size"
	HTTPClientRequestBodySize  = "http.client.request.body.size"
	HTTPClientResponseBodySize = "http.client.response.body.size"
	GenAIOperationDuration     = "gen_ai.client.operation.duration"
	GenAITokenUsage            = "gen_ai.client.token.usage"
)

// GymPattern matches the name of every gym.* instrument (an SDK view
// selector).
const GymPattern = "gym.*"

var catalogue = []Instrument{
	{Name: RolloutDuration, Kind: Histogram, Float: true, Unit: "ms", Source: SourceGym,
		Description: "Wall time of one rollout, in milliseconds."},
	{Name: VerifyDuration, Kind: Histogram, Float: true, Unit: "ms", Source: SourceGym,
		Description: "Wall time of one verification, in milliseconds."},
	{Name: VerifySuccessRate, Kind: Gauge, Float: true, Observed: true, Source: SourceGym,
		Description: "Fraction of this process's verifications that completed, since it started."},
	{Name: ServersActive, Kind: Gauge, Source: SourceGym,
		Description: "Servers the orchestrator started that are running (written by the orchestrator only)."},
	{Name: ServerRequestDuration, Kind: Histogram, Float: true, Unit: "ms", Source: SourceGym,
		Description: "Declared for compatibility and never recorded; use http.server.request.duration."},

	{Name: RolloutCompleted, Kind: Counter, Unit: "1", Attrs: []string{AttrRolloutOutcome}, Source: SourceGymNewer,
		Description: "Rollouts finished, by outcome."},
	{Name: ConcurrencyQueueWait, Kind: Histogram, Float: true, Unit: "ms", Attrs: []string{AttrConcurrencySite}, Source: SourceGymNewer,
		Description: "Time a unit of work waited for a concurrency slot, in milliseconds."},
	{Name: ConcurrencyLimit, Kind: Gauge, Observed: true, Unit: "1", Attrs: []string{AttrConcurrencySite}, Source: SourceGymNewer,
		Description: "Slots of a concurrency limiter."},
	{Name: ConcurrencyActive, Kind: UpDownCounter, Observed: true, Unit: "1", Attrs: []string{AttrConcurrencySite}, Source: SourceGymNewer,
		Description: "Slots of a concurrency limiter in use."},
	{Name: ConcurrencyAvailable, Kind: UpDownCounter, Observed: true, Unit: "1", Attrs: []string{AttrConcurrencySite}, Source: SourceGymNewer,
		Description: "Slots of a concurrency limiter free."},
	{Name: ConcurrencyQueueDepth, Kind: UpDownCounter, Observed: true, Unit: "1", Attrs: []string{AttrConcurrencySite}, Source: SourceGymNewer,
		Description: "Units of work waiting for a concurrency slot."},
	{Name: ConcurrencyAdmissionCanc, Kind: Counter, Unit: "1", Attrs: []string{AttrConcurrencySite}, Source: SourceGymNewer,
		Description: "Units of work cancelled while waiting for a concurrency slot."},
	{Name: ModelCallDuration, Kind: Histogram, Float: true, Unit: "ms", Attrs: []string{AttrModelDialect, AttrServerName}, Source: SourceGymNewer,
		Description: "Wall time of one model call, as the caller saw it, in milliseconds."},
	{Name: ModelTimeToFirstByte, Kind: Histogram, Float: true, Unit: "ms", Attrs: []string{AttrModelDialect, AttrServerName}, Source: SourceGymNewer,
		Description: "Time from sending a model call to the first byte of its answer, in milliseconds."},
	{Name: HTTPTimeouts, Kind: Counter, Unit: "1", Attrs: []string{AttrHTTPInternal}, Source: SourceGymNewer,
		Description: "Outgoing calls that ran out of time."},
	{Name: HTTPRetries, Kind: Counter, Unit: "1", Attrs: []string{AttrHTTPRetryReason}, Source: SourceGymNewer,
		Description: "Outgoing calls retried, by why the attempt failed."},
	{Name: AgentTurnCount, Kind: Histogram, Float: true, Unit: "1", Attrs: []string{AttrAgentName}, Source: SourceGymNewer,
		Description: "Model turns of one episode."},
	{Name: AgentTurnDuration, Kind: Histogram, Float: true, Unit: "ms", Attrs: []string{AttrAgentName}, Source: SourceGymNewer,
		Description: "Wall time of one model turn and its tool calls, in milliseconds."},
	{Name: ToolCallDuration, Kind: Histogram, Float: true, Unit: "ms", Attrs: []string{AttrToolName, AttrServerName}, Source: SourceGymNewer,
		Description: "Wall time of one tool call, in milliseconds."},
	{Name: ProcessTreeMemoryUsed, Kind: Gauge, Float: true, Observed: true, Unit: "MiBy", Source: SourceGymNewer,
		Description: "Resident memory of this process and its descendants, in MiB."},
	{Name: ProcessTreeCPUPercent, Kind: Gauge, Float: true, Observed: true, Unit: "%", Source: SourceGymNewer,
		Description: "CPU use of this process and its descendants since the last reading, in percent of one core."},

	{Name: VerifyCalls, Kind: Counter, Observed: true, Unit: "{call}", Attrs: []string{AttrVerifyOutcome}, Source: SourceGymlens,
		Description: "Verifications finished, by outcome."},

	{Name: HTTPServerRequestDuration, Kind: Histogram, Float: true, Unit: "s", Boundaries: HTTPDurationBucketsS, Source: SourceSemconv,
		Attrs:       []string{AttrHTTPRoute, AttrHTTPRequestMethod, AttrHTTPResponseStatus, AttrURLScheme, AttrNetworkProtocolVersion, AttrErrorType},
		Description: "Duration of HTTP server requests."},
	// The HTTP server conventions before they went stable, which Python's
	// ASGI instrumentation emits by default; gymlens emits them when
	// OTEL_SEMCONV_STABILITY_OPT_IN asks for them (server/semconv.go).
	{Name: HTTPServerDurationOld, Kind: Histogram, Float: true, Unit: "ms", Source: SourceSemconv,
		Attrs: []string{AttrOldHTTPMethod, AttrOldHTTPScheme, AttrOldHTTPStatusCode, AttrOldHTTPFlavor,
			AttrOldHTTPHost, AttrOldHTTPServerName, AttrOldNetHostPort, AttrOldHTTPTarget},
		Description: "Measures the duration of inbound HTTP requests."},
	// Recorded under every setting of OTEL_SEMCONV_STABILITY_OPT_IN; the
	// new keys (the first two) with http or http/dup, the old ones without
	// http or with http/dup, as Python's ASGI instrumentation does.
	{Name: HTTPServerActiveRequests, Kind: UpDownCounter, Observed: true, Unit: "{request}", Source: SourceSemconv,
		Attrs: []string{AttrHTTPRequestMethod, AttrURLScheme, AttrOldHTTPMethod, AttrOldHTTPScheme,
			AttrOldHTTPFlavor, AttrOldHTTPHost, AttrOldHTTPServerName},
		Description: "Number of active HTTP server requests."},
	// Body sizes in bytes, as read and written: the server's with the
	// attributes of http.server.request.duration (stable conventions),
	// the client's per attempt with the CLIENT span's peer attributes.
	// Python's ASGI instrumentation records the server pair from the
	// Content-Length headers, always; gymlens from the bytes that passed,
	// when asked (opentelemetry-instrumentation-asgi 0.66b1, as installed
	// with nemo-gym 0.7.0: asgi/__init__.py:638-657, :811-843).
	{Name: HTTPServerRequestBodySize, Kind: Histogram, Unit: "By", Source: SourceSemconv,
		Attrs:       []string{AttrHTTPRoute, AttrHTTPRequestMethod, AttrHTTPResponseStatus, AttrURLScheme, AttrNetworkProtocolVersion, AttrErrorType},
		Description: "Size of HTTP server request bodies."},
	{Name: HTTPServerResponseBodySize, Kind: Histogram, Unit: "By", Source: SourceSemconv,
		Attrs:       []string{AttrHTTPRoute, AttrHTTPRequestMethod, AttrHTTPResponseStatus, AttrURLScheme, AttrNetworkProtocolVersion, AttrErrorType},
		Description: "Size of HTTP server response bodies."},
	{Name: HTTPClientRequestBodySize, Kind: Histogram, Unit: "By", Source: SourceSemconv,
		Attrs:       []string{AttrHTTPRequestMethod, AttrServerAddress, AttrServerPort, AttrHTTPResponseStatus, AttrNetworkProtocolVersion, AttrErrorType},
		Description: "Size of HTTP client request bodies."},
	{Name: HTTPClientResponseBodySize, Kind: Histogram, Unit: "By", Source: SourceSemconv,
		Attrs:       []string{AttrHTTPRequestMethod, AttrServerAddress, AttrServerPort, AttrHTTPResponseStatus, AttrNetworkProtocolVersion, AttrErrorType},
		Description: "Size of HTTP client response bodies."},
	{Name: GenAIOperationDuration, Kind: Histogram, Float: true, Unit: "s", Boundaries: GenAIDurationBucketsS, Source: SourceSemconv,
		Attrs:       []string{AttrGenAIOperationName, AttrGenAIProviderName, AttrGenAIRequestModel, AttrGenAIResponseModel, AttrServerAddress, AttrServerPort, AttrErrorType},
		Description: "Duration of a GenAI client operation."},
	{Name: GenAITokenUsage, Kind: Histogram, Float: false, Unit: "{token}", Boundaries: GenAITokenBuckets, Source: SourceSemconv,
		Attrs:       []string{AttrGenAIOperationName, AttrGenAIProviderName, AttrGenAITokenType, AttrGenAIRequestModel, AttrGenAIResponseModel, AttrServerAddress, AttrServerPort},
		Description: "Tokens used by a GenAI client operation."},
}

// Instruments returns the contract's instruments, a fresh copy each call.
func Instruments() []Instrument {
	out := make([]Instrument, len(catalogue))
	copy(out, catalogue)
	return out
}

// Lookup returns the instrument named name.
func Lookup(name string) (Instrument, bool) {
	for _, in := range catalogue {
		if in.Name == name {
			return in, true
		}
	}
	return Instrument{}, false
}

// MustLookup is Lookup for a name of this package; it panics on any other,
// which is a programming error caught by the first test that runs it.
func MustLookup(name string) Instrument {
	in, ok := Lookup(name)
	if !ok {
		panic("contract: no instrument " + name)
	}
	return in
}
