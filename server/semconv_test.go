package server_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/internal/servertest"
	"github.com/gymlens/gymlens/internal/testenv"
	"github.com/gymlens/gymlens/lens"
	"github.com/gymlens/gymlens/server"
	"github.com/gymlens/gymlens/telemetry"
)

// enableMetrics turns telemetry on with metrics into a manual reader and no
// traces. optIn, when not nil, is the value of OTEL_SEMCONV_STABILITY_OPT_IN;
// nil leaves the variable unset. Servers must be built afterwards.
func enableMetrics(t testing.TB, optIn *string) *sdkmetric.ManualReader {
	t.Helper()
	testenv.ClearTelemetry(t)
	t.Setenv("NEMO_GYM_OTEL_ENABLED", "1")
	t.Setenv("NEMO_GYM_OTEL_EXPORTER", "none")
	t.Setenv("NEMO_GYM_OTEL_TRACES_ENABLED", "0")
	if optIn != nil {
		t.Setenv(lens.KeySemconvStabilityOptIn, *optIn)
	}
	telemetry.ResetForTesting()
	t.Cleanup(telemetry.ResetForTesting)
	reader := sdkmetric.NewManualReader()
	h, err := telemetry.Init(telemetry.InitOptions{ServerName: "semconv", ServerType: contract.ServerTypeResources, MetricReader: reader})
	if err != nil || !h.MetricsExporting() {
		t.Fatalf("telemetry.Init: metrics exporting=%v err=%v", h.MetricsExporting(), err)
	}
	return reader
}

// httpServerMetrics collects reader and returns its http.server.*
// instruments by name.
func httpServerMetrics(t *testing.T, reader *sdkmetric.ManualReader) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if strings.HasPrefix(m.Name, "http.server.") {
				if sm.Scope.Name != contract.MeterScope {
					t.Errorf("%s from scope %q, want %q", m.Name, sm.Scope.Name, contract.MeterScope)
				}
				out[m.Name] = m
			}
		}
	}
	return out
}

// encoded spells attribute sets comparably, sorted.
func encoded(sets ...attribute.Set) []string {
	out := make([]string, 0, len(sets))
	for _, s := range sets {
		out = append(out, s.Encoded(attribute.DefaultEncoder()))
	}
	slices.Sort(out)
	return out
}

func set(kvs ...attribute.KeyValue) attribute.Set { return attribute.NewSet(kvs...) }

// checkInstrument holds m to its contract entry: kind, unit, description,
// boundaries, and attribute keys among the entry's.
func checkInstrument(t *testing.T, m metricdata.Metrics) {
	t.Helper()
	in := contract.MustLookup(m.Name)
	if m.Unit != in.Unit || m.Description != in.Description {
		t.Errorf("%s: unit %q description %q, want %q %q", m.Name, m.Unit, m.Description, in.Unit, in.Description)
	}
	var keys []attribute.Set
	switch d := m.Data.(type) {
	case metricdata.Histogram[float64]:
		if in.Kind != contract.Histogram {
			t.Errorf("%s is a histogram, the contract says %s", m.Name, in.Kind)
		}
		want := in.Boundaries
		if want == nil {
			want = contract.DefaultBucketsMS
		}
		for _, p := range d.DataPoints {
			if !slices.Equal(p.Bounds, want) {
				t.Errorf("%s: bounds %v, want %v", m.Name, p.Bounds, want)
			}
			keys = append(keys, p.Attributes)
		}
	case metricdata.Sum[int64]:
		if in.Kind != contract.UpDownCounter || d.IsMonotonic || d.Temporality != metricdata.CumulativeTemporality {
			t.Errorf("%s: sum monotonic=%v %s, the contract says %s", m.Name, d.IsMonotonic, d.Temporality, in.Kind)
		}
		for _, p := range d.DataPoints {
			keys = append(keys, p.Attributes)
		}
	default:
		t.Errorf("%s: data %T", m.Name, m.Data)
	}
	for _, s := range keys {
		for _, kv := range s.ToSlice() {
			if !slices.Contains(in.Attrs, string(kv.Key)) {
				t.Errorf("%s: attribute %s not in the contract's %v", m.Name, kv.Key, in.Attrs)
			}
		}
	}
}

