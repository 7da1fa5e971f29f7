package equivalence_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"go.uber.org/goleak"

	"github.com/gymlens/gymlens/environment/envtest"
	"github.com/gymlens/gymlens/protocol"
	"github.com/gymlens/gymlens/servers/resources/equivalence"
)

// TestMain fails the package when a test leaves a server or a client
// connection behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func start(t *testing.T, rule string) string {
	t.Helper()
	env, err := equivalence.New(equivalence.Config{GradingRule: rule})
	if err != nil {
		t.Fatal(err)
	}
	return envtest.Serve(t, env)
}

// message is an output message with the given parts.
func message(role string, parts ...protocol.Part) protocol.Item {
	return protocol.Item{Type: protocol.TypeMessage, ID: "msg_x", Role: role, Status: protocol.StatusCompleted,
		Content: &protocol.Content{Parts: parts}}
}

// The expected rewards of the two similarity rules were worked out with
// the definitions (difflib's ratio of the normalised strings; 0.85 of it
// plus 0.15 of the ratio of the first ten characters).
func TestVerify(t *testing.T) {
	for _, c := range []struct {
		name, rule, expected string
		output               protocol.Response
		reward               float64
	}{
		{"exact after normalising", "exact", "paris is the capital", envtest.Answer("  PARIS   is\tthe capital "), 1},
		{"exact is the default", "", "Paris", envtest.Answer("paris"), 1},
		{"exact, different", "exact", "Paris", envtest.Answer("Lyon"), 0},
		{"parts join with nothing between", "exact", "Paris", envtest.Response(message("assistant",
			protocol.OutputText("Par"), protocol.Part{Type: protocol.PartRefusal, Refusal: "no"}, protocol.OutputText("is"))), 1},
		{"every message counts", "exact", "Paris", envtest.Response(message("assistant", protocol.OutputText("Pa")),
			protocol.FunctionCall("fc_1", "call_1", "f", "{}"), message("", protocol.OutputText("ris"))), 1},
		{"seq_match", "seq_match", "the eiffel tower stands in paris", envtest.Answer("The Eiffel Tower is in Paris"), 0.9},
		{"weighted_seq_match", "weighted_seq_match", "the eiffel tower stands in paris", envtest.Answer("The Eiffel Tower is in Paris"), 0.915},
		{"seq_match, short answer", "seq_match", "paris", envtest.Answer("Paris, France"), 0.5555555555555556},
		{"weighted_seq_match, short answer", "weighted_seq_match", "paris", envtest.Answer("Paris, France"), 0.6222222222222222},
		{"no text", "seq_match", "paris", envtest.Response(), 0},
	} {
		base := start(t, c.rule)
		row := envtest.Row("Where is it?", map[string]any{"expected_answer": c.expected})
		status, raw := envtest.NewSession(t, base).Post("/verify", envtest.Verify(row, c.output))
		var res struct {
			Reward float64 `json:"reward"`
			Score  float64 `json:"equivalence_score"`
		}
		if status != http.StatusOK || json.Unmarshal(raw, &res) != nil {
			t.Errorf("%s: %d %s", c.name, status, raw)
			continue
		}
		if res.Reward != c.reward || res.Score != c.reward {
			t.Errorf("%s: reward %v equivalence_score %v; want %v", c.name, res.Reward, res.Score, c.reward)
		}
	}
}

// Upstream's models allow extra members: every row member comes back.
func TestVerifyEchoesEveryMember(t *testing.T) {
	base := start(t, "exact")
	row := envtest.Row("Where?", map[string]any{"expected_answer": "Paris", "question": "Where?", "hashid": "ab12",
		"nothing": nil, "nested": map[string]any{"k": []int{1}}})
	status, raw := envtest.NewSession(t, base).Post("/verify", envtest.Verify(row, envtest.Answer("Paris")))
	if status != http.StatusOK {
		t.Fatalf("%d %s", status, raw)
	}
	m := envtest.Members(t, raw)
	for k, want := range map[string]string{"question": `"Where?"`, "hashid": `"ab12"`, "nothing": `null`,
		"nested": `{"k":[1]}`, "expected_answer": `"Paris"`, "reward": `1`, "equivalence_score": `1`} {
		if string(m[k]) != want {
			t.Errorf("%s = %s, want %s", k, m[k], want)
		}
	}
}

func TestVerifyRefusesARowWithoutAStringAnswer(t *testing.T) {
	base := start(t, "exact")
	for _, fields := range []map[string]any{{}, {"expected_answer": nil}, {"expected_answer": 4}} {
		status, raw := envtest.NewSession(t, base).Post("/verify", envtest.Verify(envtest.Row("q", fields), envtest.Answer("4")))
		var b struct {
			Detail []struct{ Loc json.RawMessage }
		}
		_ = json.Unmarshal(raw, &b)
		if status != http.StatusUnprocessableEntity || len(b.Detail) != 1 || string(b.Detail[0].Loc) != `["body","expected_answer"]` {
			t.Errorf("%v: %d %s; want 422 at expected_answer", fields, status, raw)
		}
	}
}

func TestConfig(t *testing.T) {
	if _, err := equivalence.New(equivalence.Config{GradingRule: "fuzzy"}); err == nil {
		t.Error("unknown grading rule accepted")
	}
	var cfg equivalence.Config
	if err := json.Unmarshal([]byte(`{"grading_rule":"seq_match"}`), &cfg); err != nil || cfg.GradingRule != equivalence.RuleSeqMatch {
		t.Errorf("grading_rule key: %+v, %v", cfg, err)
	}
}
