package server

import (
	"errors"
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/gymlens/gymlens/contract"
)

// TestRetryAfterForms: both forms of Retry-After, a date past as no wait,
// anything else as not asked.
func TestRetryAfterForms(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		v    string
		want time.Duration
		ok   bool
	}{
		{"1", time.Second, true},
		{" 120 ", 2 * time.Minute, true},
		{"0", 0, true},
		{now.Add(3 * time.Second).Format(http.TimeFormat), 3 * time.Second, true},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0, true},
		{"Friday, 02-Jan-26 03:04:07 GMT", 2 * time.Second, true}, // RFC 850, which HTTP-date allows
		{"", 0, false},
		{"-1", 0, false},
		{"1.5", 0, false},
		{"soon", 0, false},
		{"99999999999", 0, false},
	} {
		got, ok := retryAfter(tc.v, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("retryAfter(%q) = %v, %v; want %v, %v", tc.v, got, ok, tc.want, tc.ok)
		}
	}
}

// TestIdempotentRoutes: the routes upstream's protocol lets a caller send
// again, prefixed or not, and the ones it does not.
func TestIdempotentRoutes(t *testing.T) {
	yes := []string{"/seed_session", "/verify", "/v1/responses", "/v1/chat/completions", "/v1/messages",
		"/training-token-capture/v1/responses", "/openai/v1/chat/completions"}
	no := []string{"/run", "/aggregate_metrics", "/get_weather", "/", "", "/verify/x", "/reverify", "/v1/responsesx"}
	for _, p := range yes {
		if !idempotentPath(p) {
			t.Errorf("%s not idempotent", p)
		}
	}
	for _, p := range no {
		if idempotentPath(p) {
			t.Errorf("%s idempotent", p)
		}
	}
	c := NewClient(ClientOptions{})
	for u, want := range map[string]bool{
		"http://h:1/ng-rollout/a-1/verify":                               true,
		"http://h:1/ng-rollout/a-1/training-token-capture/v1/responses":  true,
		"http://h:1/ng-rollout/a-1/run":                                  false,
		"http://h:1/run?x=/verify":                                       false,
		"http://h:1/verify?x=1":                                          true,
		"http://h:1/ng-rollout/a-1/training-token-capture/v1/messages?q": true,
	} {
		tg, err := c.target(u)
		if err != nil || tg.idempotent != want {
			t.Errorf("target(%s).idempotent = %v (%v), want %v", u, tg.idempotent, err, want)
		}
	}
}

// TestRetryClassesAndWaits: what is sent again and under which reason,
// and that every wait stays within its bounds whatever the jitter.
func TestRetryClassesAndWaits(t *testing.T) {
	p := newRetryPolicy(ClientOptions{Backoff: 100 * time.Millisecond})
	refused := fmt.Errorf("dial: %w", syscall.ECONNREFUSED)
	reset := fmt.Errorf("read: %w", syscall.ECONNRESET)
	h503 := http.Header{"Retry-After": {"2"}}
	for _, tc := range []struct {
		name       string
		reply      Reply
		err        error
		idempotent bool
		again      bool
		reason     string
	}{
		{"refused, not idempotent", Reply{}, refused, false, true, contract.RetryClientOSError},
		{"reset, idempotent", Reply{}, reset, true, true, contract.RetryServerDisconnected},
		{"reset, not idempotent", Reply{}, reset, false, false, ""},
		{"503", Reply{Status: 503, Header: h503}, &StatusError{Status: 503}, false, true, contract.RetryOther},
		{"429 any status", Reply{Status: 429}, nil, false, true, contract.RetryOther},
		{"500", Reply{Status: 500}, &StatusError{Status: 500}, true, false, ""},
		{"200 undecodable", Reply{Status: 200}, errors.New("decode response"), true, false, ""},
		{"other error", Reply{}, errors.New("odd"), true, false, ""},
	} {
		c, again := p.classify(tc.reply, tc.err, tc.idempotent)
		if again != tc.again || c.reason != tc.reason {
			t.Errorf("%s: retry %v reason %q; want %v %q", tc.name, again, c.reason, tc.again, tc.reason)
		}
	}
	for range 1000 {
		if w := p.wait(0, retryCause{after: 2 * time.Second, asked: true}); w < 2*time.Second || w >= 2*time.Second+p.backoff {
			t.Fatalf("wait for Retry-After 2 s: %v", w)
		}
		for resent := range 40 {
			d := min(p.backoff<<min(resent, 16), maxBackoff)
			if w := p.wait(resent, retryCause{}); w < d/2 || w > d {
				t.Fatalf("wait after %d retries: %v, want in [%v, %v]", resent, w, d/2, d)
			}
		}
	}
}
