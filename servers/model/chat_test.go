package model_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/gymlens/gymlens/server"
	"github.com/gymlens/gymlens/servers/model"
)

// TestChatCompletionShape reads a built-in chat completion raw: the
// members of an OpenAI chat.completion object.
func TestChatCompletionShape(t *testing.T) {
	base, _, _ := start(t, withP(0, 1), server.Options{})
	// NeMo Gym 0.7's provider extensions are accepted.
	status, _, raw := postRaw(t, chatURL(base), `{"model":"anything","messages":[{"role":"system","content":"Be exact."},`+
		`{"role":"user","content":[{"type":"text","text":"What is 6 * 7?"}]}],"chat_template_kwargs":{"enable_thinking":false}}`)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, raw)
	}
	m := decodeObject(t, raw)
	if id, _ := m["id"].(string); !strings.HasPrefix(id, "chatcmpl-") || m["object"] != "chat.completion" || m["model"] != model.DefaultModel {
		t.Errorf("envelope %s", raw)
	}
	if created, err := m["created"].(json.Number).Int64(); err != nil || created < 1_600_000_000 {
		t.Errorf("created %v", m["created"])
	}
	choices, _ := m["choices"].([]any)
	if len(choices) != 1 {
		t.Fatalf("choices %v", m["choices"])
	}
	got, _ := json.Marshal(choices[0])
	if want := `{"finish_reason":"stop","index":0,"message":{"content":"The answer is 42.","role":"assistant"}}`; string(got) != want {
		t.Errorf("choice %s, want %s", got, want)
	}
	// "Be exact." (2) + "What is 6 * 7?" (5); "The answer is 42." (4).
	usage, _ := json.Marshal(m["usage"])
	if want := `{"completion_tokens":4,"prompt_tokens":7,"total_tokens":11}`; string(usage) != want {
		t.Errorf("usage %s, want %s", usage, want)
	}
}

func TestChatCompletionRefusals(t *testing.T) {
	base, _, _ := start(t, withP(0, 1), server.Options{})
	for _, tc := range []struct {
		name, body, kind string
		loc              []any
	}{
		{"no messages", `{"model":"m"}`, "missing", []any{"body", "messages"}},
		// No message form takes the role: upstream's union reports every
		// form's errors, ours one error at the message.
		{"bad role", `{"messages":[{"role":"robot","content":"x"}]}`, "value_error", []any{"body", "messages", 0}},
		{"unknown member", `{"messages":[{"role":"user","content":"x"}],"not_a_chat_param":1}`, "extra_forbidden", []any{"body", "not_a_chat_param"}},
		{"unknown message member", `{"messages":[{"role":"user","content":"x","tool_call_id":"c"}]}`, "extra_forbidden", []any{"body", "messages", 0, "tool_call_id"}},
		{"partial token ids", `{"messages":[{"role":"user","content":"x","prompt_token_ids":[1]}]}`, "value_error", []any{"body", "messages", 0}},
		{"user without content", `{"messages":[{"role":"user"}]}`, "missing", []any{"body", "messages", 0, "content"}},
		{"tool without call id", `{"messages":[{"role":"tool","content":"x"}]}`, "missing", []any{"body", "messages", 0, "tool_call_id"}},
		{"streaming", `{"messages":[{"role":"user","content":"x"}],"stream":true}`, "literal_error", []any{"body", "stream"}},
		{"messages not a list", `{"messages":{}}`, "list_type", []any{"body", "messages"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, raw := postRaw(t, chatURL(base), tc.body)
			if status != http.StatusUnprocessableEntity {
				t.Fatalf("status %d: %s", status, raw)
			}
			errs := fieldErrors(t, raw)
			if errs[0].Type != tc.kind || !reflect.DeepEqual(normLoc(errs[0].Loc), tc.loc) {
				t.Errorf("%s: %+v, want %s at %v", raw, errs[0], tc.kind, tc.loc)
			}
		})
	}
}

// TestChatCounterEpisode drives the counter episode over chat
// completions: tool calls in the assistant message, results as tool
// messages.
func TestChatCounterEpisode(t *testing.T) {
	base, c, _ := start(t, withP(0, 1), server.Options{})
	tools := []model.ChatTool{
		{Type: "function", Function: model.ChatFunctionDef{Name: model.CounterIncrementTool, Parameters: counterSchema}},
		{Type: "function", Function: model.ChatFunctionDef{Name: model.CounterValueTool}},
	}
	msgs := []model.ChatMessage{{Role: "user", Content: json.RawMessage(`"Start at 3, add 1 and add 2."`)}}
	counter := 3
	var calls []string
	for turn := 0; ; turn++ {
		if turn == 10 {
			t.Fatal("no final message after 10 turns")
		}
		var cc model.ChatCompletion
		if err := c.PostJSON(t.Context(), chatURL(base), model.ChatCompletionRequest{Messages: msgs, Tools: tools}, &cc); err != nil {
			t.Fatal(err)
		}
		if len(cc.Choices) != 1 {
			t.Fatalf("choices %+v", cc.Choices)
		}
		ch := cc.Choices[0]
		if len(ch.Message.ToolCalls) == 0 {
			if ch.FinishReason != model.FinishStop || ch.Message.Content == nil || *ch.Message.Content != "The count is 6." {
				t.Errorf("final choice %+v", ch)
			}
			break
		}
		if ch.FinishReason != model.FinishToolCalls || ch.Message.Content != nil || len(ch.Message.ToolCalls) != 1 {
			t.Fatalf("tool turn %+v", ch)
		}
		call := ch.Message.ToolCalls[0]
		if call.Type != "function" || call.ID == "" {
			t.Fatalf("tool call %+v", call)
		}
		calls = append(calls, call.Function.Name+" "+call.Function.Arguments)
		out := `{"success": true}`
		if call.Function.Name == model.CounterIncrementTool {
			var args struct{ Count int }
			if err := json.Unmarshal([]byte(call.Function.Arguments), &args); err != nil {
				t.Fatal(err)
			}
			counter += args.Count
		} else {
			out = fmt.Sprintf(`{"count": %d}`, counter)
		}
		msgs = append(msgs, model.ChatMessage{Role: "assistant", Content: json.RawMessage("null"), ToolCalls: ch.Message.ToolCalls},
			model.ChatMessage{Role: "tool", ToolCallID: call.ID, Content: json.RawMessage(fmt.Sprintf("%q", out))})
	}
	if want := `increment_counter {"count": 1}|increment_counter {"count": 2}|get_counter_value {}`; strings.Join(calls, "|") != want {
		t.Errorf("calls %q, want %q", calls, want)
	}
}
