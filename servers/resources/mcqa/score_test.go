package mcqa

import (
	"encoding/json"
	"errors"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// genetics is a four-option question used throughout.
var genetics = OptionList{
	{{"A", "Karyotyping"}},
	{{"B", "Polymerase Chain Reaction"}},
	{{"C", "Southern blotting"}},
	{{"D", "Microarray analysis"}},
}

func strp(s string) *string { return &s }

type scoreCase struct {
	name string
	cfg  Config
	task Task
	text string
	// want is the extracted letter, "" for none.
	want string
	// reward is the expected reward.
	reward float64
}

func runScoreCases(t *testing.T, cases []scoreCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := Score(c.cfg, c.task, c.text)
			if err != nil {
				t.Fatalf("Score: %v", err)
			}
			got := ""
			if res.ExtractedAnswer != nil {
				got = *res.ExtractedAnswer
				if got == "" {
					t.Fatalf("ExtractedAnswer points to an empty string")
				}
			}
			if got != c.want || res.Reward != c.reward {
				t.Errorf("Score(%q) = (%q, %v), want (%q, %v)", c.text, got, res.Reward, c.want, c.reward)
			}
		})
	}
}

// task returns a task over genetics with expected answer B.
func task(mode string) Task {
	return Task{Options: genetics, ExpectedAnswer: strp("B"), GradingMode: mode}
}

func TestStrictSingleLetterBoxed(t *testing.T) {
	strict := task("")
	runScoreCases(t, []scoreCase{
		{"bare letter", Config{}, strict, `So the answer is \boxed{B}.`, "B", 1},
		{"wrong letter", Config{}, strict, `\boxed{C}`, "C", 0},
		{"letter not an option", Config{}, strict, `\boxed{E}`, "", 0},
		{"lowercase letter", Config{}, strict, `\boxed{b}`, "", 0},
		{"two letters", Config{}, strict, `\boxed{AB}`, "", 0},
		{"letter after a letter", Config{}, strict, `\boxed{xB}`, "", 0},
		{"letter before a letter", Config{}, strict, `\boxed{Bx}`, "", 0},
		{"letter inside a word", Config{}, strict, `\boxed{aBc}`, "", 0},
		{"letter with a word after a space", Config{}, strict, `\boxed{B PCR}`, "", 0},
		{"parenthesised", Config{}, strict, `\boxed{(B)}`, "B", 1},
		{"bracketed with spaces", Config{}, strict, `Final: \boxed{ [B] }`, "B", 1},
		{"digits around", Config{}, strict, `\boxed{2B.}`, "B", 1},
		{"label with colon", Config{}, strict, `\boxed{B: Polymerase Chain Reaction}`, "B", 1},
		{"label with parenthesis", Config{}, strict, `\boxed{B) Polymerase Chain Reaction}`, "B", 1},
		{"label with dot", Config{}, strict, `\boxed{B. Polymerase Chain Reaction}`, "B", 1},
		{"label with dash", Config{}, strict, `\boxed{B- Polymerase Chain Reaction}`, "B", 1},
		{"label with spaces before the delimiter", Config{}, strict, `\boxed{ B - PCR}`, "B", 1},
		{"lowercase label", Config{}, strict, `\boxed{b) PCR}`, "", 0},
		{"label with another delimiter", Config{}, strict, `\boxed{B; PCR}`, "", 0},
		{"option text only", Config{}, strict, `\boxed{Polymerase Chain Reaction}`, "", 0},
		{"text wrapper", Config{}, strict, `\boxed{\text{B}}`, "B", 1},
		{"text wrapper with spaces", Config{}, strict, `\boxed{ \text{ B } }`, "B", 1},
		{"nested text wrappers", Config{}, strict, `\boxed{\text{\text{B}}}`, "B", 1},
		{"text wrapper around a label", Config{}, strict, `\boxed{\text{B: Polymerase Chain Reaction}}`, "B", 1},
		{"other wrapper", Config{}, strict, `\boxed{\textbf{B}}`, "", 0},
		{"last box wins", Config{}, strict, `\boxed{A} no, wait: \boxed{B}`, "B", 1},
		{"last box wins even when unusable", Config{}, strict, `\boxed{B} or maybe \boxed{Z}`, "", 0},
		{"last box unclosed", Config{}, strict, `\boxed{B} and \boxed{C`, "", 0},
		{"no box", Config{}, strict, `The answer is B.`, "", 0},
		{"answer colon is not read", Config{}, strict, `Answer: B`, "", 0},
		{"empty box", Config{}, strict, `\boxed{}`, "", 0},
		{"empty answer", Config{}, strict, "", "", 0},
		{"blank answer", Config{}, strict, " \n\t\u00a0\x1c ", "", 0},
		{"expected answer is normalised", Config{},
			Task{Options: genetics, ExpectedAnswer: strp(" b\n")}, `\boxed{B}`, "B", 1},
		{"lowercase option key", Config{},
			Task{Options: OptionList{{{"a", "x"}}, {{"b", "y"}}}, ExpectedAnswer: strp("B")}, `\boxed{B}`, "B", 1},
		{"no expected answer", Config{}, Task{Options: genetics}, `\boxed{B}`, "B", 0},
		{"empty expected answer", Config{}, Task{Options: genetics, ExpectedAnswer: strp(" ")}, `\boxed{B}`, "B", 0},
		{"no options", Config{}, Task{ExpectedAnswer: strp("B")}, `\boxed{B}`, "", 0},
		{"multi-character keys are not options", Config{},
			Task{Options: OptionList{{{"B1", "x"}}, {{"A", "y"}}}, ExpectedAnswer: strp("B")}, `\boxed{B}`, "", 0},
		{"explicit default mode", Config{}, task(ModeStrictSingleLetterBoxed), `\boxed{B}`, "B", 1},
	})
}

