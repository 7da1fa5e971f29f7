package model_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"
	"go.yaml.in/yaml/v3"

	protocol "github.com/gymlens/gymlens/internal/legacyproto"
	"github.com/gymlens/gymlens/internal/servertest"
	"github.com/gymlens/gymlens/server"
	"github.com/gymlens/gymlens/servers/model"
	"github.com/gymlens/gymlens/telemetry"
)

// TestMain fails the package when a test leaves a server, client
// connection or telemetry goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// start runs a model server on loopback and returns the URL of its
// /v1/responses endpoint, a client, and a function that stops it.
func start(t *testing.T, cfg model.Config, opts server.Options) (url string, c *server.Client, stop func()) {
	t.Helper()
	opts.Name, opts.Type = model.ServerName, telemetry.ServerTypeModel
	s := server.New(opts)
	if err := model.Register(s, cfg); err != nil {
		t.Fatalf("Register: %v", err)
	}
	base, stop := servertest.Start(t, s)
	return base + "/v1/responses", servertest.Client(t), stop
}

func ask(ctx context.Context, c *server.Client, url string, msgs ...protocol.InputMessage) (protocol.ResponsesResponse, error) {
	var resp protocol.ResponsesResponse
	err := c.PostJSON(ctx, url, protocol.ResponsesRequest{Input: msgs}, &resp)
	return resp, err
}

func user(text string) protocol.InputMessage {
	return protocol.InputMessage{Role: "user", Content: text}
}

func mustAsk(t *testing.T, c *server.Client, url, question string) string {
	t.Helper()
	resp, err := ask(context.Background(), c, url, user(question))
	if err != nil {
		t.Fatalf("ask %q: %v", question, err)
	}
	return resp.OutputText()
}

func questions(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("What is %d + %d?", 3*i+1, 7*i+2)
	}
	return out
}

func withP(seed int64, p float64) model.Config {
	cfg := model.Defaults()
	cfg.Seed, cfg.CorrectProbability = seed, p
	return cfg
}

func TestBuiltinIsDeterministicPerSeed(t *testing.T) {
	urlA, c, _ := start(t, withP(1, 0.5), server.Options{})
	urlA2, _, _ := start(t, withP(1, 0.5), server.Options{}) // same seed, another process-like instance
	urlB, _, _ := start(t, withP(2, 0.5), server.Options{})
	differ := 0
	for _, q := range questions(50) {
		a := mustAsk(t, c, urlA, q)
		if again := mustAsk(t, c, urlA, q); again != a {
			t.Fatalf("%q: %q then %q under the same seed", q, a, again)
		}
		if other := mustAsk(t, c, urlA2, q); other != a {
			t.Fatalf("%q: two servers with seed 1 answered %q and %q", q, a, other)
		}
		if mustAsk(t, c, urlB, q) != a {
			differ++
		}
	}
	if differ == 0 {
		t.Fatal("seeds 1 and 2 gave the same answers to all 50 questions")
	}
}

func TestCorrectProbabilityExtremes(t *testing.T) {
	alwaysRight, c, _ := start(t, withP(7, 1), server.Options{})
	alwaysWrong, _, _ := start(t, withP(7, 0), server.Options{})
	for i, q := range questions(50) {
		want := fmt.Sprintf("The answer is %d.", (3*i+1)+(7*i+2))
		if got := mustAsk(t, c, alwaysRight, q); got != want {
			t.Errorf("p=1, %q: %q, want %q", q, got, want)
		}
		got := mustAsk(t, c, alwaysWrong, q)
		if got == want || !strings.HasPrefix(got, "The answer is ") {
			t.Errorf("p=0, %q: %q, want a wrong number", q, got)
		}
	}
}

func TestBuiltinParsesOperators(t *testing.T) {
	url, c, _ := start(t, withP(0, 1), server.Options{})
	for q, want := range map[string]string{
		"What is 17 + 25?":                  "The answer is 42.",
		"What is 17 - 25?":                  "The answer is -8.",
		"What is 6 * 7?":                    "The answer is 42.",
		"what is 12*-3":                     "The answer is -36.",
		"Compute 10 - -5, please.":          "The answer is 15.",
		"What is 99999999999 * 99999999999": "The answer is 9999999999800000000001.",
		"What is the capital of France?":    model.DontKnow,
		"What is 5 / 2?":                    model.DontKnow,
	} {
		if got := mustAsk(t, c, url, q); got != want {
			t.Errorf("%q: %q, want %q", q, got, want)
		}
	}
	// The last user message is the one answered.
	resp, err := ask(context.Background(), c, url,
		protocol.InputMessage{Role: "system", Content: "You add numbers. 1 + 1 is a warm-up."},
		user("What is 1 + 2?"),
		protocol.InputMessage{Role: "assistant", Content: "Let me think about 5 + 5."})
	if err != nil || resp.OutputText() != "The answer is 3." {
		t.Errorf("multi-message input: %q, %v", resp.OutputText(), err)
	}
}

