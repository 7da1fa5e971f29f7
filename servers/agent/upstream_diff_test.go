package agent_test

import (
	"encoding/json"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/gymlens/gymlens/internal/upstream"
	"github.com/gymlens/gymlens/servers/agent"
)

// episodeProgram runs upstream's simple agent episode loop
// (SimpleAgent._create_episode, nemo-gym 0.7.0) on each case read from
// stdin, its model and resources server replaced by an in-process
// stand-in that answers as the Go fixture's fakes do: the model with the
// case's turns in order (the last one again after), each answer setting
// mdl=m<n>; the tools get_weather, remember, explode and any other name
// with the fixture's bodies, statuses and cookies. No server is started.
// It prints, per case, the episode's status, metadata and output items
// (type, call_id, output), the number of model calls, each tool call's
// name and cookies, and the resources cookies the episode ended with.
const episodeProgram = `
import asyncio, json, logging, sys
from http.cookies import SimpleCookie
from types import SimpleNamespace

logging.disable(logging.CRITICAL)
from responses_api_agents.simple_agent.app import SimpleAgent, SimpleAgentConfig
from nemo_gym.openai_utils import NeMoGymResponseCreateParamsNonStreaming


class Reply:
    def __init__(self, status, body, cookies):
        self.status, self.ok, self.body = status, 200 <= status < 400, body.encode()
        self.cookies = SimpleCookie()
        for name, value in cookies.items():
            self.cookies[name] = value
        self.content = SimpleNamespace(read=self.read)

    async def read(self):
        return self.body


class StandIn:
    def __init__(self, turns):
        self.turns, self.model_calls, self.tools = turns, 0, []

    async def post(self, server_name, url_path, json=None, cookies=None):
        if server_name == "model":
            turn = self.turns[min(self.model_calls, len(self.turns) - 1)]
            self.model_calls += 1
            return Reply(200, turn, {"mdl": "m%d" % self.model_calls})
        name = url_path.lstrip("/")
        sent = {k: getattr(v, "value", v) for k, v in (cookies or {}).items()}
        self.tools.append({"name": name, "cookies": sent})
        res = {"res": "tool%d" % len(self.tools)}
        if name == "get_weather":
            return Reply(200, '{"city": "%s", "weather": "sunny"}' % json["city"], res)
        if name == "remember":
            return Reply(200, '{"remembered": true}', {json["name"]: json["value"], **res})
        if name == "explode":
            return Reply(500, "boom\n", res)
        return Reply(404, '{"detail":"Not Found"}', res)


async def episode(case):
    stand_in = StandIn(case["turns"])
    steps = {"max_steps": case["max_steps"]} if case.get("max_steps") is not None else {}
    config = SimpleAgentConfig(name="simple_agent", host="127.0.0.1", port=1, entrypoint="app.py",
                               resources_server={"type": "resources_servers", "name": "resources"},
                               model_server={"type": "responses_api_models", "name": "model"}, **steps)
    agent = SimpleAgent.model_construct(config=config, server_client=stand_in)
    params = NeMoGymResponseCreateParamsNonStreaming.model_validate(case["params"])
    response, _, _, cookies = await agent._create_episode(
        params, model_url_path="/v1/responses", resources_server_cookies=dict(case["cookies"]))
    out = response.model_dump(mode="json")
    return {"status": out.get("status"), "metadata": out.get("metadata"),
            "output": [{"type": o["type"], "call_id": o.get("call_id"), "output": o.get("output")} for o in out["output"]],
            "model_calls": stand_in.model_calls, "tools": stand_in.tools, "cookies": dict(cookies or {})}


async def main():
    print(json.dumps([await episode(case) for case in json.load(sys.stdin)]))

asyncio.run(main())
`

// episodeCase is one case of TestUpstreamEpisode, as the
// program reads it.
type episodeCase struct {
	Name     string            `json:"name"`
	Params   json.RawMessage   `json:"params"`
	Cookies  map[string]string `json:"cookies"`
	Turns    []string          `json:"turns"`
	MaxSteps *int              `json:"max_steps,omitempty"`
}

// episodeOutcome is what the program prints per case, and what the test
// reads off the Go agent's /run for the same case.
type episodeOutcome struct {
	Status     any              `json:"status"`
	Metadata   any              `json:"metadata"`
	Output     []map[string]any `json:"output"`
	ModelCalls int              `json:"model_calls"`
	Tools      []toolCall       `json:"tools"`
	Cookies    map[string]string
}

type toolCall struct {
	Name    string            `json:"name"`
	Cookies map[string]string `json:"cookies"`
}

