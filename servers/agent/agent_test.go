package agent_test

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	protocol "github.com/gymlens/gymlens/internal/legacyproto"
	"github.com/gymlens/gymlens/internal/servertest"
	"github.com/gymlens/gymlens/lens"
	"github.com/gymlens/gymlens/lens/instruments/gym"
	"github.com/gymlens/gymlens/server"
	"github.com/gymlens/gymlens/servers/agent"
	"github.com/gymlens/gymlens/servers/model"
	"github.com/gymlens/gymlens/servers/resources"
	"github.com/gymlens/gymlens/telemetry"
)

// TestMain fails the package when a test leaves a server, client
// connection or telemetry goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fleet is a model, a resources and an agent server, each a server.Server
// of its own on its own loopback port, as three processes would run them.
type fleet struct {
	runURL string
	client *server.Client
	// stop stops every server, agent first; it is idempotent and also
	// runs at cleanup.
	stop func()
}

type fleetOptions struct {
	correctProbability float64
	// modelURL and resourcesURL replace the real peer when set.
	modelURL, resourcesURL string
}

func startFleet(t *testing.T, o fleetOptions) fleet {
	t.Helper()
	var stops []func()
	if o.modelURL == "" {
		s := server.New(server.Options{Name: model.ServerName, Type: telemetry.ServerTypeModel})
		cfg := model.Defaults()
		cfg.CorrectProbability = o.correctProbability
		if err := model.Register(s, cfg); err != nil {
			t.Fatal(err)
		}
		base, stop := servertest.Start(t, s)
		o.modelURL, stops = base, append(stops, stop)
	}
	if o.resourcesURL == "" {
		s := server.New(server.Options{Name: resources.ServerName, Type: telemetry.ServerTypeResources})
		if err := resources.Register(s, resources.Defaults()); err != nil {
			t.Fatal(err)
		}
		base, stop := servertest.Start(t, s)
		o.resourcesURL, stops = base, append(stops, stop)
	}
	s := server.New(server.Options{Name: agent.ServerName, Type: telemetry.ServerTypeAgent})
	cfg := agent.Config{ModelURL: o.modelURL, ResourcesURL: o.resourcesURL, Model: model.DefaultModel}
	if err := agent.Register(s, cfg, servertest.Client(t)); err != nil {
		t.Fatal(err)
	}
	base, stop := servertest.Start(t, s)
	stops = append(stops, stop)
	return fleet{runURL: base + "/run", client: servertest.Client(t), stop: func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}}
}

func (f fleet) run(t *testing.T, req protocol.RunRequest) protocol.RunResponse {
	t.Helper()
	var resp protocol.RunResponse
	if err := f.client.PostJSON(context.Background(), f.runURL, req, &resp); err != nil {
		t.Fatalf("POST /run: %v", err)
	}
	return resp
}

var sum = protocol.Task{ID: "add-1", Question: "What is 17 + 25?", Expected: "42"}

var hexID = regexp.MustCompile(`^[0-9a-f]{16}$`)

func TestRunRewardFollowsCorrectness(t *testing.T) {
	right := startFleet(t, fleetOptions{correctProbability: 1})
	resp := right.run(t, protocol.RunRequest{Task: sum})
	if resp.Error != "" || resp.Reward != 1 || !resp.Correct || resp.Answer != "The answer is 42." || resp.TaskID != sum.ID {
		t.Errorf("right model: %+v", resp)
	}
	if !hexID.MatchString(resp.RolloutID) {
		t.Errorf("minted rollout id %q, want 16 hex digits", resp.RolloutID)
	}
	if resp.DurationMS <= 0 {
		t.Errorf("duration_ms %v", resp.DurationMS)
	}
	if resp.TraceID != "" {
		t.Errorf("trace id %q with telemetry off and no caller trace", resp.TraceID)
	}
	if again := right.run(t, protocol.RunRequest{Task: sum}); again.RolloutID == resp.RolloutID {
		t.Errorf("two rollouts got the same id %q", again.RolloutID)
	}

	wrong := startFleet(t, fleetOptions{correctProbability: 0})
	resp = wrong.run(t, protocol.RunRequest{Task: sum, RolloutID: "mine"})
	if resp.Error != "" || resp.Reward != 0 || resp.Correct || resp.RolloutID != "mine" || resp.Answer == "The answer is 42." {
		t.Errorf("wrong model: %+v", resp)
	}
}

