package servertest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gymlens/gymlens/internal/testenv"
	"github.com/gymlens/gymlens/lens"
	"github.com/gymlens/gymlens/server"
	"github.com/gymlens/gymlens/telemetry"
	"go.opentelemetry.io/otel/attribute"
)

// Start binds s to its loopback address and serves it in a goroutine. It
// returns the base URL ("http://127.0.0.1:PORT") and a stop function that
// cancels serving and waits for Serve to return, failing the test when the
// drain did not complete. stop is idempotent and also runs at cleanup, so a
// test may call it early (for example to be sure every server span has
// ended before it reads spans).
func Start(t testing.TB, s *server.Server) (baseURL string, stop func()) {
	t.Helper()
	addr, err := s.Listen()
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("serve: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return "http://" + addr.String(), stop
}

// Client returns a fleet client that does not retry, with its idle
// connections closed at cleanup.
func Client(t testing.TB) *server.Client {
	t.Helper()
	c := server.NewClient(server.ClientOptions{Retries: -1})
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// EnableTelemetry switches in-process telemetry on with every span group,
// no configured exporter (opts carries the test's reader and exporter) and
// a clean NEMO_GYM_OTEL_* environment, and resets it at cleanup. Servers
// must be created after this call: their instrumentation is decided when
// their handler is first built. Tests that use it must not run in
// parallel.
func EnableTelemetry(t testing.TB, opts telemetry.InitOptions) *lens.Handle {
	t.Helper()
	return EnableTelemetryGroups(t, "all", opts)
}

// EnableTelemetryGroups is EnableTelemetry with the given span-group spec.
func EnableTelemetryGroups(t testing.TB, groups string, opts telemetry.InitOptions) *lens.Handle {
	t.Helper()
	return EnableTelemetryEnv(t, groups, nil, opts)
}

// EnableTelemetryEnv is EnableTelemetryGroups with extra variables (such
// as OTEL_TRACES_SAMPLER) set in the cleaned environment before Init.
func EnableTelemetryEnv(t testing.TB, groups string, env map[string]string, opts telemetry.InitOptions) *lens.Handle {
	t.Helper()
	testenv.ClearTelemetry(t)
	for k, v := range env {
		t.Setenv(k, v)
	}
	t.Setenv("NEMO_GYM_OTEL_ENABLED", "1")
	t.Setenv("NEMO_GYM_OTEL_EXPORTER", "none")
	t.Setenv("NEMO_GYM_OTEL_SPAN_GROUPS", groups)
	telemetry.ResetForTesting()
	t.Cleanup(telemetry.ResetForTesting)
	h, err := telemetry.Init(opts)
	if err != nil || !h.IsExporting() {
		t.Fatalf("telemetry.Init: exporting=%v err=%v", h.IsExporting(), err)
	}
	return h
}

// PostRaw sends body verbatim as a JSON POST on a client of its own (see
// Post) and returns the status and the response body. Tests use it for
// requests the typed client cannot produce, such as malformed JSON.
func PostRaw(t testing.TB, url, body string) (int, []byte) {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{}}
	defer c.CloseIdleConnections()
	return Post(t, c, url, []byte(body))
}

// Post sends body as a JSON POST on c and returns the status and the
// response body; a transport error (a dropped or reset connection) fails
// the test, and an answer that is not application/json is an error.
// Fuzz tests use it to send arbitrary bytes.
func Post(t testing.TB, c *http.Client, url string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("POST %.200q: %v", body, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("POST %.200q: reading the answer: %v", body, err)
	}
	if ct := res.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("POST %.200q: Content-Type %q", body, ct)
	}
	return res.StatusCode, raw
}

// CheckHealth fails the test unless the server at base answers GET
// /health with 200.
func CheckHealth(t testing.TB, c *http.Client, base string) {
	t.Helper()
	res, err := c.Get(base + server.HealthPath)
	if err != nil {
		t.Fatalf("GET %s/health: %v", base, err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s/health: status %d", base, res.StatusCode)
	}
}

// CheckErrorBody asserts raw is the body upstream's servers answer with
// for status: a FastAPI validation body {"detail":[{type,loc,msg,input}]}
// for 422, {"detail": "..."} for 413 and 404, and a JSON string for 500.
func CheckErrorBody(t testing.TB, status int, raw []byte) {
	t.Helper()
	switch status {
	case http.StatusUnprocessableEntity:
		var body struct {
			Detail []map[string]json.RawMessage `json:"detail"`
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&body); err != nil || len(body.Detail) == 0 {
			t.Fatalf("422 with a body that is not a validation detail list: %v: %s", err, raw)
		}
		for _, d := range body.Detail {
			for _, k := range []string{"type", "loc", "msg", "input"} {
				if _, ok := d[k]; !ok {
					t.Errorf("422 detail entry without %q: %s", k, raw)
				}
			}
			var loc []any
			if json.Unmarshal(d["loc"], &loc) != nil || len(loc) == 0 || loc[0] != "body" {
				t.Errorf("422 detail entry whose loc does not start with \"body\": %s", raw)
			}
		}
	case http.StatusInternalServerError:
		var msg string
		if err := json.Unmarshal(raw, &msg); err != nil || msg == "" {
			t.Fatalf("500 with a body that is not a JSON string: %v: %s", err, raw)
		}
	default:
		var body struct {
			Detail string `json:"detail"`
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&body); err != nil || body.Detail == "" {
			t.Fatalf("status %d with a body that is not {\"detail\": message}: %v: %s", status, err, raw)
		}
	}
}

// FreeAddr returns a loopback address ("127.0.0.1:PORT") whose port was
// free a moment ago (testenv.FreePort): the listener that claimed it is
// closed again, so connections to it are refused until something else
// binds it.
func FreeAddr(t testing.TB) string {
	t.Helper()
	return "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
}

// ServeHandler serves h over plain HTTP on a loopback port and returns the
// base URL ("http://127.0.0.1:PORT"). At cleanup the server is closed
// (connections dropped, in-flight requests not awaited) and its Serve
// goroutine awaited. Tests use it for peers that are not a server.Server:
// an OTLP receiver, a collector answering errors, a Prometheus endpoint.
func ServeHandler(t testing.TB, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
	return "http://" + ln.Addr().String()
}

// Attrs returns attributes (a span's or an event's) by key, each value
// as its Emit string; an absent key reads as "". Tests use it to check a
// recorded span without depending on the exporter's types.
func Attrs(kvs []attribute.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.Emit()
	}
	return m
}