func TestLenientBoxed(t *testing.T) {
	lenient := task(ModeLenientBoxed)
	pcr := Task{
		Options:        OptionList{{{"A", "PCR"}}, {{"B", "RT-PCR"}}, {{"C", "Sequencing"}}},
		ExpectedAnswer: strp("B"),
		GradingMode:    ModeLenientBoxed,
	}
	runScoreCases(t, []scoreCase{
		{"letter first", Config{}, lenient, `\boxed{B}`, "B", 1},
		{"label first", Config{}, lenient, `\boxed{D: anything}`, "D", 0},
		{"option text", Config{}, lenient, `\boxed{Polymerase Chain Reaction}`, "B", 1},
		{"option text, other case and spacing", Config{}, lenient, "\\boxed{ polymerase\n  CHAIN reaction }", "B", 1},
		{"option text inside a sentence", Config{}, lenient, `\boxed{I pick southern blotting here}`, "C", 0},
		{"option text in a text wrapper", Config{}, lenient, `\boxed{\text{Microarray analysis}}`, "D", 0},
		{"two options' texts", Config{}, lenient, `\boxed{Karyotyping and Microarray analysis}`, "", 0},
		{"part of an option's text", Config{}, lenient, `\boxed{Polymerase}`, "", 0},
		{"text only in an earlier box", Config{}, lenient, `\boxed{Karyotyping} \boxed{none}`, "", 0},
		{"text outside the box", Config{}, lenient, `Karyotyping`, "", 0},
		{"one option's text contains another's", Config{}, pcr, `\boxed{RT-PCR}`, "", 0},
		{"the shorter text alone", Config{}, pcr, `\boxed{pcr}`, "A", 0},
	})
}

