package model_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gymlens/gymlens/internal/upstream"
	"github.com/gymlens/gymlens/protocol"
	"github.com/gymlens/gymlens/server"
	"github.com/gymlens/gymlens/servers/model"
)

// chatVerdictProgram validates each body of its input (one JSON body a
// line) with nemo-gym 0.7.0's NeMoGymChatCompletionCreateParamsNonStreaming,
// as its model server does, and prints {"ok", "locs", "dump"}: what
// the model server forwards when it validates (openai_model/app.py:100),
// else the error
// locations with "body" in front and the union labels pydantic adds (a
// class name or a tag, which is no member of the value at that point)
// left out.
const chatVerdictProgram = `
import json, sys
from pydantic import ValidationError
from nemo_gym.openai_utils import NeMoGymChatCompletionCreateParamsNonStreaming as M

def clean(loc, body):
    cur, out, tag = body, ["body"], False
    for j, el in enumerate(loc):
        if not tag and isinstance(cur, dict) and isinstance(out[-1], int) and cur.get("type") == el and j + 1 < len(loc):
            tag = True
            continue  # the tag of a tool or tool call union
        tag = False
        if isinstance(el, int):
            out.append(el)
            cur = cur[el] if isinstance(cur, list) and 0 <= el < len(cur) else None
        elif isinstance(cur, dict) and el in cur:
            out.append(el)
            cur = cur[el]
        elif isinstance(cur, dict) and (el[:1].isupper() or "[" in el):
            continue  # a union member's name
        else:
            out.append(el)  # a missing member
            cur = None
    return out

for line in sys.stdin:
    body = json.loads(line)
    try:
        m = M.model_validate(body)
        print(json.dumps({"ok": True, "locs": [], "dump": m.model_dump(exclude_unset=True)}))
    except ValidationError as e:
        print(json.dumps({"ok": False, "locs": sorted({json.dumps(clean(x["loc"], body)) for x in e.errors()})}))
    sys.stdout.flush()
`