// semconvServer serves POST /echo/{id} (200), POST /fail (500) and the
// catch-all (404) on loopback.
func semconvServer(t *testing.T) (base string, stop func()) {
	t.Helper()
	s := server.New(server.Options{Name: "semconv"})
	s.HandleFunc("POST /echo/{id}", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.PathValue("id"))
	})
	s.HandleFunc("POST /fail", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	})
	return servertest.Start(t, s)
}

func postEmpty(t *testing.T, c *http.Client, url string) int {
	t.Helper()
	res, err := c.Post(url, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

// TestHTTPServerMetricsFollowSemconvOptIn serves a routed 200, a routed
// 500 and an unrouted 404 over loopback for each value of
// OTEL_SEMCONV_STABILITY_OPT_IN and holds every http.server.* point to
// what Python's ASGI instrumentation (0.59b0) records for the same
// requests: the duration histograms of the conventions the value selects,
// each with its own attribute keys, and the active-requests counter under
// every value, back at 0 once the requests are done.
func TestHTTPServerMetricsFollowSemconvOptIn(t *testing.T) {
	str := func(s string) *string { return &s }
	const (
		newOnly = "new"
		oldOnly = "old"
		both    = "both"
	)
	for _, c := range []struct {
		name  string
		optIn *string
		want  string
	}{
		{"unset", nil, newOnly},
		{"empty", str(""), newOnly},
		{"http", str("http"), newOnly},
		{"http among others", str("database, http ,gen_ai_latest_experimental"), newOnly},
		{"http/dup", str("http/dup"), both},
		{"http and http/dup", str("http,http/dup"), both},
		{"no http item", str("database"), oldOnly},
		{"upper case", str("HTTP/DUP"), oldOnly},
	} {
		t.Run(c.name, func(t *testing.T) {
			reader := enableMetrics(t, c.optIn)
			base, stop := semconvServer(t)
			client := &http.Client{Transport: &http.Transport{}}
			for path, status := range map[string]int{"/echo/7": 200, "/fail": 500, "/nope/1": 404} {
				if got := postEmpty(t, client, base+path); got != status {
					t.Fatalf("POST %s: %d, want %d", path, got, status)
				}
			}
			client.CloseIdleConnections()
			stop() // every handler has returned
			got := httpServerMetrics(t, reader)

			u, _ := url.Parse(base)
			hostPort := u.Host // 127.0.0.1:PORT, also the Host header the client sent
			port, _ := strconv.Atoi(u.Port())
			oldOn, newOn := c.want != newOnly, c.want != oldOnly

			var names []string
			for n, m := range got {
				names = append(names, n)
				checkInstrument(t, m)
			}
			slices.Sort(names)
			wantNames := []string{contract.HTTPServerActiveRequests}
			if oldOn {
				wantNames = append(wantNames, contract.HTTPServerDurationOld)
			}
			if newOn {
				wantNames = append(wantNames, contract.HTTPServerRequestDuration)
			}
			slices.Sort(wantNames)
			if !slices.Equal(names, wantNames) {
				t.Fatalf("instruments %v, want %v", names, wantNames)
			}

			if newOn {
				base := func(status int, extra ...attribute.KeyValue) attribute.Set {
					return set(append([]attribute.KeyValue{
						attribute.String(contract.AttrHTTPRequestMethod, "POST"),
						attribute.Int(contract.AttrHTTPResponseStatus, status),
						attribute.String(contract.AttrURLScheme, "http"),
						attribute.String(contract.AttrNetworkProtocolVersion, "1.1"),
					}, extra...)...)
				}
				want := encoded(
					base(200, attribute.String(contract.AttrHTTPRoute, "/echo/{id}")),
					base(500, attribute.String(contract.AttrHTTPRoute, "/fail"), attribute.String(contract.AttrErrorType, "500")),
					base(404),
				)
				checkHistogram(t, got[contract.HTTPServerRequestDuration], want)
			}
			if oldOn {
				base := func(status int, extra ...attribute.KeyValue) attribute.Set {
					return set(append([]attribute.KeyValue{
						attribute.String(contract.AttrOldHTTPMethod, "POST"),
						attribute.String(contract.AttrOldHTTPScheme, "http"),
						attribute.Int(contract.AttrOldHTTPStatusCode, status),
						attribute.String(contract.AttrOldHTTPFlavor, "1.1"),
						attribute.String(contract.AttrOldHTTPHost, hostPort),
						attribute.String(contract.AttrOldHTTPServerName, hostPort),
						attribute.Int(contract.AttrOldNetHostPort, port),
					}, extra...)...)
				}
				// No error.type in the old conventions; the route
				// template is http.target, and only when one matched.
				want := encoded(
					base(200, attribute.String(contract.AttrOldHTTPTarget, "/echo/{id}")),
					base(500, attribute.String(contract.AttrOldHTTPTarget, "/fail")),
					base(404),
				)
				checkHistogram(t, got[contract.HTTPServerDurationOld], want)
			}

			var activeAttrs []attribute.KeyValue
			if oldOn {
				activeAttrs = append(activeAttrs,
					attribute.String(contract.AttrOldHTTPMethod, "POST"),
					attribute.String(contract.AttrOldHTTPScheme, "http"),
					attribute.String(contract.AttrOldHTTPFlavor, "1.1"),
					attribute.String(contract.AttrOldHTTPHost, hostPort),
					attribute.String(contract.AttrOldHTTPServerName, hostPort))
			}
			if newOn {
				activeAttrs = append(activeAttrs,
					attribute.String(contract.AttrHTTPRequestMethod, "POST"),
					attribute.String(contract.AttrURLScheme, "http"))
			}
			checkActive(t, got[contract.HTTPServerActiveRequests], set(activeAttrs...), 0)
		})
	}
}

// checkHistogram wants exactly the points want (encoded attribute sets),
// one request each.
func checkHistogram(t *testing.T, m metricdata.Metrics, want []string) {
	t.Helper()
	h, ok := m.Data.(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("%s: data %T, want a float64 histogram", m.Name, m.Data)
	}
	var sets []attribute.Set
	for _, p := range h.DataPoints {
		sets = append(sets, p.Attributes)
		if p.Count != 1 {
			t.Errorf("%s{%s}: count %d, want 1", m.Name, p.Attributes.Encoded(attribute.DefaultEncoder()), p.Count)
		}
	}
	if got := encoded(sets...); !slices.Equal(got, want) {
		t.Errorf("%s points:\n got %q\nwant %q", m.Name, got, want)
	}
}

// checkActive wants http.server.active_requests to be one series, attrs,
// at value.
func checkActive(t *testing.T, m metricdata.Metrics, attrs attribute.Set, value int64) {
	t.Helper()
	s, ok := m.Data.(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("%s: data %T, want an int64 sum", m.Name, m.Data)
	}
	if len(s.DataPoints) != 1 {
		var sets []attribute.Set
		for _, p := range s.DataPoints {
			sets = append(sets, p.Attributes)
		}
		t.Fatalf("%s: %d series %q, want one: %s", m.Name, len(s.DataPoints), encoded(sets...), attrs.Encoded(attribute.DefaultEncoder()))
	}
	p := s.DataPoints[0]
	if !p.Attributes.Equals(&attrs) {
		t.Errorf("%s attributes %s, want %s", m.Name, p.Attributes.Encoded(attribute.DefaultEncoder()), attrs.Encoded(attribute.DefaultEncoder()))
	}
	if p.Value != value {
		t.Errorf("%s = %d, want %d", m.Name, p.Value, value)
	}
}

// TestHTTPServerActiveRequestsDuringBlockedRequest holds a request in its
// handler: http.server.active_requests reads 1 while it is there and 0
// once it has been answered, in the new-only default and with http/dup.
func TestHTTPServerActiveRequestsDuringBlockedRequest(t *testing.T) {
	for _, optIn := range []string{"http", "http/dup"} {
		t.Run(optIn, func(t *testing.T) {
			reader := enableMetrics(t, &optIn)
			s := server.New(server.Options{Name: "blocked"})
			entered := make(chan struct{})
			release := make(chan struct{})
			s.HandleFunc("GET /block", func(w http.ResponseWriter, _ *http.Request) {
				close(entered)
				<-release
				_, _ = io.WriteString(w, "done")
			})
			base, stop := servertest.Start(t, s)
			client := &http.Client{Transport: &http.Transport{}}
			defer client.CloseIdleConnections()
			done := make(chan int, 1)
			go func() {
				res, err := client.Get(base + "/block")
				if err != nil {
					done <- 0
					return
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				done <- res.StatusCode
			}()
			<-entered
			during := activeValue(t, httpServerMetrics(t, reader))
			close(release)
			if status := <-done; status != http.StatusOK {
				t.Fatalf("GET /block: %d", status)
			}
			stop()
			after := activeValue(t, httpServerMetrics(t, reader))
			if during != 1 || after != 0 {
				t.Errorf("%s = %d during the request and %d after, want 1 and 0", contract.HTTPServerActiveRequests, during, after)
			}
		})
	}
}

// activeValue sums http.server.active_requests over its series.
func activeValue(t *testing.T, got map[string]metricdata.Metrics) int64 {
	t.Helper()
	m, ok := got[contract.HTTPServerActiveRequests]
	if !ok {
		t.Fatalf("no %s among %v", contract.HTTPServerActiveRequests, got)
	}
	var n int64
	for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
		n += p.Value
	}
	return n
}

// pingHandler builds, with the telemetry this process has, a server whose
// GET /ping answers 204, and a request to it that stands for one from a
// real connection (it carries the connection's local address). The
// request has no body, so it can be served again and again.
func pingHandler(tb testing.TB, uninstrumented bool) (http.Handler, *http.Request) {
	tb.Helper()
	opts := server.Options{Name: "ping"}
	if uninstrumented {
		opts = server.Uninstrumented(opts)
	}
	s := server.New(opts)
	s.HandleFunc("GET /ping", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	r := httptest.NewRequest(http.MethodGet, "/ping", nil)
	r.Host = "127.0.0.1:8000"
	local := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8000}
	return s.Handler(), r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, local))
}

