package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Fixtures, written from the reference's rules (sections 2.2, 2.3, 4.2,
// 4.3 and 6.1).

// rowJSON is a dataset row whose task fields cover every JSON kind:
// strings (with unicode and escapes), numbers, booleans, null, lists of
// one-key objects, nested objects and empty containers.
const rowJSON = `{"responses_create_params":{"input":[` +
	`{"role":"system","content":"Réponds en français; mets la réponse dans \\boxed{}."},` +
	`{"role":"user","content":[{"type":"input_text","text":"Capitale de la France ? 🇫🇷"}]}],` +
	`"temperature":0.7,"max_output_tokens":256,"tools":[],"metadata":{"source":"unit","seed":"{\"seed\": 3}"}},` +
	`"expected_answer":"Paris","extraction_mode":"boxed",` +
	`"options":[{"A":"Paris"},{"B":"Lyon"},{"C":"Marseille"}],` +
	`"x":null,"difficulty":3,"weight":0.25,"big":12345678901234567890,"is_hard":false,"verified":true,` +
	`"tags":["géo","capitals"],"meta":{"nested":{"deep":[1,{"k":"v"},null]},"empty":{}},"empty_list":[],` +
	`"unicode":"naïve – ✓ \u00e9 \ud83d\ude00 <&>","escaped":"line\nbreak\t\"quoted\"",` +
	`"_ng_task_index":7,"_ng_rollout_index":2,` +
	`"agent_ref":{"type":"responses_api_agents","name":"string_match_simple_agent"}}`

// minimalResponseJSON is the minimal valid response of section 4.3.
const minimalResponseJSON = `{
  "id": "resp_0001", "object": "response", "created_at": 1767225600, "model": "go-echo-1",
  "output": [
    {"type": "message", "id": "msg_0001", "role": "assistant", "status": "completed",
     "content": [{"type": "output_text", "text": "The capital is \\boxed{Paris}.", "annotations": []}]}
  ],
  "parallel_tool_calls": true, "tool_choice": "auto", "tools": [], "status": "completed",
  "usage": {"input_tokens": 12, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 7, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 19}
}`

// episodeJSON is a whole tool-using episode as an agent hands it to
// /verify: a reasoning item, a function call, its output and the final
// assistant message, with the nulls a full pydantic dump carries.
const episodeJSON = `{"id":"resp_ep","object":"response","created_at":1767225600.5,"model":"policy",` +
	`"output":[` +
	`{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"Look it up."}],"content":null,"encrypted_content":null},` +
	`{"type":"function_call","id":null,"call_id":"call_1","name":"lookup","arguments":"{\"city\": \"Paris\"}","status":null},` +
	`{"type":"function_call_output","call_id":"call_1","output":"{\"country\":\"FR\"}"},` +
	`{"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[` +
	`{"type":"output_text","text":"The capital is ","annotations":[],"logprobs":null},` +
	`{"type":"output_text","text":"\\boxed{Paris}.","annotations":[{"type":"url_citation","url":"https://fr.wikipedia.org","title":"Paris","start_index":0,"end_index":5}]}]}],` +
	`"parallel_tool_calls":false,"tool_choice":{"type":"function","name":"lookup"},` +
	`"tools":[{"type":"function","name":"lookup","description":"Find a city","parameters":{"type":"object","properties":{"city":{"type":"string"}}},"strict":true}],` +
	`"status":"completed","incomplete_details":null,"error":null,"instructions":null,"metadata":{},` +
	`"temperature":1.0,"top_p":null,"service_tier":"default","prompt_cache_key":null,"safety_identifier":null,` +
	`"usage":{"input_tokens":100,"input_tokens_details":{"cached_tokens":null},"output_tokens":40,` +
	`"output_tokens_details":{"reasoning_tokens":12},"total_tokens":140}}`

// verifyJSON is a /verify body: the row plus the episode.
var verifyJSON = strings.TrimSuffix(rowJSON, "}") + `,"response":` + episodeJSON + `}`

// Helpers.

// canon parses b into plain Go values, each number as its exact value
// (so 1.0 and 1 are equal, and big integers stay exact).
func canon(t testing.TB, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("invalid JSON %s: %v", b, err)
	}
	return exactNumbers(v)
}

func exactNumbers(v any) any {
	switch v := v.(type) {
	case json.Number:
		if i := strings.IndexAny(string(v), "eE"); i >= 0 {
			if exp, err := strconv.Atoi(string(v[i+1:])); err != nil || exp > 400 || exp < -400 {
				return v // too big to expand; compare as written
			}
		}
		r, ok := new(big.Rat).SetString(string(v))
		if !ok {
			return v
		}
		return json.Number(r.RatString())
	case map[string]any:
		for k, e := range v {
			v[k] = exactNumbers(e)
		}
	case []any:
		for i, e := range v {
			v[i] = exactNumbers(e)
		}
	}
	return v
}

// sameJSON fails unless got and want are equal as parsed JSON values.
func sameJSON(t testing.TB, got, want []byte) {
	t.Helper()
	if g, w := canon(t, got), canon(t, want); !reflect.DeepEqual(g, w) {
		t.Fatalf("JSON differs\n got: %s\nwant: %s", got, want)
	}
}

// asMap parses a JSON object.
func asMap(t testing.TB, b []byte) map[string]any {
	t.Helper()
	m, ok := canon(t, b).(map[string]any)
	if !ok {
		t.Fatalf("not an object: %s", b)
	}
	return m
}

func marshal(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal %T: %v", v, err)
	}
	return b
}

// decodeP is decode returning a pointer, for types whose Validate has a
// pointer receiver.
func decodeP[T any](t testing.TB, s string) *T {
	t.Helper()
	v := decode[T](t, s)
	return &v
}

func decode[T any](t testing.TB, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("decode %T: %v\n%s", v, err, s)
	}
	return v
}

// dupKeys returns the first object key that appears twice in one object
// of b, quoted, or "" when there is none.
func dupKeys(b []byte) string {
	dec := json.NewDecoder(bytes.NewReader(b))
	var walk func() string
	walk = func() string {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				kt, _ := dec.Token()
				k, _ := kt.(string)
				if seen[k] {
					return strconv.Quote(k)
				}
				seen[k] = true
				if d := walk(); d != "" {
					return d
				}
			}
			_, _ = dec.Token()
		case json.Delim('['):
			for dec.More() {
				if d := walk(); d != "" {
					return d
				}
			}
			_, _ = dec.Token()
		}
		return ""
	}
	return walk()
}

// want is an expected FieldError: its type and location.
type want struct {
	typ string
	loc []any
}

func (w want) String() string { return fmt.Sprintf("%s@%v", w.typ, w.loc) }

// details returns err's FieldErrors, failing unless it is a
// *ValidationError.
func details(t testing.TB, err error) []FieldError {
	t.Helper()
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("want a *ValidationError, got %T %v", err, err)
	}
	return ve.Detail
}

// hasErr fails unless err holds every wanted FieldError.
func hasErr(t testing.TB, err error, ws ...want) {
	t.Helper()
	if err == nil {
		t.Fatalf("want errors %v, got none", ws)
	}
	ds := details(t, err)
	for _, w := range ws {
		found := slices.ContainsFunc(ds, func(d FieldError) bool {
			return d.Type == w.typ && reflect.DeepEqual(d.Loc, w.loc)
		})
		if !found {
			t.Errorf("missing error %v in %v", w, err)
		}
	}
}

// onlyErr fails unless err holds exactly the wanted FieldErrors.
func onlyErr(t testing.TB, err error, ws ...want) {
	t.Helper()
	hasErr(t, err, ws...)
	if ds := details(t, err); len(ds) != len(ws) {
		t.Errorf("want %d errors %v, got %d: %v", len(ws), ws, len(ds), err)
	}
}

func noErr(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
}

func loc(parts ...any) []any { return parts }

// withParams returns a row around params.
func withParams(params string) string { return `{"responses_create_params":` + params + `}` }

// responseWith returns the minimal response with member key set to
// value (raw JSON), or deleted when value is "".
func responseWith(t testing.TB, key, value string) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(minimalResponseJSON), &m); err != nil {
		t.Fatal(err)
	}
	if value == "" {
		delete(m, key)
	} else {
		m[key] = json.RawMessage(value)
	}
	return string(marshal(t, m))
}

// responseWithOutput returns the minimal response with output items.
func responseWithOutput(t testing.TB, items ...string) string {
	return responseWith(t, "output", "["+strings.Join(items, ",")+"]")
}

// 1. Round trips.

func TestRunRequestRoundTrip(t *testing.T) {
	r := decodeP[RunRequest](t, rowJSON)
	noErr(t, r.Validate())

	var answer string
	if ok, err := r.Fields.Decode("expected_answer", &answer); !ok || err != nil || answer != "Paris" {
		t.Fatalf("expected_answer = %q, %v, %v", answer, ok, err)
	}
	if raw, ok := r.Fields.Get("x"); !ok || string(raw) != "null" {
		t.Fatalf("x = %s, %v; want a null that is present", raw, ok)
	}
	var options []map[string]string
	if _, err := r.Fields.Decode("options", &options); err != nil || len(options) != 3 || options[1]["B"] != "Lyon" {
		t.Fatalf("options = %v, %v", options, err)
	}
	if *r.TaskIndex != 7 || *r.RolloutIndex != 2 || r.AttemptIndex != nil || r.AgentRef.Name != "string_match_simple_agent" {
		t.Fatalf("bookkeeping = %v %v %v %+v", *r.TaskIndex, *r.RolloutIndex, r.AttemptIndex, r.AgentRef)
	}
	if got := r.ResponsesCreateParams.Input.LastUserText(); got != "Capitale de la France ? 🇫🇷" {
		t.Fatalf("LastUserText = %q", got)
	}

	out := marshal(t, r)
	sameJSON(t, out, []byte(rowJSON))
	direct, err := r.MarshalJSON()
	noErr(t, err)
	sameJSON(t, direct, []byte(rowJSON))
	// Task fields come back byte for byte when MarshalJSON is called directly.
	for _, key := range []string{"options", "meta", "unicode", "big"} {
		raw, _ := r.Fields.Get(key)
		if !bytes.Contains(direct, append([]byte(`"`+key+`":`), raw...)) {
			t.Errorf("%s not verbatim in %s", key, direct)
		}
	}
	// Order: declared members first, then the task fields as they came.
	var keys []string
	for _, f := range r.Fields {
		keys = append(keys, f.Key)
	}
	wantKeys := []string{"expected_answer", "extraction_mode", "options", "x", "difficulty", "weight", "big",
		"is_hard", "verified", "tags", "meta", "empty_list", "unicode", "escaped"}
	if !slices.Equal(keys, wantKeys) {
		t.Fatalf("field order %v, want %v", keys, wantKeys)
	}
}

