package server_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/internal/servertest"
	"github.com/gymlens/gymlens/internal/testenv"
	"github.com/gymlens/gymlens/lens"
	"github.com/gymlens/gymlens/server"
	"github.com/gymlens/gymlens/telemetry"
)

// benchBody is the request body of the body size benchmarks: 1 KiB of
// JSON, about a small model call.
var benchBody = []byte(`"` + strings.Repeat("x", 1022) + `"`)

// echoServer is a server whose POST /echo reads its body and answers it.
func echoServer() *server.Server {
	s := server.New(server.Options{Name: "sizes", Type: contract.ServerTypeResources})
	s.HandleFunc("POST /echo", echo)
	return s
}

func echo(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// benchRound is how many operations one round of alternate runs.
const benchRound = 5000

// enableBodySizesLens turns telemetry on as a fleet process has it, so
// that histograms record into lens's own aggregation: metrics exported to
// a file in a temporary directory (once, at shutdown), traces off, and
// NEMO_GYM_OTEL_HTTP_BODY_SIZES set to sizes ("" leaves it unset). A
// test's manual reader would put every record through the SDK instead.
func enableBodySizesLens(b *testing.B, sizes string) {
	b.Helper()
	testenv.ClearTelemetry(b)
	for k, v := range map[string]string{
		"NEMO_GYM_OTEL_ENABLED": "1", "NEMO_GYM_OTEL_EXPORTER": "file",
		"NEMO_GYM_OTEL_FILE_PATH":      filepath.Join(b.TempDir(), "telemetry.jsonl"),
		"NEMO_GYM_OTEL_TRACES_ENABLED": "0", "OTEL_METRIC_EXPORT_INTERVAL": "3600000",
		lens.PrimaryPrefix + lens.KeyHTTPBodySizes: sizes,
	} {
		b.Setenv(k, v)
	}
	telemetry.ResetForTesting()
	b.Cleanup(telemetry.ResetForTesting)
	h, err := telemetry.Init(telemetry.InitOptions{ServerName: "sizes", ServerType: contract.ServerTypeResources})
	if err != nil || !h.MetricsExporting() {
		b.Fatalf("telemetry.Init: metrics exporting=%v err=%v", h.MetricsExporting(), err)
	}
}

// alternate runs op b.N times in rounds of benchRound, the rounds taking
// turns between the body sizes off (NEMO_GYM_OTEL_HTTP_BODY_SIZES unset,
// metrics on) and on, with setup run untimed at the start of each round
// after telemetry was set up for its mode (so a handler built there sees
// the mode), in the configuration enableBodySizesLens makes. It reports each mode's median round in ns/op (off-ns/op,
// on-ns/op) and their ratio, x-off: on a busy machine the two modes share
// the same noise, round by round, which a comparison of two separate runs
// would not.
func alternate(b *testing.B, setup func(), op func()) {
	var rounds [2][]float64
	mode := 0
	for done := 0; done < b.N; mode = 1 - mode {
		b.StopTimer()
		enableBodySizesLens(b, map[int]string{0: "", 1: "true"}[mode])
		setup()
		op() // the first call of a kind builds its attribute sets
		n := min(benchRound, b.N-done)
		b.StartTimer()
		start := time.Now()
		for range n {
			op()
		}
		rounds[mode] = append(rounds[mode], float64(time.Since(start).Nanoseconds())/float64(n))
		done += n
	}
	if len(rounds[1]) == 0 {
		return // b.N below two rounds: nothing to compare
	}
	off, on := median(rounds[0]), median(rounds[1])
	b.ReportMetric(off, "off-ns/op")
	b.ReportMetric(on, "on-ns/op")
	b.ReportMetric(on/off, "x-off")
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkHTTPServerBodySizes is the per-request cost of the server side
// body sizes (see alternate), traces off: a 1 KiB POST /echo answered in
// process.
//
//	go test -run '^$' -bench 'BodySizes' -benchtime 20000x -count 1 ./server/
func BenchmarkHTTPServerBodySizes(b *testing.B) {
	var h http.Handler
	body := bytes.NewReader(benchBody)
	r := httptest.NewRequest(http.MethodPost, "/echo", nil)
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	alternate(b, func() { h = echoServer().Handler() }, func() {
		body.Reset(benchBody)
		r.Body = io.NopCloser(body)
		h.ServeHTTP(w, r)
	})
}

// BenchmarkHTTPClientBodySizes is the per-call cost of the client side
// body sizes (see alternate), traces off: the fleet client posting 1 KiB
// to an uninstrumented loopback server, so that only the client's cost
// differs between the modes.
func BenchmarkHTTPClientBodySizes(b *testing.B) {
	peer := httptest.NewServer(http.HandlerFunc(echo))
	defer peer.Close()
	client := servertest.Client(b)
	ctx := context.Background()
	b.ReportAllocs()
	alternate(b, func() {}, func() {
		var got string
		if _, err := client.Post(ctx, peer.URL+"/echo", server.RawJSON(benchBody), &got, server.Call{}); err != nil {
			b.Fatal(err)
		}
	})
}
