package environment_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"os"
	"os/signal"
	"strings"

	"github.com/gymlens/gymlens/environment"
	"github.com/gymlens/gymlens/server"
)

// post sends body to url with client and returns the answer's body.
func post(client *http.Client, url, body string) string {
	res, err := client.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		panic(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return fmt.Sprintf("%d %s", res.StatusCode, strings.TrimSpace(string(raw)))
}

// A verify body: the dataset row (here with the task field
// expected_answer and a field the environment does not declare) plus
// the model's episode.
const exampleVerify = `{"responses_create_params":{"input":"Capital of France?"},
 "expected_answer":"Paris","difficulty":"easy",
 "response":{"id":"resp_1","object":"response","created_at":1767225600,"model":"m",
  "output":[{"type":"message","id":"msg_1","role":"assistant","status":"completed",
   "content":[{"type":"output_text","text":" Paris ","annotations":[]}]}],
  "parallel_tool_calls":true,"tool_choice":"auto","tools":[]}}`

// An environment is a verify function over a typed task.
func ExampleNew() {
	type Task struct {
		Expected string `json:"expected_answer" gym:"required"`
	}
	env := environment.New("exact_match", environment.Verify(
		func(_ context.Context, req *environment.VerifyRequest, task Task) (environment.Score, error) {
			got := strings.TrimSpace(req.Response.OutputText())
			reward := 0.0
			if got == task.Expected {
				reward = 1
			}
			return environment.Score{Reward: reward}.With("extracted_answer", got), nil
		}))

	srv := httptest.NewServer(env.Handler())
	defer srv.Close()
	answer := post(srv.Client(), srv.URL+"/verify", exampleVerify)
	var resp map[string]json.RawMessage
	_ = json.Unmarshal([]byte(strings.TrimPrefix(answer, "200 ")), &resp)
	// The request comes back whole, with the reward and the score's
	// members.
	fmt.Println(answer[:3], string(resp["reward"]), string(resp["extracted_answer"]), string(resp["difficulty"]))
	// A row without the required task field is refused before verify
	// runs, as upstream's pydantic models refuse it.
	fmt.Println(post(srv.Client(), srv.URL+"/verify", strings.Replace(exampleVerify, `"expected_answer":"Paris",`, "", 1)))
	// Output:
	// 200 1 "Paris" "easy"
	// 422 {"detail":[{"type":"missing","loc":["body","expected_answer"],"msg":"Field required","input":null}]}
}

// A tool is a typed function; its definition is derived from the
// arguments type, for datasets to list.
func ExampleTool() {
	type Args struct {
		City  string `json:"city" gym:"required" description:"city name"`
		Units string `json:"units" gym:"required"`
	}
	weather := func(_ context.Context, args Args) (map[string]string, error) {
		return map[string]string{"forecast": "sunny in " + args.City}, nil
	}
	env := environment.New("weather",
		environment.Verify(func(context.Context, *environment.VerifyRequest, struct{}) (environment.Score, error) {
			return environment.Score{Reward: 1}, nil
		}),
		environment.Tool("get_weather", "Get the weather of a city.", weather))

	def, _ := json.Marshal(env.Tools())
	fmt.Println(string(def))
	srv := httptest.NewServer(env.Handler())
	defer srv.Close()
	fmt.Println(post(srv.Client(), srv.URL+"/get_weather", `{"city":"Oslo","units":"metric"}`))
	fmt.Println(post(srv.Client(), srv.URL+"/get_weather", `{"city":5}`))
	// Output:
	// [{"type":"function","name":"get_weather","description":"Get the weather of a city.","parameters":{"type":"object","properties":{"city":{"type":"string","description":"city name"},"units":{"type":"string"}},"required":["city","units"],"additionalProperties":false},"strict":true}]
	// 200 {"forecast":"sunny in Oslo"}
	// 422 {"detail":[{"type":"string_type","loc":["body","city"],"msg":"Input should be a valid string","input":5},{"type":"missing","loc":["body","units"],"msg":"Field required","input":null}]}
}

// Per-session state: seeded per rollout, changed by tools, read by
// verify, all keyed by the session cookie the server sets.
func ExampleSessions() {
	type (
		Seed struct {
			Start int `json:"start" gym:"required"`
		}
		Args struct {
			N int `json:"n" gym:"required"`
		}
		Task struct {
			Want int `json:"expected_total" gym:"required"`
		}
		State struct{ Total int }
	)
	var sessions environment.Sessions[State]
	env := environment.New("tally",
		environment.Verify(func(ctx context.Context, _ *environment.VerifyRequest, task Task) (environment.Score, error) {
			st, ok := sessions.Get(ctx)
			if ok && st.Total == task.Want {
				return environment.Score{Reward: 1}, nil
			}
			return environment.Score{Reward: 0}, nil
		}),
		environment.Seed(&sessions, func(_ context.Context, _ *environment.SeedSessionRequest, seed Seed) (State, error) {
			return State{Total: seed.Start}, nil
		}),
		environment.Tool("add", "Add n.", func(ctx context.Context, args Args) (map[string]bool, error) {
			err := sessions.Update(ctx, func(st *State, existed bool) error {
				if !existed {
					return environment.Errorf(http.StatusConflict, "not seeded")
				}
				st.Total += args.N
				return nil
			})
			return map[string]bool{"success": err == nil}, err
		}))

	srv := httptest.NewServer(env.Handler())
	defer srv.Close()
	// A cookie jar plays the agent, which sends each answer's cookie with
	// the next call.
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar}
	defer client.CloseIdleConnections()
	fmt.Println(post(client, srv.URL+"/seed_session", `{"start":40}`))
	fmt.Println(post(client, srv.URL+"/add", `{"n":2}`))
	verify := strings.Replace(exampleVerify, `"expected_answer":"Paris"`, `"expected_total":42`, 1)
	var resp struct{ Reward float64 }
	_ = json.Unmarshal([]byte(post(client, srv.URL+"/verify", verify)[4:]), &resp)
	fmt.Println("reward", resp.Reward)
	// Another rollout (no cookie yet) has no state.
	fmt.Println(post(srv.Client(), srv.URL+"/add", `{"n":2}`))
	// Output:
	// 200 {}
	// 200 {"success":true}
	// reward 1
	// 409 {"detail":"not seeded"}
}