func TestVerifyRoundTrip(t *testing.T) {
	req := decodeP[VerifyRequest](t, verifyJSON)
	noErr(t, req.Validate())
	sameJSON(t, marshal(t, req), []byte(verifyJSON))

	resp := NewVerifyResponse(*req, 1)
	noErr(t, resp.Fields.Set("extracted_answer", "Paris"))
	noErr(t, resp.Validate())
	out := marshal(t, resp)

	wantMap := asMap(t, []byte(verifyJSON))
	wantMap["reward"] = json.Number("1")
	if m := asMap(t, out); m["reward"] != json.Number("1") {
		t.Fatalf("reward %v", m["reward"])
	}
	wantMap["extracted_answer"] = "Paris"
	wantMap[KeyMaskSample], wantMap[KeyFailureKind], wantMap[KeyFailureReason] = false, nil, nil
	if got := asMap(t, out); !reflect.DeepEqual(got, wantMap) {
		t.Fatalf("verify response\n got: %s\nwant: %v", out, wantMap)
	}
	if req.Fields.Has("extracted_answer") {
		t.Fatal("NewVerifyResponse shares Fields with the request")
	}
	// The verifier's members follow the task's.
	if last := resp.Fields[len(resp.Fields)-1]; last.Key != "extracted_answer" {
		t.Fatalf("last field %q", last.Key)
	}

	back := decodeP[VerifyResponse](t, string(out))
	noErr(t, back.Validate())
	if back.Reward != 1 || back.Response.OutputText() != "The capital is \\boxed{Paris}." {
		t.Fatalf("decoded back: reward %v, text %q", back.Reward, back.Response.OutputText())
	}
	sameJSON(t, marshal(t, back), out)
}

func TestVerifyResponseRewardKinds(t *testing.T) {
	base := strings.TrimSuffix(verifyJSON, "}")
	for _, reward := range []string{"1", "0.5", "-2", "1e-3"} {
		r := decodeP[VerifyResponse](t, base+`,"reward":`+reward+`}`)
		noErr(t, r.Validate())
	}
	r := decodeP[VerifyResponse](t, verifyJSON)
	onlyErr(t, r.Validate(), want{ErrMissing, loc("reward")})
	r = decodeP[VerifyResponse](t, base+`,"reward":null}`)
	onlyErr(t, r.Validate(), want{ErrFloat, loc("reward")})
	if !bytes.Contains(marshal(t, r), []byte(`"reward":0`)) {
		// A null reward is refused, so what it encodes to is not upstream's concern;
		// it must still be valid JSON.
		t.Logf("null reward encodes as %s", marshal(t, r))
	}
	var bad VerifyResponse
	err := json.Unmarshal([]byte(base+`,"reward":"high"}`), &bad)
	hasErr(t, DecodeError(err, "body"), want{ErrFloat, loc("body", "reward")})
}

// A result line sent back to /verify (reverification) carries its old
// reward: the new response must carry one reward, the new one.
func TestReverifyReplacesReward(t *testing.T) {
	line := strings.TrimSuffix(verifyJSON, "}") + `,"reward":0.0,"extracted_answer":"Lyon"}`
	req := decodeP[VerifyRequest](t, line)
	noErr(t, req.Validate())
	if !req.Fields.Has("reward") {
		t.Fatal("a verify request keeps the reward it carried in Fields")
	}
	sameJSON(t, marshal(t, req), []byte(line))
	resp := NewVerifyResponse(*req, 1)
	noErr(t, resp.Fields.Set("extracted_answer", "Paris"))
	out := marshal(t, resp)
	if k := dupKeys(out); k != "" {
		t.Fatalf("duplicate key %q in %s", k, out)
	}
	m := asMap(t, out)
	if m["reward"] != json.Number("1") || m["extracted_answer"] != "Paris" {
		t.Fatalf("reward %v, extracted_answer %v", m["reward"], m["extracted_answer"])
	}
}

// A run request does not declare response or reward: they travel in
// Fields untouched, even when they would not decode as typed.
func TestRunRequestKeepsResponseRaw(t *testing.T) {
	line := withParams(`{"input":"hi"}`)
	line = strings.TrimSuffix(line, "}") + `,"response":{"output":[{"type":"function_call","arguments":{"a":1}}]},"reward":"n/a"}`
	r := decodeP[RunRequest](t, line)
	noErr(t, r.Validate())
	if !r.Fields.Has("response") || !r.Fields.Has("reward") {
		t.Fatalf("fields %v", r.Fields)
	}
	sameJSON(t, marshal(t, r), []byte(line))

	// Made into a verify request, the typed response wins over the raw one.
	v := VerifyRequest{RunRequest: *r, Response: decode[Response](t, minimalResponseJSON)}
	out := marshal(t, v)
	if k := dupKeys(out); k != "" {
		t.Fatalf("duplicate key %q in %s", k, out)
	}
	if asMap(t, out)["response"].(map[string]any)["id"] != "resp_0001" {
		t.Fatalf("response not the typed one: %s", out)
	}
}

func TestPrettyInputEncodesOnOneLine(t *testing.T) {
	var pretty bytes.Buffer
	noErr(t, json.Indent(&pretty, []byte(verifyJSON), "", "  "))
	if !bytes.Contains(pretty.Bytes(), []byte("\n")) {
		t.Fatal("fixture not pretty-printed")
	}
	req := decodeP[VerifyRequest](t, pretty.String())
	noErr(t, req.Validate())
	resp := NewVerifyResponse(*req, 0.5)
	resp.Fields.SetRaw("judge", json.RawMessage("{\n  \"score\": 0.5\n}"))
	for name, encode := range map[string]func() ([]byte, error){
		"json.Marshal":               func() ([]byte, error) { return json.Marshal(resp) },
		"VerifyResponse.MarshalJSON": resp.MarshalJSON,
		"VerifyRequest.MarshalJSON":  req.MarshalJSON,
		"RunRequest.MarshalJSON":     req.RunRequest.MarshalJSON,
		"Response.MarshalJSON":       req.Response.MarshalJSON,
		"Fields.MarshalJSON":         resp.Fields.MarshalJSON,
	} {
		out, err := encode()
		noErr(t, err)
		if bytes.ContainsAny(out, "\r\n") {
			t.Errorf("%s: output spans lines:\n%s", name, out)
		}
		if !json.Valid(out) {
			t.Errorf("%s: invalid JSON %s", name, out)
		}
	}
	sameJSON(t, marshal(t, req), []byte(verifyJSON))
}

func TestSeedSessionAndAggregate(t *testing.T) {
	seed := decode[SeedSessionRequest](t, rowJSON)
	sameJSON(t, marshal(t, seed), []byte(rowJSON))
	if got := string(marshal(t, SeedSessionResponse{})); got != "{}" {
		t.Fatalf("empty seed response %s", got)
	}
	var bad SeedSessionRequest
	if err := json.Unmarshal([]byte(`[1]`), &bad); err == nil {
		t.Fatal("a list is not a seed body")
	}
	agg := decode[AggregateMetricsRequest](t, `{"verify_responses":[{"reward":1,"x":null},{"reward":0}]}`)
	if len(agg.VerifyResponses) != 2 || !agg.VerifyResponses[0].Has("x") {
		t.Fatalf("aggregate %+v", agg)
	}
}

// 2. ResponseCreateParams.

func TestForbiddenParams(t *testing.T) {
	for _, key := range []string{"frequency_penalty", "seed"} {
		t.Run(key, func(t *testing.T) {
			r := decodeP[RunRequest](t, withParams(`{"input":"hi","`+key+`":{"v":1}}`))
			err := r.Validate()
			onlyErr(t, err, want{ErrExtraForbidden, loc(KeyParams, key)})
			d := details(t, err)[0]
			if string(d.Input) != `{"v":1}` || d.Msg != "Extra inputs are not permitted" {
				t.Fatalf("detail %+v", d)
			}
			onlyErr(t, DecodeError(err, "body"), want{ErrExtraForbidden, loc("body", KeyParams, key)})
			if u := r.ResponsesCreateParams.Unknown(); len(u) != 1 || u[0].Key != key {
				t.Fatalf("Unknown() = %v", u)
			}
			// Forbidden members are still carried (upstream would not see them, as it refuses first).
			if !bytes.Contains(marshal(t, r), []byte(key)) {
				t.Fatalf("member dropped")
			}
		})
	}
	// The seven members openai 2.44 added are accepted, null or set, and
	// go back out as they came (upstream's agent sends them all as null).
	for _, body := range []string{
		`{"input":"hi","context_management":null,"conversation":null,"moderation":null,"prompt_cache_key":null,"prompt_cache_retention":null,"safety_identifier":null,"stream_options":null}`,
		`{"input":"hi","context_management":[{"type":"compaction","compact_threshold":1000}],"conversation":{"id":"c1"},"moderation":{"model":"omni"},"prompt_cache_key":"k","prompt_cache_retention":"24h","safety_identifier":"u","stream_options":{"include_obfuscation":false}}`,
		`{"input":"hi","conversation":"c1"}`,
	} {
		r := decodeP[RunRequest](t, withParams(body))
		noErr(t, r.Validate())
		sameJSON(t, marshal(t, r), []byte(withParams(body)))
	}
	// ... and validated as upstream's TypedDicts, which forbid extra members.
	p := decode[ResponseCreateParams](t, `{"input":"hi","conversation":{"id":"c","v":1},"stream_options":{"v":1},"prompt_cache_retention":"1h","moderation":{}}`)
	var v validator
	p.validate(&v, nil, []any{"body"})
	onlyErr(t, v.err(), want{ErrExtraForbidden, loc("body", "conversation", "v")}, want{ErrExtraForbidden, loc("body", "stream_options", "v")},
		want{ErrLiteral, loc("body", "prompt_cache_retention")}, want{ErrMissing, loc("body", "moderation", "model")})
	ok := decodeP[RunRequest](t, withParams(`{"input":"hi","stream":false}`))
	noErr(t, ok.Validate())
}

