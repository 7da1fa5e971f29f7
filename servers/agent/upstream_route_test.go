package agent_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gymlens/gymlens/internal/servertest"
	"github.com/gymlens/gymlens/internal/upstream"
	"github.com/gymlens/gymlens/server"
	"github.com/gymlens/gymlens/servers/agent"
)

// upstreamAgentRoutesProgram answers, for each request target on stdin,
// what nemo-gym 0.7.0's agent app routes a POST of it to. The route list is
// upstream's own: SimpleResponsesAPIAgent.setup_webserver
// (base_responses_api_agent.py:231-265) run on a stand-in self with dummy
// handlers. Each route is then served by a marker endpoint under the same
// path and methods (Starlette's Route compiles a path as FastAPI's APIRoute
// does), through Starlette's Router with FastAPI's redirect_slashes, on
// scope["path"] as uvicorn makes it (urllib.parse.unquote of the target).
// The answer is [status, route path, rollout id, decoded path].
const upstreamAgentRoutesProgram = `
import asyncio, json, sys
from types import SimpleNamespace
from urllib.parse import unquote
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent
from starlette.routing import Route, Router
from starlette.responses import JSONResponse

async def dummy(*a, **k):
    return None

stub = SimpleNamespace(config=SimpleNamespace(name="agent"), setup_session_middleware=lambda app: None,
    responses=dummy, run=dummy, rollout_id_from_run=lambda body: None, aggregate_metrics=dummy,
    seed_agent_session=dummy, close_agent_session=dummy)
app = SimpleResponsesAPIAgent.setup_webserver(stub)

def marker(path):
    async def endpoint(request):
        return JSONResponse([path, request.path_params.get("rollout_id", "")])
    return endpoint

router = Router(routes=[Route(r.path, marker(r.path), methods=list(r.methods)) for r in app.routes],
    redirect_slashes=True)

async def main():
    out = []
    for target in json.load(sys.stdin):
        path = unquote(target)
        sent = []
        async def send(message):
            sent.append(message)
        async def receive():
            return {"type": "http.request", "body": b"", "more_body": False}
        scope = {"type": "http", "method": "POST", "path": path, "raw_path": target.encode(), "root_path": "",
            "query_string": b"", "headers": [(b"host", b"h")], "scheme": "http", "server": ("h", 80)}
        await router(scope, receive, send)
        status = sent[0]["status"]
        route, rid = json.loads(sent[1]["body"]) if status == 200 else ["", ""]
        out.append([status, route, rid, path])
    json.dump(out, sys.stdout)

asyncio.run(main())
`

