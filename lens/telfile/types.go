package telfile

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/gymlens/gymlens/internal/jsonstr"
)

// FormatVersion is the version of the line layout this package writes and
// the highest version it accepts when reading.
const FormatVersion = 1

// Values of the "type" field, one per kind of line.
const (
	// TypeResource marks the header line describing the producing process.
	TypeResource = "resource"
	// TypeSpan marks a finished span.
	TypeSpan = "span"
	// TypeMetric marks one metric stream as seen at one collection.
	TypeMetric = "metric"
	// TypeLog marks a log record.
	TypeLog = "log"
)

// Span kinds as written in [Span.Kind].
const (
	// KindInternal is an operation inside the process.
	KindInternal = "internal"
	// KindServer is the handling side of a synchronous request.
	KindServer = "server"
	// KindClient is the calling side of a synchronous request.
	KindClient = "client"
	// KindProducer is the sending side of an asynchronous message.
	KindProducer = "producer"
	// KindConsumer is the receiving side of an asynchronous message.
	KindConsumer = "consumer"
)

// Span status codes as written in [Span.Status].
const (
	// StatusUnset means the instrumentation did not set a status.
	StatusUnset = "unset"
	// StatusOK means the operation was explicitly marked successful.
	StatusOK = "ok"
	// StatusError means the operation failed.
	StatusError = "error"
)

// Metric kinds as written in [Metric.Kind].
const (
	// MetricSum is a sum of measurements (counters, up-down counters).
	MetricSum = "sum"
	// MetricGauge is a last-value reading.
	MetricGauge = "gauge"
	// MetricHistogram is an explicit-bucket histogram.
	MetricHistogram = "histogram"
)

// Metric temporalities as written in [Metric.Temporality].
const (
	// TemporalityCumulative means each point covers everything since StartNS
	// and StartNS stays fixed between collections.
	TemporalityCumulative = "cumulative"
	// TemporalityDelta means each point covers only the interval since the
	// previous collection.
	TemporalityDelta = "delta"
)

// Entry is implemented by the four line types, [Resource], [Span], [Metric]
// and [Log] (and pointers to them). It lets [Encoder] accept any of them.
type Entry interface {
	// RecordType returns the value written in the line's "type" field.
	RecordType() string
}

// Resource is the header line. It describes the process (service name,
// version, host, ...) that produced the records following it.
type Resource struct {
	// Format is the layout version the writer used; see FormatVersion.
	Format int `json:"format"`
	// TimeNS is when the header was written, in Unix nanoseconds.
	TimeNS int64 `json:"time_ns"`
	// Attributes are the resource attributes.
	Attributes map[string]any `json:"attributes"`
}

// Span is one finished span.
type Span struct {
	// TraceID is the trace identifier as 32 lowercase hex digits.
	TraceID string `json:"trace_id"`
	// SpanID is the span identifier as 16 lowercase hex digits.
	SpanID string `json:"span_id"`
	// ParentSpanID is the parent's span identifier, empty for a root span.
	ParentSpanID string `json:"parent_span_id,omitempty"`
	// ParentRemote reports whether the parent came from another process.
	ParentRemote bool `json:"parent_remote,omitempty"`
	// Name is the span name.
	Name string `json:"name"`
	// Kind is one of the Kind* constants.
	Kind string `json:"kind"`
	// StartNS is the start time in Unix nanoseconds.
	StartNS int64 `json:"start_ns"`
	// EndNS is the end time in Unix nanoseconds.
	EndNS int64 `json:"end_ns"`
	// Status is one of the Status* constants.
	Status string `json:"status"`
	// StatusMessage is the description attached to an error status.
	StatusMessage string `json:"status_message,omitempty"`
	// Attributes are the span attributes.
	Attributes map[string]any `json:"attributes"`
	// Events are the timestamped events recorded on the span.
	Events []Event `json:"events,omitempty"`
	// Links point at related spans, usually in other traces (each rollout's
	// trace links back to the collection job that started it).
	Links []Link `json:"links,omitempty"`
	// Scope is the name of the instrumentation scope that created the span.
	Scope string `json:"scope"`
}

// Link is a reference from a span to another span.
type Link struct {
	// TraceID and SpanID identify the linked span, in lowercase hex.
	TraceID string `json:"trace_id"`
	SpanID  string `json:"span_id"`
	// Attributes describe the link; omitted when there are none.
	Attributes map[string]any `json:"attributes,omitempty"`
}

// Event is a timestamped annotation recorded on a span.
type Event struct {
	// Name is the event name.
	Name string `json:"name"`
	// TimeNS is when the event happened, in Unix nanoseconds.
	TimeNS int64 `json:"time_ns"`
	// Attributes are the event attributes.
	Attributes map[string]any `json:"attributes"`
}