func TestLenientAnswerColon(t *testing.T) {
	colon := task(ModeLenientAnswerColon)
	runScoreCases(t, []scoreCase{
		{"letter", Config{}, colon, "Reasoning.\nAnswer: B", "B", 1},
		{"lowercase letter and keyword", Config{}, colon, "answer : b", "B", 1},
		{"letter on the next line", Config{}, colon, "ANSWER:\n\nB", "B", 1},
		{"option text", Config{}, colon, "Answer: Polymerase Chain Reaction", "B", 1},
		{"option text, other case", Config{}, colon, "Answer:  polymerase   chain REACTION ", "B", 1},
		{"text wrapper", Config{}, colon, `Answer: \text{B}`, "B", 1},
		{"first answer wins", Config{}, colon, "Answer: C\nAnswer: B", "C", 0},
		{"rest of the line only", Config{}, colon, "Answer: Karyotyping\nnot B", "A", 0},
		{"letter not an option", Config{}, colon, "Answer: E", "", 0},
		{"letter with explanation", Config{}, colon, "Answer: B because PCR amplifies", "", 0},
		{"no answer line", Config{}, colon, `\boxed{B}`, "", 0},
		{"selected by the configuration", Config{GradingMode: ModeLenientAnswerColon}, task(""), "Answer: B", "B", 1},
		{"configuration overrides the task", Config{GradingMode: ModeStrictSingleLetterBoxed}, colon, "Answer: B", "", 0},
	})
}

func TestLenientAnswerColonMarkdown(t *testing.T) {
	md := Config{GradingMode: ModeLenientAnswerColonMD}
	base := task("")
	runScoreCases(t, []scoreCase{
		{"plain", md, base, "Answer: B", "B", 1},
		{"bold keyword and colon", md, base, "**Answer:** B", "B", 1},
		{"bold keyword", md, base, "**Answer**: B", "B", 1},
		{"underscores", md, base, "_Answer_: **B**", "B", 1},
		{"lowercase single letter", md, base, "Answer: b.", "B", 1},
		{"last payload wins", md, base, "Answer: A\nOn reflection...\nAnswer: B", "B", 1},
		{"leading letter with explanation", md, base, "Answer: B because it amplifies DNA", "B", 1},
		{"leading letter with parenthesis", md, base, "Answer: B) Polymerase Chain Reaction", "B", 1},
		{"last standalone capital", md, base, "Answer: the best choice is B", "B", 1},
		{"full-width letter", md, base, "Answer: Ｂ", "B", 1},
		{"Arabic letter", md, base, "Answer: ب", "B", 1},
		{"two options with or", md, base, "Answer: A or B", "", 0},
		{"two options with a comma", md, base, "Answer: A, C", "", 0},
		{"two options with a slash", md, base, "Answer: A/C", "", 0},
		{"same option twice", md, base, "Answer: B or B", "B", 1},
		{"ambiguous last payload falls back to an earlier one", md, base, "Answer: B\nAnswer: A and C", "B", 1},
		{"letter not an option", md, base, "Answer: E", "", 0},
		{"word only", md, base, "Answer: Karyotyping", "", 0},
		{"no payload", md, base, `\boxed{B}`, "", 0},
		{"full-width colon after NFKC", md, base, "Answer： B", "B", 1},
		{"full-width keyword after NFKC", md, base, "Ａｎｓｗｅｒ: B", "B", 1},
		{"ligature in the payload", md, base, "Answer: ﬁne, B", "B", 1},
	})
	withPrefix := func(prefix any) Task {
		tk := task("")
		tk.TemplateMetadata = map[string]any{"answer_prefix": prefix}
		return tk
	}
	runScoreCases(t, []scoreCase{
		{"prefix payload", md, withPrefix("Réponse :"), "Réponse : B", "B", 1},
		{"prefix in any case", md, withPrefix("Réponse :"), "RÉPONSE :   b", "B", 1},
		{"prefix with regex characters", md, withPrefix("(final)*"), "(FINAL)* C\nmore", "C", 0},
		{"prefix payload runs to the newline", md, withPrefix("Choice"), "Choice A\nB", "A", 0},
		{"later payload wins", md, withPrefix("Choice:"), "Answer: A\nChoice: B", "B", 1},
		{"Answer payload before a prefix payload at the same place", md, withPrefix("Answer:"), "Answer: B",
			"B", 1},
		{"prefix normalised", md, withPrefix("Ｃｈｏｉｃｅ"), "Choice D", "D", 0},
		{"boxed fallback with a prefix", md, withPrefix("Choice:"), `nothing here \boxed{B}`, "B", 1},
		{"no boxed fallback without a prefix", md, withPrefix(""), `nothing here \boxed{B}`, "", 0},
		// Upstream raises on a prefix that is not a string; it is ignored
		// here.
		{"prefix not a string", md, withPrefix(5.0), `Answer: B`, "B", 1},
		{"prefix not a string, no boxed fallback", md, withPrefix(true), `\boxed{B}`, "", 0},
	})
}

