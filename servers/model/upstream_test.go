package model_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/internal/servertest"
	"github.com/gymlens/gymlens/protocol"
	"github.com/gymlens/gymlens/server"
	"github.com/gymlens/gymlens/servers/model"
	"github.com/gymlens/gymlens/telemetry"
)

const testKey = "sk-test-0123456789abcdef"

// received is what the fake OpenAI-compatible peer saw.
type received struct {
	Method, Path, RawQuery, Auth, TraceParent string
	Raw                                       string
	Body                                      map[string]any
}

// fakeOpenAI starts a loopback stand-in for an OpenAI-compatible endpoint
// that records each request and answers with status and body.
func fakeOpenAI(t *testing.T, status int, body string) (*httptest.Server, func() []received) {
	t.Helper()
	var mu sync.Mutex
	var got []received
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		rec := received{Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery,
			Auth: r.Header.Get("Authorization"), TraceParent: r.Header.Get("Traceparent"), Raw: string(raw)}
		_ = json.Unmarshal(raw, &rec.Body)
		mu.Lock()
		got = append(got, rec)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []received {
		mu.Lock()
		defer mu.Unlock()
		return append([]received(nil), got...)
	}
}

const completion = `{
  "id": "chatcmpl-1", "object": "chat.completion", "created": 1767225600, "model": "gpt-test-2025",
  "choices": [{"index": 0, "message": {"role": "assistant", "content": "The answer is 42."}, "finish_reason": "stop"}],
  "usage": {"prompt_tokens": 21, "completion_tokens": 6, "total_tokens": 27, "prompt_tokens_details": {"cached_tokens": 3}},
  "system_fingerprint": "fp_1"
}`

const toolCompletion = `{
  "id": "chatcmpl-2", "object": "chat.completion", "created": 1767225601, "model": "gpt-test-2025",
  "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
    "tool_calls": [{"id": "call_a", "type": "function", "function": {"name": "increment_counter", "arguments": "{\"count\": 1}"}},
                   {"id": "call_b", "type": "function", "function": {"name": "get_counter_value", "arguments": "{}"}}]}}],
  "usage": {"prompt_tokens": 30, "completion_tokens": 9, "total_tokens": 39}
}`

// upstreamResponse is a valid Responses API answer from the upstream,
// with a member NeMo Gym does not declare.
const upstreamResponse = `{"id": "resp_up1", "object": "response", "created_at": 1767225600, "model": "gpt-test-2025",
  "output": [{"type": "message", "id": "msg_up1", "role": "assistant", "status": "completed",
    "content": [{"type": "output_text", "text": "The answer is 42.", "annotations": []}]}],
  "parallel_tool_calls": true, "tool_choice": "auto", "tools": [], "status": "completed",
  "usage": {"input_tokens": 12, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 7,
    "output_tokens_details": {"reasoning_tokens": 2}, "total_tokens": 19},
  "service_tier": "default"}`

func upstreamConfig(baseURL string) model.Config {
	cfg := model.Defaults()
	cfg.Upstream.BaseURL = baseURL
	cfg.Upstream.Model = "gpt-test"
	cfg.Upstream.APIKey = testKey
	return cfg
}

func sameJSON(t *testing.T, what string, got any, want string) {
	t.Helper()
	g, _ := json.Marshal(got)
	var w any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad want: %v", err)
	}
	wb, _ := json.Marshal(w)
	if string(g) != string(wb) {
		t.Errorf("%s\n got %s\nwant %s", what, g, wb)
	}
}

