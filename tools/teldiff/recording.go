package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	colmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// lowCardinality is the most distinct values a key may have for its values
// to be compared; a key with more is compared by name only.
const lowCardinality = 6

// Summary is what one recording holds, reduced to what the two sides can
// be compared on: no timestamps, ids or measured values.
type Summary struct {
	// Resource maps each resource attribute key to its distinct values.
	Resource map[string][]string `json:"resource"`
	// Scopes maps a signal (traces, metrics, logs) to the instrumentation
	// scopes seen ("name" or "name version").
	Scopes map[string][]string `json:"scopes"`
	// Metrics maps a metric name to its shape.
	Metrics map[string]*Metric `json:"metrics"`
	// Spans maps a span name to its shape.
	Spans map[string]*Span `json:"spans"`
	// LogRecords counts the log records.
	LogRecords int `json:"log_records"`
	// Requests counts the export requests per signal.
	Requests map[string]int `json:"requests"`
}

// Metric is the shape of one metric across every request of a recording.
// Each field holds the distinct values seen, sorted.
type Metric struct {
	Scopes        []string `json:"scopes"`
	Units         []string `json:"units"`
	Kinds         []string `json:"kinds"`
	ValueTypes    []string `json:"value_types,omitempty"`
	Temporalities []string `json:"temporalities,omitempty"`
	// Bounds holds each distinct list of explicit histogram bucket
	// boundaries, written as comma-separated numbers.
	Bounds   []string `json:"bounds,omitempty"`
	AttrKeys []string `json:"attr_keys"`
	// AttrValues holds the distinct values of each attribute key that has
	// at most lowCardinality of them.
	AttrValues map[string][]string `json:"attr_values"`
	Points     int                 `json:"points"`
}

// Span is the shape of the spans of one name.
type Span struct {
	Kinds    []string `json:"kinds"`
	Scopes   []string `json:"scopes"`
	AttrKeys []string `json:"attr_keys"`
	// AttrValues is as Metric.AttrValues.
	AttrValues map[string][]string `json:"attr_values"`
	Events     []string            `json:"events,omitempty"`
	Statuses   []string            `json:"statuses"`
	// TraceIDs holds the distinct trace ids, hex; only the first
	// lowCardinality+1 are kept.
	TraceIDs []string `json:"trace_ids"`
	Count    int      `json:"count"`
}

// set collects distinct strings.
type set map[string]struct{}

func (s set) add(v string) { s[v] = struct{}{} }

func (s set) sorted() []string { return slices.Sorted(maps.Keys(s)) }

// valueSets collects, per key, the distinct values.
type valueSets map[string]set

func (v valueSets) add(key, value string) {
	if v[key] == nil {
		v[key] = set{}
	}
	v[key].add(value)
}

func (v valueSets) keys() []string { return slices.Sorted(maps.Keys(v)) }

// lowCardinalityValues keeps the keys with few distinct values.
func (v valueSets) lowCardinalityValues() map[string][]string {
	out := map[string][]string{}
	for k, vals := range v {
		if len(vals) <= lowCardinality {
			out[k] = vals.sorted()
		}
	}
	return out
}

// builder accumulates a Summary.
type builder struct {
	resource valueSets
	scopes   valueSets
	metrics  map[string]*metricAcc
	spans    map[string]*spanAcc
	logs     int
	requests map[string]int
}

type metricAcc struct {
	scopes, units, kinds, valueTypes, temporalities, bounds set
	attrs                                                   valueSets
	points                                                  int
}

type spanAcc struct {
	kinds, scopes, events, statuses set
	attrs                           valueSets
	traceIDs                        set
	count                           int
}

// ReadRecording reads a recording written by otlpsink -record.
func ReadRecording(r io.Reader) (*Summary, error) {
	b := &builder{resource: valueSets{}, scopes: valueSets{}, metrics: map[string]*metricAcc{},
		spans: map[string]*spanAcc{}, requests: map[string]int{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 256<<20)
	for n := 1; sc.Scan(); n++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		if err := b.line(sc.Bytes()); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read the recording: %w", err)
	}
	return b.summary(), nil
}

