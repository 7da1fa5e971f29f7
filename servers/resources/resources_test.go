package resources_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	protocol "github.com/gymlens/gymlens/internal/legacyproto"
	"github.com/gymlens/gymlens/internal/servertest"
	"github.com/gymlens/gymlens/lens"
	"github.com/gymlens/gymlens/lens/instruments/gym"
	"github.com/gymlens/gymlens/server"
	"github.com/gymlens/gymlens/servers/resources"
	"github.com/gymlens/gymlens/telemetry"
)

// TestMain fails the package when a test leaves a server, client
// connection or telemetry goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// start runs an arithmetic resources server on loopback and returns the
// URL of its /verify endpoint, a client, and a function that stops it.
func start(t *testing.T, cfg resources.Config) (verifyURL string, c *server.Client, stop func()) {
	t.Helper()
	// The injected panics would fill the test log with stacks.
	s := server.New(server.Options{Name: resources.ServerName, Type: telemetry.ServerTypeResources,
		Logger: slog.New(slog.DiscardHandler)})
	if err := resources.Register(s, cfg); err != nil {
		t.Fatalf("Register: %v", err)
	}
	base, stop := servertest.Start(t, s)
	return base + "/verify", servertest.Client(t), stop
}

func verify(t *testing.T, c *server.Client, url string, task protocol.Task, answer string) (protocol.VerifyResponse, error) {
	t.Helper()
	var resp protocol.VerifyResponse
	err := c.PostJSON(context.Background(), url, protocol.VerifyRequest{Task: task, Answer: answer}, &resp)
	return resp, err
}

func task(id, expected string) protocol.Task {
	return protocol.Task{ID: id, Question: "What is 3 + 4?", Expected: expected}
}

func TestVerifyScoresTheLastNumber(t *testing.T) {
	url, c, _ := start(t, resources.Defaults())
	for _, tc := range []struct {
		answer, expected string
		correct          bool
		parsed           string
	}{
		{"The answer is 7.", "7", true, "7"},
		{"7", "7", true, "7"},
		{"3 + 4 = 7.0", "7", true, "7.0"},
		{"I think it is 8.", "7", false, "8"},
		{"Maybe 7, no wait, 9", "7", false, "9"},
		{"The total is -12 units", "-12", true, "-12"},
		{"roughly 1,234.50", "1234.5", true, "1234.50"},
		{"it's .5", "0.5", true, "0.5"},
		{"no idea", "7", false, ""},
		{"", "0", false, ""},
		{"The answer is 7.", " 7 ", true, "7"},
	} {
		resp, err := verify(t, c, url, task("t1", tc.expected), tc.answer)
		if err != nil {
			t.Fatalf("verify(%q, expected %q): %v", tc.answer, tc.expected, err)
		}
		wantReward := 0.0
		if tc.correct {
			wantReward = 1
		}
		if resp.Correct != tc.correct || resp.Reward != wantReward || resp.Parsed != tc.parsed {
			t.Errorf("verify(%q, expected %q) = %+v; want correct=%v reward=%v parsed=%q",
				tc.answer, tc.expected, resp, tc.correct, wantReward, tc.parsed)
		}
	}
}

func TestToleranceConfig(t *testing.T) {
	cfg := resources.Config{Tolerance: 0.01}
	url, c, _ := start(t, cfg)
	if resp, err := verify(t, c, url, task("t", "3.14159"), "pi is 3.14"); err != nil || !resp.Correct {
		t.Fatalf("within tolerance: %+v, %v", resp, err)
	}
	if resp, err := verify(t, c, url, task("t", "3.2"), "pi is 3.14"); err != nil || resp.Correct {
		t.Fatalf("outside tolerance: %+v, %v", resp, err)
	}
	for _, bad := range []float64{-1, math.NaN(), math.Inf(1)} {
		if err := (resources.Config{Tolerance: bad}).Validate(); err == nil {
			t.Errorf("Tolerance %v accepted", bad)
		}
	}
}

