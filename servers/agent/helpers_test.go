package agent_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/internal/servertest"
	"github.com/gymlens/gymlens/server"
	"github.com/gymlens/gymlens/servers/agent"
)

// TestMain fails the package when a test leaves a server, client
// connection or telemetry goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// quiet drops the logs of the test servers.
var quiet = slog.New(slog.DiscardHandler)

// request is one request a fake peer received.
type request struct {
	Peer    string // "model" or "resources"
	Path    string // as routed (the resources fake strips a rollout prefix)
	Sent    string // the path as it came on the wire, prefix included
	Body    []byte
	Cookies map[string]string
	Baggage string
}

func (r request) String() string { return r.Peer + " " + r.Path }

// requestLog keeps, in order, the requests both fake peers received: a
// rollout's calls are sequential, so the log is their exact sequence.
type requestLog struct {
	mu   sync.Mutex
	reqs []request
}

func (l *requestLog) add(peer string, r *http.Request) request {
	body, _ := io.ReadAll(r.Body)
	cookies := map[string]string{}
	for _, c := range r.Cookies() {
		cookies[c.Name] = c.Value
	}
	sent, _, _ := strings.Cut(r.RequestURI, "?")
	rec := request{Peer: peer, Path: r.URL.Path, Sent: sent, Body: body, Cookies: cookies, Baggage: r.Header.Get("Baggage")}
	l.mu.Lock()
	l.reqs = append(l.reqs, rec)
	l.mu.Unlock()
	return rec
}

// reset forgets every request.
func (l *requestLog) reset() {
	l.mu.Lock()
	l.reqs = nil
	l.mu.Unlock()
}

func (l *requestLog) all() []request {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]request(nil), l.reqs...)
}

// sequence lists the requests as "peer path".
func (l *requestLog) sequence() []string {
	var out []string
	for _, r := range l.all() {
		out = append(out, r.String())
	}
	return out
}

// count returns how many requests peer received on path.
func (l *requestLog) count(peer, path string) int {
	n := 0
	for _, r := range l.all() {
		if r.Peer == peer && r.Path == path {
			n++
		}
	}
	return n
}

// to returns the requests peer received on path, in order.
func (l *requestLog) to(peer, path string) []request {
	var out []request
	for _, r := range l.all() {
		if r.Peer == peer && r.Path == path {
			out = append(out, r)
		}
	}
	return out
}

// modelAnswer answers the n-th model call (from 0) given its body: the
// status and the raw body.
type modelAnswer func(n int, body []byte) (int, string)

// script answers the n-th call with turns[n], and the last turn after.
func script(turns ...string) modelAnswer {
	return func(n int, _ []byte) (int, string) {
		return http.StatusOK, turns[min(n, len(turns)-1)]
	}
}

// resourcesOptions change the fake resources server's answers.
type resourcesOptions struct {
	seedStatus, verifyStatus, aggregateStatus int
	// verifyBody, when set, replaces the verify answer.
	verifyBody string
	// seedCookie, when set, is a second cookie the seed answer sets,
	// besides res=seed.
	seedCookie *http.Cookie
}

// aggregateAnswer is the fake resources server's /aggregate_metrics
// answer; "extra" is a member upstream's AggregateMetrics does not know.
const aggregateAnswer = `{"group_level_metrics":[{"task":0,"mean/reward":1}],"agent_metrics":{"mean/reward":0.5},"key_metrics":{"mean/reward":0.5},"extra":1}`

// fixture is an agent between a fake model and a fake resources server,
// each a server.Server on its own loopback port.
type fixture struct {
	log                              *requestLog
	agentURL, modelURL, resourcesURL string
	stop                             func()
}

// newFixture starts the fakes and an agent configured by cfg (whose
// URLs it fills in); the agent's instance name is "test".
func newFixture(t testing.TB, answer modelAnswer, ro resourcesOptions, cfg agent.Config) *fixture {
	t.Helper()
	return startFixture(t, answer, ro, cfg, 0)
}