func TestParamsRules(t *testing.T) {
	cases := []struct {
		name, params string
		errs         []want
	}{
		{"missing input", `{"model":"m"}`, []want{{ErrMissing, loc(KeyParams, "input")}}},
		{"null input", `{"input":null}`, []want{{ErrString, loc(KeyParams, "input")}}},
		{"empty list input", `{"input":[]}`, nil},
		{"null parallel_tool_calls", `{"input":"a","parallel_tool_calls":null}`, []want{{ErrBool, loc(KeyParams, "parallel_tool_calls")}}},
		{"null tool_choice", `{"input":"a","tool_choice":null}`, []want{{ErrLiteral, loc(KeyParams, "tool_choice")}}},
		{"bad tool_choice", `{"input":"a","tool_choice":"any"}`, []want{{ErrValue, loc(KeyParams, "tool_choice")}}},
		{"tool_choice object", `{"input":"a","tool_choice":{"type":"function","name":"f"}}`, nil},
		{"tool_choice object without name", `{"input":"a","tool_choice":{"type":"function"}}`, []want{{ErrMissing, loc(KeyParams, "tool_choice", "name")}}},
		{"tool_choice object without type", `{"input":"a","tool_choice":{"name":"f"}}`, []want{{ErrValue, loc(KeyParams, "tool_choice")}}},
		{"tool_choice hosted", `{"input":"a","tool_choice":{"type":"file_search"}}`, nil},
		{"tool_choice unknown object", `{"input":"a","tool_choice":{"type":"teleport"}}`, []want{{ErrValue, loc(KeyParams, "tool_choice")}}},
		{"null tools", `{"input":"a","tools":null}`, []want{{ErrList, loc(KeyParams, "tools")}}},
		{"function tool", `{"input":"a","tools":[{"type":"function","name":"f","parameters":null,"strict":null}]}`, nil},
		{"function tool without strict and parameters", `{"input":"a","tools":[{"type":"function","name":"f","description":"d"}]}`,
			[]want{{ErrMissing, loc(KeyParams, "tools", 0, "parameters")}, {ErrMissing, loc(KeyParams, "tools", 0, "strict")}}},
		{"function tool without name", `{"input":"a","tools":[{"type":"function","parameters":{},"strict":false}]}`, []want{{ErrMissing, loc(KeyParams, "tools", 0, "name")}}},
		{"function tool with list parameters", `{"input":"a","tools":[{"type":"function","name":"f","parameters":[],"strict":false}]}`, []want{{ErrDict, loc(KeyParams, "tools", 0, "parameters")}}},
		{"tool without type", `{"input":"a","tools":[{"name":"f"}]}`, []want{{ErrValue, loc(KeyParams, "tools", 0)}}},
		{"unknown tool type", `{"input":"a","tools":[{"type":"teleport"}]}`, []want{{ErrValue, loc(KeyParams, "tools", 0)}}},
		{"hosted tool", `{"input":"a","tools":[{"type":"web_search"},{"type":"mcp","server_label":"s"}]}`, nil},
		{"hosted tool missing member", `{"input":"a","tools":[{"type":"mcp"}]}`, []want{{ErrMissing, loc(KeyParams, "tools", 0, "server_label")}}},
		{"stream true", `{"input":"a","stream":true}`, []want{{ErrLiteral, loc(KeyParams, "stream")}}},
		{"stream null", `{"input":"a","stream":null}`, nil},
		{"service tiers", `{"input":"a","service_tier":"flex"}`, nil},
		{"bad service tier", `{"input":"a","service_tier":"turbo"}`, []want{{ErrLiteral, loc(KeyParams, "service_tier")}}},
		{"truncation", `{"input":"a","truncation":"disabled"}`, nil},
		{"bad truncation", `{"input":"a","truncation":"none"}`, []want{{ErrLiteral, loc(KeyParams, "truncation")}}},
		{"include", `{"input":"a","include":["reasoning.encrypted_content"]}`, nil},
		{"bad include", `{"input":"a","include":["everything"]}`, []want{{ErrLiteral, loc(KeyParams, "include", 0)}}},
		{"reasoning object", `{"input":"a","reasoning":{"effort":"low"},"text":{"format":{"type":"text"}},"prompt":null}`, nil},
		{"reasoning not an object", `{"input":"a","reasoning":"low"}`, []want{{ErrModelType, loc(KeyParams, "reasoning")}}},
		{"fully populated", `{"input":"a","background":null,"include":null,"instructions":null,"max_output_tokens":null,` +
			`"max_tool_calls":null,"metadata":null,"model":null,"parallel_tool_calls":true,"previous_response_id":null,` +
			`"prompt":null,"reasoning":null,"service_tier":null,"store":null,"temperature":null,"text":null,` +
			`"tool_choice":"auto","tools":[],"top_logprobs":null,"top_p":null,"truncation":null,"user":null,"stream":null}`, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := decodeP[RunRequest](t, withParams(c.params))
			err := r.Validate()
			if c.errs == nil {
				noErr(t, err)
			} else {
				onlyErr(t, err, c.errs...)
			}
			// Whatever upstream accepts re-encodes as it came.
			if err == nil {
				sameJSON(t, marshal(t, r.ResponsesCreateParams), []byte(c.params))
			}
		})
	}
}

func TestParamsInputItems(t *testing.T) {
	cases := []struct {
		name, input string
		errs        []want
	}{
		{"short user message", `[{"role":"user","content":"hi"}]`, nil},
		{"typed message with parts", `[{"type":"message","role":"developer","content":[{"type":"input_text","text":"be brief"}]}]`, nil},
		{"message without role", `[{"content":"hi"}]`, nil},
		{"message with bad role", `[{"role":"tool","content":"hi"}]`, nil},
		{"message without content", `[{"role":"user"}]`, nil},
		{"input_text without text", `[{"role":"user","content":[{"type":"input_text"}]}]`, []want{{ErrMissing, loc(KeyParams, "input", 0, "content", 0, "text")}}},
		{"input_image", `[{"role":"user","content":[{"type":"input_image","detail":"auto","image_url":"https://x/y.png"}]}]`, nil},
		{"input_image without detail", `[{"role":"user","content":[{"type":"input_image","image_url":"https://x/y.png"}]}]`, []want{{ErrMissing, loc(KeyParams, "input", 0, "content", 0, "detail")}}},
		{"input_video", `[{"role":"user","content":[{"type":"input_video","video_url":{"url":"https://x/v.mp4"}}]}]`, nil},
		{"input_video with both sources", `[{"role":"user","content":[{"type":"input_video","video_url":"https://x","video":"https://y"}]}]`, []want{{ErrValue, loc(KeyParams, "input", 0, "content", 0)}}},
		{"input_video with empty url", `[{"role":"user","content":[{"type":"input_video","video":" "}]}]`, []want{{ErrValue, loc(KeyParams, "input", 0, "content", 0)}}},
		{"replayed output message", `[{"type":"message","id":"m1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"x","annotations":[]}]}]`, nil},
		{"replayed function call", `[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}]`, nil},
		{"function call without arguments", `[{"type":"function_call","call_id":"c","name":"f"}]`, []want{{ErrMissing, loc(KeyParams, "input", 0, "arguments")}}},
		{"function call with null arguments", `[{"type":"function_call","call_id":"c","name":"f","arguments":null}]`, []want{{ErrString, loc(KeyParams, "input", 0, "arguments")}}},
		{"function call output", `[{"type":"function_call_output","call_id":"c","output":"42"}]`, nil},
		{"function call output list", `[{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"42"}]}]`, nil},
		{"function call output null", `[{"type":"function_call_output","call_id":"c","output":null}]`, []want{{ErrValue, loc(KeyParams, "input", 0, "output")}}},
		{"function call output number", `[{"type":"function_call_output","call_id":"c","output":42}]`, []want{{ErrValue, loc(KeyParams, "input", 0, "output")}}},
		{"untagged function call output", `[{"call_id":"c","output":"42"}]`, nil},
		{"reasoning", `[{"type":"reasoning","id":"r","summary":[]}]`, nil},
		{"reasoning without summary", `[{"type":"reasoning","id":"r"}]`, []want{{ErrMissing, loc(KeyParams, "input", 0, "summary")}}},
		{"hosted item", `[{"type":"mcp_call","name":"n","arguments":"{}","output":null}]`, nil},
		{"unknown item", `[{"type":"teleport"}]`, []want{{"union_tag_invalid", loc(KeyParams, "input", 0)}}},
		{"training variant", `[{"role":"assistant","content":"x","prompt_token_ids":[1,2],"generation_token_ids":[3],"generation_log_probs":[-0.5]}]`, nil},
		{"partial training variant", `[{"role":"assistant","content":"x","prompt_token_ids":[1,2]}]`, []want{{ErrValue, loc(KeyParams, "input", 0)}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			params := `{"input":` + c.input + `}`
			r := decodeP[RunRequest](t, withParams(params))
			err := r.Validate()
			if c.errs == nil {
				noErr(t, err)
			} else {
				onlyErr(t, err, c.errs...)
			}
			out := marshal(t, r.ResponsesCreateParams)
			if err == nil {
				// Whatever upstream accepts re-encodes as it came.
				sameJSON(t, out, []byte(params))
			}
			if k := dupKeys(out); k != "" {
				t.Fatalf("duplicate key %q in %s", k, out)
			}
		})
	}
}