func TestUpstreamChatForwardsAndMaps(t *testing.T) {
	peer, requests := fakeOpenAI(t, http.StatusOK, completion)
	base, c, _ := start(t, upstreamConfig(peer.URL), server.Options{})
	temp, maxTokens, name := 0.25, 64, "ignored-by-upstream-mode"
	resp, err := ask(context.Background(), t, c, responsesURL(base), protocol.ResponseCreateParams{
		Model: &name,
		Input: protocol.ItemsInput(
			protocol.Item{Role: protocol.RoleSystem, Content: &protocol.Content{Text: "Be brief."}},
			protocol.UserMessage("What is 17 + 25?"),
		),
		Temperature:     &temp,
		MaxOutputTokens: &maxTokens,
	})
	if err != nil {
		t.Fatal(err)
	}

	reqs := requests()
	if len(reqs) != 1 {
		t.Fatalf("upstream saw %d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if r.Method != http.MethodPost || r.Path != "/v1/chat/completions" || r.Auth != "Bearer "+testKey {
		t.Errorf("upstream request %s %s auth %q", r.Method, r.Path, r.Auth)
	}
	sameJSON(t, "upstream body", r.Body, `{"model": "gpt-test", "messages": [
		{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 17 + 25?"}],
		"temperature": 0.25, "max_tokens": 64}`)

	if resp.OutputText() != "The answer is 42." || resp.Model != "gpt-test-2025" || resp.Status != "completed" ||
		resp.Object != "response" || resp.CreatedAt != 1767225600 || !strings.HasPrefix(resp.ID, "resp_") {
		t.Errorf("mapped response %+v", resp)
	}
	if len(resp.Output) != 1 || resp.Output[0].Role != "assistant" || len(resp.Output[0].Content.Parts) != 1 {
		t.Errorf("output %+v: want one message with one part", resp.Output)
	}
	u := resp.Usage
	if u.InputTokens != 21 || u.OutputTokens != 6 || u.TotalTokens != 27 || *u.InputTokensDetails.CachedTokens != 3 ||
		*u.OutputTokensDetails.ReasoningTokens != 0 {
		t.Errorf("usage %+v", u)
	}
}

// TestUpstreamChatToolCalls sends a turn with earlier function calls and
// their outputs: they go out as an assistant message's tool calls and
// tool messages, and the upstream's tool calls come back as
// function_call items.
func TestUpstreamChatToolCalls(t *testing.T) {
	peer, requests := fakeOpenAI(t, http.StatusOK, toolCompletion)
	base, c, _ := start(t, upstreamConfig(peer.URL), server.Options{})
	instr := "Use the tools."
	choice := protocol.ToolChoice{Object: json.RawMessage(`{"type":"function","name":"increment_counter"}`)}
	off := false
	resp, err := ask(context.Background(), t, c, responsesURL(base), protocol.ResponseCreateParams{
		Instructions: &instr,
		Input: protocol.ItemsInput(
			protocol.UserMessage("Add 1."),
			protocol.FunctionCall("fc_1", "call_1", "increment_counter", `{"count": 1}`),
			protocol.FunctionCall("fc_2", "call_2", "get_counter_value", `{}`),
			protocol.FunctionCallOutput("call_1", `{"success": true}`),
			protocol.FunctionCallOutput("call_2", `{"count": 4}`),
			protocol.Item{Type: protocol.TypeReasoning, ID: "rs_1"},
		),
		Tools:             counterTools(true),
		ToolChoice:        &choice,
		ParallelToolCalls: &off,
	})
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "upstream body", requests()[0].Body, `{"model": "gpt-test", "messages": [
		{"role": "system", "content": "Use the tools."},
		{"role": "user", "content": "Add 1."},
		{"role": "assistant", "content": null, "tool_calls": [
			{"id": "call_1", "type": "function", "function": {"name": "increment_counter", "arguments": "{\"count\": 1}"}},
			{"id": "call_2", "type": "function", "function": {"name": "get_counter_value", "arguments": "{}"}}]},
		{"role": "tool", "content": "{\"success\": true}", "tool_call_id": "call_1"},
		{"role": "tool", "content": "{\"count\": 4}", "tool_call_id": "call_2"}],
		"tools": [
			{"type": "function", "function": {"name": "increment_counter", "description": "Add count to the counter.",
			 "parameters": `+string(counterSchema)+`, "strict": false}},
			{"type": "function", "function": {"name": "get_counter_value", "description": "Read the counter.",
			 "parameters": {"type": "object", "properties": {}}, "strict": false}}],
		"tool_choice": {"type": "function", "function": {"name": "increment_counter"}},
		"parallel_tool_calls": false}`)

	calls := resp.FunctionCalls()
	if len(resp.Output) != 2 || len(calls) != 2 || resp.HasAssistantMessage() {
		t.Fatalf("output %+v: want the two function calls only", resp.Output)
	}
	if calls[0].CallID != "call_a" || calls[0].Name != "increment_counter" || calls[0].Arguments != `{"count": 1}` ||
		calls[1].CallID != "call_b" || calls[1].Name != "get_counter_value" || calls[0].ID == calls[1].ID {
		t.Errorf("function calls %+v", calls)
	}
	if resp.ParallelToolCalls || len(resp.Tools) != 2 || resp.Usage.InputTokens != 30 {
		t.Errorf("echo %+v", resp)
	}
}