// startFixture is newFixture with the agent's body limit (0 for the
// runtime's default).
func startFixture(t testing.TB, answer modelAnswer, ro resourcesOptions, cfg agent.Config, maxBody int64) *fixture {
	t.Helper()
	f := &fixture{log: &requestLog{}}
	var stops []func()

	ms := server.New(server.Options{Name: "fake_model", Type: contract.ServerTypeModel, Logger: quiet})
	var mu sync.Mutex
	calls := 0
	modelHandler := func(w http.ResponseWriter, r *http.Request) {
		rec := f.log.add("model", r)
		mu.Lock()
		n := calls
		calls++
		mu.Unlock()
		status, body := answer(n, rec.Body)
		http.SetCookie(w, &http.Cookie{Name: "mdl", Value: fmt.Sprintf("m%d", n+1), Path: "/"})
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
	for _, p := range []string{"POST /v1/responses", "POST /ng-rollout/{id}/v1/responses",
		"POST /ng-rollout/{id}/training-token-capture/v1/responses"} {
		ms.HandleFunc(p, modelHandler)
	}
	base, stop := servertest.Start(t, ms)
	f.modelURL, stops = base, append(stops, stop)

	// The resources fake strips the rollout prefix, as resources servers
	// do; the model fake routes its prefixed forms itself.
	rs := server.New(server.Options{Name: "fake_resources", Type: contract.ServerTypeResources, Logger: quiet,
		RolloutPrefix: server.PrefixResources})
	tools := 0
	reply := func(w http.ResponseWriter, cookie string, status int, body string) {
		http.SetCookie(w, &http.Cookie{Name: "res", Value: cookie, Path: "/"})
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(cmpOr(status, http.StatusOK))
		_, _ = io.WriteString(w, body)
	}
	rs.HandleFunc("POST /seed_session", func(w http.ResponseWriter, r *http.Request) {
		f.log.add("resources", r)
		if ro.seedCookie != nil {
			http.SetCookie(w, ro.seedCookie)
		}
		reply(w, "seed", ro.seedStatus, `{}`)
	})
	rs.HandleFunc("POST /verify", func(w http.ResponseWriter, r *http.Request) {
		rec := f.log.add("resources", r)
		if ro.verifyStatus != 0 || ro.verifyBody != "" {
			reply(w, "verify", ro.verifyStatus, cmpOr(ro.verifyBody, `"verifier raised"`))
			return
		}
		// Echo the request, with a reward and a member of the verifier's.
		var echo map[string]json.RawMessage
		if err := json.Unmarshal(rec.Body, &echo); err != nil {
			reply(w, "verify", http.StatusUnprocessableEntity, `{"detail":"not an object"}`)
			return
		}
		echo["reward"] = json.RawMessage(`1.0`)
		echo["checked_by"] = json.RawMessage(`"fake"`)
		out, _ := json.Marshal(echo)
		reply(w, "verify", 0, string(out))
	})
	rs.HandleFunc("POST /aggregate_metrics", func(w http.ResponseWriter, r *http.Request) {
		f.log.add("resources", r)
		reply(w, "aggregate", ro.aggregateStatus, aggregateAnswer)
	})
	rs.HandleFunc("POST /{tool}", func(w http.ResponseWriter, r *http.Request) {
		rec := f.log.add("resources", r)
		mu.Lock()
		tools++
		cookie := fmt.Sprintf("tool%d", tools)
		mu.Unlock()
		switch r.PathValue("tool") {
		case "get_weather":
			var args struct{ City string }
			_ = json.Unmarshal(rec.Body, &args)
			reply(w, cookie, 0, fmt.Sprintf(`{"city": %q, "weather": "sunny"}`, args.City))
		case "explode":
			reply(w, cookie, http.StatusInternalServerError, "boom\n")
		case "remember":
			// Sets the cookie the arguments name, besides res.
			var args struct{ Name, Value string }
			_ = json.Unmarshal(rec.Body, &args)
			http.SetCookie(w, &http.Cookie{Name: args.Name, Value: args.Value, Path: "/"})
			reply(w, cookie, 0, `{"remembered": true}`)
		default:
			reply(w, cookie, http.StatusNotFound, `{"detail":"Not Found"}`)
		}
	})
	base, stop = servertest.Start(t, rs)
	f.resourcesURL, stops = base, append(stops, stop)

	if cfg.ModelURL == "" {
		cfg.ModelURL = f.modelURL
	}
	if cfg.ResourcesURL == "" {
		cfg.ResourcesURL = f.resourcesURL
	}
	opts := agent.ServerOptions("test")
	opts.Name, opts.Type, opts.Logger, opts.MaxBodyBytes = "test", contract.ServerTypeAgent, quiet, maxBody
	as := server.New(opts)
	if err := agent.Register(as, cfg, servertest.Client(t)); err != nil {
		t.Fatal(err)
	}
	base, stop = servertest.Start(t, as)
	f.agentURL, stops = base, append(stops, stop)
	f.stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	return f
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// answer is an HTTP answer of the agent.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// post sends body to url with the cookies and returns the answer.
func post(t *testing.T, url, body string, cookies ...*http.Cookie) answer {
	t.Helper()
	return postHeader(t, url, body, nil, cookies...)
}

// postHeader is post with extra request headers.
func postHeader(t *testing.T, url, body string, header http.Header, cookies ...*http.Cookie) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	for _, c := range cookies {
		req.AddCookie(c)
	}
	c := &http.Client{Transport: &http.Transport{}}
	defer c.CloseIdleConnections()
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{status: res.StatusCode, header: res.Header, body: raw}
}

// run posts a row to /run and fails the test unless it answers 200.
func (f *fixture) run(t *testing.T, row string, cookies ...*http.Cookie) (map[string]any, answer) {
	t.Helper()
	a := post(t, f.agentURL+"/run", row, cookies...)
	if a.status != http.StatusOK {
		t.Fatalf("POST /run: %d %s", a.status, a.body)
	}
	return object(t, a.body), a
}

// object decodes a JSON object generically (numbers as json.Number).
func object(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("not a JSON object: %v: %s", err, raw)
	}
	return m
}

