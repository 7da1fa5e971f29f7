package server_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gymlens/gymlens/internal/testenv"
	"github.com/gymlens/gymlens/protocol"
	"github.com/gymlens/gymlens/server"
)

// rawConn dials addr (host:port of a base URL) with the test's deadline.
func rawConn(t *testing.T, baseURL string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(baseURL, "http://"), 5*time.Second)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	return c
}

// readStatus reads one response from c, within d.
func readStatus(c net.Conn, d time.Duration) (*http.Response, error) {
	_ = c.SetReadDeadline(time.Now().Add(d))
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res, nil
}

func heapAndStacks() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse + m.StackInuse
}

// TestIdleConnectionsCannotLockOutACaller holds 2 000 connections that are
// not in a request (half finished one request and sit in keep-alive, half
// never sent a byte) against a server capped at 100: the server keeps at
// most the cap open, its goroutines and memory stay bounded, and a new
// caller is answered. Without the cap every one of them held a goroutine
// and its buffers (the 7 829 idle connections held 349 MB), and
// at the fd limit new callers got nothing.
func TestIdleConnectionsCannotLockOutACaller(t *testing.T) {
	const held, limit = 2000, 100
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur < 2*held+256 {
		t.Skipf("needs %d file descriptors (RLIMIT_NOFILE %d)", 2*held+256, rl.Cur)
	}
	s, _ := newEchoServer(t, server.Options{Name: "idle", MaxConns: limit})
	url := start(t, s)
	goroutines, mem := runtime.NumGoroutine(), heapAndStacks()
	conns := make([]net.Conn, 0, held)
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for i := range held {
		c := rawConn(t, url)
		conns = append(conns, c)
		if i%2 == 0 {
			if _, err := io.WriteString(c, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
				continue // closed to make room: what the cap is for
			}
			if res, err := readStatus(c, 5*time.Second); err == nil && res.StatusCode != http.StatusOK {
				t.Fatalf("health on connection %d: %d", i, res.StatusCode)
			}
		}
	}
	open := server.OpenConns(s)
	grown := runtime.NumGoroutine() - goroutines
	memGrown := int64(heapAndStacks()) - int64(mem)
	t.Logf("%d connections held by the client: server holds %d open (cap %d), +%d goroutines, +%.1f MiB heap and stacks",
		held, open, limit, grown, float64(memGrown)/(1<<20))
	if open > limit {
		t.Errorf("server holds %d connections open, cap %d", open, limit)
	}
	// One goroutine per admitted connection plus slack for the ones being
	// closed; without the cap it was one per held connection.
	if grown > limit+50 {
		t.Errorf("+%d goroutines for %d held connections under a cap of %d", grown, held, limit)
	}
	if memGrown > 16<<20 {
		t.Errorf("+%d bytes of heap and stacks for %d held connections under a cap of %d", memGrown, held, limit)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/echo", strings.NewReader(`{"name":"late"}`))
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	res, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatalf("a new caller behind %d idle connections: %v", held, err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("a new caller behind %d idle connections: %d", held, res.StatusCode)
	}
}

// blockingServer answers POST /block only once release is closed, and
// counts the handlers that entered.
func blockingServer(t *testing.T, opts server.Options) (url string, entered *atomic.Int64, release func()) {
	t.Helper()
	gate := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	entered = new(atomic.Int64)
	s := server.New(opts)
	server.Handle(s, "POST /block", func(ctx context.Context, _ echoReq) (echoResp, error) {
		entered.Add(1)
		select {
		case <-gate:
		case <-ctx.Done():
		}
		return echoResp{Greeting: "done"}, nil
	})
	url = start(t, s)
	t.Cleanup(release) // before the server's stop, which drains
	return url, entered, release
}

// waitFor polls cond until it holds or 5 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestConnectionOverTheCapWithAllBusyGets503: when every admitted
// connection is in a request, a new one is answered 503 at once and
// closed, not left waiting in the accept queue.
func TestConnectionOverTheCapWithAllBusyGets503(t *testing.T) {
	const limit = 4
	url, entered, release := blockingServer(t, server.Options{Name: "busyconns", MaxConns: limit})
	var wg sync.WaitGroup
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	for range limit {
		wg.Go(func() {
			res, err := client.Post(url+"/block", "application/json", strings.NewReader(`{"name":"x"}`))
			if err == nil {
				res.Body.Close()
			}
		})
	}
	waitFor(t, "the busy requests", func() bool { return entered.Load() == limit })
	c := rawConn(t, url)
	defer c.Close()
	res, err := readStatus(c, 5*time.Second) // nothing sent: the answer comes on accept
	if err != nil {
		t.Fatalf("connection over the cap: %v", err)
	}
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" {
		t.Fatalf("connection over the cap: %d, Retry-After %q; want 503 with Retry-After", res.StatusCode, res.Header.Get("Retry-After"))
	}
	release()
	wg.Wait()
}

