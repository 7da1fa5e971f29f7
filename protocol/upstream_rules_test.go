package protocol

import (
	"encoding/json"
	"strings"
	"testing"
)

// Fixtures written from nemo-gym 0.7.0's models (openai 2.44): what they
// accept and refuse, checked here without upstream installed;
// TestUpstreamDifferential checks the same rules against upstream itself.

func TestV07InputItems(t *testing.T) {
	cases := []struct {
		name, items string
		errs        []want
	}{
		{"item_reference is refused", `[{"type":"item_reference","id":"msg_1"}]`, []want{{"union_tag_invalid", loc(KeyParams, "input", 0)}}},
		{"compaction", `[{"type":"compaction","id":"c","encrypted_content":"e"}]`, nil},
		{"compaction without its members", `[{"type":"compaction"}]`,
			[]want{{ErrMissing, loc(KeyParams, "input", 0, "id")}, {ErrMissing, loc(KeyParams, "input", 0, "encrypted_content")}}},
		{"compaction_trigger", `[{"type":"compaction_trigger"}]`, nil},
		{"additional_tools gets its role", `[{"type":"additional_tools","role":"user","tools":[{"type":"shell"}]}]`, nil},
		{"shell call and output", `[{"type":"shell_call","id":"s","call_id":"c","action":{"commands":["ls"]},"status":"completed"},` +
			`{"type":"shell_call_output","id":"o","call_id":"c","output":[],"status":"completed"}]`, nil},
		{"shell call with a bad status", `[{"type":"shell_call","id":"s","call_id":"c","action":{"commands":[]},"status":"done"}]`,
			[]want{{ErrLiteral, loc(KeyParams, "input", 0, "status")}}},
		{"shell call action without commands", `[{"type":"shell_call","id":"s","call_id":"c","action":{},"status":"completed"}]`,
			[]want{{ErrMissing, loc(KeyParams, "input", 0, "action", "commands")}}},
		{"apply_patch operation of no known type", `[{"type":"apply_patch_call","id":"a","call_id":"c","operation":{"type":"rename_file","path":"x"},"status":"completed"}]`,
			[]want{{ErrValue, loc(KeyParams, "input", 0, "operation")}}},
		{"apply_patch call and output", `[{"type":"apply_patch_call","id":"a","call_id":"c","operation":{"type":"delete_file","path":"x"},"status":"completed"},` +
			`{"type":"apply_patch_call_output","id":"o","call_id":"c","status":"failed"}]`, nil},
		{"tool search call with an object argument", `[{"type":"tool_search_call","id":"t","arguments":{"q":1},"execution":"client","status":"completed"},` +
			`{"type":"tool_search_output","id":"o","execution":"client","status":"completed","tools":[{"type":"function","name":"f"}]}]`, nil},
		{"computer call output loses a failed status", `[{"type":"computer_call_output","call_id":"c","output":{"type":"computer_screenshot"},"status":"failed"}]`, nil},
		{"phase", `[{"type":"message","role":"assistant","content":"x","phase":"commentary"},{"role":"user","content":"y","phase":null}]`, nil},
		{"bad phase", `[{"type":"message","role":"assistant","content":"x","phase":"draft"}]`, []want{{ErrLiteral, loc(KeyParams, "input", 0, "phase")}}},
		{"namespace", `[{"type":"function_call","call_id":"c","name":"f","arguments":"{}","namespace":"ns"}]`, nil},
		{"bad namespace", `[{"type":"function_call","call_id":"c","name":"f","arguments":"{}","namespace":5}]`,
			[]want{{ErrString, loc(KeyParams, "input", 0, "namespace")}}},
		// An untyped item no message form fits goes to upstream's
		// permissive fallback model.
		{"untyped fallback", `[{"role":"robot","content":"x"},{}]`, nil},
		// A null type reads as no type: the item is inferred, then its
		// model refuses the null.
		{"type null", `[{"type":null,"role":"user","content":"x"}]`, []want{{ErrLiteral, loc(KeyParams, "input", 0, "type")}}},
		{"type of another kind", `[{"type":5}]`, []want{{"union_tag_not_found", loc(KeyParams, "input", 0)}}},
		{"unknown part", `[{"role":"user","content":[{"type":"input_audio"}]}]`, []want{{ErrValue, loc(KeyParams, "input", 0, "content", 0)}}},
		{"part of the right type", `[{"role":"user","content":[{"type":"input_image","detail":"huge"}]}]`,
			[]want{{ErrLiteral, loc(KeyParams, "input", 0, "content", 0, "detail")}}},
		{"output message replayed", `[{"type":"message","id":"m","role":"assistant","content":[{"type":"output_text","text":"x","annotations":[]}],"status":"completed"}]`, nil},
		{"lax token ids", `[{"role":"user","content":"x","prompt_token_ids":[1],"generation_token_ids":["2"],"generation_log_probs":[-1]}]`, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := decodeP[RunRequest](t, withParams(`{"input":`+c.items+`}`))
			err := r.Validate()
			if c.errs == nil {
				noErr(t, err)
				return
			}
			onlyErr(t, err, c.errs...)
		})
	}
}