func TestUpstreamChatFinishLength(t *testing.T) {
	peer, _ := fakeOpenAI(t, http.StatusOK, strings.Replace(completion, `"finish_reason": "stop"`, `"finish_reason": "length"`, 1))
	base, c, _ := start(t, upstreamConfig(peer.URL), server.Options{})
	resp, err := ask(context.Background(), t, c, responsesURL(base), text("hi"))
	if err != nil || resp.Status != "incomplete" || resp.IncompleteDetails == nil || resp.IncompleteDetails.Reason != "max_output_tokens" {
		t.Errorf("length finish: %+v, %v", resp, err)
	}
}

// TestUpstreamResponsesForwarding forwards to the upstream's Responses
// API: the body is the request's set members with model replaced, and
// the upstream's answer comes back whole.
func TestUpstreamResponsesForwarding(t *testing.T) {
	peer, requests := fakeOpenAI(t, http.StatusOK, upstreamResponse)
	cfg := upstreamConfig(peer.URL + "/v1")
	cfg.Upstream.API = model.APIResponses
	base, _, _ := start(t, cfg, server.Options{})
	body := `{"input":[{"role":"user","content":"What is 17 + 25?"}],"model":"caller-model","temperature":0.5,` +
		`"tools":[{"type":"function","name":"f","parameters":null,"strict":null}],"metadata":{"k":"v"}}`
	status, _, raw := postRaw(t, responsesURL(base), body)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, raw)
	}
	reqs := requests()
	if len(reqs) != 1 || reqs[0].Path != "/v1/responses" || reqs[0].Auth != "Bearer "+testKey {
		t.Fatalf("upstream requests %+v", reqs)
	}
	var keys []string
	for k := range reqs[0].Body {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if strings.Join(keys, ",") != "input,metadata,model,temperature,tools" {
		t.Errorf("forwarded members %v: want exactly the ones the caller set", keys)
	}
	sameJSON(t, "forwarded body", reqs[0].Body, strings.Replace(body, `"caller-model"`, `"gpt-test"`, 1))

	var resp protocol.Response
	if err := json.Unmarshal(raw, &resp); err != nil || resp.Validate() != nil {
		t.Fatalf("answer %s: %v", raw, err)
	}
	m := decodeObject(t, raw)
	if m["id"] != "resp_up1" || m["service_tier"] != "default" || resp.OutputText() != "The answer is 42." {
		t.Errorf("the upstream's answer did not come back whole: %s", raw)
	}
}

// TestUpstreamOpenAIKeys configures forwarding with upstream's
// openai_model keys, which mean the Responses API.
func TestUpstreamOpenAIKeys(t *testing.T) {
	peer, requests := fakeOpenAI(t, http.StatusOK, upstreamResponse)
	var cfg model.Config
	if err := json.Unmarshal([]byte(`{"openai_base_url":"`+peer.URL+`/v1","openai_api_key":"`+testKey+`","openai_model":"gpt-flat"}`), &cfg); err != nil {
		t.Fatal(err)
	}
	base, c, _ := start(t, cfg, server.Options{})
	if _, err := ask(context.Background(), t, c, responsesURL(base), text("hi")); err != nil {
		t.Fatal(err)
	}
	reqs := requests()
	if len(reqs) != 1 || reqs[0].Path != "/v1/responses" || reqs[0].Auth != "Bearer "+testKey {
		t.Fatalf("upstream requests %+v", reqs)
	}
	sameJSON(t, "forwarded body", reqs[0].Body, `{"input":"hi","model":"gpt-flat"}`)
}

