package agent_test

import (
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gymlens/gymlens/internal/servertest"
	"github.com/gymlens/gymlens/servers/agent"
)

var sessionID = regexp.MustCompile(`^[0-9a-f]{32}$`)

// TestRunSeedModelToolModelVerify follows one rollout through both fake
// peers: the exact sequence of calls, every body and every cookie.
func TestRunSeedModelToolModelVerify(t *testing.T) {
	turn1 := withMember(response("resp_1", functionCall("call_1", "get_weather", `{"city": "SF"}`)), "usage", usage(10, "2", 5, "null"))
	turn2 := withMember(response("resp_2", message("msg_1", "It is sunny.")), "usage", usage(20, "3", 7, "1"))
	f := newFixture(t, script(turn1, turn2), resourcesOptions{}, agent.Config{})
	got, ans := f.run(t, weatherRow, &http.Cookie{Name: "inbound", Value: "yes"})

	want := []string{"resources /seed_session", "model /v1/responses", "resources /get_weather", "model /v1/responses", "resources /verify"}
	if seq := f.log.sequence(); !slices.Equal(seq, want) {
		t.Fatalf("calls %q, want %q", seq, want)
	}
	reqs := f.log.all()
	seed, model1, tool, model2, verify := reqs[0], reqs[1], reqs[2], reqs[3], reqs[4]
	row := value(t, weatherRow).(map[string]any)

	// The seed gets the row with every member (unknown ones and nulls
	// included) and the inbound cookies.
	sameJSON(t, "seed body", object(t, seed.Body), row)
	sameJSON(t, "seed cookies", seed.Cookies, map[string]string{"inbound": "yes"})

	// Each model call: the row's parameters, the input grown by every item
	// so far (a string input becomes a user message); the cookies of the
	// previous model answer.
	params := row["responses_create_params"].(map[string]any)
	user := map[string]any{"role": "user", "content": "What is the weather in SF?"}
	fc := value(t, functionCall("call_1", "get_weather", `{"city": "SF"}`))
	toolText := `{"city": "SF", "weather": "sunny"}`
	fco := map[string]any{"type": "function_call_output", "call_id": "call_1", "output": toolText}
	body1 := clone(params)
	body1["input"] = []any{user}
	sameJSON(t, "first model body", object(t, model1.Body), body1)
	body2 := clone(params)
	body2["input"] = []any{user, fc, fco}
	sameJSON(t, "second model body", object(t, model2.Body), body2)
	sameJSON(t, "first model cookies", model1.Cookies, map[string]string{})
	sameJSON(t, "second model cookies", model2.Cookies, map[string]string{"mdl": "m1"})

	// The tool call: the parsed arguments, the seed's cookie.
	sameJSON(t, "tool body", object(t, tool.Body), map[string]any{"city": "SF"})
	sameJSON(t, "tool cookies", tool.Cookies, map[string]string{"res": "seed"})

	// Verify: the row plus the episode, which is the last model answer
	// with every item and the summed usage; the latest resources cookie,
	// the latest model cookie and the agent's own session cookie.
	episode := object(t, []byte(turn2))
	episode["output"] = []any{fc, fco, value(t, message("msg_1", "It is sunny."))}
	episode["usage"] = value(t, `{"input_tokens":30,"input_tokens_details":{"cached_tokens":5},"output_tokens":12,`+
		`"output_tokens_details":{"reasoning_tokens":null},"total_tokens":42}`)
	wantVerify := clone(row)
	wantVerify["response"] = episode
	sameJSON(t, "verify body", object(t, verify.Body), wantVerify)
	own := verify.Cookies["simple_agent___test"]
	if !sessionID.MatchString(own) {
		t.Errorf("verify cookies %v: no agent session cookie", verify.Cookies)
	}
	sameJSON(t, "verify cookies", verify.Cookies, map[string]string{"res": "tool1", "mdl": "m2", "simple_agent___test": own})

	// The answer is the verify answer, every member kept, with the
	// members upstream's verify-response model defaults.
	wantAnswer := clone(wantVerify)
	wantAnswer["reward"], wantAnswer["checked_by"] = 1, "fake"
	wantAnswer["mask_sample"], wantAnswer["failure_kind"], wantAnswer["failure_reason"] = false, nil, nil
	sameJSON(t, "/run answer", got, wantAnswer)
	var setOwn string
	for _, c := range (&http.Response{Header: ans.header}).Cookies() {
		if c.Name == "simple_agent___test" {
			setOwn = c.Value
		}
	}
	if setOwn != own {
		t.Errorf("/run set session cookie %q, verify got %q", setOwn, own)
	}
}