// TestUpstreamEpisode runs the same model turns through the Go
// agent (over HTTP, /run between the fixture's fakes) and through
// upstream's own episode loop (episodeProgram), and compares where the
// episode stops and how: status, termination metadata, output items,
// model calls, each tool call's cookies and the resources cookies verify
// gets. The cases cover the turns that end an episode (an assistant
// message, reasoning only, no output, a message of another role,
// incomplete_details, max_steps) and cookies merged across tool calls.
func TestUpstreamEpisode(t *testing.T) {
	upstream.Python(t) // skips the test where upstream is not installed
	call := func(id, name, args string) string { return functionCall(id, name, args) }
	remember := func(id, name, value string) string {
		return call(id, "remember", `{"name":"`+name+`","value":"`+value+`"}`)
	}
	two := 2
	cases := []episodeCase{
		{Name: "answer", Turns: []string{response("r1", message("m", "hello"))}},
		{Name: "reasoning only", Turns: []string{response("r1", reasoning("a")), response("r2", message("m", "late"))}},
		{Name: "empty output", Turns: []string{response("r1"), response("r2", message("m", "late"))}},
		{Name: "reasoning and an answer", Turns: []string{response("r1", reasoning("a"), message("m", "hi"))}},
		{Name: "user message only", Turns: []string{response("r1", `{"type":"message","role":"user","content":"echo"}`)}},
		{Name: "system message only", Turns: []string{response("r1", `{"type":"message","role":"system","content":"echo"}`)}},
		{Name: "assistant message as input", Turns: []string{response("r1", `{"type":"message","role":"assistant","content":"hi"}`)}},
		{Name: "output message without role", Turns: []string{response("r1",
			`{"type":"message","id":"m","status":"completed","content":[{"type":"output_text","text":"x","annotations":[]}]}`)}},
		{Name: "metadata kept", Turns: []string{withMember(response("r1", reasoning("a")), "metadata", `{"trace":"t-1"}`)}},
		{Name: "tool then reasoning", Turns: []string{response("r1", remember("c1", "a", "1")), response("r2", reasoning("b"))}},
		{Name: "tool then empty", Turns: []string{response("r1", reasoning("a"), call("c1", "get_weather", `{"city":"SF"}`)), response("r2")}},
		{Name: "cookies merged in one turn", Turns: []string{
			response("r1", remember("c1", "a", "1"), remember("c2", "b", "2"), remember("c3", "a", "3")),
			response("r2", message("m", "done"))}},
		{Name: "cookies merged across turns", Turns: []string{
			response("r1", remember("c1", "a", "1")), response("r2", remember("c2", "lease", "L2")),
			response("r3", remember("c3", "b", "2")), response("r4", message("m", "done"))}},
		{Name: "bad arguments keep the cookies", Turns: []string{
			response("r1", call("c1", "remember", `{"name":`), remember("c2", "a", "1")),
			response("r2", message("m", "done"))}},
		{Name: "arguments only Python reads", Turns: []string{
			response("r1", call("c1", "no_such_tool", `{"x": NaN, "y": [-Infinity]}`)),
			response("r2", message("m", "done"))}},
		{Name: "tool errors", Turns: []string{
			response("r1", call("c1", "no_such_tool", `{}`), call("c2", "explode", `{}`)),
			response("r2", message("m", "done"))}},
		{Name: "incomplete details", Turns: []string{withMember(response("r1", call("c1", "get_weather", `{"city":"SF"}`)),
			"incomplete_details", `{"reason":"max_output_tokens"}`)}},
		{Name: "incomplete details without output", Turns: []string{withMember(response("r1"),
			"incomplete_details", `{"reason":"content_filter"}`)}},
		{Name: "max_steps", MaxSteps: &two, Turns: []string{response("r", call("c", "get_weather", `{"city":"SF"}`))}},
	}
	for i := range cases {
		cases[i].Params = json.RawMessage(`{"input":"hi"}`)
		cases[i].Cookies = map[string]string{"res": "seed", "lease": "L"}
	}
	stdin, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}
	var want []episodeOutcome
	out := upstream.Run(t, 2*time.Minute, episodeProgram, stdin)
	if err := json.Unmarshal(out, &want); err != nil || len(want) != len(cases) {
		t.Fatalf("upstream's outcomes (%v): %s", err, out)
	}

	agree := 0
	for i, c := range cases {
		ok := t.Run(c.Name, func(t *testing.T) {
			f := newFixture(t, script(c.Turns...), resourcesOptions{seedCookie: &http.Cookie{Name: "lease", Value: "L", Path: "/"}},
				agent.Config{MaxSteps: c.MaxSteps})
			got, _ := f.run(t, `{"responses_create_params":`+string(c.Params)+`}`)
			resp := got["response"].(map[string]any)
			g := episodeOutcome{Status: resp["status"], Metadata: resp["metadata"], ModelCalls: f.log.count("model", "/v1/responses"),
				Output: []map[string]any{}, Tools: []toolCall{}}
			for _, it := range items(t, got) {
				g.Output = append(g.Output, map[string]any{"type": it["type"], "call_id": it["call_id"], "output": it["output"]})
			}
			for _, r := range f.log.all() {
				if r.Peer == "resources" && r.Path != "/seed_session" && r.Path != "/verify" {
					g.Tools = append(g.Tools, toolCall{Name: r.Path[1:], Cookies: r.Cookies})
				}
			}
			g.Cookies = f.log.to("resources", "/verify")[0].Cookies
			delete(g.Cookies, "mdl")
			delete(g.Cookies, "simple_agent___test")
			w := want[i]
			sameJSON(t, "status", g.Status, w.Status)
			sameJSON(t, "metadata", g.Metadata, w.Metadata)
			sameJSON(t, "output", g.Output, w.Output)
			sameJSON(t, "model calls", g.ModelCalls, w.ModelCalls)
			sameJSON(t, "tool calls", g.Tools, w.Tools)
			sameJSON(t, "resources cookies at the end", g.Cookies, w.Cookies)
		})
		if ok {
			agree++
		}
	}
	t.Logf("%d episodes, %d agree with upstream's", len(cases), agree)
}

