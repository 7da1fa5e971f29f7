package server_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/internal/servertest"
	"github.com/gymlens/gymlens/server"
)

// droppingListener accepts and at once closes its first drop connections,
// as a peer that is restarting or shedding load does, then hands the rest
// to the server.
type droppingListener struct {
	net.Listener
	drop    int64
	dropped atomic.Int64
}

func (l *droppingListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.dropped.Load() >= l.drop {
			return c, nil
		}
		l.dropped.Add(1)
		c.Close()
	}
}

// retryEvents returns the retry events of the only CLIENT span exported,
// as their attributes.
func retryEvents(t *testing.T, spans *tracetest.InMemoryExporter) []map[string]string {
	t.Helper()
	got := clientSpans(t, spans)
	if len(got) != 1 {
		t.Fatalf("%d CLIENT spans, want 1 for one logical call", len(got))
	}
	var out []map[string]string
	for _, e := range got[0].Events {
		if e.Name != contract.EventRetry {
			continue
		}
		out = append(out, servertest.Attrs(e.Attributes))
	}
	return out
}

// flushed ends the test's spans into the exporter.
func flushed(t *testing.T, spans *tracetest.InMemoryExporter, force func(context.Context) error) *tracetest.InMemoryExporter {
	t.Helper()
	if err := force(context.Background()); err != nil {
		t.Fatal(err)
	}
	return spans
}

// TestClientRetriesDroppedConnections: a peer that accepts and closes the
// first two connections of an idempotent call (/verify) gets the third
// attempt, which succeeds; each retry counts in gym.http.retry_total as a
// server disconnect and is a retry event on the one CLIENT span.
func TestClientRetriesDroppedConnections(t *testing.T) {
	spans, reader, h := enableTelemetry(t, "http_client")
	var hits atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		writeEmptyJSON(w)
	}))
	ln := &droppingListener{Listener: srv.Listener, drop: 2}
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)

	client := server.NewClient(server.ClientOptions{Retries: 3, Backoff: time.Millisecond})
	t.Cleanup(client.CloseIdleConnections)
	if err := client.PostJSON(context.Background(), srv.URL+"/ng-rollout/r-1/verify", echoReq{Name: "x"}, nil); err != nil {
		t.Fatalf("call through two dropped connections: %v", err)
	}
	if hits.Load() != 1 || ln.dropped.Load() != 2 {
		t.Errorf("handler ran %d times after %d dropped connections; want 1 after 2", hits.Load(), ln.dropped.Load())
	}
	if got := counterPoints(t, reader, contract.HTTPRetries, contract.AttrHTTPRetryReason); got[contract.RetryServerDisconnected] != 2 || len(got) != 1 {
		t.Errorf("gym.http.retry_total %v, want 2 %s", got, contract.RetryServerDisconnected)
	}
	events := retryEvents(t, flushed(t, spans, h.ForceFlush))
	if len(events) != 2 {
		t.Fatalf("%d retry events, want 2", len(events))
	}
	for i, e := range events {
		if e[contract.AttrHTTPRequestResendCount] != string(rune('1'+i)) || e[contract.AttrHTTPRetryReason] != contract.RetryServerDisconnected {
			t.Errorf("retry event %d: %v", i, e)
		}
	}
	if a := servertest.Attrs(clientSpans(t, spans)[0].Attributes); a[contract.AttrHTTPRequestResendCount] != "2" || a[contract.AttrHTTPResponseStatus] != "200" {
		t.Errorf("CLIENT span attributes %v, want resend count 2 and status 200", a)
	}
}