func (b *builder) line(data []byte) error {
	var line struct {
		Signal  string          `json:"signal"`
		Request json.RawMessage `json:"request"`
	}
	if err := json.Unmarshal(data, &line); err != nil {
		return fmt.Errorf("not a recording line: %w", err)
	}
	b.requests[line.Signal]++
	switch line.Signal {
	case "traces":
		var req coltrace.ExportTraceServiceRequest
		if err := protojson.Unmarshal(line.Request, &req); err != nil {
			return fmt.Errorf("traces request: %w", err)
		}
		for _, rs := range req.GetResourceSpans() {
			b.addResource(rs.GetResource().GetAttributes())
			for _, ss := range rs.GetScopeSpans() {
				scope := scopeName(ss.GetScope())
				b.scopes.add("traces", scope)
				for _, sp := range ss.GetSpans() {
					b.addSpan(scope, sp)
				}
			}
		}
	case "metrics":
		var req colmetrics.ExportMetricsServiceRequest
		if err := protojson.Unmarshal(line.Request, &req); err != nil {
			return fmt.Errorf("metrics request: %w", err)
		}
		for _, rm := range req.GetResourceMetrics() {
			b.addResource(rm.GetResource().GetAttributes())
			for _, sm := range rm.GetScopeMetrics() {
				scope := scopeName(sm.GetScope())
				b.scopes.add("metrics", scope)
				for _, m := range sm.GetMetrics() {
					b.addMetric(scope, m)
				}
			}
		}
	case "logs":
		// Only counted and scoped: a log record's body is free text.
		var req struct {
			ResourceLogs []struct {
				Resource struct {
					Attributes json.RawMessage `json:"attributes"`
				} `json:"resource"`
				ScopeLogs []struct {
					Scope      *struct{ Name, Version string } `json:"scope"`
					LogRecords []json.RawMessage               `json:"logRecords"`
				} `json:"scopeLogs"`
			} `json:"resourceLogs"`
		}
		if err := json.Unmarshal(line.Request, &req); err != nil {
			return fmt.Errorf("logs request: %w", err)
		}
		for _, rl := range req.ResourceLogs {
			for _, sl := range rl.ScopeLogs {
				scope := "(no scope)"
				if sl.Scope != nil {
					scope = strings.TrimSpace(sl.Scope.Name + " " + sl.Scope.Version)
				}
				b.scopes.add("logs", scope)
				b.logs += len(sl.LogRecords)
			}
		}
	default:
		return fmt.Errorf("unknown signal %q", line.Signal)
	}
	return nil
}

func scopeName(s *commonpb.InstrumentationScope) string {
	if s.GetName() == "" {
		return "(no scope)"
	}
	return strings.TrimSpace(s.GetName() + " " + s.GetVersion())
}

func (b *builder) addResource(attrs []*commonpb.KeyValue) {
	for _, kv := range attrs {
		b.resource.add(kv.GetKey(), anyString(kv.GetValue()))
	}
}

func (b *builder) addSpan(scope string, sp *tracepb.Span) {
	a := b.spans[sp.GetName()]
	if a == nil {
		a = &spanAcc{kinds: set{}, scopes: set{}, events: set{}, statuses: set{}, attrs: valueSets{}, traceIDs: set{}}
		b.spans[sp.GetName()] = a
	}
	a.count++
	a.kinds.add(strings.TrimPrefix(sp.GetKind().String(), "SPAN_KIND_"))
	a.scopes.add(scope)
	a.statuses.add(strings.TrimPrefix(sp.GetStatus().GetCode().String(), "STATUS_CODE_"))
	for _, kv := range sp.GetAttributes() {
		a.attrs.add(kv.GetKey(), anyString(kv.GetValue()))
	}
	for _, ev := range sp.GetEvents() {
		a.events.add(ev.GetName())
	}
	if len(a.traceIDs) <= lowCardinality {
		a.traceIDs.add(fmt.Sprintf("%x", sp.GetTraceId()))
	}
}