func TestBuiltinResponseShape(t *testing.T) {
	url, c, _ := start(t, withP(0, 1), server.Options{})
	resp, err := ask(context.Background(), c, url, user("What is 2 + 2?"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Object != "response" || resp.Status != "completed" || resp.Model != model.DefaultModel || !strings.HasPrefix(resp.ID, "resp_") {
		t.Errorf("envelope %+v", resp)
	}
	if len(resp.Output) != 1 || resp.Output[0].Type != "message" || resp.Output[0].Role != "assistant" ||
		len(resp.Output[0].Content) != 1 || resp.Output[0].Content[0].Type != "output_text" {
		t.Fatalf("output %+v: want one assistant message with one output_text part", resp.Output)
	}
	// "What is 2 + 2?" is 5 words, "The answer is 4." is 4.
	if resp.Usage != (protocol.Usage{InputTokens: 5, OutputTokens: 4, TotalTokens: 9}) {
		t.Errorf("usage %+v", resp.Usage)
	}
	again, err := ask(context.Background(), c, url, user("What is 2 + 2?"))
	if err != nil || again.ID == resp.ID {
		t.Errorf("second response id %q (first %q), err %v: ids must differ", again.ID, resp.ID, err)
	}
	// An empty input is the runtime's 400.
	if _, err := ask(context.Background(), c, url); server.StatusOf(err) != http.StatusBadRequest {
		t.Errorf("empty input: %v, want 400", err)
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
	h := servertest.EnableTelemetry(t, telemetry.InitOptions{ServerName: model.ServerName, ServerType: telemetry.ServerTypeModel,
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
	url, c, stop := start(t, cfg, server.Options{ShutdownTimeout: 30 * time.Second, Middleware: reached})
	_, err := ask(ctx, c, url, user("What is 1 + 1?"))
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
		if s.Name == model.SpanName {
			found = true
			if s.Status.Code != codes.Error || !strings.Contains(s.Status.Description, "abandoned") {
				t.Errorf("%s status %+v, want the abandoned-call error", model.SpanName, s.Status)
			}
		}
	}
	if !found {
		t.Errorf("no %s span: the model handler never ran", model.SpanName)
	}
}

func TestConfig(t *testing.T) {
	d := model.Defaults()
	if d.Model != "gym-policy" || d.CorrectProbability != 0.8 || d.LatencyMS != 0 || d.Upstream.APIKeyEnv != "OPENAI_API_KEY" {
		t.Errorf("Defaults() = %+v", d)
	}
	if err := d.Validate(); err != nil {
		t.Errorf("defaults invalid: %v", err)
	}

	// Decoding starts from the defaults; snake_case keys in both formats.
	var fromJSON model.Config
	if err := json.Unmarshal([]byte(`{"seed": 3, "latency_ms": 5, "upstream": {"base_url": "http://h:1", "model": "m", "timeout_ms": 10}}`), &fromJSON); err != nil {
		t.Fatal(err)
	}
	if fromJSON.Seed != 3 || fromJSON.LatencyMS != 5 || fromJSON.CorrectProbability != 0.8 || fromJSON.Model != "gym-policy" ||
		fromJSON.Upstream.BaseURL != "http://h:1" || fromJSON.Upstream.Model != "m" || fromJSON.Upstream.TimeoutMS != 10 ||
		fromJSON.Upstream.APIKeyEnv != "OPENAI_API_KEY" {
		t.Errorf("from JSON: %+v", fromJSON)
	}
	var fromYAML model.Config
	if err := yaml.Unmarshal([]byte("correct_probability: 0\nmodel: p\nupstream:\n  api_key_env: MY_KEY\n"), &fromYAML); err != nil {
		t.Fatal(err)
	}
	if fromYAML.CorrectProbability != 0 || fromYAML.Model != "p" || fromYAML.Upstream.APIKeyEnv != "MY_KEY" ||
		fromYAML.Upstream.TimeoutMS != model.DefaultUpstreamTimeoutMS {
		t.Errorf("from YAML: %+v", fromYAML)
	}

	for name, cfg := range map[string]model.Config{
		"probability above 1":    withP(0, 1.5),
		"negative probability":   withP(0, -0.1),
		"negative latency":       {CorrectProbability: 1, LatencyMS: -1},
		"relative upstream url":  {Upstream: model.UpstreamConfig{BaseURL: "/v1", Model: "m"}},
		"upstream without model": {Upstream: model.UpstreamConfig{BaseURL: "http://h"}},
	} {
		if err := cfg.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}

	// The key never shows when a configuration is printed or logged.
	cfg := model.Defaults()
	cfg.Upstream.APIKey = "sk-do-not-print"
	cfg.Upstream.BaseURL = "https://user:pw@api.example/?token=q"
	var logged strings.Builder
	slog.New(slog.NewTextHandler(&logged, nil)).Info("config", "upstream", cfg.Upstream)
	for _, s := range []string{fmt.Sprintf("%v", cfg), fmt.Sprintf("%+v", cfg), cfg.Upstream.String(), logged.String()} {
		if strings.Contains(s, "sk-do-not-print") || strings.Contains(s, "pw") || strings.Contains(s, "token=q") {
			t.Errorf("secret shown: %s", s)
		}
	}
}