// TestClientHonoursRetryAfter: a 503 or 429 says the peer did not process
// the request, so it is sent again even on a route that is not idempotent
// (/run, /aggregate_metrics), no earlier than its Retry-After asks, in the
// seconds form and the HTTP-date form.
func TestClientHonoursRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		name, path string
		status     int
		date       bool
	}{
		{"503 seconds", "/run", http.StatusServiceUnavailable, false},
		{"429 date", "/aggregate_metrics", http.StatusTooManyRequests, true},
		{"429 seconds", "/run", http.StatusTooManyRequests, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spans, reader, h := enableTelemetry(t, "http_client")
			var mu sync.Mutex
			var answered, second time.Time // when the first answer was sent; when the second attempt came
			var notBefore time.Time        // the date form's instant
			var hits atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				mu.Lock()
				defer mu.Unlock()
				if hits.Add(1) == 1 {
					if tc.date {
						notBefore = time.Now().Add(2 * time.Second).Truncate(time.Second)
						w.Header().Set("Retry-After", notBefore.UTC().Format(http.TimeFormat))
					} else {
						w.Header().Set("Retry-After", "1")
					}
					answered = time.Now()
					w.WriteHeader(tc.status)
					return
				}
				second = time.Now()
				writeEmptyJSON(w)
			}))
			t.Cleanup(srv.Close)
			client := server.NewClient(server.ClientOptions{Backoff: time.Millisecond})
			t.Cleanup(client.CloseIdleConnections)
			if err := client.PostJSON(context.Background(), srv.URL+tc.path, echoReq{Name: "x"}, nil); err != nil {
				t.Fatalf("call after a %d: %v", tc.status, err)
			}
			mu.Lock()
			defer mu.Unlock()
			if hits.Load() != 2 {
				t.Fatalf("%d attempts, want 2", hits.Load())
			}
			if waited := second.Sub(answered); !tc.date && waited < time.Second {
				t.Errorf("second attempt %v after the answer, before its Retry-After of 1 s", waited)
			}
			if tc.date && second.Before(notBefore) {
				t.Errorf("second attempt at %v, before the Retry-After date %v", second, notBefore)
			}
			if got := counterPoints(t, reader, contract.HTTPRetries, contract.AttrHTTPRetryReason); got[contract.RetryOther] != 1 || len(got) != 1 {
				t.Errorf("gym.http.retry_total %v, want 1 %s", got, contract.RetryOther)
			}
			events := retryEvents(t, flushed(t, spans, h.ForceFlush))
			if len(events) != 1 || events[0][contract.AttrHTTPResponseStatus] != string(rune('0'+tc.status/100))+string(rune('0'+tc.status/10%10))+string(rune('0'+tc.status%10)) {
				t.Errorf("retry events %v, want one with status %d", events, tc.status)
			}
		})
	}
}

// TestClientGivesUpOnADeadServer: a peer that is gone for good gets the
// first attempt and Retries more, the error says how many, and each retry
// counts (a refused connection is an OS error, as upstream's client
// classes it). A refused /run is retried: it never reached the peer.
func TestClientGivesUpOnADeadServer(t *testing.T) {
	spans, reader, h := enableTelemetry(t, "http_client")
	dead := "http://" + servertest.FreeAddr(t)
	client := server.NewClient(server.ClientOptions{Retries: 3, Backoff: time.Millisecond})
	t.Cleanup(client.CloseIdleConnections)
	err := client.PostJSON(context.Background(), dead+"/run", echoReq{Name: "x"}, nil)
	if err == nil || !strings.Contains(err.Error(), "gave up after 4 attempts") {
		t.Fatalf("call to a dead peer: %v; want it to say it gave up after 4 attempts", err)
	}
	if got := counterPoints(t, reader, contract.HTTPRetries, contract.AttrHTTPRetryReason); got[contract.RetryClientOSError] != 3 || len(got) != 1 {
		t.Errorf("gym.http.retry_total %v, want 3 %s", got, contract.RetryClientOSError)
	}
	if events := retryEvents(t, flushed(t, spans, h.ForceFlush)); len(events) != 3 {
		t.Errorf("%d retry events, want 3", len(events))
	}
}

// TestClientDoesNotReplayWhatThePeerMayHaveRun: a peer that reads the
// request and then drops the connection without an answer may have run
// it. /run and /aggregate_metrics are not sent again (the peer sees one
// request and the error comes back); /verify, idempotent, is.
func TestClientDoesNotReplayWhatThePeerMayHaveRun(t *testing.T) {
	_, reader, _ := enableTelemetry(t, "http_client")
	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		seen[r.URL.Path]++
		n := seen[r.URL.Path]
		mu.Unlock()
		if n > 1 {
			writeEmptyJSON(w)
			return
		}
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		conn.Close()
	}))
	t.Cleanup(srv.Close)
	client := server.NewClient(server.ClientOptions{Retries: 3, Backoff: time.Millisecond})
	t.Cleanup(client.CloseIdleConnections)
	for _, path := range []string{"/run", "/aggregate_metrics", "/ng-rollout/r-1/run"} {
		if err := client.PostJSON(context.Background(), srv.URL+path, echoReq{Name: "x"}, nil); err == nil {
			t.Errorf("%s: a dropped call succeeded", path)
		}
	}
	if err := client.PostJSON(context.Background(), srv.URL+"/verify", echoReq{Name: "x"}, nil); err != nil {
		t.Errorf("/verify after one drop: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := map[string]int{"/run": 1, "/aggregate_metrics": 1, "/ng-rollout/r-1/run": 1, "/verify": 2}
	for p, n := range want {
		if seen[p] != n {
			t.Errorf("peer saw %s %d times, want %d (all: %v)", p, seen[p], n, seen)
		}
	}
	if got := counterPoints(t, reader, contract.HTTPRetries, contract.AttrHTTPRetryReason); got[contract.RetryServerDisconnected] != 1 || len(got) != 1 {
		t.Errorf("gym.http.retry_total %v, want only the /verify retry", got)
	}
}
