package environment_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gymlens/gymlens/environment"
	"github.com/gymlens/gymlens/internal/servertest"
	"github.com/gymlens/gymlens/internal/testenv"
	"github.com/gymlens/gymlens/telemetry"
)

// serveInBackground runs Main's body with args and returns the bound
// address, a function that stops it and returns its exit status, and its
// log.
func serveInBackground(t *testing.T, env *environment.Environment, args ...string) (string, func() int, *testenv.Buffer) {
	t.Helper()
	testenv.ClearTelemetry(t)
	telemetry.ResetForTesting()
	t.Cleanup(telemetry.ResetForTesting)
	bound := make(chan net.Addr, 1)
	environment.SetListening(func(a net.Addr) { bound <- a })
	t.Cleanup(func() { environment.SetListening(nil) })
	ctx, cancel := context.WithCancel(context.Background())
	logs := &testenv.Buffer{}
	code := make(chan int, 1)
	go func() { code <- environment.Run(ctx, env, args, logs) }()
	var addr net.Addr
	select {
	case addr = <-bound:
	case c := <-code:
		cancel()
		t.Fatalf("exited %d before listening: %s", c, logs)
	}
	var once sync.Once
	status := -1
	stop := func() int {
		once.Do(func() { cancel(); status = <-code })
		return status
	}
	t.Cleanup(func() { stop() })
	return addr.String(), stop, logs
}

func TestMainServesUntilCancelled(t *testing.T) {
	var calls atomic.Int64
	addr, stop, logs := serveInBackground(t, exactEnv(&calls), "-addr", "127.0.0.1:0", "-name", "exact_prod")
	base := "http://" + addr
	status, raw := servertest.PostRaw(t, base+"/verify", verifyBody(`"expected_answer":"a"`, "a"))
	if status != http.StatusOK || reward(t, raw) != "1" {
		t.Fatalf("verify: %d %s", status, raw)
	}
	// The instance name reaches the cookie.
	res, err := http.Get(base + "/reverify_mode")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if c := res.Header.Get("Set-Cookie"); !strings.HasPrefix(c, "exact_match___exact_prod=") {
		t.Errorf("Set-Cookie %q, want the exact_match___exact_prod cookie", c)
	}
	if code := stop(); code != 0 {
		t.Fatalf("exit status %d after cancel, want 0; log:\n%s", code, logs)
	}
	for _, want := range []string{"msg=serving", "environment=exact_match", "instance=exact_prod", "addr=" + addr, "msg=stopped"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
}

func TestMainFlags(t *testing.T) {
	var calls atomic.Int64
	env := exactEnv(&calls)
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"-h"}, 0, "Usage: exact_match"},
		{[]string{"-bogus"}, 2, "flag provided but not defined"},
		{[]string{"extra"}, 2, "unexpected arguments"},
		{[]string{"-addr", "127.0.0.1:-1"}, 1, "listen"},
	} {
		var out testenv.Buffer
		testenv.ClearTelemetry(t)
		telemetry.ResetForTesting()
		code := environment.Run(context.Background(), env, c.args, &out)
		if code != c.code || !strings.Contains(out.String(), c.says) {
			t.Errorf("%v: exit %d, output %q; want %d saying %q", c.args, code, out.String(), c.code, c.says)
		}
	}
	telemetry.ResetForTesting()
}

func TestListenAndServe(t *testing.T) {
	testenv.ClearTelemetry(t)
	telemetry.ResetForTesting()
	t.Cleanup(telemetry.ResetForTesting)
	bound := make(chan net.Addr, 1)
	environment.SetListening(func(a net.Addr) { bound <- a })
	t.Cleanup(func() { environment.SetListening(nil) })
	var calls atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- exactEnv(&calls).ListenAndServe(ctx, "127.0.0.1:0") }()
	addr := <-bound
	status, _ := servertest.PostRaw(t, "http://"+addr.String()+"/verify", verifyBody(`"expected_answer":"a"`, "b"))
	cancel()
	if err := <-done; err != nil || status != http.StatusOK {
		t.Fatalf("status %d, ListenAndServe: %v", status, err)
	}
}
