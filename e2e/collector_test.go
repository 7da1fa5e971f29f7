package e2e

import (
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/internal/servertest"
	"github.com/gymlens/gymlens/internal/testenv"
	"github.com/gymlens/gymlens/protocol"
)

// Collector faults: `gymlens serve resources_servers` exporting over OTLP/gRPC
// to an endpoint that is down, that accepts connections but never answers,
// or that goes away and comes back. Serving must not depend on the
// collector, warnings must stay rare, shutdown must stay bounded and export
// must resume. Every wait is bounded; every process and listener started
// here is stopped when the test ends.

const (
	// collIDAttr is the span attribute gym.verify spans carry the rollout
	// id in: the <id> of the /ng-rollout/<id>/verify path collDrive posts
	// to (NeMo Gym's correlation prefix).
	collIDAttr = "nemo.gym.rollout.id"
	// collExportWarning is the rate-limited export error warning.
	collExportWarning = "telemetry export error"
	// collWarnEvery is the interval of that rate limit.
	collWarnEvery = 30 * time.Second
)

// collServe starts `gymlens serve resources_servers --name arithmetic` with
// every span group on and the OTLP exporter (gRPC, the default protocol)
// pointed at endpoint, metrics exported every 500 ms. It returns the
// process, its base URL and the time it was started.
func collServe(t *testing.T, endpoint string) (*gymProc, string, time.Time) {
	t.Helper()
	checkVerifyBody(t, "coll-0-0")
	env := gymEnv(
		"NEMO_GYM_OTEL_ENABLED=1",
		"NEMO_GYM_OTEL_EXPORTER=otlp",
		"NEMO_GYM_OTEL_SPAN_GROUPS=all",
		"OTEL_EXPORTER_OTLP_ENDPOINT="+endpoint,
		"OTEL_EXPORTER_OTLP_INSECURE=true",
		"OTEL_METRIC_EXPORT_INTERVAL=500",
	)
	started := time.Now()
	p, base := serveArithmetic(t, env)
	return p, base, started
}

// collTerminate sends SIGTERM and waits up to bound for the exit; it
// returns the exit code and how long the process took to exit.
func collTerminate(t *testing.T, p *gymProc, bound time.Duration) (int, time.Duration) {
	t.Helper()
	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code := p.wait(t, bound)
	return code, time.Since(start)
}

// collLoad is what a load run saw.
type collLoad struct {
	mu       sync.Mutex
	ok       int64         // 200 answers
	failures []string      // transport errors and non-200 answers
	slowest  time.Duration // longest request, successful or not
	slow     int64         // requests longer than the latency bound
	elapsed  time.Duration
}

func (l *collLoad) fail(msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failures = append(l.failures, msg)
}

func (l *collLoad) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return fmt.Sprintf("%d ok, %d failed, slowest %v, %d over the latency bound, in %v",
		l.ok, len(l.failures), l.slowest.Round(time.Microsecond), l.slow, l.elapsed.Round(time.Millisecond))
}

// collDrive posts /verify requests from workers goroutines until stop is
// closed; ids are prefix followed by the worker and a sequence number,
// sent as the row's task_id and as the rollout id of the path
// (/ng-rollout/<id>/verify, which the server routes as /verify). Requests
// taking longer than latencyBound are counted as slow.
func collDrive(base string, workers int, prefix string, latencyBound time.Duration, stop <-chan struct{}) *collLoad {
	tr := &http.Transport{MaxIdleConnsPerHost: workers, Proxy: nil}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 15 * time.Second}
	l := &collLoad{}
	var ok, slow atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			var slowest time.Duration
			defer func() {
				l.mu.Lock()
				l.slowest = max(l.slowest, slowest)
				l.mu.Unlock()
			}()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("%s%d-%d", prefix, w, i)
				t0 := time.Now()
				res, err := client.Post(base+"/ng-rollout/"+id+"/verify", "application/json",
					strings.NewReader(verifyBody(id)))
				if err == nil {
					_, _ = io.Copy(io.Discard, res.Body)
					res.Body.Close()
				}
				d := time.Since(t0)
				slowest = max(slowest, d)
				if d > latencyBound {
					slow.Add(1)
				}
				switch {
				case err != nil:
					l.fail(err.Error())
					return
				case res.StatusCode != http.StatusOK:
					l.fail(fmt.Sprintf("status %d", res.StatusCode))
				default:
					ok.Add(1)
				}
			}
		})
	}
	wg.Wait()
	l.elapsed = time.Since(start)
	l.ok, l.slow = ok.Load(), slow.Load()
	return l
}