func TestRunReportsPeerFailuresAs200(t *testing.T) {
	noModel := startFleet(t, fleetOptions{correctProbability: 1, modelURL: "http://" + servertest.FreeAddr(t)})
	resp := noModel.run(t, protocol.RunRequest{Task: sum})
	if !strings.Contains(resp.Error, "model call failed") || resp.Reward != 0 || resp.Answer != "" {
		t.Errorf("unreachable model: %+v", resp)
	}

	// A base URL with a query string: the call still works, and the error
	// of a failed call does not repeat the query.
	noResources := startFleet(t, fleetOptions{correctProbability: 1, resourcesURL: "http://" + servertest.FreeAddr(t) + "/?token=hush"})
	resp = noResources.run(t, protocol.RunRequest{Task: sum})
	if !strings.Contains(resp.Error, "verify call failed") || resp.Reward != 0 || resp.Correct || resp.Answer != "The answer is 42." {
		t.Errorf("unreachable resources: %+v", resp)
	}
	if strings.Contains(resp.Error, "hush") || strings.Contains(resp.Error, "?") {
		t.Errorf("error carries the URL's query: %q", resp.Error)
	}

	// A verifier error (the task's expected value is not a number) is
	// reported the same way.
	ok := startFleet(t, fleetOptions{correctProbability: 1})
	resp = ok.run(t, protocol.RunRequest{Task: protocol.Task{ID: "bad", Question: "What is 1 + 1?", Expected: "two"}})
	if !strings.Contains(resp.Error, "500") || resp.Reward != 0 {
		t.Errorf("verifier error: %+v", resp)
	}

	// A request that fails validation is the runtime's 400, not a rollout.
	var out protocol.RunResponse
	err := ok.client.PostJSON(context.Background(), ok.runURL, protocol.RunRequest{Task: protocol.Task{Question: "q"}}, &out)
	if server.StatusOf(err) != http.StatusBadRequest {
		t.Errorf("task without id: %v, want 400", err)
	}
}

func TestConfigValidate(t *testing.T) {
	for name, cfg := range map[string]agent.Config{
		"empty":              {},
		"no resources":       {ModelURL: "http://127.0.0.1:1"},
		"relative model":     {ModelURL: "/model", ResourcesURL: "http://127.0.0.1:2"},
		"unsupported scheme": {ModelURL: "ftp://h", ResourcesURL: "http://127.0.0.1:2"},
	} {
		if err := cfg.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	good := agent.Config{ModelURL: "http://127.0.0.1:1", ResourcesURL: "https://r.example/base/"}
	if err := good.Validate(); err != nil {
		t.Errorf("valid config refused: %v", err)
	}
	if err := agent.Register(server.New(server.Options{}), good, nil); err == nil {
		t.Error("nil client accepted")
	}
}

// telemetryOn enables telemetry in this process, which hosts all three
// servers; start the fleet after it.
func telemetryOn(t *testing.T) (*lens.Handle, *sdkmetric.ManualReader, *tracetest.InMemoryExporter) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	exp := tracetest.NewInMemoryExporter()
	h := servertest.EnableTelemetry(t, telemetry.InitOptions{ServerName: agent.ServerName, ServerType: telemetry.ServerTypeAgent,
		MetricReader: reader, SpanExporter: exp})
	return h, reader, exp
}

// spansOf stops the fleet (so every server span has ended), flushes and
// returns the exported spans.
func spansOf(t *testing.T, f fleet, h *lens.Handle, exp *tracetest.InMemoryExporter) tracetest.SpanStubs {
	t.Helper()
	f.stop()
	if err := h.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	return exp.GetSpans()
}

func find(spans tracetest.SpanStubs, name string, kind trace.SpanKind) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range spans {
		if s.Name == name && (kind == trace.SpanKindUnspecified || s.SpanKind == kind) {
			out = append(out, s)
		}
	}
	return out
}