// discardWriter is a ResponseWriter that keeps nothing, reused across
// requests.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(int)             {}

// semconvModes are the benchmark's and the allocation test's cases: the
// new-only default, both, and old only (a value without an http item).
var semconvModes = []string{"http", "http/dup", "database"}

// TestHTTPServerSemconvAllocs: the old conventions and active requests cost
// no allocation per request beyond what the new-only middleware costs (its
// attribute sets are built on the first request of a kind, then reused).
// The race detector makes sync.Pool drop items at random, so allocation
// counts mean nothing under it.
func TestHTTPServerSemconvAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not stable under the race detector")
	}
	allocs := map[string]float64{}
	for _, mode := range semconvModes {
		reader := enableMetrics(t, &mode)
		h, r := pingHandler(t, false)
		w := &discardWriter{h: http.Header{}}
		h.ServeHTTP(w, r) // builds the attribute sets
		allocs[mode] = testing.AllocsPerRun(500, func() { h.ServeHTTP(w, r) })
		// The requests were recorded, in the instruments the mode asks for.
		got := httpServerMetrics(t, reader)
		if _, ok := got[contract.HTTPServerActiveRequests]; !ok {
			t.Errorf("%s: no %s", mode, contract.HTTPServerActiveRequests)
		}
		if _, ok := got[contract.HTTPServerDurationOld]; ok != (mode != "http") {
			t.Errorf("%s: %s present = %v", mode, contract.HTTPServerDurationOld, ok)
		}
	}
	for _, mode := range semconvModes[1:] {
		if allocs[mode] > allocs["http"] {
			t.Errorf("%s: %.1f allocs per request, the new-only middleware %.1f", mode, allocs[mode], allocs["http"])
		}
	}
	t.Logf("allocs per request: %v", allocs)
}
