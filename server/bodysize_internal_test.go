package server

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/internal/testenv"
	"github.com/gymlens/gymlens/lens"
	"github.com/gymlens/gymlens/telemetry"
)

// initSizes initialises telemetry with metrics into a manual reader and
// NEMO_GYM_OTEL_HTTP_BODY_SIZES set to sizes.
func initSizes(t *testing.T, sizes string) {
	t.Helper()
	testenv.ClearTelemetry(t)
	t.Setenv("NEMO_GYM_OTEL_ENABLED", "1")
	t.Setenv("NEMO_GYM_OTEL_EXPORTER", "none")
	t.Setenv("NEMO_GYM_OTEL_TRACES_ENABLED", "0")
	t.Setenv(lens.PrimaryPrefix+lens.KeyHTTPBodySizes, sizes)
	telemetry.ResetForTesting()
	t.Cleanup(telemetry.ResetForTesting)
	h, err := telemetry.Init(telemetry.InitOptions{ServerName: "sizes", ServerType: contract.ServerTypeResources,
		MetricReader: sdkmetric.NewManualReader()})
	if err != nil || !h.MetricsExporting() {
		t.Fatalf("telemetry.Init: metrics exporting=%v err=%v", h.MetricsExporting(), err)
	}
}

// bodyProbe records what a transport is handed.
type bodyProbe struct {
	wrapped, traced bool
	next            http.RoundTripper
}

func (p *bodyProbe) RoundTrip(r *http.Request) (*http.Response, error) {
	_, p.wrapped = r.Body.(*countedBody)
	p.traced = httptrace.ContextClientTrace(r.Context()) != nil
	return p.next.RoundTrip(r)
}

// TestBodySizesWrapOnlyWhenOn: with the setting off, a route is handed
// the server's own request body and the pooled status writer, the client
// has no size histograms and its transport gets the request as
// http.NewRequest made it; on, the server side counts through its
// wrappers and the client's request carries the trace that reports its
// write, its in-memory body still unwrapped (see clientSizes.attempt).
func TestBodySizesWrapOnlyWhenOn(t *testing.T) {
	for _, on := range []bool{false, true} {
		initSizes(t, map[bool]string{false: "false", true: "true"}[on])

		var routeBody, routeWriter bool
		s := New(Options{Name: "probe"})
		s.HandleFunc("POST /probe", func(w http.ResponseWriter, r *http.Request) {
			_, routeBody = r.Body.(*countedBody)
			if u, ok := w.(interface{ Unwrap() http.ResponseWriter }); ok {
				w = u.Unwrap() // the write-deadline wrapper of every plain route
			}
			_, routeWriter = w.(*bodyCount)
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte("{}\n"))
		})
		peer := httptest.NewServer(s.Handler())
		c := NewClient(ClientOptions{Retries: -1})
		probe := &bodyProbe{next: c.http.Transport}
		c.http.Transport = probe
		if err := c.PostJSON(t.Context(), peer.URL+"/probe", map[string]string{"q": strings.Repeat("x", 100)}, nil); err != nil {
			t.Fatal(err)
		}
		c.CloseIdleConnections()
		peer.Close()

		if routeBody != on || routeWriter != on || probe.wrapped || probe.traced != on || (c.bodySizes() != nil) != on {
			t.Errorf("sizes %v: route body counted %v, route writer counting %v, client body wrapped %v, traced %v, client sizes %v",
				on, routeBody, routeWriter, probe.wrapped, probe.traced, c.bodySizes() != nil)
		}
		in := newIngressTelemetry(slog.New(slog.DiscardHandler))
		if in.bodySizes != on || (in.reqBody != lens.Histogram[int64]{}) != on || (in.respBody != lens.Histogram[int64]{}) != on {
			t.Errorf("sizes %v: ingress bodySizes %v, histograms %+v %+v", on, in.bodySizes, in.reqBody, in.respBody)
		}
		if !on {
			if sizes := c.sizes.Load(); sizes == nil || sizes.on || sizes.req != (lens.Histogram[int64]{}) {
				t.Errorf("sizes off: the client made histograms: %+v", sizes)
			}
		}
	}
}