func TestParamsMetadataDecodeError(t *testing.T) {
	var r RunRequest
	err := json.Unmarshal([]byte(withParams(`{"input":"hi","metadata":{"ok":"yes","seed":3}}`)), &r)
	if err == nil {
		t.Fatal("a non-string metadata value must not decode")
	}
	onlyErr(t, DecodeError(err, "body"), want{ErrString, loc("body", KeyParams, "metadata", "seed")})
	var p ResponseCreateParams
	err = json.Unmarshal([]byte(`{"input":"hi","metadata":{"a":null}}`), &p)
	onlyErr(t, DecodeError(err, "body"), want{ErrString, loc("body", "metadata", "a")})
}

func TestDecodeErrors(t *testing.T) {
	cases := []struct {
		name, body string
		errs       []want
	}{
		{"syntax", `{"responses_create_params":`, []want{{ErrJSONInvalid, nil}}},
		{"bad temperature", withParams(`{"input":"a","temperature":"hot"}`), []want{{ErrFloat, loc("body", KeyParams, "temperature")}}},
		{"bad input", withParams(`{"input":5}`), []want{{ErrList, loc("body", KeyParams, "input")}}},
		{"bad tool_choice", withParams(`{"input":"a","tool_choice":5}`), []want{{ErrString, loc("body", KeyParams, "tool_choice")}}},
		{"params not an object", `{"responses_create_params":"hi"}`, []want{{ErrModelType, loc("body", KeyParams)}}},
		{"usage details list", strings.TrimSuffix(withParams(`{"input":"a"}`), "}") + `,"response":` + responseWith(t, "usage", `{"input_tokens_details":[]}`) + `}`,
			[]want{{ErrModelType, loc("body", "response", "usage", "input_tokens_details")}}},
		{"null item", withParams(`{"input":[null]}`), []want{{ErrModelType, loc("body", KeyParams, "input", 0)}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var r VerifyRequest
			err := json.Unmarshal([]byte(c.body), &r)
			if err == nil {
				t.Fatal("decoded")
			}
			ve := DecodeError(err, "body")
			if len(ve.Detail) != 1 {
				t.Fatalf("details %v", ve)
			}
			if c.errs[0].loc == nil {
				if ve.Detail[0].Type != c.errs[0].typ || ve.Detail[0].Loc[0] != "body" {
					t.Fatalf("got %+v", ve.Detail[0])
				}
				return
			}
			onlyErr(t, ve, c.errs...)
		})
	}
}

func TestParamsInputForms(t *testing.T) {
	for _, params := range []string{
		`{"input":"just a string"}`,
		`{"input":""}`,
		`{"input":[{"role":"user","content":"short form"}]}`,
		`{"input":[{"type":"message","role":"user","content":"typed"}]}`,
		`{"input":[{"role":"user","content":[{"type":"input_text","text":"parts"}]},{"role":"assistant","content":"ok"}]}`,
	} {
		p := decode[ResponseCreateParams](t, params)
		out := marshal(t, p)
		sameJSON(t, out, []byte(params))
	}
	p := decode[ResponseCreateParams](t, `{"input":"s"}`)
	if !p.Input.IsText() || p.Input.Text != "s" || len(p.Input.AsItems()) != 1 || p.Input.AsItems()[0].Role != RoleUser {
		t.Fatalf("string input %+v", p.Input)
	}
	p = decode[ResponseCreateParams](t, `{"input":[]}`)
	if p.Input.IsText() || p.Input.Items == nil {
		t.Fatalf("empty list input %+v", p.Input)
	}
	// A short-form message stays short.
	p = decode[ResponseCreateParams](t, `{"input":[{"role":"user","content":"hi"}]}`)
	if out := string(marshal(t, p)); strings.Contains(out, `"type"`) {
		t.Fatalf("short form gained a type: %s", out)
	}
	if p.Input.Items[0].Has("type") || p.Input.Items[0].Type != "" {
		t.Fatal("short form has a type")
	}
	if got := string(marshal(t, UserMessage("hi"))); got != `{"role":"user","content":"hi"}` {
		t.Fatalf("UserMessage = %s", got)
	}
}

// Unset optional members are left out (exclude_unset); set ones, even
// empty or null, go out.
func TestParamsExcludeUnset(t *testing.T) {
	temp := 0.5
	got := string(marshal(t, ResponseCreateParams{Input: TextInput("x"), Temperature: &temp}))
	if got != `{"input":"x","temperature":0.5}` {
		t.Fatalf("got %s", got)
	}
	got = string(marshal(t, ResponseCreateParams{Input: ItemsInput()}))
	if got != `{"input":[]}` {
		t.Fatalf("got %s", got)
	}
	got = string(marshal(t, ResponseCreateParams{Input: TextInput("x"), Tools: []Tool{}, Include: []string{}, Metadata: map[string]string{}}))
	if got != `{"input":"x","include":[],"metadata":{},"tools":[]}` {
		t.Fatalf("got %s", got)
	}
	for _, params := range []string{
		`{"input":"x"}`,
		`{"input":"x","tools":[],"metadata":{},"include":[]}`,
		`{"input":"x","temperature":null,"model":null,"reasoning":null,"tools":[]}`,
	} {
		if out := marshal(t, decode[ResponseCreateParams](t, params)); !reflect.DeepEqual(canon(t, out), canon(t, []byte(params))) {
			t.Errorf("%s re-encodes as %s", params, out)
		}
	}
	// Setting a member that arrived null replaces the null.
	p := decode[ResponseCreateParams](t, `{"input":"x","temperature":null}`)
	p.Temperature = &temp
	out := marshal(t, p)
	if string(out) != `{"input":"x","temperature":0.5}` {
		t.Fatalf("got %s", out)
	}
	// Effective values.
	if !p.EffectiveParallelToolCalls() || p.EffectiveToolChoice().Mode != ToolChoiceAuto || p.EffectiveTools() == nil {
		t.Fatal("defaults")
	}
	// Clone does not share the lists.
	p = decode[ResponseCreateParams](t, `{"input":[{"role":"user","content":"a"}],"tools":[{"type":"web_search"}]}`)
	c := p.Clone()
	c.Input.Items[0].Role = RoleSystem
	c.Tools[0].Type = "x"
	if p.Input.Items[0].Role != RoleUser || p.Tools[0].Type != "web_search" {
		t.Fatal("Clone shares lists")
	}
}

func TestParamsBuiltInGoValidate(t *testing.T) {
	p := ResponseCreateParams{Input: ItemsInput(UserMessage("hi"), FunctionCall("fc_1", "call_1", "f", "{}"),
		FunctionCallOutput("call_1", "ok")), Tools: []Tool{FunctionTool("f", "d", json.RawMessage(`{"type":"object"}`))}}
	noErr(t, RunRequestValidate(p))
	p.Tools = append(p.Tools, Tool{Type: "function", Name: "g"})
	noErr(t, RunRequestValidate(p))
	p.Input.Items = append(p.Input.Items, Item{Role: "robot", Content: &Content{Text: "x"}})
	// upstream reads an untyped item with an unknown role with its
	// permissive fallback model; an unknown role on a typed message is refused.
	noErr(t, RunRequestValidate(p))
	p.Input.Items[3].Type = TypeMessage
	onlyErr(t, RunRequestValidate(p), want{ErrLiteral, loc(KeyParams, "input", 3, "role")})
	// A function call output built with an empty call id still sends call_id.
	if got := string(marshal(t, FunctionCallOutput("", ""))); got != `{"type":"function_call_output","call_id":"","output":""}` {
		t.Fatalf("got %s", got)
	}
	if got := string(marshal(t, Tool{Type: "function", Name: "g"})); got != `{"type":"function","name":"g","parameters":null,"strict":null}` {
		t.Fatalf("got %s", got)
	}
}

func RunRequestValidate(p ResponseCreateParams) error {
	r := RunRequest{ResponsesCreateParams: p}
	return r.Validate()
}

func TestRowValidate(t *testing.T) {
	onlyErr(t, decodeP[RunRequest](t, `{"expected_answer":"x"}`).Validate(), want{ErrMissing, loc(KeyParams)})
	onlyErr(t, decodeP[RunRequest](t, `{"responses_create_params":null}`).Validate(), want{ErrModelType, loc(KeyParams)})
	v := decodeP[VerifyRequest](t, withParams(`{"input":"a"}`))
	onlyErr(t, v.Validate(), want{ErrMissing, loc(KeyResponse)})
	v = decodeP[VerifyRequest](t, strings.TrimSuffix(withParams(`{"input":"a"}`), "}")+`,"response":null}`)
	onlyErr(t, v.Validate(), want{ErrModelType, loc(KeyResponse)})
	v = decodeP[VerifyRequest](t, strings.TrimSuffix(withParams(`{"input":"a"}`), "}")+`,"response":{}}`)
	hasErr(t, v.Validate(), want{ErrMissing, loc(KeyResponse, "id")}, want{ErrMissing, loc(KeyResponse, "tools")})
	// Bookkeeping nulls travel back as nulls.
	line := withParams(`{"input":"a"}`)
	line = strings.TrimSuffix(line, "}") + `,"_ng_task_index":null,"_ng_rollout_id":null,"agent_ref":null}`
	r := decodeP[RunRequest](t, line)
	noErr(t, r.Validate())
	sameJSON(t, marshal(t, r), []byte(line))
}

// 3. Response.

func TestMinimalResponse(t *testing.T) {
	r := decodeP[Response](t, minimalResponseJSON)
	noErr(t, r.Validate())
	if r.OutputText() != `The capital is \boxed{Paris}.` || !r.HasAssistantMessage() || len(r.FunctionCalls()) != 0 {
		t.Fatalf("accessors %q", r.OutputText())
	}
	if r.CreatedAt != 1767225600 || !r.ParallelToolCalls || r.Usage.TotalTokens != 19 {
		t.Fatalf("%+v", r)
	}
	out := marshal(t, r)
	sameJSON(t, out, []byte(minimalResponseJSON))
	if bytes.Contains(out, []byte("\n")) {
		t.Fatal("multi-line")
	}
}

