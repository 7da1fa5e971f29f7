package arithmetic_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/environment/envtest"
	"github.com/gymlens/gymlens/internal/servertest"
	"github.com/gymlens/gymlens/servers/resources/arithmetic"
	"github.com/gymlens/gymlens/telemetry"
)

// maxFuzzText bounds the answer and the expected answer the fuzzer
// sends.
const maxFuzzText = 16 << 10

// FuzzVerify sends random answers and expected answers through a real
// server, with telemetry on, and checks each response against an oracle
// written independently of the verifier's scanner: servertest.Scorable
// says whether the expected answer is a number, servertest.SameNumber
// compares exactly.
func FuzzVerify(f *testing.F) {
	for _, seed := range [][2]string{
		{"The answer is 7.", "7"}, {"8", "7"}, {"about 1234.5 units", " 1,234.50 "},
		{"x-.5 or -0.50", "-.5"}, {"7.", "+7"}, {"7", "seven"}, {"1000", "1e3"}, {"12345", "1,2345"},
		{"", ""}, {"no digits here", "0"}, {"0", "0." + strings.Repeat("0", 2000) + "1"},
		{"\u2028 7 \uFFFD", "7"}, {"\xff\xfe 7", "7"}, {strings.Repeat("9", 5000), "9"}, {"1,000,000", "1000000"},
	} {
		f.Add(seed[0], seed[1])
	}
	servertest.EnableTelemetry(f, telemetry.InitOptions{ServerName: arithmetic.ServerName,
		ServerType: contract.ServerTypeResources, SpanExporter: tracetest.NewNoopExporter(), MetricReader: sdkmetric.NewManualReader()})
	env, err := arithmetic.New(arithmetic.Defaults())
	if err != nil {
		f.Fatal(err)
	}
	base := envtest.Serve(f, env)

	f.Fuzz(func(t *testing.T, answer, expected string) {
		if len(answer) > maxFuzzText || len(expected) > maxFuzzText {
			t.Skip("too long")
		}
		// JSON carries valid UTF-8 only: the server sees what the
		// encoder makes of the rest.
		answer, expected = strings.ToValidUTF8(answer, "\uFFFD"), strings.ToValidUTF8(expected, "\uFFFD")
		status, raw := envtest.NewSession(t, base).Post("/verify",
			envtest.Verify(row("fuzz", expected), envtest.Answer(answer)))
		if !servertest.Scorable(expected) {
			if status != http.StatusInternalServerError || !strings.Contains(string(raw), arithmetic.ErrExpectedNotNumber.Error()) {
				t.Fatalf("expected %.100q is no number: %d %.300s; want a 500 saying so", expected, status, raw)
			}
			return
		}
		if status != http.StatusOK {
			t.Fatalf("answer %.100q, expected %.100q: %d %.300s", answer, expected, status, raw)
		}
		var res result
		if err := json.Unmarshal(raw, &res); err != nil {
			t.Fatal(err)
		}
		tok, found := arithmetic.LastNumber(answer)
		want, _ := arithmetic.LastNumber(strings.TrimSpace(expected))
		correct := found && servertest.SameNumber(tok, want)
		wantExtracted := "null"
		if found {
			b, _ := json.Marshal(tok)
			wantExtracted = string(b)
		}
		if string(res.Extracted) != wantExtracted || (res.Reward == 1) != correct || (res.Reward != 0 && res.Reward != 1) {
			t.Errorf("answer %.100q, expected %.100q: reward %v extracted %.100s; want correct %v, extracted %.100s",
				answer, expected, res.Reward, res.Extracted, correct, wantExtracted)
		}
	})
}