func clone(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// outputs returns the function_call_output texts of a /run answer's
// response, in order.
func outputs(t *testing.T, got map[string]any) []string {
	t.Helper()
	var out []string
	for _, it := range items(t, got) {
		if it["type"] == "function_call_output" {
			out = append(out, it["output"].(string))
		}
	}
	return out
}

// items returns the output items of a /run answer's response.
func items(t *testing.T, got map[string]any) []map[string]any {
	t.Helper()
	resp, ok := got["response"].(map[string]any)
	if !ok {
		t.Fatalf("answer without response: %v", got)
	}
	var out []map[string]any
	for _, it := range resp["output"].([]any) {
		out = append(out, it.(map[string]any))
	}
	return out
}

// TestToolAnswersAndCookies: a tool route's answer of any status is the
// output, and every tool answer's cookie replaces the resources cookie of
// the same name that the next call (and verify) sends.
func TestToolAnswersAndCookies(t *testing.T) {
	f := newFixture(t, script(
		response("r1", functionCall("c1", "get_weather", `{"city":"SF"}`), functionCall("c2", "no_such_tool", `{}`)),
		response("r2", functionCall("c3", "explode", `{"n": [1, 2]}`)),
		response("r3", message("m", "done")),
	), resourcesOptions{}, agent.Config{})
	got, _ := f.run(t, weatherRow)

	want := []string{"resources /seed_session", "model /v1/responses", "resources /get_weather", "resources /no_such_tool",
		"model /v1/responses", "resources /explode", "model /v1/responses", "resources /verify"}
	if seq := f.log.sequence(); !slices.Equal(seq, want) {
		t.Fatalf("calls %q, want %q", seq, want)
	}
	wantOut := []string{`{"city": "SF", "weather": "sunny"}`, `{"detail":"Not Found"}`, "boom\n"}
	if out := outputs(t, got); !slices.Equal(out, wantOut) {
		t.Errorf("tool outputs %q, want %q", out, wantOut)
	}
	var toolCookies []string
	for _, r := range f.log.all() {
		if r.Peer == "resources" && r.Path != "/seed_session" {
			toolCookies = append(toolCookies, r.Cookies["res"])
		}
	}
	if want := []string{"seed", "tool1", "tool2", "tool3"}; !slices.Equal(toolCookies, want) {
		t.Errorf("resources cookie per call after the seed %q, want %q (the last is verify's)", toolCookies, want)
	}
	var modelCookies []string
	for _, r := range f.log.to("model", "/v1/responses") {
		modelCookies = append(modelCookies, r.Cookies["mdl"])
	}
	if want := []string{"", "m1", "m2"}; !slices.Equal(modelCookies, want) {
		t.Errorf("model cookie per call %q, want %q", modelCookies, want)
	}
	sameJSON(t, "explode body", object(t, f.log.to("resources", "/explode")[0].Body), map[string]any{"n": []any{1, 2}})
}

// TestBadArgumentsMakeAnErrorOutput: arguments that are not JSON are
// answered without a call, and leave the resources cookies as they were.
func TestBadArgumentsMakeAnErrorOutput(t *testing.T) {
	f := newFixture(t, script(
		response("r1", functionCall("c1", "get_weather", `{"city": `)),
		response("r2", functionCall("c2", "get_weather", `{"city": "Oslo"}`)),
		response("r3", message("m", "done")),
	), resourcesOptions{}, agent.Config{})
	got, _ := f.run(t, weatherRow)
	if n := f.log.count("resources", "/get_weather"); n != 1 {
		t.Fatalf("%d tool calls, want 1 (the second call's); calls %q", n, f.log.sequence())
	}
	if c := f.log.to("resources", "/get_weather")[0].Cookies["res"]; c != "seed" {
		t.Errorf("the call after a bad one sent res=%q, want the seed's", c)
	}
	// Upstream's output: the repr of Python's JSONDecodeError, its
	// position in code points.
	out := outputs(t, got)
	want := `{"error": "Invalid tool call arguments: JSONDecodeError('Expecting value: line 1 column 10 (char 9)')"}`
	if len(out) != 2 || out[0] != want {
		t.Fatalf("outputs %q, want %q first", out, want)
	}
	// The model saw the error output as the call's output.
	second := object(t, f.log.to("model", "/v1/responses")[1].Body)
	in := second["input"].([]any)
	if last := in[len(in)-1].(map[string]any); last["call_id"] != "c1" || last["output"] != out[0] {
		t.Errorf("second model call's last input item %v", last)
	}
}

// TestArgumentsOnlyPythonReads: arguments with NaN or Infinity, which
// Python's json.loads reads and encoding/json does not, are a call, as
// upstream makes it, with the arguments as they came.
func TestArgumentsOnlyPythonReads(t *testing.T) {
	args := `{"city": "SF", "t": [NaN, -Infinity, Infinity]}`
	f := newFixture(t, script(response("r1", call("c1", "get_weather", args)), response("r2", message("m", "done"))),
		resourcesOptions{}, agent.Config{})
	f.run(t, weatherRow)
	calls := f.log.to("resources", "/get_weather")
	if len(calls) != 1 || string(calls[0].Body) != args {
		t.Fatalf("tool calls %q: want one with the body %s", f.log.sequence(), args)
	}
}

// TestMaxStepsBoundsTheEpisode: a model that calls a tool every turn is
// stopped after max_steps model calls, each call's tools executed.
func TestMaxStepsBoundsTheEpisode(t *testing.T) {
	steps := 3
	f := newFixture(t, func(n int, _ []byte) (int, string) {
		return http.StatusOK, response("r", functionCall("c"+string(rune('0'+n)), "get_weather", `{"city":"SF"}`))
	}, resourcesOptions{}, agent.Config{MaxSteps: &steps})
	got, _ := f.run(t, weatherRow)
	if m, tl := f.log.count("model", "/v1/responses"), f.log.count("resources", "/get_weather"); m != 3 || tl != 3 {
		t.Errorf("%d model calls and %d tool calls, want 3 and 3", m, tl)
	}
	if n := len(items(t, got)); n != 6 {
		t.Errorf("%d output items, want 6 (3 calls, 3 outputs)", n)
	}
	if f.log.count("resources", "/verify") != 1 {
		t.Errorf("no verify after max_steps: %q", f.log.sequence())
	}
}

// TestCookiesMerge: each tool answer's cookies are merged into the
// resources cookies, as upstream 0.7.0 merges them: a cookie set by the
// seed or by an earlier tool call and not set again is still sent on
// the later calls and on verify.
func TestCookiesMerge(t *testing.T) {
	f := newFixture(t, script(
		response("r1", functionCall("c1", "remember", `{"name":"a","value":"1"}`)),
		response("r2", functionCall("c2", "remember", `{"name":"b","value":"2"}`)),
		response("r3", message("m", "done")),
	), resourcesOptions{seedCookie: &http.Cookie{Name: "lease", Value: "L7", Path: "/"}}, agent.Config{})
	f.run(t, weatherRow)
	want := []string{"resources /seed_session", "model /v1/responses", "resources /remember", "model /v1/responses",
		"resources /remember", "model /v1/responses", "resources /verify"}
	if seq := f.log.sequence(); !slices.Equal(seq, want) {
		t.Fatalf("calls %q, want %q", seq, want)
	}
	calls := f.log.to("resources", "/remember")
	sameJSON(t, "first tool call cookies", calls[0].Cookies, map[string]string{"res": "seed", "lease": "L7"})
	sameJSON(t, "second tool call cookies", calls[1].Cookies, map[string]string{"res": "tool1", "lease": "L7", "a": "1"})
	verify := f.log.to("resources", "/verify")[0].Cookies
	own := verify["simple_agent___test"]
	if !sessionID.MatchString(own) {
		t.Errorf("verify cookies %v: no agent session cookie", verify)
	}
	sameJSON(t, "verify cookies", verify, map[string]string{"res": "tool2", "lease": "L7", "a": "1", "b": "2",
		"mdl": "m3", "simple_agent___test": own})

	// /v1/responses merges into the caller's cookies, and answers with
	// the merged ones.
	f = newFixture(t, script(
		response("r1", functionCall("c1", "remember", `{"name":"a","value":"1"}`)),
		response("r2", functionCall("c2", "remember", `{"name":"b","value":"2"}`)),
		response("r3", message("m", "done")),
	), resourcesOptions{}, agent.Config{})
	a := post(t, f.agentURL+"/v1/responses", `{"input":"hi"}`, &http.Cookie{Name: "lease", Value: "outside"})
	if a.status != http.StatusOK {
		t.Fatalf("/v1/responses: %d %s", a.status, a.body)
	}
	set := map[string]string{}
	for _, c := range (&http.Response{Header: a.header}).Cookies() {
		if c.Name != "simple_agent___test" {
			set[c.Name] = c.Value
		}
	}
	sameJSON(t, "/v1/responses cookies", set, map[string]string{"lease": "outside", "res": "tool2", "a": "1", "b": "2", "mdl": "m3"})
	calls = f.log.to("resources", "/remember")
	sameJSON(t, "second tool call cookies", calls[1].Cookies, map[string]string{"lease": "outside", "res": "tool1", "a": "1"})
}

// TestTurnWithoutAnswerEndsEpisode: a turn with neither a function call
// nor an assistant message ends the episode at once, as upstream 0.7.0
// ends it: the episode's response is incomplete, with the termination
// reason (incomplete_reasoning for output without either, empty_output
// for none) and upstream's message in its metadata; nothing else is
// called before verify.
func TestTurnWithoutAnswerEndsEpisode(t *testing.T) {
	userEcho := `{"type":"message","role":"user","content":"echo"}`
	for _, c := range []struct {
		name     string
		turns    []string
		calls    int    // model calls
		items    int    // output items of the episode
		reason   string // "" for an episode that answered
		metadata map[string]any
	}{
		{name: "reasoning only", turns: []string{response("r1", reasoning("a")), response("r2", message("m", "late"))},
			calls: 1, items: 1, reason: agent.TerminationIncompleteReasoning},
		{name: "empty output", turns: []string{response("r1"), response("r2", message("m", "late"))},
			calls: 1, items: 0, reason: agent.TerminationEmptyOutput},
		{name: "user message only", turns: []string{response("r1", userEcho)},
			calls: 1, items: 1, reason: agent.TerminationIncompleteReasoning},
		{name: "reasoning after a tool call", turns: []string{
			response("r1", reasoning("a"), functionCall("c1", "get_weather", `{"city":"SF"}`)),
			response("r2", reasoning("b")), response("r3", message("m", "late"))},
			calls: 2, items: 4, reason: agent.TerminationIncompleteReasoning},
		{name: "metadata kept", turns: []string{withMember(response("r1", reasoning("a")), "metadata", `{"trace":"t-1"}`)},
			calls: 1, items: 1, reason: agent.TerminationIncompleteReasoning, metadata: map[string]any{"trace": "t-1"}},
		{name: "reasoning and an answer", turns: []string{response("r1", reasoning("a"), message("m", "hello"))},
			calls: 1, items: 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			steps := 5
			f := newFixture(t, script(c.turns...), resourcesOptions{}, agent.Config{MaxSteps: &steps})
			got, _ := f.run(t, weatherRow)
			if n := f.log.count("model", "/v1/responses"); n != c.calls {
				t.Errorf("%d model calls, want %d", n, c.calls)
			}
			if n := len(items(t, got)); n != c.items {
				t.Errorf("%d output items, want %d", n, c.items)
			}
			if seq := f.log.sequence(); seq[len(seq)-1] != "resources /verify" {
				t.Errorf("calls %q: verify is not last", seq)
			}
			// Verify got the episode as the answer carries it.
			sent := object(t, f.log.to("resources", "/verify")[0].Body)["response"].(map[string]any)
			resp := got["response"].(map[string]any)
			sameJSON(t, "verified episode", sent, resp)
			if c.reason == "" {
				if resp["status"] != "completed" || resp["metadata"] != nil {
					t.Errorf("status %v metadata %v, want completed and none", resp["status"], resp["metadata"])
				}
				return
			}
			md := map[string]any{"ng_termination_reason": c.reason, "ng_termination_message": agent.TerminationMessage}
			for k, v := range c.metadata {
				md[k] = v
			}
			if resp["status"] != "incomplete" {
				t.Errorf("status %v, want incomplete", resp["status"])
			}
			sameJSON(t, "metadata", resp["metadata"], md)
			if resp["incomplete_details"] != nil {
				t.Errorf("incomplete_details %v, want none (the model reported no truncation)", resp["incomplete_details"])
			}
		})
	}
	t.Run("over /v1/responses", func(t *testing.T) {
		f := newFixture(t, script(response("r1", reasoning("a"))), resourcesOptions{}, agent.Config{})
		a := post(t, f.agentURL+"/v1/responses", `{"input":"hi"}`)
		if a.status != http.StatusOK {
			t.Fatalf("/v1/responses: %d %s", a.status, a.body)
		}
		resp := object(t, a.body)
		md, _ := resp["metadata"].(map[string]any)
		if resp["status"] != "incomplete" || md["ng_termination_reason"] != agent.TerminationIncompleteReasoning {
			t.Errorf("answer %s: want incomplete, incomplete_reasoning", a.body)
		}
		if n := f.log.count("model", "/v1/responses"); n != 1 {
			t.Errorf("%d model calls, want 1", n)
		}
	})
}

