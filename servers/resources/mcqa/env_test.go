package mcqa_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"go.uber.org/goleak"

	"github.com/gymlens/gymlens/environment/envtest"
	"github.com/gymlens/gymlens/protocol"
	"github.com/gymlens/gymlens/servers/resources/mcqa"
)

// TestMain fails the package when a test leaves a server or a client
// connection behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func startEnv(t *testing.T, cfg mcqa.Config) string {
	t.Helper()
	env, err := mcqa.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return envtest.Serve(t, env)
}

// options is a three-option question's option list.
var options = []map[string]any{{"A": "Paris"}, {"B": "Lyon"}, {"C": "Nice"}}

// The fixtures are written from upstream's grading rules; each names the
// rule it exercises.
func TestEnvVerify(t *testing.T) {
	strict := startEnv(t, mcqa.Defaults())
	md := startEnv(t, mcqa.Config{GradingMode: mcqa.ModeLenientAnswerColonMD})
	for _, c := range []struct {
		name      string
		base      string
		fields    map[string]any
		text      string
		reward    float64
		expected  string // JSON
		extracted string // JSON
	}{
		{"boxed letter", strict, map[string]any{"options": options, "expected_answer": "A"}, `The capital is \boxed{A}.`, 1, `"A"`, `"A"`},
		{"boxed text wrapper, wrong letter", strict, map[string]any{"options": options, "expected_answer": "A"}, `\boxed{\text{B}}`, 0, `"A"`, `"B"`},
		{"letter then label", strict, map[string]any{"options": options, "expected_answer": "A"}, `\boxed{A: Paris}`, 1, `"A"`, `"A"`},
		{"letter in brackets", strict, map[string]any{"options": options, "expected_answer": "A"}, `\boxed{(A)}`, 1, `"A"`, `"A"`},
		{"lower case is no answer", strict, map[string]any{"options": options, "expected_answer": "A"}, `\boxed{a}`, 0, `"A"`, `null`},
		{"not an option", strict, map[string]any{"options": options, "expected_answer": "A"}, `\boxed{D}`, 0, `"A"`, `null`},
		{"blank answer", strict, map[string]any{"options": options, "expected_answer": "A"}, `   `, 0, `"A"`, `null`},
		{"expected answer normalised", strict, map[string]any{"options": options, "expected_answer": " a "}, `\boxed{A}`, 1, `"A"`, `"A"`},
		{"lenient_boxed option text", strict, map[string]any{"options": options, "expected_answer": "A", "grading_mode": "lenient_boxed"},
			`\boxed{paris}`, 1, `"A"`, `"A"`},
		{"lenient_answer_colon letter", strict, map[string]any{"options": options, "expected_answer": "B", "grading_mode": "lenient_answer_colon"},
			`Answer: b`, 1, `"B"`, `"B"`},
		{"lenient_answer_colon option text", strict, map[string]any{"options": options, "expected_answer": "C", "grading_mode": "lenient_answer_colon"},
			`answer: nice`, 1, `"C"`, `"C"`},
		{"server grading mode overrides", md, map[string]any{"options": options, "expected_answer": "C"}, `**Answer:** C`, 1, `"C"`, `"C"`},
		{"output_regex", strict, map[string]any{"options": options, "expected_answer": "C",
			"template_metadata": map[string]any{"output_regex": "Final choice: ([A-C])"}}, `Final choice: C`, 1, `"C"`, `"C"`},
		{"null option texts drop their letters", strict, map[string]any{"options": []map[string]any{{"A": "Paris", "B": nil}, {"A": nil, "B": "Lyon"}},
			"expected_answer": "B"}, `\boxed{B}`, 1, `"B"`, `"B"`},
		{"no expected answer never scores", strict, map[string]any{"options": options[:2]}, `\boxed{A}`, 0, `""`, `"A"`},
	} {
		row := envtest.Row("Capital of France?", c.fields)
		status, raw := envtest.NewSession(t, c.base).Post("/verify", envtest.Verify(row, envtest.Answer(c.text)))
		if status != http.StatusOK {
			t.Errorf("%s: %d %s", c.name, status, raw)
			continue
		}
		m := envtest.Members(t, raw)
		var reward float64
		_ = json.Unmarshal(m["reward"], &reward)
		if reward != c.reward || string(m["expected_answer"]) != c.expected || string(m["extracted_answer"]) != c.extracted {
			t.Errorf("%s: reward %s expected %s extracted %s; want %v %s %s", c.name, m["reward"], m["expected_answer"],
				m["extracted_answer"], c.reward, c.expected, c.extracted)
		}
	}
}

