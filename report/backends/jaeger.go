package backends

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/lens/telfile"
)

// Jaeger's HTTP query API (the one its UI uses): /api/services and
// /api/traces, whose answers wrap their data as {"data": ..., "errors": ...}.

type jaegerAnswer[T any] struct {
	Data   T `json:"data"`
	Errors []struct {
		Code int    `json:"code"`
		Msg  string `json:"msg"`
	} `json:"errors"`
}

type jaegerTrace struct {
	TraceID   string                   `json:"traceID"`
	Spans     []jaegerSpan             `json:"spans"`
	Processes map[string]jaegerProcess `json:"processes"`
}

type jaegerSpan struct {
	TraceID       string      `json:"traceID"`
	SpanID        string      `json:"spanID"`
	OperationName string      `json:"operationName"`
	References    []jaegerRef `json:"references"`
	StartTime     int64       `json:"startTime"` // µs since the epoch
	Duration      int64       `json:"duration"`  // µs
	Tags          []jaegerKV  `json:"tags"`
	Logs          []jaegerLog `json:"logs"`
	ProcessID     string      `json:"processID"`
}

type jaegerRef struct {
	RefType string `json:"refType"`
	TraceID string `json:"traceID"`
	SpanID  string `json:"spanID"`
}

type jaegerKV struct {
	Key   string          `json:"key"`
	Type  string          `json:"type"`
	Value json.RawMessage `json:"value"`
}

type jaegerLog struct {
	Timestamp int64      `json:"timestamp"`
	Fields    []jaegerKV `json:"fields"`
}

type jaegerProcess struct {
	ServiceName string     `json:"serviceName"`
	Tags        []jaegerKV `json:"tags"`
}

// value decodes a tag's value by its type: strings, booleans, int64
// (kept exact) and float64; anything else as its JSON text.
func (kv jaegerKV) value() any {
	switch kv.Type {
	case "int64":
		var n json.Number
		if json.Unmarshal(kv.Value, &n) == nil {
			if i, err := n.Int64(); err == nil {
				return i
			}
		}
	case "float64":
		var f float64
		if json.Unmarshal(kv.Value, &f) == nil {
			return f
		}
	case "bool":
		var b bool
		if json.Unmarshal(kv.Value, &b) == nil {
			return b
		}
	default:
		var s string
		if json.Unmarshal(kv.Value, &s) == nil {
			return s
		}
	}
	return string(kv.Value)
}

// Tags Jaeger derives from a span's OTLP fields rather than its
// attributes; they go back into the fields, not the attributes.
const (
	tagSpanKind    = "span.kind"
	tagStatusCode  = "otel.status_code"
	tagStatusDesc  = "otel.status_description"
	tagScopeName   = "otel.scope.name"
	tagScopeVer    = "otel.scope.version"
	tagError       = "error"
	tagSpanFormat  = "internal.span.format"
	logEventField  = "event"
	refChildOf     = "CHILD_OF"
	refFollowsFrom = "FOLLOWS_FROM"
)

// jaegerServices lists the services Jaeger knows.
func (f *fetcher) jaegerServices(ctx context.Context) ([]string, error) {
	var a jaegerAnswer[[]string]
	if err := f.getJSON(ctx, f.opts.JaegerURL+"/api/services", &a); err != nil {
		return nil, err
	}
	if len(a.Errors) > 0 {
		return nil, fmt.Errorf("jaeger /api/services: %s", a.Errors[0].Msg)
	}
	sort.Strings(a.Data)
	return a.Data, nil
}

// jaegerRun searches every service for traces with a span from a process
// of the run (resource attribute nemo.run.id), newest first, up to
// Options.TraceLimit per service, and returns them by trace id: a trace
// found through several services is kept once, with the most spans.
func (f *fetcher) jaegerRun(ctx context.Context) (map[string]*jaegerTrace, error) {
	services, err := f.jaegerServices(ctx)
	if err != nil {
		return nil, err
	}
	tags, _ := json.Marshal(map[string]string{contract.AttrRunID: f.opts.RunID})
	out := map[string]*jaegerTrace{}
	for _, svc := range services {
		q := url.Values{
			"service":  {svc},
			"tags":     {string(tags)},
			"limit":    {strconv.Itoa(f.opts.TraceLimit)},
			"lookback": {"custom"},
			"start":    {strconv.FormatInt(f.opts.Since.UnixMicro(), 10)},
			"end":      {strconv.FormatInt(f.opts.Until.UnixMicro(), 10)},
		}
		var a jaegerAnswer[[]*jaegerTrace]
		if err := f.getJSON(ctx, f.opts.JaegerURL+"/api/traces?"+q.Encode(), &a); err != nil {
			return nil, err
		}
		if len(a.Errors) > 0 {
			return nil, fmt.Errorf("jaeger /api/traces?service=%s: %s", svc, a.Errors[0].Msg)
		}
		if len(a.Data) >= f.opts.TraceLimit {
			f.stats.TraceLimitHit = append(f.stats.TraceLimitHit, svc)
		}
		for _, t := range a.Data {
			if old, ok := out[t.TraceID]; !ok || len(t.Spans) > len(old.Spans) {
				out[t.TraceID] = t
			}
		}
	}
	return out, nil
}

