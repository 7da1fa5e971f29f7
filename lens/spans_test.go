package lens_test

import (
	"context"
	"errors"
	"math"
	"net/url"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/gymlens/gymlens/lens"
)

type ctxKey struct{}

func onlySpan(t *testing.T, spans tracetest.SpanStubs, name string) tracetest.SpanStub {
	t.Helper()
	var found []tracetest.SpanStub
	for _, s := range spans {
		if s.Name == name {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("found %d spans named %q among %d, want 1", len(found), name, len(spans))
	}
	return found[0]
}

func exceptionMessage(s tracetest.SpanStub) (string, bool) {
	for _, ev := range s.Events {
		if ev.Name != "exception" {
			continue
		}
		for _, kv := range ev.Attributes {
			if kv.Key == "exception.message" {
				return kv.Value.AsString(), true
			}
		}
	}
	return "", false
}

func TestStartBeforeSetupDoesNothing(t *testing.T) {
	isolateTelemetry(t)
	ctx := context.WithValue(context.Background(), ctxKey{}, "v")
	got, span := lens.Start(ctx, lens.GroupJob, "x")
	if got != ctx || span.IsRecording() || span.SpanContext().IsValid() {
		t.Errorf("Start before Setup: same ctx=%v recording=%v", got == ctx, span.IsRecording())
	}
	span.End() // must be safe
}

func TestStartWithGroupOff(t *testing.T) {
	p := setupInMemory(t, map[string]string{"NEMO_GYM_OTEL_SPAN_GROUPS": "job"}, lens.Options{})
	ctx := context.WithValue(context.Background(), ctxKey{}, "v")
	got, span := lens.Start(ctx, lens.GroupStep, "step.off")
	if got != ctx {
		t.Error("Start with the group off returned a new context")
	}
	if span.IsRecording() {
		t.Error("Start with the group off returned a recording span")
	}
	lens.End(span, errors.New("ignored"))

	// Inside a recording parent, an off group leaves the parent in ctx.
	pctx, parent := lens.Start(ctx, lens.GroupJob, "job.on")
	cctx, child := lens.Start(pctx, lens.GroupStep, "step.off.child")
	if cctx != pctx || trace.SpanFromContext(cctx) != parent || child.IsRecording() {
		t.Error("an off group disturbed the parent's context")
	}
	lens.End(child, nil)
	lens.End(parent, nil)
	spans := p.finishedSpans(t)
	if len(spans) != 1 || spans[0].Name != "job.on" {
		t.Errorf("exported %v, want only job.on", spans)
	}
}

func TestStartWithGroupOnRecords(t *testing.T) {
	p := setupInMemory(t, map[string]string{"NEMO_GYM_OTEL_SPAN_GROUPS": "job,step"}, lens.Options{})
	ctx := context.WithValue(context.Background(), ctxKey{}, "v")
	rctx, root := lens.Start(ctx, lens.GroupJob, "job.run", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("nemo.gym.rollout.id", "r-1")))
	if !root.IsRecording() || trace.SpanFromContext(rctx) != root || rctx.Value(ctxKey{}) != "v" {
		t.Fatal("Start with the group on did not return a recording span in a derived context")
	}
	_, child := lens.Start(rctx, lens.GroupStep, "train.step")
	lens.End(child, nil)
	lens.End(root, nil)

	spans := p.finishedSpans(t)
	r, c := onlySpan(t, spans, "job.run"), onlySpan(t, spans, "train.step")
	if r.SpanKind != trace.SpanKindServer {
		t.Errorf("root kind %v", r.SpanKind)
	}
	if len(r.Attributes) != 1 || r.Attributes[0] != attribute.String("nemo.gym.rollout.id", "r-1") {
		t.Errorf("root attributes %v", r.Attributes)
	}
	if c.Parent.SpanID() != r.SpanContext.SpanID() || c.SpanContext.TraceID() != r.SpanContext.TraceID() {
		t.Error("child is not parented on the root")
	}
	if r.Status.Code != codes.Unset || c.Status.Code != codes.Unset {
		t.Errorf("statuses %v %v, want unset", r.Status, c.Status)
	}
	if r.EndTime.IsZero() || c.EndTime.IsZero() {
		t.Error("spans not ended")
	}
}