func TestUpstreamBadAnswers(t *testing.T) {
	for _, tc := range []struct {
		name, api, route, body, says string
	}{
		{"responses: not JSON", model.APIResponses, protocol.PathResponses, `<html>oops</html>`, "not a Responses API response"},
		{"responses: missing members", model.APIResponses, protocol.PathResponses, `{"id":"r","object":"response","created_at":1,"model":"m","output":[]}`,
			"fails the NeMo Gym response schema"},
		{"responses: untyped item", model.APIResponses, protocol.PathResponses,
			strings.Replace(upstreamResponse, `"type": "message", `, ``, 1), "output[0]"},
		{"responses: object arguments", model.APIResponses, protocol.PathResponses,
			`{"id":"r","object":"response","created_at":1,"model":"m","parallel_tool_calls":true,"tool_choice":"auto","tools":[],` +
				`"output":[{"type":"function_call","call_id":"c","name":"f","arguments":{"count":1}}]}`, "fails the NeMo Gym response schema"},
		{"responses: no usage is fine", model.APIResponses, protocol.PathResponses,
			strings.Replace(upstreamResponse, `"usage": {`, `"x": {`, 1), ""},
		{"chat: no choices member", model.APIChatCompletions, protocol.PathResponses, `{"id":"c","object":"chat.completion","created":1,"model":"m"}`,
			"member choices is missing"},
		{"chat: empty choices", model.APIChatCompletions, protocol.PathResponses, `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[]}`,
			"without choices"},
		{"chat: wrong object", model.APIChatCompletions, protocol.PathResponses, strings.Replace(completion, `"chat.completion"`, `"text_completion"`, 1),
			"member object: Input should be 'chat.completion'"},
		{"chat route: no finish_reason", model.APIResponses, protocol.PathChatCompletions,
			strings.Replace(completion, `, "finish_reason": "stop"`, ``, 1), "member choices[0].finish_reason is missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			peer, _ := fakeOpenAI(t, http.StatusOK, tc.body)
			cfg := upstreamConfig(peer.URL)
			cfg.Upstream.API = tc.api
			base, _, _ := start(t, cfg, server.Options{})
			body := `{"input":"hi"}`
			if tc.route == protocol.PathChatCompletions {
				body = `{"messages":[{"role":"user","content":"hi"}]}`
			}
			status, _, raw := postRaw(t, base+tc.route, body)
			if tc.says == "" {
				if status != http.StatusOK {
					t.Errorf("status %d: %s", status, raw)
				}
				return
			}
			var detail protocol.DetailBody
			if status != http.StatusBadGateway || json.Unmarshal(raw, &detail) != nil || !strings.Contains(detail.Detail, tc.says) {
				t.Errorf("status %d %s: want 502 saying %q", status, raw, tc.says)
			}
			if strings.Contains(string(raw), testKey) {
				t.Errorf("error leaks the key: %s", raw)
			}
		})
	}
}

// TestUpstreamChatRoute forwards POST /v1/chat/completions to the
// upstream's chat completions: declared members as they came (a provider
// extension and a training message's token ids included), model
// replaced; the answer comes back as it came.
func TestUpstreamChatRoute(t *testing.T) {
	peer, requests := fakeOpenAI(t, http.StatusOK, completion)
	cfg := upstreamConfig(peer.URL)
	cfg.Upstream.API = model.APIResponses // the chat route goes to chat completions whatever the API
	base, _, _ := start(t, cfg, server.Options{})
	status, _, raw := postRaw(t, chatURL(base), `{"model":"caller","messages":[{"role":"user","content":"hi"},`+
		`{"role":"assistant","content":"a","prompt_token_ids":[1,2],"generation_token_ids":[3],"generation_log_probs":[-0.5]}],`+
		`"temperature":0,"seed":5,"chat_template_kwargs":{"enable_thinking":false}}`)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, raw)
	}
	reqs := requests()
	if len(reqs) != 1 || reqs[0].Path != "/v1/chat/completions" || reqs[0].Auth != "Bearer "+testKey {
		t.Fatalf("upstream requests %+v", reqs)
	}
	sameJSON(t, "forwarded body", reqs[0].Body, `{"model":"gpt-test","messages":[{"role":"user","content":"hi"},`+
		`{"role":"assistant","content":"a","prompt_token_ids":[1,2],"generation_token_ids":[3],"generation_log_probs":[-0.5]}],`+
		`"temperature":0,"seed":5,"chat_template_kwargs":{"enable_thinking":false}}`)
	var back any
	_ = json.Unmarshal(raw, &back)
	sameJSON(t, "answer", back, completion)
}

