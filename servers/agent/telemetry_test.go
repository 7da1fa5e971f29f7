package agent_test

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/internal/servertest"
	"github.com/gymlens/gymlens/lens"
	"github.com/gymlens/gymlens/server"
	"github.com/gymlens/gymlens/servers/agent"
	"github.com/gymlens/gymlens/telemetry"
)

// telemetryOn enables telemetry with the span groups in this process,
// which hosts the agent and both fakes; start the fixture after it.
func telemetryOn(t *testing.T, groups string) (*lens.Handle, *sdkmetric.ManualReader, *tracetest.InMemoryExporter) {
	t.Helper()
	return telemetryOnEnv(t, groups, nil)
}

// telemetryOnEnv is telemetryOn with extra variables set before Init.
func telemetryOnEnv(t *testing.T, groups string, env map[string]string) (*lens.Handle, *sdkmetric.ManualReader, *tracetest.InMemoryExporter) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	exp := tracetest.NewInMemoryExporter()
	h := servertest.EnableTelemetryEnv(t, groups, env, telemetry.InitOptions{ServerName: "weather_agent",
		ServerType: contract.ServerTypeAgent, MetricReader: reader, SpanExporter: exp})
	return h, reader, exp
}

// spansOf stops the fixture (so every SERVER span has ended), flushes and
// returns the exported spans.
func spansOf(t *testing.T, f *fixture, h *lens.Handle, exp *tracetest.InMemoryExporter) tracetest.SpanStubs {
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

var traceResponse = regexp.MustCompile(`^00-([0-9a-f]{32})-([0-9a-f]{16})-01$`)

// TestRolloutIsOneTrace: the spans of a rollout nest as the package doc
// draws them, in one trace across the three servers; /run names that
// trace in its traceresponse header.
func TestRolloutIsOneTrace(t *testing.T) {
	h, reader, exp := telemetryOn(t, "all")
	f := newFixture(t, script(
		withMember(response("r1", functionCall("c1", "get_weather", `{"city":"SF"}`)), "usage", usage(10, "0", 5, "0")),
		withMember(response("r2", message("m", "It is sunny in SF.")), "usage", usage(20, "0", 7, "0")),
	), resourcesOptions{}, agent.Config{Model: "policy-7b"})
	_, ans := f.run(t, weatherRow)
	spans := spansOf(t, f, h, exp)

	rollout := one(t, spans, contract.SpanRollout, trace.SpanKindUnspecified)
	m := traceResponse.FindStringSubmatch(ans.header.Get(server.HeaderTraceResponse))
	if m == nil || m[1] != rollout.SpanContext.TraceID().String() || m[2] != rollout.SpanContext.SpanID().String() {
		t.Errorf("traceresponse %q, want 00-%s-%s-01", ans.header.Get(server.HeaderTraceResponse),
			rollout.SpanContext.TraceID(), rollout.SpanContext.SpanID())
	}
	for _, s := range spans {
		if s.SpanContext.TraceID() != rollout.SpanContext.TraceID() {
			t.Errorf("span %q is in trace %s, not the rollout's", s.Name, s.SpanContext.TraceID())
		}
	}
	if runServer := one(t, spans, "POST /run", trace.SpanKindServer); rollout.Parent.SpanID() != runServer.SpanContext.SpanID() {
		t.Errorf("gym.rollout's parent is not the /run SERVER span")
	}
	episode := one(t, spans, contract.SpanAgentResponses, trace.SpanKindUnspecified)
	if episode.Parent.SpanID() != rollout.SpanContext.SpanID() {
		t.Errorf("gym.agent.responses is not a child of gym.rollout")
	}
	for _, s := range []tracetest.SpanStub{rollout, episode} {
		if v := servertest.Attrs(s.Attributes)[contract.AttrRolloutID]; v != "3-1" {
			t.Errorf("%s %s = %q, want 3-1", s.Name, contract.AttrRolloutID, v)
		}
		if v := servertest.Attrs(s.Attributes)[contract.AttrServerName]; v != "weather_agent" {
			t.Errorf("%s %s = %q, want the process's server name", s.Name, contract.AttrServerName, v)
		}
	}
	for key, want := range map[string]string{contract.AttrGenAIRequestModel: "policy-7b", contract.AttrGenAIInputTokens: "30", contract.AttrGenAIOutputTokens: "12"} {
		if v := servertest.Attrs(episode.Attributes)[key]; v != want {
			t.Errorf("gym.agent.responses %s = %q, want %q", key, v, want)
		}
	}

	// seed and verify are the rollout's calls, model and tool calls the
	// episode's; each is one CLIENT span "HTTP POST" whose url.full has
	// the rollout's prefix, and the parent of its SERVER span.
	clientsByPath := map[string][]tracetest.SpanStub{}
	for _, s := range find(spans, contract.ClientSpanName(http.MethodPost), trace.SpanKindClient) {
		full := servertest.Attrs(s.Attributes)[contract.AttrURLFull]
		_, path, _ := strings.Cut(strings.TrimPrefix(full, "http://"), "/")
		clientsByPath["/"+path] = append(clientsByPath["/"+path], s)
	}
	for _, c := range []struct {
		path, server string
		n            int
		parent       tracetest.SpanStub
	}{
		{"/ng-rollout/3-1/seed_session", "POST /seed_session", 1, rollout},
		{"/ng-rollout/3-1/verify", "POST /verify", 1, rollout},
		{"/ng-rollout/3-1/v1/responses", "POST /ng-rollout/{id}/v1/responses", 2, episode},
		{"/ng-rollout/3-1/get_weather", "POST /{tool}", 1, episode},
	} {
		clients, servers := clientsByPath[c.path], find(spans, c.server, trace.SpanKindServer)
		if len(clients) != c.n || len(servers) != c.n {
			t.Errorf("%s: %d CLIENT and %d SERVER spans, want %d (CLIENT spans by path: %v)", c.path, len(clients), len(servers), c.n, keysOf(clientsByPath))
			continue
		}
		for i := range clients {
			if clients[i].Parent.SpanID() != c.parent.SpanContext.SpanID() {
				t.Errorf("%s CLIENT span is not a child of %s", c.path, c.parent.Name)
			}
			found := false
			for _, s := range servers {
				found = found || s.Parent.SpanID() == clients[i].SpanContext.SpanID()
			}
			if !found {
				t.Errorf("%s CLIENT span has no SERVER span under it", c.path)
			}
		}
	}
	// Every span of the rollout, in the three servers, names it.
	for _, s := range spans {
		if v := servertest.Attrs(s.Attributes)[contract.AttrRolloutID]; v != "3-1" {
			t.Errorf("span %q (%v) has rollout id %q, want 3-1", s.Name, s.SpanKind, v)
		}
	}
	// The resources fake was sent the prefixed paths, and routed them
	// stripped.
	for _, r := range f.log.all() {
		if !strings.HasPrefix(r.Sent, "/ng-rollout/3-1/") {
			t.Errorf("%s was sent %q, without the rollout prefix", r, r.Sent)
		}
	}

	// Neither prompt, answer nor tool arguments are on any span.
	for _, s := range spans {
		for _, kv := range s.Attributes {
			if v := kv.Value.Emit(); strings.Contains(v, "weather in SF") || strings.Contains(v, "sunny") || strings.Contains(v, `"city"`) {
				t.Errorf("span %q attribute %s carries prompt, answer or arguments: %q", s.Name, kv.Key, v)
			}
		}
	}
	if ok, fail, n := rolloutMetrics(t, reader); ok != 1 || fail != 0 || n != 1 {
		t.Errorf("rollout metrics success=%d failure=%d durations=%d; want 1, 0, 1", ok, fail, n)
	}
}

// TestTraceResponseWithoutRolloutSpan: with the rollout group off the
// header names the /run SERVER span; with telemetry off there is none.
func TestTraceResponseWithoutRolloutSpan(t *testing.T) {
	t.Run("server span", func(t *testing.T) {
		h, _, exp := telemetryOn(t, "server,http_client")
		f := newFixture(t, script(response("r1", message("m", "x"))), resourcesOptions{}, agent.Config{})
		_, ans := f.run(t, minimalRow)
		spans := spansOf(t, f, h, exp)
		if len(find(spans, contract.SpanRollout, trace.SpanKindUnspecified)) != 0 {
			t.Fatal("gym.rollout with the rollout group off")
		}
		run := one(t, spans, "POST /run", trace.SpanKindServer)
		if want := "00-" + run.SpanContext.TraceID().String() + "-" + run.SpanContext.SpanID().String() + "-01"; ans.header.Get("traceresponse") != want {
			t.Errorf("traceresponse %q, want %q", ans.header.Get("traceresponse"), want)
		}
	})
	t.Run("telemetry off", func(t *testing.T) {
		f := newFixture(t, script(response("r1", message("m", "x"))), resourcesOptions{}, agent.Config{})
		if _, ans := f.run(t, minimalRow); ans.header.Get("traceresponse") != "" {
			t.Errorf("traceresponse %q with telemetry off", ans.header.Get("traceresponse"))
		}
	})
}

// TestTraceResponseOnlyForOwnSpan: a caller that sent a traceparent the
// agent recorded a span under learns that span; one whose trace was
// sampled out (under parent-based sampling the agent records nothing)
// gets no header, which would only repeat its own traceparent.
func TestTraceResponseOnlyForOwnSpan(t *testing.T) {
	h, _, exp := telemetryOnEnv(t, "all", map[string]string{
		"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.01"})
	f := newFixture(t, script(response("r1", message("m", "x")), response("r2", message("m", "y"))), resourcesOptions{}, agent.Config{})
	const (
		traceID    = "4bf92f3577b34da6a3ce929d0e0e4736"
		sampledOut = "00-" + traceID + "-00f067aa0ba902b7-00"
		sampled    = "00-" + traceID + "-00f067aa0ba902b7-01"
	)
	if a := postHeader(t, f.agentURL+"/run", minimalRow, http.Header{"Traceparent": {sampledOut}}); a.status != http.StatusOK {
		t.Fatalf("POST /run: %d %s", a.status, a.body)
	} else if v := a.header.Get(server.HeaderTraceResponse); v != "" {
		t.Errorf("traceresponse %q for a sampled-out trace the caller named", v)
	}
	a := postHeader(t, f.agentURL+"/run", minimalRow, http.Header{"Traceparent": {sampled}})
	if a.status != http.StatusOK {
		t.Fatalf("POST /run: %d %s", a.status, a.body)
	}
	spans := spansOf(t, f, h, exp)
	for _, s := range spans {
		if s.SpanContext.TraceID().String() != traceID {
			t.Errorf("span %q in trace %s: the sampled-out one left spans, or the sampled one was not continued", s.Name, s.SpanContext.TraceID())
		}
	}
	rollout := one(t, spans, contract.SpanRollout, trace.SpanKindUnspecified)
	if got, want := a.header.Get(server.HeaderTraceResponse), "00-"+traceID+"-"+rollout.SpanContext.SpanID().String()+"-01"; got != want {
		t.Errorf("traceresponse %q for the sampled trace, want %q (gym.rollout)", got, want)
	}
}

// TestRowWithoutRolloutID: no id is minted for a row that has none.
func TestRowWithoutRolloutID(t *testing.T) {
	h, _, exp := telemetryOn(t, "all")
	f := newFixture(t, script(response("r1", message("m", "x"))), resourcesOptions{}, agent.Config{})
	f.run(t, minimalRow)
	spans := spansOf(t, f, h, exp)
	for _, name := range []string{contract.SpanRollout, contract.SpanAgentResponses} {
		if v, ok := servertest.Attrs(one(t, spans, name, trace.SpanKindUnspecified).Attributes)[contract.AttrRolloutID]; ok {
			t.Errorf("%s carries rollout id %q for a row without one", name, v)
		}
	}
	for _, r := range f.log.all() {
		if strings.Contains(r.Baggage, contract.AttrRolloutID) {
			t.Errorf("%s got baggage %q", r, r.Baggage)
		}
	}
}

// TestFailedRolloutsAreCounted: every rollout that passed validation is
// counted once, failed ones as failures; a refused row is no rollout.
// (With observability_enabled, a malformed explicit rollout id fails the
// rollout.)
func TestFailedRolloutsAreCounted(t *testing.T) {
	h, reader, exp := telemetryOn(t, "all")
	f := newFixture(t, func(n int, _ []byte) (int, string) {
		if n == 0 {
			return http.StatusServiceUnavailable, `{"detail":"overloaded"}`
		}
		return http.StatusOK, response("r", message("m", "x"))
	}, resourcesOptions{}, agent.Config{ObservabilityEnabled: true})
	for _, c := range []struct {
		row    string
		status int
	}{
		{minimalRow, 500}, // the model's 503
		{`{"responses_create_params":{"input":"hi"},"_ng_rollout_id":"bad id"}`, 500},
		{`{"responses_create_params":{"input":"hi","not_a_param":"c"}}`, 422},
		{`{"responses_create_params":{"input":"hi"},"_ng_rollout_id":"ok-1"}`, 200},
	} {
		if a := post(t, f.agentURL+"/run", c.row); a.status != c.status {
			t.Errorf("%s: status %d (%s), want %d", c.row, a.status, a.body, c.status)
		}
	}
	if ok, fail, n := rolloutMetrics(t, reader); ok != 1 || fail != 2 || n != 3 {
		t.Errorf("rollout metrics success=%d failure=%d durations=%d; want 1, 2, 3", ok, fail, n)
	}
	spans := spansOf(t, f, h, exp)
	rollouts := find(spans, contract.SpanRollout, trace.SpanKindUnspecified)
	if len(rollouts) != 3 {
		t.Fatalf("%d gym.rollout spans, want 3", len(rollouts))
	}
	errs := 0
	for _, s := range rollouts {
		if s.Status.Code.String() == "Error" {
			errs++
		}
	}
	if errs != 2 {
		t.Errorf("%d gym.rollout spans with error status, want 2", errs)
	}
}

// TestRolloutIDBaggageOnlyWhenReadDownstream: the rollout id travels as
// baggage exactly when a span group that reads it downstream (verify,
// model_call) is on.
func TestRolloutIDBaggageOnlyWhenReadDownstream(t *testing.T) {
	for _, c := range []struct {
		groups      string
		wantBaggage bool
	}{
		{"default", false},
		{"server,http_client,rollout", false},
		{"default,verify", true},
		{"all", true},
	} {
		t.Run(c.groups, func(t *testing.T) {
			telemetryOn(t, c.groups)
			f := newFixture(t, script(response("r1", functionCall("c1", "get_weather", `{"city":"SF"}`)),
				response("r2", message("m", "x"))), resourcesOptions{}, agent.Config{})
			f.run(t, `{"responses_create_params":{"input":"hi"},"_ng_rollout_id":"rollout-baggage-1"}`)
			reqs := f.log.all()
			if len(reqs) != 5 {
				t.Fatalf("calls %q", f.log.sequence())
			}
			for _, r := range reqs {
				has := strings.Contains(r.Baggage, contract.AttrRolloutID+"=rollout-baggage-1")
				if has != c.wantBaggage {
					t.Errorf("%s: Baggage %q; rollout id sent = %v, want %v", r, r.Baggage, has, c.wantBaggage)
				}
			}
		})
	}
}

func keysOf[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// rolloutMetrics reads the rollout counter by outcome and the number of
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
			case contract.RolloutCompleted:
				for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
					v, _ := p.Attributes.Value(attribute.Key(contract.AttrRolloutOutcome))
					switch v.AsString() {
					case contract.OutcomeSuccess:
						ok = p.Value
					case contract.OutcomeFailure:
						fail = p.Value
					}
				}
			case contract.RolloutDuration:
				for _, p := range m.Data.(metricdata.Histogram[float64]).DataPoints {
					durations += p.Count
				}
			}
		}
	}
	return ok, fail, durations
}

