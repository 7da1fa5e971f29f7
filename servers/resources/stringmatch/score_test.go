package stringmatch

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

func ptr(s string) *string { return &s }

func show(p *string) string {
	if p == nil {
		return "<none>"
	}
	return "\"" + *p + "\""
}

// extractTests: want is nil when the mode finds no answer.
var extractTests = []struct {
	name string
	mode string
	text string
	want *string
}{
	// boxed
	{"boxed simple", ModeBoxed, `The result is \boxed{42}.`, ptr("42")},
	{"boxed last wins", ModeBoxed, `first \boxed{1}, then \boxed{2}`, ptr("2")},
	{"boxed nested braces", ModeBoxed, `\boxed{\frac{1}{2}} done`, ptr(`\frac{1}{2}`)},
	{"boxed trims", ModeBoxed, "\\boxed{  7 \n}", ptr("7")},
	{"boxed text wrapper", ModeBoxed, `\boxed{ \text{ Paris } }`, ptr("Paris")},
	{"boxed nested text wrappers", ModeBoxed, `\boxed{\text{\text{ x }}}`, ptr("x")},
	{"boxed text not whole value", ModeBoxed, `\boxed{\text{km} 5}`, ptr(`\text{km} 5`)},
	{"boxed text wrapper braces unbalanced", ModeBoxed, `\boxed{\text{a} + \text{b}}`, ptr(`a} + \text{b`)},
	{"boxed unclosed last falls back", ModeBoxed, `\boxed{7} and \boxed{8`, ptr("7")},
	{"boxed unclosed outer, closed inner", ModeBoxed, `\boxed{a \boxed{b}`, ptr("b")},
	{"boxed empty", ModeBoxed, `\boxed{}`, ptr("")},
	{"boxed needs brace right after", ModeBoxed, `\boxed {5}`, nil},
	{"boxed none", ModeBoxed, "no box here", nil},
	{"boxed never closed", ModeBoxed, `\boxed{\boxed{`, nil},
	{"boxed ignores answer label", ModeBoxed, "Answer: 3", nil},

	// final_answer
	{"final answer", ModeFinalAnswer, "Let me think.\nFinal answer: 42", ptr("42")},
	{"answer label", ModeFinalAnswer, "answer: Saturn", ptr("Saturn")},
	{"last label wins", ModeFinalAnswer, "Answer: 3\nFinal Answer: 5.", ptr("5")},
	{"case insensitive", ModeFinalAnswer, "FINAL   ANSWER : Jupiter", ptr("Jupiter")},
	{"full-width colon", ModeFinalAnswer, "answer\uff1a 巴黎", ptr("巴黎")},
	{"unicode spaces around colon", ModeFinalAnswer, "final\u00a0answer\u3000:\u2003x", ptr("x")},
	{"rest of line only", ModeFinalAnswer, "Answer: 12\nbecause reasons", ptr("12")},
	{"label then newline", ModeFinalAnswer, "Answer:\n  42\nmore", ptr("42")},
	{"trailing dots", ModeFinalAnswer, "Answer: x...", ptr("x")},
	{"inner dot kept", ModeFinalAnswer, "Final answer: 3.14.", ptr("3.14")},
	{"dot then space", ModeFinalAnswer, "Final answer: 7 .", ptr("7")},
	{"other punctuation kept", ModeFinalAnswer, "Answer: Saturn!", ptr("Saturn!")},
	{"label inside word", ModeFinalAnswer, "Reanswer: 9", ptr("9")},
	{"label beats box", ModeFinalAnswer, `Final answer: 6 \boxed{7}`, ptr(`6 \boxed{7}`)},
	{"empty after label", ModeFinalAnswer, "Answer: .", ptr("")},
	{"falls back to boxed", ModeFinalAnswer, `I get \boxed{9}`, ptr("9")},
	{"no colon no box", ModeFinalAnswer, "The answer is 5", nil},
	{"empty text", ModeFinalAnswer, "", nil},

	// last_line
	{"last line", ModeLastLine, "a\nb\n\n  \n", ptr("b")},
	{"last line crlf", ModeLastLine, "x\r\n  y  \r\n", ptr("y")},
	{"last line unicode separators", ModeLastLine, "one\u2028two\x1cthree", ptr("three")},
	{"last line vertical tab", ModeLastLine, "up\vdown", ptr("down")},
	{"last line single", ModeLastLine, "  only  ", ptr("only")},
	{"last line blank", ModeLastLine, " \n\t\n\u3000", nil},
	{"last line empty", ModeLastLine, "", nil},

	// full_response
	{"full response", ModeFullResponse, "  hello\nworld \n", ptr("hello\nworld")},
	{"full response python whitespace", ModeFullResponse, "\x1f\u00a0hi\u3000", ptr("hi")},
	{"full response blank", ModeFullResponse, " \u2028 ", nil},
	{"full response empty", ModeFullResponse, "", nil},
}

