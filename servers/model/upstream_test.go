package model_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	protocol "github.com/gymlens/gymlens/internal/legacyproto"
	"github.com/gymlens/gymlens/internal/servertest"
	"github.com/gymlens/gymlens/server"
	"github.com/gymlens/gymlens/servers/model"
	"github.com/gymlens/gymlens/telemetry"
)

const testKey = "sk-test-0123456789abcdef"

// received is what the fake OpenAI-compatible peer saw.
type received struct {
	Method, Path, RawQuery, Auth, TraceParent string
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
			Auth: r.Header.Get("Authorization"), TraceParent: r.Header.Get("Traceparent")}
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
  "id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-test-2025",
  "choices": [{"index": 0, "message": {"role": "assistant", "content": "The answer is 42."}, "finish_reason": "stop"}],
  "usage": {"prompt_tokens": 21, "completion_tokens": 6, "total_tokens": 27}
}`

func upstreamConfig(baseURL string) model.Config {
	cfg := model.Defaults()
	cfg.Upstream.BaseURL = baseURL
	cfg.Upstream.Model = "gpt-test"
	cfg.Upstream.APIKey = testKey
	return cfg
}

func TestUpstreamForwardsAndMaps(t *testing.T) {
	peer, requests := fakeOpenAI(t, http.StatusOK, completion)
	url, c, _ := start(t, upstreamConfig(peer.URL), server.Options{})
	temp := 0.25
	var resp protocol.ResponsesResponse
	err := c.PostJSON(context.Background(), url, protocol.ResponsesRequest{
		Model: "ignored-by-upstream-mode",
		Input: []protocol.InputMessage{
			{Role: "system", Content: "Be brief."},
			{Role: "user", Content: "What is 17 + 25?"},
		},
		Temperature:     &temp,
		MaxOutputTokens: 64,
	}, &resp)
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
	wantBody := map[string]any{
		"model": "gpt-test",
		"messages": []any{
			map[string]any{"role": "system", "content": "Be brief."},
			map[string]any{"role": "user", "content": "What is 17 + 25?"},
		},
		"temperature": 0.25,
		"max_tokens":  float64(64),
	}
	gotJSON, _ := json.Marshal(r.Body)
	wantJSON, _ := json.Marshal(wantBody)
	if string(gotJSON) != string(wantJSON) {
		t.Errorf("upstream body\n got %s\nwant %s", gotJSON, wantJSON)
	}

	if resp.OutputText() != "The answer is 42." || resp.Model != "gpt-test-2025" || resp.Status != "completed" || resp.Object != "response" {
		t.Errorf("mapped response %+v", resp)
	}
	if len(resp.Output) != 1 || resp.Output[0].Role != "assistant" || len(resp.Output[0].Content) != 1 {
		t.Errorf("output %+v: want one message with one part", resp.Output)
	}
	if resp.Usage != (protocol.Usage{InputTokens: 21, OutputTokens: 6, TotalTokens: 27}) {
		t.Errorf("usage %+v", resp.Usage)
	}
}

func TestUpstreamKeyFromEnvironment(t *testing.T) {
	peer, requests := fakeOpenAI(t, http.StatusOK, completion)
	t.Setenv("GYM_TEST_MODEL_KEY", "sk-from-env")
	t.Setenv("OPENAI_API_KEY", "sk-default-env")

	named := upstreamConfig(peer.URL + "/v1/") // a base that already names /v1
	named.Upstream.APIKey, named.Upstream.APIKeyEnv = "", "GYM_TEST_MODEL_KEY"
	urlNamed, c, _ := start(t, named, server.Options{})

	byDefault := upstreamConfig(peer.URL)
	byDefault.Upstream.APIKey, byDefault.Upstream.APIKeyEnv = "", ""
	urlDefault, _, _ := start(t, byDefault, server.Options{})

	for _, url := range []string{urlNamed, urlDefault} {
		if _, err := ask(context.Background(), c, url, user("hi")); err != nil {
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
	h := servertest.EnableTelemetry(t, telemetry.InitOptions{ServerName: model.ServerName, ServerType: telemetry.ServerTypeModel,
		SpanExporter: exp})
	const querySecret = "sig=query-secret"
	refusing, refused := fakeOpenAI(t, http.StatusUnauthorized, `{"error": {"message": "Incorrect API key provided: `+testKey+
		`. Find your key at https://example/keys.", "type": "invalid_request_error", "code": "invalid_api_key"}}`)
	accepting, _ := fakeOpenAI(t, http.StatusOK, completion)
	badURL, c, stopBad := start(t, upstreamConfig(refusing.URL+"?"+querySecret), server.Options{})
	goodURL, _, stopGood := start(t, upstreamConfig(accepting.URL+"?"+querySecret), server.Options{})

	_, err := ask(context.Background(), c, badURL, user("What is 1 + 1?"))
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
	if _, err := ask(context.Background(), c, goodURL, user("What is 1 + 1?")); err != nil {
		t.Fatal(err)
	}

	stopBad()
	stopGood()
	if err := h.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	var modelSpans, clientSpans int
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
		case model.SpanName:
			modelSpans++
			attrs := attrMap(s)
			if attrs[model.AttrMode] != model.ModeUpstream || attrs[model.AttrRequestModel] != "gpt-test" {
				t.Errorf("model span attributes %v", attrs)
			}
			if s.Status.Code == codes.Error {
				if _, has := attrs[model.AttrInputTokens]; has {
					t.Errorf("failed call reports usage: %v", attrs)
				}
			} else if attrs[model.AttrInputTokens] != "21" || attrs[model.AttrOutputTokens] != "6" {
				t.Errorf("usage attributes %v, want 21 and 6", attrs)
			}
		case "POST /v1/chat/completions":
			clientSpans++
			if u := attrMap(s)["url.full"]; !strings.HasSuffix(u, "/v1/chat/completions") {
				t.Errorf("client span url.full %q", u)
			}
		}
	}
	if modelSpans != 2 || clientSpans != 2 {
		t.Errorf("got %d gym.model.responses and %d upstream CLIENT spans, want 2 and 2 (all spans: %d)", modelSpans, clientSpans, len(spans))
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
	url, c, _ := start(t, cfg, server.Options{})
	if _, err := ask(context.Background(), c, url, user("hi")); server.StatusOf(err) != http.StatusGatewayTimeout {
		t.Errorf("hanging upstream: %v, want 504", err)
	}

	gone := httptest.NewServer(http.NotFoundHandler())
	goneURL := gone.URL
	gone.Close()
	url, _, _ = start(t, upstreamConfig(goneURL), server.Options{})
	_, err := ask(context.Background(), c, url, user("hi"))
	if server.StatusOf(err) != http.StatusBadGateway || !strings.Contains(err.Error(), "unreachable") || strings.Contains(err.Error(), testKey) {
		t.Errorf("unreachable upstream: %v, want a 502 saying so", err)
	}
}

func attrMap(s tracetest.SpanStub) map[string]string {
	m := map[string]string{}
	for _, kv := range s.Attributes {
		m[string(kv.Key)] = kv.Value.Emit()
	}
	return m
}
