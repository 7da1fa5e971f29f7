package agent_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/internal/servertest"
	"github.com/gymlens/gymlens/live"
	"github.com/gymlens/gymlens/server"
	"github.com/gymlens/gymlens/servers/agent"
	"github.com/gymlens/gymlens/servers/registry"
)

// Planted strings: a prompt, a header value and a cookie value a rollout
// carries, none of which may reach the episodes report.
const (
	plantedPrompt = "PLANTED-PROMPT-7f3a9c"
	plantedHeader = "PLANTED-HEADER-51be02"
	plantedCookie = "PLANTED-COOKIE-c4d8e1"
	testToken     = "episodes-test-token-0123456789"
)

// gate holds the model calls it is asked to hold until the test opens it,
// telling the test when one has arrived. Register its release as a
// cleanup after the fixture's, so that it runs first: a server does not
// stop with a handler held.
type gate struct {
	arrived chan int // the held call's number
	open    chan struct{}
	once    sync.Once
}

func newGate() *gate {
	return &gate{arrived: make(chan int, 16), open: make(chan struct{})}
}

func (g *gate) release() { g.once.Do(func() { close(g.open) }) }

// hold waits at the gate for call n.
func (g *gate) hold(n int) {
	g.arrived <- n
	<-g.open
}

// getEpisodes asks the agent for its episodes report, with token as a
// bearer token unless it is "", and returns the status and the body.
func getEpisodes(t *testing.T, base, token string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+live.EpisodesPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	c := &http.Client{Transport: &http.Transport{}}
	defer c.CloseIdleConnections()
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", live.EpisodesPath, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, body
}

// report asks the agent at base for its episodes report (token as for
// getEpisodes), failing the test unless it comes with 200 and holds none
// of the planted strings.
func report(t *testing.T, base, token string) live.EpisodesReport {
	t.Helper()
	status, body := getEpisodes(t, base, token)
	if status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", live.EpisodesPath, status, body)
	}
	for _, s := range []string{plantedPrompt, plantedHeader, plantedCookie, testToken} {
		if strings.Contains(string(body), s) {
			t.Errorf("the report holds %q: %s", s, body)
		}
	}
	var rep live.EpisodesReport
	if err := json.Unmarshal(body, &rep); err != nil {
		t.Fatalf("not an episodes report: %v: %s", err, body)
	}
	return rep
}

