package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/gymlens/gymlens/protocol"
)

// Values of ChatCompletion.Object and ChatChoice.FinishReason.
const (
	ObjectChatCompletion = "chat.completion"
	FinishStop           = "stop"
	FinishToolCalls      = "tool_calls"
	FinishLength         = "length"
	FinishContentFilter  = "content_filter"
)

// ChatCompletionRequest is the body of POST /v1/chat/completions: the
// members the server reads. The body is kept: forwarding sends every
// member upstream declares (protocol.ChatParamKeys) as upstream's model
// holds it once validated; Validate refuses any other member, as
// upstream's model forbids them.
type ChatCompletionRequest struct {
	// Messages is the conversation (required).
	Messages []ChatMessage `json:"messages"`
	// Model names the model.
	Model *string `json:"model,omitempty"`
	// Tools the model may call.
	Tools []ChatTool `json:"tools,omitempty"`
	// ToolChoice is "none", "auto", "required" or an object, as it came.
	ToolChoice json.RawMessage `json:"tool_choice,omitempty"`
	// ParallelToolCalls defaults to true.
	ParallelToolCalls *bool `json:"parallel_tool_calls,omitempty"`
	// Stream must be false or unset: this server does not stream.
	Stream *bool `json:"stream,omitempty"`

	// raw is the body as it came (nil for a request built in Go), for
	// Validate; typeErr is the error of decoding it into the fields above,
	// which Validate reports when upstream's rules pass it.
	raw     json.RawMessage
	typeErr error
}

// UnmarshalJSON keeps the body for Validate and forwarding, and decodes
// the members the server reads. A body that is not a JSON object is an
// error; a member of the wrong shape is left for Validate to report
// where upstream does.
func (r *ChatCompletionRequest) UnmarshalJSON(b []byte) error {
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return err
	}
	// The booleans are read as upstream's model reads them (lax, by
	// protocol's rules): "yes" and 1 are true.
	type plain ChatCompletionRequest
	type wire struct {
		plain
		ParallelToolCalls json.RawMessage `json:"parallel_tool_calls"`
		Stream            json.RawMessage `json:"stream"`
	}
	var p wire
	typeErr := json.Unmarshal(b, &p)
	if typeErr != nil {
		// A member repeated, with a value of another kind before the last:
		// Python's json module keeps the last, as a re-encoding does.
		var v any
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		if d.Decode(&v) == nil {
			if canon, err := json.Marshal(v); err == nil {
				p = wire{}
				typeErr = json.Unmarshal(canon, &p)
			}
		}
	}
	*r = ChatCompletionRequest(p.plain)
	r.ParallelToolCalls, r.Stream = laxBool(p.ParallelToolCalls), laxBool(p.Stream)
	r.raw, r.typeErr = bytes.Clone(b), typeErr
	return nil
}

// forwardBody is the request as upstream's model server forwards it:
// the members that arrived, as its model holds them once validated
// (protocol.NormalizeChatParams), with model replaced.
func (r *ChatCompletionRequest) forwardBody(model string) (map[string]json.RawMessage, error) {
	raw := r.raw
	if raw == nil {
		b, err := json.Marshal(r)
		if err != nil {
			return nil, fmt.Errorf("chat request: %w", err)
		}
		raw = b
	}
	out := protocol.NormalizeChatParams(raw)
	out["model"] = mustJSON(model)
	return out, nil
}

// Validate applies upstream's NeMoGymChatCompletionCreateParamsNonStreaming
// to a decoded request (protocol.ValidateChatParams), then refuses a body
// whose members did not decode into the fields this server reads. A
// request built in Go is checked as it would encode.
func (r *ChatCompletionRequest) Validate() error {
	raw := r.raw
	if raw == nil {
		b, err := json.Marshal(r)
		if err != nil {
			return fmt.Errorf("chat request: %w", err)
		}
		raw = b
	}
	if err := protocol.ValidateChatParams(raw); err != nil {
		var ve *protocol.ValidationError
		if errors.As(err, &ve) {
			for i, d := range ve.Detail {
				if len(d.Loc) == 1 && d.Loc[0] == "stream" {
					ve.Detail[i].Msg = streamRefusal
				}
			}
		}
		return err
	}
	return r.typeErr
}

// ChatMessage is one message of a chat request.
type ChatMessage struct {
	// Role is developer, system, user, assistant or tool.
	Role string `json:"role"`
	// Content is a string, a list of parts, or null (an assistant message
	// that only calls tools), as it came.
	Content json.RawMessage `json:"content,omitempty"`
	// Name is the author's name, when given.
	Name string `json:"name,omitempty"`
	// ToolCalls are an assistant message's function calls.
	ToolCalls []ChatToolCall `json:"tool_calls,omitempty"`
	// ToolCallID names the call a tool message answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
}

