package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/trace"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/internal/servertest"
	"github.com/gymlens/gymlens/lens"
	"github.com/gymlens/gymlens/server"
)

// durationPoints collects the data points of http.server.request.duration.
func durationPoints(t *testing.T, reader *sdkmetric.ManualReader) []metricdata.HistogramDataPoint[float64] {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var out []metricdata.HistogramDataPoint[float64]
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == contract.HTTPServerRequestDuration {
				out = append(out, m.Data.(metricdata.Histogram[float64]).DataPoints...)
			}
		}
	}
	return out
}

// floodMethods are the request methods the semantic conventions know;
// every other method must be recorded as _OTHER.
var floodMethods = []string{"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "TRACE", "PATCH"}

// randomMethod returns a valid method token that is not one of the known
// methods (CONNECT is left out: a client sends it without a path).
func randomMethod(r *rand.Rand) string {
	if r.IntN(4) == 0 {
		return strings.ToLower(floodMethods[r.IntN(len(floodMethods))]) // case matters: "get" is not GET
	}
	const letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ_-"
	for {
		b := make([]byte, 3+r.IntN(8))
		for i := range b {
			b[i] = letters[r.IntN(len(letters))]
		}
		if m := string(b); !slices.Contains(floodMethods, m) && m != "CONNECT" {
			return m
		}
	}
}

// randomPath returns a fresh path of one to four random segments, some of
// them escaped bytes, under a prefix no route uses.
func randomPath(r *rand.Rand, i int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "/flood-%d", i)
	for range r.IntN(4) {
		b.WriteByte('/')
		for range 1 + r.IntN(12) {
			switch c := r.IntN(40); {
			case c < 26:
				b.WriteByte(byte('a' + c))
			case c < 36:
				b.WriteByte(byte('0' + c - 26))
			default:
				fmt.Fprintf(&b, "%%%02X", r.IntN(256))
			}
		}
	}
	return b.String()
}

