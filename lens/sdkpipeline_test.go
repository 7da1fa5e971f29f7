package lens_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/gymlens/gymlens/lens"
)

// startRoots starts and ends n root spans of group job and, under each, a
// child; it returns the roots' span contexts.
func startRoots(n int) []trace.SpanContext {
	var out []trace.SpanContext
	for i := range n {
		ctx, root := lens.Start(context.Background(), lens.GroupJob, fmt.Sprintf("root %d", i))
		_, child := lens.Start(ctx, lens.GroupJob, "child")
		child.End()
		root.End()
		out = append(out, root.SpanContext())
	}
	return out
}

// TestSamplerFromEnvironment: the tracer provider Setup builds takes its
// sampler from OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG, and a
// parent-based one follows the sampled flag of a remote parent whatever
// its ratio, which is what keeps a rollout whole across processes.
func TestSamplerFromEnvironment(t *testing.T) {
	sampled := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2},
		TraceFlags: trace.FlagsSampled, Remote: true})
	unsampled := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{3}, SpanID: trace.SpanID{4}, Remote: true})
	for _, tc := range []struct {
		sampler, arg string
		roots        int // exported of 10 roots (each with a child)
		underSampled bool
	}{
		{"", "", 10, true}, // the SDK's default, parentbased_always_on
		{"always_on", "", 10, true},
		{"always_off", "", 0, false},
		{"traceidratio", "0", 0, false},
		{"parentbased_traceidratio", "0", 0, true},
		{"parentbased_traceidratio", "1", 10, true},
		{"parentbased_always_off", "", 0, true},
	} {
		t.Run(tc.sampler+"="+tc.arg, func(t *testing.T) {
			t.Setenv(lens.KeyTracesSampler, tc.sampler)
			t.Setenv(lens.KeyTracesSamplerArg, tc.arg)
			p := setupInMemory(t, nil, lens.Options{})
			roots := startRoots(10)
			for _, parent := range []trace.SpanContext{sampled, unsampled} {
				ctx := trace.ContextWithRemoteSpanContext(context.Background(), parent)
				_, s := lens.Start(ctx, lens.GroupJob, "under "+parent.TraceID().String())
				s.End()
			}
			got := p.finishedSpans(t)
			byTrace := map[trace.TraceID]int{}
			for _, s := range got {
				byTrace[s.SpanContext.TraceID()]++
			}
			kept := 0
			for _, r := range roots {
				switch byTrace[r.TraceID()] {
				case 2:
					kept++
				case 0:
				default:
					t.Errorf("trace %s exported %d of its 2 spans", r.TraceID(), byTrace[r.TraceID()])
				}
				if r.IsSampled() != (byTrace[r.TraceID()] == 2) {
					t.Errorf("root %s: sampled flag %v, exported %d spans", r.TraceID(), r.IsSampled(), byTrace[r.TraceID()])
				}
			}
			if kept != tc.roots {
				t.Errorf("%d of 10 root traces exported, want %d", kept, tc.roots)
			}
			if (byTrace[sampled.TraceID()] == 1) != tc.underSampled {
				t.Errorf("span under a sampled remote parent exported %d times, want exported %v", byTrace[sampled.TraceID()], tc.underSampled)
			}
			if byTrace[unsampled.TraceID()] != 0 && tc.sampler != "always_on" {
				t.Errorf("span under an unsampled remote parent exported")
			}
		})
	}
}