// dumpProgram prints, for each row read from stdin, what upstream's
// simple agent sends to /seed_session (and, with the episode added, to
// /verify): the row validated as its run request and dumped, without
// responses_create_params, whose full dump (every parameter, null ones
// included) is the one difference this test leaves out.
const dumpProgram = `
import json, sys
from responses_api_agents.simple_agent.app import SimpleAgentRunRequest

out = []
for row in json.load(sys.stdin):
    dump = SimpleAgentRunRequest.model_validate(row).model_dump()
    dump.pop("responses_create_params")
    out.append(dump)
print(json.dumps(out))
`

// TestUpstreamForwardedRow: the members of a row the Go agent
// sends to /seed_session and /verify, besides the parameters and the
// episode, are those upstream's dump sends: every task field and
// bookkeeping member as it came, _ng_rollout_id (valid, malformed or
// null) never.
func TestUpstreamForwardedRow(t *testing.T) {
	upstream.Python(t) // skips the test where upstream is not installed
	rows := []string{
		minimalRow,
		weatherRow,
		`{"responses_create_params":{"input":"hi"},"_ng_rollout_id":"job-7.r1"}`,
		`{"responses_create_params":{"input":"hi"},"_ng_rollout_id":null,"_ng_task_index":0,"_ng_rollout_index":2}`,
		`{"responses_create_params":{"input":"hi"},"_ng_rollout_id":"not valid","k":1}`,
		`{"responses_create_params":{"input":"hi"},"_ng_rollout_id":"","_ng_attempt_index":3}`,
		`{"_ng_rollout_id":"r-1","responses_create_params":{"input":"hi"},"_ng_task_index":"seven","agent_ref":{"name":"x"}}`,
		`{"responses_create_params":{"input":"hi"},"reward":0.5,"verification_skipped":false,"task":{"_ng_rollout_id":"nested"}}`,
	}
	var stdin []json.RawMessage
	for _, r := range rows {
		stdin = append(stdin, json.RawMessage(r))
	}
	in, err := json.Marshal(stdin)
	if err != nil {
		t.Fatal(err)
	}
	var want []map[string]any
	out := upstream.Run(t, 2*time.Minute, dumpProgram, in)
	if err := json.Unmarshal(out, &want); err != nil || len(want) != len(rows) {
		t.Fatalf("upstream's dumps (%v): %s", err, out)
	}
	f := newFixture(t, script(response("r1", message("m", "x"))), resourcesOptions{}, agent.Config{})
	agree := 0
	for i, row := range rows {
		f.log.reset()
		got, _ := f.run(t, row)
		ok := true
		for _, path := range []string{"/seed_session", "/verify"} {
			sent := object(t, f.log.to("resources", path)[0].Body)
			delete(sent, "responses_create_params")
			w := clone(want[i])
			if path == "/verify" {
				// The episode replaces a response the row carried.
				w["response"] = sent["response"]
			}
			if !reflect.DeepEqual(normal(t, sent), normal(t, w)) {
				ok = false
				sameJSON(t, row+": "+path, sent, w)
			}
		}
		if _, has := got["_ng_rollout_id"]; has {
			ok = false
			t.Errorf("%s: /run answered with _ng_rollout_id", row)
		}
		if ok {
			agree++
		}
	}
	t.Logf("%d rows, %d agree with upstream's dump on both hops", len(rows), agree)
}
