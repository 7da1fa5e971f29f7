package protocol_test

import (
	"bufio"
	"bytes"
	"encoding/json"

	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gymlens/gymlens/internal/upstream"
	"github.com/gymlens/gymlens/protocol"
)

// diffProgram validates each body of its input (one {"model", "body"}
// object a line) with upstream's own pydantic model and prints one line
// per body: {"ok": bool, "locs": [...]}.
//
// The locations are normalized so that they can be compared with ours:
// pydantic puts the name of a union member into a location (a class
// name, "str", "list[...]", a discriminator tag) and, for a union that is
// not tagged, reports the errors of every member. Walking the body along
// a location tells such labels from member names. At each union, the
// members whose errors are at the union itself, or at its "type" member,
// are ruled out (the value is of another kind, or tagged for another
// member; a chat message's role tells them apart too); when exactly one member remains its errors stand, with the
// label dropped, otherwise the union yields one location, its own. This
// is the rule protocol's shapes report by.
const diffProgram = `
import json, sys
from pydantic import ValidationError
from nemo_gym.openai_utils import NeMoGymResponseCreateParamsNonStreaming, NeMoGymResponse, NeMoGymChatCompletionCreateParamsNonStreaming, NeMoGymChatCompletion
from nemo_gym.base_resources_server import BaseVerifyRequest, BaseVerifyResponse
from nemo_gym.config_types import AggregateMetricsRequest

MODELS = {
    "params": NeMoGymResponseCreateParamsNonStreaming,
    "response": NeMoGymResponse,
    "verify_request": BaseVerifyRequest,
    "verify_response": BaseVerifyResponse,
    "aggregate": AggregateMetricsRequest,
    "chat": NeMoGymChatCompletionCreateParamsNonStreaming,
    "chat_completion": NeMoGymChatCompletion,
}
from nemo_gym.openai_utils import _RESPONSE_INPUT_ITEM_TAG_BY_CLASS, _RESPONSE_OUTPUT_ITEM_TAG_BY_CLASS
TAGS = set(_RESPONSE_INPUT_ITEM_TAG_BY_CLASS.values()) | set(_RESPONSE_OUTPUT_ITEM_TAG_BY_CLASS.values())

def is_label(el, cur):
    if not isinstance(cur, dict):
        return True
    if el in cur:
        return False  # a member, even one named like a class ("A" in an env map)
    return "[" in el or el[:1].isupper() or el in ("str", "int", "float", "bool") or el in TAGS

def steps(loc, body):
    cur, out = body, []
    for j, el in enumerate(loc):
        if isinstance(el, int):
            out.append(("i", el))
            cur = cur[el] if isinstance(cur, list) and 0 <= el < len(cur) else None
        elif out and out[-1][0] == "i" and isinstance(cur, dict) and cur.get("type") == el and j + 1 < len(loc):
            # the tag of a union tagged by type (a chat tool or tool
            # call); a member's own error ends at the member
            out.append(("L", el))
        elif is_label(el, cur):
            out.append(("L", el))
        else:
            out.append(("k", el))
            cur = cur.get(el) if isinstance(cur, dict) else None
    return out

def reduce(paths):
    out, groups = set(), {}
    for p in paths:
        j = next((i for i, s in enumerate(p) if s[0] == "L"), None)
        if j is None:
            out.add(tuple(v for _, v in p))
        else:
            groups.setdefault(tuple(p[:j]), []).append(p)
    for pre, ps in groups.items():
        n = len(pre)
        branches = {}
        for p in ps:
            branches.setdefault(p[n][1], []).append(p[:n] + p[n + 1:])
        chosen = list(branches.values())
        if len(chosen) > 1:
            chosen = [b for b in chosen if not any(len(p) == n or (len(p) == n + 1 and p[n] in (("k", "type"), ("k", "role"))) for p in b)]
        if len(chosen) == 1:
            out |= reduce(chosen[0])
        else:
            out.add(tuple(v for _, v in pre))
    return out

for line in sys.stdin:
    req = json.loads(line)
    try:
        m = MODELS[req["model"]].model_validate(req["body"])
        out = {"ok": True, "locs": []}
        if req["model"] == "chat":
            # what upstream's model server forwards (openai_model/app.py:100);
            # an Iterable member dumps as an iterator, which json refuses
            try:
                out["dump"] = json.loads(json.dumps(m.model_dump(exclude_unset=True)))
            except (TypeError, ValueError):
                pass
        print(json.dumps(out))
    except ValidationError as e:
        locs = reduce([steps(err["loc"], req["body"]) for err in e.errors()])
        print(json.dumps({"ok": False, "locs": sorted([list(l) for l in locs], key=json.dumps)}))
    except (TypeError, ValueError) as e:
        # upstream's discriminator itself fails (a role that is a list or
        # an object cannot be looked up in a set): FastAPI answers 500.
        print(json.dumps({"ok": False, "crash": repr(e)}))
    sys.stdout.flush()
`

// diffModel is one upstream model and how protocol decodes and validates
// the same body.
type diffModel struct {
	name  string
	check func(body []byte) (decodeErr bool, err error)
}

// decodeAndValidate decodes body into a T and validates it, as a server
// route does: a decode error is a 422 too.
func decodeAndValidate[T any, PT interface {
	*T
	Validate() error
}](body []byte) (bool, error) {
	var v T
	if err := json.Unmarshal(body, &v); err != nil {
		return true, err
	}
	return false, PT(&v).Validate()
}

var diffModels = []diffModel{
	{"params", decodeAndValidate[protocol.ResponseCreateParams]},
	{"response", decodeAndValidate[protocol.Response]},
	{"verify_request", decodeAndValidate[protocol.VerifyRequest]},
	{"verify_response", decodeAndValidate[protocol.VerifyResponse]},
	{"aggregate", decodeAndValidate[protocol.AggregateMetricsRequest]},
	{"chat", func(body []byte) (bool, error) { return false, protocol.ValidateChatParams(body) }},
	{"chat_completion", func(body []byte) (bool, error) { return false, protocol.ValidateChatCompletion(body) }},
}