func TestResponseRequiredMembers(t *testing.T) {
	for _, key := range []string{"id", "object", "created_at", "model", "output", "parallel_tool_calls", "tool_choice", "tools"} {
		t.Run(key, func(t *testing.T) {
			r := decodeP[Response](t, responseWith(t, key, ""))
			onlyErr(t, r.Validate(), want{ErrMissing, loc(key)})
			r = decodeP[Response](t, responseWith(t, key, "null"))
			if err := r.Validate(); err == nil {
				t.Fatalf("null %s accepted", key)
			} else if d := details(t, err); len(d) != 1 || !reflect.DeepEqual(d[0].Loc, loc(key)) || d[0].Type == ErrMissing {
				t.Fatalf("null %s: %v", key, err)
			}
		})
	}
	onlyErr(t, decodeP[Response](t, responseWith(t, "object", `"chat.completion"`)).Validate(), want{ErrLiteral, loc("object")})
	onlyErr(t, decodeP[Response](t, responseWith(t, "status", `"done"`)).Validate(), want{ErrLiteral, loc("status")})
	noErr(t, decodeP[Response](t, responseWith(t, "status", `null`)).Validate())
	// Optional members that arrived null go back as null.
	for key, value := range map[string]string{"status": "null", "usage": "null", "incomplete_details": "null",
		"error": "null", "instructions": "null", "temperature": "null", "metadata": "null", "max_output_tokens": "null",
		"tools": `[{"type":"web_search","name":null,"description":null}]`} {
		body := responseWith(t, key, value)
		r := decodeP[Response](t, body)
		noErr(t, r.Validate())
		sameJSON(t, marshal(t, r), []byte(body))
	}
	noErr(t, decodeP[Response](t, responseWith(t, "created_at", `1767225600.25`)).Validate())
	noErr(t, decodeP[Response](t, responseWith(t, "output", `[]`)).Validate())
	noErr(t, decodeP[Response](t, responseWith(t, "usage", `null`)).Validate())
	noErr(t, decodeP[Response](t, responseWith(t, "usage", "")).Validate())
}

func TestResponseOutputItems(t *testing.T) {
	text := func(extra string) string {
		return `{"type":"message","id":"m","role":"assistant","content":[{"type":"output_text","text":"x"` + extra + `}]}`
	}
	cases := []struct {
		name string
		item string
		errs []want
	}{
		{"no type", `{"id":"m","role":"assistant","content":[{"type":"output_text","text":"x","annotations":[]}]}`, []want{{ErrValue, loc("output", 0)}}},
		{"unknown type", `{"type":"teleport","id":"t"}`, []want{{"union_tag_invalid", loc("output", 0)}}},
		{"message without id", `{"type":"message","role":"assistant","content":[{"type":"output_text","text":"x","annotations":[]}]}`, []want{{ErrMissing, loc("output", 0, "id")}}},
		{"message with empty id", `{"type":"message","id":"","content":[{"type":"output_text","text":"x","annotations":[]}]}`, nil},
		{"message without content", `{"type":"message","id":"m","role":"assistant"}`, []want{{ErrMissing, loc("output", 0, "content")}}},
		{"message with bad status", `{"type":"message","id":"m","status":"done","content":[]}`, []want{{ErrLiteral, loc("output", 0, "status")}}},
		{"output_text without annotations", text(``), []want{{ErrMissing, loc("output", 0, "content", 0, "annotations")}}},
		{"output_text with null annotations", text(`,"annotations":null`), []want{{ErrList, loc("output", 0, "content", 0, "annotations")}}},
		{"output_text with bad annotation", text(`,"annotations":[{"kind":"x"}]`), []want{{ErrValue, loc("output", 0, "content", 0, "annotations", 0)}}},
		{"output_text without text", `{"type":"message","id":"m","content":[{"type":"output_text","annotations":[]}]}`, []want{{ErrMissing, loc("output", 0, "content", 0, "text")}}},
		{"untyped part", `{"type":"message","id":"m","content":[{"text":"x","annotations":[]},{"refusal":"no"}]}`, []want{{ErrMissing, loc("output", 0, "role")}, {ErrValue, loc("output", 0, "content", 0)}, {ErrValue, loc("output", 0, "content", 1)}}},
		{"refusal", `{"type":"message","id":"m","content":[{"type":"refusal","refusal":"no"}]}`, nil},
		{"refusal without text", `{"type":"message","id":"m","content":[{"type":"refusal"}]}`, []want{{ErrMissing, loc("output", 0, "content", 0, "refusal")}}},
		{"unknown part", `{"type":"message","id":"m","role":"assistant","content":[{"type":"output_audio"}]}`, []want{{ErrValue, loc("output", 0, "content", 0)}}},
		// The trap of section 4.3: a string content validates, as an input message.
		{"string content", `{"type":"message","role":"assistant","content":"a string"}`, nil},
		{"string content without role", `{"type":"message","id":"m","content":"a string"}`, []want{{ErrMissing, loc("output", 0, "role")}}},
		{"input-form message", `{"type":"message","role":"user","content":[{"type":"input_text","text":"x"}]}`, nil},
		{"function call", `{"type":"function_call","call_id":"call_1","name":"get_weather","arguments":"{\"city\": \"SF\"}"}`, nil},
		{"function call with empty arguments", `{"type":"function_call","call_id":"","name":"","arguments":""}`, nil},
		{"function call without call_id", `{"type":"function_call","name":"f","arguments":"{}"}`, []want{{ErrMissing, loc("output", 0, "call_id")}}},
		{"function call with bad status", `{"type":"function_call","call_id":"c","name":"f","arguments":"{}","status":"ok"}`, []want{{ErrLiteral, loc("output", 0, "status")}}},
		{"function call output", `{"type":"function_call_output","call_id":"c","output":"x","id":"o","status":"completed"}`, nil},
		{"reasoning", `{"type":"reasoning","id":"r","summary":[],"content":[{"type":"reasoning_text","text":"hm"}],"encrypted_content":"zz"}`, nil},
		{"reasoning without id", `{"type":"reasoning","summary":[]}`, []want{{ErrMissing, loc("output", 0, "id")}}},
		{"reasoning with bad summary", `{"type":"reasoning","id":"r","summary":[{"text":"x"}]}`, []want{{ErrMissing, loc("output", 0, "summary", 0, "type")}}},
		{"hosted call", `{"type":"mcp_call","id":null,"name":"python","arguments":"{}","server_label":null,"output":null,"error":null,"status":"weird"}`, nil},
		{"computer call output", `{"type":"computer_call_output","call_id":"c","output":{"type":"computer_screenshot","image_url":"data:x"}}`, []want{{ErrMissing, loc("output", 0, "id")}, {ErrMissing, loc("output", 0, "status")}}},
		{"training variant", `{"type":"function_call","call_id":"c","name":"f","arguments":"{}","prompt_token_ids":[1],"generation_token_ids":[2],"generation_log_probs":[-0.1],"routed_experts":"nrlre1:x"}`, nil},
		{"partial training variant", `{"type":"function_call","call_id":"c","name":"f","arguments":"{}","routed_experts":[[[1]]]}`, []want{{ErrValue, loc("output", 0)}}},
		{"bad training tokens", `{"type":"function_call","call_id":"c","name":"f","arguments":"{}","prompt_token_ids":["a"],"generation_token_ids":[2],"generation_log_probs":[0]}`, []want{{ErrInt, loc("output", 0, "prompt_token_ids", 0)}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body := responseWithOutput(t, c.item)
			r := decodeP[Response](t, body)
			err := r.Validate()
			if c.errs == nil {
				noErr(t, err)
			} else {
				onlyErr(t, err, c.errs...)
			}
			out := marshal(t, r)
			if err == nil {
				sameJSON(t, out, []byte(body))
			}
			if k := dupKeys(out); k != "" {
				t.Fatalf("duplicate key %q in %s", k, out)
			}
		})
	}
}

// Upstream refuses a function call whose arguments is an object (it must
// be a JSON-encoded string); ours decodes it (the member is kept as it
// came) and Validate refuses it.
func TestFunctionCallArgumentsObject(t *testing.T) {
	r := decode[Response](t, responseWithOutput(t, `{"type":"function_call","call_id":"c","name":"f","arguments":{"city":"SF"}}`))
	onlyErr(t, DecodeError(r.Validate(), "body"), want{ErrString, loc("body", "output", 0, "arguments")})
}

func TestUsage(t *testing.T) {
	usage := func(s string) string { return responseWith(t, "usage", s) }
	cases := []struct {
		name, usage string
		errs        []want
	}{
		{"complete", `{"input_tokens":1,"input_tokens_details":{"cached_tokens":0},"output_tokens":2,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":3}`, nil},
		{"null counts", `{"input_tokens":1,"input_tokens_details":{"cached_tokens":null},"output_tokens":2,"output_tokens_details":{"reasoning_tokens":null},"total_tokens":3}`, nil},
		{"no input details", `{"input_tokens":1,"output_tokens":2,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":3}`,
			[]want{{ErrMissing, loc("usage", "input_tokens_details")}}},
		{"null output details", `{"input_tokens":1,"input_tokens_details":{"cached_tokens":0},"output_tokens":2,"output_tokens_details":null,"total_tokens":3}`,
			[]want{{ErrModelType, loc("usage", "output_tokens_details")}}},
		{"empty details", `{"input_tokens":1,"input_tokens_details":{},"output_tokens":2,"output_tokens_details":{},"total_tokens":3}`,
			[]want{{ErrMissing, loc("usage", "input_tokens_details", "cached_tokens")}, {ErrMissing, loc("usage", "output_tokens_details", "reasoning_tokens")}}},
		{"no counts", `{"input_tokens_details":{"cached_tokens":0},"output_tokens_details":{"reasoning_tokens":0},"total_tokens":null}`,
			[]want{{ErrMissing, loc("usage", "input_tokens")}, {ErrMissing, loc("usage", "output_tokens")}, {ErrInt, loc("usage", "total_tokens")}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := decodeP[Response](t, usage(c.usage))
			err := r.Validate()
			if c.errs == nil {
				noErr(t, err)
				sameJSON(t, marshal(t, r), []byte(usage(c.usage)))
			} else {
				onlyErr(t, err, c.errs...)
			}
		})
	}
	// A usage built in Go always encodes both detail objects.
	if got := string(marshal(t, Usage{InputTokens: 1})); got != `{"input_tokens":1,"input_tokens_details":{"cached_tokens":null},"output_tokens":0,"output_tokens_details":{"reasoning_tokens":null},"total_tokens":0}` {
		t.Fatalf("got %s", got)
	}
}

