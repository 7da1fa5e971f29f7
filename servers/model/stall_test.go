package model_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/environment"
	"github.com/gymlens/gymlens/internal/servertest"
	"github.com/gymlens/gymlens/protocol"
	"github.com/gymlens/gymlens/server"
	"github.com/gymlens/gymlens/servers/agent"
	"github.com/gymlens/gymlens/servers/model"
	"github.com/gymlens/gymlens/servers/registry"
	"github.com/gymlens/gymlens/servers/resources/counter"
)

// hour is a stall no test waits out: a call stalled this long ends only
// when its caller goes away.
const hour = 3600

// bound is how long a test waits for something that should happen at
// once; reaching it fails the test (it is a bound, not a measurement).
const bound = 30 * time.Second

// calls watches a server's requests: each one announces itself on
// entered as it reaches its route, and on left once the route's handler
// has returned, with what the request carried.
type calls struct {
	entered, left chan seen
}

// seen is one request as a route saw it.
type seen struct {
	rollout string // its rollout id (path prefix)
	cookie  bool   // whether it carried a cookie
}

func newCalls() *calls { return &calls{entered: make(chan seen, 64), left: make(chan seen, 64)} }

func (c *calls) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := seen{rollout: server.RolloutID(r.Context()), cookie: len(r.Cookies()) > 0}
		c.entered <- s
		defer func() { c.left <- s }()
		next.ServeHTTP(w, r)
	})
}

// next receives one request from ch, failing the test past bound.
func next(t *testing.T, ch <-chan seen, what string) seen {
	t.Helper()
	select {
	case s := <-ch:
		return s
	case <-time.After(bound):
		t.Fatalf("no request %s within %v", what, bound)
		return seen{}
	}
}

// startWatched runs a model server with cfg whose requests w watches.
func startWatched(t *testing.T, cfg model.Config, w *calls) string {
	t.Helper()
	base, _, _ := start(t, cfg, server.Options{Middleware: w.middleware})
	return base
}

// question is a Responses request the built-in policy answers in one turn.
const question = `{"input":"What is 2 + 3?"}`

// answered posts body to url with cookies for a call that must not
// stall: past bound it gives up with the context's error.
func answered(t *testing.T, url, body string, cookies []*http.Cookie) (*http.Response, error) {
	ctx, cancel := context.WithTimeout(t.Context(), bound)
	defer cancel()
	return postModel(ctx, url, body, cookies)
}

// postModel posts body to url with cookies, under ctx.
func postModel(ctx context.Context, url, body string, cookies []*http.Cookie) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	for _, c := range cookies {
		req.AddCookie(c)
	}
	c := &http.Client{Transport: &http.Transport{}}
	defer c.CloseIdleConnections()
	res, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	var v map[string]any
	if err := json.NewDecoder(res.Body).Decode(&v); err != nil {
		return nil, err
	}
	return res, nil
}

