package rollout_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/gymlens/gymlens/dataset"
	protocol "github.com/gymlens/gymlens/internal/legacyproto"
	"github.com/gymlens/gymlens/internal/testenv"
	"github.com/gymlens/gymlens/rollout"
	"github.com/gymlens/gymlens/telemetry"
)

// TestCollectJobSpan runs a collection with every span group on and checks
// that the run is one gym.job span whose trace the agent's SERVER spans
// join. It changes process-wide telemetry, so it must not run in parallel.
func TestCollectJobSpan(t *testing.T) {
	testenv.ClearTelemetry(t)
	t.Setenv("NEMO_GYM_OTEL_ENABLED", "1")
	t.Setenv("NEMO_GYM_OTEL_EXPORTER", "none")
	t.Setenv("NEMO_GYM_OTEL_SPAN_GROUPS", "all")
	telemetry.ResetForTesting()
	t.Cleanup(telemetry.ResetForTesting)
	exp := tracetest.NewInMemoryExporter()
	h, err := telemetry.Init(telemetry.InitOptions{ServerName: "collector", SpanExporter: exp})
	if err != nil || !h.TracesExporting() {
		t.Fatalf("Init: %v, %v", h, err)
	}

	agent := startAgent(t, nil) // after Init, so its ingress is instrumented
	const n = 3
	out := outPath(t)
	sum, err := rollout.Collect(context.Background(), dataset.Arithmetic(n, 11), out, rollout.Options{AgentURL: agent.URL})
	if err != nil || sum.Succeeded != n {
		t.Fatalf("%+v, %v", sum, err)
	}
	// Server spans end after the response is sent: stop the agent so every
	// handler has returned, then flush the batch processor.
	if err := agent.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := h.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}

	var job tracetest.SpanStub
	var jobs, servers int
	spans := exp.GetSpans()
	for _, s := range spans {
		if s.Name == "gym.job" {
			job = s
			jobs++
		}
	}
	if jobs != 1 {
		t.Fatalf("%d gym.job spans among %d", jobs, len(spans))
	}
	if !hasAttr(job.Attributes, attribute.Int("nemo.gym.job.tasks", n)) {
		t.Fatalf("gym.job attributes %v", job.Attributes)
	}
	// Each rollout is a trace of its own whose CLIENT span links back to
	// the job; the agent's SERVER span is that CLIENT span's child.
	var clients int
	clientIDs := map[trace.SpanID]trace.TraceID{}
	traces := map[trace.TraceID]bool{}
	for _, s := range spans {
		if s.SpanKind != trace.SpanKindClient {
			continue
		}
		clients++
		clientIDs[s.SpanContext.SpanID()] = s.SpanContext.TraceID()
		traces[s.SpanContext.TraceID()] = true
		if s.Parent.IsValid() {
			t.Errorf("client span %s has parent %s; want a new root per rollout", s.Name, s.Parent.SpanID())
		}
		if len(s.Links) != 1 || s.Links[0].SpanContext.SpanID() != job.SpanContext.SpanID() {
			t.Errorf("client span %s links %v, want the job", s.Name, s.Links)
		}
	}
	for _, s := range spans {
		if s.SpanKind != trace.SpanKindServer {
			continue
		}
		servers++
		if s.Name != protocol.RouteRun {
			t.Errorf("server span named %q", s.Name)
		}
		if tid, ok := clientIDs[s.Parent.SpanID()]; !ok || tid != s.SpanContext.TraceID() {
			t.Errorf("server span %s is not the child of a collector CLIENT span", s.Name)
		}
	}
	if servers != n || clients != n || len(traces) != n || traces[job.SpanContext.TraceID()] {
		t.Fatalf("%d server and %d client spans in %d traces for %d rollouts", servers, clients, len(traces), n)
	}
	// The agent reported no trace id; records then carry none rather than
	// the job's.
	for _, r := range readRecords(t, out) {
		if r.TraceID != "" {
			t.Errorf("record %s has trace %q", r.TaskID, r.TraceID)
		}
	}
}

func hasAttr(attrs []attribute.KeyValue, want attribute.KeyValue) bool {
	for _, kv := range attrs {
		if kv == want {
			return true
		}
	}
	return false
}
