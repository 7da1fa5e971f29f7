package envserver_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/gymlens/gymlens/internal/servertest"
	"github.com/gymlens/gymlens/server"
	"github.com/gymlens/gymlens/servers/envserver"
)

// TestMain fails the package when a test leaves a server or connection
// goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.DiscardHandler)

// seen is what the fake agent received.
type seen struct {
	Path    string
	Header  http.Header
	Cookies map[string]string
	Body    []byte
}

// fakeAgent answers every request with answer and records it.
type fakeAgent struct {
	mu     sync.Mutex
	got    []seen
	answer func(w http.ResponseWriter, r *http.Request)
	srv    *httptest.Server
}

func newFakeAgent(t *testing.T, answer func(w http.ResponseWriter, r *http.Request)) *fakeAgent {
	t.Helper()
	a := &fakeAgent{answer: answer}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		cookies := map[string]string{}
		for _, c := range r.Cookies() {
			cookies[c.Name] = c.Value
		}
		a.mu.Lock()
		a.got = append(a.got, seen{Path: r.URL.Path, Header: r.Header.Clone(), Cookies: cookies, Body: body})
		a.mu.Unlock()
		a.answer(w, r)
	}))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *fakeAgent) requests() []seen {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.got)
}

// startRelay serves a legacy_agent relay named relay in front of agentURL.
func startRelay(t *testing.T, agentURL string) string {
	t.Helper()
	opts := envserver.ServerOptions("relay")
	opts.Logger = quiet
	s := server.New(opts)
	client := servertest.Client(t)
	if err := envserver.Register(s, envserver.Config{AgentURL: agentURL, AgentName: "agent", Instance: "relay", Logger: quiet}, client); err != nil {
		t.Fatal(err)
	}
	base, _ := servertest.Start(t, s)
	return base
}

