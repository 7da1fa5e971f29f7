package stringmatch_test

import (
	"strings"
	"testing"

	"golang.org/x/text/unicode/norm"

	"github.com/gymlens/gymlens/environment/envtest"
	"github.com/gymlens/gymlens/servers/resources/internal/pystr/difftest"
	"github.com/gymlens/gymlens/servers/resources/stringmatch"
)

// diffCases is how many generated bodies TestUpstreamStringMatchAgreement scores.
const diffCases = 6000

// TestUpstreamStringMatchAgreement scores generated verify bodies with upstream's
// string_match verifier (in one Python process) and with this package's
// server over HTTP, and requires the same reward and extracted answer for
// every body, or both refusing it.
func TestUpstreamStringMatchAgreement(t *testing.T) {
	cases := make([]difftest.Case, diffCases)
	g := difftest.NewGen(20261207)
	for i := range cases {
		cases[i] = difftest.Case{Body: stringMatchBody(g)}
	}
	env, err := stringmatch.New(stringmatch.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	bodies := make([]difftest.Body, len(cases))
	for i, c := range cases {
		bodies[i] = c.Body
	}
	wait := difftest.Start(t, envtest.Serve(t, env), bodies)
	verdicts := difftest.Upstream(t, "resources_servers.string_match.app", "StringMatchResourcesServer",
		"StringMatchVerifyRequest", []string{"expected_answer", "extracted_answer"}, cases)
	answers := wait()
	difftest.Report(t, "string_match", difftest.Compare(cases, verdicts, answers))
}

// expectedPool returns an expected answer and forms of it a model may
// write instead.
func expectedPool(g *difftest.Gen) (string, []string) {
	switch g.R.IntN(14) {
	case 12, 13:
		e := g.Exotic()
		return e, []string{strings.ToUpper(e), strings.ToLower(e), norm.NFKD.String(e), norm.NFC.String(strings.ToUpper(e)),
			" " + e + ".", g.Exotic()}
	case 0, 1:
		a, b := g.Number()
		return a, []string{b, a + ".", "$" + a + "$", `\boxed{` + a + `}`, " " + a + " "}
	case 2:
		s := difftest.Pick(g, "New York", "Texas", "West Virginia", "District of Columbia", "Oregon", "Kansas")
		abbr := map[string]string{"New York": "NY", "Texas": "TX", "West Virginia": "WV",
			"District of Columbia": "DC", "Oregon": "OR", "Kansas": "KS"}[s]
		return difftest.Pick(g, s, abbr, strings.ToLower(s)), []string{s, abbr, strings.ToLower(s), "arkansas", s + ", Ohio"}
	case 3:
		return "red, green and blue", []string{"red green blue", "red; green; blue", "red, green, or blue", "blue, green and red"}
	case 4:
		w := g.Word()
		return w, []string{`"` + w + `"`, "'" + w + "'", w + "!", w + "?!", strings.ToUpper(w), `\text{` + w + `}`, `\textbf{` + w + `}`}
	case 5:
		return "Paris", []string{"paris", "PARIS", "Paris.", `"Paris"`, "Ｐａｒｉｓ", "Pari", `\mathrm{Paris}`}
	case 6:
		return `\frac{\sqrt{3}}{2}`, []string{`\frac{\sqrt{3}}{2}`, `$\frac{\sqrt{3}}{2}$`, `\[\frac{\sqrt{3}}{2}\]`, "√3/2"}
	case 7:
		return "45°", []string{`45^\circ`, `45^{\circ}`, "45", "45 degrees", "44.8"}
	case 8:
		return "12 km", []string{"12", "12km", "12 ㎞", "12 m", "11.95 km"}
	case 9:
		return "", []string{"anything", ""}
	case 10:
		return g.Words(1 + g.R.IntN(3)), []string{g.Words(2), "x"}
	default:
		return "ΟΔΟΣ", []string{"οδος", "οδοσ", "ΟΔΟΣ.", "οδος"}
	}
}

func stringMatchBody(g *difftest.Gen) difftest.Body {
	expected, forms := expectedPool(g)
	answer := expected
	if g.Chance(0.7) {
		answer = difftest.Pick(g, forms...)
	}
	text := stringMatchText(g, answer)

	fields := map[string]any{"expected_answer": expected}
	switch g.R.IntN(7) {
	case 0:
	case 1:
		fields["extraction_mode"] = difftest.Pick(g, "regex", "", "Boxed")
	default:
		fields["extraction_mode"] = difftest.Pick(g, "boxed", "final_answer", "last_line", "full_response")
	}
	if g.Chance(0.4) {
		fields["case_sensitive"] = g.Chance(0.5)
	}
	if g.Chance(0.1) {
		fields["metadata"] = map[string]any{"source": "gen"}
	}
	if g.Chance(0.01) {
		fields["expected_answer"] = 3
	}
	return g.Body(fields, g.Response(outputItems(g, text)...))
}

// stringMatchText wraps answer in the way a model might state it, with
// other text around.
func stringMatchText(g *difftest.Gen, answer string) string {
	var b strings.Builder
	if g.Chance(0.6) {
		b.WriteString(g.Words(g.R.IntN(8)))
		b.WriteString(difftest.Pick(g, "\n", " ", "\n\n", ". "))
	}
	if g.Chance(0.2) {
		// a decoy stated earlier
		b.WriteString(difftest.Pick(g, "Answer: 3\n", `\boxed{7} `, "final answer: maybe\n", `\boxed{\text{no}}`+"\n"))
	}
	label := difftest.Pick(g, "Answer:", "answer:", "Final answer:", "final answer：", "FINAL   ANSWER :", "Final\nanswer:",
		"Answer：", "The answer is", "Reanswer:", "**Answer:**", "anſwer:", "Ａｎｓｗｅｒ：", "")
	switch g.R.IntN(9) {
	case 0, 1, 2:
		b.WriteString(label + g.Space() + answer)
	case 3, 4:
		b.WriteString(g.Boxed(answer))
	case 5:
		b.WriteString(label + " " + g.Boxed(answer))
	case 6:
		b.WriteString(`\boxed{` + g.Boxed(answer) + `}`)
	case 7:
		b.WriteString(label + g.Space())
	default:
		b.WriteString(answer)
	}
	b.WriteString(difftest.Pick(g, "", "", ".", ". ", "..", "\n", ".\n\nHope that helps.", " \\boxed{", "}", "!", "\n\n  \n"))
	if g.Chance(0.15) {
		b.WriteString("\n" + g.Words(3))
	}
	return b.String()
}

// outputItems lays text out as a response's output: one message, several
// messages or parts, with reasoning, function calls, refusals, plain
// string content and user messages around it, or nothing at all.
func outputItems(g *difftest.Gen, text string) []map[string]any {
	if g.Chance(0.03) {
		return nil
	}
	var items []map[string]any
	if g.Chance(0.2) {
		items = append(items, g.Reasoning("Answer: "+g.Word()))
	}
	if g.Chance(0.1) {
		items = append(items, g.FunctionCall("Answer: "+g.Word()), g.FunctionCallOutput("Answer: tool"))
	}
	switch g.R.IntN(8) {
	case 0:
		cut := g.R.IntN(len(text) + 1)
		for cut < len(text) && !isRuneStart(text[cut]) {
			cut++
		}
		items = append(items, g.TextMessage(text[:cut]), g.TextMessage(text[cut:]))
	case 1:
		cut := g.R.IntN(len(text) + 1)
		for cut < len(text) && !isRuneStart(text[cut]) {
			cut++
		}
		items = append(items, g.TextMessage(text[:cut], text[cut:]))
	case 2:
		items = append(items, g.Message(g.OutputText(text), g.Refusal("Answer: refused")))
	case 3:
		items = append(items, g.PlainMessage("assistant", text))
	case 4:
		items = append(items, g.InputMessage("user", "Answer: user"), g.TextMessage(text))
	case 5:
		items = append(items, g.TextMessage(text), g.PlainMessage(difftest.Pick(g, "user", "system", "developer"), "Answer: other"))
	default:
		items = append(items, g.TextMessage(text))
	}
	if g.Chance(0.1) {
		items = append(items, g.Message())
	}
	return items
}

func isRuneStart(b byte) bool { return b&0xc0 != 0x80 }
