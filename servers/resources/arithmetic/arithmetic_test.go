package arithmetic_test

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/environment"
	"github.com/gymlens/gymlens/environment/envtest"
	"github.com/gymlens/gymlens/internal/servertest"
	"github.com/gymlens/gymlens/lens"
	"github.com/gymlens/gymlens/protocol"
	"github.com/gymlens/gymlens/server"
	"github.com/gymlens/gymlens/servers/resources/arithmetic"
	"github.com/gymlens/gymlens/telemetry"
)

// TestMain fails the package when a test leaves a server, client
// connection or telemetry goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// start serves the arithmetic environment with cfg and returns its base
// URL.
func start(t *testing.T, cfg arithmetic.Config) string {
	t.Helper()
	env, err := arithmetic.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return envtest.Serve(t, env)
}

// row is an arithmetic task row, as the built-in dataset writes them.
func row(id, expected string) protocol.RunRequest {
	fields := map[string]any{"expected_answer": expected}
	if id != "" {
		fields["task_id"] = id
	}
	return envtest.Row("What is 3 + 4?", fields)
}

// result is what the tests read from a verify response.
type result struct {
	Reward    float64         `json:"reward"`
	Expected  *string         `json:"expected_answer"`
	Extracted json.RawMessage `json:"extracted_answer"`
}

// verify posts the verify request of r with answer and returns the
// status, the decoded result and the raw body.
func verify(t *testing.T, base string, r protocol.RunRequest, answer string) (int, result, []byte) {
	t.Helper()
	status, raw := envtest.NewSession(t, base).Post("/verify", envtest.Verify(r, envtest.Answer(answer)))
	var res result
	if status == http.StatusOK {
		if err := json.Unmarshal(raw, &res); err != nil {
			t.Fatalf("verify: %v: %s", err, raw)
		}
	}
	return status, res, raw
}

func TestVerifyScoresTheLastNumber(t *testing.T) {
	base := start(t, arithmetic.Defaults())
	for _, tc := range []struct {
		answer, expected string
		correct          bool
		extracted        string // JSON
	}{
		{"The answer is 7.", "7", true, `"7"`},
		{"7", "7", true, `"7"`},
		{"3 + 4 = 7.0", "7", true, `"7.0"`},
		{"I think it is 8.", "7", false, `"8"`},
		{"Maybe 7, no wait, 9", "7", false, `"9"`},
		{"The total is -12 units", "-12", true, `"-12"`},
		{"roughly 1,234.50", "1234.5", true, `"1234.50"`},
		{"it's .5", "0.5", true, `"0.5"`},
		{"The answer is \\boxed{42}.", "42", true, `"42"`},
		{"no idea", "7", false, `null`},
		{"", "0", false, `null`},
		{"The answer is 7.", " 7 ", true, `"7"`},
	} {
		status, res, raw := verify(t, base, row("t1", tc.expected), tc.answer)
		if status != http.StatusOK {
			t.Fatalf("verify(%q, expected %q): %d %s", tc.answer, tc.expected, status, raw)
		}
		want := 0.0
		if tc.correct {
			want = 1
		}
		if res.Reward != want || string(res.Extracted) != tc.extracted || res.Expected == nil || *res.Expected != tc.expected {
			t.Errorf("verify(%q, expected %q) = %s; want reward %v, extracted %s", tc.answer, tc.expected, raw, want, tc.extracted)
		}
	}
}

func TestVerifyEchoesTheRow(t *testing.T) {
	base := start(t, arithmetic.Defaults())
	r := row("arith-000001", "7")
	_ = r.Fields.Set("question_id", 17)
	r.Fields.SetRaw("notes", json.RawMessage(`null`))
	idx := 4
	r.TaskIndex, r.RolloutIndex = &idx, &idx
	status, raw := envtest.NewSession(t, base).Post("/verify", envtest.Verify(r, envtest.Answer("7")))
	if status != http.StatusOK {
		t.Fatalf("%d %s", status, raw)
	}
	m := envtest.Members(t, raw)
	for k, want := range map[string]string{"task_id": `"arith-000001"`, "question_id": `17`, "notes": `null`,
		"_ng_task_index": `4`, "_ng_rollout_index": `4`, "expected_answer": `"7"`, "extracted_answer": `"7"`, "reward": `1`} {
		if string(m[k]) != want {
			t.Errorf("%s = %s, want %s", k, m[k], want)
		}
	}
	if _, ok := m["responses_create_params"]; !ok {
		t.Error("responses_create_params not echoed")
	}
	if _, ok := m["response"]; !ok {
		t.Error("response not echoed")
	}
}