func TestExtract(t *testing.T) {
	for _, tt := range extractTests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok, err := Extract(tt.text, tt.mode)
			if err != nil {
				t.Fatalf("Extract: %v", err)
			}
			var gotp *string
			if ok {
				gotp = &got
			}
			if show(gotp) != show(tt.want) {
				t.Errorf("Extract(%q, %s) = %s, want %s", tt.text, tt.mode, show(gotp), show(tt.want))
			}
		})
	}
}

func TestExtractUnknownMode(t *testing.T) {
	for _, mode := range []string{"", "regex", "Boxed", "last-line"} {
		if _, _, err := Extract("Answer: 1", mode); !errors.Is(err, ErrInvalidTask) {
			t.Errorf("Extract(mode %q) error = %v, want ErrInvalidTask", mode, err)
		}
	}
}

// labelPattern is upstream's final-answer pattern in Go syntax: Python's
// \s spelled out, and the two extra letters Python's case-insensitive 'i'
// matches listed. lastLabelValue must find the same last group.
var labelPattern = func() *regexp.Regexp {
	const ws = `[\t-\r\x1c-\x20\x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}]`
	return regexp.MustCompile(`(?i)(?:f[i\x{130}\x{131}]nal` + ws + `+answer|answer)` + ws + `*[:\x{ff1a}]` + ws + `*(.+)`)
}()

func checkLabelScanner(t *testing.T, text string) {
	t.Helper()
	start, end, ok := lastLabelValue(text)
	got := "<none>"
	if ok {
		got = text[start:end]
	}
	want := "<none>"
	if m := labelPattern.FindAllStringSubmatch(text, -1); len(m) > 0 {
		want = m[len(m)-1][1]
	}
	if got != want {
		t.Errorf("last label value of %q = %q, pattern gives %q", text, got, want)
	}
}

var labelPieces = []string{
	"answer", "Answer", "ANSWER", "anſwer", "answe", "final", "Final ", "fİnal ", "a", "n", ":", "\uff1a", "::",
	" ", "\t", "\n", "\r", "\u00a0", "\u3000", "\x1c", "x", "42", ".", "\u00e9",
}

func TestLabelScannerMatchesPattern(t *testing.T) {
	fixed := []string{
		"", "answer", "answer:", "answer:\n", "answer: \n", "answer:\n\n", "answer:  \n\n", "answer: x", "final answer : x\ny",
		"answer: a answer: b", "answer: a\nanswer: b\n", "answer:\nanswer: 2", "aanswer:1", "answer\uff1a\u3000z",
		"FINAL\tANSWER\n:\n\n7", "answer:\u00a0", "answer: x\nanswer:\n",
	}
	for _, text := range fixed {
		checkLabelScanner(t, text)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		var b strings.Builder
		for range rng.IntN(12) {
			b.WriteString(labelPieces[rng.IntN(len(labelPieces))])
		}
		checkLabelScanner(t, b.String())
	}
}

func FuzzLabelScanner(f *testing.F) {
	for _, s := range []string{"Final answer: 5", "answer:\n \n", "ANSWER\uff1a x\nanswer: y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		checkLabelScanner(t, text)
	})
}

func TestExtractBoxedManyUnclosed(t *testing.T) {
	// Many groups that never close must not make the search quadratic,
	// and an earlier closed group must still be found.
	text := `\boxed{ok}` + strings.Repeat(`\boxed{`, 20000)
	got, ok := extractBoxed(text)
	if !ok || got != "ok" {
		t.Fatalf("extractBoxed = %q, %v; want \"ok\", true", got, ok)
	}
}

