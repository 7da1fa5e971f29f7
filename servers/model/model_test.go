package model_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"
	"go.yaml.in/yaml/v3"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/internal/servertest"
	"github.com/gymlens/gymlens/protocol"
	"github.com/gymlens/gymlens/server"
	"github.com/gymlens/gymlens/servers/model"
	"github.com/gymlens/gymlens/telemetry"
)

// TestMain fails the package when a test leaves a server, client
// connection or telemetry goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// start runs a model server on loopback, built with the package's server
// options merged into opts, and returns its base URL, a client, and a
// function that stops it.
func start(t *testing.T, cfg model.Config, opts server.Options) (base string, c *server.Client, stop func()) {
	t.Helper()
	mine := model.ServerOptions(cfg.Name)
	opts.Name, opts.Type = model.ServerName, contract.ServerTypeModel
	opts.RolloutPrefix, opts.SessionCookie = mine.RolloutPrefix, mine.SessionCookie
	s := server.New(opts)
	if err := model.Register(s, cfg); err != nil {
		t.Fatalf("Register: %v", err)
	}
	base, stop = servertest.Start(t, s)
	return base, servertest.Client(t), stop
}

// responsesURL and chatURL are the routes of a server started by start.
func responsesURL(base string) string { return base + protocol.PathResponses }
func chatURL(base string) string      { return base + protocol.PathChatCompletions }

// postRaw sends body verbatim as a JSON POST and returns the answer.
func postRaw(t *testing.T, url, body string) (status int, header http.Header, raw []byte) {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{}}
	defer c.CloseIdleConnections()
	res, err := c.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer res.Body.Close()
	raw, err = io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, res.Header, raw
}

// decodeObject decodes a JSON object, failing the test otherwise.
func decodeObject(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil || m == nil {
		t.Fatalf("not a JSON object (%v): %s", err, raw)
	}
	return m
}

// ask posts params to a /v1/responses URL and checks the answer against
// the response schema.
func ask(ctx context.Context, t *testing.T, c *server.Client, url string, params protocol.ResponseCreateParams) (protocol.Response, error) {
	t.Helper()
	var resp protocol.Response
	if err := c.PostJSON(ctx, url, params, &resp); err != nil {
		return resp, err
	}
	if err := resp.Validate(); err != nil {
		t.Fatalf("the server's response fails the schema: %v", err)
	}
	return resp, nil
}

func text(s string) protocol.ResponseCreateParams {
	return protocol.ResponseCreateParams{Input: protocol.TextInput(s)}
}

// mustAsk asks question (a string input) and returns the output text.
func mustAsk(t *testing.T, c *server.Client, url, question string) string {
	t.Helper()
	resp, err := ask(context.Background(), t, c, url, text(question))
	if err != nil {
		t.Fatalf("ask %q: %v", question, err)
	}
	return resp.OutputText()
}

func withP(seed int64, p float64) model.Config {
	cfg := model.Defaults()
	cfg.Seed, cfg.CorrectProbability = seed, p
	return cfg
}

// fieldErrors decodes a FastAPI 422 body.
func fieldErrors(t *testing.T, raw []byte) []protocol.FieldError {
	t.Helper()
	var ve protocol.ValidationError
	if err := json.Unmarshal(raw, &ve); err != nil || len(ve.Detail) == 0 {
		t.Fatalf("not a 422 detail list (%v): %s", err, raw)
	}
	return ve.Detail
}

