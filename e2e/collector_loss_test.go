package e2e

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gymlens/gymlens/internal/servertest"
	"github.com/gymlens/gymlens/internal/testenv"
	"github.com/gymlens/gymlens/report"
)

// `gymlens run` against a collector at fault, over loopback: one that accepts
// connections and never answers, and OTLP/HTTP endpoints answering 500
// and 429. Start-up must not wait on the collector (measured against a
// run with a healthy receiver in the same test: the fault may add well
// under the exporters' 10 s timeout, where a flush waiting on it added
// 10 to 30 s); every process must account for its lost spans, the
// summary and report must show them, and the run must exit 1.

// collAnswering serves OTLP/HTTP answering every request with status. It
// is closed when the test ends.
func collAnswering(t *testing.T, status int) string {
	t.Helper()
	return servertest.ServeHandler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, http.StatusText(status), status)
	}))
}

// collRun runs `gymlens run` exporting over OTLP to endpoint with protocol,
// and returns its exit code, output, run directory and how long after the
// start the orchestrator logged "fleet started".
func collRun(t *testing.T, endpoint, protocol string) (code int, stdout, stderr, dir string, startup time.Duration) {
	t.Helper()
	runs := filepath.Join(t.TempDir(), "runs")
	var (
		mu      sync.Mutex
		started time.Time
		at      time.Time
	)
	errLog := &lineLog{onLine: func(line string, when time.Time) {
		if strings.Contains(line, "fleet started") {
			mu.Lock()
			if at.IsZero() {
				at = when
			}
			mu.Unlock()
		}
	}}
	env := gymEnv("OTEL_EXPORTER_OTLP_ENDPOINT="+endpoint, "OTEL_EXPORTER_OTLP_INSECURE=true",
		"OTEL_EXPORTER_OTLP_PROTOCOL="+protocol, "NEMO_GYM_MAX_ROLLOUT_ATTEMPTS=1")
	mu.Lock()
	started = time.Now()
	mu.Unlock()
	p := startGymProc(t, env, &lineLog{}, errLog, "run", "--rollouts", "12", "--concurrency", "4", "--runs-dir", runs, "--quiet")
	code = p.wait(t, 3*time.Minute)
	mu.Lock()
	defer mu.Unlock()
	if at.IsZero() {
		t.Fatalf("gymlens run never logged \"fleet started\" (exit %d)\nstderr:\n%s", code, tail(p.stderr.String(), 30))
	}
	return code, p.stdout.String(), p.stderr.String(), runDir(t, runs), at.Sub(started)
}

func TestGymRunWithBrokenCollectorStartsAtOnceAndReportsLosses(t *testing.T) {
	rec, addr := collStartReceiver(t, "127.0.0.1:0")
	code, stdout, stderr, _, base := collRun(t, "http://"+addr, "grpc")
	spans, _, _, _ := rec.counts("")
	t.Logf("healthy collector: start-up %v, exit %d, %d spans received", base.Round(time.Millisecond), code, spans)
	if code != 0 || !strings.Contains(stdout, "telemetry lost no spans") {
		t.Fatalf("with a healthy collector: exit %d, want 0 and \"telemetry lost no spans\"\nstdout:\n%s\nstderr:\n%s", code, stdout, tail(stderr, 30))
	}

	// The exporters' default timeout is 10 s; a start-up that waited on
	// the collector took at least that much longer than the healthy one.
	const margin = 5 * time.Second
	for _, c := range []struct{ name, protocol, endpoint string }{
		{"blackhole", "grpc", func() string { e, _ := testenv.BlackHole(t); return e }()},
		{"http 500", "http/protobuf", collAnswering(t, http.StatusInternalServerError)},
		{"http 429", "http/protobuf", collAnswering(t, http.StatusTooManyRequests)},
	} {
		t.Run(c.name, func(t *testing.T) {
			began := time.Now()
			code, stdout, stderr, dir, startup := collRun(t, c.endpoint, c.protocol)
			t.Logf("%s: start-up %v (healthy %v), exit %d, whole run %v", c.name, startup.Round(time.Millisecond),
				base.Round(time.Millisecond), code, time.Since(began).Round(time.Millisecond))
			if startup > base+margin {
				t.Errorf("start-up took %v, the healthy one %v: it waited on the collector", startup, base)
			}
			if code != 1 || !strings.Contains(stderr, "telemetry lost more than") {
				t.Errorf("exit %d, want 1 with the span loss named\nstderr:\n%s", code, tail(stderr, 20))
			}
			run, err := report.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			losses := run.SpanLosses()
			if len(losses) < 4 {
				t.Errorf("%d processes accounted for their spans, want the orchestrator and the 3 servers: %v\nstderr (the fleet's stop errors):\n%s", len(losses), losses, tail(stderr, 30))
			}
			var lost uint64
			for _, l := range losses {
				t.Logf("  %s: %s", l.Process.Name(), l)
				lost += l.Lost()
				if l.Lost() != l.Spans {
					t.Errorf("%s: %s; want every span lost and counted", l.Process.Name(), l)
				}
				if line := fmt.Sprintf("%s: %s", l.Process.Name(), l); l.Lost() > 0 && !strings.Contains(stdout, line) {
					t.Errorf("the summary lacks %q\nstdout:\n%s", line, stdout)
				}
			}
			if lost == 0 {
				t.Errorf("no span counted as lost with the collector at fault")
			}
		})
	}
}