var gradeTests = []struct {
	name     string
	expected string
	pred     string
	reward   float64
	rule     Rule
}{
	// normalisation
	{"equal", "Paris", "Paris", 1, RuleExact},
	{"lowercase", "Paris", "PARIS", 1, RuleExact},
	{"trailing punctuation", "Paris", "paris?!.", 1, RuleExact},
	{"only punctuation kept", "?!", "?!", 1, RuleExact},
	{"different punctuation", "?", "!", 0, RuleNone},
	{"double quotes", "Paris", `"Paris"`, 1, RuleExact},
	{"single quotes on expected", "'Paris'", "paris", 1, RuleExact},
	{"quotes before punctuation", "Paris", "'Paris'!", 0, RuleNone},
	{"mismatched quotes", "Paris", `"Paris'`, 0, RuleNone},
	{"one quote layer", "Paris", `""Paris""`, 0, RuleNone},
	{"nfkc full width", "Paris", "Ｐａｒｉｓ", 1, RuleExact},
	{"nfkc ligature", "fish", "ﬁsh", 1, RuleExact},
	{"nfkc superscript", "2", "²", 1, RuleExact},
	{"python final sigma", "ΟΔΥΣΣΕΥΣ", "οδυσσευς", 1, RuleExact},
	{"python dotted capital i", "i\u0307stanbul", "İstanbul", 1, RuleExact},

	// float
	{"float integer vs decimal", "5", "5.0", 1, RuleFloat},
	{"float leading dot", "0.5", ".5", 1, RuleFloat},
	{"float exponent", "1e3", "1000", 1, RuleFloat},
	{"float dollar", "$5", "5.00", 1, RuleFloat},
	{"float escaped percent", `50\%`, "50", 1, RuleFloat},
	{"float underscores", "1000", "1_000", 1, RuleFloat},
	{"float unicode digits", "12", "١٢", 1, RuleFloat},
	{"float infinity", "inf", "Infinity", 1, RuleFloat},
	{"float negative zero is soft", "-0", "0", SoftReward, RuleSoftNumeric},

	// comma numbers
	{"comma thousands", "1234", "1,234", 1, RuleCommaNumber},
	{"escaped percent", "50%", `50\%`, 1, RuleCommaNumber},
	{"comma in two numbers", "12,345 and 6,789", "12345 and 6789", 1, RuleCommaNumber},
	{"comma pairs do not overlap", "1234567", "1,234,567", SoftReward, RuleSoftNumeric},

	// LaTeX
	{"latex text", "Paris", `\text{Paris}`, 1, RuleLaTeX},
	{"latex textbf", "bold move", `\textbf{bold}  move`, 1, RuleLaTeX},
	{"latex math delimiters", `\frac{1}{2}`, `$\frac{1}{2}$`, 1, RuleLaTeX},
	{"latex parens", "a b", `\(a   b\)`, 1, RuleLaTeX},
	{"latex nested commands", "x", `\boxed{\mathrm{x}}`, 1, RuleLaTeX},
	{"latex unclosed command", "ab", `\mathbf{ab`, 1, RuleLaTeX},

	// lists
	{"list commas", "1, 2, 3", "1 2 3", 1, RuleList},
	{"list semicolons", "cat; dog, fish", "cat dog fish", 1, RuleList},
	{"list too much removed", "red, green and blue", "red green blue", 0, RuleNone},

	// US states
	{"state name to code", "New York", "NY", 1, RuleUSState},
	{"state two words", "West Virginia", "wv", 1, RuleUSState},
	{"state order matters", "Kansas, Arkansas", "KS, AR", 1, RuleUSState},
	{"state different", "Texas", "NM", 0, RuleNone},

	// soft numeric
	{"soft half percent", "100", "99.5", SoftReward, RuleSoftNumeric},
	{"soft one percent", "100", "99", SoftReward, RuleSoftNumeric},
	{"soft too far", "100", "98.9", 0, RuleNone},
	{"soft above", "100", "101", SoftReward, RuleSoftNumeric},
	{"soft pi", "3.14159", "3.14", SoftReward, RuleSoftNumeric},
	{"soft zero expected", "0", "0.0000000001", 0, RuleNone},
	{"soft never above cap", "5", "5 cm", SoftReward, RuleSoftNumeric},
	{"soft percent", "50", "50%", SoftReward, RuleSoftNumeric},
	{"soft currency", "12", "€12", SoftReward, RuleSoftNumeric},
	{"soft degrees", "90", `90^\circ`, SoftReward, RuleSoftNumeric},
	{"nan equals nan", "nan", "NaN!", 1, RuleExact},
	{"soft infinities", "inf", "1e400 m", 0, RuleNone},

	// units and Unicode math, after the soft check
	{"units word", "five kg", "five", 1, RuleUnits},
	{"units pi", "π r", `\pi r`, 1, RuleUnits},
	{"units letter m", "maximum", "axiu", 1, RuleUnits},
	{"soft after latex", "100", `\text{99.5}`, SoftReward, RuleSoftNumericUnits},

	// nothing matches
	{"different words", "Paris", "London", 0, RuleNone},
	{"empty prediction", "Paris", "", 0, RuleNone},
}

