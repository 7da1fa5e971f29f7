package server_test

import (
	"context"
	"net/http"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/internal/servertest"
	"github.com/gymlens/gymlens/internal/testenv"
	"github.com/gymlens/gymlens/server"
	"github.com/gymlens/gymlens/telemetry"
)

// BenchmarkSampledOutHop is what one call between two fleet servers costs
// when its rollout was dropped by head sampling: a Client.Post over
// loopback, from a context whose span context is valid and not sampled (as
// in an agent serving such a rollout: extracted by the process's own
// propagator from a request's header), to a server route answering {}.
// Client and server share the process, so each case sets both sides up
// alike, as every process of a fleet is:
//
//   - off: telemetry.Init ran with NEMO_GYM_OTEL_ENABLED=0;
//   - metrics-only: traces off, metrics to a manual reader;
//   - sampled-out: the default preset under parentbased_traceidratio 0.01,
//     spans to a discarding exporter (none reach it), metrics to a manual
//     reader.
//
// Allocation counts are exact; read them, and sampled-out's ns/op against
// off's from the same run:
//
//	go test -run '^$' -bench BenchmarkSampledOutHop -benchmem -count 1 ./server/
func BenchmarkSampledOutHop(b *testing.B) {
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:  trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		Remote:  true,
	})
	incoming := http.Header{"Traceparent": {"00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-00"}}
	opts := telemetry.InitOptions{ServerName: "bench", ServerType: contract.ServerTypeResources}
	for _, mode := range []string{"off", "metrics-only", "sampled-out"} {
		b.Run(mode, func(b *testing.B) {
			quietLogs(b)
			switch mode {
			case "off":
				initOff(b, opts)
			case "metrics-only":
				o := opts
				o.MetricReader = sdkmetric.NewManualReader()
				servertest.EnableTelemetryEnv(b, "default", map[string]string{"NEMO_GYM_OTEL_TRACES_ENABLED": "0"}, o)
			case "sampled-out":
				o := opts
				o.MetricReader, o.SpanExporter = sdkmetric.NewManualReader(), discardSpans{}
				servertest.EnableTelemetryEnv(b, "default", map[string]string{
					"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.01"}, o)
			}
			// The caller's context, as its own ingress extracted it from
			// the request it serves (nothing, with telemetry off).
			ctx := otel.GetTextMapPropagator().Extract(context.Background(), propagation.HeaderCarrier(incoming))
			s := server.New(server.Options{Name: "peer"})
			var seen trace.SpanContext
			s.HandleFunc("POST /verify", func(w http.ResponseWriter, r *http.Request) {
				seen = trace.SpanContextFromContext(r.Context())
				writeEmptyJSON(w)
			})
			runHop(ctx, b, s, func() {
				// With telemetry on, the server must continue the
				// caller's trace, still sampled out; with it off it
				// knows none.
				if on := mode != "off"; on != (seen.TraceID() == sc.TraceID()) || seen.IsSampled() {
					b.Fatalf("%s: server saw span context %v (sampled %v), want the caller's trace: %v", mode, seen.TraceID(), seen.IsSampled(), on)
				}
			})
		})
	}
}

// BenchmarkRecordedHop is one call between two fleet servers in a rollout
// that is kept: a Client.Post over loopback from a sampled span context to
// a typed route (server.Handle) answering {}, each side recording its span
// under the default preset (spans to a discarding exporter, metrics to a
// manual reader), against the same hop with telemetry off. recorded's
// ns/op less off's, from one run, is what telemetry adds to a kept
// request's latency on both sides together: the caller waits for the
// server's work after its handler too, as net/http completes a response
// only once the handler chain returns. Run the cases interleaved on a busy
// machine (go test -c, then the binary with -test.count 1, repeated).
func BenchmarkRecordedHop(b *testing.B) {
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x5c, 0x0a, 0x3f, 0x46, 0x88, 0xc4, 0x5e, 0xb7, 0xb4, 0xdf, 0xa3, 0xae, 0x1f, 0x1f, 0x58, 0x47},
		SpanID:     trace.SpanID{0x01, 0xe1, 0x78, 0xbb, 0x1c, 0xba, 0x13, 0xc8},
		TraceFlags: trace.FlagsSampled,
		Remote:     true,
	})
	incoming := http.Header{"Traceparent": {"00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"}}
	opts := telemetry.InitOptions{ServerName: "bench", ServerType: contract.ServerTypeResources}
	for _, mode := range []string{"off", "recorded"} {
		b.Run(mode, func(b *testing.B) {
			quietLogs(b)
			if mode == "off" {
				initOff(b, opts)
			} else {
				o := opts
				o.MetricReader, o.SpanExporter = sdkmetric.NewManualReader(), discardSpans{}
				servertest.EnableTelemetryGroups(b, "default", o)
			}
			ctx := otel.GetTextMapPropagator().Extract(context.Background(), propagation.HeaderCarrier(incoming))
			s := server.New(server.Options{Name: "peer"})
			var seen trace.SpanContext
			server.Handle(s, "POST /verify", func(ctx context.Context, _ hopRequest) (server.RawJSON, error) {
				seen = trace.SpanContextFromContext(ctx)
				return server.RawJSON(`{}`), nil
			})
			runHop(ctx, b, s, func() {
				// Recorded, the server continues the caller's kept trace.
				if on := mode != "off"; on != (seen.TraceID() == sc.TraceID() && seen.IsSampled()) {
					b.Fatalf("%s: server saw span context %v (sampled %v), want the caller's trace: %v", mode, seen.TraceID(), seen.IsSampled(), on)
				}
			})
		})
	}
}

// hopRequest is the body BenchmarkRecordedHop's route decodes.
type hopRequest struct {
	Reward float64 `json:"reward"`
}

// initOff runs telemetry.Init with telemetry off, as a fleet process with
// NEMO_GYM_OTEL_ENABLED=0 does, until b ends.
func initOff(b *testing.B, opts telemetry.InitOptions) {
	testenv.ClearTelemetry(b)
	b.Setenv("NEMO_GYM_OTEL_ENABLED", "0")
	telemetry.ResetForTesting()
	b.Cleanup(telemetry.ResetForTesting)
	if _, err := telemetry.Init(opts); err != nil {
		b.Fatal(err)
	}
}

// runHop serves s on loopback and times a Client.Post of a small body to
// its POST /verify from ctx. One call goes first, untimed, and check then
// looks at what the server saw.
func runHop(ctx context.Context, b *testing.B, s *server.Server, check func()) {
	base, stop := servertest.Start(b, s)
	defer stop()
	client := server.NewClient(server.ClientOptions{})
	defer client.CloseIdleConnections()
	body := server.RawJSON(`{"reward":1}`)
	url := base + "/verify"
	if _, err := client.Post(ctx, url, body, nil, server.Call{}); err != nil {
		b.Fatal(err)
	}
	check()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := client.Post(ctx, url, body, nil, server.Call{}); err != nil {
			b.Fatal(err)
		}
	}
}