// collDriveFor runs collDrive for d.
func collDriveFor(base string, workers int, prefix string, latencyBound, d time.Duration) *collLoad {
	stop := make(chan struct{})
	timer := time.AfterFunc(d, func() { close(stop) })
	defer timer.Stop()
	return collDrive(base, workers, prefix, latencyBound, stop)
}

// checkLoad fails the test when the load saw a failure or no success.
func (l *collLoad) check(t *testing.T, what string) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.failures) > 0 {
		t.Errorf("%s: %d failed requests, first: %s", what, len(l.failures), l.failures[0])
	}
	if l.ok == 0 {
		t.Errorf("%s: no request succeeded", what)
	}
}

// collReceiver is an in-test OTLP/gRPC collector: the trace and metrics
// services, keeping the spans' rollout ids.
type collReceiver struct {
	srv  *grpc.Server
	done chan struct{}

	mu       sync.Mutex
	spans    int
	metrics  int
	ids      []string // nemo.gym.rollout.id of every span that carries it
	nameByID map[string]string
}

type collTraceService struct {
	coltracepb.UnimplementedTraceServiceServer
	r *collReceiver
}

func (s collTraceService) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				s.r.spans++
				for _, kv := range sp.GetAttributes() {
					if kv.GetKey() == collIDAttr {
						id := kv.GetValue().GetStringValue()
						s.r.ids = append(s.r.ids, id)
						s.r.nameByID[id] = sp.GetName()
					}
				}
			}
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

type collMetricsService struct {
	colmetricpb.UnimplementedMetricsServiceServer
	r *collReceiver
}

func (s collMetricsService) Export(_ context.Context, req *colmetricpb.ExportMetricsServiceRequest) (*colmetricpb.ExportMetricsServiceResponse, error) {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	s.r.metrics++
	return &colmetricpb.ExportMetricsServiceResponse{}, nil
}