func TestResponsesSchemaRefusals(t *testing.T) {
	base, _, _ := start(t, withP(0, 1), server.Options{})
	url := responsesURL(base)
	for _, tc := range []struct {
		name, body, kind string
		loc              []any
		msg              string
	}{
		{"unknown member", `{"input":"hi","frequency_penalty":0.5}`, protocol.ErrExtraForbidden, []any{"body", "frequency_penalty"}, ""},
		{"new member of the wrong shape", `{"input":"hi","conversation":{"id":"c","x":1}}`, protocol.ErrExtraForbidden, []any{"body", "conversation", "x"}, ""},
		{"no input", `{"model":"m"}`, protocol.ErrMissing, []any{"body", "input"}, ""},
		{"null parallel_tool_calls", `{"input":"hi","parallel_tool_calls":null}`, protocol.ErrBool, []any{"body", "parallel_tool_calls"}, ""},
		{"null tool_choice", `{"input":"hi","tool_choice":null}`, protocol.ErrLiteral, []any{"body", "tool_choice"}, ""},
		{"function tool without strict", `{"input":"hi","tools":[{"type":"function","name":"f","parameters":{}}]}`,
			protocol.ErrMissing, []any{"body", "tools", 0, "strict"}, ""},
		{"bad role", `{"input":[{"type":"message","role":"robot","content":"hi"}]}`, protocol.ErrLiteral, []any{"body", "input", 0, "role"}, ""},
		{"streaming", `{"input":"hi","stream":true}`, protocol.ErrLiteral, []any{"body", "stream"}, "does not stream"},
		{"malformed JSON", `{"input":`, protocol.ErrJSONInvalid, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, raw := postRaw(t, url, tc.body)
			if status != http.StatusUnprocessableEntity {
				t.Fatalf("status %d, want 422: %s", status, raw)
			}
			errs := fieldErrors(t, raw)
			var found bool
			for _, e := range errs {
				if e.Type != tc.kind {
					continue
				}
				if tc.loc != nil && !reflect.DeepEqual(normLoc(e.Loc), tc.loc) {
					continue
				}
				if !strings.Contains(e.Msg, tc.msg) {
					t.Errorf("message %q does not say %q", e.Msg, tc.msg)
				}
				found = true
			}
			if !found {
				t.Errorf("no %s error at %v in %s", tc.kind, tc.loc, raw)
			}
		})
	}
}

// normLoc turns the float64 indexes of a decoded location into ints.
func normLoc(loc []any) []any {
	out := make([]any, len(loc))
	for i, p := range loc {
		if f, ok := p.(float64); ok {
			out[i] = int(f)
		} else {
			out[i] = p
		}
	}
	return out
}

// TestResponseRequiredMembers reads the raw answer: every member
// upstream's NeMoGymResponse requires is there, with the right kind.
func TestResponseRequiredMembers(t *testing.T) {
	base, _, _ := start(t, withP(0, 1), server.Options{})
	status, _, raw := postRaw(t, responsesURL(base), `{"input":[{"role":"user","content":"What is 2 + 2?"}]}`)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, raw)
	}
	m := decodeObject(t, raw)
	for _, k := range []string{"id", "object", "created_at", "model", "output", "parallel_tool_calls", "tool_choice", "tools", "status", "usage"} {
		if _, ok := m[k]; !ok {
			t.Errorf("member %s missing from %s", k, raw)
		}
	}
	if id, _ := m["id"].(string); !strings.HasPrefix(id, "resp_") {
		t.Errorf("id %q", id)
	}
	if m["object"] != "response" || m["model"] != model.DefaultModel || m["status"] != "completed" ||
		m["parallel_tool_calls"] != true || m["tool_choice"] != "auto" {
		t.Errorf("envelope %s", raw)
	}
	if created, err := m["created_at"].(json.Number).Int64(); err != nil || created < 1_600_000_000 {
		t.Errorf("created_at %v: want Unix seconds (%v)", m["created_at"], err)
	}
	if tools, ok := m["tools"].([]any); !ok || len(tools) != 0 {
		t.Errorf("tools %v, want []", m["tools"])
	}
	out, _ := m["output"].([]any)
	if len(out) != 1 {
		t.Fatalf("output %v: want one item", m["output"])
	}
	msg := out[0].(map[string]any)
	for _, k := range []string{"type", "id", "role", "status", "content"} {
		if _, ok := msg[k]; !ok {
			t.Errorf("message member %s missing: %v", k, msg)
		}
	}
	parts, _ := msg["content"].([]any)
	if msg["type"] != "message" || msg["role"] != "assistant" || len(parts) != 1 {
		t.Fatalf("message %v", msg)
	}
	part := parts[0].(map[string]any)
	if ann, ok := part["annotations"].([]any); part["type"] != "output_text" || part["text"] != "The answer is 4." || !ok || len(ann) != 0 {
		t.Errorf("part %v: want output_text with annotations []", part)
	}
	// "What is 2 + 2?" is 5 words, "The answer is 4." is 4.
	usage := m["usage"].(map[string]any)
	want := `{"input_tokens":5,"input_tokens_details":{"cached_tokens":0},"output_tokens":4,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":9}`
	if got, _ := json.Marshal(usage); string(got) != want {
		t.Errorf("usage %s, want %s", got, want)
	}
	var resp protocol.Response
	if err := json.Unmarshal(raw, &resp); err != nil {
		t.Fatal(err)
	}
	if err := resp.Validate(); err != nil {
		t.Errorf("schema: %v", err)
	}
}