// TestUpstreamChatLaxValues posts chat requests whose members the
// server reads itself (parallel_tool_calls, stream, a tool's strict, a
// message's strings) carry values pydantic's lax mode takes or refuses,
// and members repeated with another kind first, to a gymlens model
// server over loopback, and validates the same bodies with nemo-gym
// 0.7.0's chat request model: the server answers 200 where upstream
// validates and 422 where it refuses, with the same error locations.
func TestUpstreamChatLaxValues(t *testing.T) {
	upstream.Python(t)
	if testing.Short() {
		t.Skip("runs upstream's python")
	}
	const msgs = `"messages":[{"role":"user","content":"What is 6 * 7?"}]`
	tool := func(strict string) string {
		return `"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"},"strict":` + strict + `}}]`
	}
	var bodies []string
	for _, v := range []string{`true`, `false`, `1`, `0`, `1.0`, `0.0`, `-0`, `"false"`, `"yes"`, `"off"`, `"t"`, `"TRUE"`, `" 1"`, `2`, `"maybe"`, `null`, `[]`, `0.5`} {
		bodies = append(bodies, `{`+msgs+`,"parallel_tool_calls":`+v+`}`, `{`+msgs+`,`+tool(v)+`}`,
			`{`+msgs+`,`+tool(`true`)+`,"parallel_tool_calls":`+v+`}`, `{`+msgs+`,"stream":`+v+`}`,
			`{`+msgs+`,"logprobs":`+v+`,"store":`+v+`}`)
	}
	for _, v := range []string{`"5"`, `5.0`, `"5.5"`, `" 7 "`, `"1_000"`, `true`, `"x"`} {
		bodies = append(bodies, `{`+msgs+`,"max_tokens":`+v+`,"n":`+v+`,"seed":`+v+`}`,
			`{`+msgs+`,"temperature":`+v+`,"top_p":`+v+`}`, `{`+msgs+`,"logit_bias":{"50256":`+v+`}}`)
	}
	bodies = append(bodies,
		// repeated members: the last counts
		`{`+msgs+`,"parallel_tool_calls":"maybe","parallel_tool_calls":true}`,
		`{`+msgs+`,"parallel_tool_calls":true,"parallel_tool_calls":"maybe"}`,
		`{"messages":[{"role":"user","content":"hi","name":5,"name":"n"}]}`,
		`{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":1,"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"4"}]}`,
		`{`+msgs+`,"tools":[{"type":"function","function":{"name":"f","strict":"maybe","strict":"on"}}]}`,
		// an assistant tool call with the redundant outer name upstream drops
		`{"messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"c","type":"function","name":5,"function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"4"}]}`,
	)

	var stdin bytes.Buffer
	for _, b := range bodies {
		if !json.Valid([]byte(b)) {
			t.Fatalf("fixture is not JSON: %s", b)
		}
		stdin.WriteString(b)
		stdin.WriteByte('\n')
	}
	out := upstream.Run(t, 2*time.Minute, chatVerdictProgram, stdin.Bytes())
	base, _, _ := start(t, withP(0, 1), server.Options{})
	peer, seen := fakeOpenAI(t, http.StatusOK, completion)
	upBase, _, _ := start(t, upstreamConfig(peer.URL), server.Options{})
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	accepted, agree, forwarded := 0, 0, 0
	for i := 0; sc.Scan(); i++ {
		if i >= len(bodies) {
			t.Fatal("upstream printed more lines than bodies")
		}
		var py struct {
			OK   bool                       `json:"ok"`
			Locs []string                   `json:"locs"`
			Dump map[string]json.RawMessage `json:"dump"`
		}
		if err := json.Unmarshal(sc.Bytes(), &py); err != nil {
			t.Fatalf("upstream line %q: %v", sc.Bytes(), err)
		}
		var pyLocs []string
		for _, l := range py.Locs {
			var loc []any
			if err := json.Unmarshal([]byte(l), &loc); err != nil {
				t.Fatal(err)
			}
			pyLocs = append(pyLocs, locString(loc))
		}
		slices.Sort(pyLocs)
		status, _, raw := postRaw(t, chatURL(base), bodies[i])
		var goLocs []string
		if status == http.StatusUnprocessableEntity {
			for _, fe := range fieldErrors(t, raw) {
				goLocs = append(goLocs, locString(normLoc(fe.Loc)))
			}
			slices.Sort(goLocs)
			goLocs = slices.Compact(goLocs)
		}
		want := http.StatusUnprocessableEntity
		if py.OK {
			want = http.StatusOK
			accepted++
		}
		if status != want || !slices.Equal(goLocs, pyLocs) {
			t.Errorf("%s\n  upstream ok=%v locs=%q\n  gymlens %d locs=%q: %s", bodies[i], py.OK, pyLocs, status, goLocs, raw)
			continue
		}
		if py.OK {
			// Forwarded, the body is upstream's dump with model replaced.
			if status, _, raw := postRaw(t, chatURL(upBase), bodies[i]); status != http.StatusOK {
				t.Errorf("%s: forwarding: status %d: %s", bodies[i], status, raw)
				continue
			}
			reqs := seen()
			py.Dump["model"] = json.RawMessage(`"gpt-test"`)
			want, _ := json.Marshal(py.Dump)
			sameJSON(t, "forwarded "+bodies[i], reqs[len(reqs)-1].Body, string(want))
			forwarded++
		}
		agree++
	}
	t.Logf("%d bodies, %d agree with nemo-gym 0.7.0 (it accepts %d, and forwards them as gymlens does: %d)", len(bodies), agree, accepted, forwarded)
	if accepted < len(bodies)/4 || accepted > len(bodies)*3/4 {
		t.Errorf("upstream accepts %d of %d bodies: the corpus should hold both kinds", accepted, len(bodies))
	}
}

// locString is a location as protocol writes it, numbers as integers.
func locString(loc []any) string {
	for i, el := range loc {
		if f, ok := el.(float64); ok {
			loc[i] = int(f)
		}
		if n, ok := el.(json.Number); ok {
			if v, err := n.Int64(); err == nil {
				loc[i] = int(v)
			}
		}
	}
	return strings.TrimSpace(protocol.LocString(loc))
}