// TestRouteFloodKeepsMetricCardinalityBounded sends 10,000 requests to
// distinct random paths, a share of them with made-up methods, and checks
// that http.server.request.duration still names only the registered
// routes, and that no SERVER span of an unmatched request is named after
// its path.
func TestRouteFloodKeepsMetricCardinalityBounded(t *testing.T) {
	spans, reader, h := enableTelemetry(t, "server")
	s := server.New(server.Options{Name: "flood", Logger: slog.New(slog.DiscardHandler)})
	server.Handle(s, "POST /echo", func(_ context.Context, r echoReq) (echoResp, error) {
		return echoResp{Greeting: "hi " + r.Name}, nil
	})
	s.HandleFunc("GET /items/{id}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"id": r.PathValue("id")})
	})
	routes := []string{"/echo", "/items/{id}"} // GET /health is not instrumented
	base, stop := servertest.Start(t, s)

	transport := &http.Transport{MaxIdleConnsPerHost: 8}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	const flood, workers = 10000, 8
	type result struct {
		method string
		status int
	}
	results := make(chan result, 256)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 42))
			for i := w; i < flood; i += workers {
				method, path, body := http.MethodPost, randomPath(r, i), `{"name":"x"}`
				switch {
				case i%5 == 0:
					method = randomMethod(r)
				case i%5 == 1:
					method = floodMethods[r.IntN(len(floodMethods))]
				case i%50 == 2:
					path = "/items/" + fmt.Sprint(i) // a real route, a distinct raw path
					method, body = http.MethodGet, ""
				case i%50 == 3:
					path = "/echo" // the other real route
				case i%100 == 4:
					path = "/x/.." + path // the mux redirects to the clean path
				}
				req, err := http.NewRequest(method, base+path, strings.NewReader(body))
				if err != nil {
					t.Errorf("request %s %s: %v", method, path, err)
					return
				}
				res, err := client.Do(req)
				if err != nil {
					t.Errorf("%s %s: %v", method, path, err)
					return
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				results <- result{method, res.StatusCode}
			}
		})
	}
	go func() { wg.Wait(); close(results) }()
	instrumented, statuses := 0, map[int]int{}
	for r := range results {
		statuses[r.status]++
		if r.status/100 != 3 { // the mux answers path clean-up redirects itself
			instrumented++
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	stop()
	if err := h.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Logf("statuses %v", statuses)
	if statuses[http.StatusOK] < 2*flood/50 || statuses[http.StatusNotFound] < flood/2 {
		t.Errorf("statuses %v: the flood did not reach both the routes and the catch-all", statuses)
	}

	points := durationPoints(t, reader)
	routeValues := map[string]bool{}
	var count uint64
	for _, p := range points {
		count += p.Count
		route, hasRoute := p.Attributes.Value("http.route")
		if hasRoute {
			routeValues[route.AsString()] = true
			if !slices.Contains(routes, route.AsString()) {
				t.Errorf("http.route %q is not a registered route", route.AsString())
			}
		} else {
			routeValues["(none)"] = true
		}
		method, _ := p.Attributes.Value("http.request.method")
		if m := method.AsString(); m != "_OTHER" && !slices.Contains(floodMethods, m) {
			t.Errorf("http.request.method %q recorded as is; unknown methods must be _OTHER", m)
		}
		for _, kv := range p.Attributes.ToSlice() {
			if strings.Contains(kv.Value.Emit(), "/flood-") {
				t.Errorf("raw path in metric attribute %s=%s", kv.Key, kv.Value.Emit())
			}
		}
	}
	if len(routeValues) > len(routes)+1 {
		t.Errorf("%d http.route values %v after the flood, want at most %d", len(routeValues), routeValues, len(routes)+1)
	}
	// Each attribute set is (route or none) x (known method or _OTHER) x
	// status: bounded by the server, not by the client.
	if limit := (len(routes) + 1) * (len(floodMethods) + 1) * len(statuses); len(points) > limit {
		t.Errorf("%d attribute sets, want at most %d", len(points), limit)
	}
	if count != uint64(instrumented) {
		t.Errorf("histogram counted %d requests, %d were answered by the server's handlers", count, instrumented)
	}

	spanNames := map[string]bool{}
	for _, sp := range spans.GetSpans() {
		if sp.SpanKind != trace.SpanKindServer {
			continue
		}
		spanNames[sp.Name] = true
		if strings.Contains(sp.Name, "/") && sp.Name != "POST /echo" && sp.Name != "GET /items/{id}" {
			t.Errorf("SERVER span named %q: an unmatched request's span must not carry its path", sp.Name)
		}
	}
	t.Logf("%d SERVER spans exported (%d dropped), %d distinct names, %d histogram attribute sets",
		len(spans.GetSpans()), h.DroppedSpans(), len(spanNames), len(points))
}

// Secrets the redaction test plants; none may appear in any exported span.
const (
	secretPrompt   = "tell-me-the-launch-codes"
	secretAPIKey   = "sk-live-0123456789"
	secretHeader   = "xk-9876543210"
	secretContent  = "the-first-prompt-part"
	secretInput    = "private-input-text"
	queryToken     = "secret"
	queryKey       = "abc"
	plainTaskValue = "task-7"
)

// TestExportedSpansRedactAttributesAndStripQueries goes through the real
// export path: a handler puts sensitive attributes on its SERVER span, a
// client calls it with a query string carrying credentials, and the
// spans the exporter receives must hold none of those values.
func TestExportedSpansRedactAttributesAndStripQueries(t *testing.T) {
	spans, _, h := enableTelemetry(t, "server,http_client")
	s := server.New(server.Options{Name: "redact", Logger: slog.New(slog.DiscardHandler)})
	server.Handle(s, "POST /act", func(ctx context.Context, r echoReq) (echoResp, error) {
		span := trace.SpanFromContext(ctx)
		if !span.IsRecording() {
			return echoResp{}, fmt.Errorf("no recording SERVER span in the handler")
		}
		lens.SetAttributes(span, map[string]any{
			"prompt":                  secretPrompt,
			"api_key":                 secretAPIKey,
			"x-api-key":               secretHeader,
			"gen_ai.prompt.0.content": secretContent,
			"input_text":              secretInput,
			"nemo.gym.task.id":        plainTaskValue,
			"nemo.gym.answer.length":  12,
		})
		if r.Name == "fail" {
			return echoResp{}, server.Errorf(http.StatusBadGateway, "upstream refused")
		}
		return echoResp{Greeting: "ok"}, nil
	})
	base, stop := servertest.Start(t, s)

	client := server.NewClient(server.ClientOptions{Retries: -1})
	defer client.CloseIdleConnections()
	query := "?token=" + queryToken + "&key=" + queryKey
	var out echoResp
	if err := client.PostJSON(context.Background(), base+"/act"+query, echoReq{Name: "ok"}, &out); err != nil {
		t.Fatalf("call: %v", err)
	}
	err := client.PostJSON(context.Background(), base+"/act"+query+"#frag", echoReq{Name: "fail"}, &out)
	if server.StatusOf(err) != http.StatusBadGateway {
		t.Fatalf("failing call: %v, want a 502", err)
	}
	if strings.Contains(err.Error(), queryToken) || strings.Contains(err.Error(), "?") {
		t.Errorf("client error repeats the query: %v", err)
	}
	// An unmatched path with a query, through a plain HTTP client.
	res, err := http.Post(base+"/nowhere"+query, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	http.DefaultClient.CloseIdleConnections()

	stop()
	if err := h.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := spans.GetSpans()
	secrets := []string{secretPrompt, secretAPIKey, secretHeader, secretContent, secretInput, queryToken, queryKey, "token=", "frag"}
	leak := func(where, text string) {
		t.Helper()
		for _, s := range secrets {
			if strings.Contains(strings.ToLower(text), strings.ToLower(s)) {
				t.Errorf("%s holds %q: %q", where, s, text)
			}
		}
	}
	var serverSpans, clientSpans, redactedSpans int
	for _, sp := range got {
		leak("span name", sp.Name)
		leak("status of "+sp.Name, sp.Status.Description)
		attrs := map[attribute.Key]attribute.Value{}
		for _, kv := range sp.Attributes {
			attrs[kv.Key] = kv.Value
			leak(fmt.Sprintf("%s attribute %s", sp.Name, kv.Key), kv.Value.Emit())
		}
		for _, ev := range sp.Events {
			leak("event name on "+sp.Name, ev.Name)
			for _, kv := range ev.Attributes {
				leak(fmt.Sprintf("%s event %s attribute %s", sp.Name, ev.Name, kv.Key), kv.Value.Emit())
			}
		}
		for _, key := range []attribute.Key{"url.full", "url.path", "url.query"} {
			if v, ok := attrs[key]; ok && (strings.ContainsAny(v.Emit(), "?#") || key == "url.query") {
				t.Errorf("%s: %s=%q carries a query or fragment", sp.Name, key, v.Emit())
			}
		}
		switch sp.SpanKind {
		case trace.SpanKindServer:
			serverSpans++
			if _, ok := attrs["url.path"]; !ok {
				t.Errorf("SERVER span %s has no url.path", sp.Name)
			}
		case trace.SpanKindClient:
			clientSpans++
			if v := attrs["url.full"]; v.AsString() != base+"/act" {
				t.Errorf("CLIENT span url.full = %q, want %q", v.AsString(), base+"/act")
			}
		}
		if _, ok := attrs["prompt"]; !ok {
			continue
		}
		redactedSpans++
		for _, key := range []attribute.Key{"prompt", "api_key", "x-api-key", "gen_ai.prompt.0.content", "input_text"} {
			if v := attrs[key]; v.AsString() != lens.Redacted {
				t.Errorf("%s: %s = %q, want %q", sp.Name, key, v.Emit(), lens.Redacted)
			}
		}
		if v := attrs["nemo.gym.task.id"]; v.AsString() != plainTaskValue {
			t.Errorf("%s: a plain attribute was changed: %q", sp.Name, v.Emit())
		}
		if v := attrs["nemo.gym.answer.length"]; v.AsInt64() != 12 {
			t.Errorf("%s: a numeric attribute was changed: %q", sp.Name, v.Emit())
		}
	}
	if serverSpans != 3 || clientSpans != 2 || redactedSpans != 2 {
		t.Errorf("%d SERVER, %d CLIENT, %d redacted spans; want 3, 2 and 2", serverSpans, clientSpans, redactedSpans)
	}
}