func TestGrade(t *testing.T) {
	for _, tt := range gradeTests {
		t.Run(tt.name, func(t *testing.T) {
			reward, rule := Grade(tt.expected, tt.pred)
			if reward != tt.reward || rule != tt.rule {
				t.Errorf("Grade(%q, %q) = %v, %q; want %v, %q", tt.expected, tt.pred, reward, rule, tt.reward, tt.rule)
			}
		})
	}
}

var scoreTests = []struct {
	name      string
	task      Task
	text      string
	reward    float64
	extracted *string
	rule      Rule
}{
	{"default mode label", Task{ExpectedAnswer: "Saturn"}, "Thinking...\nFinal answer: saturn.", 1, ptr("saturn"), RuleExact},
	{"default mode falls back to box", Task{ExpectedAnswer: "80"}, `speed = \boxed{80}`, 1, ptr("80"), RuleExact},
	{"boxed", Task{ExpectedAnswer: "Paris", ExtractionMode: ptr(ModeBoxed)}, `\boxed{\text{Paris}}`, 1, ptr("Paris"), RuleExact},
	{"last line", Task{ExpectedAnswer: "Pacific Ocean", ExtractionMode: ptr(ModeLastLine)}, "It is the\nPACIFIC OCEAN", 1, ptr("PACIFIC OCEAN"), RuleExact},
	{"full response", Task{ExpectedAnswer: "yes", ExtractionMode: ptr(ModeFullResponse)}, " Yes! ", 1, ptr("Yes!"), RuleExact},
	{"wrong answer", Task{ExpectedAnswer: "Paris"}, "Answer: Lyon", 0, ptr("Lyon"), RuleNone},
	{"nothing extracted", Task{ExpectedAnswer: "Paris", ExtractionMode: ptr(ModeBoxed)}, "Paris", 0, nil, RuleNone},
	{"empty expected", Task{ExpectedAnswer: ""}, "Answer: 5", 0, ptr("5"), RuleNone},
	{"blank expected is graded", Task{ExpectedAnswer: " ", ExtractionMode: ptr(ModeFullResponse)}, "x", 0, ptr("x"), RuleNone},
	{"empty extracted is graded", Task{ExpectedAnswer: "m"}, "Answer: .", 1, ptr(""), RuleUnits},

	// case_sensitive: equality of the trimmed strings, nothing else
	{"case sensitive equal", Task{ExpectedAnswer: " Paris ", CaseSensitive: true}, "Answer: Paris", 1, ptr("Paris"), RuleCaseSensitive},
	{"case sensitive case differs", Task{ExpectedAnswer: "Paris", CaseSensitive: true}, "Answer: paris", 0, ptr("paris"), RuleNone},
	{"case sensitive no nfkc", Task{ExpectedAnswer: "Paris", CaseSensitive: true}, "Answer: Ｐａｒｉｓ", 0, ptr("Ｐａｒｉｓ"), RuleNone},
	{"case sensitive no float", Task{ExpectedAnswer: "5", CaseSensitive: true}, "Answer: 5.0", 0, ptr("5.0"), RuleNone},
	{"case sensitive trailing punctuation", Task{ExpectedAnswer: "5", CaseSensitive: true}, "Answer: 5!", 0, ptr("5!"), RuleNone},
	{"case sensitive strips python whitespace", Task{ExpectedAnswer: "\u00a0x\x1c", CaseSensitive: true, ExtractionMode: ptr(ModeFullResponse)}, "x", 1, ptr("x"), RuleCaseSensitive},
}