// TestUpstreamDifferential validates a corpus of bodies with upstream's
// pydantic models and with protocol's decoders, and requires the same
// verdict for every body and the same set of error locations (see
// diffProgram for how pydantic's are normalized). Where protocol failed
// while decoding, it stops at the first bad member, so only that one
// location is compared: it must be one of pydantic's, or lie below one.
//
// The corpus (see corpus) is generated from a fixed seed: valid bodies
// built from every item, part, tool and tool-choice form upstream
// accepts, then single mutations of them.
func TestUpstreamDifferential(t *testing.T) {
	upstream.Python(t)
	if testing.Short() {
		t.Skip("runs upstream's python")
	}
	rng := rand.New(rand.NewPCG(7, 39))
	type entry struct {
		model diffModel
		body  []byte
	}
	var all []entry
	var stdin bytes.Buffer
	for _, m := range diffModels {
		for _, body := range corpus(rng, m.name) {
			all = append(all, entry{m, body})
			line, err := json.Marshal(map[string]json.RawMessage{"model": mustJSON(m.name), "body": body})
			if err != nil {
				t.Fatalf("corpus body %s: %v", body, err)
			}
			stdin.Write(line)
			stdin.WriteByte('\n')
		}
	}
	out := upstream.Run(t, 5*time.Minute, diffProgram, stdin.Bytes())
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	type verdict struct {
		OK    bool            `json:"ok"`
		Locs  [][]any         `json:"locs"`
		Crash string          `json:"crash"`
		Dump  json.RawMessage `json:"dump"`
	}
	total, agree, crashes, accepted := map[string]int{}, map[string]int{}, map[string]int{}, map[string]int{}
	dumps, dumpsAgree := 0, 0
	shown := 0
	i := 0
	for ; sc.Scan(); i++ {
		if i >= len(all) {
			t.Fatalf("upstream printed more lines than bodies")
		}
		var py verdict
		if err := json.Unmarshal(sc.Bytes(), &py); err != nil {
			t.Fatalf("upstream line %q: %v", sc.Bytes(), err)
		}
		e := all[i]
		decodeErr, err := e.model.check(e.body)
		goLocs := locsOf(err)
		pyLocs := make([]string, len(py.Locs))
		for j, l := range py.Locs {
			for k, el := range l {
				if f, isNum := el.(float64); isNum {
					l[k] = int(f)
				}
			}
			pyLocs[j] = protocol.LocString(l)
		}
		slices.Sort(pyLocs)
		total[e.model.name]++
		if py.OK {
			accepted[e.model.name]++
		}
		ok := (err == nil) == py.OK
		if py.Crash != "" {
			crashes[e.model.name]++
		} else if ok && err != nil {
			if decodeErr {
				ok = len(goLocs) == 1 && coveredBy(goLocs[0], pyLocs)
			} else {
				ok = slices.Equal(goLocs, pyLocs)
			}
		}
		if ok && py.Dump != nil {
			// The members protocol forwards are upstream's dump.
			dumps++
			got, _ := json.Marshal(protocol.NormalizeChatParams(e.body))
			if sameValue(got, py.Dump) {
				dumpsAgree++
			} else if shown++; shown <= 25 {
				t.Errorf("chat %s\n  upstream forwards %s\n  protocol forwards %s", e.body, py.Dump, got)
			}
		}
		if ok {
			agree[e.model.name]++
			continue
		}
		if shown++; shown <= 25 {
			t.Errorf("%s %s\n  upstream ok=%v locs=%q\n  protocol err=%v (decode=%v) locs=%q", e.model.name, e.body, py.OK, pyLocs, err, decodeErr, goLocs)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if i != len(all) {
		t.Fatalf("upstream printed %d lines for %d bodies", i, len(all))
	}
	t.Logf("chat: %d accepted bodies dumped by upstream, %d forwarded alike", dumps, dumpsAgree)
	if dumps < 500 {
		t.Errorf("only %d chat dumps compared", dumps)
	}
	for _, m := range diffModels {
		t.Logf("%s: %d bodies, %d agree (upstream accepts %d; answers %d with 500, not 422, as its discriminator raises)",
			m.name, total[m.name], agree[m.name], accepted[m.name], crashes[m.name])
		if total[m.name] < 1000 || accepted[m.name] < total[m.name]/5 || accepted[m.name] > total[m.name]*4/5 {
			t.Errorf("%s: %d bodies, %d accepted: want at least 1000, a fifth to four fifths accepted", m.name, total[m.name], accepted[m.name])
		}
	}
}

// locsOf lists the locations of a validation failure, sorted.
func locsOf(err error) []string {
	if err == nil {
		return nil
	}
	ve := protocol.DecodeError(err)
	var out []string
	for _, d := range ve.Detail {
		out = append(out, protocol.LocString(d.Loc))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// coveredBy reports whether loc is one of locs or lies below one.
func coveredBy(loc string, locs []string) bool {
	for _, l := range locs {
		if loc == l || strings.HasPrefix(loc, l+".") || strings.HasPrefix(loc, l+"[") || l == "" {
			return true
		}
	}
	return false
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// raw parses a fixture.
func raw(s string) any {
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		panic(fmt.Sprintf("fixture %s: %v", s, err))
	}
	return v
}

// Fixtures written from upstream's models: one valid form of each input
// item, output item, content part, tool and tool choice. The nested*
// fixtures below carry the nested models (actions, operations, filters,
// formats, ...) that mutateDeep reaches into.
var (
	validInputItems = []string{
		`{"role":"user","content":"hi"}`,
		`{"type":"message","role":"user","content":"hi","phase":null}`,
		`{"type":"message","role":"assistant","content":"hi","phase":"commentary"}`,
		`{"type":"message","role":"system","content":[{"type":"input_text","text":"be brief"}],"status":"completed"}`,
		`{"type":"message","role":"developer","content":[{"type":"input_image","detail":"auto","image_url":"https://x/i.png"},{"type":"input_file","file_id":"f"}]}`,
		`{"type":"message","role":"user","content":[{"type":"input_video","video_url":"https://x/v.mp4"}]}`,
		`{"type":"message","id":"msg_1","role":"assistant","status":"completed","phase":"final_answer","content":[{"type":"output_text","text":"4","annotations":[]}]}`,
		`{"type":"message","id":"msg_2","role":"assistant","content":[{"type":"refusal","refusal":"no"}]}`,
		`{"type":"function_call","call_id":"c1","name":"f","arguments":"{}","namespace":"ns","id":null,"status":null}`,
		`{"type":"function_call_output","call_id":"c1","output":"ok","id":null,"status":null}`,
		`{"type":"function_call_output","call_id":"c1","output":[{"type":"input_text","text":"ok"}]}`,
		`{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"think"}],"content":null,"encrypted_content":null}`,
		`{"type":"compaction","id":"cp_1","encrypted_content":"opaque"}`,
		`{"type":"compaction_trigger"}`,
		`{"type":"additional_tools","role":"user","tools":[{"type":"function","name":"f","parameters":null,"strict":null}]}`,
		`{"type":"shell_call","id":"sh_1","call_id":"c2","action":{"commands":["ls"]},"status":"completed"}`,
		`{"type":"shell_call_output","id":"sho_1","call_id":"c2","output":[],"status":"completed"}`,
		`{"type":"apply_patch_call","id":"ap_1","call_id":"c3","operation":{"type":"delete_file","path":"a.txt"},"status":"completed"}`,
		`{"type":"apply_patch_call_output","id":"apo_1","call_id":"c3","status":"failed","output":null}`,
		`{"type":"tool_search_call","id":"ts_1","arguments":{"query":"weather"},"execution":"client","status":"completed"}`,
		`{"type":"tool_search_output","id":"tso_1","execution":"server","status":"completed","tools":[]}`,
		`{"type":"computer_call_output","call_id":"c4","output":{"type":"computer_screenshot","image_url":"https://x/s.png"},"status":"failed"}`,
		`{"type":"mcp_call","arguments":"{}","name":"m","server_label":null}`,
		`{"type":"custom_tool_call","call_id":"c5","input":"x","name":"g"}`,
		`{"type":"custom_tool_call_output","call_id":"c5","output":"y"}`,
		`{"type":"local_shell_call_output","id":"ls_1","output":"done"}`,
		`{"type":"mcp_approval_response","approval_request_id":"a1","approve":true}`,
		`{"role":"user","content":"hi","prompt_token_ids":[1,2],"generation_token_ids":[3],"generation_log_probs":[-0.5]}`,
	}
	validOutputItems = []string{
		`{"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"4","annotations":[],"logprobs":null}],"phase":null}`,
		`{"type":"message","id":"msg_2","role":"assistant","status":"completed","content":[{"type":"output_text","text":"x","annotations":[{"type":"url_citation","url":"https://x","title":"t","start_index":0,"end_index":1}]}]}`,
		`{"type":"message","role":"user","content":"hi"}`,
		`{"type":"function_call","call_id":"c1","name":"f","arguments":"{}","namespace":null,"id":null,"status":null}`,
		`{"type":"function_call_output","call_id":"c1","output":"ok","id":null,"status":null}`,
		`{"type":"function_call_output","call_id":"c1","output":"ok","id":"fco_1","status":"completed"}`,
		`{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"e"}`,
		`{"type":"compaction","id":"cp_1","encrypted_content":"opaque"}`,
		`{"type":"additional_tools","id":"at_1","role":"developer","tools":[]}`,
		`{"type":"shell_call","id":"sh_1","call_id":"c2","action":{"commands":["ls"]},"status":"in_progress","environment":null}`,
		`{"type":"shell_call_output","id":"sho_1","call_id":"c2","output":[],"status":"completed","max_output_length":null}`,
		`{"type":"apply_patch_call","id":"ap_1","call_id":"c3","operation":{"type":"delete_file","path":"a.txt"},"status":"completed"}`,
		`{"type":"apply_patch_call_output","id":"apo_1","call_id":"c3","status":"completed"}`,
		`{"type":"tool_search_call","id":"ts_1","arguments":{},"execution":"server","status":"completed","call_id":null}`,
		`{"type":"tool_search_output","id":"tso_1","execution":"client","status":"incomplete","tools":[]}`,
		`{"type":"computer_call_output","id":"cco_1","call_id":"c4","output":{"type":"computer_screenshot"},"status":"failed"}`,
		`{"type":"mcp_list_tools","tools":[1,"x"]}`,
		`{"type":"web_search_call","id":"ws_1","action":{"type":"search","query":"q"},"status":"completed"}`,
	}
	validTools = []string{
		`{"type":"function","name":"f","parameters":{"type":"object"},"strict":true,"description":"d"}`,
		`{"type":"function","name":"f","parameters":null,"strict":null,"defer_loading":null}`,
		`{"type":"shell"}`,
		`{"type":"shell","environment":null}`,
		`{"type":"apply_patch"}`,
		`{"type":"computer"}`,
		`{"type":"tool_search","execution":"client"}`,
		`{"type":"namespace","name":"n","description":"d","tools":[]}`,
		`{"type":"web_search"}`,
		`{"type":"file_search","vector_store_ids":["vs"]}`,
		`{"type":"mcp","server_label":"s","require_approval":"never"}`,
		`{"type":"code_interpreter","container":"auto"}`,
		`{"type":"custom","name":"g"}`,
		`{"type":"local_shell"}`,
		`{"type":"computer_use_preview","display_height":1,"display_width":1,"environment":"linux"}`,
	}
	validToolChoices = []string{`"auto"`, `"none"`, `"required"`, `{"type":"shell"}`, `{"type":"apply_patch"}`,
		`{"type":"function","name":"f"}`, `{"type":"file_search"}`, `{"type":"mcp","server_label":"s"}`,
		`{"type":"allowed_tools","mode":"auto","tools":[]}`, `{"type":"custom","name":"g"}`}
	// newParamValues are values of the keys openai 2.44 added, valid and
	// not.
	newParamValues = map[string][]string{
		"context_management":     {`null`, `[]`, `[{"type":"compaction"}]`, `[{"type":"compaction","compact_threshold":1000}]`, `[{"type":"x","y":1}]`, `[{}]`, `{}`, `"x"`, `[{"type":"compaction","compact_threshold":"many"}]`},
		"conversation":           {`null`, `"conv_1"`, `{"id":"conv_1"}`, `{"id":"c","x":1}`, `{}`, `5`, `[]`},
		"moderation":             {`null`, `{"model":"omni"}`, `{}`, `{"model":5}`, `{"model":"m","x":1}`, `"m"`},
		"prompt_cache_key":       {`null`, `"k"`, `5`, `{}`},
		"prompt_cache_retention": {`null`, `"in_memory"`, `"24h"`, `"1h"`, `5`},
		"safety_identifier":      {`null`, `"u"`, `[]`, `true`},
		"stream_options":         {`null`, `{}`, `{"include_obfuscation":false}`, `{"include_obfuscation":"x"}`, `{"other":1}`, `[]`},
	}
	// oldParamValues are values of the older keys.
	oldParamValues = map[string][]string{
		"background":           {`null`, `true`, `"x"`, `"on"`, `0`},
		"include":              {`null`, `[]`, `["reasoning.encrypted_content"]`, `["nope"]`, `"x"`},
		"instructions":         {`null`, `"be brief"`, `5`},
		"max_output_tokens":    {`null`, `64`, `"x"`, `1.5`, `64.0`, `" 64 "`, `true`, `"1_000"`},
		"max_tool_calls":       {`null`, `3`, `[]`},
		"metadata":             {`null`, `{}`, `{"a":"b"}`, `{"a":1}`, `[]`},
		"model":                {`null`, `"m"`, `5`},
		"parallel_tool_calls":  {`true`, `false`, `null`, `"x"`, `"false"`, `0`, `2`, `"yes"`},
		"previous_response_id": {`null`, `"r"`, `5`},
		"prompt":               {`null`, `{"id":"p"}`, `{}`, `{"id":"p","x":1}`, `5`},
		"reasoning":            {`null`, `{}`, `{"effort":"low"}`, `{"effort":"bogus"}`, `{"x":1}`, `"low"`},
		"service_tier":         {`null`, `"auto"`, `"x"`},
		"store":                {`null`, `false`, `"x"`, `1`, `"no"`, `0.5`},
		"temperature":          {`null`, `0.5`, `1`, `"x"`, `{}`, `"0.5"`, `true`, `"1e-1"`},
		"text":                 {`null`, `{}`, `{"verbosity":"low"}`, `{"verbosity":"x"}`, `{"x":1}`},
		"tool_choice":          {`null`, `"any"`, `{"type":"teleport"}`, `{"type":"function"}`, `{"type":"function","name":"f","x":1}`, `{"name":"f"}`, `5`},
		"tools":                {`null`, `[]`, `{}`, `[5]`, `[{"name":"f"}]`, `[{"type":"teleport"}]`},
		"top_logprobs":         {`null`, `2`, `"x"`, `"2"`, `2.5`},
		"top_p":                {`null`, `0.9`, `[]`, `"0.9"`, `false`},
		"truncation":           {`null`, `"auto"`, `"x"`},
		"user":                 {`null`, `"u"`, `5`},
		"stream":               {`null`, `false`, `true`},
		"input":                {`null`, `"hi"`, `[]`, `5`, `{}`, `[5]`, `["x"]`},
	}
	// memberValues are values a mutation gives an item's, part's or tool's
	// member.
	memberValues = []string{`null`, `"x"`, `5`, `true`, `[]`, `{}`, `"completed"`, `"failed"`, `"commentary"`,
		`"final_answer"`, `"user"`, `"assistant"`, `"developer"`, `"message"`, `"item_reference"`, `[{"type":"input_text","text":"t"}]`,
		`"true"`, `1`, `"5"`, `5.0`, `0`,
		`[{"type":"output_text","text":"t","annotations":[]}]`, `[{"type":"bogus"}]`, `[{"text":"t"}]`, `"in_progress"`}
	// partForms are content parts, valid and not, for a message.
	partForms = []string{`{"type":"input_text","text":"t"}`, `{"type":"input_text"}`, `{"type":"input_text","text":"t","x":1}`,
		`{"type":"output_text","text":"t","annotations":[],"x":null}`, `{"type":"input_text","text":null}`, `{"type":"input_image","detail":"auto","image_url":null}`, `{"type":"input_image","detail":"low"}`,
		`{"type":"input_image","detail":"huge"}`, `{"type":"input_image"}`, `{"type":"input_file"}`, `{"type":"input_video","video_url":""}`,
		`{"type":"input_video","video_url":{"url":"https://x"}}`, `{"type":"input_video"}`, `{"type":"input_video","video":"https://x","video_url":"https://y"}`,
		`{"type":"output_text","text":"t","annotations":[]}`, `{"type":"output_text","text":"t"}`, `{"type":"output_text","text":"t","annotations":[{"type":"bogus"}]}`,
		`{"type":"output_text","text":"t","annotations":[{"type":"file_path","file_id":"f","index":0}]}`, `{"type":"output_text","text":"t","annotations":[{"type":"file_path"}]}`,
		`{"type":"refusal","refusal":"no"}`, `{"type":"refusal"}`, `{"refusal":"no"}`, `{"text":"t"}`, `{"text":"t","annotations":[]}`, `{}`,
		`{"type":"bogus"}`, `"text"`, `5`}
	// itemForms are items a mutation puts in a list besides the valid ones.
	itemForms = []string{`{"type":"item_reference","id":"x"}`, `{"type":"teleport"}`, `{"type":null}`, `{"type":5}`, `{}`, `5`, `"x"`,
		`{"role":"bogus","content":"x"}`, `{"role":"user"}`, `{"id":"m","content":[]}`, `{"arguments":"{}","name":"f"}`,
		`{"call_id":"c","output":"o"}`, `{"id":"r","summary":[]}`, `{"type":"message","content":"x"}`,
		`{"type":"message","role":"user","content":"x","prompt_token_ids":[1]}`,
		`{"type":"message","role":"user","content":"x","prompt_token_ids":["a"],"generation_token_ids":[1],"generation_log_probs":[0.5]}`,
		`{"type":"function_call","call_id":"c","name":"f","arguments":"{}","prompt_token_ids":[1],"generation_token_ids":[2],"generation_log_probs":[0.1],"routed_experts":5}`,
		`{"type":"computer_call_output","call_id":"c","output":{},"status":"bogus"}`,
		`{"type":"additional_tools","tools":[]}`, `{"type":"additional_tools"}`, `{"type":"compaction"}`,
		`{"type":"message","role":"user","content":[],"status":"completed"}`, `{"type":"message","role":"assistant","content":[]}`}
)

// corpus returns the bodies for one model, built with rng.
func corpus(rng *rand.Rand, model string) [][]byte {
	var out [][]byte
	add := func(v any) {
		b, err := json.Marshal(v)
		if err != nil {
			panic(err)
		}
		out = append(out, b)
	}
	switch model {
	case "params":
		for i := 0; i < 2500; i++ {
			add(mutateParams(rng, validParams(rng)))
		}
		for i := 0; i < 2000; i++ {
			add(mutateNestedParams(rng, validParams(rng)))
		}
	case "response":
		for i := 0; i < 1500; i++ {
			add(mutateResponse(rng, validResponse(rng)))
		}
		for i := 0; i < 2500; i++ {
			add(mutateNestedResponse(rng, validResponse(rng)))
		}
	case "verify_request", "verify_response":
		for i := 0; i < 1000; i++ {
			row := map[string]any{"responses_create_params": validParams(rng), "response": validResponse(rng),
				"expected_answer": "4", "_ng_task_index": 1}
			if model == "verify_response" {
				row["reward"] = 1.0
			}
			add(mutateRow(rng, row, model))
		}
	case "chat":
		for i := 0; i < 1500; i++ {
			add(mutateChat(rng, validChat(rng)))
		}
		for i := 0; i < 1500; i++ {
			add(mutateNestedChat(rng, validChat(rng)))
		}
	case "chat_completion":
		for i := 0; i < 1500; i++ {
			add(mutateChatCompletion(rng, validChatCompletion(rng)))
		}
	case "aggregate":
		entries := []string{`{"reward":1,"_ng_task_index":0}`, `{}`, `{"reward":0.5,"mask_sample":true,"response":{"usage":null}}`,
			`null`, `1`, `"x"`, `[]`, `[{"reward":1}]`}
		for i := 0; i < 1000; i++ {
			body := map[string]any{}
			switch rng.IntN(10) {
			case 0: // verify_responses missing
			case 1:
				body["verify_responses"] = pick(rng, []string{`null`, `{}`, `"x"`, `5`})
			default:
				list := []any{}
				for range rng.IntN(4) {
					list = append(list, raw(entries[rng.IntN(3)]))
				}
				if len(list) > 0 && rng.IntN(3) == 0 {
					list[rng.IntN(len(list))] = pick(rng, entries)
				}
				body["verify_responses"] = list
			}
			if rng.IntN(5) == 0 {
				body["x_extra"] = pick(rng, memberValues) // the model ignores members it does not declare
			}
			add(body)
		}
	}
	return out
}

// pick returns a random element of list, parsed.
func pick(rng *rand.Rand, list []string) any { return raw(list[rng.IntN(len(list))]) }

// validParams builds a valid request: random items, tools and a tool
// choice; half the time as upstream's agent dumps it (all 30 keys, the
// new ones null).
func validParams(rng *rand.Rand) map[string]any {
	p := map[string]any{}
	if rng.IntN(4) == 0 {
		p["input"] = "hi"
	} else {
		var items []any
		for range 1 + rng.IntN(4) {
			items = append(items, pick(rng, validInputItems))
		}
		p["input"] = items
	}
	if rng.IntN(2) == 0 {
		var tools []any
		for range rng.IntN(3) {
			tools = append(tools, pick(rng, validTools))
		}
		p["tools"] = append([]any{}, tools...)
		p["tool_choice"] = pick(rng, validToolChoices)
	}
	if rng.IntN(2) == 0 {
		for _, k := range protocol.ParamKeys { // a slice: the order is fixed
			if _, ok := p[k]; !ok {
				p[k] = nil
			}
		}
		p["parallel_tool_calls"], p["tool_choice"] = true, "auto"
		if p["tools"] == nil {
			p["tools"] = []any{}
		}
	}
	for _, k := range sortedKeys(newParamValues) {
		if rng.IntN(6) == 0 {
			p[k] = raw(newParamValues[k][rng.IntN(3)]) // the valid ones come first
		}
	}
	return p
}

// mutateParams applies one mutation to a valid request.
func mutateParams(rng *rand.Rand, p map[string]any) map[string]any {
	switch rng.IntN(10) {
	case 0: // a new key's value
		keys := sortedKeys(newParamValues)
		k := keys[rng.IntN(len(keys))]
		p[k] = pick(rng, newParamValues[k])
	case 1: // an older key's value
		keys := sortedKeys(oldParamValues)
		k := keys[rng.IntN(len(keys))]
		p[k] = pick(rng, oldParamValues[k])
	case 2: // a key upstream does not know, or input missing
		if rng.IntN(3) == 0 {
			delete(p, "input")
		} else {
			p[[]string{"frequency_penalty", "x", "seed"}[rng.IntN(3)]] = pick(rng, memberValues)
		}
	case 3, 4, 5: // an input item
		items, _ := p["input"].([]any)
		items = append(items, pick(rng, validInputItems))
		p["input"] = mutateList(rng, items, validInputItems)
	case 6, 7: // a tool
		tools, _ := p["tools"].([]any)
		tools = append(tools, pick(rng, validTools))
		i := rng.IntN(len(tools))
		if obj, ok := tools[i].(map[string]any); ok {
			mutateMember(rng, obj, []string{"type", "name", "parameters", "strict", "description", "defer_loading",
				"vector_store_ids", "execution", "tools", "environment", "container", "server_label", "bogus"})
		}
		p["tools"] = tools
	case 8: // a tool choice
		p["tool_choice"] = pick(rng, append(validToolChoices, oldParamValues["tool_choice"]...))
	case 9: // nothing: the valid body itself
	}
	return p
}

// mutateList changes one item of items: a member of it, a content part,
// or the whole item.
func mutateList(rng *rand.Rand, items []any, valid []string) []any {
	i := rng.IntN(len(items))
	switch rng.IntN(4) {
	case 0:
		items[i] = pick(rng, itemForms)
	case 1:
		if obj, ok := items[i].(map[string]any); ok {
			if c, ok := obj["content"].([]any); ok {
				obj["content"] = append(c, pick(rng, partForms))
			} else {
				obj["content"] = []any{pick(rng, partForms)}
			}
		}
	default:
		if obj, ok := items[i].(map[string]any); ok {
			mutateMember(rng, obj, []string{"type", "role", "content", "status", "phase", "namespace", "id", "call_id",
				"output", "arguments", "name", "summary", "encrypted_content", "action", "execution", "tools", "operation", "bogus"})
		}
	}
	return items
}

// mutateMember deletes, sets or adds one member of obj.
func mutateMember(rng *rand.Rand, obj map[string]any, keys []string) {
	k := keys[rng.IntN(len(keys))]
	if _, ok := obj[k]; ok && rng.IntN(3) == 0 {
		delete(obj, k)
		return
	}
	obj[k] = pick(rng, memberValues)
}

// validResponse builds a valid response, as a model server answers.
func validResponse(rng *rand.Rand) map[string]any {
	r := map[string]any{"id": "resp_1", "object": "response", "created_at": 1767225600, "model": "m",
		"parallel_tool_calls": true, "tool_choice": pick(rng, validToolChoices), "tools": []any{}}
	var output []any
	for range rng.IntN(4) {
		output = append(output, pick(rng, validOutputItems))
	}
	r["output"] = append([]any{}, output...)
	if rng.IntN(2) == 0 {
		r["completed_at"], r["moderation"], r["prompt_cache_retention"], r["status"] = nil, nil, nil, "completed"
		r["usage"] = raw(`{"input_tokens":1,"input_tokens_details":{"cached_tokens":null},"output_tokens":2,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":3}`)
	}
	if rng.IntN(3) == 0 {
		r["tools"] = []any{raw(`{"type":"function","name":"f","parameters":null,"strict":true}`), raw(`{"type":"shell"}`)}
	}
	return r
}

// responseValues are values of a response's members, valid and not.
var responseValues = map[string][]string{
	"completed_at":           {`null`, `1.5`, `"x"`, `{}`},
	"moderation":             {`null`, `{}`, `5`},
	"prompt_cache_retention": {`null`, `"24h"`, `"1h"`},
	"status":                 {`null`, `"completed"`, `"bogus"`},
	"id":                     {`null`, `5`},
	"created_at":             {`1.5`, `"1767225600"`, `true`, `"x"`, `null`},
	"parallel_tool_calls":    {`false`, `"true"`, `1`, `2`, `null`},
	"temperature":            {`null`, `"0.7"`, `[]`},
	"max_output_tokens":      {`null`, `"5"`, `5.5`},
	"object":                 {`"response"`, `"x"`, `null`},
	"output":                 {`[]`, `null`, `{}`},
	"tools":                  {`[]`, `null`, `[{"type":"teleport"}]`, `[{"type":"function"}]`, `[{"type":"apply_patch","x":1}]`, `[{"type":"namespace","name":"n"}]`},
	"tool_choice":            {`null`, `"any"`, `{"type":"shell","x":1}`, `{"type":"function"}`},
	"conversation":           {`null`, `{"id":"c"}`, `{}`},
	"prompt_cache_key":       {`null`, `"k"`, `5`},
	"safety_identifier":      {`null`, `5`},
	"usage": {`null`, `{"input_tokens":1}`,
		`{"input_tokens":"1","input_tokens_details":{"cached_tokens":"2"},"output_tokens":2.0,"output_tokens_details":{"reasoning_tokens":null},"total_tokens":true}`,
		`{"input_tokens":1.5,"input_tokens_details":{},"output_tokens":2,"output_tokens_details":null,"total_tokens":3}`},
	"x_extra": {`1`, `null`},
}

// mutateResponse applies one mutation to a valid response.
func mutateResponse(rng *rand.Rand, r map[string]any) map[string]any {
	switch rng.IntN(6) {
	case 0, 1:
		keys := sortedKeys(responseValues)
		k := keys[rng.IntN(len(keys))]
		if rng.IntN(8) == 0 {
			delete(r, k)
		} else {
			r[k] = pick(rng, responseValues[k])
		}
	case 2, 3, 4:
		output, _ := r["output"].([]any)
		output = append(output, pick(rng, validOutputItems))
		r["output"] = mutateList(rng, output, validOutputItems)
	}
	return r
}

// mutateRow applies one mutation to a verify request or response.
func mutateRow(rng *rand.Rand, row map[string]any, model string) map[string]any {
	switch rng.IntN(8) {
	case 0:
		row["responses_create_params"] = mutateParams(rng, row["responses_create_params"].(map[string]any))
	case 1:
		row["response"] = mutateResponse(rng, row["response"].(map[string]any))
	case 2:
		delete(row, []string{"responses_create_params", "response", "reward"}[rng.IntN(3)])
	case 3:
		row[[]string{"responses_create_params", "response", "reward", "_ng_rollout_id"}[rng.IntN(4)]] = pick(rng, []string{`null`, `5`, `"x"`, `[]`, `"1.0"`, `true`})
	case 4:
		if model == "verify_response" {
			row[[]string{protocol.KeyMaskSample, protocol.KeyFailureKind, protocol.KeyFailureReason}[rng.IntN(3)]] =
				pick(rng, []string{`null`, `true`, `false`, `"judge_failed"`, `5`, `"x"`, `[]`, `"yes"`, `1`, `"env:timeout"`})
		}
	case 5:
		row["extra_"+fmt.Sprint(rng.IntN(3))] = pick(rng, memberValues)
	}
	return row
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Chat fixtures, from upstream's chat TypedDicts.
var (
	validChatMessages = []string{
		`{"role":"system","content":"Be exact."}`,
		`{"role":"developer","content":[{"type":"text","text":"rules"}],"name":"d"}`,
		`{"role":"user","content":"hi"}`,
		`{"role":"user","content":[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"https://x/i.png","detail":"low"}},` +
			`{"type":"input_audio","input_audio":{"data":"AA","format":"flac"}},{"type":"file","file":{"file_id":"f"}},{"type":"video_url","video_url":"https://x/v.mp4"}]}`,
		`{"role":"assistant","content":"a"}`,
		`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"},"name":"f"}]}`,
		`{"role":"assistant","content":[{"type":"text","text":"a"},{"type":"refusal","refusal":"no"}],"reasoning_content":"think","refusal":null}`,
		`{"role":"assistant","tool_calls":[{"id":"c2","type":"custom","custom":{"name":"g","input":"x"}}]}`,
		`{"role":"tool","content":"42","tool_call_id":"c1"}`,
		`{"role":"tool","content":[{"type":"text","text":"42"}],"tool_call_id":"c1"}`,
		`{"role":"assistant","content":"a","prompt_token_ids":[1],"generation_token_ids":[2],"generation_log_probs":[-0.1],"routed_experts":null}`,
	}
	validChatTools = []string{
		`{"type":"function","function":{"name":"f","parameters":{"type":"object"},"strict":true,"description":"d"}}`,
		`{"type":"function","function":{"name":"f"}}`,
		`{"type":"custom","custom":{"name":"g"}}`,
	}
	chatToolChoices = []string{`"auto"`, `"none"`, `"required"`, `{"type":"function","function":{"name":"f"}}`,
		`{"type":"custom","custom":{"name":"g"}}`, `{"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[]}}`,
		`null`, `"any"`, `{"type":"function"}`, `{"type":"function","name":"f"}`, `{"type":"teleport"}`, `5`}
	chatValues = map[string][]string{
		"model":                  {`null`, `"m"`, `5`},
		"frequency_penalty":      {`null`, `0.5`, `"x"`},
		"logit_bias":             {`null`, `{"1":2}`, `{"1":"x"}`, `[]`},
		"logprobs":               {`null`, `true`, `{}`},
		"max_completion_tokens":  {`null`, `5`, `1.5`},
		"max_tokens":             {`null`, `5`, `"x"`},
		"metadata":               {`null`, `{"a":"b"}`, `{"a":1}`},
		"moderation":             {`null`, `{"model":"m"}`, `{}`, `{"model":"m","x":1}`},
		"modalities":             {`null`, `["text"]`, `["video"]`},
		"n":                      {`null`, `1`, `[]`},
		"parallel_tool_calls":    {`true`, `null`, `"x"`},
		"prediction":             {`null`, `{"type":"content","content":"x"}`, `{"type":"x","content":"x"}`, `{}`},
		"presence_penalty":       {`null`, `0`, `[]`},
		"prompt_cache_key":       {`null`, `"k"`, `5`},
		"prompt_cache_retention": {`null`, `"24h"`, `"1h"`},
		"reasoning_effort":       {`null`, `"low"`, `"max"`},
		"response_format":        {`null`, `{"type":"text"}`, `"text"`},
		"seed":                   {`null`, `5`, `"x"`},
		"safety_identifier":      {`null`, `"u"`, `5`},
		"service_tier":           {`null`, `"flex"`, `"x"`},
		"stop":                   {`null`, `"x"`, `["x","y"]`, `5`, `[5]`},
		"store":                  {`null`, `false`, `{}`},
		"stream_options":         {`null`, `{"include_usage":true}`, `{"x":1}`, `[]`},
		"temperature":            {`null`, `0.7`, `"x"`},
		"top_logprobs":           {`null`, `2`, `{}`},
		"top_p":                  {`null`, `0.5`, `"x"`},
		"user":                   {`null`, `"u"`, `5`},
		"verbosity":              {`null`, `"low"`, `"loud"`},
		"web_search_options":     {`null`, `{}`, `"x"`},
		"stream":                 {`null`, `false`, `true`},
		"chat_template_kwargs":   {`null`, `{"enable_thinking":false}`, `"x"`},
		"thinking":               {`null`, `{"type":"adaptive"}`, `[]`},
		"output_config":          {`null`, `{"effort":"high"}`, `5`},
		"tools":                  {`null`, `[]`, `{}`, `[5]`, `[{"type":"teleport"}]`, `[{"function":{"name":"f"}}]`},
		"messages":               {`[]`, `null`, `{}`, `[5]`, `["x"]`},
	}
	chatMessageValues = []string{`null`, `"x"`, `5`, `[]`, `{}`, `"user"`, `"assistant"`, `"system"`, `"developer"`, `"tool"`,
		`"robot"`, `[{"type":"text","text":"t"}]`, `[{"type":"refusal","refusal":"r"}]`, `[{"type":"image_url","image_url":{"url":"u"}}]`,
		`[{"type":"text"}]`, `[{"type":"bogus"}]`, `[{"text":"t"}]`, `[5]`, `"c1"`,
		`[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]`, `[{"id":"c","type":"teleport"}]`, `[{"id":"c"}]`,
		`[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"},"extra":1}]`}
)

// validChat builds a valid chat request.
func validChat(rng *rand.Rand) map[string]any {
	var msgs []any
	for range 1 + rng.IntN(4) {
		msgs = append(msgs, pick(rng, validChatMessages))
	}
	c := map[string]any{"messages": msgs}
	if rng.IntN(2) == 0 {
		var tools []any
		for range 1 + rng.IntN(2) {
			tools = append(tools, pick(rng, validChatTools))
		}
		c["tools"] = tools
		c["tool_choice"] = pick(rng, chatToolChoices[:6])
	}
	for _, k := range sortedKeys(chatValues) {
		if k != "messages" && k != "tools" && rng.IntN(8) == 0 {
			c[k] = raw(chatValues[k][rng.IntN(2)]) // the valid ones come first
		}
	}
	return c
}

// mutateChat applies one mutation to a valid chat request.
func mutateChat(rng *rand.Rand, c map[string]any) map[string]any {
	switch rng.IntN(8) {
	case 0, 1:
		keys := sortedKeys(chatValues)
		k := keys[rng.IntN(len(keys))]
		c[k] = pick(rng, chatValues[k])
	case 2:
		if rng.IntN(3) == 0 {
			delete(c, "messages")
		} else {
			c[[]string{"functions", "function_call", "x", "reasoning"}[rng.IntN(4)]] = pick(rng, memberValues)
		}
	case 3, 4, 5:
		msgs, _ := c["messages"].([]any)
		msgs = append(msgs, pick(rng, validChatMessages))
		if obj, ok := msgs[rng.IntN(len(msgs))].(map[string]any); ok {
			keys := []string{"role", "content", "name", "tool_call_id", "tool_calls", "refusal", "reasoning_content", "audio", "bogus"}
			k := keys[rng.IntN(len(keys))]
			if _, ok := obj[k]; ok && rng.IntN(3) == 0 {
				delete(obj, k)
			} else {
				obj[k] = pick(rng, chatMessageValues)
			}
		}
		c["messages"] = msgs
	case 6:
		tools, _ := c["tools"].([]any)
		tools = append(tools, pick(rng, validChatTools))
		if obj, ok := tools[rng.IntN(len(tools))].(map[string]any); ok {
			mutateMember(rng, obj, []string{"type", "function", "custom", "bogus"})
		}
		c["tools"] = tools
	case 7:
		c["tool_choice"] = pick(rng, chatToolChoices)
	}
	return c
}

// Fixtures with nested models filled in, from openai 2.44's declarations
// (openai/types/responses/*.py, openai/types/chat/*.py, shared_params):
// items both unions take, items of one union only, request tools, and
// the nested parameter objects of a request, a response and a chat
// request.
var (
	nestedItems = []string{
		`{"type":"shell_call","id":"sh_1","call_id":"c2","action":{"commands":["ls","pwd"],"max_output_length":100,"timeout_ms":null},"status":"completed","environment":{"type":"container_reference","container_id":"cn"}}`,
		`{"type":"shell_call","id":"sh_2","call_id":"c2","action":{"commands":[]},"status":"in_progress","environment":{"type":"local"}}`,
		`{"type":"shell_call_output","id":"sho_1","call_id":"c2","status":"completed","output":[{"outcome":{"type":"exit","exit_code":0},"stdout":"a","stderr":""},{"outcome":{"type":"timeout"},"stdout":"","stderr":"t","created_by":null}]}`,
		`{"type":"local_shell_call","id":"lsc_1","call_id":"c6","status":"completed","action":{"type":"exec","command":["ls"],"env":{"A":"b"},"timeout_ms":5,"user":null,"working_directory":"/"}}`,
		`{"type":"web_search_call","id":"ws_1","status":"completed","action":{"type":"search","query":"q","queries":["q"],"sources":[{"type":"url","url":"https://x"}]}}`,
		`{"type":"web_search_call","id":"ws_2","status":"searching","action":{"type":"open_page","url":null}}`,
		`{"type":"web_search_call","id":"ws_3","status":"failed","action":{"type":"find_in_page","pattern":"p","url":"https://x"}}`,
		`{"type":"apply_patch_call","id":"ap_2","call_id":"c3","status":"in_progress","operation":{"type":"create_file","path":"a.txt","diff":"+a"}}`,
		`{"type":"apply_patch_call","id":"ap_3","call_id":"c3","status":"completed","operation":{"type":"update_file","path":"a.txt","diff":"-a"}}`,
		`{"type":"computer_call","id":"cc_1","call_id":"c4","status":"completed","pending_safety_checks":[{"id":"sc","code":null,"message":"m"}],` +
			`"action":{"type":"click","button":"left","x":1,"y":2,"keys":null},"actions":[{"type":"drag","path":[{"x":1,"y":2}]},{"type":"keypress","keys":["a"]},` +
			`{"type":"scroll","scroll_x":0,"scroll_y":1,"x":2,"y":3},{"type":"type","text":"t"},{"type":"wait"},{"type":"screenshot"},{"type":"move","x":1,"y":1},{"type":"double_click","x":1,"y":1,"keys":["k"]}]}`,
		`{"type":"file_search_call","id":"fs_1","queries":["q"],"status":"completed","results":[{"file_id":"f","filename":"a","score":0.5,"text":"t","attributes":{"a":"b","n":1,"f":true}}]}`,
		`{"type":"code_interpreter_call","id":"ci_1","container_id":"cn","code":"print(1)","status":"completed","outputs":[{"type":"logs","logs":"1"},{"type":"image","url":"https://x/i.png"}]}`,
		`{"type":"message","id":"msg_3","role":"assistant","status":"completed","content":[{"type":"output_text","text":"4","annotations":[],` +
			`"logprobs":[{"token":"4","bytes":[52],"logprob":-0.1,"top_logprobs":[{"token":"4","bytes":[52],"logprob":-0.1}]}]}]}`,
	}
	nestedInputOnly = []string{
		`{"type":"computer_call_output","call_id":"c4","output":{"type":"computer_screenshot"},"acknowledged_safety_checks":[{"id":"sc"}]}`,
		`{"type":"custom_tool_call_output","call_id":"c5","output":[{"type":"input_text","text":"y"},{"type":"input_image","detail":"auto","image_url":null},{"type":"input_file","file_id":null,"filename":"a"}]}`,
		`{"type":"function_call_output","call_id":"c1","output":[{"type":"input_text","text":"ok"},{"type":"input_image","detail":"high","file_id":null,"image_url":"https://x/i.png"},` +
			`{"type":"input_file","detail":"low","file_data":"d","file_id":null,"file_url":null,"filename":"a"}]}`,
		`{"type":"function_call_output","call_id":"c1","output":[{"type":"input_image","detail":null},{"type":"input_file","filename":null}],"status":"completed"}`,
	}
	nestedOutputOnly = []string{
		`{"type":"computer_call_output","id":"cco_1","call_id":"c4","output":{"type":"computer_screenshot"},"status":"completed","acknowledged_safety_checks":[{"id":"sc","code":"c"}]}`,
		`{"type":"custom_tool_call_output","id":"cto_1","status":"completed","call_id":"c5","output":[{"type":"input_text","text":"y"},{"type":"input_file","detail":null}]}`,
		`{"type":"function_call_output","id":"fco_2","call_id":"c1","status":"completed","output":[{"type":"input_text","text":"ok"},` +
			`{"type":"input_image","detail":"original","file_id":null,"image_url":"https://x/i.png"},{"type":"input_file","detail":null,"file_url":"u","file_data":null}]}`,
		`{"type":"function_call_output","id":"fco_3","call_id":"c1","status":"incomplete","output":[{"type":"input_file","detail":"high","file_id":"f","filename":"a"},{"type":"input_image","detail":"low"}]}`,
	}
	// nestedResponseTools are a response's tool models (openai 2.44's
	// openai/types/responses/tool.py), nested models filled in.
	nestedResponseTools = []string{
		`{"type":"function","name":"f","parameters":{"type":"object"},"strict":true,"defer_loading":null,"description":"d"}`,
		`{"type":"file_search","vector_store_ids":["vs"],"filters":{"type":"eq","key":"k","value":1.5},"max_num_results":null,` +
			`"ranking_options":{"ranker":null,"score_threshold":0.5,"hybrid_search":{"embedding_weight":1,"text_weight":0.5}}}`,
		`{"type":"file_search","vector_store_ids":[],"filters":{"type":"or","filters":[{"type":"in","key":"k","value":["a",1]},5]},"ranking_options":null}`,
		`{"type":"computer_use_preview","display_height":768,"display_width":1024,"environment":"browser"}`,
		`{"type":"web_search","filters":{"allowed_domains":null},"search_context_size":"low","user_location":{"type":"approximate","city":"c","country":null}}`,
		`{"type":"web_search_preview_2025_03_11","user_location":{"type":"approximate","region":"r"},"search_content_types":["text","image"],"search_context_size":null}`,
		`{"type":"mcp","server_label":"s","allowed_tools":{"read_only":null,"tool_names":["t"]},"require_approval":{"always":{"tool_names":["a"]},"never":null},` +
			`"connector_id":"connector_gmail","authorization":null,"defer_loading":true,"headers":{"a":"b"},"server_url":"https://x"}`,
		`{"type":"mcp","server_label":"s","allowed_tools":["t"],"require_approval":"never","headers":null,"tunnel_id":"t"}`,
		`{"type":"code_interpreter","container":{"type":"auto","file_ids":null,"memory_limit":"4g","network_policy":{"type":"allowlist","allowed_domains":["x"],` +
			`"domain_secrets":[{"domain":"x","name":"n","value":"v"}]}}}`,
		`{"type":"code_interpreter","container":"cn"}`,
		`{"type":"image_generation","action":"edit","background":null,"input_image_mask":{"file_id":"f","image_url":null},"quality":"low","model":"gpt-image-1",` +
			`"output_compression":50,"partial_images":null,"size":"auto","moderation":"low","output_format":"png","input_fidelity":"high"}`,
		`{"type":"shell","environment":{"type":"container_auto","network_policy":{"type":"disabled"},"file_ids":["f"],"memory_limit":null,` +
			`"skills":[{"type":"skill_reference","skill_id":"s","version":null},{"type":"inline","name":"n","description":"d","source":{"type":"base64","media_type":"application/zip","data":"UEs="}}]}}`,
		`{"type":"shell","environment":{"type":"local","skills":[{"name":"n","description":"d","path":"/s"}]}}`,
		`{"type":"shell","environment":{"type":"container_reference","container_id":"cn"}}`,
		`{"type":"custom","name":"g","defer_loading":false,"description":null,"format":{"type":"grammar","syntax":"lark","definition":"start: x"}}`,
		`{"type":"namespace","name":"n","description":"d","tools":[{"type":"function","name":"f","parameters":{"a":1},"strict":null},{"type":"custom","name":"g","format":null}]}`,
		`{"type":"tool_search","description":null,"execution":"client","parameters":{"q":1}}`,
		`{"type":"local_shell"}`,
		`{"type":"apply_patch"}`,
	}
	nestedTools = []string{
		`{"type":"file_search","vector_store_ids":["vs"],"filters":{"type":"eq","key":"k","value":"v"},"ranking_options":{"ranker":"auto","score_threshold":0.5,"hybrid_search":{"embedding_weight":1,"text_weight":0.5}}}`,
		`{"type":"file_search","vector_store_ids":[],"filters":{"type":"and","filters":[{"type":"in","key":"k","value":["a",1]}]},"max_num_results":3}`,
		`{"type":"web_search","filters":{"allowed_domains":["x.com"]},"user_location":{"type":"approximate","city":"c","country":null}}`,
		`{"type":"web_search_preview","user_location":{"type":"approximate","region":"r"},"search_content_types":["text"]}`,
		`{"type":"mcp","server_label":"s","allowed_tools":{"read_only":true,"tool_names":["t"]},"require_approval":{"always":{"tool_names":["a"]},"never":{"read_only":false}},"connector_id":"connector_gmail"}`,
		`{"type":"mcp","server_label":"s","allowed_tools":["t"],"require_approval":null,"headers":{"a":"b"}}`,
		`{"type":"code_interpreter","container":{"type":"auto","file_ids":["f"],"memory_limit":"4g","network_policy":{"type":"allowlist","allowed_domains":["x"],"domain_secrets":[]}}}`,
		`{"type":"image_generation","input_image_mask":{"file_id":"f","image_url":"u"},"quality":"low"}`,
		`{"type":"shell","environment":{"type":"container_auto","network_policy":{"type":"disabled"},"skills":[],"memory_limit":null,"file_ids":[]}}`,
		`{"type":"custom","name":"g","format":{"type":"grammar","syntax":"lark","definition":"start: x"}}`,
		`{"type":"custom","name":"g","format":{"type":"text"}}`,
		`{"type":"namespace","name":"n","description":"d","tools":[{"type":"function","name":"f"}]}`,
	}
	nestedParamValues = map[string][]string{
		"prompt": {`{"id":"p","variables":{"a":"x","b":{"type":"input_text","text":"t"},"c":{"type":"input_image","detail":"low"},"d":{"type":"input_file","file_id":null}},"version":null}`},
		"text": {`{"format":{"type":"json_schema","name":"n","schema":{"type":"object"},"strict":true,"description":"d"},"verbosity":"low"}`,
			`{"format":{"type":"text"}}`, `{"format":{"type":"json_object"}}`},
	}
	nestedResponseValues = map[string][]string{
		"moderation": {`{"input":{"type":"moderation_result","categories":{"hate":false},"category_applied_input_types":{"hate":["text","image"]},` +
			`"category_scores":{"hate":0.1},"flagged":false,"model":"omni"},"output":{"type":"error","code":"c","message":"m"}}`},
		"reasoning": {`{"effort":"low","summary":"auto","context":null,"generate_summary":"concise"}`},
		"text": {`{"format":{"type":"json_schema","name":"n","schema":{},"strict":null,"description":null},"verbosity":null}`,
			`{"format":{"type":"text"},"verbosity":"high"}`},
		"prompt": {`{"id":"p","variables":{"a":"x","b":{"type":"input_file","filename":null},"c":{"type":"input_text","text":"t"}},"version":"1"}`},
		"tools": {`[{"type":"namespace","name":"n","description":"d","tools":[{"type":"custom","name":"g","format":{"type":"grammar","definition":"d","syntax":"regex"}},` +
			`{"type":"function","name":"f","parameters":null,"strict":true}]}]`},
	}
	nestedChatValues = map[string][]string{
		"audio":              {`{"format":"wav","voice":"alloy"}`, `{"format":"mp3","voice":{"id":"v"}}`},
		"response_format":    {`{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"object"},"description":"d"}}`, `{"type":"json_object"}`, `{"type":"text"}`},
		"web_search_options": {`{"search_context_size":"low","user_location":{"type":"approximate","approximate":{"city":"c","timezone":"t"}}}`},
		"tools":              {`[{"type":"custom","custom":{"name":"g","description":"d","format":{"type":"grammar","grammar":{"definition":"d","syntax":"lark"}}}}]`},
	}
	// deepValues are what mutateDeep puts in place of a nested value:
	// other kinds, nulls, lax scalars and literals of the nested models.
	deepValues = []string{`null`, `"x"`, `5`, `-1`, `1.5`, `true`, `[]`, `{}`, `"5"`, `"1.5"`, `"yes"`, `"true"`, `0`, `[5]`, `["x"]`,
		`[{}]`, `{"x":1}`, `"text"`, `"image"`, `"auto"`, `"exit"`, `"search"`, `"click"`, `"approximate"`, `"local"`, `"lark"`,
		`"json_object"`, `"error"`, `"logs"`, `"create_file"`, `"and"`, `"eq"`, `"disabled"`, `"grammar"`, `"input_text"`,
		`"input_image"`, `"input_file"`, `"original"`, `"inline"`, `"never"`}
)

// mutateDeep applies one mutation somewhere inside v (a fixture parsed
// from JSON) and returns the result: it walks down a random path of
// objects and lists, and at the end replaces the value, drops a member,
// adds an unknown one, or adds a list element. At the root it always
// goes down, so the change lands inside a nested value.
func mutateDeep(rng *rand.Rand, v any, root bool) any {
	switch x := v.(type) {
	case map[string]any:
		keys := sortedKeys(x)
		if root || len(keys) > 0 && rng.IntN(5) < 3 {
			if len(keys) == 0 {
				return pick(rng, deepValues)
			}
			k := keys[rng.IntN(len(keys))]
			if root {
				// prefer a member that holds an object or a list
				var nested []string
				for _, key := range keys {
					switch x[key].(type) {
					case map[string]any, []any:
						nested = append(nested, key)
					}
				}
				if len(nested) > 0 {
					k = nested[rng.IntN(len(nested))]
				}
			}
			x[k] = mutateDeep(rng, x[k], false)
			return x
		}
		switch rng.IntN(3) {
		case 0:
			if len(keys) > 0 {
				delete(x, keys[rng.IntN(len(keys))])
				return x
			}
		case 1:
			x[[]string{"bogus", "type", "id"}[rng.IntN(3)]] = pick(rng, deepValues)
			return x
		}
		return pick(rng, deepValues)
	case []any:
		if len(x) > 0 && (root || rng.IntN(5) < 3) {
			i := rng.IntN(len(x))
			x[i] = mutateDeep(rng, x[i], false)
			return x
		}
		if rng.IntN(2) == 0 {
			return append(x, pick(rng, deepValues))
		}
		return pick(rng, deepValues)
	}
	return pick(rng, deepValues)
}

// mutateNestedParams adds a nested fixture to a valid request (an input
// item, a tool, a prompt or a text configuration) and, most of the time,
// mutates inside it.
func mutateNestedParams(rng *rand.Rand, p map[string]any) map[string]any {
	deep := func(v any) any {
		if rng.IntN(5) == 0 {
			return v
		}
		return mutateDeep(rng, v, true)
	}
	switch rng.IntN(4) {
	case 0, 1:
		items, _ := p["input"].([]any)
		fixtures := append(slices.Clone(nestedItems), nestedInputOnly...)
		items = append(items, deep(pick(rng, fixtures)))
		p["input"] = items
	case 2:
		tools, _ := p["tools"].([]any)
		p["tools"] = append(tools, deep(pick(rng, nestedTools)))
	case 3:
		keys := sortedKeys(nestedParamValues)
		k := keys[rng.IntN(len(keys))]
		p[k] = deep(pick(rng, nestedParamValues[k]))
	}
	return p
}

// mutateNestedResponse adds a nested fixture to a valid response (an
// output item or an optional member) and, most of the time, mutates
// inside it.
func mutateNestedResponse(rng *rand.Rand, r map[string]any) map[string]any {
	deep := func(v any) any {
		if rng.IntN(5) == 0 {
			return v
		}
		return mutateDeep(rng, v, true)
	}
	switch rng.IntN(4) {
	case 0:
		// a response's tools, one to three of them, one changed inside
		n := 1 + rng.IntN(3)
		tools := make([]any, n)
		for i := range tools {
			tools[i] = pick(rng, nestedResponseTools)
		}
		i := rng.IntN(n)
		tools[i] = deep(tools[i])
		r["tools"] = tools
		return r
	case 1:
		keys := sortedKeys(nestedResponseValues)
		k := keys[rng.IntN(len(keys))]
		r[k] = deep(pick(rng, nestedResponseValues[k]))
		return r
	}
	output, _ := r["output"].([]any)
	fixtures := append(slices.Clone(nestedItems), nestedOutputOnly...)
	r["output"] = append(output, deep(pick(rng, fixtures)))
	return r
}

// mutateNestedChat sets a nested member of a valid chat request from its
// fixture, or adds a training message, and, most of the time, mutates
// inside it.
func mutateNestedChat(rng *rand.Rand, c map[string]any) map[string]any {
	if rng.IntN(4) == 0 {
		msg := raw(`{"role":"assistant","content":"a","prompt_token_ids":[1,2],"generation_token_ids":[3],"generation_log_probs":[-0.1],"routed_experts":[[[1]]]}`)
		if rng.IntN(5) != 0 {
			msg = mutateDeep(rng, msg, true)
		}
		c["messages"] = append(c["messages"].([]any), msg)
		return c
	}
	keys := sortedKeys(nestedChatValues)
	k := keys[rng.IntN(len(keys))]
	v := pick(rng, nestedChatValues[k])
	if rng.IntN(5) != 0 {
		v = mutateDeep(rng, v, true)
	}
	c[k] = v
	return c
}

// chatCompletionChoices are choices of a chat completion as an
// OpenAI-compatible endpoint answers them (openai/types/chat/*.py of
// openai 2.44), nested models filled in, a training message among them.
var chatCompletionChoices = []string{
	`{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"4"}}`,
	`{"index":0,"finish_reason":"tool_calls","logprobs":null,"message":{"role":"assistant","content":null,"refusal":null,` +
		`"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"d","type":"custom","custom":{"name":"g","input":"x"}}]}}`,
	`{"index":1,"finish_reason":"length","logprobs":{"content":[{"token":"4","bytes":[52],"logprob":-0.1,"top_logprobs":[{"token":"4","bytes":null,"logprob":-0.1}]}],"refusal":null},` +
		`"message":{"role":"assistant","content":"4","annotations":[{"type":"url_citation","url_citation":{"url":"https://x","title":"t","start_index":0,"end_index":1}}],` +
		`"audio":{"id":"a","data":"d","expires_at":1,"transcript":"t"},"function_call":{"name":"f","arguments":"{}"}}}`,
	`{"index":0,"finish_reason":"content_filter","message":{"role":"assistant","content":"a","prompt_token_ids":[1,2],"generation_token_ids":[3],` +
		`"generation_log_probs":[-0.5],"routed_experts":null}}`,
}

// validChatCompletion builds a valid chat completion, usage, moderation
// and the other optional members some of the time.
func validChatCompletion(rng *rand.Rand) map[string]any {
	c := map[string]any{"id": "chatcmpl-1", "object": "chat.completion", "created": 1767225600, "model": "m"}
	var choices []any
	for range 1 + rng.IntN(2) {
		choices = append(choices, pick(rng, chatCompletionChoices))
	}
	c["choices"] = choices
	if rng.IntN(2) == 0 {
		c["usage"] = raw(`{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":null},` +
			`"completion_tokens_details":{"reasoning_tokens":0,"accepted_prediction_tokens":null,"audio_tokens":0,"rejected_prediction_tokens":0}}`)
	}
	if rng.IntN(4) == 0 {
		c["moderation"] = raw(`{"input":{"type":"moderation_results","model":"omni","results":[{"type":"moderation_result","categories":{"hate":false},` +
			`"category_applied_input_types":{"hate":["text"]},"category_scores":{"hate":0.1},"flagged":false,"model":"omni"}]},` +
			`"output":{"type":"error","code":"c","message":"m"}}`)
	}
	if rng.IntN(3) == 0 {
		c["service_tier"], c["system_fingerprint"] = pick(rng, []string{`"default"`, `null`, `"flex"`}), pick(rng, []string{`"fp"`, `null`})
	}
	return c
}

// mutateChatCompletion changes one value of a chat completion, inside a
// nested model most of the time, else a top-level member.
func mutateChatCompletion(rng *rand.Rand, c map[string]any) map[string]any {
	switch rng.IntN(6) {
	case 0:
		return c // valid
	case 1:
		mutateMember(rng, c, []string{"id", "object", "created", "model", "choices", "usage", "service_tier", "system_fingerprint", "moderation", "x_extra"})
		return c
	}
	return mutateDeep(rng, c, true).(map[string]any)
}

// sameValue reports whether the JSON values a and b are equal as Python
// reads them (1 and 1.0 alike).
func sameValue(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}