// TestSampledOutRolloutSendsNoPrefix: a rollout whose trace the sampler
// dropped (parentbased_always_off, so the /run SERVER span is a sampled-out
// root) exports no span and sends neither the rollout-id path prefix nor
// the id as baggage, which only serve the callees' spans; its metrics are
// recorded as for any rollout.
func TestSampledOutRolloutSendsNoPrefix(t *testing.T) {
	h, reader, exp := telemetryOnEnv(t, "all", map[string]string{lens.KeyTracesSampler: "parentbased_always_off"})
	f := newFixture(t, script(response("r1", functionCall("c1", "get_weather", `{"city":"SF"}`)),
		response("r2", message("m", "x"))), resourcesOptions{}, agent.Config{})
	f.run(t, weatherRow)
	wantNoRolloutID(t, f, "for a sampled-out trace")
	if spans := spansOf(t, f, h, exp); len(spans) != 0 {
		t.Errorf("%d spans exported from a sampled-out rollout, first %q", len(spans), spans[0].Name)
	}
	if ok, fail, n := rolloutMetrics(t, reader); ok != 1 || fail != 0 || n != 1 {
		t.Errorf("rollout metrics success=%d failure=%d durations=%d; want 1, 0, 1", ok, fail, n)
	}
}

// With traces off (metrics only), a rollout's calls carry no prefix and no
// rollout id: nothing would record them. Its metrics are still recorded.
func TestMetricsOnlyRolloutSendsNoPrefix(t *testing.T) {
	_, reader, _ := telemetryOnEnv(t, "all", map[string]string{lens.PrimaryPrefix + lens.KeyTracesEnabled: "0"})
	f := newFixture(t, script(response("r1", functionCall("c1", "get_weather", `{"city":"SF"}`)),
		response("r2", message("m", "x"))), resourcesOptions{}, agent.Config{})
	f.run(t, weatherRow)
	wantNoRolloutID(t, f, "with traces off")
	if ok, fail, n := rolloutMetrics(t, reader); ok != 1 || fail != 0 || n != 1 {
		t.Errorf("rollout metrics success=%d failure=%d durations=%d; want 1, 0, 1", ok, fail, n)
	}
}

// wantNoRolloutID checks the five calls of the weather rollout carried
// neither the rollout prefix nor the rollout id in baggage (why says when).
func wantNoRolloutID(t *testing.T, f *fixture, why string) {
	t.Helper()
	reqs := f.log.all()
	if len(reqs) != 5 {
		t.Fatalf("calls %q", f.log.sequence())
	}
	for _, r := range reqs {
		if strings.HasPrefix(r.Sent, "/ng-rollout/") || strings.Contains(r.Baggage, contract.AttrRolloutID) {
			t.Errorf("%s was sent %q with baggage %q: a rollout prefix or id %s", r, r.Sent, r.Baggage, why)
		}
	}
}