// A verify or tool function answers with a status of its choosing by
// returning an Errorf error; any other error is a 500.
func ExampleErrorf() {
	type Args struct {
		Amount int `json:"amount" gym:"required"`
	}
	env := environment.New("bank",
		environment.Verify(func(_ context.Context, req *environment.VerifyRequest, _ struct{}) (environment.Score, error) {
			if req.Response.OutputText() == "" {
				return environment.Score{}, environment.Errorf(http.StatusBadRequest, "the episode has no answer")
			}
			return environment.Score{Reward: 1}, nil
		}),
		environment.Tool("withdraw", "Take money out.", func(_ context.Context, a Args) (map[string]int, error) {
			if a.Amount > 100 {
				return nil, environment.Errorf(http.StatusConflict, "insufficient funds: %d asked, 100 held", a.Amount)
			}
			if a.Amount < 0 {
				return nil, fmt.Errorf("a negative amount: %d", a.Amount)
			}
			return map[string]int{"balance": 100 - a.Amount}, nil
		}))

	srv := httptest.NewServer(env.Handler())
	defer srv.Close()
	fmt.Println(post(srv.Client(), srv.URL+"/withdraw", `{"amount":30}`))
	fmt.Println(post(srv.Client(), srv.URL+"/withdraw", `{"amount":300}`))
	fmt.Println(post(srv.Client(), srv.URL+"/withdraw", `{"amount":-1}`))
	silent := strings.Replace(exampleVerify, `" Paris "`, `""`, 1)
	fmt.Println(post(srv.Client(), srv.URL+"/verify", silent))
	// The error is an *environment.Error to errors.As.
	var e *environment.Error
	fmt.Println(errors.As(fmt.Errorf("withdraw: %w", environment.Errorf(http.StatusConflict, "no")), &e), e.Status)
	// Output:
	// 200 {"balance":70}
	// 409 {"detail":"insufficient funds: 300 asked, 100 held"}
	// 500 "a negative amount: -1"
	// 400 {"detail":"the episode has no answer"}
	// true 409
}

// The benchmark's own metrics join the statistics /aggregate_metrics
// answers: here pass@2, the share of tasks with a rewarded rollout.
func ExampleComputeMetrics() {
	env := environment.New("exact_match",
		environment.Verify(func(context.Context, *environment.VerifyRequest, struct{}) (environment.Score, error) {
			return environment.Score{Reward: 1}, nil
		}),
		environment.ComputeMetrics(func(tasks [][]environment.Fields) map[string]any {
			passed := 0
			for _, rollouts := range tasks {
				for _, r := range rollouts {
					var reward float64
					if _, err := r.Decode("reward", &reward); err == nil && reward == 1 {
						passed++
						break
					}
				}
			}
			return map[string]any{"pass@2": float64(passed) / float64(len(tasks))}
		}))

	srv := httptest.NewServer(env.Handler())
	defer srv.Close()
	answer := post(srv.Client(), srv.URL+"/aggregate_metrics", `{"verify_responses":[
		{"_ng_task_index":0,"_ng_rollout_index":0,"reward":0},
		{"_ng_task_index":0,"_ng_rollout_index":1,"reward":1},
		{"_ng_task_index":1,"_ng_rollout_index":0,"reward":0},
		{"_ng_task_index":1,"_ng_rollout_index":1,"reward":0}]}`)
	var m struct {
		AgentMetrics map[string]any `json:"agent_metrics"`
		KeyMetrics   map[string]any `json:"key_metrics"`
	}
	_ = json.Unmarshal([]byte(strings.TrimPrefix(answer, "200 ")), &m)
	fmt.Println(answer[:3], m.AgentMetrics["pass@2"], m.AgentMetrics["mean/reward"], m.KeyMetrics)
	// Output:
	// 200 0.5 0.25 map[mean/reward:0.25]
}