func TestScore(t *testing.T) {
	for _, tt := range scoreTests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Score(Defaults(), tt.task, tt.text)
			if err != nil {
				t.Fatalf("Score: %v", err)
			}
			if res.Reward != tt.reward || show(res.ExtractedAnswer) != show(tt.extracted) || res.Rule != tt.rule {
				t.Errorf("Score(%q) = %v, %s, %q; want %v, %s, %q", tt.text, res.Reward, show(res.ExtractedAnswer), res.Rule,
					tt.reward, show(tt.extracted), tt.rule)
			}
			if res.ExpectedAnswer != tt.task.ExpectedAnswer {
				t.Errorf("ExpectedAnswer = %q, want %q", res.ExpectedAnswer, tt.task.ExpectedAnswer)
			}
		})
	}
}

func TestScoreInvalidMode(t *testing.T) {
	for _, mode := range []string{"", "regex", "FINAL_ANSWER"} {
		task := Task{ExpectedAnswer: "x", ExtractionMode: ptr(mode)}
		if _, err := Score(Defaults(), task, "Answer: x"); !errors.Is(err, ErrInvalidTask) {
			t.Errorf("Score(mode %q) error = %v, want ErrInvalidTask", mode, err)
		}
		if err := task.Validate(); !errors.Is(err, ErrInvalidTask) {
			t.Errorf("Validate(mode %q) = %v, want ErrInvalidTask", mode, err)
		}
	}
	for _, mode := range ExtractionModes() {
		if err := (Task{ExtractionMode: ptr(mode)}).Validate(); err != nil {
			t.Errorf("Validate(mode %q) = %v", mode, err)
		}
	}
	if err := (Task{}).Validate(); err != nil {
		t.Errorf("Validate(no mode) = %v", err)
	}
}

func TestTaskJSON(t *testing.T) {
	var task Task
	if err := json.Unmarshal([]byte(`{"expected_answer": "7", "responses_create_params": {"input": []}}`), &task); err != nil {
		t.Fatal(err)
	}
	if task.Mode() != ModeFinalAnswer || task.CaseSensitive || task.Metadata != nil {
		t.Errorf("defaults: mode %q, case_sensitive %v, metadata %v", task.Mode(), task.CaseSensitive, task.Metadata)
	}
	var full Task
	row := `{"expected_answer": "a", "extraction_mode": "last_line", "case_sensitive": true, "metadata": {"k": 1}}`
	if err := json.Unmarshal([]byte(row), &full); err != nil {
		t.Fatal(err)
	}
	want := Task{ExpectedAnswer: "a", ExtractionMode: ptr(ModeLastLine), CaseSensitive: true, Metadata: map[string]any{"k": 1.0}}
	if !reflect.DeepEqual(full, want) {
		t.Errorf("decoded %+v, want %+v", full, want)
	}
	var bad Task
	if err := json.Unmarshal([]byte(`{"expected_answer": "a", "extraction_mode": ""}`), &bad); err != nil {
		t.Fatal(err)
	}
	if err := bad.Validate(); !errors.Is(err, ErrInvalidTask) {
		t.Errorf("explicit empty mode: Validate = %v, want ErrInvalidTask", err)
	}
}

func TestResultFields(t *testing.T) {
	res, err := Score(Defaults(), Task{ExpectedAnswer: "Paris", ExtractionMode: ptr(ModeBoxed)}, "no box")
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(res.Fields())
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != `{"expected_answer":"Paris","extracted_answer":null}` {
		t.Errorf("Fields() = %s", got)
	}
	res, err = Score(Defaults(), Task{ExpectedAnswer: "Paris"}, "Answer: paris")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"expected_answer": "Paris", "extracted_answer": "paris"}
	if !reflect.DeepEqual(res.Fields(), want) {
		t.Errorf("Fields() = %v, want %v", res.Fields(), want)
	}
}