func TestUpstreamKeyFromEnvironment(t *testing.T) {
	peer, requests := fakeOpenAI(t, http.StatusOK, completion)
	t.Setenv("GYM_TEST_MODEL_KEY", "sk-from-env")
	t.Setenv("OPENAI_API_KEY", "sk-default-env")

	named := upstreamConfig(peer.URL + "/v1/") // a base that already names /v1
	named.Upstream.APIKey, named.Upstream.APIKeyEnv = "", "GYM_TEST_MODEL_KEY"
	baseNamed, c, _ := start(t, named, server.Options{})

	byDefault := upstreamConfig(peer.URL)
	byDefault.Upstream.APIKey, byDefault.Upstream.APIKeyEnv = "", ""
	baseDefault, _, _ := start(t, byDefault, server.Options{})

	for _, base := range []string{baseNamed, baseDefault} {
		if _, err := ask(context.Background(), t, c, responsesURL(base), text("hi")); err != nil {
			t.Fatal(err)
		}
	}
	reqs := requests()
	if len(reqs) != 2 || reqs[0].Auth != "Bearer sk-from-env" || reqs[1].Auth != "Bearer sk-default-env" {
		t.Fatalf("upstream requests %+v", reqs)
	}
	for _, r := range reqs {
		if r.Path != "/v1/chat/completions" {
			t.Errorf("path %q", r.Path)
		}
	}
}

// TestUpstreamSecretsStayOut makes the upstream refuse the key, quoting it
// back the way real providers do, and checks that neither the key nor the
// base URL's query string reaches the caller's error or any exported span,
// on the failing and on the successful path.
func TestUpstreamSecretsStayOut(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	h := servertest.EnableTelemetry(t, telemetry.InitOptions{ServerName: model.ServerName, ServerType: contract.ServerTypeModel,
		SpanExporter: exp})
	const querySecret = "sig=query-secret"
	refusing, refused := fakeOpenAI(t, http.StatusUnauthorized, `{"error": {"message": "Incorrect API key provided: `+testKey+
		`. Find your key at https://example/keys.", "type": "invalid_request_error", "code": "invalid_api_key"}}`)
	accepting, _ := fakeOpenAI(t, http.StatusOK, completion)
	badBase, c, stopBad := start(t, upstreamConfig(refusing.URL+"?"+querySecret), server.Options{})
	goodBase, _, stopGood := start(t, upstreamConfig(accepting.URL+"?"+querySecret), server.Options{})

	_, err := ask(context.Background(), t, c, responsesURL(badBase), text("What is 1 + 1?"))
	if server.StatusOf(err) != http.StatusBadGateway {
		t.Fatalf("refused key: %v, want 502", err)
	}
	msg := err.Error()
	if strings.Contains(msg, testKey) || strings.Contains(msg, "query-secret") {
		t.Fatalf("error leaks a secret: %s", msg)
	}
	if !strings.Contains(msg, "401") || !strings.Contains(msg, "invalid_api_key") {
		t.Errorf("error %q does not say the upstream refused the key", msg)
	}
	if reqs := refused(); len(reqs) != 1 || reqs[0].RawQuery != querySecret || reqs[0].TraceParent == "" {
		t.Errorf("upstream requests %+v: want one, with the base URL's query and a traceparent", reqs)
	}
	if _, err := ask(context.Background(), t, c, responsesURL(goodBase), text("What is 1 + 1?")); err != nil {
		t.Fatal(err)
	}
	if status, _, raw := postRaw(t, chatURL(goodBase), `{"messages":[{"role":"user","content":"What is 1 + 1?"}]}`); status != http.StatusOK {
		t.Fatalf("chat route: %d %s", status, raw)
	}

	stopBad()
	stopGood()
	if err := h.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	var modelSpans, chatSpans, clientSpans int
	for _, s := range spans {
		texts := []string{s.Name, s.Status.Description}
		for _, kv := range s.Attributes {
			texts = append(texts, kv.Value.Emit())
		}
		for _, e := range s.Events {
			texts = append(texts, e.Name)
			for _, kv := range e.Attributes {
				texts = append(texts, kv.Value.Emit())
			}
		}
		for _, text := range texts {
			if strings.Contains(text, testKey) || strings.Contains(text, "query-secret") || strings.Contains(text, "Bearer") {
				t.Errorf("span %q leaks a secret: %q", s.Name, text)
			}
			if strings.Contains(text, "What is") || strings.Contains(text, "The answer is") {
				t.Errorf("span %q carries prompt or output text: %q", s.Name, text)
			}
		}
		switch s.Name {
		case contract.SpanModelResponses, contract.SpanModelChatCompletions:
			if s.Name == contract.SpanModelResponses {
				modelSpans++
			} else {
				chatSpans++
			}
			attrs := servertest.Attrs(s.Attributes)
			if attrs[contract.AttrModelMode] != contract.ModeUpstream || attrs[contract.AttrGenAIRequestModel] != "gpt-test" || attrs[contract.AttrServerName] != model.ServerName ||
				attrs[contract.AttrGenAIProviderName] != contract.GenAIProviderOpenAI || attrs[contract.AttrGenAIOperationName] != contract.GenAIOperationChat {
				t.Errorf("model span attributes %v", attrs)
			}
			if s.Status.Code != codes.Error && (attrs[contract.AttrGenAIResponseID] == "" || !strings.HasPrefix(attrs[contract.AttrGenAIFinishReasons], `["`)) {
				t.Errorf("model span lacks the answer's id or finish reasons: %v", attrs)
			}
			if s.Status.Code == codes.Error {
				if _, has := attrs[contract.AttrGenAIInputTokens]; has {
					t.Errorf("failed call reports usage: %v", attrs)
				}
			} else if attrs[contract.AttrGenAIInputTokens] != "21" || attrs[contract.AttrGenAIOutputTokens] != "6" || attrs[contract.AttrGenAIResponseModel] != "gpt-test-2025" {
				t.Errorf("usage attributes %v, want 21 and 6", attrs)
			}
		case contract.ClientSpanName(http.MethodPost):
			if s.SpanKind != trace.SpanKindClient || strings.HasSuffix(servertest.Attrs(s.Attributes)[contract.AttrURLFull], "/v1/responses") {
				continue // the test's own calls to the model server
			}
			clientSpans++
			if u := servertest.Attrs(s.Attributes)["url.full"]; !strings.HasSuffix(u, "/v1/chat/completions") {
				t.Errorf("client span url.full %q", u)
			}
		}
	}
	if modelSpans != 2 || chatSpans != 1 || clientSpans != 3 {
		t.Errorf("got %d %s, %d %s and %d upstream CLIENT spans, want 2, 1 and 3 (all spans: %d)",
			modelSpans, contract.SpanModelResponses, chatSpans, contract.SpanModelChatCompletions, clientSpans, len(spans))
	}
}

