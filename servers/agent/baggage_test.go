package agent_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	protocol "github.com/gymlens/gymlens/internal/legacyproto"
	"github.com/gymlens/gymlens/internal/servertest"
	"github.com/gymlens/gymlens/server"
	"github.com/gymlens/gymlens/servers/agent"
	"github.com/gymlens/gymlens/servers/resources"
	"github.com/gymlens/gymlens/telemetry"
)

// baggageRecorder sits between the agent and the real resources server on
// its own loopback port and keeps the Baggage header of every request.
type baggageRecorder struct {
	mu   sync.Mutex
	seen []string
}

func (b *baggageRecorder) start(t *testing.T, target string) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		b.seen = append(b.seen, r.Header.Get("Baggage"))
		b.mu.Unlock()
		proxy.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	return "http://" + ln.Addr().String()
}

// TestRolloutIDBaggageOnlyWhenReadDownstream: the rollout id travels as
// baggage exactly when a span group that reads it downstream (verify,
// model_call) is on, and then lands on gym.verify.
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
			exp := tracetest.NewInMemoryExporter()
			h := servertest.EnableTelemetryGroups(t, c.groups, telemetry.InitOptions{ServerName: agent.ServerName,
				ServerType: telemetry.ServerTypeAgent, MetricReader: metric.NewManualReader(), SpanExporter: exp})
			rs := server.New(server.Options{Name: resources.ServerName, Type: telemetry.ServerTypeResources})
			if err := resources.Register(rs, resources.Defaults()); err != nil {
				t.Fatal(err)
			}
			real, stopResources := servertest.Start(t, rs)
			rec := &baggageRecorder{}
			f := startFleet(t, fleetOptions{correctProbability: 1, resourcesURL: rec.start(t, real)})
			const id = "rollout-baggage-1"
			if resp := f.run(t, protocol.RunRequest{Task: sum, RolloutID: id}); resp.Error != "" {
				t.Fatalf("run: %+v", resp)
			}
			spans := spansOf(t, f, h, exp)
			stopResources()

			rec.mu.Lock()
			seen := append([]string(nil), rec.seen...)
			rec.mu.Unlock()
			if len(seen) != 1 {
				t.Fatalf("resources server got %d requests, want 1", len(seen))
			}
			has := strings.Contains(seen[0], telemetry.AttrRolloutID+"="+id)
			if has != c.wantBaggage {
				t.Errorf("groups %q: Baggage header %q; rollout id sent = %v, want %v", c.groups, seen[0], has, c.wantBaggage)
			}
			if c.wantBaggage {
				v, _ := attrValue(one(t, spans, resources.SpanName, trace.SpanKindUnspecified), telemetry.AttrRolloutID)
				if v.AsString() != id {
					t.Errorf("gym.verify %s = %q, want %q", telemetry.AttrRolloutID, v.Emit(), id)
				}
			}
		})
	}
}