func (b *builder) addMetric(scope string, m *metricspb.Metric) {
	a := b.metrics[m.GetName()]
	if a == nil {
		a = &metricAcc{scopes: set{}, units: set{}, kinds: set{}, valueTypes: set{}, temporalities: set{}, bounds: set{}, attrs: valueSets{}}
		b.metrics[m.GetName()] = a
	}
	a.scopes.add(scope)
	a.units.add(unitName(m.GetUnit()))
	a.kinds.add(kindName(m))
	number := func(points []*metricspb.NumberDataPoint) {
		for _, p := range points {
			a.points++
			a.attrs.addAll(p.GetAttributes())
			switch p.GetValue().(type) {
			case *metricspb.NumberDataPoint_AsInt:
				a.valueTypes.add("int")
			case *metricspb.NumberDataPoint_AsDouble:
				a.valueTypes.add("double")
			}
		}
	}
	temporality := func(t metricspb.AggregationTemporality) {
		a.temporalities.add(strings.ToLower(strings.TrimPrefix(t.String(), "AGGREGATION_TEMPORALITY_")))
	}
	switch d := m.GetData().(type) {
	case *metricspb.Metric_Gauge:
		number(d.Gauge.GetDataPoints())
	case *metricspb.Metric_Sum:
		temporality(d.Sum.GetAggregationTemporality())
		number(d.Sum.GetDataPoints())
	case *metricspb.Metric_Histogram:
		temporality(d.Histogram.GetAggregationTemporality())
		for _, p := range d.Histogram.GetDataPoints() {
			a.points++
			a.attrs.addAll(p.GetAttributes())
			a.bounds.add(formatBounds(p.GetExplicitBounds()))
		}
	case *metricspb.Metric_ExponentialHistogram:
		temporality(d.ExponentialHistogram.GetAggregationTemporality())
		for _, p := range d.ExponentialHistogram.GetDataPoints() {
			a.points++
			a.attrs.addAll(p.GetAttributes())
		}
	case *metricspb.Metric_Summary:
		for _, p := range d.Summary.GetDataPoints() {
			a.points++
			a.attrs.addAll(p.GetAttributes())
		}
	}
}

func (v valueSets) addAll(attrs []*commonpb.KeyValue) {
	for _, kv := range attrs {
		v.add(kv.GetKey(), anyString(kv.GetValue()))
	}
}

// unitName shows an empty unit as such.
func unitName(u string) string {
	if u == "" {
		return "(none)"
	}
	return u
}

// kindName is the OTLP data kind, with a sum's monotonicity.
func kindName(m *metricspb.Metric) string {
	switch d := m.GetData().(type) {
	case *metricspb.Metric_Gauge:
		return "gauge"
	case *metricspb.Metric_Sum:
		if d.Sum.GetIsMonotonic() {
			return "sum (monotonic)"
		}
		return "sum (non-monotonic)"
	case *metricspb.Metric_Histogram:
		return "histogram"
	case *metricspb.Metric_ExponentialHistogram:
		return "exponential histogram"
	case *metricspb.Metric_Summary:
		return "summary"
	}
	return "(no data)"
}

func formatBounds(bounds []float64) string {
	parts := make([]string, len(bounds))
	for i, v := range bounds {
		parts[i] = strconv.FormatFloat(v, 'g', -1, 64)
	}
	return strings.Join(parts, ",")
}

// anyString renders an attribute value; arrays and maps as JSON.
func anyString(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_DoubleValue:
		return strconv.FormatFloat(x.DoubleValue, 'g', -1, 64)
	case *commonpb.AnyValue_BoolValue:
		return strconv.FormatBool(x.BoolValue)
	case nil:
		return ""
	}
	b, err := protojson.Marshal(v)
	if err != nil {
		return "(unprintable)"
	}
	return string(b)
}

func (b *builder) summary() *Summary {
	s := &Summary{Resource: map[string][]string{}, Scopes: map[string][]string{}, Metrics: map[string]*Metric{},
		Spans: map[string]*Span{}, LogRecords: b.logs, Requests: b.requests}
	for k, v := range b.resource {
		s.Resource[k] = v.sorted()
	}
	for k, v := range b.scopes {
		s.Scopes[k] = v.sorted()
	}
	for name, a := range b.metrics {
		s.Metrics[name] = &Metric{Scopes: a.scopes.sorted(), Units: a.units.sorted(), Kinds: a.kinds.sorted(),
			ValueTypes: a.valueTypes.sorted(), Temporalities: a.temporalities.sorted(), Bounds: a.bounds.sorted(),
			AttrKeys: a.attrs.keys(), AttrValues: a.attrs.lowCardinalityValues(), Points: a.points}
	}
	for name, a := range b.spans {
		s.Spans[name] = &Span{Kinds: a.kinds.sorted(), Scopes: a.scopes.sorted(), AttrKeys: a.attrs.keys(),
			AttrValues: a.attrs.lowCardinalityValues(), Events: a.events.sorted(), Statuses: a.statuses.sorted(),
			TraceIDs: a.traceIDs.sorted(), Count: a.count}
	}
	return s
}
