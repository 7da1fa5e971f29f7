package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/internal/servertest"
	"github.com/gymlens/gymlens/internal/testenv"
	"github.com/gymlens/gymlens/lens"
	"github.com/gymlens/gymlens/protocol"
	"github.com/gymlens/gymlens/server"
	"github.com/gymlens/gymlens/telemetry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type echoReq struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
}

func (r *echoReq) Validate() error {
	if r.Name == "" {
		return errors.New("name is required")
	}
	return nil
}

type echoResp struct {
	Greeting string `json:"greeting"`
}

// start runs s on a loopback port until the test ends and returns its URL.
// newClient is a default client whose idle connections close with the test.
func newClient(t *testing.T) *server.Client {
	t.Helper()
	c := server.NewClient(server.ClientOptions{})
	t.Cleanup(c.CloseIdleConnections)
	return c
}

func start(t *testing.T, s *server.Server) string {
	t.Helper()
	url, _ := servertest.Start(t, s)
	return url
}

func newEchoServer(t *testing.T, opts server.Options) (*server.Server, *atomic.Int64) {
	t.Helper()
	var calls atomic.Int64
	s := server.New(opts)
	server.Handle(s, "POST /echo", func(_ context.Context, r echoReq) (echoResp, error) {
		calls.Add(1)
		switch r.Name {
		case "panic":
			panic("boom")
		case "fail":
			return echoResp{}, errors.New("it failed")
		case "teapot":
			return echoResp{}, server.Errorf(http.StatusTeapot, "short and stout")
		}
		return echoResp{Greeting: fmt.Sprintf("hello %s x%d", r.Name, r.Count)}, nil
	})
	return s, &calls
}

func post(t *testing.T, url, body string) (int, string) {
	t.Helper()
	res, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func TestTypedHandlerDecodingAndErrors(t *testing.T) {
	s, calls := newEchoServer(t, server.Options{Name: "echo", MaxBodyBytes: 1024})
	url := start(t, s) + "/echo"
	cases := []struct {
		body       string
		status     int
		errType    string
		msgHas     string
		reachesApp bool
	}{
		{`{"name":"ada","count":2}`, 200, "", "hello ada x2", true},
		{`{"name":"ada"`, 422, "json_invalid", "JSON decode error", false},
		{`{"name":"ada",}`, 422, "json_invalid", "JSON decode error", false},
		{`{"name":"ada","count":"two"}`, 422, "int_type", `"loc":["body","count"]`, false},
		{`{"name":"ada"} {"x":1}`, 422, "json_invalid", "JSON decode error", false},
		{`{"name":"ada"}}`, 422, "json_invalid", "JSON decode error", false},
		{`{"name":"ada"}]]`, 422, "json_invalid", "JSON decode error", false},
		{``, 422, "json_invalid", "JSON decode error", false},
		{`{"count":1}`, 422, "value_error", "name is required", false},
		{`{"name":"` + strings.Repeat("a", 2000) + `"}`, 413, "", "larger than 1024 bytes", false},
		{`{"name":"fail"}`, 500, "", "it failed", true},
		{`{"name":"teapot"}`, 418, "", "short and stout", true},
		{`{"name":"panic"}`, 500, "", "handler panicked", true},
		{`{"name":"after-panic"}`, 200, "", "hello after-panic", true},
	}
	for _, c := range cases {
		before := calls.Load()
		status, body := post(t, url, c.body)
		if status != c.status || !strings.Contains(body, c.msgHas) {
			t.Errorf("%.40q -> %d %s; want %d containing %q", c.body, status, body, c.status, c.msgHas)
		}
		if c.status != 200 {
			servertest.CheckErrorBody(t, c.status, []byte(body))
		}
		if c.errType != "" {
			var vb protocol.ValidationError
			if err := json.Unmarshal([]byte(body), &vb); err != nil || len(vb.Detail) != 1 || vb.Detail[0].Type != c.errType {
				t.Errorf("%.40q: error body %s, want one detail of type %q", c.body, body, c.errType)
			}
		}
		if reached := calls.Load() > before; reached != c.reachesApp {
			t.Errorf("%.40q: handler reached = %v, want %v", c.body, reached, c.reachesApp)
		}
	}
	res, err := http.Get(strings.TrimSuffix(url, "/echo") + "/health")
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("health: %v %v", res, err)
	}
	res.Body.Close()
}

