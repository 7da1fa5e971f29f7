package equivalence_test

import (
	"strings"
	"testing"

	"golang.org/x/text/unicode/norm"

	"github.com/gymlens/gymlens/environment/envtest"
	"github.com/gymlens/gymlens/servers/resources/equivalence"
	"github.com/gymlens/gymlens/servers/resources/internal/pystr/difftest"
)

// diffCases is how many generated bodies TestUpstreamEquivalenceRuleAgreement scores.
const diffCases = 6000

// TestUpstreamEquivalenceRuleAgreement scores generated verify bodies with upstream's
// equivalence_rule verifier (in one Python process) and with this
// package's servers over HTTP, one per grading_rule, and requires the
// same reward and equivalence_score for every body, or both refusing it.
// Bodies on which upstream raises AttributeError (an output message whose
// content is a string or holds input parts) are scored here and left out
// of the comparison.
func TestUpstreamEquivalenceRuleAgreement(t *testing.T) {
	rules := []string{"", equivalence.RuleExact, equivalence.RuleSeqMatch, equivalence.RuleWeightedSeqMatch}
	cases := make([]difftest.Case, diffCases)
	byRule := make([]int, diffCases)
	g := difftest.NewGen(20261207)
	for i := range cases {
		k := g.R.IntN(len(rules))
		byRule[i] = k
		cases[i] = difftest.Case{Config: map[string]any{}, Body: equivalenceBody(g)}
		if rules[k] != "" {
			cases[i].Config["grading_rule"] = rules[k]
		}
	}
	answers := make([]difftest.Answer, len(cases))
	var waits []func() []difftest.Answer
	var indexes [][]int
	for k, rule := range rules {
		env, err := equivalence.New(equivalence.Config{GradingRule: rule})
		if err != nil {
			t.Fatal(err)
		}
		var idx []int
		var bodies []difftest.Body
		for i, r := range byRule {
			if r == k {
				idx = append(idx, i)
				bodies = append(bodies, cases[i].Body)
			}
		}
		waits = append(waits, difftest.Start(t, envtest.Serve(t, env), bodies))
		indexes = append(indexes, idx)
	}
	verdicts := difftest.Upstream(t, "resources_servers.equivalence_rule.app", "EquivalenceRuleResourcesServer",
		"EquivalenceRuleVerifyRequest", []string{"equivalence_score"}, cases)

	for k, wait := range waits {
		for j, a := range wait() {
			answers[indexes[k][j]] = a
		}
	}
	difftest.Report(t, "equivalence_rule", difftest.Compare(cases, verdicts, answers, "AttributeError"))
}

// equivalenceAnswer returns an expected answer and a model's answer that
// is it, nearly it, or something else.
func equivalenceAnswer(g *difftest.Gen) (string, string) {
	var expected string
	switch g.R.IntN(6) {
	case 0:
		expected, _ = g.Number()
	case 1:
		expected = g.Exotic()
	case 2:
		expected = strings.Repeat(difftest.Pick(g, "ab", "a", "the cat ", "ΣΑΣ ", "x y"), 30+g.R.IntN(60))
	case 3:
		expected = ""
	default:
		expected = g.Words(1 + g.R.IntN(12))
	}
	switch g.R.IntN(9) {
	case 0, 1:
		return expected, expected
	case 2:
		return expected, strings.ToUpper(expected)
	case 3:
		return expected, " \n" + strings.ReplaceAll(expected, " ", "\u3000\t") + "\x1c"
	case 4:
		return expected, norm.NFKD.String(expected)
	case 5:
		r := []rune(expected)
		if len(r) > 2 {
			cut := g.R.IntN(len(r))
			return expected, string(r[:cut]) + g.Word() + string(r[cut:])
		}
		return expected, expected + g.Word()
	case 6:
		return expected, expected[:len(expected)/2]
	default:
		return expected, g.Words(1 + g.R.IntN(15))
	}
}

func equivalenceBody(g *difftest.Gen) difftest.Body {
	expected, answer := equivalenceAnswer(g)
	fields := map[string]any{"expected_answer": expected}
	if g.Chance(0.1) {
		fields["question"] = "What?"
		fields["hashid"] = 7
	}
	switch {
	case g.Chance(0.01):
		delete(fields, "expected_answer")
	case g.Chance(0.01):
		fields["expected_answer"] = nil
	}
	var items []map[string]any
	if g.Chance(0.2) {
		items = append(items, g.Reasoning(expected))
	}
	if g.Chance(0.1) {
		items = append(items, g.FunctionCall(expected), g.FunctionCallOutput(expected))
	}
	cut := g.R.IntN(len(answer) + 1)
	for cut < len(answer) && answer[cut]&0xc0 == 0x80 {
		cut++
	}
	switch g.R.IntN(10) {
	case 0:
		items = append(items, g.TextMessage(answer[:cut]), g.TextMessage(answer[cut:]))
	case 1:
		items = append(items, g.TextMessage(answer[:cut], answer[cut:]))
	case 2:
		items = append(items, g.Message(g.OutputText(answer), g.Refusal(expected)))
	case 3:
		items = append(items, g.PlainMessage(difftest.Pick(g, "assistant", "user"), difftest.Pick(g, answer, "")))
	case 4:
		items = append(items, g.InputMessage("user", expected), g.TextMessage(answer))
	case 5:
		items = nil
	default:
		items = append(items, g.TextMessage(answer))
	}
	return g.Body(fields, g.Response(items...))
}