func TestV07ToolsAndChoices(t *testing.T) {
	cases := []struct {
		name, params string
		errs         []want
	}{
		{"new tools", `{"input":"a","tools":[{"type":"shell","environment":{"type":"local"}},{"type":"apply_patch"},{"type":"computer"},` +
			`{"type":"tool_search","execution":"client"},{"type":"namespace","name":"n","description":"d","tools":[]}]}`, nil},
		{"tool members are forbidden", `{"input":"a","tools":[{"type":"apply_patch","name":"p"}]}`,
			[]want{{ErrExtraForbidden, loc(KeyParams, "tools", 0, "name")}}},
		{"defer_loading null is false", `{"input":"a","tools":[{"type":"function","name":"f","parameters":null,"strict":null,"defer_loading":null}]}`, nil},
		{"namespace without members", `{"input":"a","tools":[{"type":"namespace"}]}`, []want{{ErrMissing, loc(KeyParams, "tools", 0, "description")},
			{ErrMissing, loc(KeyParams, "tools", 0, "name")}, {ErrMissing, loc(KeyParams, "tools", 0, "tools")}}},
		{"lax strict", `{"input":"a","tools":[{"type":"function","name":"f","parameters":{},"strict":"yes"}]}`, nil},
		{"tool_choice shell", `{"input":"a","tool_choice":{"type":"shell"}}`, nil},
		{"tool_choice apply_patch", `{"input":"a","tool_choice":{"type":"apply_patch"}}`, nil},
		{"tool_choice extra member", `{"input":"a","tool_choice":{"type":"shell","x":1}}`, []want{{ErrExtraForbidden, loc(KeyParams, "tool_choice", "x")}}},
		{"lax scalars", `{"input":"a","temperature":"0.5","max_output_tokens":64.0,"store":"yes","parallel_tool_calls":0,"top_logprobs":"2"}`, nil},
		{"scalars no mode takes", `{"input":"a","max_output_tokens":1.5}`, []want{{ErrInt, loc(KeyParams, "max_output_tokens")}}},
		{"reasoning literal", `{"input":"a","reasoning":{"effort":"huge"}}`, []want{{ErrLiteral, loc(KeyParams, "reasoning", "effort")}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var r RunRequest
			if err := json.Unmarshal([]byte(withParams(c.params)), &r); err != nil {
				onlyErr(t, DecodeError(err), c.errs...)
				return
			}
			err := r.Validate()
			if c.errs == nil {
				noErr(t, err)
				return
			}
			onlyErr(t, err, c.errs...)
		})
	}
	// The lax values are read as upstream reads them.
	r := decode[ResponseCreateParams](t, `{"input":"a","temperature":"0.5","max_output_tokens":64.0,"store":"yes","parallel_tool_calls":0}`)
	if *r.Temperature != 0.5 || *r.MaxOutputTokens != 64 || !*r.Store || r.EffectiveParallelToolCalls() {
		t.Fatalf("lax values %v %v %v %v", *r.Temperature, *r.MaxOutputTokens, *r.Store, *r.ParallelToolCalls)
	}
}

func TestV07Response(t *testing.T) {
	base := strings.TrimSuffix(minimalResponseJSON, "}")
	for _, c := range []struct {
		name, members string
		errs          []want
	}{
		{"new members null", `,"completed_at":null,"moderation":null,"prompt_cache_retention":null`, nil},
		{"new members set", `,"completed_at":1767225601.5,"prompt_cache_retention":"24h","conversation":{"id":"c"}`, nil},
		{"new members of the wrong shape", `,"completed_at":"soon","prompt_cache_retention":"1h","moderation":{}`,
			[]want{{ErrFloat, loc("completed_at")}, {ErrLiteral, loc("prompt_cache_retention")},
				{ErrMissing, loc("moderation", "input")}, {ErrMissing, loc("moderation", "output")}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := decode[Response](t, base+c.members+"}")
			if c.errs == nil {
				noErr(t, r.Validate())
				return
			}
			onlyErr(t, r.Validate(), c.errs...)
		})
	}
	// Output items: the new types, item_reference refused, an untyped item refused.
	r := decode[Response](t, responseWithOutput(t, `{"type":"compaction","id":"c","encrypted_content":"e"}`,
		`{"type":"additional_tools","id":"a","role":"developer","tools":[]}`,
		`{"type":"function_call","call_id":"c","name":"f","arguments":"{}","namespace":null}`))
	noErr(t, r.Validate())
	r = decode[Response](t, responseWithOutput(t, `{"type":"item_reference","id":"x"}`, `{"role":"user","content":"x"}`))
	onlyErr(t, r.Validate(), want{"union_tag_invalid", loc("output", 0)}, want{ErrValue, loc("output", 1)})
}

