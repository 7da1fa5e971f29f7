package mcqa_test

import (
	"strings"
	"testing"

	"github.com/gymlens/gymlens/environment/envtest"
	"github.com/gymlens/gymlens/servers/resources/internal/pystr/difftest"
	"github.com/gymlens/gymlens/servers/resources/mcqa"
)

// diffCases is how many generated bodies TestUpstreamMCQAAgreement scores.
const diffCases = 7500

// upstreamCrashes are the exceptions upstream's verifier raises on
// bodies its request model accepts, and that this package scores
// instead (see the package documentation, "Where gymlens differs").
var upstreamCrashes = []string{"AttributeError", "TypeError", "OverflowError", "ValueError", "RecursionError"}

// TestUpstreamMCQAAgreement scores generated verify bodies with upstream's
// mcqa verifier (in one Python process) and with this package's servers
// over HTTP, one server per configured grading_mode, and requires the
// same reward, expected_answer and extracted_answer for every body, or
// both refusing it.
func TestUpstreamMCQAAgreement(t *testing.T) {
	configs := []string{"", mcqa.ModeStrictSingleLetterBoxed, mcqa.ModeLenientBoxed, mcqa.ModeLenientAnswerColon,
		mcqa.ModeLenientAnswerColonMD}
	cases := make([]difftest.Case, diffCases)
	byConfig := make([]int, diffCases)
	g := difftest.NewGen(20261207)
	for i := range cases {
		k := g.R.IntN(len(configs))
		byConfig[i] = k
		cases[i] = difftest.Case{Config: map[string]any{}, Body: mcqaBody(g)}
		if configs[k] != "" {
			cases[i].Config["grading_mode"] = configs[k]
		}
	}
	answers := make([]difftest.Answer, len(cases))
	var waits []func() []difftest.Answer
	var indexes [][]int
	for k, mode := range configs {
		env, err := mcqa.New(mcqa.Config{GradingMode: mode})
		if err != nil {
			t.Fatal(err)
		}
		var idx []int
		var bodies []difftest.Body
		for i, c := range byConfig {
			if c == k {
				idx = append(idx, i)
				bodies = append(bodies, cases[i].Body)
			}
		}
		waits = append(waits, difftest.Start(t, envtest.Serve(t, env), bodies))
		indexes = append(indexes, idx)
	}
	verdicts := difftest.Upstream(t, "resources_servers.mcqa.app", "MCQAResourcesServer", "MCQAVerifyRequest",
		[]string{"expected_answer", "extracted_answer"}, cases)

	for k, wait := range waits {
		for j, a := range wait() {
			answers[indexes[k][j]] = a
		}
	}
	difftest.Report(t, "mcqa", difftest.Compare(cases, verdicts, answers, upstreamCrashes...))
}

// mcqaOptions returns an option list, and the letters and texts in it.
func mcqaOptions(g *difftest.Gen) (any, []string, []string) {
	n := 2 + g.R.IntN(5)
	letters := []string{"A", "B", "C", "D", "E", "F", "G"}[:n]
	texts := make([]string, n)
	for i := range texts {
		texts[i] = difftest.Pick(g, "Paris", "Lyon", "Nice", "paris", "New  York", "York", "Karyotyping", "PCR",
			"None of the above", "All of the above", "A", "B and C", "", "Ｐａｒｉｓ", "ß", "Straße", "STRASSE",
			"ΟΔΟΣ", "42", "4 2", "x", "E. coli", "C) three", g.Words(2), g.Exotic())
	}
	switch g.R.IntN(12) {
	case 0:
		return nil, letters, texts
	case 1:
		return []any{}, letters, texts
	case 2: // arrow-padded: every object has every letter, most null
		out := make([]any, n)
		order := g.R.Perm(n)
		for i := range out {
			var m difftest.Object
			for _, j := range order {
				if j == i {
					m = append(m, difftest.Member{Key: letters[j], Value: texts[i]})
				} else {
					m = append(m, difftest.Member{Key: letters[j], Value: nil})
				}
			}
			out[i] = m
		}
		return out, letters, texts
	case 3: // one object holds them all, in any order, texts repeated
		var m difftest.Object
		for _, i := range g.R.Perm(n) {
			if g.Chance(0.4) {
				texts[i] = difftest.Pick(g, "Lyon", "Nice")
			}
			m = append(m, difftest.Member{Key: letters[i], Value: texts[i]})
		}
		if g.Chance(0.2) { // a key twice: Python keeps its first place and last value
			m = append(m, difftest.Member{Key: letters[0], Value: difftest.Pick[any](g, "Nice", nil)})
		}
		return []any{m}, letters, texts
	case 4: // odd keys
		out := make([]any, n)
		for i := range out {
			k := difftest.Pick(g, letters[i], strings.ToLower(letters[i]), letters[i]+letters[i], "1", "ß", "ǅ", "Ａ", "")
			out[i] = map[string]any{k: texts[i]}
		}
		return out, letters, texts
	case 5:
		out := make([]any, n)
		for i := range out {
			out[i] = map[string]any{letters[i]: nil}
		}
		return out, letters, texts
	default:
		out := make([]any, n)
		for i := range out {
			out[i] = map[string]any{letters[i]: texts[i]}
		}
		return out, letters, texts
	}
}