func TestEndRecordsError(t *testing.T) {
	p := setupInMemory(t, nil, lens.Options{})
	_, span := lens.Start(context.Background(), lens.GroupJob, "failing")
	lens.End(span, errors.New("disk full"))
	if span.IsRecording() {
		t.Error("span still recording after End")
	}
	s := onlySpan(t, p.finishedSpans(t), "failing")
	if s.Status.Code != codes.Error || s.Status.Description != "disk full" {
		t.Errorf("status %+v, want error \"disk full\"", s.Status)
	}
	if msg, ok := exceptionMessage(s); !ok || msg != "disk full" {
		t.Errorf("exception event message %q, %v", msg, ok)
	}
}

func TestRunSuccess(t *testing.T) {
	p := setupInMemory(t, nil, lens.Options{})
	var inner trace.SpanContext
	ctx := context.WithValue(context.Background(), ctxKey{}, "v")
	err := lens.Run(ctx, lens.GroupJob, "run.ok", func(ctx context.Context) error {
		inner = trace.SpanContextFromContext(ctx)
		if ctx.Value(ctxKey{}) != "v" {
			t.Error("fn lost the caller's context values")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s := onlySpan(t, p.finishedSpans(t), "run.ok")
	if !inner.IsValid() || inner.SpanID() != s.SpanContext.SpanID() {
		t.Error("fn did not run inside the span")
	}
	if s.Status.Code != codes.Unset || len(s.Events) != 0 {
		t.Errorf("successful Run: status %v events %v", s.Status, s.Events)
	}
}

func TestRunRecordsError(t *testing.T) {
	p := setupInMemory(t, nil, lens.Options{})
	want := errors.New("verifier timed out")
	err := lens.Run(context.Background(), lens.GroupJob, "run.err", func(context.Context) error { return want })
	if err != want {
		t.Fatalf("Run returned %v, want fn's error unchanged", err)
	}
	s := onlySpan(t, p.finishedSpans(t), "run.err")
	if s.Status.Code != codes.Error || s.Status.Description != want.Error() || s.EndTime.IsZero() {
		t.Errorf("status %+v ended=%v", s.Status, !s.EndTime.IsZero())
	}
	if msg, _ := exceptionMessage(s); msg != want.Error() {
		t.Errorf("exception message %q", msg)
	}
}

type panicValue struct{ code int }

func TestRunRecordsPanicAndRepanics(t *testing.T) {
	p := setupInMemory(t, nil, lens.Options{})
	pv := &panicValue{code: 3}
	var recovered any
	func() {
		defer func() { recovered = recover() }()
		_ = lens.Run(context.Background(), lens.GroupJob, "run.panic", func(context.Context) error {
			panic(pv)
		})
		t.Error("Run returned instead of re-panicking")
	}()
	if recovered != pv {
		t.Fatalf("recovered %v, want the original panic value", recovered)
	}
	s := onlySpan(t, p.finishedSpans(t), "run.panic")
	if s.EndTime.IsZero() {
		t.Error("span not ended after a panic")
	}
	if s.Status.Code != codes.Error || s.Status.Description != "panic: &{3}" {
		t.Errorf("status %+v", s.Status)
	}
	if msg, ok := exceptionMessage(s); !ok || msg != "panic: &{3}" {
		t.Errorf("exception message %q, %v", msg, ok)
	}
}

func TestRunWithGroupOff(t *testing.T) {
	p := setupInMemory(t, map[string]string{"NEMO_GYM_OTEL_SPAN_GROUPS": "step"}, lens.Options{})
	ctx := context.WithValue(context.Background(), ctxKey{}, "v")
	want := errors.New("plain")
	calls := 0
	err := lens.Run(ctx, lens.GroupJob, "run.off", func(got context.Context) error {
		calls++
		if got != ctx {
			t.Error("fn got a different context with the group off")
		}
		return want
	})
	if err != want || calls != 1 {
		t.Errorf("Run = %v after %d calls", err, calls)
	}
	var recovered any
	func() {
		defer func() { recovered = recover() }()
		_ = lens.Run(ctx, lens.GroupJob, "run.off.panic", func(context.Context) error { panic("off") })
	}()
	if recovered != "off" {
		t.Errorf("recovered %v", recovered)
	}
	if n := len(p.finishedSpans(t)); n != 0 {
		t.Errorf("%d spans exported with the group off", n)
	}
}

func TestIsSensitiveKey(t *testing.T) {
	sensitive := []string{
		"prompt", "input_text", "output_text", "text", "password", "token", "secret", "key",
		"api_key", "access_token", "client_secret", "db_password", "system_prompt", "user_input_text",
		"gen_ai.prompt", "llm.request.prompt", "http.request.header.x_api_key",
		"Authorization_TOKEN", "PROMPT", "Gen_AI.Api_Key", "a.b.c.key",
	}
	safe := []string{
		"keyboard", "tokens_used", "max_tokens", "tokenizer", "monkey", "textual", "keys",
		"prompt_tokens", "gen_ai.usage.input_tokens", "token_count", "password_set",
		"secretary", "nemo.gym.rollout.id", "http.route", "", "apikey",
	}
	for _, k := range sensitive {
		if !lens.IsSensitiveKey(k) {
			t.Errorf("IsSensitiveKey(%q) = false, want true", k)
		}
	}
	for _, k := range safe {
		if lens.IsSensitiveKey(k) {
			t.Errorf("IsSensitiveKey(%q) = true, want false", k)
		}
	}
}

func TestAttr(t *testing.T) {
	type record struct{ A int }
	s := "x"
	kept := []struct {
		key   string
		value any
		want  attribute.KeyValue
	}{
		{"s", "hello", attribute.String("s", "hello")},
		{"empty", "", attribute.String("empty", "")},
		{"b", true, attribute.Bool("b", true)},
		{"i", -3, attribute.Int("i", -3)},
		{"i8", int8(-8), attribute.Int64("i8", -8)},
		{"i16", int16(16), attribute.Int64("i16", 16)},
		{"i32", int32(-32), attribute.Int64("i32", -32)},
		{"i64", int64(math.MinInt64), attribute.Int64("i64", math.MinInt64)},
		{"u8", uint8(255), attribute.Int64("u8", 255)},
		{"u16", uint16(65535), attribute.Int64("u16", 65535)},
		{"u32", uint32(math.MaxUint32), attribute.Int64("u32", math.MaxUint32)},
		{"u", uint(7), attribute.Int64("u", 7)},
		{"u64", uint64(math.MaxInt64), attribute.Int64("u64", math.MaxInt64)},
		{"f32", float32(0.5), attribute.Float64("f32", 0.5)},
		{"f64", 2.25, attribute.Float64("f64", 2.25)},
		{"prompt", "tell me a secret", attribute.String("prompt", lens.Redacted)},
		{"gen_ai.output_text", "model says", attribute.String("gen_ai.output_text", lens.Redacted)},
		{"API_KEY", "sk-123", attribute.String("API_KEY", lens.Redacted)},
		{"token", 42, attribute.Int("token", 42)}, // only strings are redacted
		{"keyboard", "qwerty", attribute.String("keyboard", "qwerty")},
	}
	for _, c := range kept {
		got, ok := lens.Attr(c.key, c.value)
		if !ok || got != c.want {
			t.Errorf("Attr(%q, %#v) = %v, %v; want %v", c.key, c.value, got, ok, c.want)
		}
	}
	dropped := map[string]any{
		"nil":       nil,
		"slice":     []string{"a"},
		"bytes":     []byte("raw"),
		"map":       map[string]int{"a": 1},
		"struct":    record{A: 1},
		"ptr":       &s,
		"u64big":    uint64(math.MaxUint64),
		"u64edge":   uint64(1 << 63),
		"err":       errors.New("e"),
		"func":      func() {},
		"complex":   complex(1, 2),
		"prompt":    []string{"sensitive", "slice"},
		"kv":        attribute.String("k", "v"),
		"attrValue": attribute.StringValue("v"),
	}
	for k, v := range dropped {
		if got, ok := lens.Attr(k, v); ok || got.Valid() {
			t.Errorf("Attr(%q, %T) = %v, %v; want dropped", k, v, got, ok)
		}
	}
}

func TestSetAttributesOnRecordingSpan(t *testing.T) {
	p := setupInMemory(t, nil, lens.Options{})
	_, span := lens.Start(context.Background(), lens.GroupJob, "attrs")
	lens.SetAttributes(span, map[string]any{
		"prompt":           "what is 2+2",
		"gen_ai.api_key":   "sk-abc",
		"user.password":    "hunter2",
		"step":             3,
		"ratio":            0.75,
		"ok":               true,
		"model":            "nemotron",
		"messages":         []string{"hi"},
		"headers":          map[string]string{"a": "b"},
		"nothing":          nil,
		"struct":           struct{ X int }{1},
		"tokens_used":      12,
		"input_text.chars": 11,
	})
	span.End()
	s := onlySpan(t, p.finishedSpans(t), "attrs")
	got := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes {
		got[kv.Key] = kv.Value
	}
	want := map[attribute.Key]attribute.Value{
		"prompt":           attribute.StringValue(lens.Redacted),
		"gen_ai.api_key":   attribute.StringValue(lens.Redacted),
		"user.password":    attribute.StringValue(lens.Redacted),
		"step":             attribute.IntValue(3),
		"ratio":            attribute.Float64Value(0.75),
		"ok":               attribute.BoolValue(true),
		"model":            attribute.StringValue("nemotron"),
		"tokens_used":      attribute.IntValue(12),
		"input_text.chars": attribute.IntValue(11),
	}
	if len(got) != len(want) {
		t.Errorf("exported %d attributes %v, want %d", len(got), got, len(want))
	}
	for k, w := range want {
		if g, ok := got[k]; !ok || g != w {
			t.Errorf("attribute %s = %v (present %v), want %v", k, g.Emit(), ok, w.Emit())
		}
	}
	for _, k := range []attribute.Key{"messages", "headers", "nothing", "struct"} {
		if _, ok := got[k]; ok {
			t.Errorf("non-scalar attribute %s exported", k)
		}
	}
	if s.DroppedAttributes != 0 {
		t.Errorf("SDK dropped %d attributes", s.DroppedAttributes)
	}
}

func TestSetAttributesToleratesNilAndNonRecording(t *testing.T) {
	lens.SetAttributes(nil, map[string]any{"a": 1})
	_, span := tracenoop.NewTracerProvider().Tracer("t").Start(context.Background(), "n")
	lens.SetAttributes(span, map[string]any{"a": 1})

	// A recording span that has ended ignores the call too.
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	_, s := tp.Tracer("t").Start(context.Background(), "ended")
	s.End()
	lens.SetAttributes(s, map[string]any{"late": "value"})
	lens.SetAttributes(s, nil)
	if ended := rec.Ended(); len(ended) != 1 || len(ended[0].Attributes()) != 0 {
		t.Errorf("attributes set on an ended span: %v", ended[0].Attributes())
	}
}

func TestSafeURL(t *testing.T) {
	cases := map[string]string{
		"https://user:pass@api.example.com:8443/v1/responses?key=sk-1&x=2#frag": "https://api.example.com:8443/v1/responses",
		"http://localhost:8000/run":                   "http://localhost:8000/run",
		"http://host/path?":                           "http://host/path",
		"http://host/a%20b?q=1":                       "http://host/a%20b",
		"http://token@host/":                          "http://host/",
		"/relative/path?secret=1":                     "/relative/path",
		"grpc://collector:4317#section":               "grpc://collector:4317",
		"http://host/p?q=1#f%20g":                     "http://host/p",
		"https://[::1]:9464/metrics?name[]=up#bottom": "https://[::1]:9464/metrics",
	}
	for in, want := range cases {
		u, err := url.Parse(in)
		if err != nil {
			t.Fatalf("url.Parse(%q): %v", in, err)
		}
		orig := *u
		if got := lens.SafeURL(u); got != want {
			t.Errorf("SafeURL(%q) = %q, want %q", in, got, want)
		}
		if *u != orig {
			t.Errorf("SafeURL modified its argument %q", in)
		}
	}
	if got := lens.SafeURL(nil); got != "" {
		t.Errorf("SafeURL(nil) = %q", got)
	}
}

// TestStartRecording: nil for a group that is off and for a span whose
// trace was sampled out (the context still carries that trace), the
// recording span otherwise.
func TestStartRecording(t *testing.T) {
	p := setupInMemory(t, map[string]string{"NEMO_GYM_OTEL_SPAN_GROUPS": "job"}, lens.Options{})
	ctx := context.WithValue(context.Background(), ctxKey{}, "v")
	if got, span := lens.StartRecording(ctx, lens.GroupStep, "step.off"); got != ctx || span != nil {
		t.Errorf("group off: span %v, same context %v; want nil and ctx", span, got == ctx)
	}
	dropped := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, Remote: true})
	dctx := trace.ContextWithRemoteSpanContext(ctx, dropped)
	got, span := lens.StartRecording(dctx, lens.GroupJob, "job.dropped")
	if span != nil {
		t.Errorf("under a sampled-out parent: span %v, want nil", span)
	}
	if sc := trace.SpanContextFromContext(got); sc.TraceID() != dropped.TraceID() || sc.IsSampled() {
		t.Errorf("under a sampled-out parent the context carries %v, want the parent's unsampled trace", sc)
	}
	rctx, root := lens.StartRecording(ctx, lens.GroupJob, "job.kept")
	if root == nil || !root.IsRecording() || trace.SpanFromContext(rctx) != root {
		t.Fatal("group on: no recording span in the returned context")
	}
	root.End()
	if spans := p.finishedSpans(t); len(spans) != 1 || spans[0].Name != "job.kept" {
		t.Errorf("exported %v, want only job.kept", spans)
	}
}