func TestResponseBuiltInGo(t *testing.T) {
	var zero Response
	m := asMap(t, marshal(t, zero))
	for key, wantValue := range map[string]any{
		"id": "", "object": "response", "created_at": json.Number("0"), "model": "", "output": []any{},
		"parallel_tool_calls": false, "tool_choice": "auto", "tools": []any{},
	} {
		if got, ok := m[key]; !ok || !reflect.DeepEqual(got, wantValue) {
			t.Errorf("%s = %#v (present %v), want %#v", key, got, ok, wantValue)
		}
	}
	noErr(t, zero.Validate())

	r := Response{ID: "resp_1", CreatedAt: 1767225600, Model: "go", ParallelToolCalls: true, Status: ResponseCompleted,
		Output: []Item{
			{Type: TypeReasoning, ID: "rs_1"},
			FunctionCall("fc_1", "call_1", "lookup", `{"city":"Paris"}`),
			FunctionCallOutput("call_1", "FR"),
			AssistantMessage("msg_1", "Paris"),
		},
		Tools: []Tool{FunctionTool("lookup", "Find", json.RawMessage(`{"type":"object"}`))},
		Usage: NewUsage(10, 5)}
	noErr(t, r.Validate())
	out := marshal(t, r)
	wantJSON := `{"id":"resp_1","object":"response","created_at":1767225600,"model":"go","output":[` +
		`{"type":"reasoning","id":"rs_1","summary":[]},` +
		`{"type":"function_call","id":"fc_1","status":"completed","call_id":"call_1","name":"lookup","arguments":"{\"city\":\"Paris\"}"},` +
		`{"type":"function_call_output","call_id":"call_1","output":"FR"},` +
		`{"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"Paris","annotations":[]}]}],` +
		`"parallel_tool_calls":true,"tool_choice":"auto",` +
		`"tools":[{"type":"function","name":"lookup","description":"Find","parameters":{"type":"object"},"strict":false}],` +
		`"status":"completed","usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":0},"output_tokens":5,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":15}}`
	if string(out) != wantJSON {
		t.Fatalf("got\n%s\nwant\n%s", out, wantJSON)
	}
	if got := string(marshal(t, OutputText("x"))); got != `{"type":"output_text","text":"x","annotations":[]}` {
		t.Fatalf("output_text part %s", got)
	}
	if got := string(marshal(t, Part{Type: PartRefusal})); got != `{"type":"refusal","refusal":""}` {
		t.Fatalf("refusal part %s", got)
	}
	// An invalid item built in Go is caught too.
	r.Output = append(r.Output, Item{Type: TypeMessage, Role: RoleAssistant, Content: &Content{Parts: []Part{OutputText("x")}}})
	onlyErr(t, r.Validate(), want{ErrMissing, loc("output", 4, "id")})
}

func TestResponseExtra(t *testing.T) {
	body := responseWith(t, "x_vendor", `{"trace":[1,2],"ok":true}`)
	body = strings.TrimSuffix(body, "}") + `,"reasoning":{"effort":"low","summary":null},"conversation":null,"prompt_cache_key":"k"}`
	r := decodeP[Response](t, body)
	noErr(t, r.Validate())
	for _, key := range []string{"x_vendor", "reasoning", "conversation", "prompt_cache_key"} {
		if !r.Extra.Has(key) {
			t.Errorf("Extra lacks %s", key)
		}
	}
	sameJSON(t, marshal(t, r), []byte(body))

	// Instructions as a string, or as a list of input items.
	for _, ins := range []string{`"Be brief."`, `[{"role":"system","content":"Be brief."}]`, `null`} {
		body := responseWith(t, "instructions", ins)
		r := decodeP[Response](t, body)
		noErr(t, r.Validate())
		sameJSON(t, marshal(t, r), []byte(body))
		if ins == `"Be brief."` && (r.Instructions == nil || *r.Instructions != "Be brief.") {
			t.Fatalf("instructions %v", r.Instructions)
		}
	}
	// Metadata, empty and not.
	for _, md := range []string{`{}`, `{"a":"b"}`, `null`} {
		body := responseWith(t, "metadata", md)
		sameJSON(t, marshal(t, decodeP[Response](t, body)), []byte(body))
	}
}

func TestOutputText(t *testing.T) {
	r := decodeP[Response](t, responseWithOutput(t,
		`{"type":"reasoning","id":"r","summary":[{"type":"summary_text","text":"NOT"}]}`,
		`{"type":"message","id":"a","content":[{"type":"output_text","text":"Hello","annotations":[]},{"type":"refusal","refusal":"NOT"},{"type":"output_text","text":", ","annotations":[]}]}`,
		`{"type":"function_call","call_id":"c","name":"f","arguments":"NOT"}`,
		`{"type":"message","id":"b","content":[{"type":"output_text","text":"world","annotations":[]}]}`,
	))
	noErr(t, r.Validate())
	if got := r.OutputText(); got != "Hello, world" {
		t.Fatalf("OutputText = %q", got)
	}
	if len(r.FunctionCalls()) != 1 || r.FunctionCalls()[0].Arguments != "NOT" {
		t.Fatal("FunctionCalls")
	}
	if (Response{}).OutputText() != "" || (Response{}).HasAssistantMessage() {
		t.Fatal("empty response")
	}
}

func TestItemRoundTripDetails(t *testing.T) {
	for _, item := range []string{
		`{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"x"}]}`,
		`{"type":"mcp_call","name":"n","arguments":"{}","output":null}`,
		`{"type":"function_call","id":"","call_id":"","name":"","arguments":"","status":null}`,
		`{"type":"reasoning","id":"r","summary":[],"content":null,"status":null}`,
		`{"type":"message","id":"m","content":[{"type":"output_text","text":"","annotations":[],"logprobs":[{"token":"a","bytes":[97],"logprob":-0.1,"top_logprobs":[]}]}]}`,
		`{"type":"message","id":"m","content":[{"type":"custom","text":"","refusal":""}]}`,
		`{"type":"local_shell_call","call_id":"c","action":{"type":"exec","command":["ls"]},"status":"completed"}`,
		`{"role":"user","content":"x","status":null,"id":null}`,
	} {
		it := decode[Item](t, item)
		out := marshal(t, it)
		sameJSON(t, out, []byte(item))
		if k := dupKeys(out); k != "" {
			t.Fatalf("duplicate key %q in %s", k, out)
		}
	}
	it := decode[Item](t, `{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"x"}]}`)
	if it.Has("output") || it.Output != "" || !it.Extra.Has("output") {
		t.Fatalf("list output %+v", it)
	}
	it = decode[Item](t, `{"type":"function_call","call_id":"c","name":"f","arguments":"{}","id":null}`)
	if !it.Has("arguments") || it.Has("id") || it.Has("summary") || it.Has("nonsense") {
		t.Fatal("Has")
	}
	// Setting a member that arrived null replaces the null.
	it.ID = "fc_1"
	if m := asMap(t, marshal(t, it)); m["id"] != "fc_1" {
		t.Fatalf("id %v", m["id"])
	}
	if (Item{}).Text() != "" || UserMessage("a").Text() != "a" || AssistantMessage("m", "b").Text() != "b" {
		t.Fatal("Text")
	}
	c := Content{Parts: []Part{{Type: PartInputText, Text: "a"}, {Type: PartRefusal, Refusal: "r"}, OutputText("b")}}
	if c.JoinText("|") != "a|b" {
		t.Fatalf("JoinText %q", c.JoinText("|"))
	}
	var bad Content
	if err := json.Unmarshal([]byte(`5`), &bad); err == nil {
		t.Fatal("content number decoded")
	}
}

// 4. Usage.Add, rollout ids and paths.

func ptr[T any](v T) *T { return &v }

func TestUsageAdd(t *testing.T) {
	a := NewUsage(10, 5)
	b := &Usage{InputTokens: 1, OutputTokens: 2, TotalTokens: 3,
		InputTokensDetails: InputTokensDetails{CachedTokens: ptr(4)}}
	sum := a.Add(b)
	if sum.InputTokens != 11 || sum.OutputTokens != 7 || sum.TotalTokens != 18 {
		t.Fatalf("sum %+v", sum)
	}
	if sum.InputTokensDetails.CachedTokens == nil || *sum.InputTokensDetails.CachedTokens != 4 {
		t.Fatal("known counts add")
	}
	if sum.OutputTokensDetails.ReasoningTokens != nil {
		t.Fatal("unknown stays unknown")
	}
	if again := sum.Add(NewUsage(1, 1)); again.OutputTokensDetails.ReasoningTokens != nil {
		t.Fatal("unknown stays unknown after more adds")
	}
	var none *Usage
	if none.Add(nil) != nil {
		t.Fatal("nil + nil")
	}
	c := none.Add(a)
	if c == a || *c.InputTokensDetails.CachedTokens != 0 || c.TotalTokens != 15 {
		t.Fatal("nil + a copies a")
	}
	*c.InputTokensDetails.CachedTokens = 99
	if *a.InputTokensDetails.CachedTokens != 0 {
		t.Fatal("copy shares counts")
	}
	if d := a.Add(nil); d == a || d.TotalTokens != 15 {
		t.Fatal("a + nil copies a")
	}
	if *a.InputTokensDetails.CachedTokens != 0 || a.InputTokens != 10 {
		t.Fatal("Add changed its receiver")
	}
}