func TestUpstreamTimeoutAndUnreachable(t *testing.T) {
	hanging := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		// Reading the body to its end lets net/http notice the caller
		// hanging up, which cancels r.Context().
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	}))
	t.Cleanup(hanging.Close)
	cfg := upstreamConfig(hanging.URL)
	cfg.Upstream.TimeoutMS = 50
	base, c, _ := start(t, cfg, server.Options{})
	if _, err := ask(context.Background(), t, c, responsesURL(base), text("hi")); server.StatusOf(err) != http.StatusGatewayTimeout {
		t.Errorf("hanging upstream: %v, want 504", err)
	}

	gone := httptest.NewServer(http.NotFoundHandler())
	goneURL := gone.URL
	gone.Close()
	base, _, _ = start(t, upstreamConfig(goneURL), server.Options{})
	_, err := ask(context.Background(), t, c, responsesURL(base), text("hi"))
	if server.StatusOf(err) != http.StatusBadGateway || !strings.Contains(err.Error(), "unreachable") || strings.Contains(err.Error(), testKey) {
		t.Errorf("unreachable upstream: %v, want a 502 saying so", err)
	}

	limited, _ := fakeOpenAI(t, http.StatusTooManyRequests, `{"error": {"type": "rate_limit", "code": 429}}`)
	base, _, _ = start(t, upstreamConfig(limited.URL), server.Options{})
	if _, err := ask(context.Background(), t, c, responsesURL(base), text("hi")); server.StatusOf(err) != http.StatusTooManyRequests {
		t.Errorf("rate-limited upstream: %v, want 429", err)
	}
}
