package lens

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// Redacted replaces the value of a sensitive string attribute.
const Redacted = "[REDACTED]"

var sensitiveWords = []string{"prompt", "input_text", "output_text", "text", "password", "token", "secret", "key"}

// IsSensitiveKey reports whether an attribute key names content that must
// never reach a span: one of its dot-separated segments is prompt,
// input_text, output_text, text, password, token, secret or key, or ends in
// "_" followed by one of them (api_key, access_token, ...), so
// gen_ai.prompt.0.content counts too. Case is ignored and '-' counts as '_'
// (x-api-key).
func IsSensitiveKey(key string) bool {
	key = strings.ReplaceAll(strings.ToLower(key), "-", "_")
	for seg := range strings.SplitSeq(key, ".") {
		for _, w := range sensitiveWords {
			if seg == w || strings.HasSuffix(seg, "_"+w) {
				return true
			}
		}
	}
	return false
}

// Attr converts one key and value to an attribute. Scalars (string, bool,
// the integer and float kinds) are kept; anything else (slices, maps,
// structs, pointers, nil) is dropped and ok is false. A string under a
// sensitive key (see IsSensitiveKey) is replaced by Redacted.
func Attr(key string, value any) (kv attribute.KeyValue, ok bool) {
	switch v := value.(type) {
	case string:
		if IsSensitiveKey(key) {
			v = Redacted
		}
		return attribute.String(key, v), true
	case bool:
		return attribute.Bool(key, v), true
	case int:
		return attribute.Int(key, v), true
	case int8:
		return attribute.Int64(key, int64(v)), true
	case int16:
		return attribute.Int64(key, int64(v)), true
	case int32:
		return attribute.Int64(key, int64(v)), true
	case int64:
		return attribute.Int64(key, v), true
	case uint8:
		return attribute.Int64(key, int64(v)), true
	case uint16:
		return attribute.Int64(key, int64(v)), true
	case uint32:
		return attribute.Int64(key, int64(v)), true
	case uint:
		if uint64(v) > 1<<63-1 {
			return attribute.KeyValue{}, false
		}
		return attribute.Int64(key, int64(v)), true
	case uint64:
		if v > 1<<63-1 {
			return attribute.KeyValue{}, false
		}
		return attribute.Int64(key, int64(v)), true
	case float32:
		return attribute.Float64(key, float64(v)), true
	case float64:
		return attribute.Float64(key, v), true
	}
	return attribute.KeyValue{}, false
}

// SetAttributes puts the scalar entries of attrs on span, redacting
// sensitive keys and dropping the rest (see Attr). A non-recording span
// costs nothing beyond the check.
func SetAttributes(span trace.Span, attrs map[string]any) {
	if span == nil || !span.IsRecording() || len(attrs) == 0 {
		return
	}
	kvs := make([]attribute.KeyValue, 0, len(attrs))
	for k, v := range attrs {
		if kv, ok := Attr(k, v); ok {
			kvs = append(kvs, kv)
		}
	}
	span.SetAttributes(kvs...)
}

// SafeURL returns u without its query string, fragment and user
// credentials: the form that may go on a span.
func SafeURL(u *url.URL) string {
	if u == nil {
		return ""
	}
	c := *u
	c.RawQuery, c.ForceQuery, c.Fragment, c.RawFragment, c.User = "", false, "", "", nil
	return c.String()
}

// nonRecording is returned when a group is off. The ctx returned with it is
// the caller's own, so the trace context it carries flows on unchanged.
// It is stored boxed once, so returning it allocates nothing.
var nonRecording trace.Span = tracenoop.Span{}

// Start begins a span named name when group g is enabled, using the live
// handle's tracer. When g is off it returns ctx unchanged and a
// non-recording span, and costs only the gate check.
func Start(ctx context.Context, g SpanGroup, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if !Enabled(g) {
		return ctx, nonRecording
	}
	return live.Load().Tracer().Start(ctx, name, opts...)
}

// StartRecording is Start for a site that builds what its span carries: it
// returns a nil span when group g is off and also when the span would not
// record (its trace was sampled out), so the caller skips attributes,
// events and End in one test, and a dropped span costs no attribute slice
// (a variadic SetAttributes allocates its arguments even on a span that
// keeps nothing). The ctx returned carries the trace context either way.
func StartRecording(ctx context.Context, g SpanGroup, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if !Enabled(g) {
		return ctx, nil
	}
	ctx, span := live.Load().Tracer().Start(ctx, name, opts...)
	if !span.IsRecording() {
		return ctx, nil
	}
	return ctx, span
}

// End records err on span (as an exception event and an error status) and
// ends it.
func End(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// Run calls fn inside a span named name when group g is enabled, and
// directly otherwise. The span always ends: an error returned by fn is
// recorded on it, and so is a panic, which then continues to propagate
// unchanged to the caller.
func Run(ctx context.Context, g SpanGroup, name string, fn func(context.Context) error, opts ...trace.SpanStartOption) (err error) {
	if !Enabled(g) {
		return fn(ctx)
	}
	ctx, span := live.Load().Tracer().Start(ctx, name, opts...)
	defer func() {
		if r := recover(); r != nil {
			perr := fmt.Errorf("panic: %v", r)
			span.RecordError(perr, trace.WithStackTrace(true))
			span.SetStatus(codes.Error, perr.Error())
			span.End()
			panic(r)
		}
		End(span, err)
	}()
	return fn(ctx)
}