var outputRegexes = []any{
	`Answer:\s*([A-Z])`, `answer is \(?([a-j])\)?`, `\(([A-D])\)`, `[A-D]`, `(?:Answer|Final)\s*[:：]\s*(.+)`,
	`\\boxed\{([^}]*)\}`, `(?s)answer:(.*)`, `([`, `(A)(B)`, `(?P<l>[A-E])\b`, `(?<=Answer: )\w`, `\b([A-J])\b(?!.*\b[A-J]\b)`,
	`Réponse\s*:\s*(\w)`, `(\w+)$`, `(?m)^([A-D])$`, `(?i)ANSWER: ([a-d])`, `a{2,}`, `(?x) answer \s* : \s* ( [A-D] )`,
	`\d`, `(?a)\w`, `\N{LATIN CAPITAL LETTER B}`, `\N{latin small letter c}`, `[\N{DIGIT ONE}-\N{DIGIT NINE}]`,
	`\N{LINE FEED}(\w)`, `\N{NO SUCH}`, `(\w)\Z`, `a*+B`, `(?>A|AB)C`, `(?i:answer)\W+(\w)`, `\B(\w)\b`,
	`(\()?([A-D])(?(1)\))`, `[[:alpha:]]`, `(?u)\b\w\b`, `(?a)\b[a-d]\b`, `\s(\S)\s*$`, `(?m)(\w)$`,
	`[^\W\d_]`, `[\u0041-\u0044]`, `\x42|\103`, `(?i)[ǅ]`, `(?i)ſ`, `(?i)K`, `(?i)[k-l]`, `(?i)ß`, `(?i)[σ]`,
	`(?i)\u03a3`, `(?L)a`, `(?<x>B)`, `(?P<x>A)(?P=x)?`, `(?#comment)([A-D])`, `(?x) ( [A-D] ) # pick`, `.{0}`, `\b`,
	`a{,2}B`, `[A-D]{1,1}?`, `(?s).*?([A-D])`, `.*([A-D])`, `(?i)(?:the\s+)?answer\s+is\s+\(?([a-d])\)?`, `(?<!\w)[A-D](?!\w)`, `答案[:：]\s*([A-D])`, `(a|b)?`, `\Z`,
	5, nil, []any{`\(([A-D])\)`, `Answer:\s*([A-Z])`}, []any{`([`, `Answer: (\w)`}, []any{`x`, 5},
	map[string]any{`Answer: (\w)`: 1}, []any{}, true,
	difftest.Object{{Key: `(?i)answer:\s*(\w)`, Value: 1}, {Key: `\(([A-D])\)`, Value: 2}, {Key: `([A-D])`, Value: 3}},
	difftest.Object{{Key: `Answer: (.+)`, Value: nil}, {Key: `Answer: (\w)`, Value: nil}},
}

func mcqaBody(g *difftest.Gen) difftest.Body {
	options, letters, texts := mcqaOptions(g)
	gold := difftest.Pick(g, letters...)
	fields := map[string]any{"options": options}
	if options == nil && g.Chance(0.5) {
		delete(fields, "options")
	}
	switch g.R.IntN(10) {
	case 0:
	case 1:
		fields["expected_answer"] = nil
	case 2:
		fields["expected_answer"] = difftest.Pick(g, " "+strings.ToLower(gold)+"\n", "ß", "", "AB", gold+".")
	default:
		fields["expected_answer"] = gold
	}
	switch g.R.IntN(8) {
	case 0, 1, 2:
	case 3:
		fields["grading_mode"] = difftest.Pick(g, "lenient_answer_colon_md", "exact", "")
	default:
		fields["grading_mode"] = difftest.Pick(g, "strict_single_letter_boxed", "lenient_boxed", "lenient_answer_colon")
	}
	prefix := ""
	switch g.R.IntN(8) {
	case 0:
		fields["template_metadata"] = map[string]any{"output_regex": difftest.Pick(g, outputRegexes...)}
	case 1:
		prefix = difftest.Pick(g, "Réponse :", "Final choice:", "答案：", "The answer is", "Ａｎｓｗｅｒ", "**Answer**", "(")
		fields["template_metadata"] = map[string]any{"answer_prefix": prefix}
	case 2:
		fields["template_metadata"] = map[string]any{"answer_prefix": nil, "other": 1}
	case 3:
		fields["template_metadata"] = map[string]any{"output_regex": difftest.Pick(g, outputRegexes...),
			"answer_prefix": "Réponse :"}
	}
	if g.Chance(0.1) {
		fields["uuid"] = "q-1"
		fields["metadata"] = map[string]any{"options": []any{map[string]any{"Z": "meta"}}}
	}
	if g.Chance(0.005) {
		fields["options"] = "A"
	}
	text := mcqaText(g, gold, letters, texts, prefix)
	return g.Body(fields, g.Response(mcqaOutput(g, text)...))
}