// chatAnswerProgram validates each chat completion of its input (one a
// line) with nemo-gym 0.7.0's NeMoGymChatCompletion, as its model
// server validates the answer of the endpoint it forwards to, and
// prints true or false.
const chatAnswerProgram = `
import json, sys
from pydantic import ValidationError
from nemo_gym.openai_utils import NeMoGymChatCompletion

for line in sys.stdin:
    try:
        NeMoGymChatCompletion.model_validate(json.loads(line))
        print("true")
    except ValidationError:
        print("false")
    sys.stdout.flush()
`

// TestUpstreamChatAnswerLaxValues has an OpenAI-compatible peer on
// loopback answer a gymlens model server's forwarded chat request with
// chat completions whose numbers and flags take pydantic's lax forms, or
// forms it refuses, and members repeated or named in another case, and
// requires the server to pass on exactly the answers nemo-gym 0.7.0's
// model server validates (200) and refuse the others (502, where
// upstream's validation error is a 500). One answer also goes through the
// Responses route, mapped: its lax numbers read as numbers.
func TestUpstreamChatAnswerLaxValues(t *testing.T) {
	upstream.Python(t)
	if testing.Short() {
		t.Skip("runs upstream's python")
	}
	answer := func(created, index, tokens, extra string) string {
		return `{"id":"chatcmpl-1","object":"chat.completion","created":` + created + `,"model":"m",` +
			`"choices":[{"index":` + index + `,"finish_reason":"stop","message":{"role":"assistant","content":"4"}}],` +
			`"usage":{"prompt_tokens":` + tokens + `,"completion_tokens":1,"total_tokens":4,"prompt_tokens_details":{"cached_tokens":` + tokens + `}}` + extra + `}`
	}
	var bodies []string
	for _, v := range []string{`1767225600`, `"1767225600"`, `1767225600.0`, `" 7 "`, `true`, `"1_0"`, `1.5`, `"x"`, `null`, `[]`} {
		bodies = append(bodies, answer(v, `0`, `3`, ``), answer(`1`, v, `3`, ``), answer(`1`, `0`, v, ``))
	}
	bodies = append(bodies,
		answer(`"x"`, `0`, `3`, `,"created":2`),
		answer(`2`, `0`, `3`, `,"created":"x"`),
		answer(`1`, `0`, `3`, `,"Created":"x","Choices":5`),
		answer(`1`, `0`, `3`, `,"service_tier":"flex","system_fingerprint":null,"moderation":null`),
		answer(`1`, `0`, `3`, `,"service_tier":"slow"`),
		`{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"tool_calls",`+
			`"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}}]}`,
		`{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"tool_calls",`+
			`"message":{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":{}}}]}}]}`,
		`{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"stop",`+
			`"message":{"role":"assistant","content":"a","prompt_token_ids":["1"],"generation_token_ids":[2],"generation_log_probs":["-0.5"]}}]}`,
		`{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"stop",`+
			`"message":{"role":"assistant","content":"a","prompt_token_ids":[1]}}]}`,
		`{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"stop",`+
			`"logprobs":{"content":[{"token":"a","bytes":["97"],"logprob":"-0.1","top_logprobs":[]}]},"message":{"role":"assistant","content":"a"}}]}`,
	)
	var stdin bytes.Buffer
	for _, b := range bodies {
		if !json.Valid([]byte(b)) {
			t.Fatalf("fixture is not JSON: %s", b)
		}
		stdin.WriteString(b)
		stdin.WriteByte('\n')
	}
	verdicts := strings.Fields(string(upstream.Run(t, 2*time.Minute, chatAnswerProgram, stdin.Bytes())))
	if len(verdicts) != len(bodies) {
		t.Fatalf("upstream printed %d verdicts for %d answers", len(verdicts), len(bodies))
	}
	accepted := 0
	for i, b := range bodies {
		peer, _ := fakeOpenAI(t, http.StatusOK, b)
		base, _, stop := start(t, upstreamConfig(peer.URL), server.Options{})
		status, _, raw := postRaw(t, chatURL(base), `{"messages":[{"role":"user","content":"hi"}]}`)
		stop()
		want := http.StatusBadGateway
		if verdicts[i] == "true" {
			want = http.StatusOK
			accepted++
		}
		if status != want {
			t.Errorf("%s\n  upstream validates: %s; gymlens %d: %s", b, verdicts[i], status, raw)
		}
	}
	t.Logf("%d answers, upstream validates %d", len(bodies), accepted)
	if accepted < len(bodies)/4 || accepted > len(bodies)*3/4 {
		t.Errorf("upstream validates %d of %d answers: the corpus should hold both kinds", accepted, len(bodies))
	}

	// Through the Responses route the lax numbers are read as numbers.
	peer, _ := fakeOpenAI(t, http.StatusOK, answer(`"1767225600"`, `"0"`, `"3"`, ``))
	cfg := upstreamConfig(peer.URL)
	cfg.Upstream.API = model.APIChatCompletions
	base, _, _ := start(t, cfg, server.Options{})
	status, _, raw := postRaw(t, responsesURL(base), `{"input":"hi"}`)
	if status != http.StatusOK {
		t.Fatalf("responses route: status %d: %s", status, raw)
	}
	var r protocol.Response
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	if r.CreatedAt != 1767225600 || r.Usage == nil || r.Usage.InputTokens != 3 || r.Usage.InputTokensDetails.CachedTokens == nil ||
		*r.Usage.InputTokensDetails.CachedTokens != 3 || r.OutputText() != "4" {
		t.Errorf("mapped response %s", raw)
	}
}

