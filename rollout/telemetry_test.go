package rollout_test

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/dataset"
	"github.com/gymlens/gymlens/internal/servertest"
	"github.com/gymlens/gymlens/internal/testenv"
	"github.com/gymlens/gymlens/protocol"
	"github.com/gymlens/gymlens/rollout"
	"github.com/gymlens/gymlens/telemetry"
)

// TestCollectJobSpan runs a collection with every span group on and checks
// that the run is one gym.job span and each rollout a trace of its own: a
// root CLIENT span linked to the job, the agent's SERVER span its child.
// It changes process-wide telemetry, so it must not run in parallel.
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
	opts := options(agent, out)
	sum, err := rollout.Collect(context.Background(), dataset.Arithmetic(n, 11), opts)
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
		if s.Name == contract.SpanJob {
			job = s
			jobs++
		}
	}
	if jobs != 1 {
		t.Fatalf("%d gym.job spans among %d", jobs, len(spans))
	}
	if !hasAttr(job.Attributes, attribute.Int(contract.AttrJobTasks, n)) {
		t.Fatalf("gym.job attributes %v", job.Attributes)
	}
	// Each rollout is a trace of its own whose CLIENT span links back to
	// the job; the agent's SERVER span is that CLIENT span's child. The
	// closing /aggregate_metrics call is the job's child.
	var clients, aggregates int
	clientIDs := map[trace.SpanID]trace.TraceID{}
	traces := map[trace.TraceID]bool{}
	for _, s := range spans {
		if s.SpanKind != trace.SpanKindClient {
			continue
		}
		if s.Name != contract.ClientSpanName("POST") {
			t.Errorf("client span named %q, want %q", s.Name, contract.ClientSpanName("POST"))
		}
		if strings.HasSuffix(servertest.Attrs(s.Attributes)[contract.AttrURLFull], protocol.PathAggregateMetrics) {
			aggregates++
			if s.Parent.SpanID() != job.SpanContext.SpanID() || len(s.Links) != 0 {
				t.Errorf("aggregate call: parent %s, links %v; want the job's child", s.Parent.SpanID(), s.Links)
			}
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
		if s.Name == "POST "+protocol.PathAggregateMetrics {
			continue
		}
		servers++
		if s.Name != "POST "+protocol.PathRun {
			t.Errorf("server span named %q", s.Name)
		}
		if tid, ok := clientIDs[s.Parent.SpanID()]; !ok || tid != s.SpanContext.TraceID() {
			t.Errorf("server span %s is not the child of a collector CLIENT span", s.Name)
		}
	}
	if servers != n || clients != n || aggregates != 1 || len(traces) != n || traces[job.SpanContext.TraceID()] {
		t.Fatalf("%d server and %d client spans in %d traces for %d rollouts, %d aggregate calls", servers, clients, len(traces), n, aggregates)
	}
	// The agent reported no trace id; lines then carry their CLIENT
	// span's, each its own rollout's trace, never the job's.
	seen := map[string]bool{}
	for _, l := range readLines(t, out) {
		m := get[rollout.Bookkeeping](t, l, rollout.KeyBookkeeping)
		id, err := trace.TraceIDFromHex(m.TraceID)
		if err != nil || !traces[id] || seen[m.TraceID] {
			t.Errorf("rollout %s has trace %q, want its own CLIENT span's (%v)", m.RolloutID, m.TraceID, err)
		}
		seen[m.TraceID] = true
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