// asyncRun posts row to /run with the planted header and cookie in a
// goroutine and delivers the answer's status.
func asyncRun(f *fixture, row string) <-chan int {
	done := make(chan int, 1)
	go func() {
		req, err := http.NewRequest(http.MethodPost, f.agentURL+"/run", strings.NewReader(row))
		if err != nil {
			done <- -1
			return
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Planted", plantedHeader)
		req.AddCookie(&http.Cookie{Name: "planted", Value: plantedCookie})
		c := &http.Client{Transport: &http.Transport{}}
		defer c.CloseIdleConnections()
		res, err := c.Do(req)
		if err != nil {
			done <- -1
			return
		}
		_, _ = io.Copy(io.Discard, res.Body)
		_ = res.Body.Close()
		done <- res.StatusCode
	}()
	return done
}

// stage returns the stats of stage st in rep.
func stage(t *testing.T, rep live.EpisodesReport, st live.Stage) live.StageStats {
	t.Helper()
	for _, s := range rep.Stages {
		if s.Stage == st {
			return s
		}
	}
	t.Fatalf("no %s in the report's stages: %+v", st, rep.Stages)
	return live.StageStats{}
}

// plantedRow is weatherRow (task 3, rollout 1: rollout id "3-1") with the
// planted prompt as its input.
var plantedRow = strings.Replace(weatherRow, "What is the weather in SF?", plantedPrompt, 1)

// TestEpisodesRoute follows one rollout on the episodes route: while its
// first model call is held, the report shows it at model_call with its
// rollout id and its seed_session step; once it has ended, no episode is
// in flight and the stages count its steps. The route wants the head
// token, and no report holds the prompt, a header value or a cookie.
func TestEpisodesRoute(t *testing.T) {
	g := newGate()
	turns := script(response("resp_1", functionCall("call_1", "get_weather", `{"city":"SF"}`)),
		response("resp_2", message("msg_1", "sunny")))
	hold := func(n int, body []byte) (int, string) {
		if n == 0 {
			g.hold(n)
		}
		return turns(n, body)
	}
	f := newFixture(t, hold, resourcesOptions{}, agent.Config{Instance: "agent_x", HeadToken: testToken})
	t.Cleanup(g.release)
	done := asyncRun(f, plantedRow)
	<-g.arrived

	for _, tok := range []string{"", "wrong-token-0123456789abcdef"} {
		if status, body := getEpisodes(t, f.agentURL, tok); status != http.StatusUnauthorized {
			t.Errorf("token %q: %d %s, want 401", tok, status, body)
		}
	}
	rep := report(t, f.agentURL, testToken)
	if rep.Server != "agent_x" || rep.WindowSeconds != 60 || rep.Truncated != 0 {
		t.Errorf("report: %+v", rep)
	}
	if len(rep.Episodes) != 1 {
		t.Fatalf("episodes in flight: %+v, want one", rep.Episodes)
	}
	ep := rep.Episodes[0]
	if ep.RolloutID != "3-1" || ep.Stage != live.StageModel || ep.Turn != 1 {
		t.Errorf("episode: id %q stage %q turn %d; want 3-1, model_call, 1", ep.RolloutID, ep.Stage, ep.Turn)
	}
	if len(ep.Steps) != 1 || ep.Steps[0].Stage != live.StageSeed || ep.Steps[0].Status != http.StatusOK {
		t.Errorf("steps: %+v; want the seed_session answered 200", ep.Steps)
	}
	if ep.LastProgress.Before(ep.Start) || ep.StageStart.Before(ep.LastProgress) {
		t.Errorf("times: start %v, stage start %v, last progress %v", ep.Start, ep.StageStart, ep.LastProgress)
	}

	g.release()
	if status := <-done; status != http.StatusOK {
		t.Fatalf("POST /run: %d", status)
	}
	rep = report(t, f.agentURL, testToken)
	if len(rep.Episodes) != 0 {
		t.Errorf("episodes after the rollout: %+v", rep.Episodes)
	}
	for st, want := range map[live.Stage]int64{live.StageSeed: 1, live.StageModel: 2, live.StageTool: 1, live.StageVerify: 1} {
		if s := stage(t, rep, st); s.Count != want || s.Failed != 0 || s.SuccessRate != 1 || s.P50MS <= 0 || s.P99MS < s.P50MS {
			t.Errorf("%s: %+v; want %d steps, none failed", st, s, want)
		}
	}
}

// TestEpisodesRouteOpen: without a head token the route answers anyone;
// a rollout without an id is counted, not listed; a failed model call
// ends the episode and counts failed.
func TestEpisodesRouteOpen(t *testing.T) {
	fail := func(int, []byte) (int, string) { return http.StatusInternalServerError, `{"detail":"down"}` }
	f := newFixture(t, fail, resourcesOptions{}, agent.Config{})
	if a := post(t, f.agentURL+"/run", minimalRow); a.status != http.StatusInternalServerError {
		t.Fatalf("POST /run: %d %s, want 500", a.status, a.body)
	}
	rep := report(t, f.agentURL, "")
	if rep.Server != agent.ServerName || len(rep.Episodes) != 0 {
		t.Errorf("report: %+v", rep)
	}
	if s := stage(t, rep, live.StageModel); s.Count != 1 || s.Failed != 1 || s.SuccessRate != 0 {
		t.Errorf("model_call: %+v; want one failed step", s)
	}
	if s := stage(t, rep, live.StageSeed); s.Count != 1 || s.Failed != 0 {
		t.Errorf("seed_session: %+v; want one step", s)
	}
	if s := stage(t, rep, live.StageVerify); s.Count != 0 {
		t.Errorf("verify: %+v; want none", s)
	}
}

// TestEpisodesRouteBounded: an episode of many turns shows its MaxSteps
// most recent steps, oldest first; an episode of the prefixed
// /v1/responses route is listed under its id; many episodes at once are
// all listed.
func TestEpisodesRouteBounded(t *testing.T) {
	const turns = 3 * live.MaxSteps
	g := newGate()
	answer := func(n int, _ []byte) (int, string) {
		if n < turns {
			return http.StatusOK, response(fmt.Sprintf("resp_%d", n), functionCall(fmt.Sprintf("call_%d", n), "get_weather", `{"city":"SF"}`))
		}
		g.hold(n)
		return http.StatusOK, response("resp_last", message("msg_1", "sunny"))
	}
	f := newFixture(t, answer, resourcesOptions{}, agent.Config{})
	t.Cleanup(g.release)
	done := asyncRun(f, plantedRow)
	<-g.arrived
	rep := report(t, f.agentURL, "")
	if len(rep.Episodes) != 1 {
		t.Fatalf("episodes: %+v", rep.Episodes)
	}
	ep := rep.Episodes[0]
	if ep.Stage != live.StageModel || ep.Turn != turns+1 {
		t.Errorf("episode at %s turn %d, want model_call turn %d", ep.Stage, ep.Turn, turns+1)
	}
	if len(ep.Steps) != live.MaxSteps {
		t.Fatalf("%d steps, want MaxSteps (%d)", len(ep.Steps), live.MaxSteps)
	}
	// The last step is the tool call of turn `turns`; before it that
	// turn's model call, and so on back.
	for i, s := range ep.Steps {
		back := live.MaxSteps - 1 - i
		wantStage, wantTurn := live.StageTool, turns-back/2
		if back%2 == 1 {
			wantStage = live.StageModel
		}
		if s.Stage != wantStage || s.Turn != wantTurn {
			t.Errorf("step %d: %s turn %d, want %s turn %d", i, s.Stage, s.Turn, wantStage, wantTurn)
		}
	}
	g.release()
	if status := <-done; status != http.StatusOK {
		t.Fatalf("POST /run: %d", status)
	}
	if s := stage(t, report(t, f.agentURL, ""), live.StageTool); s.Count != turns {
		t.Errorf("tool_call: %+v; want %d steps", s, turns)
	}
}

// TestEpisodesRouteMany: rollouts in flight at once are each listed by
// id, the longest-running first; the prefixed /v1/responses route's
// episode is listed under its path's id.
func TestEpisodesRouteMany(t *testing.T) {
	const n = 6
	g := newGate()
	held := func(k int, _ []byte) (int, string) {
		g.hold(k)
		return http.StatusOK, response("resp", message("msg_1", "sunny"))
	}
	f := newFixture(t, held, resourcesOptions{}, agent.Config{})
	t.Cleanup(g.release)
	var dones []<-chan int
	for i := range n {
		row := strings.Replace(plantedRow, `"_ng_task_index":3`, fmt.Sprintf(`"_ng_task_index":%d`, 10+i), 1)
		dones = append(dones, asyncRun(f, row))
		<-g.arrived // one at a time, so that their order is known
	}
	prefixed := make(chan answer, 1)
	go func() {
		prefixed <- postNoFatal(f.agentURL+"/ng-rollout/abc.1/v1/responses", `{"input":"`+plantedPrompt+`"}`)
	}()
	<-g.arrived
	rep := report(t, f.agentURL, "")
	var ids []string
	for _, ep := range rep.Episodes {
		ids = append(ids, ep.RolloutID)
	}
	want := []string{"10-1", "11-1", "12-1", "13-1", "14-1", "15-1", "abc.1"}
	if strings.Join(ids, " ") != strings.Join(want, " ") {
		t.Errorf("episodes: %v, want %v", ids, want)
	}
	g.release()
	for _, d := range dones {
		if status := <-d; status != http.StatusOK {
			t.Errorf("POST /run: %d", status)
		}
	}
	if a := <-prefixed; a.status != http.StatusOK {
		t.Errorf("POST /ng-rollout/abc.1/v1/responses: %d %s", a.status, a.body)
	}
	if rep := report(t, f.agentURL, ""); len(rep.Episodes) != 0 || stage(t, rep, live.StageModel).Count != n+1 {
		t.Errorf("after: %+v", rep)
	}
}

// postNoFatal is post for a goroutine other than the test's: an error is
// status -1.
func postNoFatal(url, body string) answer {
	c := &http.Client{Transport: &http.Transport{}}
	defer c.CloseIdleConnections()
	res, err := c.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return answer{status: -1, body: []byte(err.Error())}
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return answer{status: res.StatusCode, header: res.Header, body: raw}
}

// TestEpisodesRouteTokenFromEnvironment: an agent the registry starts (as
// `gymlens serve` and the orchestrator do) takes the head token from
// GYMLENS_HEAD_TOKEN, which the orchestrator hands its servers, and names
// its report after its instance.
func TestEpisodesRouteTokenFromEnvironment(t *testing.T) {
	t.Setenv(contract.EnvHeadToken, testToken)
	impl, ok := registry.Lookup(contract.ServerTypeAgent, agent.ServerName)
	if !ok {
		t.Fatal("no simple_agent in the registry")
	}
	opts := impl.Options("agent_env")
	opts.Name, opts.Type, opts.Logger = "agent_env", contract.ServerTypeAgent, quiet
	s := server.New(opts)
	// The peers are never called: no rollout runs.
	peers := registry.Peers{Instance: "agent_env", ModelURL: "http://127.0.0.1:9", ResourcesURL: "http://127.0.0.1:9"}
	if err := impl.Register(s, impl.NewConfig(), peers); err != nil {
		t.Fatal(err)
	}
	base, _ := servertest.Start(t, s)
	if status, body := getEpisodes(t, base, ""); status != http.StatusUnauthorized {
		t.Errorf("without the token: %d %s, want 401", status, body)
	}
	if rep := report(t, base, testToken); rep.Server != "agent_env" || len(rep.Stages) != 4 {
		t.Errorf("report: %+v", rep)
	}
}