func TestEnvEchoesEveryMember(t *testing.T) {
	base := startEnv(t, mcqa.Defaults())
	row := envtest.Row("Q", map[string]any{"options": options, "expected_answer": "A", "uuid": "q-1",
		"metadata": map[string]any{"subject": "geo"}, "undeclared": true})
	status, raw := envtest.NewSession(t, base).Post("/verify", envtest.Verify(row, envtest.Answer(`\boxed{A}`)))
	if status != http.StatusOK {
		t.Fatalf("%d %s", status, raw)
	}
	m := envtest.Members(t, raw)
	for k, want := range map[string]string{"uuid": `"q-1"`, "metadata": `{"subject":"geo"}`, "undeclared": `true`,
		"options": `[{"A":"Paris"},{"B":"Lyon"},{"C":"Nice"}]`} {
		if string(m[k]) != want {
			t.Errorf("%s = %s, want %s", k, m[k], want)
		}
	}
}

func TestEnvRefusesWhatUpstreamRefuses(t *testing.T) {
	base := startEnv(t, mcqa.Defaults())
	for _, c := range []struct {
		name   string
		fields map[string]any
		typ    string
		loc    string
	}{
		{"markdown mode named by a task", map[string]any{"options": options, "grading_mode": "lenient_answer_colon_md"},
			protocol.ErrLiteral, `["body","grading_mode"]`},
		{"unknown mode", map[string]any{"grading_mode": "vibes"}, protocol.ErrLiteral, `["body","grading_mode"]`},
		{"empty mode", map[string]any{"grading_mode": ""}, protocol.ErrLiteral, `["body","grading_mode"]`},
		{"null mode", map[string]any{"grading_mode": nil}, protocol.ErrLiteral, `["body","grading_mode"]`},
		{"options not a list", map[string]any{"options": "A, B"}, protocol.ErrList, `["body","options"]`},
		{"expected answer not a string", map[string]any{"expected_answer": 1}, protocol.ErrString, `["body","expected_answer"]`},
	} {
		status, raw := envtest.NewSession(t, base).Post("/verify", envtest.Verify(envtest.Row("q", c.fields), envtest.Answer(`\boxed{A}`)))
		var b struct {
			Detail []struct {
				Type string
				Loc  json.RawMessage
			}
		}
		_ = json.Unmarshal(raw, &b)
		if status != http.StatusUnprocessableEntity || len(b.Detail) != 1 || b.Detail[0].Type != c.typ || string(b.Detail[0].Loc) != c.loc {
			t.Errorf("%s: %d %s; want 422 %s at %s", c.name, status, raw, c.typ, c.loc)
		}
	}
	// Upstream raises (500) on an output_regex it cannot use as a
	// pattern; here the pattern yields nothing and the mode decides.
	row := envtest.Row("q", map[string]any{"options": options, "expected_answer": "A",
		"template_metadata": map[string]any{"output_regex": 5}})
	status, raw := envtest.NewSession(t, base).Post("/verify", envtest.Verify(row, envtest.Answer(`\boxed{A}`)))
	if m := envtest.Members(t, raw); status != http.StatusOK || string(m["reward"]) != "1" || string(m["extracted_answer"]) != `"A"` {
		t.Errorf("output_regex 5: %d %s, want reward 1 for A", status, raw)
	}
}

func TestEnvReverifyModeAndOptions(t *testing.T) {
	base := startEnv(t, mcqa.Defaults())
	res, err := http.Get(base + "/reverify_mode")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var mode string
	if err := json.NewDecoder(res.Body).Decode(&mode); err != nil || mode != "stateless" {
		t.Errorf("reverify_mode %q, %v", mode, err)
	}
	if _, err := mcqa.New(mcqa.Config{GradingMode: "vibes"}); err == nil {
		t.Error("unknown config grading mode accepted")
	}
}