// Metric is one metric stream as collected at one moment.
type Metric struct {
	// TimeNS is when the collection happened, in Unix nanoseconds.
	TimeNS int64 `json:"time_ns"`
	// Scope is the name of the instrumentation scope owning the instrument.
	Scope string `json:"scope"`
	// Name is the instrument name.
	Name string `json:"name"`
	// Description is the instrument description, if any.
	Description string `json:"description,omitempty"`
	// Unit is the instrument unit (may be empty).
	Unit string `json:"unit"`
	// Kind is one of the Metric* constants and decides which Point fields
	// are meaningful.
	Kind string `json:"kind"`
	// Temporality is one of the Temporality* constants; empty for gauges.
	Temporality string `json:"temporality,omitempty"`
	// Monotonic reports whether a sum only ever increases. It is written for
	// sums only.
	Monotonic bool `json:"monotonic"`
	// Points holds one entry per distinct attribute set.
	Points []Point `json:"points"`
}

// Point is one data point of a [Metric]. Sums and gauges use Value; the
// histogram fields (Count, Sum, Min, Max, Bounds, Counts) are used only
// when the metric's Kind is MetricHistogram.
type Point struct {
	// Attributes identify the stream within the metric.
	Attributes map[string]any `json:"attributes"`
	// StartNS is the start of the period the point covers, in Unix
	// nanoseconds; 0 when unknown (gauges usually have none).
	StartNS int64 `json:"start_ns"`
	// TimeNS is when the point was taken, in Unix nanoseconds.
	TimeNS int64 `json:"time_ns"`

	// Value is the reading of a sum or gauge.
	Value Number `json:"value,omitempty"`

	// Count is the number of measurements in a histogram point.
	Count uint64 `json:"count,omitempty"`
	// Sum is the sum of measurements in a histogram point.
	Sum Number `json:"sum,omitempty"`
	// Min is the smallest measurement, nil when not recorded.
	Min *Number `json:"min,omitempty"`
	// Max is the largest measurement, nil when not recorded.
	Max *Number `json:"max,omitempty"`
	// Bounds are the upper bucket boundaries, in increasing order.
	Bounds []float64 `json:"bounds,omitempty"`
	// Counts holds len(Bounds)+1 bucket counts; bucket i counts values in
	// (Bounds[i-1], Bounds[i]] and the last bucket everything above the
	// final bound.
	Counts []uint64 `json:"counts,omitempty"`
}

// Log is one log record.
type Log struct {
	// TimeNS is when the event happened, in Unix nanoseconds; 0 if unknown.
	TimeNS int64 `json:"time_ns"`
	// ObservedNS is when the logging pipeline saw the record.
	ObservedNS int64 `json:"observed_ns"`
	// Severity is the level as text, such as "INFO" or "ERROR".
	Severity string `json:"severity"`
	// SeverityNumber is the OpenTelemetry severity number (1-24, 9 = INFO).
	SeverityNumber int `json:"severity_number"`
	// EventName names the event for records that represent events.
	EventName string `json:"event_name,omitempty"`
	// Body is the message, rendered as a string.
	Body string `json:"body"`
	// Attributes are the record's attributes.
	Attributes map[string]any `json:"attributes"`
	// TraceID is the active trace when the record was emitted, if any.
	TraceID string `json:"trace_id,omitempty"`
	// SpanID is the active span when the record was emitted, if any.
	SpanID string `json:"span_id,omitempty"`
	// Scope is the name of the instrumentation scope (logger name).
	Scope string `json:"scope"`
}

// Record is one decoded line, as delivered by [Read]. Exactly one of the
// pointer fields is set, matching Type.
type Record struct {
	// Type is the line's "type" field, one of the Type* constants.
	Type string
	// Line is the 1-based line number in the input.
	Line int
	// Resource is set for resource header lines.
	Resource *Resource
	// Span is set for span lines.
	Span *Span
	// Metric is set for metric lines.
	Metric *Metric
	// Log is set for log lines.
	Log *Log
}

// RecordType implements Entry.
func (Resource) RecordType() string { return TypeResource }

// RecordType implements Entry.
func (Span) RecordType() string { return TypeSpan }

// RecordType implements Entry.
func (Metric) RecordType() string { return TypeMetric }

// RecordType implements Entry.
func (Log) RecordType() string { return TypeLog }

// Time returns the header's timestamp as a time.Time.
func (r *Resource) Time() time.Time { return time.Unix(0, r.TimeNS) }

// Start returns the span's start time.
func (s *Span) Start() time.Time { return time.Unix(0, s.StartNS) }

// End returns the span's end time.
func (s *Span) End() time.Time { return time.Unix(0, s.EndNS) }

// Duration returns how long the span lasted. It is zero or negative only if
// the recorded clock readings were.
func (s *Span) Duration() time.Duration { return time.Duration(s.EndNS - s.StartNS) }

// IsRoot reports whether the span has no parent.
func (s *Span) IsRoot() bool { return s.ParentSpanID == "" }

// Time returns the log record's timestamp, falling back to the observed
// time when the producer did not set one.
func (l *Log) Time() time.Time {
	if l.TimeNS != 0 {
		return time.Unix(0, l.TimeNS)
	}
	return time.Unix(0, l.ObservedNS)
}

// MarshalJSON writes the header with its "type" field first.
func (r Resource) MarshalJSON() ([]byte, error) {
	type plain Resource
	r.Attributes = nonNil(r.Attributes)
	return marshalTyped(TypeResource, plain(r))
}