// value decodes any JSON value generically.
func value(t *testing.T, raw string) any {
	t.Helper()
	var v any
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("not JSON: %v: %s", err, raw)
	}
	return v
}

// sameJSON fails the test unless got and want are the same JSON value.
func sameJSON(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(normal(t, got), normal(t, want)) {
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(want)
		t.Errorf("%s:\n got %s\nwant %s", what, g, w)
	}
}

// normal re-decodes v so that numbers compare by value (1 and 1.0 alike).
func normal(t *testing.T, v any) any {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// Model answers, as raw JSON.

func response(id string, output ...string) string {
	return `{"id":"` + id + `","object":"response","created_at":1767225600,"model":"fake-model",` +
		`"output":[` + strings.Join(output, ",") + `],"parallel_tool_calls":true,"tool_choice":"auto","tools":[],"status":"completed"}`
}

// withMember adds a member to a raw JSON object.
func withMember(obj, key, raw string) string {
	return strings.TrimSuffix(obj, "}") + `,"` + key + `":` + raw + `}`
}

func functionCall(callID, name, arguments string) string {
	args, _ := json.Marshal(arguments)
	return `{"type":"function_call","id":"fc_` + callID + `","call_id":"` + callID + `","name":"` + name +
		`","arguments":` + string(args) + `,"status":"completed"}`
}

func message(id, text string) string {
	t, _ := json.Marshal(text)
	return `{"type":"message","id":"` + id + `","role":"assistant","status":"completed",` +
		`"content":[{"type":"output_text","text":` + string(t) + `,"annotations":[]}]}`
}

func reasoning(id string) string {
	return `{"type":"reasoning","id":"` + id + `","summary":[{"type":"summary_text","text":"thinking"}]}`
}

func usage(in int, cached string, out int, reasoningTokens string) string {
	return fmt.Sprintf(`{"input_tokens":%d,"input_tokens_details":{"cached_tokens":%s},"output_tokens":%d,`+
		`"output_tokens_details":{"reasoning_tokens":%s},"total_tokens":%d}`, in, cached, out, reasoningTokens, in+out)
}

// weatherTool is a function tool as a dataset row declares it.
const weatherTool = `{"type":"function","name":"get_weather","description":"Weather of a city",` +
	`"parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]},"strict":null}`

// weatherRow is a dataset row with task fields of every kind: an
// unknown object, a null, and the collector's bookkeeping.
const weatherRow = `{"responses_create_params":{"input":"What is the weather in SF?","tools":[` + weatherTool + `],"temperature":0.5},` +
	`"expected_answer":"sunny","meta":{"k":[1,2.5,"x"],"deep":{"n":null}},"nullable":null,` +
	`"_ng_task_index":3,"_ng_rollout_index":1,"agent_ref":{"type":"responses_api_agents","name":"test"}}`

// minimalRow is a row with nothing but a string input.
const minimalRow = `{"responses_create_params":{"input":"hi"}}`