func TestLastNumber(t *testing.T) {
	for in, want := range map[string]string{
		"The answer is 7.":        "7",
		"x-3":                     "3",
		"(-3)":                    "-3",
		"a +5 b":                  "5",
		"1,000,000 and 2":         "2",
		"it was 1,000,000":        "1000000",
		"12,34":                   "34",
		"-.25 left":               "-0.25",
		"version 2 of 3.75 units": "3.75",
	} {
		got, ok := resources.LastNumber(in)
		if !ok || got != want {
			t.Errorf("LastNumber(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	if got, ok := resources.LastNumber("none here. - ."); ok {
		t.Errorf("LastNumber found %q in a text without digits", got)
	}
}

func TestConfigKeys(t *testing.T) {
	raw, err := json.Marshal(resources.Config{Tolerance: 0.5, PanicOnTaskPrefix: "boom-"})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(raw); got != `{"tolerance":0.5,"panic_on_task_prefix":"boom-"}` {
		t.Errorf("JSON keys: %s", got)
	}
}

func TestWorkMicrosConfig(t *testing.T) {
	var cfg resources.Config
	if err := json.Unmarshal([]byte(`{"work_us":100}`), &cfg); err != nil || cfg.WorkMicros != 100 {
		t.Fatalf(`{"work_us":100} decoded as %+v, %v`, cfg, err)
	}
	for _, ok := range []int{0, 1, 100, 1_000_000} {
		if err := (resources.Config{WorkMicros: ok}).Validate(); err != nil {
			t.Errorf("WorkMicros %d rejected: %v", ok, err)
		}
	}
	for _, bad := range []int{-1, 1_000_001} {
		err := (resources.Config{WorkMicros: bad}).Validate()
		if err == nil || !strings.Contains(err.Error(), "work_us") {
			t.Errorf("WorkMicros %d: err %v, want one naming work_us", bad, err)
		}
	}
	// The zero value adds no key, so existing configs encode as before.
	if raw, _ := json.Marshal(resources.Config{}); string(raw) != `{}` {
		t.Errorf("zero Config encodes as %s", raw)
	}
}

// TestWorkMicrosKeepsScores: the synthetic work changes what a
// verification costs, never what it answers.
func TestWorkMicrosKeepsScores(t *testing.T) {
	plainURL, c, _ := start(t, resources.Config{})
	workURL, _, _ := start(t, resources.Config{WorkMicros: 20})
	for _, tc := range []struct{ expected, answer string }{
		{"7", "The answer is 7."}, {"7", "8"}, {"1234.5", "roughly 1,234.50"}, {"0", "no idea"},
	} {
		want, err := verify(t, c, plainURL, task("t", tc.expected), tc.answer)
		if err != nil {
			t.Fatal(err)
		}
		got, err := verify(t, c, workURL, task("t", tc.expected), tc.answer)
		if err != nil || got != want {
			t.Errorf("%q with work_us=20: %+v, %v; without: %+v", tc.answer, got, err, want)
		}
	}
	if _, err := verify(t, c, workURL, task("t", "seven"), "7"); !strings.Contains(fmt.Sprint(err), "500") {
		t.Errorf("unscorable task with work_us=20: err %v, want a 500", err)
	}
}

// telemetryOn enables telemetry with a manual reader and an in-memory
// span exporter. Call it before starting the server.
func telemetryOn(t *testing.T) (*lens.Handle, *sdkmetric.ManualReader, *tracetest.InMemoryExporter) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	exp := tracetest.NewInMemoryExporter()
	h := servertest.EnableTelemetry(t, telemetry.InitOptions{
		ServerName: resources.ServerName, ServerType: telemetry.ServerTypeResources,
		MetricReader: reader, SpanExporter: exp,
	})
	return h, reader, exp
}

// verifyMetrics reads the verify call counts, the success rate and the
// number of recorded durations. Absent series read as zero.
func verifyMetrics(t *testing.T, r *sdkmetric.ManualReader) (ok, fail int64, rate float64, durations uint64) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("collect: %v", err)
	}
	rate = -1
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch m.Name {
			case gym.VerifyCallsName:
				for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
					v, _ := p.Attributes.Value(attribute.Key(gym.VerifyOutcomeKey))
					switch v.AsString() {
					case gym.OutcomeSuccess:
						ok = p.Value
					case gym.OutcomeFailure:
						fail = p.Value
					}
				}
			case gym.VerifySuccessRateName:
				rate = m.Data.(metricdata.Gauge[float64]).DataPoints[0].Value
			case gym.VerifyDurationName:
				for _, p := range m.Data.(metricdata.Histogram[float64]).DataPoints {
					durations += p.Count
				}
			}
		}
	}
	return ok, fail, rate, durations
}