// TestResponseEchoesRequest checks that the tool settings and sampling
// parameters come back as the request set them, and that ids differ.
func TestResponseEchoesRequest(t *testing.T) {
	base, c, _ := start(t, withP(0, 1), server.Options{})
	off, temp, maxTokens, instr := false, 0.5, 64, "Be brief."
	choice := protocol.ToolChoice{Mode: protocol.ToolChoiceNone}
	params := protocol.ResponseCreateParams{
		Input:             protocol.ItemsInput(protocol.UserMessage("What is 1 + 1?")),
		Tools:             []protocol.Tool{protocol.FunctionTool("lookup", "Look a word up.", json.RawMessage(`{"type":"object"}`))},
		ParallelToolCalls: &off, ToolChoice: &choice, Temperature: &temp, MaxOutputTokens: &maxTokens,
		Instructions: &instr, Metadata: map[string]string{"k": "v"},
	}
	resp, err := ask(context.Background(), t, c, responsesURL(base), params)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ParallelToolCalls || resp.ToolChoice.Mode != protocol.ToolChoiceNone || len(resp.Tools) != 1 || resp.Tools[0].Name != "lookup" {
		t.Errorf("tool settings %v %+v %+v", resp.ParallelToolCalls, resp.ToolChoice, resp.Tools)
	}
	if resp.Temperature == nil || *resp.Temperature != 0.5 || resp.MaxOutputTokens == nil || *resp.MaxOutputTokens != 64 ||
		resp.Instructions == nil || *resp.Instructions != instr || resp.Metadata["k"] != "v" {
		t.Errorf("sampling echo %+v", resp)
	}
	// "Be brief." (2) + "What is 1 + 1?" (5).
	if resp.Usage.InputTokens != 7 {
		t.Errorf("input tokens %d, want 7", resp.Usage.InputTokens)
	}
	again, err := ask(context.Background(), t, c, responsesURL(base), params)
	if err != nil || again.ID == resp.ID || again.Output[0].ID == resp.Output[0].ID {
		t.Errorf("second response id %q (first %q), err %v: ids must differ", again.ID, resp.ID, err)
	}
	// An empty input list is valid; nothing to answer.
	empty, err := ask(context.Background(), t, c, responsesURL(base), protocol.ResponseCreateParams{Input: protocol.ItemsInput()})
	if err != nil || empty.OutputText() != model.DontKnow {
		t.Errorf("empty input: %q, %v", empty.OutputText(), err)
	}
}