// GET /reverify_mode says whether a result may be scored again from its
// record.
func ExampleReverifyMode() {
	env := environment.New("exact_match",
		environment.Verify(func(context.Context, *environment.VerifyRequest, struct{}) (environment.Score, error) {
			return environment.Score{Reward: 1}, nil
		}),
		environment.ReverifyMode(environment.ReverifyStateless))
	srv := httptest.NewServer(env.Handler())
	defer srv.Close()
	res, err := srv.Client().Get(srv.URL + "/reverify_mode")
	if err != nil {
		panic(err)
	}
	defer res.Body.Close()
	mode, _ := io.ReadAll(res.Body)
	fmt.Println(string(mode))
	// Output:
	// "stateless"
}

// The statistics /aggregate_metrics answers for a set of results.
func ExampleAggregateMetrics() {
	var results []environment.Fields
	for _, line := range []string{
		`{"_ng_task_index":0,"_ng_rollout_index":0,"reward":1,"correct":true}`,
		`{"_ng_task_index":0,"_ng_rollout_index":1,"reward":0,"correct":false}`,
		`{"_ng_task_index":1,"_ng_rollout_index":0,"reward":1,"correct":true}`,
	} {
		var r environment.Fields
		_ = json.Unmarshal([]byte(line), &r)
		results = append(results, r)
	}
	m := environment.AggregateMetrics(results)
	key, _ := json.Marshal(m.KeyMetrics)
	fmt.Println(string(key))
	fmt.Printf("%.4f %d tasks\n", m.AgentMetrics["std/reward"], len(m.GroupLevelMetrics))
	// Output:
	// {"mean/correct":0.6666666666666666,"mean/reward":0.6666666666666666}
	// 0.5774 2 tasks
}

// A score carries the response's own members besides the reward.
func ExampleScore_With() {
	s := environment.Score{Reward: 0.98}.With("extracted_answer", "42").With("rule", "soft_numeric")
	b, _ := json.Marshal(s.Fields)
	fmt.Println(s.Reward, string(b))
	// Output:
	// 0.98 {"extracted_answer":"42","rule":"soft_numeric"}
}

// Register puts an environment on a server of the caller's, as gymlens serve
// does for the built-in environments.
func ExampleEnvironment_Register() {
	env := environment.New("exact_match", environment.Verify(
		func(context.Context, *environment.VerifyRequest, struct{}) (environment.Score, error) {
			return environment.Score{Reward: 1}, nil
		}))
	opts := environment.ServerOptions(env.Name(), "exact_match_1")
	opts.Name = "exact_match_1"
	s := server.New(opts)
	env.Register(s)
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	// Rollout-prefixed paths route like their plain twins.
	res, err := srv.Client().Get(srv.URL + "/ng-rollout/12-3/reverify_mode")
	if err != nil {
		panic(err)
	}
	defer res.Body.Close()
	mode, _ := io.ReadAll(res.Body)
	fmt.Println(opts.SessionCookie, string(mode))
	// Output:
	// exact_match___exact_match_1 "unknown"
}

// The options a server needs to carry an environment, known from its
// name before the environment is built (gymlens serve builds the built-in
// environments from their configuration only when it registers them).
func ExampleServerOptions() {
	opts := environment.ServerOptions("exact_match", "exact_match_1")
	fmt.Println(opts.Type, opts.RolloutPrefix == server.PrefixResources, opts.SessionCookie)
	fmt.Println(environment.ServerOptions("exact_match", "").SessionCookie)
	// Output:
	// resources_servers true exact_match___exact_match_1
	// exact_match___exact_match
}

// A program that serves an environment until SIGINT or SIGTERM: flags
// -addr and -name, telemetry from the NEMO_GYM_OTEL_* variables.
func ExampleMain() {
	type Task struct {
		Expected string `json:"expected_answer" gym:"required"`
	}
	environment.Main(environment.New("exact_match", environment.Verify(
		func(_ context.Context, req *environment.VerifyRequest, task Task) (environment.Score, error) {
			if strings.TrimSpace(req.Response.OutputText()) == task.Expected {
				return environment.Score{Reward: 1}, nil
			}
			return environment.Score{}, nil
		})))
}

// ListenAndServe serves under the caller's context, here until an
// interrupt.
func ExampleEnvironment_ListenAndServe() {
	env := environment.New("exact_match", environment.Verify(
		func(context.Context, *environment.VerifyRequest, struct{}) (environment.Score, error) {
			return environment.Score{Reward: 1}, nil
		}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := env.ListenAndServe(ctx, "127.0.0.1:8000"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
