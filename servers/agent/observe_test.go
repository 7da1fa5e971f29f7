package agent_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/environment"
	"github.com/gymlens/gymlens/internal/servertest"
	"github.com/gymlens/gymlens/server"
	"github.com/gymlens/gymlens/servers/agent"
	"github.com/gymlens/gymlens/servers/model"
	"github.com/gymlens/gymlens/servers/resources/arithmetic"
)

// sentPaths records the request URIs a server was sent, before its
// rollout prefix is stripped (the middleware runs after the stripping,
// and RequestURI keeps what came on the wire).
type sentPaths struct {
	mu    sync.Mutex
	paths []string
}

func (p *sentPaths) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.paths = append(p.paths, r.RequestURI)
		p.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

func (p *sentPaths) all() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.paths...)
}

// realFleet is the agent between the built-in model server ("policy") and
// the built-in arithmetic resources server ("arith"), each on its own
// loopback port, all in this process.
type realFleet struct {
	agentURL                string
	modelSent, resourceSent *sentPaths
	stop                    func()
}

func startRealFleet(t *testing.T, cfg agent.Config) *realFleet {
	t.Helper()
	f := &realFleet{modelSent: &sentPaths{}, resourceSent: &sentPaths{}}
	var stops []func()

	mo := model.ServerOptions("policy")
	mo.Name, mo.Type, mo.Logger, mo.Middleware = "policy", contract.ServerTypeModel, quiet, f.modelSent.middleware
	ms := server.New(mo)
	mc := model.Defaults()
	mc.Name = "policy"
	if err := model.Register(ms, mc); err != nil {
		t.Fatal(err)
	}
	modelURL, stop := servertest.Start(t, ms)
	stops = append(stops, stop)

	env, err := arithmetic.New(arithmetic.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	ro := environment.ServerOptions(env.Name(), "arith")
	ro.Name, ro.Type, ro.Logger, ro.Middleware = "arith", contract.ServerTypeResources, quiet, f.resourceSent.middleware
	rs := server.New(ro)
	env.Register(rs)
	resourcesURL, stop := servertest.Start(t, rs)
	stops = append(stops, stop)

	cfg.ModelURL, cfg.ResourcesURL = modelURL, resourcesURL
	cfg.ModelServerName, cfg.ResourcesServerName = "policy", "arith"
	ao := agent.ServerOptions("solver")
	ao.Name, ao.Type, ao.Logger = "solver", contract.ServerTypeAgent, quiet
	as := server.New(ao)
	if err := agent.Register(as, cfg, servertest.Client(t)); err != nil {
		t.Fatal(err)
	}
	f.agentURL, stop = servertest.Start(t, as)
	stops = append(stops, stop)
	f.stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	t.Cleanup(f.stop)
	return f
}

// arithmeticRow is a row whose rollout id is "4-0-a2".
const arithmeticRow = `{"responses_create_params":{"input":"What is 2+3?"},"expected_answer":"5",` +
	`"_ng_task_index":4,"_ng_rollout_index":0,"_ng_attempt_index":2}`

func runRow(t *testing.T, url, row string) {
	t.Helper()
	res, err := http.Post(url+"/run", "application/json", strings.NewReader(row))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("POST /run: %d %s", res.StatusCode, body)
	}
}