func TestOutputRegex(t *testing.T) {
	withRegex := func(spec any) Task {
		tk := task("")
		tk.TemplateMetadata = map[string]any{"template_id": "t1", "output_regex": spec}
		return tk
	}
	runScoreCases(t, []scoreCase{
		{"group, case-insensitive", Config{}, withRegex(`ANSWER IS\s*([A-Za-z])`), "so the answer is b", "B", 1},
		{"last match wins", Config{}, withRegex(`Final Choice:\s*([A-Z])`),
			"Final Choice: A\nHmm.\nFinal Choice: B", "B", 1},
		{"letter not an option is kept", Config{}, withRegex(`Final Choice:\s*([A-Z])`), "Final Choice: Z", "Z", 0},
		{"option text", Config{}, withRegex(`Option Selected:\s*(.+)`),
			"Option Selected:  polymerase chain reaction ", "B", 1},
		{"lookbehind, whole match", Config{}, withRegex(`(?<=Answer: )[A-D]`), "Answer: B", "B", 1},
		{"negative lookahead, with backtracking", Config{}, withRegex(`Answer\s*:\s*(?!Answer)\s*([A-Za-z])`),
			"Answer: Answer: B", "A", 0},
		{"negative lookahead", Config{}, withRegex(`Answer\s*:\s*(?!Answer)([A-Za-z])`),
			"Answer: Answer: B", "B", 1},
		{"Python named group", Config{}, withRegex(`(?P<choice>[A-D])\)\s*$`), "I'd say B)", "B", 1},
		{"Python backreference by name", Config{}, withRegex(`(?P<c>[A-D])(?P=c)`), "BB", "B", 1},
		{"precedence over the grading mode", Config{}, withRegex(`pick\s+([A-D])`), `pick C \boxed{B}`, "C", 0},
		{"no match falls back to the grading mode", Config{}, withRegex(`Final Choice:\s*([A-Z])`), `\boxed{B}`, "B", 1},
		{"invalid pattern falls back", Config{}, withRegex(`(unclosed`), `\boxed{B}`, "B", 1},
		{"variable-width lookbehind is invalid in Python", Config{}, withRegex(`(?<=Answer:\s*)[A-D]`), "Answer: B", "", 0},
		{"list, first useful pattern", Config{}, withRegex([]any{`nomatch(\w)`, `[`, `Answer:\s*(\w)`}), "Answer: B", "B", 1},
		{"empty list", Config{}, withRegex([]any{}), `\boxed{B}`, "B", 1},
		{"pattern without a group", Config{}, withRegex(`\bB\b`), "it is B", "B", 1},
		{"two groups without a match", Config{}, withRegex(`(x)(y)`), `\boxed{B}`, "B", 1},
		{"captured text neither letter nor option", Config{}, withRegex(`Answer:\s*(.*)`), "Answer: no idea", "", 0},
		{"no output_regex key", Config{}, Task{Options: genetics, ExpectedAnswer: strp("B"),
			TemplateMetadata: map[string]any{"template_id": "t1"}}, `\boxed{B}`, "B", 1},
		{"empty answer", Config{}, withRegex(`(.*)`), "   ", "", 0},
		{"named character", Config{}, withRegex(`\N{latin capital letter b}`), "B", "B", 1},
		{"undefined character name is invalid", Config{}, withRegex(`\N{NO SUCH CHARACTER}`), `\boxed{B}`, "B", 1},
		// Upstream raises on these (500); they are scored, the pattern
		// taken for one that yields nothing.
		{"null output_regex", Config{}, withRegex(nil), `\boxed{B}`, "B", 1},
		{"numeric output_regex", Config{}, withRegex(3.0), `\boxed{B}`, "B", 1},
		{"non-string list entry", Config{}, withRegex([]any{`nomatch`, 3.0, `(B)`}), "B", "B", 1},
		{"two groups that match", Config{}, withRegex(`(B)(\))`), `B) \boxed{A}`, "A", 0},
		{"repetition count too large for Python", Config{}, withRegex(`a{4294967295}`), `\boxed{B}`, "B", 1},
		{"ASCII and Unicode flags", Config{}, withRegex(`(?a)(?u)x`), `\boxed{B}`, "B", 1},
	})
}

