package server_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/internal/servertest"
	"github.com/gymlens/gymlens/lens"
	"github.com/gymlens/gymlens/server"
	"github.com/gymlens/gymlens/telemetry"
)

// bodySizeNames are the four body size instruments.
var bodySizeNames = []string{contract.HTTPServerRequestBodySize, contract.HTTPServerResponseBodySize,
	contract.HTTPClientRequestBodySize, contract.HTTPClientResponseBodySize}

// enableBodySizes turns telemetry on with metrics into a manual reader,
// no traces, and NEMO_GYM_OTEL_HTTP_BODY_SIZES set to sizes ("" leaves
// it unset). Servers and calls must come afterwards.
func enableBodySizes(t testing.TB, sizes string) *sdkmetric.ManualReader {
	t.Helper()
	env := map[string]string{"NEMO_GYM_OTEL_TRACES_ENABLED": "0"}
	if sizes != "" {
		env[lens.PrimaryPrefix+lens.KeyHTTPBodySizes] = sizes
	}
	reader := sdkmetric.NewManualReader()
	h := servertest.EnableTelemetryEnv(t, ",", env, telemetry.InitOptions{ServerName: "sizes",
		ServerType: contract.ServerTypeResources, MetricReader: reader})
	if !h.MetricsExporting() {
		t.Fatal("metrics are not exported")
	}
	return reader
}

// sizedServer runs a server on loopback whose POST /echo reads its
// request body to the end and answers a JSON string twice as long plus
// one byte, written in two pieces; it returns the base URL and a stop
// function that waits for every handler (and so every record) to end.
func sizedServer(t *testing.T) (base string, stop func()) {
	t.Helper()
	s := server.New(server.Options{Name: "sizes", Type: contract.ServerTypeResources})
	s.HandleFunc("POST /echo", func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `"`+strings.Repeat("y", len(b)))
		_, _ = io.WriteString(w, strings.Repeat("z", len(b)-1)+`"`+"\n")
	})
	return servertest.Start(t, s)
}

// echoAnswer is the size of /echo's answer to a body of n bytes.
func echoAnswer(n int) int64 { return int64(2*n + 2) }

// jsonString is a JSON string whose encoding is n bytes long (n >= 2).
func jsonString(n int) server.RawJSON {
	return server.RawJSON(`"` + strings.Repeat("x", n-2) + `"`)
}

// sizePoints collects reader and returns each body size instrument's
// points by name, checking each against its contract entry.
func sizePoints(t *testing.T, reader *sdkmetric.ManualReader) map[string][]metricdata.HistogramDataPoint[int64] {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string][]metricdata.HistogramDataPoint[int64]{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if !strings.HasSuffix(m.Name, ".body.size") {
				continue
			}
			in := contract.MustLookup(m.Name)
			if m.Unit != "By" || m.Unit != in.Unit || m.Description != in.Description || sm.Scope.Name != contract.MeterScope {
				t.Errorf("%s: unit %q, description %q, scope %q", m.Name, m.Unit, m.Description, sm.Scope.Name)
			}
			h, ok := m.Data.(metricdata.Histogram[int64])
			if !ok {
				t.Fatalf("%s: data %T, want an int64 histogram", m.Name, m.Data)
			}
			for _, p := range h.DataPoints {
				for _, kv := range p.Attributes.ToSlice() {
					if !containsString(in.Attrs, string(kv.Key)) {
						t.Errorf("%s: attribute %s is not among the contract's %v", m.Name, kv.Key, in.Attrs)
					}
				}
			}
			out[m.Name] = h.DataPoints
		}
	}
	return out
}