// TestUpstreamResponsesStreamFlag posts Responses requests whose stream
// takes each form Literal[False] takes in lax mode (false, null, numbers
// equal to 0) or refuses to a gymlens model server over loopback, and
// requires nemo-gym 0.7.0's request model's verdict: 200 where it
// validates, 422 at body.stream where not.
func TestUpstreamResponsesStreamFlag(t *testing.T) {
	upstream.Python(t)
	if testing.Short() {
		t.Skip("runs upstream's python")
	}
	const program = `
import json, sys
from pydantic import ValidationError
from nemo_gym.openai_utils import NeMoGymResponseCreateParamsNonStreaming as M
for line in sys.stdin:
    try:
        M.model_validate(json.loads(line))
        print("true")
    except ValidationError:
        print("false")
`
	var bodies []string
	for _, v := range []string{`false`, `null`, `0`, `0.0`, `-0`, `0e3`, `true`, `1`, `"false"`, `"0"`, `0.5`, `[]`} {
		bodies = append(bodies, `{"input":"hi","stream":`+v+`}`)
	}
	verdicts := strings.Fields(string(upstream.Run(t, time.Minute, program, []byte(strings.Join(bodies, "\n")+"\n"))))
	if len(verdicts) != len(bodies) {
		t.Fatalf("upstream printed %d verdicts for %d bodies", len(verdicts), len(bodies))
	}
	base, _, _ := start(t, withP(0, 1), server.Options{})
	accepted := 0
	for i, b := range bodies {
		status, _, raw := postRaw(t, responsesURL(base), b)
		if verdicts[i] == "true" {
			accepted++
			if status != http.StatusOK {
				t.Errorf("%s: upstream validates, gymlens %d: %s", b, status, raw)
			}
			continue
		}
		if status != http.StatusUnprocessableEntity {
			t.Errorf("%s: upstream refuses, gymlens %d: %s", b, status, raw)
			continue
		}
		for _, fe := range fieldErrors(t, raw) {
			if got := locString(normLoc(fe.Loc)); got != "body.stream" {
				t.Errorf("%s: error at %s, want body.stream", b, got)
			}
		}
	}
	if accepted != 6 {
		t.Errorf("upstream validates %d of %d stream forms, want 6 (false, null and the zeros)", accepted, len(bodies))
	}
}