func TestV07VerifyMembers(t *testing.T) {
	req := decode[VerifyRequest](t, verifyJSON)
	resp := NewVerifyResponse(req, 0.5)
	m := asMap(t, marshal(t, resp))
	if m[KeyMaskSample] != false || m[KeyFailureKind] != nil || m[KeyFailureReason] != nil {
		t.Fatalf("defaults: %v %v %v", m[KeyMaskSample], m[KeyFailureKind], m[KeyFailureReason])
	}
	for _, k := range []string{KeyMaskSample, KeyFailureKind, KeyFailureReason} {
		if _, ok := m[k]; !ok {
			t.Fatalf("%s missing", k)
		}
	}
	// A verifier's own values win, and appear once.
	noErr(t, resp.Fields.Set(KeyMaskSample, true))
	noErr(t, resp.Fields.Set(KeyFailureKind, "judge_failed"))
	out := marshal(t, resp)
	if strings.Count(string(out), `"mask_sample"`) != 1 || !strings.Contains(string(out), `"mask_sample":true`) ||
		!strings.Contains(string(out), `"failure_kind":"judge_failed"`) || !strings.Contains(string(out), `"failure_reason":null`) {
		t.Fatalf("verifier's members: %s", out)
	}
	// Decoded back, they validate; of the wrong kind, they do not.
	back := decode[VerifyResponse](t, string(out))
	noErr(t, back.Validate())
	bad := decode[VerifyResponse](t, strings.Replace(string(out), `"mask_sample":true`, `"mask_sample":"maybe"`, 1))
	onlyErr(t, bad.Validate(), want{ErrBool, loc(KeyMaskSample)})
	// A request's own verification members are not carried into a new verification.
	again := NewVerifyResponse(back.VerifyRequest, 1)
	if m := asMap(t, marshal(t, again)); m[KeyMaskSample] != false || m[KeyFailureKind] != nil {
		t.Fatalf("re-verified: %v %v", m[KeyMaskSample], m[KeyFailureKind])
	}
}

func TestV07Aggregate(t *testing.T) {
	for _, c := range []struct {
		body string
		errs []want
	}{
		{`{"verify_responses":[{"reward":1}],"other":1}`, nil},
		{`{}`, []want{{ErrMissing, loc("verify_responses")}}},
		{`{"verify_responses":null}`, []want{{ErrList, loc("verify_responses")}}},
		{`{"verify_responses":[{},null,[1]]}`, []want{{ErrDict, loc("verify_responses", 1)}, {ErrDict, loc("verify_responses", 2)}}},
	} {
		r := decode[AggregateMetricsRequest](t, c.body)
		if c.errs == nil {
			noErr(t, r.Validate())
			continue
		}
		onlyErr(t, r.Validate(), c.errs...)
	}
	noErr(t, (&AggregateMetricsRequest{}).Validate()) // built in Go
	got := string(marshal(t, AggregateMetricsResponse{}))
	if want := `{"group_level_metrics":[],"agent_metrics":{},"key_metrics":{},"perf_summary":null,"repeat_level_metrics":[]}`; got != want {
		t.Fatalf("empty metrics %s, want %s", got, want)
	}
}

func TestV07ChatParams(t *testing.T) {
	for _, c := range []struct {
		body string
		errs []want
	}{
		{`{"messages":[{"role":"user","content":"hi"}],"chat_template_kwargs":{"enable_thinking":false},"thinking":{"type":"adaptive"},` +
			`"output_config":{"effort":"high"},"verbosity":"low","prompt_cache_key":"k","prompt_cache_retention":"24h","safety_identifier":"u","moderation":{"model":"m"}}`, nil},
		{`{"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"},"name":"f"}]}]}`, nil},
		{`{"messages":[{"role":"user","content":"hi"}],"functions":[]}`, []want{{ErrExtraForbidden, loc("functions")}}},
		{`{"messages":[{"role":"user","content":"hi","extra":1}]}`, []want{{ErrExtraForbidden, loc("messages", 0, "extra")}}},
		{`{"messages":[{"role":"tool","content":"x"}]}`, []want{{ErrMissing, loc("messages", 0, "tool_call_id")}}},
		{`{"messages":[{"role":"robot","content":"x"}]}`, []want{{ErrValue, loc("messages", 0)}}},
		{`{"messages":[{"role":"user","content":"x"}],"stream":true}`, []want{{ErrLiteral, loc("stream")}}},
		{`{"model":"m"}`, []want{{ErrMissing, loc("messages")}}},
	} {
		err := ValidateChatParams([]byte(c.body))
		if c.errs == nil {
			noErr(t, err)
			continue
		}
		onlyErr(t, err, c.errs...)
	}
}