func containsString(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// point returns the one point of points whose attributes are want,
// failing the test when there is none.
func point(t *testing.T, name string, points []metricdata.HistogramDataPoint[int64], want attribute.Set) metricdata.HistogramDataPoint[int64] {
	t.Helper()
	var seen []string
	for _, p := range points {
		if p.Attributes.Equals(&want) {
			return p
		}
		seen = append(seen, p.Attributes.Encoded(attribute.DefaultEncoder()))
	}
	t.Fatalf("%s: no point with %s; points: %q", name, want.Encoded(attribute.DefaultEncoder()), seen)
	return metricdata.HistogramDataPoint[int64]{}
}

// TestHTTPBodySizesAreTheBytesSent runs a real server and the fleet
// client on loopback with NEMO_GYM_OTEL_HTTP_BODY_SIZES on, sends bodies
// of known sizes, and reads the four histograms from the SDK's reader:
// each point's count and sum are the calls and the bytes that passed,
// request bodies on both sides the bytes the client sent, response
// bodies on both sides the bytes the route wrote (the client's count
// includes the newline after the JSON value, which its decoder does not
// need). A call to no route is recorded too: by the server without
// http.route, by the client with error.type 404.
func TestHTTPBodySizesAreTheBytesSent(t *testing.T) {
	reader := enableBodySizes(t, "true")
	base, stop := sizedServer(t)
	client := servertest.Client(t)
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	host, portText, _ := net.SplitHostPort(u.Host)
	port, _ := strconv.Atoi(portText)

	sizes := []int{2, 1000, 70000}
	var sent, answered int64
	for _, n := range sizes {
		var got string
		if _, err := client.Post(t.Context(), base+"/echo", jsonString(n), &got, server.Call{}); err != nil {
			t.Fatalf("POST /echo (%d bytes): %v", n, err)
		}
		if int64(len(got)+2+1) != echoAnswer(n) {
			t.Fatalf("answer of %d bytes to %d", len(got)+3, n)
		}
		sent += int64(n)
		answered += echoAnswer(n)
	}
	_, err = client.Post(t.Context(), base+"/nowhere", jsonString(10), nil, server.Call{})
	var se *server.StatusError
	if !errors.As(err, &se) || se.Status != http.StatusNotFound {
		t.Fatalf("POST /nowhere: %v, want a 404", err)
	}
	notFound := int64(len(se.Raw))
	stop() // every handler has returned: the server side is recorded

	points := sizePoints(t, reader)
	serverOK := attribute.NewSet(
		attribute.String(contract.AttrHTTPRoute, "/echo"),
		attribute.String(contract.AttrHTTPRequestMethod, http.MethodPost),
		attribute.Int(contract.AttrHTTPResponseStatus, http.StatusOK),
		attribute.String(contract.AttrURLScheme, "http"),
		attribute.String(contract.AttrNetworkProtocolVersion, "1.1"))
	serverMissing := attribute.NewSet(
		attribute.String(contract.AttrHTTPRequestMethod, http.MethodPost),
		attribute.Int(contract.AttrHTTPResponseStatus, http.StatusNotFound),
		attribute.String(contract.AttrURLScheme, "http"),
		attribute.String(contract.AttrNetworkProtocolVersion, "1.1"))
	peer := []attribute.KeyValue{
		attribute.String(contract.AttrHTTPRequestMethod, http.MethodPost),
		attribute.String(contract.AttrServerAddress, host),
		attribute.Int(contract.AttrServerPort, port),
		attribute.String(contract.AttrNetworkProtocolVersion, "1.1"),
	}
	clientOK := attribute.NewSet(append(peer, attribute.Int(contract.AttrHTTPResponseStatus, http.StatusOK))...)
	clientMissing := attribute.NewSet(append(peer, attribute.Int(contract.AttrHTTPResponseStatus, http.StatusNotFound),
		attribute.String(contract.AttrErrorType, "404"))...)

	for _, c := range []struct {
		name  string
		set   attribute.Set
		count uint64
		sum   int64
	}{
		{contract.HTTPServerRequestBodySize, serverOK, uint64(len(sizes)), sent},
		{contract.HTTPServerResponseBodySize, serverOK, uint64(len(sizes)), answered},
		{contract.HTTPClientRequestBodySize, clientOK, uint64(len(sizes)), sent},
		{contract.HTTPClientResponseBodySize, clientOK, uint64(len(sizes)), answered},
		{contract.HTTPServerRequestBodySize, serverMissing, 1, 0}, // no route reads the body
		{contract.HTTPServerResponseBodySize, serverMissing, 1, notFound},
		{contract.HTTPClientRequestBodySize, clientMissing, 1, 10},
		{contract.HTTPClientResponseBodySize, clientMissing, 1, notFound},
	} {
		p := point(t, c.name, points[c.name], c.set)
		if p.Count != c.count || p.Sum != c.sum {
			t.Errorf("%s %s: count %d sum %d, want %d and %d", c.name, c.set.Encoded(attribute.DefaultEncoder()),
				p.Count, p.Sum, c.count, c.sum)
		}
	}
	if len(points[contract.HTTPServerRequestBodySize]) != 2 || len(points[contract.HTTPClientRequestBodySize]) != 2 {
		t.Errorf("points beyond the two outcomes: %v", points)
	}
}

// TestHTTPBodySizesOffRecordNothing: with the setting unset or false,
// the same calls create none of the four instruments.
func TestHTTPBodySizesOffRecordNothing(t *testing.T) {
	for _, value := range []string{"", "false"} {
		t.Run("value="+value, func(t *testing.T) {
			reader := enableBodySizes(t, value)
			base, stop := sizedServer(t)
			client := servertest.Client(t)
			var got string
			if _, err := client.Post(t.Context(), base+"/echo", jsonString(100), &got, server.Call{}); err != nil {
				t.Fatal(err)
			}
			stop()
			points := sizePoints(t, reader)
			for _, name := range bodySizeNames {
				if _, ok := points[name]; ok {
					t.Errorf("%s exported with the setting %q", name, value)
				}
			}
			if m := httpServerMetrics(t, reader); len(m) == 0 {
				t.Error("no http.server.* metric at all: the test would prove nothing")
			}
		})
	}
}