// TestRolloutIDAcrossRealServers: with telemetry exporting, the model and
// resources servers are sent the rollout's calls under /ng-rollout/<id>/,
// their gym.model.responses and gym.verify spans carry the id and their
// server names, and every span of the rollout, in all three servers,
// carries the same id.
func TestRolloutIDAcrossRealServers(t *testing.T) {
	h, _, exp := telemetryOn(t, "all")
	f := startRealFleet(t, agent.Config{})
	runRow(t, f.agentURL, arithmeticRow)
	f.stop()
	if err := h.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	const id = "4-0-a2"

	for _, p := range f.modelSent.all() {
		if p != "/ng-rollout/"+id+"/v1/responses" {
			t.Errorf("model server was sent %q, want the prefixed /v1/responses", p)
		}
	}
	want := map[string]bool{"/ng-rollout/" + id + "/seed_session": false, "/ng-rollout/" + id + "/verify": false}
	for _, p := range f.resourceSent.all() {
		if _, ok := want[p]; !ok {
			t.Errorf("resources server was sent %q", p)
		}
		want[p] = true
	}
	for p, seen := range want {
		if !seen {
			t.Errorf("resources server was never sent %s (sent %q)", p, f.resourceSent.all())
		}
	}
	if len(f.modelSent.all()) == 0 {
		t.Fatal("the model server got no call")
	}

	for _, c := range []struct{ name, server string }{
		{contract.SpanRollout, "weather_agent"},
		{contract.SpanAgentResponses, "weather_agent"},
		{contract.SpanModelResponses, "policy"},
		{contract.SpanVerify, "weather_agent"},
	} {
		s := one(t, spans, c.name, trace.SpanKindUnspecified)
		if v := servertest.Attrs(s.Attributes)[contract.AttrServerName]; v == "" {
			t.Errorf("%s has no %s", c.name, contract.AttrServerName)
		} else if c.name == contract.SpanModelResponses && v != c.server {
			t.Errorf("%s %s = %q, want the model server's instance name %q", c.name, contract.AttrServerName, v, c.server)
		}
	}
	traceID := one(t, spans, contract.SpanRollout, trace.SpanKindUnspecified).SpanContext.TraceID()
	kinds := map[trace.SpanKind]int{}
	for _, s := range spans {
		if s.SpanContext.TraceID() != traceID {
			t.Errorf("span %q is in another trace", s.Name)
		}
		kinds[s.SpanKind]++
		if v := servertest.Attrs(s.Attributes)[contract.AttrRolloutID]; v != id {
			t.Errorf("span %q (%v) has rollout id %q, want %s", s.Name, s.SpanKind, v, id)
		}
		if s.SpanKind == trace.SpanKindClient {
			if full := servertest.Attrs(s.Attributes)[contract.AttrURLFull]; !strings.Contains(full, "/ng-rollout/"+id+"/") {
				t.Errorf("CLIENT span url.full %q lacks the rollout prefix", full)
			}
		}
	}
	if kinds[trace.SpanKindClient] < 3 || kinds[trace.SpanKindServer] < 4 {
		t.Errorf("span kinds %v: want the CLIENT and SERVER spans of every hop", kinds)
	}

	// GenAI conventions on both sides of the model call.
	modelSpan := one(t, spans, contract.SpanModelResponses, trace.SpanKindUnspecified)
	var modelClient tracetest.SpanStub
	for _, s := range find(spans, contract.ClientSpanName(http.MethodPost), trace.SpanKindClient) {
		if full := servertest.Attrs(s.Attributes)[contract.AttrURLFull]; strings.HasSuffix(full, "/v1/responses") {
			modelClient = s
		}
	}
	respID := servertest.Attrs(modelSpan.Attributes)[contract.AttrGenAIResponseID]
	if respID == "" {
		t.Errorf("gym.model.responses has no %s", contract.AttrGenAIResponseID)
	}
	for _, c := range []struct {
		span     tracetest.SpanStub
		provider string
	}{{modelSpan, contract.GenAIProviderGymlens}, {modelClient, contract.GenAIProviderOpenAI}} {
		for key, want := range map[string]string{
			contract.AttrGenAIOperationName: contract.GenAIOperationChat,
			contract.AttrGenAIProviderName:  c.provider,
			contract.AttrGenAIResponseModel: model.DefaultModel,
			contract.AttrGenAIResponseID:    respID,
			contract.AttrGenAIFinishReasons: `["stop"]`,
		} {
			if v := servertest.Attrs(c.span.Attributes)[key]; v != want {
				t.Errorf("%s %v: %s = %q, want %q", c.span.Name, c.span.SpanKind, key, v, want)
			}
		}
		for _, key := range []string{contract.AttrGenAIInputTokens, contract.AttrGenAIOutputTokens} {
			if v := servertest.Attrs(c.span.Attributes)[key]; v == "" || v == "0" {
				t.Errorf("%s %v: %s = %q, want the answer's count", c.span.Name, c.span.SpanKind, key, v)
			}
		}
	}
}

