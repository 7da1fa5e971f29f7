package metrics_test

import (
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/telemetry"
	"github.com/gymlens/gymlens/telemetry/metrics"
)

// A hostile upstream chooses the model field of its answer: a huge value
// with terminal escapes and newlines must reach the gen_ai.* metrics
// bounded and clean, not verbatim.
func TestHostileResponseModelIsBoundedAndCleaned(t *testing.T) {
	reader := initMetrics(t, contract.ServerTypeAgent)
	hostile := "\x1b[31mevil\nmodel\r\x00" + strings.Repeat("m", 64<<10) + "\xff"
	metrics.RecordGenAI(metrics.GenAICall{Operation: contract.GenAIOperationChat, Provider: contract.GenAIProviderOpenAI,
		RequestModel: "policy", ResponseModel: hostile, Duration: time.Second, InputTokens: -1, OutputTokens: -1})
	m, ok := collect(t, reader)[contract.GenAIOperationDuration]
	if !ok {
		t.Fatalf("%s not recorded", contract.GenAIOperationDuration)
	}
	h, ok := m.Data.(metricdata.Histogram[float64])
	if !ok || len(h.DataPoints) != 1 {
		t.Fatalf("%s: %v, want one histogram point", contract.GenAIOperationDuration, m.Data)
	}
	v, ok := h.DataPoints[0].Attributes.Value(contract.AttrGenAIResponseModel)
	if !ok {
		t.Fatalf("no %s on the point", contract.AttrGenAIResponseModel)
	}
	got := v.AsString()
	t.Logf("%d-byte response model recorded as %d bytes: %.40q...", len(hostile), len(got), got)
	if len(got) > telemetry.MaxModelNameBytes {
		t.Errorf("recorded model is %d bytes, want at most %d", len(got), telemetry.MaxModelNameBytes)
	}
	if !utf8.ValidString(got) || strings.ContainsFunc(got, unicode.IsControl) {
		t.Errorf("recorded model %q holds control characters or invalid UTF-8", got)
	}
	if !strings.HasPrefix(got, "\uFFFD[31mevil\uFFFDmodel") {
		t.Errorf("recorded model %.40q, want the name kept with its control characters replaced", got)
	}
}

func TestModelName(t *testing.T) {
	for in, want := range map[string]string{
		"nvidia/llama-3.3-nemotron-super-49b-v1": "nvidia/llama-3.3-nemotron-super-49b-v1",
		"modèle-ünïcode":                         "modèle-ünïcode",
		"a\tb\x7fc":                              "a\uFFFDb\uFFFDc",
		"bad\xffbyte":                            "bad\uFFFDbyte",
		"":                                       "",
	} {
		if got := telemetry.ModelName(in); got != want {
			t.Errorf("ModelName(%q) = %q, want %q", in, got, want)
		}
	}
	long := strings.Repeat("é", telemetry.MaxModelNameBytes) // 2 bytes each
	got := telemetry.ModelName(long)
	if len(got) > telemetry.MaxModelNameBytes || !utf8.ValidString(got) || len(got) < telemetry.MaxModelNameBytes-1 {
		t.Errorf("ModelName of %d bytes = %d bytes (valid UTF-8 %v), want it cut at a character boundary under %d",
			len(long), len(got), utf8.ValidString(got), telemetry.MaxModelNameBytes)
	}
	clean := "policy_model"
	if n := testing.AllocsPerRun(100, func() { _ = telemetry.ModelName(clean) }); n != 0 {
		t.Errorf("ModelName of a clean name allocates %v times, want 0", n)
	}
}