// plainClient does not keep cookies, as upstream's collector (a
// DummyCookieJar) does not, and asks for no encoding.
func plainClient(t *testing.T) *http.Client {
	tr := &http.Transport{DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func TestRunRelaysBodyCookiesAndHeadersBothWays(t *testing.T) {
	agent := newFakeAgent(t, func(w http.ResponseWriter, _ *http.Request) {
		h := w.Header()
		h.Add("Set-Cookie", "SimpleAgent___agent=one; Path=/; HttpOnly")
		h.Add("Set-Cookie", "second=two; Path=/")
		h.Set("Traceresponse", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
		h.Set("X-Agent", "yes")
		h.Set("Keep-Alive", "timeout=5")
		h.Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"reward": 1.0,  "x": [1, 2]}`)
	})
	relay := startRelay(t, agent.srv.URL)

	body := []byte(`{"responses_create_params": {"input": "hi"},   "extra": true}`)
	req, err := http.NewRequest(http.MethodPost, relay+"/run", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Custom", "kept")
	req.Header.Add("X-Multi", "a")
	req.Header.Add("X-Multi", "b")
	req.Header.Set("User-Agent", "collector/1")
	req.Header.Set("Keep-Alive", "timeout=9")
	req.Header.Set("Accept-Encoding", "br")
	req.AddCookie(&http.Cookie{Name: "a", Value: "1"})
	req.AddCookie(&http.Cookie{Name: "b", Value: "2"})
	resp, err := plainClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()

	if resp.StatusCode != http.StatusCreated {
		t.Errorf("status %d, want the agent's 201", resp.StatusCode)
	}
	if string(got) != `{"reward": 1.0,  "x": [1, 2]}` {
		t.Errorf("body %q, want the agent's bytes unchanged", got)
	}
	if v := resp.Header.Get("Traceresponse"); v != "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" {
		t.Errorf("traceresponse %q, want the agent's", v)
	}
	if resp.Header.Get("X-Agent") != "yes" || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("agent's headers not passed back: %v", resp.Header)
	}
	if v := resp.Header.Get("Keep-Alive"); v != "" {
		t.Errorf("Keep-Alive %q passed back; the relay drops it", v)
	}
	setCookies := resp.Header.Values("Set-Cookie")
	for _, want := range []string{"SimpleAgent___agent=one; Path=/; HttpOnly", "second=two; Path=/"} {
		if !slices.Contains(setCookies, want) {
			t.Errorf("Set-Cookie %q of the agent missing: %q", want, setCookies)
		}
	}
	if !slices.ContainsFunc(setCookies, func(s string) bool { return strings.HasPrefix(s, "LegacyAgentEnvironmentServer___relay=") }) {
		t.Errorf("the relay's own session cookie missing: %q", setCookies)
	}

	reqs := agent.requests()
	if len(reqs) != 1 || reqs[0].Path != "/run" {
		t.Fatalf("agent got %+v, want one /run", reqs)
	}
	in := reqs[0]
	if !bytes.Equal(in.Body, body) {
		t.Errorf("agent got body %q, want %q", in.Body, body)
	}
	if in.Cookies["a"] != "1" || in.Cookies["b"] != "2" || len(in.Cookies) != 2 {
		t.Errorf("agent got cookies %v, want a=1 b=2", in.Cookies)
	}
	if n := len(in.Header.Values("Cookie")); n != 1 {
		t.Errorf("agent got %d Cookie headers, want 1", n)
	}
	if in.Header.Get("X-Custom") != "kept" || !slices.Equal(in.Header.Values("X-Multi"), []string{"b"}) || in.Header.Get("User-Agent") != "collector/1" {
		t.Errorf("caller's headers not relayed: %v", in.Header)
	}
	if v := in.Header.Get("Keep-Alive"); v != "" {
		t.Errorf("Keep-Alive %q relayed; the relay drops it", v)
	}
	if v := in.Header.Get("Accept-Encoding"); v == "br" {
		t.Errorf("the caller's Accept-Encoding was relayed; the relay's client asks for its own")
	}
	if in.Header.Get("Content-Type") != "application/json" {
		t.Errorf("Content-Type %q", in.Header.Get("Content-Type"))
	}
}

// A rollout takes as long as it takes: the relay's write timeout starts
// with its answer, not when /run came in (it once cut every rollout longer
// than the timeout, 30 s by default, with an EOF).
func TestRunOutlastsTheWriteTimeout(t *testing.T) {
	const writeTimeout = 200 * time.Millisecond
	agent := newFakeAgent(t, func(w http.ResponseWriter, _ *http.Request) {
		time.Sleep(3 * writeTimeout) // a rollout longer than the timeout
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"reward": 1.0}`)
	})
	opts := envserver.ServerOptions("relay")
	opts.Logger, opts.WriteTimeout = quiet, writeTimeout
	s := server.New(opts)
	if err := envserver.Register(s, envserver.Config{AgentURL: agent.srv.URL, AgentName: "agent", Instance: "relay", Logger: quiet}, servertest.Client(t)); err != nil {
		t.Fatal(err)
	}
	relay, _ := servertest.Start(t, s)
	status, got := servertest.Post(t, plainClient(t), relay+"/run", []byte(`{}`))
	if status != http.StatusOK || string(got) != `{"reward": 1.0}` {
		t.Errorf("a rollout longer than the write timeout: relay answered %d %s", status, got)
	}
}

func TestRunPassesAgentErrorsOn(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
	}{
		{http.StatusInternalServerError, `"ValueError('boom')"`},
		{http.StatusUnprocessableEntity, `{"detail":[{"type":"missing","loc":["body","responses_create_params"],"msg":"Field required","input":{}}]}`},
		{http.StatusServiceUnavailable, `busy`},
	} {
		agent := newFakeAgent(t, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(tc.status)
			_, _ = io.WriteString(w, tc.body)
		})
		relay := startRelay(t, agent.srv.URL)
		status, got := servertest.Post(t, plainClient(t), relay+"/run", []byte(`{}`))
		if status != tc.status || string(got) != tc.body {
			t.Errorf("agent %d %s: relay answered %d %s", tc.status, tc.body, status, got)
		}
	}
}

func TestRunWithTheAgentDownIs500(t *testing.T) {
	dead := "http://" + servertest.FreeAddr(t)
	relay := startRelay(t, dead)
	status, got := servertest.Post(t, plainClient(t), relay+"/run", []byte(`{}`))
	var msg string
	if status != http.StatusInternalServerError || json.Unmarshal(got, &msg) != nil || !strings.Contains(msg, "/run") {
		t.Errorf("agent down: %d %s, want 500 with a JSON string naming the call", status, got)
	}
}