// TestIncompleteDetailsStops: an incomplete response ends the episode
// before its function calls run.
func TestIncompleteDetailsStops(t *testing.T) {
	f := newFixture(t, script(withMember(response("r1", functionCall("c1", "get_weather", `{"city":"SF"}`)),
		"incomplete_details", `{"reason":"max_output_tokens"}`)), resourcesOptions{}, agent.Config{})
	got, _ := f.run(t, weatherRow)
	want := []string{"resources /seed_session", "model /v1/responses", "resources /verify"}
	if seq := f.log.sequence(); !slices.Equal(seq, want) {
		t.Errorf("calls %q, want %q", seq, want)
	}
	resp := got["response"].(map[string]any)
	if n := len(items(t, got)); n != 1 || resp["incomplete_details"] == nil {
		t.Errorf("response %v: want the one function call and incomplete_details", resp)
	}
}

// TestUsageIsSummed: counts add up across turns; a detail count unknown
// in one turn is unknown in the sum; a turn without usage adds nothing;
// an episode without any has none.
func TestUsageIsSummed(t *testing.T) {
	for _, c := range []struct {
		name  string
		turns []string
		want  string // "" for no usage
	}{
		{"details", []string{
			withMember(response("r1", reasoning("a"), functionCall("c1", "get_weather", `{"city":"SF"}`)), "usage", usage(10, "2", 5, "4")),
			withMember(response("r2", functionCall("c2", "get_weather", `{"city":"LA"}`)), "usage", usage(1, "null", 1, "1")),
			withMember(response("r3", message("m", "x")), "usage", usage(20, "3", 7, "1")),
		}, `{"input_tokens":31,"input_tokens_details":{"cached_tokens":null},"output_tokens":13,` +
			`"output_tokens_details":{"reasoning_tokens":6},"total_tokens":44}`},
		{"turn without usage", []string{
			response("r1", functionCall("c1", "get_weather", `{"city":"SF"}`)),
			withMember(response("r2", message("m", "x")), "usage", usage(3, "0", 4, "0")),
		}, usage(3, "0", 4, "0")},
		{"none", []string{response("r1", functionCall("c1", "get_weather", `{"city":"SF"}`)), response("r2", message("m", "x"))}, ""},
		{"ended by a reasoning-only turn", []string{
			withMember(response("r1", functionCall("c1", "get_weather", `{"city":"SF"}`)), "usage", usage(2, "0", 3, "0")),
			withMember(response("r2", reasoning("b")), "usage", usage(4, "1", 5, "5")),
		}, usage(6, "1", 8, "5")},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, script(c.turns...), resourcesOptions{}, agent.Config{})
			got, _ := f.run(t, minimalRow)
			u := got["response"].(map[string]any)["usage"]
			if c.want == "" {
				if u != nil {
					t.Errorf("usage %v, want none", u)
				}
				return
			}
			sameJSON(t, "usage", u, value(t, c.want))
		})
	}
}