// slowServer serves opts with one route, POST /slow, whose handler
// closes entered and answers once release is closed. cancel begins the
// shutdown; served gets Serve's result.
func slowServer(t *testing.T, opts server.Options) (addr net.Addr, entered, release chan struct{}, cancel context.CancelFunc, served chan error) {
	t.Helper()
	s := server.New(opts)
	entered, release = make(chan struct{}), make(chan struct{})
	server.Handle(s, "POST /slow", func(_ context.Context, _ echoReq) (echoResp, error) {
		close(entered)
		<-release
		return echoResp{Greeting: "done"}, nil
	})
	addr, err := s.Listen()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served = make(chan error, 1)
	go func() { served <- s.Serve(ctx) }()
	return addr, entered, release, cancel, served
}

func TestGracefulShutdownDrainsInFlight(t *testing.T) {
	addr, entered, release, cancel, served := slowServer(t, server.Options{Name: "slow"})
	type reply struct {
		status int
		body   string
	}
	replies := make(chan reply, 1)
	go func() {
		res, err := http.Post("http://"+addr.String()+"/slow", "application/json", strings.NewReader(`{"name":"x"}`))
		if err != nil {
			replies <- reply{0, err.Error()}
			return
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		replies <- reply{res.StatusCode, string(b)}
	}()
	<-entered
	cancel() // shutdown begins with the request in flight
	// New connections are refused once shutdown started.
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr.String(), time.Second)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("listener still accepting after shutdown began")
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(release)
	r := <-replies
	if r.status != 200 || !strings.Contains(r.body, "done") {
		t.Fatalf("in-flight request lost in shutdown: %d %s", r.status, r.body)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}

// A connection that has sent no request (a client transport's spare)
// does not hold a drain up: net/http alone would wait 5 s for it, past a
// shorter drain bound, and Serve would fail with the drain's deadline.
// The spare is closed; the request in flight on another connection still
// gets its answer.
func TestShutdownClosesConnectionsWithoutARequest(t *testing.T) {
	addr, entered, release, cancel, served := slowServer(t, server.Options{Name: "spare", ShutdownTimeout: 3 * time.Second})
	spare, err := net.DialTimeout("tcp", addr.String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer spare.Close()
	replies := make(chan int, 1)
	go func() {
		res, err := http.Post("http://"+addr.String()+"/slow", "application/json", strings.NewReader(`{"name":"x"}`))
		if err != nil {
			replies <- 0
			return
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		replies <- res.StatusCode
	}()
	<-entered
	cancel()
	// The spare is closed by the server: a read ends.
	if err := spare.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if n, err := spare.Read(make([]byte, 1)); err == nil {
		t.Fatalf("the spare connection read %d bytes, want it closed", n)
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the spare connection was left open while the server drained")
	}
	close(release)
	if code := <-replies; code != http.StatusOK {
		t.Fatalf("the request in flight got %d", code)
	}
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v, want a clean drain", err)
	}
}

// enableTelemetry turns telemetry on in this process with in-memory
// exporters; servers must be created afterwards.
func enableTelemetry(t *testing.T, groups string) (*tracetest.InMemoryExporter, *sdkmetric.ManualReader, *lens.Handle) {
	t.Helper()
	spans := tracetest.NewInMemoryExporter()
	reader := sdkmetric.NewManualReader()
	h := servertest.EnableTelemetryGroups(t, groups, telemetry.InitOptions{ServerName: "t",
		ServerType: contract.ServerTypeResources, SpanExporter: spans, MetricReader: reader})
	return spans, reader, h
}

func TestIngressAndEgressTelemetry(t *testing.T) {
	spans, reader, h := enableTelemetry(t, "default")
	callee, _ := newEchoServer(t, server.Options{Name: "callee"})
	calleeURL := start(t, callee)

	caller := server.New(server.Options{Name: "caller"})
	client := newClient(t)
	server.Handle(caller, "POST /relay/{id}", func(ctx context.Context, r echoReq) (echoResp, error) {
		var out echoResp
		err := client.PostJSON(ctx, calleeURL+"/echo?token=s3cret&x=1", r, &out)
		return out, err
	})
	callerURL := start(t, caller)

	for i := range 3 {
		status, body := post(t, fmt.Sprintf("%s/relay/%d?debug=1", callerURL, i), `{"name":"ada"}`)
		if status != 200 || !strings.Contains(body, "hello ada") {
			t.Fatalf("relay: %d %s", status, body)
		}
	}
	// Unknown paths: no new route value beyond the empty one.
	for i := range 20 {
		post(t, fmt.Sprintf("%s/nope/%d", callerURL, i), `{}`)
	}
	if err := h.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}

	got := spans.GetSpans()
	byID := map[trace.SpanID]tracetest.SpanStub{}
	for _, s := range got {
		byID[s.SpanContext.SpanID()] = s
	}
	var servers, clients int
	for _, s := range got {
		switch s.SpanKind {
		case trace.SpanKindServer:
			servers++
			if s.Name != "POST /relay/{id}" && s.Name != "POST /echo" && s.Name != "POST" {
				t.Errorf("SERVER span named %q, want the route pattern", s.Name)
			}
			if s.Name == "POST /echo" {
				parent, ok := byID[s.Parent.SpanID()]
				if !ok || parent.SpanKind != trace.SpanKindClient || !s.Parent.IsRemote() {
					t.Errorf("echo SERVER span's parent is not the caller's CLIENT span: %+v", parent.Name)
				}
			}
		case trace.SpanKindClient:
			clients++
			if s.Name != contract.ClientSpanName(http.MethodPost) {
				t.Errorf("CLIENT span named %q, want %q", s.Name, contract.ClientSpanName(http.MethodPost))
			}
			for _, kv := range s.Attributes {
				if strings.Contains(kv.Value.Emit(), "s3cret") || strings.Contains(kv.Value.Emit(), "token=") {
					t.Errorf("query string leaked into CLIENT span attribute %s=%s", kv.Key, kv.Value.Emit())
				}
			}
			parent := byID[s.Parent.SpanID()]
			if parent.Name != "POST /relay/{id}" {
				t.Errorf("CLIENT span parent %q", parent.Name)
			}
		}
		for _, kv := range s.Attributes {
			if strings.Contains(kv.Value.Emit(), "debug=1") {
				t.Errorf("query string on span %s: %s=%s", s.Name, kv.Key, kv.Value.Emit())
			}
		}
	}
	if clients != 3 || servers != 6+20 {
		t.Errorf("%d CLIENT and %d SERVER spans, want 3 and 26", clients, servers)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	routes := map[string]bool{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "http.server.request.duration" {
				continue
			}
			for _, p := range m.Data.(metricdata.Histogram[float64]).DataPoints {
				v, _ := p.Attributes.Value("http.route")
				routes[v.AsString()] = true
			}
		}
	}
	want := map[string]bool{"/relay/{id}": true, "/echo": true, "": true}
	if len(routes) != len(want) {
		t.Errorf("http.route values %v, want %v (route patterns, never raw paths)", routes, want)
	}
	for r := range want {
		if !routes[r] {
			t.Errorf("missing http.route %q in %v", r, routes)
		}
	}
}

func TestClientRetriesConnectionErrorsOnlyInOneSpan(t *testing.T) {
	spans, _, h := enableTelemetry(t, "http_client")
	// A port that refuses: bind, note the address, close.
	dead := "http://" + servertest.FreeAddr(t)
	client := server.NewClient(server.ClientOptions{Retries: 2, Backoff: time.Millisecond})
	t.Cleanup(client.CloseIdleConnections)
	err := client.PostJSON(context.Background(), dead+"/verify?token=hush", echoReq{Name: "x"}, nil)
	if err == nil {
		t.Fatal("call to a closed port succeeded")
	}
	if strings.Contains(err.Error(), "hush") {
		t.Errorf("error repeats the query string: %v", err)
	}

	// A peer that answers 500 is not retried.
	var hits atomic.Int64
	s := server.New(server.Options{Name: "flaky"})
	s.HandleFunc("POST /verify", func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		http.Error(w, `{"error":{"type":"internal_error","message":"nope"}}`, 500)
	})
	url := start(t, s)
	err = client.PostJSON(context.Background(), url+"/verify", echoReq{Name: "x"}, nil)
	if server.StatusOf(err) != 500 || hits.Load() != 1 {
		t.Fatalf("500 answer: err %v after %d hits; want one attempt and a StatusError", err, hits.Load())
	}
	if err := h.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := spans.GetSpans()
	if len(got) != 2 {
		t.Fatalf("%d CLIENT spans for 2 logical calls (one with retries)", len(got))
	}
	retries := 0
	for _, e := range got[0].Events {
		if e.Name == "retry" {
			retries++
		}
	}
	if retries != 2 || got[0].Status.Code.String() != "Error" {
		t.Errorf("refused call: %d retry events, status %v; want 2 and Error", retries, got[0].Status)
	}
	if strings.Contains(got[0].Status.Description, "hush") {
		t.Errorf("span status repeats the query string: %s", got[0].Status.Description)
	}
}

