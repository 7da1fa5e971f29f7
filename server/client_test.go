package server_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/internal/servertest"
	"github.com/gymlens/gymlens/server"
	"github.com/gymlens/gymlens/telemetry"
)

// clientSpans returns the CLIENT spans exported so far.
func clientSpans(t *testing.T, spans *tracetest.InMemoryExporter) []tracetest.SpanStub {
	t.Helper()
	var out []tracetest.SpanStub
	for _, s := range spans.GetSpans() {
		if s.SpanKind == trace.SpanKindClient {
			out = append(out, s)
		}
	}
	return out
}

// TestClientSpanAsUpstream: every CLIENT span is named "HTTP POST" and
// carries the method, url.full without the query, the status code and,
// when a rollout id is known (the URL's /ng-rollout/<id>/ prefix, the
// request's inbound prefix, the baggage), nemo.gym.rollout.id. The peer
// sees the prefixed path as it was sent.
func TestClientSpanAsUpstream(t *testing.T) {
	spans, _, h := enableTelemetry(t, "all")
	var mu sync.Mutex
	var seen []string // the paths the peer was sent, before stripping
	peer := server.New(server.Options{Name: "peer", RolloutPrefix: server.PrefixResources})
	server.Handle(peer, "POST /verify", func(ctx context.Context, _ echoReq) (echoResp, error) {
		mu.Lock()
		seen = append(seen, server.Request(ctx).RequestURI)
		mu.Unlock()
		return echoResp{Greeting: server.RolloutID(ctx)}, nil
	})
	peerURL := start(t, peer)
	client := newClient(t)

	// A relay whose inbound prefix is the id of its own outgoing call.
	relay := server.New(server.Options{Name: "relay", RolloutPrefix: server.PrefixResources})
	server.Handle(relay, "POST /relay", func(ctx context.Context, r echoReq) (echoResp, error) {
		var out echoResp
		return out, client.PostJSON(ctx, peerURL+"/verify", r, &out)
	})
	relayURL := start(t, relay)

	calls := []struct {
		name, url string
		ctx       context.Context
		wantID    string
		wantFull  string
	}{
		{"plain", peerURL + "/verify?token=s3cret", context.Background(), "", peerURL + "/verify"},
		{"prefixed", peerURL + "/ng-rollout/7-2/verify?token=s3cret", context.Background(), "7-2", peerURL + "/ng-rollout/7-2/verify"},
		{"baggage", peerURL + "/verify", telemetry.WithRolloutID(context.Background(), "bag-1"), "bag-1", peerURL + "/verify"},
		{"inbound prefix", relayURL + "/ng-rollout/in-9/relay", context.Background(), "in-9", relayURL + "/ng-rollout/in-9/relay"},
		{"invalid id is no prefix", peerURL + "/ng-rollout/.x/verify", context.Background(), "", peerURL + "/ng-rollout/.x/verify"},
	}
	for _, c := range calls {
		var out echoResp
		err := client.PostJSON(c.ctx, c.url, echoReq{Name: "ada"}, &out)
		if c.name == "invalid id is no prefix" {
			if server.StatusOf(err) != http.StatusNotFound {
				t.Errorf("%s: err %v, want the peer's 404", c.name, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
	}
	if err := h.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := clientSpans(t, spans)
	byFull := map[string][]tracetest.SpanStub{}
	for _, s := range got {
		if s.Name != "HTTP POST" {
			t.Errorf("CLIENT span named %q, want HTTP POST", s.Name)
		}
		a := servertest.Attrs(s.Attributes)
		byFull[a[contract.AttrURLFull]] = append(byFull[a[contract.AttrURLFull]], s)
		for k, v := range a {
			if strings.Contains(v, "s3cret") {
				t.Errorf("query on CLIENT span attribute %s=%s", k, v)
			}
		}
	}
	for _, c := range calls {
		ss := byFull[c.wantFull]
		if c.name == "inbound prefix" {
			// The relay's own call to the peer carries the inbound id.
			ss = nil
			for _, s := range byFull[peerURL+"/verify"] {
				if servertest.Attrs(s.Attributes)[contract.AttrRolloutID] == c.wantID {
					ss = append(ss, s)
				}
			}
		}
		if len(ss) == 0 {
			t.Errorf("%s: no CLIENT span with url.full %s; have %v", c.name, c.wantFull, keys(byFull))
			continue
		}
		found := false
		for _, s := range ss {
			a := servertest.Attrs(s.Attributes)
			if a[contract.AttrRolloutID] != c.wantID {
				continue
			}
			found = true
			if a[contract.AttrHTTPRequestMethod] != "POST" || a[contract.AttrServerAddress] != "127.0.0.1" || a[contract.AttrServerPort] == "" {
				t.Errorf("%s: attributes %v", c.name, a)
			}
			want := "200"
			if c.name == "invalid id is no prefix" {
				want = "404"
			}
			if a[contract.AttrHTTPResponseStatus] != want {
				t.Errorf("%s: status code %q, want %s", c.name, a[contract.AttrHTTPResponseStatus], want)
			}
		}
		if !found {
			t.Errorf("%s: no CLIENT span with rollout id %q", c.name, c.wantID)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if !contains(seen, "/ng-rollout/7-2/verify?token=s3cret") {
		t.Errorf("the peer was sent %q, want the prefixed path as given", seen)
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// counterPoints reads an int64 counter's points by one attribute's value.
func counterPoints(t *testing.T, reader *sdkmetric.ManualReader, name, key string) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
				v, _ := p.Attributes.Value(attribute.Key(key))
				out[v.Emit()] += p.Value
			}
		}
	}
	return out
}

// TestClientRetryAndTimeoutMetrics: each retried attempt counts in
// gym.http.retry_total under its reason (a refused dial is an OS error),
// and a call whose time ran out in gym.http.timeout_total as internal.
func TestClientRetryAndTimeoutMetrics(t *testing.T) {
	_, reader, _ := enableTelemetry(t, "http_client")
	dead := "http://" + servertest.FreeAddr(t)
	client := server.NewClient(server.ClientOptions{Retries: 2, Backoff: time.Millisecond})
	t.Cleanup(client.CloseIdleConnections)
	if err := client.PostJSON(context.Background(), dead+"/verify", echoReq{Name: "x"}, nil); err == nil {
		t.Fatal("call to a closed port succeeded")
	}

	release := make(chan struct{})
	slow := server.New(server.Options{Name: "slow"})
	slow.HandleFunc("POST /verify", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	slowURL := start(t, slow)
	defer close(release)
	short := server.NewClient(server.ClientOptions{Timeout: 50 * time.Millisecond})
	t.Cleanup(short.CloseIdleConnections)
	if err := short.PostJSON(context.Background(), slowURL+"/verify", echoReq{Name: "x"}, nil); err == nil {
		t.Fatal("a call past its timeout succeeded")
	}

	if got := counterPoints(t, reader, contract.HTTPRetries, contract.AttrHTTPRetryReason); got[contract.RetryClientOSError] != 2 || len(got) != 1 {
		t.Errorf("gym.http.retry_total %v, want 2 %s", got, contract.RetryClientOSError)
	}
	if got := counterPoints(t, reader, contract.HTTPTimeouts, contract.AttrHTTPInternal); got["true"] != 1 || len(got) != 1 {
		t.Errorf("gym.http.timeout_total %v, want 1 internal", got)
	}
}

// TestClientFirstByteIsTheHeader: Reply.FirstByte is when the answer began
// to arrive, not when its body ended: a server that sends its header at
// once and its body 250 ms later gets a first byte before the body was
// even written.
func TestClientFirstByteIsTheHeader(t *testing.T) {
	s := server.New(server.Options{Name: "peer"})
	bodyWritten := make(chan time.Time, 1)
	s.HandleFunc("POST /slow", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		http.NewResponseController(w).Flush()
		time.Sleep(250 * time.Millisecond)
		bodyWritten <- time.Now()
		_, _ = w.Write([]byte(`{"greeting":"late"}`))
	})
	url := start(t, s)
	client := newClient(t)
	var out echoResp
	began := time.Now()
	reply, err := client.Post(context.Background(), url+"/slow", echoReq{Name: "x"}, &out, server.Call{TimeFirstByte: true})
	if err != nil {
		t.Fatal(err)
	}
	if out.Greeting != "late" {
		t.Errorf("answer %+v", out)
	}
	if body := (<-bodyWritten).Sub(began); reply.FirstByte <= 0 || reply.FirstByte >= body {
		t.Errorf("FirstByte %v, want before the body was written (%v after the call began)", reply.FirstByte, body)
	}
}

// TestClientFirstByteAndOpenSpan: Reply.FirstByte is measured only when
// asked, and falls inside the call; PostSpan leaves the CLIENT span open
// for the caller's attributes.
func TestClientFirstByteAndOpenSpan(t *testing.T) {
	spans, _, h := enableTelemetry(t, "http_client")
	s := server.New(server.Options{Name: "peer"})
	server.Handle(s, "POST /echo", func(_ context.Context, r echoReq) (echoResp, error) {
		return echoResp{Greeting: "hi " + r.Name}, nil
	})
	url := start(t, s)
	client := newClient(t)

	var out echoResp
	began := time.Now()
	reply, err := client.PostSpan(context.Background(), url+"/echo", echoReq{Name: "x"}, &out, server.Call{TimeFirstByte: true})
	took := time.Since(began)
	if err != nil {
		t.Fatal(err)
	}
	if reply.FirstByte <= 0 || reply.FirstByte > took {
		t.Errorf("FirstByte %v, want within (0, %v]", reply.FirstByte, took)
	}
	if !reply.Span.IsRecording() {
		t.Fatal("PostSpan's span is not recording with http_client on")
	}
	reply.AddSpanAttributes(attribute.String("caller.added", "yes"))
	reply.EndSpan()
	reply.EndSpan() // a second end changes nothing
	if !reply.Span.SpanContext().IsValid() {
		t.Error("the ended span's context is gone")
	}

	plain, err := client.Post(context.Background(), url+"/echo", echoReq{Name: "y"}, &out, server.Call{})
	if err != nil {
		t.Fatal(err)
	}
	if plain.FirstByte != -1 || plain.Span != nil {
		t.Errorf("Post without TimeFirstByte: FirstByte %v, Span %v; want -1 and nil", plain.FirstByte, plain.Span)
	}
	if err := h.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := clientSpans(t, spans)
	if len(got) != 2 {
		t.Fatalf("CLIENT spans %d, want 2", len(got))
	}
	first := servertest.Attrs(got[0].Attributes)
	if first["caller.added"] != "yes" || first[contract.AttrHTTPResponseStatus] != "200" || first[contract.AttrURLFull] != url+"/echo" {
		t.Errorf("first CLIENT span's attributes %v; want the caller's attribute, the status and url.full", first)
	}
	if got[0].SpanContext.SpanID() != reply.Span.SpanContext().SpanID() {
		t.Errorf("exported span %v, PostSpan's %v", got[0].SpanContext.SpanID(), reply.Span.SpanContext().SpanID())
	}
	if n := len(got[0].Attributes); n != len(first) {
		t.Errorf("first CLIENT span has %d attributes, %d distinct keys: one set per key", n, len(first))
	}
}

// BenchmarkClientPostPrefixed compares one traced call to a plain URL (its
// target and span attributes cached) with one to a rollout-prefixed URL
// (looked up by the part before the prefix, url.full and the id gathered
// per call), over loopback, in the same run: prefixed/plain is the ratio to
// read.
func BenchmarkClientPostPrefixed(b *testing.B) {
	spans := tracetest.NewInMemoryExporter()
	h := servertest.EnableTelemetryGroups(b, "http_client", telemetry.InitOptions{ServerName: "bench",
		ServerType: contract.ServerTypeAgent, SpanExporter: spans})
	_ = h
	s := server.New(server.Options{Name: "peer", RolloutPrefix: server.PrefixResources})
	s.HandleFunc("POST /verify", func(w http.ResponseWriter, _ *http.Request) { writeEmptyJSON(w) })
	base, stop := servertest.Start(b, s)
	defer stop()
	client := server.NewClient(server.ClientOptions{})
	defer client.CloseIdleConnections()
	body := server.RawJSON(`{"reward":1}`)
	for _, c := range []struct{ name, url string }{
		{"plain", base + "/verify"},
		{"prefixed", base + "/ng-rollout/12-3-a1/verify"},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := client.Post(context.Background(), c.url, body, nil, server.Call{}); err != nil {
					b.Fatal(err)
				}
			}
			spans.Reset()
		})
	}
}

// writeEmptyJSON answers {} as JSON: a peer whose answer costs nothing, for
// benchmarks of the call around it.
func writeEmptyJSON(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{}`))
}