// TestStallWaitsOnTheFirstCallOfAStalledTaskOnly runs a model server on
// loopback that stalls task 1 for an hour: task 0's and task 2's calls
// (ids "0-0", "2-1-a1"), a call without rollout id, an explicit id and a
// task-1 call that carries the server's session cookie (a later call of
// the episode) answer; task 1's first calls, on both routes, stall until
// their caller goes away, and then their handlers return at once.
func TestStallWaitsOnTheFirstCallOfAStalledTaskOnly(t *testing.T) {
	w := newCalls()
	cfg := model.Defaults()
	cfg.StallTasks, cfg.StallSeconds = []int{1, 17}, hour
	base := startWatched(t, cfg, w)

	var session []*http.Cookie
	for _, path := range []string{
		protocol.RolloutPath("0-0", protocol.PathResponses),
		protocol.RolloutPath("2-1-a1", protocol.PathResponses),
		protocol.PathResponses,
		protocol.RolloutPath("run-1", protocol.PathResponses),
	} {
		res, err := answered(t, base+path, question, nil)
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("POST %s: %v %v", path, res, err)
		}
		session = res.Cookies()
		next(t, w.entered, "entering")
		next(t, w.left, "leaving")
	}
	if len(session) == 0 {
		t.Fatal("the model server set no session cookie")
	}
	// The second call of task 1's episode, with the session cookie.
	later := base + protocol.RolloutPath("1-0", protocol.PathResponses)
	if res, err := answered(t, later, question, session); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("task 1 with the session cookie: %v %v", res, err)
	}
	next(t, w.entered, "entering")
	next(t, w.left, "leaving")

	for _, c := range []struct{ path, body string }{
		{protocol.RolloutPath("1-0", protocol.PathResponses), question},
		{protocol.RolloutPath("1-2-a3", protocol.TokenCaptureSegment+protocol.PathResponses), question},
		{protocol.RolloutPath("17-0", protocol.PathChatCompletions), `{"messages":[{"role":"user","content":"What is 2 + 3?"}]}`},
	} {
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			_, err := postModel(ctx, base+c.path, c.body, nil)
			done <- err
		}()
		in := next(t, w.entered, "entering")
		// The handler is stalled: it has not left. Going away ends it.
		select {
		case s := <-w.left:
			t.Fatalf("%s: the stalled call's handler returned (%+v) before its caller went away", c.path, s)
		case err := <-done:
			t.Fatalf("%s: the stalled call answered (%v) before its caller went away", c.path, err)
		default:
		}
		cancel()
		if out := next(t, w.left, "leaving after the caller went away"); out != in {
			t.Errorf("left %+v, entered %+v", out, in)
		}
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("%s: the caller got %v, want its own cancellation", c.path, err)
		}
	}
}

// TestStallLastsStallSeconds measures a short stall from outside: the
// stalled call takes at least stall_seconds (a lower bound, which the
// timer guarantees), and the next call of its episode, with the cookie
// the stalled answer set, is not stalled again (it answers; how fast is
// not asserted).
func TestStallLastsStallSeconds(t *testing.T) {
	const seconds = 0.25
	cfg := model.Defaults()
	cfg.StallTasks, cfg.StallSeconds = []int{1}, seconds
	base, _, _ := start(t, cfg, server.Options{})
	url := base + protocol.RolloutPath("1-0", protocol.PathResponses)

	began := time.Now()
	res, err := postModel(t.Context(), url, question, nil)
	took := time.Since(began)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("stalled call: %v %v", res, err)
	}
	if took < time.Duration(seconds*float64(time.Second)) {
		t.Errorf("the stalled call took %v, less than stall_seconds %v s", took, seconds)
	}
	if res2, err := answered(t, url, question, res.Cookies()); err != nil || res2.StatusCode != http.StatusOK {
		t.Fatalf("the episode's next call: %v %v", res2, err)
	}
}

// TestStallThroughTheAgent runs an agent, a counter resources server and
// a model server stalling task 1 for an hour, each on loopback, with the
// fleet's observability_enabled set so the agent sends each rollout's
// calls under its /ng-rollout/<id>/ prefix. Rollouts of tasks 0 and 2
// (three model calls each, the later two with the model's session cookie
// the agent carries from answer to answer) finish; task 1's stalls on its
// first model call, its /run stays open, and cancelling the /run ends the
// stall.
func TestStallThroughTheAgent(t *testing.T) {
	w := newCalls()
	cfg := model.Defaults()
	cfg.StallTasks, cfg.StallSeconds = []int{1}, hour
	modelURL := startWatched(t, cfg, w)

	env, err := counter.New(counter.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	rs := server.New(mergeOptions(environment.ServerOptions(env.Name(), "counter"), contract.ServerTypeResources, counter.ServerName))
	env.Register(rs)
	resourcesURL, _ := servertest.Start(t, rs)

	as := server.New(mergeOptions(agent.ServerOptions("agent"), contract.ServerTypeAgent, agent.ServerName))
	client := servertest.Client(t)
	acfg := agent.Defaults()
	acfg.ModelURL, acfg.ResourcesURL, acfg.ObservabilityEnabled = modelURL, resourcesURL, true
	if err := agent.Register(as, acfg, client); err != nil {
		t.Fatal(err)
	}
	agentURL, _ := servertest.Start(t, as)
	run := agentURL + protocol.PathRun

	for _, task := range []int{0, 2} {
		var out map[string]any
		if _, err := client.Post(t.Context(), run, counterRow(t, task), &out, server.Call{}); err != nil {
			t.Fatalf("task %d: %v", task, err)
		}
		if out["reward"] != 1.0 {
			t.Errorf("task %d: reward %v, want 1", task, out["reward"])
		}
		// add 2, add 3, read, answer: four model calls, the first
		// without the model's cookie and every later one with it.
		for i := range 4 {
			s := next(t, w.entered, "entering")
			next(t, w.left, "leaving")
			if want := strconv.Itoa(task) + "-0"; s.rollout != want || s.cookie != (i > 0) {
				t.Errorf("task %d, model call %d: %+v, want rollout %s, cookie %v", task, i, s, want, i > 0)
			}
		}
	}

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := client.Post(ctx, run, counterRow(t, 1), nil, server.Call{})
		done <- err
	}()
	if s := next(t, w.entered, "entering"); s.rollout != "1-0" || s.cookie {
		t.Errorf("task 1's first model call: %+v", s)
	}
	select {
	case s := <-w.left:
		t.Fatalf("task 1's stalled model call returned (%+v) before /run was cancelled", s)
	case err := <-done:
		t.Fatalf("task 1's /run ended (%v) while its model call was stalled", err)
	default:
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("task 1's /run: %v, want its cancellation", err)
	}
	if s := next(t, w.left, "leaving after /run was cancelled"); s.rollout != "1-0" {
		t.Errorf("left: %+v", s)
	}
}