// TestSkipVerification: no verify call; the answer is the row, the
// episode, the configured reward and verification_skipped; aggregation
// is answered locally with empty metrics.
func TestSkipVerification(t *testing.T) {
	f := newFixture(t, script(response("r1", message("m", "x"))), resourcesOptions{},
		agent.Config{SkipVerification: true, SkipVerificationReward: 0.25})
	got, _ := f.run(t, weatherRow)
	want := []string{"resources /seed_session", "model /v1/responses"}
	if seq := f.log.sequence(); !slices.Equal(seq, want) {
		t.Errorf("calls %q, want %q", seq, want)
	}
	wantAnswer := value(t, weatherRow).(map[string]any)
	episode := object(t, []byte(response("r1", message("m", "x"))))
	wantAnswer["response"], wantAnswer["reward"], wantAnswer["verification_skipped"] = episode, 0.25, true
	wantAnswer["mask_sample"], wantAnswer["failure_kind"], wantAnswer["failure_reason"] = false, nil, nil
	sameJSON(t, "answer", got, wantAnswer)

	a := post(t, f.agentURL+"/aggregate_metrics", `{"verify_responses":[{"reward":1}]}`)
	if a.status != http.StatusOK {
		t.Fatalf("aggregate_metrics: %d %s", a.status, a.body)
	}
	sameJSON(t, "local aggregate", object(t, a.body), value(t,
		`{"group_level_metrics":[],"agent_metrics":{},"key_metrics":{},"perf_summary":null,"repeat_level_metrics":[]}`))
	if n := f.log.count("resources", "/aggregate_metrics"); n != 0 {
		t.Errorf("aggregate_metrics forwarded %d times with skip_verification", n)
	}
}