func TestAggregateMetricsChecksForwardsAndAnswersUpstreamsKeys(t *testing.T) {
	agent := newFakeAgent(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"agent_metrics":{"mean/reward":0.5},"key_metrics":{"mean/reward":0.5},"group_level_metrics":[{"k":1}],"not_upstreams":1}`)
	})
	relay := startRelay(t, agent.srv.URL)
	c := plainClient(t)

	for _, tc := range []struct{ body, wantType string }{
		{`{}`, "missing"},
		{`{"verify_responses": {}}`, "list_type"},
		{`{"verify_responses": [1]}`, "dict_type"},
		{`[]`, "model_attributes_type"},
		{`{`, "json_invalid"},
	} {
		status, got := servertest.Post(t, c, relay+"/aggregate_metrics", []byte(tc.body))
		if status != http.StatusUnprocessableEntity || !strings.Contains(string(got), `"type":"`+tc.wantType+`"`) {
			t.Errorf("%s: %d %s, want 422 %s", tc.body, status, got, tc.wantType)
		}
	}
	if n := len(agent.requests()); n != 0 {
		t.Fatalf("invalid bodies reached the agent %d times", n)
	}

	status, got := servertest.Post(t, c, relay+"/aggregate_metrics", []byte(`{"verify_responses":[{"reward":1,"_ng_task_index":0}],"other":1}`))
	if status != http.StatusOK {
		t.Fatalf("%d %s", status, got)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(got, &m); err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if want := []string{"agent_metrics", "group_level_metrics", "key_metrics", "perf_summary", "repeat_level_metrics"}; !slices.Equal(keys, want) {
		t.Errorf("keys %v, want %v", keys, want)
	}
	if string(m["perf_summary"]) != "null" || string(m["repeat_level_metrics"]) != "[]" || string(m["agent_metrics"]) != `{"mean/reward":0.5}` {
		t.Errorf("answer %s", got)
	}
	reqs := agent.requests()
	if len(reqs) != 1 || reqs[0].Path != "/aggregate_metrics" || string(reqs[0].Body) != `{"verify_responses":[{"reward":1,"_ng_task_index":0}]}` {
		t.Errorf("agent got %+v", reqs)
	}
}

func TestAggregateMetricsAgentFailureIs500NamingTheRelay(t *testing.T) {
	agent := newFakeAgent(t, func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusUnprocessableEntity)
		_, _ = io.WriteString(w, `{"detail":"it's bad"}`)
	})
	relay := startRelay(t, agent.srv.URL)
	status, got := servertest.Post(t, plainClient(t), relay+"/aggregate_metrics", []byte(`{"verify_responses":[]}`))
	var msg string
	if err := json.Unmarshal(got, &msg); err != nil {
		t.Fatalf("%d %s: %v", status, got, err)
	}
	want := `Hit an exception in LegacyAgentEnvironmentServer___relay calling an inner server: b'{"detail":"it\'s bad"}'`
	if status != http.StatusInternalServerError || msg != want {
		t.Errorf("got %d %q\nwant 500 %q", status, msg, want)
	}
}

func TestConfigRules(t *testing.T) {
	one, neg, pos := 1, -1.0, 2.5
	zero := 0
	for _, tc := range []struct {
		name string
		cfg  envserver.Config
		want string // "" for valid
	}{
		{"defaults", envserver.Defaults(), ""},
		{"limits", envserver.Config{MaxConcurrentEpisodes: &one, QueueTimeoutSeconds: &pos}, ""},
		{"queue needed", envserver.Config{MaxConcurrentEpisodes: &one}, "queue_timeout_seconds is required"},
		{"zero episodes", envserver.Config{MaxConcurrentEpisodes: &zero, QueueTimeoutSeconds: &pos}, "max_concurrent_episodes: want an integer above 0"},
		{"negative cleanup", envserver.Config{CleanupTimeoutSeconds: &neg}, "cleanup_timeout_seconds: want a number above 0"},
		{"bad ref", envserver.Config{AgentServer: map[string]any{"name": "x"}}, `agent_server: want a reference {type: responses_api_agents`},
	} {
		err := tc.cfg.Validate()
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	s := server.New(envserver.ServerOptions("r"))
	if err := envserver.Register(s, envserver.Defaults(), nil); err == nil || !strings.Contains(err.Error(), "agent_server: required") {
		t.Errorf("Register without an agent: %v", err)
	}
}

func TestRelayedHeader(t *testing.T) {
	for _, h := range []string{"Connection", "content-encoding", "Content-Length", "Cookie", "HOST", "Keep-Alive", "Transfer-Encoding", "Upgrade", "Accept-Encoding"} {
		if envserver.RelayedHeader(h) {
			t.Errorf("%s relayed", h)
		}
	}
	for _, h := range []string{"Traceresponse", "Traceparent", "Set-Cookie", "Content-Type", "X-NeMo-Gym-Session-Token", "User-Agent"} {
		if !envserver.RelayedHeader(h) {
			t.Errorf("%s dropped", h)
		}
	}
}