// agentRouteCorpus returns request targets (percent-encoded where a
// request line needs it) around the agent's /ng-rollout/<id>/ routes: the
// product of odd prefixes, ids, token-capture segments and ends, the
// unprefixed routes' odd forms, then random paths built from the pieces
// that decide a match.
func agentRouteCorpus() []string {
	prefixes := []string{"/ng-rollout/", "//ng-rollout/", "/ng-rollout%2F", "/ng%2Drollout/", "/./ng-rollout/"}
	ids := []string{"", "a", "7-2", "a.b_c-1", ".", "..", "...", "a.", "a%2Fb", "a%2fb", "a%20b", "a%0Ab", "a%0A",
		"%0A", "%C3%A9", "a~b", "a+b", "a%25b", "a:b", "a@b", "a;b", "a%3Fb", "a%23b", "a%5Cb", "%2E", "%2E%2E",
		"training-token-capture", "training-token-capture%2F", "ng-rollout", "v1", strings.Repeat("x", 300)}
	captures := []string{"", "/training-token-capture", "/training-token-capture%2F", "//training-token-capture",
		"/training-token-capture/training-token-capture", "/Training-Token-Capture"}
	ends := []string{"", "/", "/v1/responses", "/v1/responses/", "/v1/responses//", "/v1/responses%0A",
		"/v1/responses%0A%0A", "/v1%2Fresponses", "/./v1/responses", "/../v1/responses", "//v1/responses",
		"/v1/responses/.", "/run", "/v1/response"}
	var out []string
	for _, p := range prefixes {
		for _, id := range ids {
			for _, c := range captures {
				for _, e := range ends {
					out = append(out, p+id+c+e)
				}
			}
		}
	}
	for _, route := range []string{"/run", "/v1/responses", "/aggregate_metrics"} {
		for _, form := range []string{"%s", "%s/", "/%s", "/.%s", "%s%%0A", "%s%%0A%%0A", "/x/..%s", "%s/.", "%s%%2F"} {
			out = append(out, fmt.Sprintf(form, route), strings.Replace(fmt.Sprintf(form, route), "/", "%2F", 1))
		}
	}
	out = append(out, "/v1%2Fresponses", "/%2E/run", "/%2E%2E/run", "/ng-rollout", "/ng-rollout/", "/ng-rollout%0A")
	pieces := []string{"/", "/", "/", "ng-rollout", "training-token-capture", "v1", "responses", "run", "a", ".", "..",
		"%2F", "%0A", "%2E", "%20", "%C3%A9", "-"}
	r := rand.New(rand.NewPCG(36, 5))
	for range 3000 {
		var b strings.Builder
		b.WriteString("/ng-rollout/")
		for range r.IntN(10) {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		out = append(out, b.String())
	}
	return out
}

// routed is where a POST of a path went: the status, and for a request a
// route's handler took, the route's path and the rollout id.
type routed struct {
	Status int
	Route  string
	ID     string
}

// rawPoster sends POSTs with request targets as they are, over one
// keep-alive connection, reopened after an answer that closes it.
type rawPoster struct {
	addr string
	conn net.Conn
	br   *bufio.Reader
}

func (p *rawPoster) post(t *testing.T, target string) *http.Response {
	t.Helper()
	if p.conn == nil {
		c, err := net.Dial("tcp", p.addr)
		if err != nil {
			t.Fatalf("dial the agent: %v", err)
		}
		p.conn, p.br = c, bufio.NewReader(c)
	}
	if _, err := io.WriteString(p.conn, "POST "+target+" HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n"); err != nil {
		t.Fatalf("send %q: %v", target, err)
	}
	resp, err := http.ReadResponse(p.br, nil)
	if err != nil {
		t.Fatalf("answer to %q: %v", target, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.Close {
		p.close()
	}
	return resp
}

func (p *rawPoster) close() {
	if p.conn != nil {
		_ = p.conn.Close()
		p.conn = nil
	}
}

// TestUpstreamAgentRolloutRoutes: on every path of the corpus, a real
// gymlens agent server routes a POST where nemo-gym 0.7.0's agent app does:
// to the same route with the same rollout id, or to none (404). The
// agent's route handlers are fronted by a marker (the server's Middleware)
// that answers with the route and id instead of running them. Where
// upstream's router redirects (a trailing slash off a route) gymlens
// answers 404; it never redirects a path upstream does not route.
func TestUpstreamAgentRolloutRoutes(t *testing.T) {
	corpus := agentRouteCorpus()
	in, err := json.Marshal(corpus)
	if err != nil {
		t.Fatal(err)
	}
	var want [][4]any
	if err := json.Unmarshal(upstream.Run(t, 2*time.Minute, upstreamAgentRoutesProgram, in), &want); err != nil {
		t.Fatal(err)
	}
	if len(want) != len(corpus) {
		t.Fatalf("upstream answered %d paths of %d", len(want), len(corpus))
	}

	opts := agent.ServerOptions("routes")
	opts.Logger = quiet
	opts.Middleware = func(http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Route", strings.TrimPrefix(r.Pattern, "POST "))
			w.Header().Set("X-Rollout-Id", url.PathEscape(r.PathValue("rollout_id")))
		})
	}
	s := server.New(opts)
	if err := agent.Register(s, agent.Config{ModelURL: "http://127.0.0.1:1", ResourcesURL: "http://127.0.0.1:1"},
		servertest.Client(t)); err != nil {
		t.Fatal(err)
	}
	base, stop := servertest.Start(t, s)
	p := &rawPoster{addr: strings.TrimPrefix(base, "http://")}
	defer stop()
	defer p.close()

	counts := map[string]int{}
	for i, target := range corpus {
		u, err := url.ParseRequestURI(target)
		if err != nil || u.Path != want[i][3].(string) {
			// The two HTTP layers decode the target differently (invalid
			// UTF-8 after decoding): not the routes' rule.
			counts["decoded differently"]++
			continue
		}
		up := routed{Status: int(want[i][0].(float64)), Route: want[i][1].(string), ID: want[i][2].(string)}
		resp := p.post(t, target)
		got := routed{Status: resp.StatusCode}
		if route := resp.Header.Get("X-Route"); route != "" {
			got.Status, got.Route = http.StatusOK, route
			if got.ID, err = url.PathUnescape(resp.Header.Get("X-Rollout-Id")); err != nil {
				t.Fatal(err)
			}
		}
		switch {
		case resp.StatusCode == http.StatusBadRequest && got.Route == "":
			counts["refused by net/http"]++
			continue
		case up.Status == http.StatusTemporaryRedirect:
			counts["upstream redirects"]++
			if got.Status != http.StatusNotFound {
				t.Errorf("%q (decoded %q): upstream redirects, gymlens %+v", target, u.Path, got)
			}
			continue
		}
		counts[fmt.Sprintf("status %d", up.Status)]++
		if up.Route != "" {
			counts["routed "+up.Route]++
		}
		if got != up {
			counts["differ"]++
			if counts["differ"] <= 20 {
				t.Errorf("%q (decoded %q): gymlens %+v, upstream %+v", target, u.Path, got, up)
			}
		}
	}
	t.Logf("%d targets: %v", len(corpus), counts)
	for _, route := range []string{agent.RouteRolloutResponses, agent.RouteCaptureResponses, agent.RouteRun} {
		if counts["routed "+strings.TrimPrefix(route, "POST ")] == 0 {
			t.Errorf("no path of the corpus reached %s: %v", route, counts)
		}
	}
	if n := counts["refused by net/http"] + counts["decoded differently"]; n > len(corpus)/10 {
		t.Errorf("%d of %d targets never reached the comparison", n, len(corpus))
	}
}