func TestTelemetryOffAddsNothing(t *testing.T) {
	testenv.ClearTelemetry(t)
	telemetry.ResetForTesting()
	s, _ := newEchoServer(t, server.Options{Name: "plain"})
	url := start(t, s)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if status, _ := post(t, url+"/echo", `{"name":"x"}`); status != 200 {
				t.Errorf("status %d", status)
			}
		})
	}
	wg.Wait()
	if lens.Enabled(telemetry.GroupServer) {
		t.Fatal("gate open with telemetry off")
	}
}

// TestUninstrumentedInstallsNothing: with telemetry on, a server built as
// the benchmark baseline (server.Uninstrumented, visible to tests only)
// exports no SERVER span and no request metric, while the same server
// without it exports one span per request.
func TestUninstrumentedInstallsNothing(t *testing.T) {
	spans, reader, h := enableTelemetry(t, "default")
	const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, tc := range []struct {
		uninstrumented bool
		wantSpans      int
	}{{true, 0}, {false, 1}} {
		spans.Reset()
		opts := server.Options{Name: "echo"}
		if tc.uninstrumented {
			opts = server.Uninstrumented(opts)
		}
		s, _ := newEchoServer(t, opts)
		url, stop := servertest.Start(t, s)
		req, err := http.NewRequest(http.MethodPost, url+"/echo", strings.NewReader(`{"name":"x"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("traceparent", traceparent)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("uninstrumented=%v: status %d", tc.uninstrumented, res.StatusCode)
		}
		http.DefaultClient.CloseIdleConnections()
		stop()
		if err := h.ForceFlush(context.Background()); err != nil {
			t.Fatal(err)
		}
		var got int
		for _, sp := range spans.GetSpans() {
			if sp.SpanKind == trace.SpanKindServer {
				got++
				if sp.Parent.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
					t.Errorf("SERVER span not parented on the incoming traceparent: %v", sp.Parent)
				}
			}
		}
		if got != tc.wantSpans {
			t.Errorf("uninstrumented=%v: %d SERVER spans, want %d", tc.uninstrumented, got, tc.wantSpans)
		}
		if tc.uninstrumented {
			var rm metricdata.ResourceMetrics
			if err := reader.Collect(context.Background(), &rm); err != nil {
				t.Fatal(err)
			}
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					if m.Name == contract.HTTPServerRequestDuration {
						t.Errorf("uninstrumented server recorded %s", m.Name)
					}
				}
			}
		}
	}
}

// Options.Middleware wraps every route but the health check, and a panic
// in the middleware itself is answered like a handler's: 500, and the
// server goes on.
func TestMiddleware(t *testing.T) {
	var seen []string
	var mu sync.Mutex
	mw := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen = append(seen, r.URL.Path)
			mu.Unlock()
			if r.Header.Get("X-Middleware-Panic") != "" {
				panic("middleware boom")
			}
			next.ServeHTTP(w, r)
		})
	}
	s, calls := newEchoServer(t, server.Options{Name: "echo", Middleware: mw})
	base := start(t, s)
	if status, body := post(t, base+"/echo", `{"name":"mw"}`); status != 200 || !strings.Contains(body, "hello mw") {
		t.Fatalf("through the middleware: %d %s", status, body)
	}
	req, _ := http.NewRequest(http.MethodPost, base+"/echo", strings.NewReader(`{"name":"x"}`))
	req.Header.Set("X-Middleware-Panic", "1")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("a panicking middleware dropped the connection: %v", err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 500 || !strings.Contains(string(b), "handler panicked") {
		t.Errorf("panicking middleware: %d %s, want the runtime's 500", res.StatusCode, b)
	}
	if res, err := http.Get(base + "/health"); err != nil || res.StatusCode != 200 {
		t.Fatalf("health: %v %v", res, err)
	} else {
		res.Body.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 || seen[0] != "/echo" || seen[1] != "/echo" {
		t.Errorf("middleware saw %v, want the two /echo calls and not /health", seen)
	}
	if calls.Load() != 1 {
		t.Errorf("handler reached %d times, want 1 (not for the panicking middleware)", calls.Load())
	}
}