// TestFailedRolloutsAre500: a peer that fails fails the rollout, as
// upstream raises; nothing after the failing call is made.
func TestFailedRolloutsAre500(t *testing.T) {
	ok := script(response("r1", message("m", "x")))
	for _, c := range []struct {
		name   string
		answer modelAnswer
		ro     resourcesOptions
		cfg    agent.Config
		row    string
		calls  []string
	}{
		{name: "seed 500", answer: ok, ro: resourcesOptions{seedStatus: 500}, row: minimalRow,
			calls: []string{"resources /seed_session"}},
		{name: "seed 422", answer: ok, ro: resourcesOptions{seedStatus: 422}, row: minimalRow,
			calls: []string{"resources /seed_session"}},
		{name: "model 503", answer: func(int, []byte) (int, string) { return 503, `{"detail":"overloaded"}` }, row: minimalRow,
			calls: []string{"resources /seed_session", "model /v1/responses"}},
		{name: "model answer invalid", answer: script(response("r1", `{"id":"x","content":[]}`)), row: minimalRow,
			calls: []string{"resources /seed_session", "model /v1/responses"}},
		{name: "model answer not a response", answer: script(`{"output":"text"}`), row: minimalRow,
			calls: []string{"resources /seed_session", "model /v1/responses"}},
		{name: "verify 500", answer: ok, ro: resourcesOptions{verifyStatus: 500}, row: minimalRow,
			calls: []string{"resources /seed_session", "model /v1/responses", "resources /verify"}},
		{name: "verify answer without reward", answer: ok, ro: resourcesOptions{verifyBody: `{"responses_create_params":{"input":"hi"},"response":` + response("r", message("m", "x")) + `}`}, row: minimalRow,
			calls: []string{"resources /seed_session", "model /v1/responses", "resources /verify"}},
		{name: "bad explicit rollout id", answer: ok, cfg: agent.Config{ObservabilityEnabled: true},
			row: `{"responses_create_params":{"input":"hi"},"_ng_rollout_id":"no spaces"}`},
		{name: "empty explicit rollout id", answer: ok, cfg: agent.Config{ObservabilityEnabled: true},
			row: `{"responses_create_params":{"input":"hi"},"_ng_rollout_id":""}`},
		{name: "execute_tools false", answer: ok, cfg: agent.Config{ExecuteTools: new(false)}, row: minimalRow},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, c.answer, c.ro, c.cfg)
			a := post(t, f.agentURL+"/run", c.row)
			if a.status != http.StatusInternalServerError {
				t.Fatalf("status %d (%s), want 500", a.status, a.body)
			}
			servertest.CheckErrorBody(t, a.status, a.body)
			if seq := f.log.sequence(); !slices.Equal(seq, c.calls) {
				t.Errorf("calls %q, want %q", seq, c.calls)
			}
		})
	}
	t.Run("unreachable resources", func(t *testing.T) {
		f := newFixture(t, ok, resourcesOptions{}, agent.Config{ResourcesURL: "http://" + servertest.FreeAddr(t) + "/?token=hush"})
		a := post(t, f.agentURL+"/run", minimalRow)
		if a.status != http.StatusInternalServerError || strings.Contains(string(a.body), "hush") {
			t.Errorf("status %d (%s): want 500 without the URL's query", a.status, a.body)
		}
	})
}