func one(t *testing.T, spans tracetest.SpanStubs, name string, kind trace.SpanKind) tracetest.SpanStub {
	t.Helper()
	got := find(spans, name, kind)
	if len(got) != 1 {
		var names []string
		for _, s := range spans {
			names = append(names, s.Name+"/"+s.SpanKind.String())
		}
		t.Fatalf("%d spans %q of kind %v, want 1; spans: %v", len(got), name, kind, names)
	}
	return got[0]
}

func attrValue(s tracetest.SpanStub, key string) (attribute.Value, bool) {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func TestRunIsOneTrace(t *testing.T) {
	h, reader, exp := telemetryOn(t)
	f := startFleet(t, fleetOptions{correctProbability: 1})
	resp := f.run(t, protocol.RunRequest{Task: sum, RolloutID: "rollout-trace-1"})
	if resp.Error != "" || resp.Reward != 1 {
		t.Fatalf("run: %+v", resp)
	}
	spans := spansOf(t, f, h, exp)
	if len(spans) < 9 {
		t.Errorf("only %d spans exported", len(spans))
	}

	traceID := spans[0].SpanContext.TraceID()
	for _, s := range spans {
		if s.SpanContext.TraceID() != traceID {
			t.Errorf("span %q is in trace %s, not %s", s.Name, s.SpanContext.TraceID(), traceID)
		}
	}
	if resp.TraceID != traceID.String() {
		t.Errorf("response trace_id %q, spans are in %s", resp.TraceID, traceID)
	}

	rollout := one(t, spans, agent.RolloutSpanName, trace.SpanKindUnspecified)
	if v, _ := attrValue(rollout, telemetry.AttrRolloutID); v.AsString() != "rollout-trace-1" {
		t.Errorf("gym.rollout %s = %q", telemetry.AttrRolloutID, v.Emit())
	}
	if v, _ := attrValue(rollout, agent.AttrTaskID); v.AsString() != sum.ID {
		t.Errorf("gym.rollout task id %q", v.Emit())
	}
	if rollout.Status.Code == codes.Error {
		t.Errorf("successful rollout has error status")
	}
	runServer := one(t, spans, "POST /run", trace.SpanKindServer)
	if rollout.Parent.SpanID() != runServer.SpanContext.SpanID() {
		t.Errorf("gym.rollout's parent is not the /run SERVER span")
	}

	// agent -> model: gym.agent.responses wraps the CLIENT call, whose
	// SERVER side holds gym.model.responses.
	agentResp := one(t, spans, agent.ResponsesSpanName, trace.SpanKindUnspecified)
	if agentResp.Parent.SpanID() != rollout.SpanContext.SpanID() {
		t.Errorf("gym.agent.responses is not a child of gym.rollout")
	}
	if v, _ := attrValue(agentResp, telemetry.AttrRolloutID); v.AsString() != "rollout-trace-1" {
		t.Errorf("gym.agent.responses carries no rollout id")
	}
	modelClient := one(t, spans, "POST /v1/responses", trace.SpanKindClient)
	modelServer := one(t, spans, "POST /v1/responses", trace.SpanKindServer)
	if modelClient.Parent.SpanID() != agentResp.SpanContext.SpanID() || modelServer.Parent.SpanID() != modelClient.SpanContext.SpanID() {
		t.Errorf("model call is not nested gym.agent.responses > CLIENT > SERVER")
	}
	if one(t, spans, model.SpanName, trace.SpanKindUnspecified).Parent.SpanID() != modelServer.SpanContext.SpanID() {
		t.Errorf("gym.model.responses is not a child of the model's SERVER span")
	}

	// agent -> resources: the SERVER span of /verify has the agent's CLIENT
	// span for that call as its parent.
	verifyClient := one(t, spans, "POST /verify", trace.SpanKindClient)
	verifyServer := one(t, spans, "POST /verify", trace.SpanKindServer)
	if verifyServer.Parent.SpanID() != verifyClient.SpanContext.SpanID() {
		t.Errorf("/verify SERVER span parent %s, want the agent's CLIENT span %s",
			verifyServer.Parent.SpanID(), verifyClient.SpanContext.SpanID())
	}
	if !verifyServer.Parent.IsRemote() {
		t.Errorf("/verify SERVER span's parent should arrive over the wire (remote)")
	}
	if verifyClient.Parent.SpanID() != rollout.SpanContext.SpanID() {
		t.Errorf("the verify CLIENT span is not a child of gym.rollout")
	}
	if one(t, spans, resources.SpanName, trace.SpanKindUnspecified).Parent.SpanID() != verifyServer.SpanContext.SpanID() {
		t.Errorf("gym.verify is not a child of the /verify SERVER span")
	}

	// Neither question nor answer is on any span.
	for _, s := range spans {
		for _, kv := range s.Attributes {
			if v := kv.Value.Emit(); strings.Contains(v, "17 + 25") || strings.Contains(v, "The answer is") {
				t.Errorf("span %q attribute %s carries prompt or answer: %q", s.Name, kv.Key, v)
			}
		}
	}

	ok, fail, count := rolloutMetrics(t, reader)
	if ok != 1 || fail != 0 || count != 1 {
		t.Errorf("rollout metrics success=%d failure=%d durations=%d; want 1, 0, 1", ok, fail, count)
	}
}

func TestUnreachableResourcesIsAFailedRollout(t *testing.T) {
	h, reader, exp := telemetryOn(t)
	f := startFleet(t, fleetOptions{correctProbability: 1, resourcesURL: "http://" + servertest.FreeAddr(t) + "?token=hush"})
	resp := f.run(t, protocol.RunRequest{Task: sum})
	if resp.Error == "" || resp.Reward != 0 || resp.Correct {
		t.Fatalf("run against a closed resources port: %+v; want 200 with error and reward 0", resp)
	}
	if resp.TraceID == "" {
		t.Errorf("failed rollout has no trace id")
	}
	ok, fail, count := rolloutMetrics(t, reader)
	if ok != 0 || fail != 1 || count != 1 {
		t.Errorf("rollout metrics success=%d failure=%d durations=%d; want 0, 1, 1", ok, fail, count)
	}
	// A request the runtime refuses is no rollout at all.
	var out protocol.RunResponse
	if err := f.client.PostJSON(context.Background(), f.runURL, protocol.RunRequest{}, &out); server.StatusOf(err) != http.StatusBadRequest {
		t.Errorf("empty task: %v, want 400", err)
	}
	if ok, fail, count := rolloutMetrics(t, reader); ok != 0 || fail != 1 || count != 1 {
		t.Errorf("after a 400: success=%d failure=%d durations=%d; want unchanged 0, 1, 1", ok, fail, count)
	}

	spans := spansOf(t, f, h, exp)
	rollout := one(t, spans, agent.RolloutSpanName, trace.SpanKindUnspecified)
	if rollout.Status.Code != codes.Error || !strings.Contains(rollout.Status.Description, "verify call failed") {
		t.Errorf("gym.rollout status %+v, want an error about the verify call", rollout.Status)
	}
	if strings.Contains(rollout.Status.Description, "hush") {
		t.Errorf("gym.rollout status carries the URL's query: %q", rollout.Status.Description)
	}
	if client := one(t, spans, "POST /verify", trace.SpanKindClient); client.Status.Code != codes.Error {
		t.Errorf("verify CLIENT span status %+v, want error", client.Status)
	}
}

// rolloutMetrics reads gym.rollout.calls by outcome and the number of
// recorded rollout durations; absent series read as zero.
func rolloutMetrics(t *testing.T, r *sdkmetric.ManualReader) (ok, fail int64, durations uint64) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("collect: %v", err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch m.Name {
			case gym.RolloutCallsName:
				for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
					v, _ := p.Attributes.Value(attribute.Key(gym.RolloutOutcomeKey))
					switch v.AsString() {
					case gym.OutcomeSuccess:
						ok = p.Value
					case gym.OutcomeFailure:
						fail = p.Value
					}
				}
			case gym.RolloutDurationName:
				for _, p := range m.Data.(metricdata.Histogram[float64]).DataPoints {
					durations += p.Count
				}
			}
		}
	}
	return ok, fail, durations
}