// MarshalJSON writes the span with its "type" field first.
func (s Span) MarshalJSON() ([]byte, error) {
	type plain Span
	s.Attributes = nonNil(s.Attributes)
	if len(s.Events) > 0 {
		evs := make([]Event, len(s.Events))
		for i, e := range s.Events {
			e.Attributes = nonNil(e.Attributes)
			evs[i] = e
		}
		s.Events = evs
	}
	return marshalTyped(TypeSpan, plain(s))
}

// MarshalJSON writes the log record with its "type" field first.
func (l Log) MarshalJSON() ([]byte, error) {
	type plain Log
	l.Attributes = nonNil(l.Attributes)
	return marshalTyped(TypeLog, plain(l))
}

// The wire shapes below give each metric kind exactly the fields the format
// defines for it: "monotonic" only on sums, and either "value" or the
// histogram fields on points.

type sumMetricWire struct {
	Type        string `json:"type"`
	TimeNS      int64  `json:"time_ns"`
	Scope       string `json:"scope"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Unit        string `json:"unit"`
	Kind        string `json:"kind"`
	Temporality string `json:"temporality,omitempty"`
	Monotonic   bool   `json:"monotonic"`
	Points      any    `json:"points"`
}

type otherMetricWire struct {
	Type        string `json:"type"`
	TimeNS      int64  `json:"time_ns"`
	Scope       string `json:"scope"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Unit        string `json:"unit"`
	Kind        string `json:"kind"`
	Temporality string `json:"temporality,omitempty"`
	Points      any    `json:"points"`
}

type valuePointWire struct {
	Attributes map[string]any `json:"attributes"`
	StartNS    int64          `json:"start_ns"`
	TimeNS     int64          `json:"time_ns"`
	Value      Number         `json:"value"`
}

type histPointWire struct {
	Attributes map[string]any `json:"attributes"`
	StartNS    int64          `json:"start_ns"`
	TimeNS     int64          `json:"time_ns"`
	Count      uint64         `json:"count"`
	Sum        Number         `json:"sum"`
	Min        *Number        `json:"min,omitempty"`
	Max        *Number        `json:"max,omitempty"`
	Bounds     []float64      `json:"bounds"`
	Counts     []uint64       `json:"counts"`
}

// MarshalJSON writes the metric with its "type" field first. Points are
// written in the shape that matches Kind; for an unrecognised Kind every
// non-empty point field is written.
func (m Metric) MarshalJSON() ([]byte, error) {
	var points any
	switch m.Kind {
	case MetricSum, MetricGauge:
		ps := make([]valuePointWire, len(m.Points))
		for i, p := range m.Points {
			ps[i] = valuePointWire{nonNil(p.Attributes), p.StartNS, p.TimeNS, p.Value}
		}
		points = ps
	case MetricHistogram:
		ps := make([]histPointWire, len(m.Points))
		for i, p := range m.Points {
			bounds, counts := p.Bounds, p.Counts
			if bounds == nil {
				bounds = []float64{}
			}
			if counts == nil {
				counts = []uint64{}
			}
			ps[i] = histPointWire{nonNil(p.Attributes), p.StartNS, p.TimeNS,
				p.Count, p.Sum, p.Min, p.Max, bounds, counts}
		}
		points = ps
	default:
		ps := make([]Point, len(m.Points))
		for i, p := range m.Points {
			p.Attributes = nonNil(p.Attributes)
			ps[i] = p
		}
		points = ps
	}
	if m.Kind == MetricSum {
		return marshalNoEscape(sumMetricWire{TypeMetric, m.TimeNS, m.Scope, m.Name,
			m.Description, m.Unit, m.Kind, m.Temporality, m.Monotonic, points})
	}
	return marshalNoEscape(otherMetricWire{TypeMetric, m.TimeNS, m.Scope, m.Name,
		m.Description, m.Unit, m.Kind, m.Temporality, points})
}

// marshalTyped encodes v (a struct) with a leading "type" field.
func marshalTyped(typ string, v any) ([]byte, error) {
	body, err := marshalNoEscape(v)
	if err != nil {
		return nil, err
	}
	// body is a JSON object: splice the type field in after its opening
	// brace.
	out := make([]byte, 0, len(body)+len(typ)+12)
	out = append(out, `{"type":`...)
	out = jsonstr.AppendNoHTMLEscape(out, typ) // as marshalNoEscape writes the rest
	if len(body) > 2 {
		out = append(out, ',')
	}
	return append(out, body[1:]...), nil
}

// MarshalValue encodes v as the file writes every value: as
// encoding/json does, without the HTML escaping of <, > and &. An encoder
// that writes part of a line itself (the direct span encoder) uses it for
// the values it does not write by hand, and jsonstr.AppendNoHTMLEscape
// for strings.
func MarshalValue(v any) ([]byte, error) { return marshalNoEscape(v) }

// marshalNoEscape is json.Marshal without the HTML escaping of <, > and &,
// which only hurts readability in a log file.
func marshalNoEscape(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func nonNil(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}