// TestRowValidation: a row upstream refuses is a 422, and no rollout.
func TestRowValidation(t *testing.T) {
	f := newFixture(t, script(response("r1", message("m", "x"))), resourcesOptions{}, agent.Config{})
	for _, c := range []struct{ row, loc string }{
		{`{"responses_create_params":{"input":"hi","not_a_param":"k"}}`, `["body","responses_create_params","not_a_param"]`},
		{`{"expected_answer":"x"}`, `["body","responses_create_params"]`},
		{`{"responses_create_params":{}}`, `["body","responses_create_params","input"]`},
		{`{"responses_create_params":{"input":5}}`, `["body","responses_create_params","input"]`},
		{`{"responses_create_params":{"input":"hi"},"_ng_rollout_id":7}`, `["body","_ng_rollout_id"]`},
		{`{"responses_create_params":{"input":"hi"},"_ng_rollout_id":{"id":"x"}}`, `["body","_ng_rollout_id"]`},
	} {
		a := post(t, f.agentURL+"/run", c.row)
		if a.status != http.StatusUnprocessableEntity {
			t.Errorf("%s: status %d (%s), want 422", c.row, a.status, a.body)
			continue
		}
		servertest.CheckErrorBody(t, a.status, a.body)
		if !strings.Contains(string(a.body), `"loc":`+c.loc) {
			t.Errorf("%s: %s does not name %s", c.row, a.body, c.loc)
		}
	}
	if seq := f.log.sequence(); len(seq) != 0 {
		t.Errorf("refused rows made calls %q", seq)
	}
}