// TestRolloutPrefixRule: with telemetry off, a rollout's calls are
// prefixed exactly when observability_enabled is set and the row has an
// id; /aggregate_metrics never is.
func TestRolloutPrefixRule(t *testing.T) {
	for _, c := range []struct {
		name    string
		enabled bool
		row     string
		prefix  string
	}{
		{"off", false, arithmeticRow, ""},
		{"observability_enabled", true, arithmeticRow, "/ng-rollout/4-0-a2"},
		{"explicit id", true, `{"responses_create_params":{"input":"2+2?"},"expected_answer":"4","_ng_rollout_id":"job7.r1"}`, "/ng-rollout/job7.r1"},
		{"row without id", true, `{"responses_create_params":{"input":"2+2?"},"expected_answer":"4"}`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := startRealFleet(t, agent.Config{ObservabilityEnabled: c.enabled})
			runRow(t, f.agentURL, c.row)
			res, err := http.Post(f.agentURL+"/aggregate_metrics", "application/json", strings.NewReader(`{"verify_responses":[{"reward":1}]}`))
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				t.Fatalf("aggregate_metrics: %d", res.StatusCode)
			}
			for _, p := range f.modelSent.all() {
				if p != c.prefix+"/v1/responses" {
					t.Errorf("model server was sent %q, want %q", p, c.prefix+"/v1/responses")
				}
			}
			sent := f.resourceSent.all()
			if len(sent) != 3 {
				t.Fatalf("resources server was sent %q, want seed_session, verify and aggregate_metrics", sent)
			}
			for i, route := range []string{"/seed_session", "/verify"} {
				if sent[i] != c.prefix+route {
					t.Errorf("resources server call %d was %q, want %q", i, sent[i], c.prefix+route)
				}
			}
			if sent[2] != "/aggregate_metrics" {
				t.Errorf("aggregate_metrics was sent as %q", sent[2])
			}
		})
	}
}

// histogramCounts reads, for each histogram of the names, its points'
// counts and sums by a rendering of their attributes.
func histogramCounts(t *testing.T, r *sdkmetric.ManualReader) map[string]map[string]uint64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]uint64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			add := func(set attribute.Set, n uint64) {
				if out[m.Name] == nil {
					out[m.Name] = map[string]uint64{}
				}
				var parts []string
				for _, kv := range set.ToSlice() {
					parts = append(parts, string(kv.Key)+"="+kv.Value.Emit())
				}
				out[m.Name][strings.Join(parts, ",")] += n
			}
			switch d := m.Data.(type) {
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					add(p.Attributes, p.Count)
				}
			case metricdata.Histogram[int64]:
				for _, p := range d.DataPoints {
					add(p.Attributes, p.Count)
				}
			}
		}
	}
	return out
}

// TestEpisodeMetrics: a two-turn episode (a tool call, then an answer)
// records two model calls with their first byte, two turns, one turn
// count, one tool call and the GenAI client histograms, under the names
// of the model server, this agent, the tool and the resources server.
func TestEpisodeMetrics(t *testing.T) {
	_, reader, _ := telemetryOn(t, "default")
	f := newFixture(t, script(
		withMember(response("r1", functionCall("c1", "get_weather", `{"city":"SF"}`)), "usage", usage(10, "0", 5, "0")),
		withMember(response("r2", message("m", "It is sunny in SF.")), "usage", usage(20, "0", 7, "0")),
	), resourcesOptions{}, agent.Config{Model: "policy-7b", ModelServerName: "policy_a", ResourcesServerName: "weather"})
	f.run(t, weatherRow)
	got := histogramCounts(t, reader)

	modelKey := contract.AttrModelDialect + "=" + contract.DialectResponses + "," + contract.AttrServerName + "=policy_a"
	agentKey := contract.AttrAgentName + "=weather_agent"
	for _, c := range []struct {
		name, key string
		n         uint64
	}{
		{contract.ModelCallDuration, modelKey, 2},
		{contract.ModelTimeToFirstByte, modelKey, 2},
		{contract.AgentTurnDuration, agentKey, 2},
		{contract.AgentTurnCount, agentKey, 1},
		{contract.ToolCallDuration, contract.AttrServerName + "=weather," + contract.AttrToolName + "=get_weather", 1},
	} {
		if got[c.name][c.key] != c.n || len(got[c.name]) != 1 {
			t.Errorf("%s points %v, want %d under %s", c.name, got[c.name], c.n, c.key)
		}
	}
	var ops, tokens uint64
	for key, n := range got[contract.GenAIOperationDuration] {
		if !strings.Contains(key, contract.AttrGenAIProviderName+"="+contract.GenAIProviderOpenAI) ||
			!strings.Contains(key, contract.AttrGenAIRequestModel+"=policy-7b") || !strings.Contains(key, contract.AttrServerAddress+"=127.0.0.1") {
			t.Errorf("gen_ai.client.operation.duration point %s", key)
		}
		ops += n
	}
	for _, n := range got[contract.GenAITokenUsage] {
		tokens += n
	}
	if ops != 2 || tokens != 4 {
		t.Errorf("GenAI operations %d and token points %d, want 2 and 4 (input and output per call): %v", ops, tokens, got[contract.GenAITokenUsage])
	}
}