// TestSpanLimitsFromEnvironment: the SDK's OTEL_SPAN_* limits hold for
// spans written to the run-directory file.
func TestSpanLimitsFromEnvironment(t *testing.T) {
	t.Setenv("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "2")
	t.Setenv("OTEL_SPAN_EVENT_COUNT_LIMIT", "1")
	t.Setenv("OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", "3")
	path := filepath.Join(t.TempDir(), "telemetry.jsonl")
	cfg := mustLoad(t, map[string]string{
		"NEMO_GYM_OTEL_ENABLED": "1", "NEMO_GYM_OTEL_EXPORTER": "file",
		"NEMO_GYM_OTEL_FILE_PATH": path, "NEMO_GYM_OTEL_SPAN_GROUPS": "job",
	})
	h := mustSetup(t, cfg, lens.Options{})
	_, s := lens.Start(context.Background(), lens.GroupJob, "limited",
		trace.WithAttributes(attribute.String("a", "long value"), attribute.Int("b", 2), attribute.Int("c", 3),
			attribute.Int("d", 4)))
	s.AddEvent("one")
	s.AddEvent("two")
	s.End()
	if err := h.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, r := range readTelemetry(t, path, nil) {
		if r.Span == nil || r.Span.Name != "limited" {
			continue
		}
		found = true
		if len(r.Span.Attributes) != 2 || r.Span.Attributes["a"] != "lon" {
			t.Errorf("attributes %v, want 2 of them with a=\"lon\"", r.Span.Attributes)
		}
		if len(r.Span.Events) != 1 {
			t.Errorf("%d events, want 1", len(r.Span.Events))
		}
	}
	if !found {
		t.Fatal("span not in the file")
	}
}

// seeAll is a span processor that keeps the names of the spans it sees
// start and end.
type seeAll struct {
	mu              sync.Mutex
	started, ended  []string
	shutdown, flush int
}

func (s *seeAll) OnStart(_ context.Context, sp sdktrace.ReadWriteSpan) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.started = append(s.started, sp.Name())
}

func (s *seeAll) OnEnd(sp sdktrace.ReadOnlySpan) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ended = append(s.ended, sp.Name())
}

func (s *seeAll) Shutdown(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.shutdown++
	return nil
}

func (s *seeAll) ForceFlush(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flush++
	return nil
}

// TestUserSpanProcessorSeesEverySpan: a processor in Options.SpanProcessors
// runs next to the configured exporter (here the run-directory file), sees
// every span start and end, and is flushed and shut down with the handle.
func TestUserSpanProcessorSeesEverySpan(t *testing.T) {
	path := filepath.Join(t.TempDir(), "telemetry.jsonl")
	cfg := mustLoad(t, map[string]string{
		"NEMO_GYM_OTEL_ENABLED": "1", "NEMO_GYM_OTEL_EXPORTER": "file",
		"NEMO_GYM_OTEL_FILE_PATH": path, "NEMO_GYM_OTEL_SPAN_GROUPS": "job",
	})
	user := &seeAll{}
	h := mustSetup(t, cfg, lens.Options{SpanProcessors: []sdktrace.SpanProcessor{user}})
	startRoots(50)
	if err := h.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := h.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	inFile := map[string]int{}
	for _, r := range readTelemetry(t, path, nil) {
		if r.Span != nil {
			inFile[r.Span.Name]++
		}
	}
	user.mu.Lock()
	defer user.mu.Unlock()
	if len(user.started) != 100 || len(user.ended) != 100 {
		t.Errorf("processor saw %d starts and %d ends, want 100 each", len(user.started), len(user.ended))
	}
	seen := map[string]int{}
	for _, n := range user.ended {
		seen[n]++
	}
	if fmt.Sprint(seen) != fmt.Sprint(inFile) {
		t.Errorf("processor saw %v, the file holds %v", seen, inFile)
	}
	if user.flush != 1 || user.shutdown != 1 {
		t.Errorf("processor flushed %d and shut down %d times, want once each", user.flush, user.shutdown)
	}
}

// TestDescribeSampler: the sampler gymlens telemetry check reports is the one
// the SDK builds from the same variables.
func TestDescribeSampler(t *testing.T) {
	for _, tc := range []struct {
		sampler, arg        string
		name, ratio, prefix string
		problem             bool
	}{
		{"", "", "parentbased_always_on", "", "ParentBased{root:AlwaysOnSampler", false},
		{" ParentBased_TraceIDRatio ", "0.25", "parentbased_traceidratio", "0.25", "ParentBased{root:TraceIDRatioBased{0.25}", false},
		{"parentbased_traceidratio", "", "parentbased_traceidratio", "1", "ParentBased{root:TraceIDRatioBased{1}", false},
		{"traceidratio", "2", "traceidratio", "1", "TraceIDRatioBased{1}", true},
		{"traceidratio", "x", "traceidratio", "1", "TraceIDRatioBased{1}", true},
		{"always_off", "0.5", "always_off", "", "AlwaysOffSampler", false},
		{"xray", "", "parentbased_always_on", "", "ParentBased{root:AlwaysOnSampler", true},
	} {
		env := map[string]string{lens.KeyTracesSampler: tc.sampler, lens.KeyTracesSamplerArg: tc.arg}
		got := lens.DescribeSampler(func(k string) string { return env[k] })
		if got.Name != tc.name || got.Arg != tc.ratio || (got.Problem != "") != tc.problem ||
			len(got.Description) < len(tc.prefix) || got.Description[:len(tc.prefix)] != tc.prefix {
			t.Errorf("%q %q: %+v, want %s %q (description %s..., problem %v)", tc.sampler, tc.arg, got, tc.name, tc.ratio, tc.prefix, tc.problem)
		}
	}
}