func TestScoreErrors(t *testing.T) {
	withRegex := func(spec any) Task {
		tk := task("")
		tk.TemplateMetadata = map[string]any{"output_regex": spec}
		return tk
	}
	cases := []struct {
		name string
		cfg  Config
		task Task
		text string
		want error
	}{
		{"unknown config mode", Config{GradingMode: "fuzzy"}, task(""), "x", ErrInvalidGradingMode},
		{"unknown task mode", Config{}, task("fuzzy"), "x", ErrInvalidGradingMode},
		{"markdown mode in a task", Config{}, task(ModeLenientAnswerColonMD), "Answer: B", ErrInvalidGradingMode},
		{"markdown mode in a task, empty answer", Config{}, task(ModeLenientAnswerColonMD), "", ErrInvalidGradingMode},
		{"repetition count too large for the port", Config{}, withRegex(`a{3000000000}`), "b", ErrUnsupportedPattern},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Score(c.cfg, c.task, c.text)
			if !errors.Is(err, c.want) {
				t.Fatalf("Score error = %v, want %v", err, c.want)
			}
		})
	}

	// The message (which a 500 answer carries) names this environment.
	_, err := Score(Config{}, withRegex(`a{3000000000}`), "b")
	if want := "mcqa: Python regular expression not supported by this port: "; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Score error = %v, want it to start %q", err, want)
	}

	// Upstream only evaluates what it reaches.
	ok := []struct {
		name string
		spec any
		text string
	}{
		{"non-string entry after a hit", []any{`Answer:\s*(\w)`, 3.0}, "Answer: B"},
		{"bad output_regex and an empty answer", nil, " "},
	}
	for _, c := range ok {
		t.Run(c.name, func(t *testing.T) {
			if _, err := Score(Config{}, withRegex(c.spec), c.text); err != nil {
				t.Fatalf("Score: %v", err)
			}
		})
	}
}

func TestLookbehindNeedsRegexp2(t *testing.T) {
	// Go's regexp cannot even compile the pattern this package runs.
	if _, err := regexp.Compile(`(?<=Answer: )[A-D]`); err == nil {
		t.Fatal("Go's regexp accepted a lookbehind")
	}
}