func TestVerifyOutcomesAreCounted(t *testing.T) {
	_, reader, _ := telemetryOn(t)
	url, c, _ := start(t, resources.Config{PanicOnTaskPrefix: "boom-"})

	for i, answer := range []string{"The answer is 7.", "7", "It is 7.", "The answer is 8."} {
		resp, err := verify(t, c, url, task("t", "7"), answer)
		if err != nil {
			t.Fatalf("verification %d: %v", i, err)
		}
		if want := i < 3; resp.Correct != want {
			t.Fatalf("verification %d of %q: correct=%v", i, answer, resp.Correct)
		}
	}
	// A wrong answer is still a completed verification.
	if ok, fail, rate, n := verifyMetrics(t, reader); ok != 4 || fail != 0 || rate != 1 || n != 4 {
		t.Fatalf("after 3 right + 1 wrong: success=%d failure=%d rate=%v durations=%d; want 4, 0, 1, 4", ok, fail, rate, n)
	}

	// An expected value that is not a number fails the verification.
	_, err := verify(t, c, url, task("t-bad", "seven"), "The answer is 7.")
	if server.StatusOf(err) != http.StatusInternalServerError || !strings.Contains(err.Error(), "not a number") {
		t.Fatalf("non-numeric expected: err = %v; want a 500 saying it is not a number", err)
	}
	if ok, fail, _, n := verifyMetrics(t, reader); ok != 4 || fail != 1 || n != 5 {
		t.Fatalf("after a bad task: success=%d failure=%d durations=%d; want 4, 1, 5", ok, fail, n)
	}

	// A panicking verifier is a 500 and a failure, and the server lives on.
	if _, err := verify(t, c, url, task("boom-1", "7"), "7"); server.StatusOf(err) != http.StatusInternalServerError {
		t.Fatalf("panicking verifier: err = %v; want a 500", err)
	}
	if resp, err := verify(t, c, url, task("t", "7"), "7"); err != nil || !resp.Correct {
		t.Fatalf("request after a panic: %+v, %v", resp, err)
	}
	ok, fail, rate, n := verifyMetrics(t, reader)
	if ok != 5 || fail != 2 || n != 7 {
		t.Fatalf("after a panic and a good call: success=%d failure=%d durations=%d; want 5, 2, 7", ok, fail, n)
	}
	if want := 5.0 / 7.0; rate != want {
		t.Errorf("success rate %v, want %v", rate, want)
	}
}

func TestBadRequestsAre400AndNotCounted(t *testing.T) {
	_, reader, _ := telemetryOn(t)
	url, c, _ := start(t, resources.Defaults())
	if _, err := verify(t, c, url, task("t", "1"), "1"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, body, mention string }{
		{"malformed JSON", `{"task": {"id": "t", `, "malformed JSON"},
		{"wrong field type", `{"task": {"id": 5, "question": "q", "expected": "1"}, "answer": "1"}`, "task.id"},
		{"missing task id", `{"task": {"question": "q", "expected": "1"}, "answer": "1"}`, "task.id"},
		{"empty body", ``, "empty"},
	} {
		status, raw := servertest.PostRaw(t, url, tc.body)
		var eb server.ErrorBody
		if err := json.Unmarshal(raw, &eb); err != nil {
			t.Fatalf("%s: error body %q is not JSON: %v", tc.name, raw, err)
		}
		if status != http.StatusBadRequest || eb.Error.Type != "bad_request" || !strings.Contains(eb.Error.Message, tc.mention) {
			t.Errorf("%s: %d %+v; want 400 bad_request mentioning %q", tc.name, status, eb.Error, tc.mention)
		}
	}
	// The typed client sees the same 400 for a task without a question.
	_, err := verify(t, c, url, protocol.Task{ID: "t", Expected: "1"}, "1")
	if server.StatusOf(err) != http.StatusBadRequest {
		t.Errorf("missing question: %v; want 400", err)
	}
	if ok, fail, _, n := verifyMetrics(t, reader); ok != 1 || fail != 0 || n != 1 {
		t.Fatalf("bad requests were counted: success=%d failure=%d durations=%d; want 1, 0, 1", ok, fail, n)
	}
}