// TestPrefixRoute serves /v1/responses under the model form of the
// rollout prefix, sets the session cookie, and puts the prefix's rollout
// id and the server name on the span.
func TestPrefixRoute(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	h := servertest.EnableTelemetry(t, telemetry.InitOptions{ServerName: model.ServerName, ServerType: contract.ServerTypeModel,
		SpanExporter: exp})
	cfg := withP(0, 1)
	cfg.Name = "policy_a"
	base, _, stop := start(t, cfg, server.Options{})
	body := `{"input":"What is 20 + 22?"}`
	for _, path := range []string{"/ng-rollout/7-2/v1/responses", "/ng-rollout/7-2/training-token-capture/v1/responses", "/v1/responses"} {
		status, header, raw := postRaw(t, base+path, body)
		if status != http.StatusOK {
			t.Fatalf("%s: status %d: %s", path, status, raw)
		}
		var resp protocol.Response
		if err := json.Unmarshal(raw, &resp); err != nil || resp.Validate() != nil || resp.OutputText() != "The answer is 42." {
			t.Errorf("%s: %s", path, raw)
		}
		if !strings.Contains(header.Get("Set-Cookie"), "policy_model___policy_a=") {
			t.Errorf("%s: Set-Cookie %q", path, header.Get("Set-Cookie"))
		}
	}
	if status, _, _ := postRaw(t, base+"/ng-rollout/7-2/v2/responses", body); status != http.StatusNotFound {
		t.Errorf("unknown route under the prefix: %d, want 404", status)
	}
	stop()
	if err := h.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range exp.GetSpans() {
		if s.Name != contract.SpanModelResponses {
			continue
		}
		a := servertest.Attrs(s.Attributes)
		if a[contract.AttrServerName] != "policy_a" || a[contract.AttrModelMode] != contract.ModeBuiltin || a[contract.AttrGenAIRequestModel] != model.DefaultModel ||
			a[contract.AttrGenAIResponseModel] != model.DefaultModel || a[contract.AttrGenAIInputTokens] != "5" || a[contract.AttrGenAIOutputTokens] != "4" {
			t.Errorf("span attributes %v", a)
		}
		if a[contract.AttrGenAIOperationName] != contract.GenAIOperationChat || a[contract.AttrGenAIProviderName] != contract.GenAIProviderGymlens ||
			!strings.HasPrefix(a[contract.AttrGenAIResponseID], "resp_") || a[contract.AttrGenAIFinishReasons] != `["stop"]` {
			t.Errorf("GenAI attributes %v: want chat, gymlens, the answer's id and finish reason stop", a)
		}
		ids = append(ids, a[contract.AttrRolloutID])
	}
	if !reflect.DeepEqual(ids, []string{"7-2", "7-2", ""}) {
		t.Errorf("rollout ids on %s spans: %q, want the prefix's twice, then none", contract.SpanModelResponses, ids)
	}
}

func TestServerOptions(t *testing.T) {
	o := model.ServerOptions("policy_b")
	if o.RolloutPrefix != server.PrefixModel || o.SessionCookie != "policy_model___policy_b" {
		t.Errorf("ServerOptions(policy_b) = %+v", o)
	}
	if o := model.ServerOptions(""); o.SessionCookie != "policy_model___policy_model" {
		t.Errorf("ServerOptions(\"\") cookie %q", o.SessionCookie)
	}
}

// TestLatencyHonoursCancellation asks a server that would think for ten
// minutes and abandons the call once the request has reached the model's
// handler (a middleware inside the instrumentation says so). The call must
// return with the cancellation, and the server must drain without waiting
// out the latency: stop fails the test when the drain times out, and
// TestMain when the handler is still asleep.
func TestLatencyHonoursCancellation(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	h := servertest.EnableTelemetry(t, telemetry.InitOptions{ServerName: model.ServerName, ServerType: contract.ServerTypeModel,
		SpanExporter: exp})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var once sync.Once
	reached := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			once.Do(cancel)
			next.ServeHTTP(w, r)
		})
	}

	cfg := withP(0, 1)
	cfg.LatencyMS = float64(10 * time.Minute / time.Millisecond)
	base, c, stop := start(t, cfg, server.Options{ShutdownTimeout: 30 * time.Second, Middleware: reached})
	_, err := ask(ctx, t, c, responsesURL(base), text("What is 1 + 1?"))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("abandoned call: %v, want context.Canceled", err)
	}
	stop()
	if err := h.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The handler did run (and saw the cancellation): its span ended with
	// the abandoned call's error.
	var found bool
	for _, s := range exp.GetSpans() {
		if s.Name == contract.SpanModelResponses {
			found = true
			if s.Status.Code != codes.Error || !strings.Contains(s.Status.Description, "abandoned") {
				t.Errorf("%s status %+v, want the abandoned-call error", contract.SpanModelResponses, s.Status)
			}
		}
	}
	if !found {
		t.Errorf("no %s span: the model handler never ran", contract.SpanModelResponses)
	}
}

