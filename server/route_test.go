package server_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"

	"github.com/gymlens/gymlens/internal/servertest"
	"github.com/gymlens/gymlens/server"
)

type idResp struct {
	Rollout string `json:"rollout"`
	Session string `json:"session"`
	Path    string `json:"path"`
}

func newIDServer(t *testing.T, opts server.Options) string {
	t.Helper()
	s := server.New(opts)
	server.Handle(s, "POST /verify", func(ctx context.Context, _ map[string]any) (idResp, error) {
		return idResp{Rollout: server.RolloutID(ctx), Session: server.SessionID(ctx)}, nil
	})
	server.Handle(s, "POST /v1/responses", func(ctx context.Context, _ map[string]any) (idResp, error) {
		return idResp{Rollout: server.RolloutID(ctx)}, nil
	})
	return start(t, s)
}

func TestLivenessAndNotFound(t *testing.T) {
	base := newIDServer(t, server.Options{Name: "live"})
	for _, path := range []string{"/", "/health"} {
		status, body := get(t, base+path)
		if status != 200 || body != `{"status":"ok"}` {
			t.Errorf("GET %s: %d %s", path, status, body)
		}
	}
	for _, path := range []string{"/nope", "/verify/x"} {
		status, body := get(t, base+path)
		if status != 404 || strings.TrimSpace(body) != `{"detail":"Not Found"}` {
			t.Errorf("GET %s: %d %s; want 404 {\"detail\":\"Not Found\"}", path, status, body)
		}
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func TestRolloutPrefixStripped(t *testing.T) {
	res := newIDServer(t, server.Options{Name: "res", RolloutPrefix: server.PrefixResources})
	mod := newIDServer(t, server.Options{Name: "mod", RolloutPrefix: server.PrefixModel})
	plain := newIDServer(t, server.Options{Name: "plain"})
	cases := []struct {
		base, path string
		status     int
		rollout    string
	}{
		{res, "/verify", 200, ""},
		{res, "/ng-rollout/3-0/verify", 200, "3-0"},
		{res, "/ng-rollout/a.b_c-1/verify", 200, "a.b_c-1"},
		{res, "/ng-rollout/-bad/verify", 404, ""},                       // not a rollout id: not stripped
		{res, "/ng-rollout/3-0", 404, ""},                               // no rest
		{res, "/ng-rollout/3-0/training-token-capture/verify", 404, ""}, // no capture form on resources
		{mod, "/ng-rollout/7-2/v1/responses", 200, "7-2"},
		{mod, "/ng-rollout/7-2/training-token-capture/v1/responses", 200, "7-2"},
		{plain, "/ng-rollout/3-0/verify", 404, ""},
	}
	for _, c := range cases {
		status, body := post(t, c.base+c.path, `{}`)
		if status != c.status {
			t.Errorf("%s: %d %s, want %d", c.path, status, body, c.status)
			continue
		}
		if status == 200 && !strings.Contains(body, `"rollout":"`+c.rollout+`"`) {
			t.Errorf("%s: %s, want rollout %q", c.path, body, c.rollout)
		}
		if status != 200 {
			servertest.CheckErrorBody(t, status, []byte(body))
		}
	}
}

func TestSessionCookieOnEveryResponse(t *testing.T) {
	const name = "Counter___counter"
	base := newIDServer(t, server.Options{Name: "counter", SessionCookie: name, RolloutPrefix: server.PrefixResources})
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	var first string
	for i, path := range []string{"/verify", "/ng-rollout/1-0/verify", "/nope", "/"} {
		method := http.MethodPost
		if path == "/" {
			method = http.MethodGet
		}
		req, _ := http.NewRequest(method, base+path, strings.NewReader(`{}`))
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		var got *http.Cookie
		for _, ck := range res.Cookies() {
			if ck.Name == name {
				got = ck
			}
		}
		if got == nil {
			t.Fatalf("%s: no Set-Cookie %s (status %d)", path, name, res.StatusCode)
		}
		if got.Path != "/" || got.Domain != "" || got.Secure || !got.HttpOnly || got.MaxAge != 1209600 || got.SameSite != http.SameSiteLaxMode {
			t.Errorf("%s: cookie attributes %+v", path, got)
		}
		if i == 0 {
			first = got.Value
		} else if got.Value != first {
			t.Errorf("%s: session %q changed from %q although the cookie was sent", path, got.Value, first)
		}
	}
	// Without the cookie a new session starts; a forged value is replaced.
	for _, cookie := range []string{"", name + "=not-a-session-id"} {
		req, _ := http.NewRequest(http.MethodPost, base+"/verify", strings.NewReader(`{}`))
		if cookie != "" {
			req.Header.Set("Cookie", cookie)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if len(res.Cookies()) != 1 || res.Cookies()[0].Value == first || strings.Contains(string(b), first) {
			t.Errorf("cookie %q: got %v and %s; want a fresh session", cookie, res.Cookies(), b)
		}
	}
}