// hexID pads a Jaeger id (which drops leading zeros) to n hex digits.
func hexID(id string, n int) string {
	id = strings.ToLower(id)
	if len(id) < n {
		id = strings.Repeat("0", n-len(id)) + id
	}
	return id
}

// addTraces converts Jaeger's traces into spans of the processes they came
// from.
func (f *fetcher) addTraces(traces map[string]*jaegerTrace) {
	ids := make([]string, 0, len(traces))
	for id := range traces {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		t := traces[id]
		procOf := map[string]string{} // span id -> Jaeger process id
		for _, s := range t.Spans {
			procOf[hexID(s.SpanID, 16)] = s.ProcessID
		}
		for _, s := range t.Spans {
			jp, ok := t.Processes[s.ProcessID]
			if !ok {
				continue
			}
			attrs := map[string]any{contract.AttrServiceName: jp.ServiceName}
			for _, kv := range jp.Tags {
				attrs[kv.Key] = kv.value()
			}
			p := f.process(attrs)
			span := convertSpan(s)
			if span.ParentSpanID != "" {
				if parentProc, found := procOf[span.ParentSpanID]; found {
					span.ParentRemote = parentProc != s.ProcessID
				} else {
					// A parent Jaeger does not hold is another process's
					// as far as this report can tell.
					span.ParentRemote = true
				}
			}
			p.spans = append(p.spans, span)
			f.stats.Spans++
		}
		f.stats.Traces++
	}
}

// convertSpan turns a Jaeger span back into the run directory's span.
func convertSpan(s jaegerSpan) *telfile.Span {
	out := &telfile.Span{
		TraceID:    hexID(s.TraceID, 32),
		SpanID:     hexID(s.SpanID, 16),
		Name:       s.OperationName,
		Kind:       telfile.KindInternal,
		StartNS:    s.StartTime * int64(time.Microsecond),
		EndNS:      (s.StartTime + s.Duration) * int64(time.Microsecond),
		Status:     telfile.StatusUnset,
		Attributes: map[string]any{},
	}
	for _, r := range s.References {
		switch {
		case r.RefType == refChildOf && out.ParentSpanID == "" && hexID(r.TraceID, 32) == out.TraceID:
			out.ParentSpanID = hexID(r.SpanID, 16)
		default:
			out.Links = append(out.Links, telfile.Link{TraceID: hexID(r.TraceID, 32), SpanID: hexID(r.SpanID, 16)})
		}
	}
	for _, kv := range s.Tags {
		v := kv.value()
		switch kv.Key {
		case tagSpanKind:
			switch k := fmt.Sprint(v); k {
			case telfile.KindServer, telfile.KindClient, telfile.KindProducer, telfile.KindConsumer:
				out.Kind = k
			}
		case tagStatusCode:
			switch fmt.Sprint(v) {
			case "ERROR":
				out.Status = telfile.StatusError
			case "OK":
				out.Status = telfile.StatusOK
			}
		case tagStatusDesc:
			out.StatusMessage = fmt.Sprint(v)
		case tagScopeName:
			out.Scope = fmt.Sprint(v)
		case tagScopeVer, tagError, tagSpanFormat:
		default:
			out.Attributes[kv.Key] = v
		}
	}
	for _, l := range s.Logs {
		ev := telfile.Event{TimeNS: l.Timestamp * int64(time.Microsecond), Attributes: map[string]any{}}
		for _, kv := range l.Fields {
			if kv.Key == logEventField {
				ev.Name = fmt.Sprint(kv.value())
				continue
			}
			ev.Attributes[kv.Key] = kv.value()
		}
		out.Events = append(out.Events, ev)
	}
	return out
}