// Text is the message's text: the string content, or the text of every
// text part joined.
func (m ChatMessage) Text() string {
	raw := bytes.TrimSpace(m.Content)
	if len(raw) == 0 {
		return ""
	}
	var s string
	if raw[0] == '"' && json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// ChatToolCall is a function call of an assistant chat message.
type ChatToolCall struct {
	// ID is the call's id; the tool message answering it repeats it.
	ID string `json:"id"`
	// Type is "function".
	Type string `json:"type"`
	// Function names the function and carries its arguments.
	Function ChatFunctionCall `json:"function"`
}

// ChatFunctionCall is the function part of a ChatToolCall.
type ChatFunctionCall struct {
	// Name is the function's name.
	Name string `json:"name"`
	// Arguments is the JSON-encoded argument object.
	Arguments string `json:"arguments"`
}

// ChatTool is a tool offered in a chat request.
type ChatTool struct {
	// Type is "function" for a function tool.
	Type string `json:"type"`
	// Function describes a function tool.
	Function ChatFunctionDef `json:"function"`
}

// ChatFunctionDef describes a function tool.
type ChatFunctionDef struct {
	// Name is the function's name.
	Name string `json:"name"`
	// Description says what the function does, when given.
	Description *string `json:"description,omitempty"`
	// Parameters is the JSON schema of the arguments.
	Parameters json.RawMessage `json:"parameters,omitempty"`
	// Strict asks for strict schema adherence.
	Strict *bool `json:"strict,omitempty"`
}

// UnmarshalJSON reads strict as upstream's model does (lax: "yes" and 1
// are true).
func (d *ChatFunctionDef) UnmarshalJSON(b []byte) error {
	type plain ChatFunctionDef
	var p struct {
		plain
		Strict json.RawMessage `json:"strict"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*d = ChatFunctionDef(p.plain)
	d.Strict = laxBool(p.Strict)
	return nil
}

// laxBool is raw read by protocol's lax boolean rule; nil when absent,
// null, or not a boolean (protocol's validation reports that).
func laxBool(raw json.RawMessage) *bool {
	if v, ok := protocol.LaxBool(raw); ok {
		return &v
	}
	return nil
}

// ChatCompletion is the answer of POST /v1/chat/completions, an OpenAI
// chat completion object.
type ChatCompletion struct {
	// ID is "chatcmpl-..." for the built-in policy.
	ID string `json:"id"`
	// Object is always ObjectChatCompletion.
	Object string `json:"object"`
	// Created is a Unix time in seconds.
	Created int64 `json:"created"`
	// Model is the model that answered.
	Model string `json:"model"`
	// Choices holds the answers; the built-in policy gives one.
	Choices []ChatChoice `json:"choices"`
	// Usage counts tokens.
	Usage *ChatUsage `json:"usage,omitempty"`
}

// ChatChoice is one answer of a ChatCompletion.
type ChatChoice struct {
	// Index is the choice's position.
	Index int `json:"index"`
	// Message is the assistant's message.
	Message ChatCompletionMessage `json:"message"`
	// FinishReason is FinishStop, FinishToolCalls, FinishLength or
	// FinishContentFilter.
	FinishReason string `json:"finish_reason"`
}

// ChatCompletionMessage is the assistant message of a ChatChoice.
type ChatCompletionMessage struct {
	// Role is "assistant".
	Role string `json:"role"`
	// Content is the text; null when the message only calls tools.
	Content *string `json:"content"`
	// ToolCalls are the function calls the model makes.
	ToolCalls []ChatToolCall `json:"tool_calls,omitempty"`
}

// ChatUsage counts a chat completion's tokens.
type ChatUsage struct {
	// PromptTokens, CompletionTokens and TotalTokens are the counts
	// (words, for the built-in policy).
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
	// PromptTokensDetails and CompletionTokensDetails break the counts
	// down, when an upstream sends them.
	PromptTokensDetails     *ChatPromptTokensDetails     `json:"prompt_tokens_details,omitempty"`
	CompletionTokensDetails *ChatCompletionTokensDetails `json:"completion_tokens_details,omitempty"`
}

// ChatPromptTokensDetails breaks prompt tokens down.
type ChatPromptTokensDetails struct {
	// CachedTokens were read from a prompt cache.
	CachedTokens *int `json:"cached_tokens,omitempty"`
}

// ChatCompletionTokensDetails breaks completion tokens down.
type ChatCompletionTokensDetails struct {
	// ReasoningTokens were spent on reasoning.
	ReasoningTokens *int `json:"reasoning_tokens,omitempty"`
}

// responses is u as a Responses usage object (nil for nil): a total the
// upstream left at 0 is the sum, and the detail counts are 0 unless sent.
func (u *ChatUsage) responses() *protocol.Usage {
	if u == nil {
		return nil
	}
	out := protocol.NewUsage(u.PromptTokens, u.CompletionTokens)
	if u.TotalTokens != 0 {
		out.TotalTokens = u.TotalTokens
	}
	if d := u.PromptTokensDetails; d != nil && d.CachedTokens != nil {
		n := *d.CachedTokens
		out.InputTokensDetails.CachedTokens = &n
	}
	if d := u.CompletionTokensDetails; d != nil && d.ReasoningTokens != nil {
		n := *d.ReasoningTokens
		out.OutputTokensDetails.ReasoningTokens = &n
	}
	return out
}

// chatItems turns a chat conversation into Responses input items: text
// messages, an assistant's tool calls as function_call items, and tool
// messages as function_call_output items.
func chatItems(msgs []ChatMessage) []protocol.Item {
	items := make([]protocol.Item, 0, len(msgs))
	for _, m := range msgs {
		switch m.Role {
		case "tool":
			items = append(items, protocol.FunctionCallOutput(m.ToolCallID, m.Text()))
		case "assistant":
			if t := m.Text(); t != "" || len(m.ToolCalls) == 0 {
				items = append(items, protocol.Item{Type: protocol.TypeMessage, Role: protocol.RoleAssistant,
					Content: &protocol.Content{Text: t}})
			}
			for _, c := range m.ToolCalls {
				items = append(items, protocol.Item{Type: protocol.TypeFunctionCall, CallID: c.ID,
					Name: c.Function.Name, Arguments: c.Function.Arguments})
			}
		default:
			items = append(items, protocol.Item{Type: protocol.TypeMessage, Role: m.Role,
				Content: &protocol.Content{Text: m.Text()}})
		}
	}
	return items
}

// chatToolsAsResponses turns chat function tools into Responses tools.
func chatToolsAsResponses(tools []ChatTool) []protocol.Tool {
	out := make([]protocol.Tool, 0, len(tools))
	for _, t := range tools {
		if t.Type == "function" {
			out = append(out, protocol.Tool{Type: "function", Name: t.Function.Name,
				Description: t.Function.Description, Parameters: t.Function.Parameters, Strict: t.Function.Strict})
		}
	}
	return out
}

// chatMessages turns a Responses request's instructions and input into a
// chat conversation: instructions as a leading system message, messages
// by their text, function_call items as tool calls of an assistant
// message (consecutive calls share one), function_call_output items as
// tool messages. Reasoning and hosted-tool items have no chat form and
// are left out.
func chatMessages(instructions *string, items []protocol.Item) []ChatMessage {
	var out []ChatMessage
	if instructions != nil && *instructions != "" {
		out = append(out, ChatMessage{Role: "system", Content: mustJSON(*instructions)})
	}
	for _, it := range items {
		switch it.Type {
		case "", protocol.TypeMessage:
			role := it.Role
			if role == "" {
				role = protocol.RoleAssistant
			}
			out = append(out, ChatMessage{Role: role, Content: mustJSON(it.Text())})
		case protocol.TypeFunctionCall:
			call := ChatToolCall{ID: it.CallID, Type: "function",
				Function: ChatFunctionCall{Name: it.Name, Arguments: it.Arguments}}
			if n := len(out); n > 0 && out[n-1].Role == "assistant" {
				// A call right after an assistant message (or another
				// call) belongs to the same turn.
				out[n-1].ToolCalls = append(out[n-1].ToolCalls, call)
			} else {
				out = append(out, ChatMessage{Role: "assistant", Content: json.RawMessage("null"),
					ToolCalls: []ChatToolCall{call}})
			}
		case protocol.TypeFunctionCallOutput:
			output := it.Output
			if raw, ok := it.Extra.Get("output"); ok {
				// The list form: its text parts.
				output = (ChatMessage{Content: raw}).partsText()
			}
			out = append(out, ChatMessage{Role: "tool", ToolCallID: it.CallID, Content: mustJSON(output)})
		}
	}
	if out == nil {
		out = []ChatMessage{}
	}
	return out
}

// partsText joins the text of a Responses part list (input_text,
// output_text).
func (m ChatMessage) partsText() string {
	var c protocol.Content
	if json.Unmarshal(m.Content, &c) != nil {
		return ""
	}
	return c.JoinText("")
}

// chatTools turns Responses function tools into chat tools; tools of
// other types have no chat form and are left out.
func chatTools(tools []protocol.Tool) []ChatTool {
	var out []ChatTool
	for _, t := range tools {
		if t.Type != "function" {
			continue
		}
		out = append(out, ChatTool{Type: "function", Function: ChatFunctionDef{Name: t.Name,
			Description: t.Description, Parameters: t.Parameters, Strict: t.Strict}})
	}
	return out
}

// chatToolChoice turns a Responses tool choice into the chat form: the
// modes as they are, {"type":"function","name":N} as
// {"type":"function","function":{"name":N}}; nil for anything else.
func chatToolChoice(tc *protocol.ToolChoice) json.RawMessage {
	if tc == nil {
		return nil
	}
	if len(tc.Object) == 0 {
		return mustJSON(tc.Mode)
	}
	var obj struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if json.Unmarshal(tc.Object, &obj) != nil || obj.Type != "function" || obj.Name == "" {
		return nil
	}
	return mustJSON(map[string]any{"type": "function", "function": map[string]string{"name": obj.Name}})
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage("null")
	}
	return b
}

func isJSONNull(raw json.RawMessage) bool {
	return bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}