func TestResponseText(t *testing.T) {
	tests := []struct {
		in   []string
		want string
	}{
		{nil, ""},
		{[]string{"Final answer: 5"}, "Final answer: 5"},
		{[]string{"", "Final answer: 5"}, "Final answer: 5"},
		{[]string{" a ", "", "b \n"}, "a \n\nb"},
		{[]string{"\x1c x", "y\u3000"}, "x\ny"},
	}
	for _, tt := range tests {
		if got := ResponseText(tt.in); got != tt.want {
			t.Errorf("ResponseText(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestDefaults(t *testing.T) {
	if Defaults() != (Config{}) {
		t.Errorf("Defaults() = %+v, want the zero Config", Defaults())
	}
}

// exampleRows are dataset rows in upstream's shape, each with the texts
// of a model reply's output_text parts; they are made up for this test.
var exampleRows = []struct {
	row    string
	reply  []string
	reward float64
}{
	{
		row:    `{"responses_create_params": {"input": [{"role": "user", "type": "message", "content": [{"type": "input_text", "text": "Which element has the symbol Fe? Put your final answer in \\boxed{}."}]}]}, "expected_answer": "Iron", "extraction_mode": "boxed", "case_sensitive": false}`,
		reply:  []string{"Fe comes from the Latin ferrum.", `So it is \boxed{\text{iron}}.`},
		reward: 1,
	},
	{
		row:    `{"responses_create_params": {"input": [{"role": "user", "type": "message", "content": [{"type": "input_text", "text": "How many sides does a hexagon have? End with 'Final answer: <answer>'."}]}]}, "expected_answer": "6", "extraction_mode": "final_answer", "case_sensitive": false}`,
		reply:  []string{"A hexagon has six sides.\nFinal answer: 6.0"},
		reward: 1,
	},
	{
		row:    `{"responses_create_params": {"input": [{"role": "user", "type": "message", "content": [{"type": "input_text", "text": "Roughly how many metres is a mile? End with 'Answer: <answer>'."}]}]}, "expected_answer": "1609.34", "case_sensitive": false}`,
		reply:  []string{"About 1,600 m, more precisely", "Answer: 1609"},
		reward: SoftReward,
	},
	{
		row:    `{"responses_create_params": {"input": [{"role": "user", "type": "message", "content": [{"type": "input_text", "text": "Give the chemical formula of water on the last line."}]}]}, "expected_answer": "H2O", "extraction_mode": "last_line", "case_sensitive": true}`,
		reply:  []string{"Water is two hydrogens and an oxygen:\nh2o\n"},
		reward: 0,
	},
	{
		row:    `{"responses_create_params": {"input": [{"role": "user", "type": "message", "content": [{"type": "input_text", "text": "Which US state is Austin the capital of? Reply with the name only."}]}]}, "expected_answer": "Texas", "extraction_mode": "full_response", "case_sensitive": false}`,
		reply:  []string{"  TX  "},
		reward: 1,
	},
}

func TestExampleRows(t *testing.T) {
	for i, ex := range exampleRows {
		var task Task
		if err := json.Unmarshal([]byte(ex.row), &task); err != nil {
			t.Fatalf("row %d: %v", i, err)
		}
		res, err := Score(Defaults(), task, ResponseText(ex.reply))
		if err != nil {
			t.Fatalf("row %d: %v", i, err)
		}
		if res.Reward != ex.reward {
			t.Errorf("row %d: reward %v (extracted %s, rule %q), want %v", i, res.Reward, show(res.ExtractedAnswer), res.Rule, ex.reward)
		}
	}
}

func TestPyFloatRepr(t *testing.T) {
	tests := []struct {
		in   string
		want string // "" where Python's float() raises
	}{
		{"5", "5.0"}, {" -2.50 ", "-2.5"}, {"1e16", "1e+16"}, {"1e15", "1000000000000000.0"},
		{"0.0001", "0.0001"}, {"0.00001", "1e-05"}, {"-0", "-0.0"}, {"1_0.5", "10.5"},
		{"1__0", ""}, {"_1", ""}, {"1_", ""}, {"1e", ""}, {"0x10", ""}, {"1 2", ""},
		{"+inf", "inf"}, {"-Infinity", "-inf"}, {"nan", "nan"}, {"1e400", "inf"},
		{"١٢.٥", "12.5"}, {"\u00a01\u3000", "1.0"}, {"1\x1c", ""}, {"", ""}, {".", ""},
	}
	for _, tt := range tests {
		got := ""
		if f, ok := pyFloat(tt.in); ok {
			got = pyFloatRepr(f)
		}
		if got != tt.want {
			t.Errorf("repr(float(%q)) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func BenchmarkScore(b *testing.B) {
	text := ResponseText([]string{
		strings.Repeat("We add the numbers one by one and check each step carefully. ", 30),
		`Putting it together the total is \boxed{1,234.5 kg}.`,
		"Final answer: 1,234.5 kg",
	})
	tasks := []struct {
		name string
		task Task
	}{
		{"exact", Task{ExpectedAnswer: "1,234.5 kg"}},
		{"soft", Task{ExpectedAnswer: "1234"}},
		{"nomatch", Task{ExpectedAnswer: "twelve hundred"}},
	}
	for _, tc := range tasks {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Score(Defaults(), tc.task, text); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