func TestVerifySpan(t *testing.T) {
	h, _, exp := telemetryOn(t)
	url, c, stop := start(t, resources.Config{PanicOnTaskPrefix: "boom-"})
	const secretAnswer = "The answer is 4217, my chain of thought says"
	if _, err := verify(t, c, url, protocol.Task{ID: "span-ok", Question: "What is 4000 + 217?", Expected: "4217"}, secretAnswer); err != nil {
		t.Fatal(err)
	}
	_, badErr := verify(t, c, url, task("span-bad", "seven"), "7")
	_, panicErr := verify(t, c, url, task("boom-span", "7"), "7")
	if badErr == nil || panicErr == nil {
		t.Fatalf("failing verifications succeeded: %v, %v", badErr, panicErr)
	}
	stop() // every server span has ended once the server drained
	if err := h.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}

	byTask := map[string]tracetest.SpanStub{}
	for _, s := range exp.GetSpans() {
		for _, kv := range append(append([]attribute.KeyValue(nil), s.Attributes...), eventAttrs(s)...) {
			if v := kv.Value.Emit(); strings.Contains(v, "4217") || strings.Contains(v, "What is") {
				t.Errorf("span %q attribute %s carries task or answer text: %q", s.Name, kv.Key, v)
			}
		}
		if strings.Contains(s.Status.Description, "4217") {
			t.Errorf("span %q status carries answer text: %q", s.Name, s.Status.Description)
		}
		if s.Name != resources.SpanName {
			continue
		}
		id, _ := attr(s, resources.AttrTaskID)
		byTask[id.AsString()] = s
	}

	ok, found := byTask["span-ok"]
	if !found {
		t.Fatalf("no gym.verify span for span-ok; spans by task: %v", keys(byTask))
	}
	if v, _ := attr(ok, resources.AttrReward); v.Type() != attribute.FLOAT64 || v.AsFloat64() != 1 {
		t.Errorf("reward attribute %v (%s), want float 1", v.Emit(), v.Type())
	}
	if v, _ := attr(ok, resources.AttrCorrect); v.Type() != attribute.BOOL || !v.AsBool() {
		t.Errorf("correct attribute %v, want bool true", v.Emit())
	}
	if ok.Status.Code == codes.Error {
		t.Errorf("successful verification has error status %q", ok.Status.Description)
	}
	if !ok.Parent.IsValid() {
		t.Errorf("gym.verify has no parent: the SERVER span should be it")
	}
	for _, id := range []string{"span-bad", "boom-span"} {
		s, found := byTask[id]
		if !found {
			t.Fatalf("no gym.verify span for %s", id)
		}
		if s.Status.Code != codes.Error {
			t.Errorf("%s: status %v, want error", id, s.Status)
		}
		if _, has := attr(s, resources.AttrReward); has {
			t.Errorf("%s: failed verification carries a reward", id)
		}
	}
}

func attr(s tracetest.SpanStub, key string) (attribute.Value, bool) {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func eventAttrs(s tracetest.SpanStub) []attribute.KeyValue {
	var out []attribute.KeyValue
	for _, e := range s.Events {
		out = append(out, e.Attributes...)
	}
	return out
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestRegisterRejectsBadConfig(t *testing.T) {
	s := server.New(server.Options{})
	if err := resources.Register(s, resources.Config{Tolerance: -1}); err == nil {
		t.Fatal("negative tolerance accepted")
	}
	if err := resources.Register(nil, resources.Defaults()); err == nil {
		t.Fatal("nil server accepted")
	}
}