func TestConfig(t *testing.T) {
	d := model.Defaults()
	if d.Model != "gym-policy" || d.CorrectProbability != 0.8 || d.LatencyMS != 0 || d.Upstream.APIKeyEnv != "OPENAI_API_KEY" ||
		d.Upstream.API != model.APIChatCompletions || d.Upstream.TimeoutMS != 60000 || d.Name != "" {
		t.Errorf("Defaults() = %+v", d)
	}
	if err := d.Validate(); err != nil {
		t.Errorf("defaults invalid: %v", err)
	}

	// Decoding starts from the defaults; snake_case keys in both formats.
	var fromJSON model.Config
	if err := json.Unmarshal([]byte(`{"seed": 3, "latency_ms": 5, "name": "p1", "upstream": {"base_url": "http://h:1", "model": "m", "timeout_ms": 10, "api": "responses"}}`), &fromJSON); err != nil {
		t.Fatal(err)
	}
	if fromJSON.Seed != 3 || fromJSON.LatencyMS != 5 || fromJSON.CorrectProbability != 0.8 || fromJSON.Model != "gym-policy" || fromJSON.Name != "p1" ||
		fromJSON.Upstream.BaseURL != "http://h:1" || fromJSON.Upstream.Model != "m" || fromJSON.Upstream.TimeoutMS != 10 ||
		fromJSON.Upstream.APIKeyEnv != "OPENAI_API_KEY" || fromJSON.Upstream.API != model.APIResponses {
		t.Errorf("from JSON: %+v", fromJSON)
	}
	var fromYAML model.Config
	if err := yaml.Unmarshal([]byte("correct_probability: 0\nmodel: p\nupstream:\n  api_key_env: MY_KEY\n"), &fromYAML); err != nil {
		t.Fatal(err)
	}
	if fromYAML.CorrectProbability != 0 || fromYAML.Model != "p" || fromYAML.Upstream.APIKeyEnv != "MY_KEY" ||
		fromYAML.Upstream.TimeoutMS != model.DefaultUpstreamTimeoutMS || fromYAML.Upstream.API != model.APIChatCompletions {
		t.Errorf("from YAML: %+v", fromYAML)
	}
	var openai model.Config
	if err := yaml.Unmarshal([]byte("openai_base_url: https://api.example/v1\nopenai_api_key: k\nopenai_model: gpt\n"), &openai); err != nil {
		t.Fatal(err)
	}
	if openai.OpenAIBaseURL != "https://api.example/v1" || openai.OpenAIAPIKey != "k" || openai.OpenAIModel != "gpt" || openai.Validate() != nil {
		t.Errorf("openai_* keys: %+v, %v", openai, openai.Validate())
	}

	for name, cfg := range map[string]model.Config{
		"probability above 1":    withP(0, 1.5),
		"negative probability":   withP(0, -0.1),
		"negative latency":       {CorrectProbability: 1, LatencyMS: -1},
		"relative upstream url":  {Upstream: model.UpstreamConfig{BaseURL: "/v1", Model: "m"}},
		"upstream without model": {Upstream: model.UpstreamConfig{BaseURL: "http://h"}},
		"unknown api":            {Upstream: model.UpstreamConfig{BaseURL: "http://h", Model: "m", API: "completions"}},
		"both base urls":         {Upstream: model.UpstreamConfig{BaseURL: "http://h", Model: "m"}, OpenAIBaseURL: "http://h", OpenAIModel: "m"},
		"openai key alone":       {OpenAIAPIKey: "k"},
		"openai without model":   {OpenAIBaseURL: "http://h"},
		"openai relative url":    {OpenAIBaseURL: "h/v1", OpenAIModel: "m"},
	} {
		if err := cfg.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}

	// The keys never show when a configuration is printed or logged.
	cfg := model.Defaults()
	cfg.Upstream.APIKey = "sk-do-not-print"
	cfg.Upstream.BaseURL = "https://user:pw@api.example/?token=q"
	cfg.OpenAIAPIKey = "sk-flat-do-not-print"
	cfg.OpenAIBaseURL = "https://user:pw@api2.example/v1?token=q"
	var logged strings.Builder
	log := slog.New(slog.NewTextHandler(&logged, nil))
	log.Info("config", "upstream", cfg.Upstream)
	log.Info("config", "cfg", cfg)
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("config", "cfg", cfg)
	for _, s := range []string{fmt.Sprintf("%v", cfg), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%#v", cfg), fmt.Sprintf("%#v", cfg.Upstream),
		cfg.String(), cfg.Upstream.String(), logged.String()} {
		if strings.Contains(s, "do-not-print") || strings.Contains(s, "pw") || strings.Contains(s, "token=q") {
			t.Errorf("secret shown: %s", s)
		}
		if !strings.Contains(s, "[REDACTED]") {
			t.Errorf("no redaction marker in %s", s)
		}
	}
}