// TestModelOverride: Config.Model replaces the parameters' model on the
// model calls, and only there.
func TestModelOverride(t *testing.T) {
	f := newFixture(t, script(response("r1", message("m", "x"))), resourcesOptions{}, agent.Config{Model: "policy-7b"})
	got, _ := f.run(t, `{"responses_create_params":{"input":"hi","model":"row-model"}}`)
	if m := object(t, f.log.to("model", "/v1/responses")[0].Body)["model"]; m != "policy-7b" {
		t.Errorf("model call's model %v, want the configured one", m)
	}
	if m := object(t, f.log.to("resources", "/seed_session")[0].Body)["responses_create_params"].(map[string]any)["model"]; m != "row-model" {
		t.Errorf("seed row's model %v, want the row's", m)
	}
	if m := got["responses_create_params"].(map[string]any)["model"]; m != "row-model" {
		t.Errorf("answer's row model %v, want the row's", m)
	}
}

// TestItemsInputAndRowResponse: a list input is sent as it came, and a
// response member a row carries is replaced by the episode.
func TestItemsInputAndRowResponse(t *testing.T) {
	f := newFixture(t, script(response("r1", message("m", "x"))), resourcesOptions{}, agent.Config{})
	row := `{"responses_create_params":{"input":[{"role":"system","content":"Be brief."},{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}]},"response":"stale","reward":0.5}`
	got, _ := f.run(t, row)
	in := object(t, f.log.to("model", "/v1/responses")[0].Body)["input"]
	sameJSON(t, "model input", in, value(t, row).(map[string]any)["responses_create_params"].(map[string]any)["input"])
	verify := object(t, f.log.to("resources", "/verify")[0].Body)
	sameJSON(t, "verify row parameters", verify["responses_create_params"], value(t, row).(map[string]any)["responses_create_params"])
	if _, ok := verify["response"].(map[string]any); !ok || verify["reward"] != json.Number("0.5") {
		t.Errorf("verify body response %v reward %v: want the episode and the row's reward", verify["response"], verify["reward"])
	}
	if got["reward"] != json.Number("1.0") && got["reward"] != json.Number("1") {
		t.Errorf("answer reward %v, want the verifier's", got["reward"])
	}
}