// mergeOptions is an implementation's server options with its name and
// type.
func mergeOptions(o server.Options, typ, name string) server.Options {
	o.Type, o.Name = typ, name
	return o
}

// counterRow is a /run row of the counter environment for task: two
// increments and a read, verified against 5.
func counterRow(t *testing.T, task int) server.RawJSON {
	t.Helper()
	tools, err := json.Marshal(counter.Tools())
	if err != nil {
		t.Fatal(err)
	}
	return server.RawJSON(`{"responses_create_params":{"input":"add 2 then add 3 and tell me the count","tools":` + string(tools) +
		`},"initial_count":0,"expected_count":5,"_ng_task_index":` + strconv.Itoa(task) + `,"_ng_rollout_index":0}`)
}

// TestStallConfig holds the two keys to their rules: stall_seconds a
// finite number in range, stall_tasks integers >= 0; read from a fleet
// block, a non-integer task index or a string that is no integer is an
// error naming the key (which the fleet turns into its configuration
// error, exit 2), and "3" reads as 3, as for every integer key.
func TestStallConfig(t *testing.T) {
	impl, ok := registry.Lookup(contract.ServerTypeModel, model.ServerName)
	if !ok {
		t.Fatal("no policy_model in the registry")
	}
	cfg, err := impl.Decode([]byte(`{"stall_tasks":[3,"17"],"stall_seconds":"2.5"}`))
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if c := cfg.(*model.Config); len(c.StallTasks) != 2 || c.StallTasks[0] != 3 || c.StallTasks[1] != 17 || c.StallSeconds != 2.5 {
		t.Errorf("decoded %+v", c)
	} else if err := impl.Validate(cfg); err != nil {
		t.Errorf("Validate: %v", err)
	}
	for body, key := range map[string]string{
		`{"stall_tasks":[1.5]}`:       "stall_tasks",
		`{"stall_tasks":["one"]}`:     "stall_tasks",
		`{"stall_tasks":3}`:           "stall_tasks",
		`{"stall_seconds":"soon"}`:    "stall_seconds",
		`{"stall_seconds":[1]}`:       "stall_seconds",
		`{"stall_task":[1]}`:          "stall_task",
		`{"stall_tasks":[-1]}`:        "stall_tasks",
		`{"stall_seconds":-1}`:        "stall_seconds",
		`{"stall_seconds":1e300}`:     "stall_seconds",
		`{"stall_tasks":[1,2,-3]}`:    "stall_tasks",
		`{"stall_tasks":[1e30]}`:      "stall_tasks",
		`{"stall_tasks":["1.5"]}`:     "stall_tasks",
		`{"stall_tasks":[true]}`:      "stall_tasks",
		`{"stall_tasks":[null, "x"]}`: "stall_tasks",
	} {
		cfg, err := impl.Decode([]byte(body))
		if err == nil {
			err = impl.Validate(cfg)
		}
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%s: %v, want an error naming %s", body, err, key)
		}
	}
}