// TestChatSpanGenAI: a chat completion's span carries the GenAI
// conventions' attributes, its choices' finish reasons, and the rollout id
// of the request's prefix; its SERVER span carries the id too.
func TestChatSpanGenAI(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	h := servertest.EnableTelemetry(t, telemetry.InitOptions{ServerName: model.ServerName, ServerType: contract.ServerTypeModel,
		SpanExporter: exp})
	cfg := withP(0, 1)
	cfg.Name = "policy_c"
	base, _, stop := start(t, cfg, server.Options{})
	status, _, raw := postRaw(t, base+"/ng-rollout/5-1/v1/chat/completions", `{"messages":[{"role":"user","content":"What is 1 + 1?"}]}`)
	if status != http.StatusOK {
		t.Fatalf("chat: %d %s", status, raw)
	}
	stop()
	if err := h.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	var chat, serverSpans int
	for _, s := range exp.GetSpans() {
		a := servertest.Attrs(s.Attributes)
		switch {
		case s.Name == contract.SpanModelChatCompletions:
			chat++
			for key, want := range map[string]string{
				contract.AttrServerName:         "policy_c",
				contract.AttrRolloutID:          "5-1",
				contract.AttrGenAIOperationName: contract.GenAIOperationChat,
				contract.AttrGenAIProviderName:  contract.GenAIProviderGymlens,
				contract.AttrGenAIRequestModel:  model.DefaultModel,
				contract.AttrGenAIResponseModel: model.DefaultModel,
				contract.AttrGenAIFinishReasons: `["stop"]`,
			} {
				if a[key] != want {
					t.Errorf("%s %s = %q, want %q", s.Name, key, a[key], want)
				}
			}
			if !strings.HasPrefix(a[contract.AttrGenAIResponseID], "chatcmpl-") {
				t.Errorf("%s response id %q", s.Name, a[contract.AttrGenAIResponseID])
			}
		case s.SpanKind == trace.SpanKindServer:
			serverSpans++
			if a[contract.AttrRolloutID] != "5-1" {
				t.Errorf("SERVER span %q rollout id %q, want 5-1", s.Name, a[contract.AttrRolloutID])
			}
		}
	}
	if chat != 1 || serverSpans != 1 {
		t.Errorf("%d chat spans and %d SERVER spans, want 1 and 1", chat, serverSpans)
	}
}