func TestToleranceConfig(t *testing.T) {
	base := start(t, arithmetic.Config{Tolerance: 0.01})
	if _, res, raw := verify(t, base, row("t", "3.14159"), "pi is 3.14"); res.Reward != 1 {
		t.Fatalf("within tolerance: %s", raw)
	}
	if _, res, raw := verify(t, base, row("t", "3.2"), "pi is 3.14"); res.Reward != 0 {
		t.Fatalf("outside tolerance: %s", raw)
	}
	for _, bad := range []float64{-1, math.NaN(), math.Inf(1)} {
		if err := (arithmetic.Config{Tolerance: bad}).Validate(); err == nil {
			t.Errorf("Tolerance %v accepted", bad)
		}
	}
}

func TestRowsUpstreamWouldRefuse(t *testing.T) {
	base := start(t, arithmetic.Defaults())
	for _, tc := range []struct {
		name   string
		fields map[string]any
		typ    string
	}{
		{"no expected answer", map[string]any{"task_id": "t"}, protocol.ErrMissing},
		{"numeric expected answer", map[string]any{"expected_answer": 7}, protocol.ErrString},
		{"null expected answer", map[string]any{"expected_answer": nil}, protocol.ErrString},
		{"numeric task id", map[string]any{"expected_answer": "7", "task_id": 3}, protocol.ErrString},
	} {
		r := envtest.Row("What is 3 + 4?", tc.fields)
		status, raw := envtest.NewSession(t, base).Post("/verify", envtest.Verify(r, envtest.Answer("7")))
		servertest.CheckErrorBody(t, status, raw)
		var body struct{ Detail []protocol.FieldError }
		_ = json.Unmarshal(raw, &body)
		if status != http.StatusUnprocessableEntity || len(body.Detail) != 1 || body.Detail[0].Type != tc.typ {
			t.Errorf("%s: %d %s; want 422 %s", tc.name, status, raw, tc.typ)
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
		got, ok := arithmetic.LastNumber(in)
		if !ok || got != want {
			t.Errorf("LastNumber(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	if got, ok := arithmetic.LastNumber("none here. - ."); ok {
		t.Errorf("LastNumber found %q in a text without digits", got)
	}
}

func TestConfigKeys(t *testing.T) {
	raw, err := json.Marshal(arithmetic.Config{Tolerance: 0.5, PanicOnTaskPrefix: "boom-", WorkMicros: 3})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(raw); got != `{"tolerance":0.5,"panic_on_task_prefix":"boom-","work_us":3}` {
		t.Errorf("JSON keys: %s", got)
	}
	// The zero value adds no key, so existing configs encode as before.
	if raw, _ := json.Marshal(arithmetic.Defaults()); string(raw) != `{}` {
		t.Errorf("zero Config encodes as %s", raw)
	}
	for _, bad := range []int{-1, 1_000_001} {
		err := (arithmetic.Config{WorkMicros: bad}).Validate()
		if err == nil || !strings.Contains(err.Error(), "work_us") {
			t.Errorf("WorkMicros %d: err %v, want one naming work_us", bad, err)
		}
	}
}

// TestWorkMicrosKeepsScores: the synthetic work changes what a
// verification costs, never what it answers.
func TestWorkMicrosKeepsScores(t *testing.T) {
	plain := start(t, arithmetic.Config{})
	work := start(t, arithmetic.Config{WorkMicros: 20})
	for _, tc := range []struct{ expected, answer string }{
		{"7", "The answer is 7."}, {"7", "8"}, {"1234.5", "roughly 1,234.50"}, {"0", "no idea"},
	} {
		_, want, _ := verify(t, plain, row("t", tc.expected), tc.answer)
		status, got, raw := verify(t, work, row("t", tc.expected), tc.answer)
		if status != http.StatusOK || got.Reward != want.Reward || string(got.Extracted) != string(want.Extracted) {
			t.Errorf("%q with work_us=20: %s; without: %+v", tc.answer, raw, want)
		}
	}
	if status, _, _ := verify(t, work, row("t", "seven"), "7"); status != http.StatusInternalServerError {
		t.Errorf("unscorable task with work_us=20: %d, want 500", status)
	}
}

// telemetryOn enables telemetry with a manual reader and an in-memory
// span exporter. Call it before starting the server.
func telemetryOn(t *testing.T) (*lens.Handle, *sdkmetric.ManualReader, *tracetest.InMemoryExporter) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	exp := tracetest.NewInMemoryExporter()
	h := servertest.EnableTelemetry(t, telemetry.InitOptions{
		ServerName: arithmetic.ServerName, ServerType: contract.ServerTypeResources,
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
			case contract.VerifyCalls:
				for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
					v, _ := p.Attributes.Value(attribute.Key(contract.AttrVerifyOutcome))
					switch v.AsString() {
					case contract.OutcomeSuccess:
						ok = p.Value
					case contract.OutcomeFailure:
						fail = p.Value
					}
				}
			case contract.VerifySuccessRate:
				rate = m.Data.(metricdata.Gauge[float64]).DataPoints[0].Value
			case contract.VerifyDuration:
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
	base := start(t, arithmetic.Config{PanicOnTaskPrefix: "boom-"})

	for i, answer := range []string{"The answer is 7.", "7", "It is 7.", "The answer is 8."} {
		status, res, raw := verify(t, base, row("t", "7"), answer)
		if status != http.StatusOK {
			t.Fatalf("verification %d: %d %s", i, status, raw)
		}
		if want := i < 3; (res.Reward == 1) != want {
			t.Fatalf("verification %d of %q: %s", i, answer, raw)
		}
	}
	// A wrong answer is still a completed verification.
	if ok, fail, rate, n := verifyMetrics(t, reader); ok != 4 || fail != 0 || rate != 1 || n != 4 {
		t.Fatalf("after 3 right + 1 wrong: success=%d failure=%d rate=%v durations=%d; want 4, 0, 1, 4", ok, fail, rate, n)
	}

	// An expected value that is not a number fails the verification.
	status, _, raw := verify(t, base, row("t-bad", "seven"), "The answer is 7.")
	if status != http.StatusInternalServerError || !strings.Contains(string(raw), arithmetic.ErrExpectedNotNumber.Error()) ||
		strings.Contains(string(raw), "seven") {
		t.Fatalf("non-numeric expected: %d %s; want a 500 saying it is not a number, without quoting it", status, raw)
	}
	if ok, fail, _, n := verifyMetrics(t, reader); ok != 4 || fail != 1 || n != 5 {
		t.Fatalf("after a bad task: success=%d failure=%d durations=%d; want 4, 1, 5", ok, fail, n)
	}

	// A row refused by validation is not a verification.
	envtest.NewSession(t, base).Post("/verify", envtest.Verify(envtest.Row("q", nil), envtest.Answer("7")))
	// A panicking verifier is a 500 and a failure, and the server lives on.
	if status, _, _ := verify(t, base, row("boom-1", "7"), "7"); status != http.StatusInternalServerError {
		t.Fatalf("panicking verifier: %d; want a 500", status)
	}
	if _, res, raw := verify(t, base, row("t", "7"), "7"); res.Reward != 1 {
		t.Fatalf("request after a panic: %s", raw)
	}
	ok, fail, rate, n := verifyMetrics(t, reader)
	if ok != 5 || fail != 2 || n != 7 {
		t.Fatalf("after a panic and a good call: success=%d failure=%d durations=%d; want 5, 2, 7", ok, fail, n)
	}
	if want := 5.0 / 7.0; rate != want {
		t.Errorf("success rate %v, want %v", rate, want)
	}
}

func TestVerifySpan(t *testing.T) {
	h, _, exp := telemetryOn(t)
	base := start(t, arithmetic.Config{PanicOnTaskPrefix: "boom-"})
	const secretAnswer = "The answer is 4217, my chain of thought says"
	post := func(path string, r protocol.RunRequest, answer string) int {
		status, _ := envtest.NewSession(t, base).Post(path, envtest.Verify(r, envtest.Answer(answer)))
		return status
	}
	ok := envtest.Row("What is 4000 + 217?", map[string]any{"expected_answer": "4217", "task_id": "span-ok"})
	if s := post("/ng-rollout/3-0/verify", ok, secretAnswer); s != http.StatusOK {
		t.Fatalf("good verification: %d", s)
	}
	if s := post("/ng-rollout/3-1/verify", row("span-bad", "seven"), "7"); s != http.StatusInternalServerError {
		t.Fatalf("bad task: %d", s)
	}
	if s := post("/ng-rollout/3-2/verify", row("boom-span", "7"), "7"); s != http.StatusInternalServerError {
		t.Fatalf("panic: %d", s)
	}
	if err := h.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}

	byRollout := map[string]tracetest.SpanStub{}
	for _, s := range exp.GetSpans() {
		for _, kv := range s.Attributes {
			if v := kv.Value.Emit(); strings.Contains(v, "4217") || strings.Contains(v, "What is") {
				t.Errorf("span %q attribute %s carries task or answer text: %q", s.Name, kv.Key, v)
			}
		}
		if strings.Contains(s.Status.Description, "4217") || strings.Contains(s.Status.Description, "seven") {
			t.Errorf("span %q status carries task or answer text: %q", s.Name, s.Status.Description)
		}
		if s.Name != contract.SpanVerify {
			continue
		}
		id, _ := attr(s, contract.AttrRolloutID)
		byRollout[id.AsString()] = s
		if v, _ := attr(s, contract.AttrServerName); v.AsString() != arithmetic.ServerName {
			t.Errorf("gym.verify server name %q", v.AsString())
		}
	}
	good, found := byRollout["3-0"]
	if !found {
		t.Fatalf("no gym.verify span for rollout 3-0; have %d spans", len(byRollout))
	}
	if v, _ := attr(good, contract.AttrVerifyReward); v.Type() != attribute.FLOAT64 || v.AsFloat64() != 1 {
		t.Errorf("reward attribute %v (%s), want float 1", v.Emit(), v.Type())
	}
	if good.Status.Code == codes.Error || !good.Parent.IsValid() {
		t.Errorf("good verification: status %v, parent valid %v", good.Status, good.Parent.IsValid())
	}
	for _, id := range []string{"3-1", "3-2"} {
		s, found := byRollout[id]
		if !found {
			t.Fatalf("no gym.verify span for rollout %s", id)
		}
		if s.Status.Code != codes.Error {
			t.Errorf("%s: status %v, want error", id, s.Status)
		}
		if _, has := attr(s, contract.AttrVerifyReward); has {
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

func TestConfigAndReverifyMode(t *testing.T) {
	if _, err := arithmetic.New(arithmetic.Config{Tolerance: -1}); err == nil {
		t.Fatal("negative tolerance accepted")
	}
	env, err := arithmetic.New(arithmetic.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	s := server.New(environment.ServerOptions(env.Name(), "arith_1"))
	env.Register(s)
	base, _ := servertest.Start(t, s)
	res, err := http.Get(base + "/reverify_mode")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var mode string
	if err := json.NewDecoder(res.Body).Decode(&mode); err != nil || mode != protocol.ReverifyStateless {
		t.Errorf("reverify_mode %q, %v; want stateless", mode, err)
	}
}

func TestDelayOnTaskPrefixValidation(t *testing.T) {
	for _, tc := range []struct {
		cfg  arithmetic.Config
		want string
	}{
		{arithmetic.Config{DelayOnTaskPrefix: "slow-", DelayMS: -1}, "delay_ms"},
		{arithmetic.Config{DelayOnTaskPrefix: "slow-", DelayMS: 60_001}, "delay_ms"},
		{arithmetic.Config{DelayMS: 5}, "needs delay_on_task_prefix"},
	} {
		if err := tc.cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err %v, want one saying %q", tc.cfg, err, tc.want)
		}
	}
	if err := (arithmetic.Config{DelayOnTaskPrefix: "slow-", DelayMS: 20}).Validate(); err != nil {
		t.Errorf("a valid delay refused: %v", err)
	}
}

// A matching task waits (a timer: it cannot answer sooner), and every task
// answers as without the delay.
func TestDelayOnTaskPrefixSlowsMatchingTasks(t *testing.T) {
	srv := start(t, arithmetic.Config{DelayOnTaskPrefix: "slow-", DelayMS: 200})
	if status, got, raw := verify(t, srv, row("fast-1", "7"), "The answer is 7."); status != http.StatusOK || got.Reward != 1 {
		t.Fatalf("fast task: %s", raw)
	}
	began := time.Now()
	status, got, raw := verify(t, srv, row("slow-1", "7"), "The answer is 7.")
	if status != http.StatusOK || got.Reward != 1 {
		t.Fatalf("slow task: %s", raw)
	}
	if waited := time.Since(began); waited < 200*time.Millisecond {
		t.Errorf("slow task answered after %s, before its 200 ms delay", waited)
	}
}