// collStartReceiver serves a new receiver on addr ("127.0.0.1:0" for any
// port). Binding a port a previous receiver just released is retried for
// a few seconds. The receiver is stopped when the test ends at the latest.
func collStartReceiver(t *testing.T, addr string) (*collReceiver, string) {
	t.Helper()
	var (
		ln  net.Listener
		err error
	)
	for deadline := time.Now().Add(5 * time.Second); ; {
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("listen on %s for the OTLP receiver: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	r := &collReceiver{srv: grpc.NewServer(), done: make(chan struct{}), nameByID: map[string]string{}}
	coltracepb.RegisterTraceServiceServer(r.srv, collTraceService{r: r})
	colmetricpb.RegisterMetricsServiceServer(r.srv, collMetricsService{r: r})
	go func() {
		defer close(r.done)
		_ = r.srv.Serve(ln)
	}()
	t.Cleanup(r.stop)
	return r, ln.Addr().String()
}

// stop closes the listener and every connection at once, then waits for
// Serve to return. It may be called more than once.
func (r *collReceiver) stop() {
	r.srv.Stop()
	<-r.done
}

// counts returns how many spans and metrics requests arrived and how many
// spans carry a rollout id with prefix (with the name of one of them).
func (r *collReceiver) counts(prefix string) (spans, metrics, withPrefix int, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range r.ids {
		if strings.HasPrefix(id, prefix) {
			withPrefix++
			name = r.nameByID[id]
		}
	}
	return r.spans, r.metrics, withPrefix, name
}

// collWaitSpans waits up to bound for r to hold a span whose rollout id
// starts with prefix, and returns how long that took.
func collWaitSpans(t *testing.T, r *collReceiver, prefix string, bound time.Duration) (time.Duration, bool) {
	t.Helper()
	start := time.Now()
	for {
		if _, _, n, _ := r.counts(prefix); n > 0 {
			return time.Since(start), true
		}
		if time.Since(start) > bound {
			return time.Since(start), false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// collWarnings counts the export warnings in a server's stderr and the
// most the rate limit allows over lifetime: one per started 30 s, plus one.
func collWarnings(stderr string, lifetime time.Duration) (got, allowed int) {
	got = strings.Count(stderr, collExportWarning)
	allowed = int(math.Ceil(lifetime.Seconds()/collWarnEvery.Seconds())) + 1
	return got, allowed
}

func TestOTLPEndpointDownServesAndWarnsRarely(t *testing.T) {
	endpoint := "http://" + servertest.FreeAddr(t) // refused: nothing listens
	srv, base, started := collServe(t, endpoint)

	load := collDriveFor(base, 8, "down-", 10*time.Second, 4*time.Second)
	t.Logf("load with the OTLP endpoint %s down: %v", endpoint, load)
	load.check(t, "endpoint down")

	// The flush at shutdown is bounded by 10 s; 20 s leaves room for the
	// drain and a race-instrumented binary.
	code, took := collTerminate(t, srv, 20*time.Second)
	lifetime := time.Since(started)
	stderr := srv.stderr.String()
	t.Logf("SIGTERM -> exit %d after %v (process lived %v)", code, took.Round(time.Millisecond), lifetime.Round(time.Millisecond))
	if code != 0 {
		t.Errorf("gymlens serve exited %d, want 0\nstderr:\n%s", code, tail(stderr, 30))
	}
	got, allowed := collWarnings(stderr, lifetime)
	t.Logf("%q lines: %d (at most %d allowed over %v); \"telemetry flush\" lines: %d; \"spans dropped\" lines: %d",
		collExportWarning, got, allowed, lifetime.Round(time.Second), strings.Count(stderr, "telemetry flush"),
		strings.Count(stderr, "spans dropped"))
	if got > allowed {
		t.Errorf("%d %q lines over %v, want at most %d (one per 30 s, plus one)\nstderr:\n%s",
			got, collExportWarning, lifetime.Round(time.Second), allowed, tail(stderr, 30))
	}
	if got == 0 {
		// Not the property under test, but a sign the endpoint was never
		// tried at all (exporter not configured?).
		t.Errorf("no %q line although the endpoint was down\nstderr:\n%s", collExportWarning, tail(stderr, 30))
	}
}

func TestOTLPBlackholeEndpoint(t *testing.T) {
	endpoint, accepted := testenv.BlackHole(t)
	srv, base, _ := collServe(t, endpoint)

	// 2 s bounds "no request waits on the collector"; it is not a
	// performance figure.
	const latencyBound = 2 * time.Second
	load := collDriveFor(base, 8, "blackhole-", latencyBound, 4*time.Second)
	t.Logf("load with a blackhole OTLP endpoint %s (%d connections accepted): %v", endpoint, accepted(), load)
	load.check(t, "blackhole endpoint")
	if load.slow > 0 {
		t.Errorf("%d requests took longer than %v (slowest %v): a request waited on the collector",
			load.slow, latencyBound, load.slowest)
	}
	if accepted() == 0 {
		t.Errorf("the exporter never connected to the blackhole endpoint")
	}

	// Shutdown: drain, then a telemetry flush bounded by 10 s.
	code, took := collTerminate(t, srv, 30*time.Second)
	stderr := srv.stderr.String()
	t.Logf("SIGTERM -> exit %d after %v with the collector not answering; %q lines: %d; \"spans dropped\" lines: %d",
		code, took.Round(time.Millisecond), collExportWarning, strings.Count(stderr, collExportWarning),
		strings.Count(stderr, "spans dropped"))
	if code != 0 {
		t.Errorf("gymlens serve exited %d, want 0\nstderr:\n%s", code, tail(stderr, 30))
	}
}

func TestOTLPEndpointRestartResumes(t *testing.T) {
	first, addr := collStartReceiver(t, "127.0.0.1:0")
	srv, base, _ := collServe(t, "http://"+addr)

	// 1. Collector up: spans arrive.
	load := collDriveFor(base, 8, "before-", 10*time.Second, time.Second)
	t.Logf("load with the collector up: %v", load)
	load.check(t, "collector up")
	if took, ok := collWaitSpans(t, first, "before-", 20*time.Second); !ok {
		spans, metrics, _, _ := first.counts("")
		t.Fatalf("no span of the first phase reached the collector in %v (%d spans, %d metrics requests)\nstderr:\n%s",
			took.Round(time.Millisecond), spans, metrics, tail(srv.stderr.String(), 20))
	} else {
		spans, metrics, _, _ := first.counts("")
		t.Logf("first collector: spans after %v; %d spans, %d metrics requests", took.Round(time.Millisecond), spans, metrics)
	}

	// 2. Collector gone: exports fail, serving goes on.
	first.stop()
	load = collDriveFor(base, 8, "during-", 10*time.Second, time.Second)
	t.Logf("load with the collector stopped: %v", load)
	load.check(t, "collector stopped")

	// 3. A new collector on the same port. Load runs until spans from after
	// the restart show up there: the queue may still be full of spans from
	// the outage, so spans sent right after the restart can be dropped.
	second, addr2 := collStartReceiver(t, addr)
	if addr2 != addr {
		t.Fatalf("second collector on %s, want %s", addr2, addr)
	}
	stop := make(chan struct{})
	loadDone := make(chan *collLoad, 1)
	go func() { loadDone <- collDrive(base, 4, "after-restart-", 10*time.Second, stop) }()
	took, ok := collWaitSpans(t, second, "after-restart-", 30*time.Second)
	close(stop)
	load = <-loadDone
	t.Logf("load after the restart: %v", load)
	load.check(t, "collector restarted")
	spans, metrics, after, name := second.counts("after-restart-")
	if !ok {
		t.Fatalf("no span with an after-restart- rollout id reached the new collector within %v of its start "+
			"(%d spans, %d metrics requests there)\nstderr:\n%s",
			took.Round(time.Millisecond), spans, metrics, tail(srv.stderr.String(), 20))
	}
	t.Logf("new collector: first after-restart- span seen %v after the restart (%q); by now %d spans (%d after-restart-), %d metrics requests",
		took.Round(time.Millisecond), name, spans, after, metrics)
	// The id is on the verify route's SERVER span and on gym.verify.
	if name != contract.SpanVerify && name != "POST "+protocol.PathVerify {
		t.Errorf("after-restart- rollout id on span %q, want %s or its SERVER span", name, contract.SpanVerify)
	}

	// Metric exports resume too: the periodic reader (500 ms here) retries
	// a failed export with backoff, so the first one to reach the new
	// collector may take a few seconds.
	metricsWait := time.Now()
	for {
		if _, m, _, _ := second.counts(""); m > 0 {
			t.Logf("new collector: first metrics request %v after the first after-restart- span",
				time.Since(metricsWait).Round(time.Millisecond))
			break
		}
		if time.Since(metricsWait) > 30*time.Second {
			t.Errorf("no metrics request reached the new collector within 30 s of its first span\nstderr:\n%s",
				tail(srv.stderr.String(), 20))
			break
		}
		time.Sleep(50 * time.Millisecond)
	}

	code, shut := collTerminate(t, srv, 30*time.Second)
	t.Logf("SIGTERM -> exit %d after %v\nstderr:\n%s", code, shut.Round(time.Millisecond), tail(srv.stderr.String(), 10))
	if code != 0 {
		t.Errorf("gymlens serve exited %d, want 0\nstderr:\n%s", code, tail(srv.stderr.String(), 30))
	}
}