// TestSampledOutParentSkipsTheSDK: under a sampler that follows an
// unsampled parent (every parentbased_* one, always_off), a span started
// beneath a sampled-out parent is the parent's own non-recording span, in
// the caller's context, and SampledOut says so; a sampler that does not
// follow the parent (always_on, traceidratio) is still asked, and so is
// the SDK for a span asked to be a new root. Nothing changes for a sampled
// parent.
func TestSampledOutParentSkipsTheSDK(t *testing.T) {
	unsampled := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{5}, SpanID: trace.SpanID{6}, Remote: true})
	sampled := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{7}, SpanID: trace.SpanID{8},
		TraceFlags: trace.FlagsSampled, Remote: true})
	if lens.SampledOut(trace.ContextWithRemoteSpanContext(context.Background(), unsampled)) {
		t.Fatal("SampledOut without a live handle")
	}
	for _, tc := range []struct {
		sampler, arg string
		follows      bool
		newRootKept  bool // a WithNewRoot span under the unsampled parent is recorded
	}{
		{"", "", true, true},
		{"parentbased_traceidratio", "0", true, false},
		{"parentbased_always_off", "", true, false},
		{"always_off", "", true, false},
		{"always_on", "", false, true},
		{"traceidratio", "1", false, true},
	} {
		t.Run(tc.sampler+"="+tc.arg, func(t *testing.T) {
			t.Setenv(lens.KeyTracesSampler, tc.sampler)
			t.Setenv(lens.KeyTracesSamplerArg, tc.arg)
			user := &seeAll{}
			p := setupInMemory(t, nil, lens.Options{SpanProcessors: []sdktrace.SpanProcessor{user}})

			ctx := trace.ContextWithRemoteSpanContext(context.Background(), unsampled)
			if got := lens.SampledOut(ctx); got != tc.follows {
				t.Errorf("SampledOut under an unsampled parent = %v, want %v", got, tc.follows)
			}
			got, span := lens.Start(ctx, lens.GroupJob, "under unsampled")
			sc := span.SpanContext()
			if tc.follows {
				if got != ctx || !sc.Equal(unsampled) || span.IsRecording() {
					t.Errorf("span %v (recording %v), context changed %v; want the parent's own, context unchanged",
						sc, span.IsRecording(), got != ctx)
				}
			} else if sc.SpanID() == unsampled.SpanID() || sc.TraceID() != unsampled.TraceID() {
				t.Errorf("span %v: want a new span of the parent's trace", sc)
			}
			span.End()
			_, root := p.h.Tracer().Start(ctx, "new root", trace.WithNewRoot())
			if root.SpanContext().TraceID() == unsampled.TraceID() || root.IsRecording() != tc.newRootKept {
				t.Errorf("new root %v recording %v, want another trace, recording %v", root.SpanContext(), root.IsRecording(), tc.newRootKept)
			}
			root.End()

			sctx := trace.ContextWithRemoteSpanContext(context.Background(), sampled)
			if lens.SampledOut(sctx) {
				t.Error("SampledOut under a sampled parent")
			}
			_, child := lens.Start(sctx, lens.GroupJob, "under sampled")
			if !child.IsRecording() && tc.sampler != "always_off" {
				t.Error("span under a sampled parent not recorded")
			}
			child.End()

			spans := p.finishedSpans(t)
			for _, s := range spans {
				if s.SpanContext.TraceID() == unsampled.TraceID() && tc.follows {
					t.Errorf("span %q of the sampled-out trace exported", s.Name)
				}
			}
			user.mu.Lock()
			defer user.mu.Unlock()
			if len(user.started) != len(user.ended) || len(user.ended) != len(spans) {
				t.Errorf("processor saw %d starts and %d ends of %d exported spans", len(user.started), len(user.ended), len(spans))
			}
		})
	}
}