// mcqaText states a choice the ways models do, with decoys around it.
func mcqaText(g *difftest.Gen, gold string, letters, texts []string, prefix string) string {
	var b strings.Builder
	if g.Chance(0.6) {
		b.WriteString(g.Words(g.R.IntN(10)))
		b.WriteString(difftest.Pick(g, "\n", " ", "\n\n", ". "))
	}
	i := g.R.IntN(len(letters))
	letter := letters[i]
	if g.Chance(0.7) {
		letter = gold
		if j := indexOf(letters, gold); j >= 0 {
			i = j
		}
	}
	text := texts[i]
	choice := difftest.Pick(g, letter, letter, strings.ToLower(letter), "("+letter+")", "["+letter+"]", letter+")", letter+": "+text,
		letter+". "+text, letter+" - "+text, text, strings.ToUpper(text), `\text{`+letter+`}`, letter+" or "+difftest.Pick(g, letters...),
		letter+", "+difftest.Pick(g, letters...), letter+"/"+difftest.Pick(g, letters...), letter+" and "+letter,
		"**"+letter+"**", "*"+letter+"*", "`"+letter+"`", letter+" because "+g.Words(3), "the answer is "+letter,
		"Ｂ", "ب", "ড", "Ａ", "ǅ", "ß", letter+"\u0301", letter+"2", "option "+letter+".", "Z", "", g.Exotic(), g.Word())
	for range g.R.IntN(3) {
		switch g.R.IntN(12) {
		case 0, 1, 2:
			b.WriteString(g.Boxed(choice))
		case 3, 4:
			b.WriteString(difftest.Pick(g, "Answer:", "answer:", "ANSWER :", "**Answer:**", "**Answer**:", "_Answer_:",
				"__Answer__: ", "Answer:**", "Final Answer:", "Answer：", "Ａｎｓｗｅｒ:", "answer\u00a0:") + g.Space() + choice)
		case 5:
			if prefix != "" {
				b.WriteString(prefix + g.Space() + choice)
			} else {
				b.WriteString("Answer: " + choice)
			}
		case 6:
			b.WriteString(`\boxed{` + g.Boxed(choice) + `}`)
		case 7:
			b.WriteString(`\boxed{` + choice)
		case 8:
			b.WriteString("The answer is (" + choice + ")")
		case 9:
			b.WriteString("Réponse : " + choice)
		default:
			b.WriteString(choice)
		}
		b.WriteString(difftest.Pick(g, "\n", " ", ".", ".\n", "\n\n", "", "}", " \\boxed{B}"))
	}
	if g.Chance(0.1) {
		b.WriteString(g.Words(4))
	}
	return b.String()
}

// mcqaOutput lays text out as a response's output.
func mcqaOutput(g *difftest.Gen, text string) []map[string]any {
	if g.Chance(0.03) {
		return nil
	}
	var items []map[string]any
	if g.Chance(0.2) {
		items = append(items, g.Reasoning("Answer: A"))
	}
	if g.Chance(0.1) {
		items = append(items, g.FunctionCall("Answer: B"), g.FunctionCallOutput("Answer: C"))
	}
	switch g.R.IntN(12) {
	case 0:
		cut := splitPoint(g, text)
		items = append(items, g.TextMessage(text[:cut]), g.TextMessage(text[cut:]))
	case 1:
		cut := splitPoint(g, text)
		items = append(items, g.TextMessage(text[:cut], text[cut:]))
	case 2:
		items = append(items, g.Message(g.OutputText(text), g.Refusal("Answer: D")))
	case 3:
		items = append(items, g.PlainMessage("assistant", text))
	case 4:
		items = append(items, g.InputMessage("user", "Answer: A"), g.TextMessage(text))
	case 5:
		items = append(items, g.TextMessage(text), g.PlainMessage(difftest.Pick(g, "user", "assistant"), difftest.Pick(g, "", "Answer: A")))
	case 6:
		items = append(items, g.TextMessage(difftest.Pick(g, "", "  ", "\n")))
	default:
		items = append(items, g.TextMessage(text))
	}
	return items
}

func splitPoint(g *difftest.Gen, text string) int {
	cut := g.R.IntN(len(text) + 1)
	for cut < len(text) && text[cut]&0xc0 == 0x80 {
		cut++
	}
	return cut
}

func indexOf(xs []string, x string) int {
	for i, s := range xs {
		if s == x {
			return i
		}
	}
	return -1
}