func TestResultFields(t *testing.T) {
	res, err := Score(Config{}, task(""), `\boxed{B}`)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"expected_answer": "B", "extracted_answer": "B"}
	if got := res.Fields(); !reflect.DeepEqual(got, want) {
		t.Errorf("Fields() = %#v, want %#v", got, want)
	}
	if res.Reward != 1 || res.GradingMode != ModeStrictSingleLetterBoxed {
		t.Errorf("Score = %+v", res)
	}

	res, err = Score(Config{}, Task{Options: genetics}, `nothing`)
	if err != nil {
		t.Fatal(err)
	}
	want = map[string]any{"expected_answer": "", "extracted_answer": nil}
	got := res.Fields()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Fields() = %#v, want %#v", got, want)
	}
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"expected_answer":"","extracted_answer":null}` {
		t.Errorf("Fields() as JSON = %s", b)
	}
}

func TestOptionOrder(t *testing.T) {
	// Within one object the JSON order decides between equal texts, and a
	// repeated key keeps its first place with its last value.
	for raw, want := range map[string]string{
		`[{"B": "Lyon", "A": "Lyon"}]`:              "B",
		`[{"A": "Lyon", "B": "Lyon"}]`:              "A",
		`[{"B": "Lyon", "A": "Lyon", "B": "Nice"}]`: "A",
		`[{"B": "Lyon", "A": "Lyon", "B": null}]`:   "A",
	} {
		var opts OptionList
		if err := json.Unmarshal([]byte(raw), &opts); err != nil {
			t.Fatal(err)
		}
		res, err := Score(Config{}, Task{Options: opts, GradingMode: ModeLenientAnswerColon}, "Answer: lyon")
		if err != nil || res.ExtractedAnswer == nil || *res.ExtractedAnswer != want {
			t.Errorf("%s: extracted %v (%v), want %s", raw, res.ExtractedAnswer, err, want)
		}
	}
	var opts OptionList
	raw := `[{"B":"Lyon","A":"x"},{},{"C":"\u00e9"}]`
	if err := json.Unmarshal([]byte(raw), &opts); err != nil {
		t.Fatal(err)
	}
	if b, err := json.Marshal(opts); err != nil || string(b) != `[{"B":"Lyon","A":"x"},{},{"C":"é"}]` {
		t.Errorf("round trip: %s %v", b, err)
	}
	// An output_regex object's keys are tried in JSON order.
	tk := Task{Options: genetics, TemplateMetadata: map[string]any{"output_regex": map[string]any{`(B)`: 1.0, `(A)`: 2.0}}}
	for raw, want := range map[string]string{
		`{"output_regex": {"(B)": 1, "(A)": 2}}`: "B",
		`{"output_regex": {"(A)": 1, "(B)": 2}}`: "A",
	} {
		tk.SetTemplateJSON([]byte(raw))
		res, err := Score(Config{}, tk, "A B")
		if err != nil || res.ExtractedAnswer == nil || *res.ExtractedAnswer != want {
			t.Errorf("%s: extracted %v (%v), want %s", raw, res.ExtractedAnswer, err, want)
		}
	}
}

func TestTaskJSON(t *testing.T) {
	row := `{
		"responses_create_params": {"input": [{"role": "user", "content": "..."}]},
		"uuid": "q-1",
		"options": [{"A": "Karyotyping", "B": null}, {"A": null, "B": "PCR"}, {"C": null}],
		"expected_answer": "B",
		"template_metadata": {"template_id": "t7"}
	}`
	tk := DefaultTask()
	if err := json.Unmarshal([]byte(row), &tk); err != nil {
		t.Fatal(err)
	}
	if tk.GradingMode != DefaultGradingMode || *tk.UUID != "q-1" || *tk.ExpectedAnswer != "B" {
		t.Errorf("decoded %+v", tk)
	}
	wantOpts := OptionList{{{"A", "Karyotyping"}}, {{"B", "PCR"}}, {}}
	if !reflect.DeepEqual(tk.Options, wantOpts) {
		t.Errorf("options = %#v, want %#v", tk.Options, wantOpts)
	}
	// C has only a null text, so it is not an option.
	for text, want := range map[string]string{`\boxed{B}`: "B", `\boxed{C}`: ""} {
		res, err := Score(Config{}, tk, text)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if res.ExtractedAnswer != nil {
			got = *res.ExtractedAnswer
		}
		if got != want {
			t.Errorf("Score(%q) extracted %q, want %q", text, got, want)
		}
	}

	var empty Task
	if err := json.Unmarshal([]byte(`{"options": null, "expected_answer": null}`), &empty); err != nil {
		t.Fatal(err)
	}
	if empty.Options != nil || empty.ExpectedAnswer != nil {
		t.Errorf("decoded %+v", empty)
	}
	if err := json.Unmarshal([]byte(`{"options": [null]}`), &empty); err == nil {
		t.Error("a null options entry was accepted")
	}
	if err := json.Unmarshal([]byte(`{"options": [{"A": 1}]}`), &empty); err == nil {
		t.Error("a numeric option text was accepted")
	}
}

func TestConfig(t *testing.T) {
	if d := Defaults(); d != (Config{}) || d.Validate() != nil {
		t.Errorf("Defaults() = %+v", d)
	}
	for _, m := range []string{ModeStrictSingleLetterBoxed, ModeLenientBoxed, ModeLenientAnswerColon, ModeLenientAnswerColonMD} {
		if err := (Config{GradingMode: m}).Validate(); err != nil {
			t.Errorf("Validate(%q) = %v", m, err)
		}
	}
	if err := (Config{GradingMode: "boxed"}).Validate(); !errors.Is(err, ErrInvalidGradingMode) {
		t.Errorf("Validate(boxed) = %v", err)
	}
	var c Config
	if err := json.Unmarshal([]byte(`{"grading_mode": null}`), &c); err != nil || c != (Config{}) {
		t.Errorf("null grading_mode decoded to %+v, %v", c, err)
	}
	if ReverifyMode != "stateless" {
		t.Errorf("ReverifyMode = %q", ReverifyMode)
	}
}

// TestPythonStringRules covers the places where Python's string methods
// and Go's disagree.
func TestPythonStringRules(t *testing.T) {
	cases := []struct {
		name string
		task Task
		text string
		want string
	}{
		{"separator characters are whitespace", Task{Options: genetics, GradingMode: ModeLenientAnswerColon},
			"Answer:\x1cB\x1f", "B"},
		{"sharp s upper-cases to SS", Task{Options: OptionList{{{"ß", "x"}}}, ExpectedAnswer: strp("ss"),
			GradingMode: ModeLenientAnswerColon}, "Answer: ß", "SS"},
		{"final sigma", Task{Options: OptionList{{{"A", "ΟΔΟΣ"}}, {{"B", "ΟΔΟΙ"}}}, GradingMode: ModeLenientAnswerColon},
			"Answer: \u03bf\u03b4\u03bf\u03c2", "A"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := Score(Config{}, c.task, c.text)
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if res.ExtractedAnswer != nil {
				got = *res.ExtractedAnswer
			}
			if got != c.want {
				t.Errorf("extracted %q, want %q", got, c.want)
			}
		})
	}
	if got := pyUpper("straße ﬁ"); got != "STRASSE FI" {
		t.Errorf("pyUpper = %q", got)
	}
	if got := pySplit("a\x1cb\u3000c\u200bd"); !reflect.DeepEqual(got, []string{"a", "b", "c\u200bd"}) {
		t.Errorf("pySplit = %q", got)
	}
}

func TestScoreConcurrent(t *testing.T) {
	tk := task("")
	tk.TemplateMetadata = map[string]any{"output_regex": `(?<=Choice: )(\w)`}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 50 {
				text := "Choice: B"
				if (i+j)%2 == 0 {
					text = `\boxed{B}`
				}
				res, err := Score(Config{}, tk, text)
				if err != nil || res.ExtractedAnswer == nil || *res.ExtractedAnswer != "B" {
					t.Errorf("Score(%q) = %+v, %v", text, res, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func BenchmarkScore(b *testing.B) {
	reasoning := strings.Repeat("Option A is wrong because karyotyping looks at whole chromosomes. ", 30)
	benches := []struct {
		name string
		cfg  Config
		task Task
		text string
	}{
		{"strict", Config{}, task(""), reasoning + `\boxed{\text{B}}`},
		{"lenient_boxed", Config{}, task(ModeLenientBoxed), reasoning + `\boxed{Polymerase Chain Reaction}`},
		{"answer_colon_md", Config{GradingMode: ModeLenientAnswerColonMD}, task(""), reasoning + "\n**Answer:** B"},
		{"output_regex", Config{}, Task{Options: genetics, ExpectedAnswer: strp("B"),
			TemplateMetadata: map[string]any{"output_regex": `Final Choice:\s*([A-Za-z])`}}, reasoning + "\nFinal Choice: B"},
	}
	for _, bc := range benches {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				res, err := Score(bc.cfg, bc.task, bc.text)
				if err != nil || res.Reward != 1 {
					b.Fatalf("Score = %+v, %v", res, err)
				}
			}
		})
	}
}