// TestDrippedBodiesAreCut sends 50 bodies at one byte every 50 ms (each
// would take 5 s) to a server with a 300 ms read timeout: each is answered
// 408, or its connection closed, long before its last byte. Without a
// body timeout the 500 dripped bodies stayed open 70 s.
func TestDrippedBodiesAreCut(t *testing.T) {
	const drips, size = 50, 100
	s, calls := newEchoServer(t, server.Options{Name: "drip", ReadTimeout: 300 * time.Millisecond})
	url := start(t, s)
	var wg sync.WaitGroup
	var answered408, closed atomic.Int64
	for range drips {
		wg.Go(func() {
			c := rawConn(t, url)
			defer c.Close()
			fmt.Fprintf(c, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", size)
			var sent atomic.Int64
			stop := make(chan struct{})
			dripped := make(chan struct{})
			go func() {
				defer close(dripped)
				for i := 1; i < size; i++ {
					select {
					case <-stop:
						return
					case <-time.After(50 * time.Millisecond):
					}
					if _, err := c.Write([]byte(" ")); err != nil {
						return
					}
					sent.Add(1)
				}
			}()
			res, err := readStatus(c, 10*time.Second)
			close(stop)
			<-dripped
			if n := sent.Load(); n >= size-1 {
				t.Errorf("the whole body was dripped (%d bytes) before the server ended the request", n+1)
			}
			switch {
			case err == nil && res.StatusCode == http.StatusRequestTimeout:
				answered408.Add(1)
			case err != nil && !errors.Is(err, context.DeadlineExceeded) && !isTimeout(err):
				closed.Add(1)
			default:
				t.Errorf("dripped body: status %v, err %v; want 408 or the connection closed", res, err)
			}
		})
	}
	wg.Wait()
	t.Logf("%d dripped bodies: %d answered 408, %d closed", drips, answered408.Load(), closed.Load())
	if calls.Load() != 0 {
		t.Errorf("a handler ran %d times for a body that never arrived", calls.Load())
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestRequestFloodGets503 fills a server's concurrent-request cap with
// requests that wait, then floods it: every request past the cap is
// answered 503 with Retry-After, the liveness route still answers, and
// once the waiting requests finish the server serves again.
func TestRequestFloodGets503(t *testing.T) {
	const limit, flood = 8, 200
	url, entered, release := blockingServer(t, server.Options{Name: "flood", MaxConcurrentRequests: limit})
	tr := &http.Transport{MaxConnsPerHost: 64}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	var held sync.WaitGroup
	for range limit {
		held.Go(func() {
			if res, err := client.Post(url+"/block", "application/json", strings.NewReader(`{"name":"x"}`)); err == nil {
				res.Body.Close()
			}
		})
	}
	waitFor(t, "the requests at the cap", func() bool { return entered.Load() == limit })
	var wg sync.WaitGroup
	var refused atomic.Int64
	for range flood {
		wg.Go(func() {
			res, err := client.Post(url+"/block", "application/json", strings.NewReader(`{"name":"x"}`))
			if err != nil {
				t.Errorf("flood request: %v", err)
				return
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode == http.StatusServiceUnavailable && res.Header.Get("Retry-After") != "" {
				refused.Add(1)
			}
		})
	}
	wg.Wait()
	t.Logf("%d requests past a cap of %d: %d answered 503 with Retry-After", flood, limit, refused.Load())
	if refused.Load() != flood {
		t.Errorf("%d of %d requests past the cap answered 503 with Retry-After", refused.Load(), flood)
	}
	if res, err := client.Get(url + server.HealthPath); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("health at the cap: %v %v", res, err)
	} else {
		res.Body.Close()
	}
	release()
	held.Wait()
	res, err := client.Post(url+"/block", "application/json", strings.NewReader(`{"name":"x"}`))
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("after the flood: %v %v", res, err)
	}
	res.Body.Close()
}

// allocDuring returns the bytes allocated while f ran.
func allocDuring(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestDecodedBombIs413 posts the body, 8 MiB of {"input":[{},...]}
// (sixteen of them took the model server to 5.2 GB), to a typed endpoint
// decoding protocol.ResponseCreateParams: it is answered 413 and the
// whole exchange allocates a bounded amount, a small multiple of the
// bytes the server read before it stopped. Bodies under the budget, valid
// items and `{}` items, are decoded (200 and 422), and what their
// exchange allocates stays within twice what the budget charged for them.
func TestDecodedBombIs413(t *testing.T) {
	s := server.New(server.Options{Name: "bomb"})
	server.Handle(s, "POST /v1/responses", func(_ context.Context, p protocol.ResponseCreateParams) (echoResp, error) {
		return echoResp{Greeting: fmt.Sprint(len(p.Input.Items))}, nil
	})
	url := start(t, s)
	body := items(`{}`, (server.DefaultMaxBodyBytes-1024)/3)
	var status int
	var answer string
	alloc := allocDuring(func() { status, answer = post(t, url+"/v1/responses", body) })
	t.Logf("%d-byte bomb: %d %s; %.1f MiB allocated", len(body), status, answer, float64(alloc)/(1<<20))
	if status != http.StatusRequestEntityTooLarge {
		t.Fatalf("bomb: %d %.200s; want 413", status, answer)
	}
	if alloc > 32<<20 {
		t.Errorf("the bomb's exchange allocated %d bytes; want under 32 MiB", alloc)
	}

	const budget = 4 << 20
	s2 := server.New(server.Options{Name: "under", MaxDecodedBytes: budget})
	server.Handle(s2, "POST /v1/responses", func(_ context.Context, p protocol.ResponseCreateParams) (echoResp, error) {
		return echoResp{}, nil
	})
	url2 := start(t, s2)
	for _, tc := range []struct {
		item string
		want int
	}{
		{`{"role":"user","content":[{"type":"input_text","text":"What is 1 + 1?"}]}`, http.StatusOK},
		{`{"type":"x"}`, http.StatusUnprocessableEntity}, // no item type of upstream's
	} {
		one := server.Estimate([]byte(tc.item + ","))
		under := items(tc.item, int(budget*9/10/one))
		est := server.Estimate([]byte(under))
		alloc = allocDuring(func() { status, answer = post(t, url2+"/v1/responses", under) })
		t.Logf("%d-byte body of %s items, charged %d: %d; %.2f MiB allocated (%.2f of the charge)",
			len(under), tc.item, est, status, float64(alloc)/(1<<20), float64(alloc)/float64(est))
		if est > budget || status != tc.want {
			t.Fatalf("body under the budget (charged %d of %d): %d %.200s; want %d", est, budget, status, answer, tc.want)
		}
		if alloc > uint64(est)*2 {
			t.Errorf("its exchange allocated %d bytes, more than twice the %d the budget charged", alloc, est)
		}
	}
}

// items is {"input":[item,item,...]} with n items.
func items(item string, n int) string {
	return `{"input":[` + strings.Repeat(item+",", n-1) + item + `]}`
}

// TestSlowReaderIsCutAfterWriteTimeout: a caller that sends a request and
// never reads the (large) answer holds the server only for the write
// timeout; the handler itself may take longer than the timeout.
func TestSlowReaderIsCutAfterWriteTimeout(t *testing.T) {
	const size = 32 << 20
	s := server.New(server.Options{Name: "slowread", WriteTimeout: 300 * time.Millisecond})
	big := server.RawJSON(`"` + strings.Repeat("x", size) + `"`)
	server.Handle(s, "POST /big", func(_ context.Context, _ echoReq) (server.RawJSON, error) {
		time.Sleep(500 * time.Millisecond) // longer than the write timeout: not cut
		return big, nil
	})
	url := start(t, s)
	c := rawConn(t, url)
	defer c.Close()
	if _, err := io.WriteString(c, "POST /big HTTP/1.1\r\nHost: x\r\nContent-Length: 12\r\n\r\n{\"name\":\"x\"}"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // read nothing past the write timeout
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer started: %v", err)
	}
	n, err := io.Copy(io.Discard, res.Body)
	res.Body.Close()
	t.Logf("read %d of %d bytes, then %v", n, len(big), err)
	if res.StatusCode != http.StatusOK || n >= int64(len(big)) {
		t.Fatalf("status %d, %d of %d bytes: want the answer started and cut", res.StatusCode, n, len(big))
	}
}

func TestApplyEnv(t *testing.T) {
	env := map[string]string{
		server.EnvPrefix + "READ_TIMEOUT":            "5s",
		server.EnvPrefix + "MAX_CONNS":               "off",
		server.EnvPrefix + "MAX_CONCURRENT_REQUESTS": "12",
		server.EnvPrefix + "MAX_BODY_BYTES":          " ",
	}
	lookup := testenv.Lookup(env)
	var o server.Options
	if err := server.ApplyEnv(&o, lookup); err != nil {
		t.Fatal(err)
	}
	if o.ReadTimeout != 5*time.Second || o.MaxConns != -1 || o.MaxConcurrentRequests != 12 || o.MaxBodyBytes != 0 {
		t.Fatalf("applied: %+v", o)
	}
	for k, v := range map[string]string{"IDLE_TIMEOUT": "10", "MAX_CONNS": "-3", "MAX_BODY_BYTES": "off", "WRITE_TIMEOUT": "0s"} {
		err := server.ApplyEnv(&server.Options{}, func(key string) (string, bool) { return v, key == server.EnvPrefix+k })
		if err == nil || !strings.Contains(err.Error(), server.EnvPrefix+k) || !strings.Contains(err.Error(), "want") {
			t.Errorf("%s=%s: %v; want an error naming the variable and what it accepts", k, v, err)
		}
	}
	seen := map[string]bool{}
	for _, s := range server.Settings {
		if seen[s.Key] || s.Default == "" || s.Doc == "" {
			t.Errorf("settings row %q: duplicate or incomplete", s.Key)
		}
		seen[s.Key] = true
	}
}

// A BulkBody route takes the body of a whole collection's results (as
// /aggregate_metrics gets it: one entry per rollout, each a few nested
// objects) that the server's own limits refuse; an ordinary route on the
// same server still refuses it, and a bomb still fails on the bulk route.
func TestBulkBodyTakesAWholeRun(t *testing.T) {
	const body, decoded = 64 << 10, 256 << 10 // small limits: a small test body is "a whole run"
	s := server.New(server.Options{Name: "bulk", MaxBodyBytes: body, MaxDecodedBytes: decoded})
	count := func(_ context.Context, req protocol.AggregateMetricsRequest) (echoResp, error) {
		return echoResp{Greeting: fmt.Sprint(len(req.VerifyResponses))}, nil
	}
	server.Handle(s, "POST /bulk", count, server.BulkBody())
	server.Handle(s, "POST /plain", count)
	url := start(t, s)

	entry := `{"reward":1.0,"task_index":7,"rollout_index":0,"response":{"usage":{"input_tokens":12,"output_tokens":30,` +
		`"input_tokens_details":{"cached_tokens":0},"output_tokens_details":{"reasoning_tokens":0}}},"extracted_answer":"42"}`
	n := 2 * decoded / server.Estimate([]byte(entry+",")) // twice the server's own budget
	run := `{"verify_responses":[` + strings.Repeat(entry+",", int(n)-1) + entry + `]}`
	if server.Estimate([]byte(run)) <= decoded || int64(len(run)) > body*server.BulkFactor {
		t.Fatalf("test body: %d bytes charged %d; want a charge over %d and a size under %d", len(run), server.Estimate([]byte(run)), decoded, body*server.BulkFactor)
	}
	if status, answer := post(t, url+"/bulk", run); status != http.StatusOK || !strings.Contains(answer, fmt.Sprintf(`"%d"`, n)) {
		t.Fatalf("bulk route, %d entries: %d %.200s; want 200 counting them", n, status, answer)
	}
	if status, answer := post(t, url+"/plain", run); status != http.StatusRequestEntityTooLarge {
		t.Fatalf("ordinary route, the same body: %d %.200s; want 413", status, answer)
	}
	bomb := `{"verify_responses":[` + strings.Repeat(`{},`, body*server.BulkFactor/3-100) + `{}]}`
	if status, answer := post(t, url+"/bulk", bomb); status != http.StatusRequestEntityTooLarge {
		t.Fatalf("bulk route, %d-byte bomb: %d %.200s; want 413", len(bomb), status, answer)
	}
}
