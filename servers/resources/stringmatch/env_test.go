package stringmatch_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"go.uber.org/goleak"

	"github.com/gymlens/gymlens/environment/envtest"
	"github.com/gymlens/gymlens/protocol"
	"github.com/gymlens/gymlens/servers/resources/stringmatch"
)

// TestMain fails the package when a test leaves a server or a client
// connection behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func start(t *testing.T) string {
	t.Helper()
	env, err := stringmatch.New(stringmatch.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	return envtest.Serve(t, env)
}

type result struct {
	Reward    float64         `json:"reward"`
	Expected  json.RawMessage `json:"expected_answer"`
	Extracted json.RawMessage `json:"extracted_answer"`
}

// The fixtures are written from the rules upstream's server documents;
// each names the rule it exercises.
func TestVerify(t *testing.T) {
	base := start(t)
	for _, c := range []struct {
		name      string
		fields    map[string]any
		output    protocol.Response
		reward    float64
		extracted string // JSON
	}{
		{"boxed", map[string]any{"expected_answer": "Paris", "extraction_mode": "boxed"},
			envtest.Answer(`So it is \boxed{\text{Paris}}.`), 1, `"Paris"`},
		{"boxed takes the last balanced box", map[string]any{"expected_answer": "x^{2}", "extraction_mode": "boxed"},
			envtest.Answer(`\boxed{wrong} then \boxed{x^{2}}`), 1, `"x^{2}"`},
		{"final answer is the default mode", map[string]any{"expected_answer": "42"},
			envtest.Answer("Let me think.\nFinal answer: 42."), 1, `"42"`},
		{"final answer falls back to boxed", map[string]any{"expected_answer": "7"},
			envtest.Answer(`It is \boxed{7}`), 1, `"7"`},
		{"last line", map[string]any{"expected_answer": "blue", "extraction_mode": "last_line"},
			envtest.Answer("The sky is...\n\n  Blue  \n\n"), 1, `"Blue"`},
		{"full response", map[string]any{"expected_answer": "new york", "extraction_mode": "full_response"},
			envtest.Answer("  New York "), 1, `"New York"`},
		{"case sensitive", map[string]any{"expected_answer": "Paris", "extraction_mode": "full_response", "case_sensitive": true},
			envtest.Answer("paris"), 0, `"paris"`},
		{"quotes and trailing punctuation", map[string]any{"expected_answer": "Paris"},
			envtest.Answer(`Answer: "paris".`), 1, `"\"paris\""`},
		{"thousands separator", map[string]any{"expected_answer": "12345"},
			envtest.Answer("Answer: 12,345"), 1, `"12,345"`},
		{"two separators: only the soft numeric match holds", map[string]any{"expected_answer": "1234567"},
			envtest.Answer("Answer: 1,234,567"), 0.98, `"1,234,567"`},
		{"US state code", map[string]any{"expected_answer": "NY"},
			envtest.Answer("Answer: New York"), 1, `"New York"`},
		{"wrong answer", map[string]any{"expected_answer": "Paris"},
			envtest.Answer("Answer: Lyon"), 0, `"Lyon"`},
		{"nothing to extract", map[string]any{"expected_answer": "Paris"},
			envtest.Answer("I am not sure."), 0, `null`},
		{"empty expected answer scores 0", map[string]any{"expected_answer": ""},
			envtest.Answer("Answer: ."), 0, `""`},
		{"assistant messages are joined by newlines", map[string]any{"expected_answer": "Oslo"},
			envtest.Answer("Answer: Oslo", "Hope that helps"), 1, `"Oslo"`},
		{"other items say nothing", map[string]any{"expected_answer": "Oslo", "extraction_mode": "full_response"},
			envtest.Response(protocol.FunctionCall("fc_1", "call_1", "lookup", `{"q":"Answer: Rome"}`),
				protocol.AssistantMessage("msg_1", "Oslo")), 1, `"Oslo"`},
	} {
		row := envtest.Row("Capital?", c.fields)
		status, raw := envtest.NewSession(t, base).Post("/verify", envtest.Verify(row, c.output))
		var res result
		if status != http.StatusOK || json.Unmarshal(raw, &res) != nil {
			t.Errorf("%s: %d %s", c.name, status, raw)
			continue
		}
		want, _ := json.Marshal(c.fields["expected_answer"])
		if res.Reward != c.reward || string(res.Extracted) != c.extracted || string(res.Expected) != string(want) {
			t.Errorf("%s: reward %v extracted %s expected %s; want %v, %s, %s", c.name, res.Reward, res.Extracted, res.Expected,
				c.reward, c.extracted, want)
		}
	}
}

func TestVerifyEchoesEveryMember(t *testing.T) {
	base := start(t)
	row := envtest.Row("Capital?", map[string]any{"expected_answer": "Paris", "metadata": map[string]any{"src": "geo"},
		"undeclared": []int{1, 2}, "nothing": nil})
	status, raw := envtest.NewSession(t, base).Post("/verify", envtest.Verify(row, envtest.Answer("Answer: Paris")))
	if status != http.StatusOK {
		t.Fatalf("%d %s", status, raw)
	}
	m := envtest.Members(t, raw)
	for k, want := range map[string]string{"metadata": `{"src":"geo"}`, "undeclared": `[1,2]`, "nothing": `null`, "reward": `1`} {
		if string(m[k]) != want {
			t.Errorf("%s = %s, want %s", k, m[k], want)
		}
	}
}

func TestVerifyRefusesWhatUpstreamRefuses(t *testing.T) {
	base := start(t)
	for _, c := range []struct {
		name   string
		fields map[string]any
		typ    string
		loc    string
	}{
		{"no expected answer", map[string]any{}, protocol.ErrMissing, `["body","expected_answer"]`},
		{"numeric expected answer", map[string]any{"expected_answer": 3}, protocol.ErrString, `["body","expected_answer"]`},
		{"unknown mode", map[string]any{"expected_answer": "a", "extraction_mode": "regex"}, protocol.ErrLiteral, `["body","extraction_mode"]`},
		{"empty mode", map[string]any{"expected_answer": "a", "extraction_mode": ""}, protocol.ErrLiteral, `["body","extraction_mode"]`},
		{"metadata not an object", map[string]any{"expected_answer": "a", "metadata": "x"}, protocol.ErrDict, `["body","metadata"]`},
	} {
		status, raw := envtest.NewSession(t, base).Post("/verify", envtest.Verify(envtest.Row("q", c.fields), envtest.Answer("a")))
		var b struct {
			Detail []struct {
				Type string
				Loc  json.RawMessage
				Msg  string
			}
		}
		_ = json.Unmarshal(raw, &b)
		if status != http.StatusUnprocessableEntity || len(b.Detail) != 1 || b.Detail[0].Type != c.typ || string(b.Detail[0].Loc) != c.loc {
			t.Errorf("%s: %d %s; want 422 %s at %s", c.name, status, raw, c.typ, c.loc)
		}
		if c.typ == protocol.ErrLiteral && b.Detail[0].Msg != "Input should be 'boxed', 'final_answer', 'last_line' or 'full_response'" {
			t.Errorf("%s: message %q", c.name, b.Detail[0].Msg)
		}
	}
}