func TestResolveRolloutID(t *testing.T) {
	cases := []struct {
		name, row string
		id        string
		ok, err   bool
	}{
		{"explicit", `{"_ng_rollout_id":"run.7_x-1","_ng_task_index":3,"_ng_rollout_index":0}`, "run.7_x-1", true, false},
		{"explicit with attempt", `{"_ng_rollout_id":"abc","_ng_attempt_index":2}`, "abc-a2", true, false},
		{"invalid explicit", `{"_ng_rollout_id":".hidden","_ng_task_index":3,"_ng_rollout_index":0}`, "", false, true},
		{"invalid explicit slash", `{"_ng_rollout_id":"a/b"}`, "", false, true},
		{"empty explicit", `{"_ng_rollout_id":"","_ng_task_index":3,"_ng_rollout_index":0}`, "", false, true},
		{"null explicit", `{"_ng_rollout_id":null,"_ng_task_index":3,"_ng_rollout_index":0}`, "3-0", true, false},
		{"indexes", `{"_ng_task_index":3,"_ng_rollout_index":0}`, "3-0", true, false},
		{"attempt 0", `{"_ng_task_index":3,"_ng_rollout_index":0,"_ng_attempt_index":0}`, "3-0", true, false},
		{"attempt 2", `{"_ng_task_index":3,"_ng_rollout_index":0,"_ng_attempt_index":2}`, "3-0-a2", true, false},
		{"missing rollout index", `{"_ng_task_index":3}`, "", false, false},
		{"missing task index", `{"_ng_rollout_index":0,"_ng_attempt_index":1}`, "", false, false},
		{"nothing", `{}`, "", false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := decodeP[RunRequest](t, c.row)
			id, ok, err := r.ResolveRolloutID()
			if id != c.id || ok != c.ok || (err != nil) != c.err {
				t.Fatalf("got %q %v %v; want %q %v err=%v", id, ok, err, c.id, c.ok, c.err)
			}
			if c.err && !errors.Is(err, ErrBadRolloutID) {
				t.Fatalf("error %v does not wrap ErrBadRolloutID", err)
			}
			sameJSON(t, marshal(t, r), []byte(mergeRow(c.row)))
		})
	}
	r := RunRequest{TaskIndex: ptr(12), RolloutIndex: ptr(3), AttemptIndex: ptr(1)}
	if id, ok, err := r.ResolveRolloutID(); id != "12-3-a1" || !ok || err != nil {
		t.Fatalf("built in Go: %q %v %v", id, ok, err)
	}
	for id, valid := range map[string]bool{"a": true, "0": true, "A.b_c-9": true, "": false, "-a": false, "_a": false, ".a": false, "a b": false, "é": false} {
		if ValidRolloutID(id) != valid {
			t.Errorf("ValidRolloutID(%q) = %v", id, !valid)
		}
	}
}

// mergeRow returns row with the responses_create_params a decoded row
// always encodes.
func mergeRow(row string) string {
	if row == "{}" {
		return `{"responses_create_params":{"input":""}}`
	}
	return `{"responses_create_params":{"input":""},` + row[1:]
}

func TestRolloutPaths(t *testing.T) {
	cases := []struct {
		path string
		id   string
		rest string
		ok   bool
	}{
		{"/ng-rollout/3-0/verify", "3-0", "/verify", true},
		{"/ng-rollout/3-0-a2/seed_session", "3-0-a2", "/seed_session", true},
		{"/ng-rollout/3-0/", "3-0", "/", true},
		{"/ng-rollout/3-0/training-token-capture/v1/responses", "3-0", "/training-token-capture/v1/responses", true},
		{"/ng-rollout/3-0", "", "", false},
		{"/ng-rollout/", "", "", false},
		{"/ng-rollout//verify", "", "", false},
		{"/ng-rollout/.x/verify", "", "", false},
		{"/ng-rollout/a b/verify", "", "", false},
		{"/ng-rollout/a%2Fb/verify", "", "", false},
		{"/verify", "", "", false},
		{"/x/ng-rollout/3-0/verify", "", "", false},
	}
	for _, c := range cases {
		id, rest, ok := SplitRolloutPath(c.path)
		if id != c.id || rest != c.rest || ok != c.ok {
			t.Errorf("SplitRolloutPath(%q) = %q %q %v; want %q %q %v", c.path, id, rest, ok, c.id, c.rest, c.ok)
		}
	}
	model := []struct {
		path, id, rest string
		capture, ok    bool
	}{
		{"/ng-rollout/3-0/v1/responses", "3-0", "/v1/responses", false, true},
		{"/ng-rollout/3-0/training-token-capture/v1/responses", "3-0", "/v1/responses", true, true},
		{"/ng-rollout/3-0/training-token-capture/", "3-0", "/", true, true},
		{"/ng-rollout/3-0/training-token-capture", "3-0", "/training-token-capture", false, true},
		{"/ng-rollout/3-0/training-token-captured/x", "3-0", "/training-token-captured/x", false, true},
		{"/ng-rollout/any id.., ok/v1/chat/completions", "any id.., ok", "/v1/chat/completions", false, true},
		{"/ng-rollout/3-0", "", "", false, false},
		{"/ng-rollout//v1/responses", "", "", false, false},
		{"/v1/responses", "", "", false, false},
	}
	for _, c := range model {
		id, rest, capture, ok := SplitModelRolloutPath(c.path)
		if id != c.id || rest != c.rest || capture != c.capture || ok != c.ok {
			t.Errorf("SplitModelRolloutPath(%q) = %q %q %v %v; want %q %q %v %v", c.path, id, rest, capture, ok, c.id, c.rest, c.capture, c.ok)
		}
	}
	if got := RolloutPath("3-0", PathVerify); got != "/ng-rollout/3-0/verify" {
		t.Fatalf("RolloutPath = %q", got)
	}
	if id, rest, ok := SplitRolloutPath(RolloutPath("7-1-a1", PathSeedSession)); id != "7-1-a1" || rest != PathSeedSession || !ok {
		t.Fatal("RolloutPath does not split back")
	}
}

// 5. Fields.

func TestFields(t *testing.T) {
	var f Fields
	if got := string(marshal(t, f)); got != "{}" {
		t.Fatalf("nil Fields = %s", got)
	}
	if got, err := (Fields{}).MarshalJSON(); err != nil || string(got) != "{}" {
		t.Fatalf("empty Fields = %s %v", got, err)
	}
	if _, ok := f.Get("a"); ok || f.Has("a") {
		t.Fatal("empty has a")
	}
	noErr(t, f.Set("a", 1))
	noErr(t, f.Set("b", map[string]any{"c": []int{1}}))
	noErr(t, f.Set("x", nil))
	noErr(t, f.Set("a", "one")) // replaces in place
	if got := string(marshal(t, f)); got != `{"a":"one","b":{"c":[1]},"x":null}` {
		t.Fatalf("got %s", got)
	}
	if err := f.Set("bad", func() {}); err == nil {
		t.Fatal("Set of a func")
	}
	var s string
	if ok, err := f.Decode("a", &s); !ok || err != nil || s != "one" {
		t.Fatal("Decode")
	}
	s = "kept"
	if ok, err := f.Decode("missing", &s); ok || err != nil || s != "kept" {
		t.Fatal("Decode of a missing key")
	}
	var n int
	if ok, err := f.Decode("a", &n); !ok || err == nil || !strings.Contains(err.Error(), "field a") {
		t.Fatalf("Decode of the wrong type: %v %v", ok, err)
	}
	c := f.Clone()
	c[0].Value[1] = 'O'
	noErr(t, c.Set("new", true))
	if string(f[0].Value) != `"one"` || f.Has("new") {
		t.Fatal("Clone shares")
	}
	if Fields(nil).Clone() != nil {
		t.Fatal("Clone of nil")
	}
	f.Delete("b")
	f.Delete("nope")
	if got := string(marshal(t, f)); got != `{"a":"one","x":null}` {
		t.Fatalf("after Delete %s", got)
	}
	f.SetRaw("r", json.RawMessage("[1,\n 2]"))
	if raw, _ := f.Get("r"); string(raw) != "[1,2]" {
		t.Fatalf("SetRaw kept a line break: %q", raw)
	}
	var g Fields
	noErr(t, json.Unmarshal([]byte(`{"k":1,"j":{"a":[true]},"k":2,"<":"\u003c"}`), &g))
	if len(g) != 3 || string(g[0].Value) != "2" || g[0].Key != "k" {
		t.Fatalf("duplicate keys: %v", g)
	}
	sameJSON(t, marshal(t, g), []byte(`{"k":2,"j":{"a":[true]},"<":"<"}`))
	if err := json.Unmarshal([]byte(`[]`), &g); err == nil {
		t.Fatal("list decoded as Fields")
	}
	// Many members: the index kicks in.
	var many strings.Builder
	many.WriteString("{")
	for i := range 40 {
		fmt.Fprintf(&many, `"k%d":%d,`, i%30, i)
	}
	many.WriteString(`"end":0}`)
	noErr(t, json.Unmarshal([]byte(many.String()), &g))
	if len(g) != 31 {
		t.Fatalf("%d members", len(g))
	}
	if raw, _ := g.Get("k5"); string(raw) != "35" {
		t.Fatalf("k5 = %s", raw)
	}
}

// 6. Errors.

func TestValidationErrorBody(t *testing.T) {
	r := decodeP[RunRequest](t, withParams(`{"input":"a","frequency_penalty":"c","truncation":"x"}`))
	err := r.Validate()
	ve := DecodeError(err, "body")
	body := string(marshal(t, ve))
	wantBody := `{"detail":[{"type":"extra_forbidden","loc":["body","responses_create_params","frequency_penalty"],"msg":"Extra inputs are not permitted","input":"c"},` +
		`{"type":"literal_error","loc":["body","responses_create_params","truncation"],"msg":"Input should be 'auto' or 'disabled'","input":"x"}]}`
	if body != wantBody {
		t.Fatalf("body\n%s\nwant\n%s", body, wantBody)
	}
	if !strings.HasPrefix(err.Error(), "2 validation errors: responses_create_params.frequency_penalty: Extra inputs") {
		t.Fatalf("Error() = %q", err.Error())
	}
	if got := LocString([]any{"body", "input", 2, "content", 0}); got != "body.input[2].content[0]" {
		t.Fatalf("LocString = %q", got)
	}
	if (&ValidationError{}).Error() != "validation failed" {
		t.Fatal("empty")
	}
	one := DecodeError(errors.New("boom"), "body")
	if one.Detail[0].Type != ErrValue || one.Error() != "validation error: body: Value error, boom" {
		t.Fatalf("%v", one)
	}
	if got := string(marshal(t, NotFoundBody)); got != `{"detail":"Not Found"}` {
		t.Fatal(got)
	}
}