// TestRolloutIDNotForwarded: upstream's run request excludes
// _ng_rollout_id from its dumps, so neither /seed_session nor /verify
// gets it, nor does /run answer with it (skip_verification included),
// while the id still names the rollout's calls when observability is on.
// Without observability_enabled upstream reads no id, so a malformed one
// fails nothing.
func TestRolloutIDNotForwarded(t *testing.T) {
	for _, c := range []struct {
		name   string
		cfg    agent.Config
		row    string
		prefix string
	}{
		{"observability on", agent.Config{ObservabilityEnabled: true},
			`{"responses_create_params":{"input":"hi"},"_ng_rollout_id":"job-7","_ng_task_index":1,"_ng_rollout_index":0,"k":"v"}`, "/ng-rollout/job-7"},
		{"observability off", agent.Config{},
			`{"responses_create_params":{"input":"hi"},"_ng_rollout_id":"job-7","k":"v"}`, ""},
		{"malformed, observability off", agent.Config{},
			`{"responses_create_params":{"input":"hi"},"k":"v","_ng_rollout_id":"not valid"}`, ""},
		{"null", agent.Config{ObservabilityEnabled: true},
			`{"_ng_rollout_id":null,"responses_create_params":{"input":"hi"},"k":"v"}`, ""},
		{"skip verification", agent.Config{ObservabilityEnabled: true, SkipVerification: true},
			`{"responses_create_params":{"input":"hi"},"_ng_rollout_id":"job-8","k":"v"}`, "/ng-rollout/job-8"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, script(response("r1", call("c1", "get_weather", `{"city":"SF"}`)), response("r2", message("m", "x"))),
				resourcesOptions{}, c.cfg)
			got, _ := f.run(t, c.row)
			if _, ok := got["_ng_rollout_id"]; ok {
				t.Errorf("/run answer has _ng_rollout_id: %v", got)
			}
			if got["k"] != "v" {
				t.Errorf("/run answer lost the task field: %v", got)
			}
			for _, r := range f.log.all() {
				if r.Peer == "resources" && (r.Path == "/seed_session" || r.Path == "/verify") {
					sent := object(t, r.Body)
					if _, ok := sent["_ng_rollout_id"]; ok || sent["k"] != "v" {
						t.Errorf("%s body %s: want the row without _ng_rollout_id", r.Path, r.Body)
					}
				}
				want := c.prefix + r.Path // the resources fake strips the prefix
				if r.Peer == "model" {
					want = c.prefix + "/v1/responses"
				}
				if r.Sent != want {
					t.Errorf("%s %s sent as %q, want %q", r.Peer, r.Path, r.Sent, want)
				}
			}
		})
	}
}

func call(id, name, args string) string { return functionCall(id, name, args) }

// TestExecuteTools: execute_tools false, which upstream supports only in
// agent sessions (not served here), refuses /run and /v1/responses with
// a 500 and no call, in upstream's words; true is the default.
func TestExecuteTools(t *testing.T) {
	turns := script(response("r1", call("c1", "get_weather", `{"city":"SF"}`)), response("r2", message("m", "x")))
	off := newFixture(t, turns, resourcesOptions{}, agent.Config{ExecuteTools: new(false)})
	for path, want := range map[string]string{ // upstream's 500 body: the ValueError's repr
		"/run": `"ValueError('Simple Agent execute_tools=false is supported only for agent-session requests; ` +
			`the legacy /run route requires execute_tools=true')"`,
		"/v1/responses": `"ValueError('Simple Agent execute_tools=false is supported only for agent-session requests; ` +
			`seed an agent session before calling /v1/responses')"`,
	} {
		body := minimalRow
		if path == "/v1/responses" {
			body = `{"input":"hi"}`
		}
		a := post(t, off.agentURL+path, body)
		if a.status != http.StatusInternalServerError || string(a.body) != want {
			t.Errorf("%s: %d %s, want 500 %s", path, a.status, a.body, want)
		}
		servertest.CheckErrorBody(t, a.status, a.body)
	}
	if seq := off.log.sequence(); len(seq) != 0 {
		t.Errorf("execute_tools false made calls %q", seq)
	}
	on := newFixture(t, turns, resourcesOptions{}, agent.Config{ExecuteTools: new(true)})
	on.run(t, minimalRow)
	if n := on.log.count("resources", "/get_weather"); n != 1 {
		t.Errorf("execute_tools true: %d tool calls, want 1", n)
	}
}