// The bit constants the rules use must match the wire structs' order.
func TestWireBits(t *testing.T) {
	checks := []struct {
		t   reflect.Type
		key string
		bit uint64
	}{
		{reflect.TypeFor[paramsWire](), "input", paramInput},
		{reflect.TypeFor[paramsWire](), "parallel_tool_calls", paramParallelToolCalls},
		{reflect.TypeFor[paramsWire](), "tool_choice", paramToolChoice},
		{reflect.TypeFor[paramsWire](), "tools", paramTools},
		{reflect.TypeFor[itemWire](), "summary", itemSummary},
		{reflect.TypeFor[itemWire](), "output", itemOutput},
		{reflect.TypeFor[partWire](), "refusal", partRefusal},
		{reflect.TypeFor[toolWire](), "strict", toolStrict},
		{reflect.TypeFor[responseWire](), "status", respStatus},
		{reflect.TypeFor[responseWire](), "instructions", respInstructions},
		{reflect.TypeFor[rowWire](), "reward", rowReward},
		{reflect.TypeFor[rowWire](), KeyRolloutID, rowRolloutID},
		{reflect.TypeFor[rowWire](), KeyAgentRef, rowAgentRef},
		{reflect.TypeFor[rowWire](), KeyTaskIndex, rowTaskIndex},
	}
	for _, c := range checks {
		if got := uint64(1) << keysOf(c.t)[c.key]; got != c.bit {
			t.Errorf("%v %s: bit %b, constant %b", c.t, c.key, got, c.bit)
		}
	}
	for i, m := range requiredResponse {
		if keysOf(reflect.TypeFor[responseWire]())[m.key] != i {
			t.Errorf("requiredResponse[%d] = %s out of order", i, m.key)
		}
	}
	if !reflect.DeepEqual(keysOf(reflect.TypeFor[rowWire]()), keysOf(reflect.TypeFor[rowDecodeWire]())) {
		t.Fatal("rowWire and rowDecodeWire differ")
	}
	// ParamKeys names exactly the declared members.
	keys := keysOf(reflect.TypeFor[paramsWire]())
	if len(keys) != len(ParamKeys) {
		t.Fatalf("%d keys, ParamKeys has %d", len(keys), len(ParamKeys))
	}
	for _, k := range ParamKeys {
		if _, ok := keys[k]; !ok {
			t.Errorf("ParamKeys has %s, the wire does not", k)
		}
	}
}

func TestDecodeErrorNil(t *testing.T) {
	if DecodeError(nil, "body") != nil {
		t.Fatal("DecodeError(nil) is not nil")
	}
}

// Upstream matches member names exactly; encoding/json alone would fill
// a declared member from one whose name differs only in case.
func TestMemberNamesAreCaseSensitive(t *testing.T) {
	it := decode[Item](t, `{"type":"reasoning","id":"r","summary":[],"ID":"x","Type":"message"}`)
	if it.ID != "r" || it.Type != TypeReasoning || !it.Extra.Has("ID") || !it.Extra.Has("Type") {
		t.Fatalf("item %+v", it)
	}
	sameJSON(t, marshal(t, it), []byte(`{"type":"reasoning","id":"r","summary":[],"ID":"x","Type":"message"}`))

	r := decodeP[VerifyResponse](t, strings.TrimSuffix(verifyJSON, "}")+`,"Reward":5}`)
	onlyErr(t, r.Validate(), want{ErrMissing, loc("reward")})
	if r.Reward != 0 || !r.Fields.Has("Reward") {
		t.Fatalf("reward %v, fields %v", r.Reward, r.Fields.Has("Reward"))
	}
	p := decodeP[RunRequest](t, withParams(`{"input":"a","Temperature":0.5}`))
	onlyErr(t, p.Validate(), want{ErrExtraForbidden, loc(KeyParams, "Temperature")})
	if p.ResponsesCreateParams.Temperature != nil {
		t.Fatal("Temperature filled temperature")
	}
	u := decode[Usage](t, `{"input_tokens":1,"INPUT_TOKENS":9,"input_tokens_details":{"cached_tokens":null},"output_tokens":0,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":1}`)
	if u.InputTokens != 1 {
		t.Fatalf("input tokens %d", u.InputTokens)
	}
}

// Repeated members: the last wins, whole.
func TestRepeatedMembers(t *testing.T) {
	r := decode[RunRequest](t, strings.TrimSuffix(withParams(`{"input":"a"}`), "}")+
		`,"agent_ref":{"type":"responses_api_agents","name":"a"},"agent_ref":{"type":"t","name":"b"},"_ng_task_index":1,"_ng_task_index":2,"x":1,"x":2}`)
	if r.AgentRef.Type != "t" || r.AgentRef.Name != "b" || *r.TaskIndex != 2 {
		t.Fatalf("agent_ref %+v, task index %v", r.AgentRef, *r.TaskIndex)
	}
	if raw, _ := r.Fields.Get("x"); string(raw) != "2" || len(r.Fields) != 1 {
		t.Fatalf("fields %v", r.Fields)
	}
	it := decode[Item](t, `{"type":"message","content":"a","content":[{"type":"input_text","text":"b"}]}`)
	if it.Text() != "b" {
		t.Fatalf("content %q", it.Text())
	}
}

// UnmarshalJSON called directly checks its input.
func TestInvalidJSON(t *testing.T) {
	for _, s := range []string{`{"a":tru}`, `{"a":1,}`, `{`, ``, `{"a" 1}`, `[1,]`, `"abc`, `{"type":"message","content":[{"type":"x"}}`} {
		for name, d := range map[string]json.Unmarshaler{
			"Item": &Item{}, "Part": &Part{}, "Content": &Content{}, "Input": &Input{}, "ToolChoice": &ToolChoice{},
			"Tool": &Tool{}, "ResponseCreateParams": &ResponseCreateParams{}, "Response": &Response{}, "Usage": &Usage{},
			"RunRequest": &RunRequest{}, "VerifyRequest": &VerifyRequest{}, "VerifyResponse": &VerifyResponse{},
			"Fields": &Fields{}, "SeedSessionRequest": &SeedSessionRequest{},
		} {
			err := d.UnmarshalJSON([]byte(s))
			var syn *json.SyntaxError
			if !errors.As(err, &syn) {
				t.Errorf("%s.UnmarshalJSON(%q) = %v, want a syntax error", name, s, err)
			}
		}
	}
}

// Upstream's agent does not type the bookkeeping members: one of another
// shape travels as it came, in Fields.
func TestBookkeepingMembersOfOtherShapes(t *testing.T) {
	cases := []struct {
		name, members string
		inFields      []string
		id            string
		ok, err       bool
	}{
		{"typed", `"_ng_task_index":3,"_ng_rollout_index":1,"agent_ref":{"type":"responses_api_agents","name":"a"}`, nil, "3-1", true, false},
		{"string index", `"_ng_task_index":"3","_ng_rollout_index":1`, []string{KeyTaskIndex}, "", false, false},
		{"float index", `"_ng_task_index":3.5,"_ng_rollout_index":1,"_ng_attempt_index":1.0`, []string{KeyTaskIndex, KeyAttemptIndex}, "", false, false},
		{"agent_ref with more members", `"agent_ref":{"type":"responses_api_agents","name":"a","version":2}`, []string{KeyAgentRef}, "", false, false},
		{"agent_ref without type", `"agent_ref":{"name":"a"}`, []string{KeyAgentRef}, "", false, false},
		{"agent_ref string", `"agent_ref":"a"`, []string{KeyAgentRef}, "", false, false},
		{"rollout id number", `"_ng_rollout_id":7,"_ng_task_index":3,"_ng_rollout_index":1`, []string{KeyRolloutID}, "", false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			line := strings.TrimSuffix(withParams(`{"input":"a"}`), "}") + "," + c.members + "}"
			r := decodeP[RunRequest](t, line)
			// upstream reads _ng_rollout_id as an optional string.
			if err := r.Validate(); (err != nil) != (c.name == "rollout id number") {
				t.Fatalf("validate: %v", err)
			}
			for _, k := range c.inFields {
				if !r.Fields.Has(k) {
					t.Errorf("%s not in Fields", k)
				}
			}
			if len(c.inFields) == 0 && len(r.Fields) != 0 {
				t.Errorf("fields %v", r.Fields)
			}
			id, ok, err := r.ResolveRolloutID()
			if id != c.id || ok != c.ok || (err != nil) != c.err {
				t.Errorf("ResolveRolloutID = %q %v %v", id, ok, err)
			}
			out := marshal(t, r)
			sameJSON(t, out, []byte(line))
			if k := dupKeys(out); k != "" {
				t.Fatalf("duplicate %q", k)
			}
		})
	}
}

// A response's function tool needs only type and name; the same tool in
// a request is refused (TestParamsRules).
func TestResponseFunctionToolNeedsOnlyName(t *testing.T) {
	body := responseWith(t, "tools", `[{"type":"function","name":"get_weather"}]`)
	r := decodeP[Response](t, body)
	noErr(t, r.Validate())
	// It goes out with parameters and strict null, which upstream reads as unset.
	m := asMap(t, marshal(t, r))
	tool := m["tools"].([]any)[0].(map[string]any)
	if v, ok := tool["parameters"]; !ok || v != nil {
		t.Fatalf("tool %v", tool)
	}
	onlyErr(t, decodeP[Response](t, responseWith(t, "tools", `[{"type":"function"}]`)).Validate(), want{ErrMissing, loc("tools", 0, "name")})
	req := decodeP[RunRequest](t, withParams(`{"input":"a","tools":[{"type":"function","name":"get_weather"}]}`))
	onlyErr(t, req.Validate(), want{ErrMissing, loc(KeyParams, "tools", 0, "parameters")}, want{ErrMissing, loc(KeyParams, "tools", 0, "strict")})
}
