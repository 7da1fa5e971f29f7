package equivalence

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
)

// scoreCases: the rewards of the three rules for one answer, given as
// its output_text parts, against one expected answer. The seq_match and
// weighted_seq_match values were computed with CPython 3.11.7 (identical
// with 3.13.0) by applying the upstream formulas to the same strings.
var scoreCases = []struct {
	name     string
	texts    []string
	expected string
	exact    float64
	seq      float64
	weighted float64
}{
	{"no output", []string{}, "6", 0.0, 0.0, 0.0},
	{"no output empty expected", []string{}, "", 1.0, 1.0, 1.0},
	{"bare number", []string{"6"}, "6", 1.0, 1.0, 1.0},
	{"number in sentence", []string{"The answer is 6."}, "6", 0.0, 0.11764705882352941, 0.09999999999999999},
	{"padded", []string{"  6\n"}, "6", 1.0, 1.0, 1.0},
	{"split parts", []string{"Par", "is"}, "paris", 1.0, 1.0, 1.0},
	{"parts not spaced", []string{"hello", "world"}, "hello world", 0.0, 0.9523809523809523, 0.9445238095238094},
	{"whitespace runs", []string{"Hello,\t\tWORLD\n\n  again"}, "hello, world again", 1.0, 1.0, 1.0},
	{"prefix right tail drifts", []string{"Paris is the capital of Germany"}, "Paris is the capital of France", 0.0, 0.8852459016393442, 0.9024590163934426},
	{"prefix wrong tail right", []string{"Lyon is the capital of France"}, "Paris is the capital of France", 0.0, 0.847457627118644, 0.7953389830508474},
	{"short answer long expected", []string{"NfAf"}, "NfAfO1iLD0CnDeN0BkdPp6wo then the toast", 0.0, 0.18604651162790697, 0.24385382059800664},
	{"long answer short expected", []string{rep("x", 20), "42"}, "42", 0.0, 0.16666666666666666, 0.14166666666666666},
	{"unicode case", []string{"ΟΔΟΣ ΣΟΦΙΑΣ"}, "οδος σοφιας", 1.0, 1.0, 1.0},
	{"dotted capital i", []string{"İstanbul"}, "i\u0307stanbul", 1.0, 1.0, 1.0},
	{"long drift", []string{rnd(30, 250, alphaWide)}, cat(rnd(30, 200, alphaWide), rnd(31, 50, alphaWide)), 0.0, 0.808, 0.8368000000000001},
	{"long drift unicode", []string{rnd(32, 300, alphaWideUnicode)}, cat(rnd(32, 150, alphaWideUnicode), " ", rnd(33, 150, alphaWideUnicode)), 0.0, 0.5091514143094842, 0.5827787021630615},
}

func TestScoreMatchesPython(t *testing.T) {
	for _, c := range scoreCases {
		t.Run(c.name, func(t *testing.T) {
			for _, r := range []struct {
				rule string
				want float64
			}{{RuleExact, c.exact}, {RuleSeqMatch, c.seq}, {RuleWeightedSeqMatch, c.weighted}} {
				res, err := Score(Config{GradingRule: r.rule}, Task{ExpectedAnswer: c.expected}, c.texts)
				if err != nil {
					t.Fatalf("%s: %v", r.rule, err)
				}
				if math.Float64bits(res.Reward) != math.Float64bits(r.want) {
					t.Errorf("%s: reward %v, want %v", r.rule, res.Reward, r.want)
				}
				if res.Rule != r.rule {
					t.Errorf("%s: Rule = %q", r.rule, res.Rule)
				}
			}
		})
	}
}

func TestScoreExact(t *testing.T) {
	cfg := Defaults()
	for _, c := range []struct {
		texts    []string
		expected string
		want     float64
	}{
		{[]string{"Paris"}, "paris", 1},
		{[]string{"  PARIS  "}, "paris", 1},
		{[]string{"Paris."}, "paris", 0},
		{[]string{"New\n\nYork"}, "new york", 1},
		{[]string{"New", " York"}, "new york", 1},
		{[]string{"New", "York"}, "new york", 0}, // parts are joined with nothing
		{[]string{"6"}, " 6 ", 1},
		{[]string{"a\u200bb"}, "a b", 0}, // a zero-width space is not whitespace
		{[]string{"\x1c6\x1f"}, "6", 1},  // but the ASCII separators are
		{nil, "", 1},
		{nil, "6", 0},
		{[]string{"", ""}, "", 1},
	} {
		res, err := Score(cfg, Task{ExpectedAnswer: c.expected}, c.texts)
		if err != nil {
			t.Fatal(err)
		}
		if res.Reward != c.want {
			t.Errorf("exact %q vs %q = %v, want %v", c.texts, c.expected, res.Reward, c.want)
		}
	}
}

func TestScoreSeqMatchIsNormalisedRatio(t *testing.T) {
	answer, expected := "  The Capital\tis PARIS ", "the capital is paris, france"
	res, err := ScoreText(Config{GradingRule: RuleSeqMatch}, Task{ExpectedAnswer: expected}, answer)
	if err != nil {
		t.Fatal(err)
	}
	if want := Ratio(Normalize(answer), Normalize(expected)); res.Reward != want {
		t.Errorf("seq_match = %v, want Ratio of normalised strings %v", res.Reward, want)
	}
}

func TestScoreWeightedFormula(t *testing.T) {
	// The prefix bonus compares the first ten code points of the
	// expected answer with as many code points of the answer.
	cases := []struct{ answer, expected string }{
		{"abcdefghijXXXX", "abcdefghijklmn"},
		{"XXXXXXXXXXklmn", "abcdefghijklmn"},
		{"ab", "abcdefghijklmn"},
		{"abcdefghijklmn", "ab"},
		{"", "abc"},
		{"😀😃😄🙂東京都大阪αβγ!", "😀😃😄🙂東京都大阪αβγ?"},
	}
	for _, c := range cases {
		got, want := Normalize(c.answer), Normalize(c.expected)
		g, w := []rune(got), []rune(want)
		p := w[:min(10, len(w))]
		h := g[:min(len(p), len(g))]
		full, pre := RatioRunes(g, w), RatioRunes(h, p)
		wantReward := max(0, min(1, float64(0.85*full)+float64(0.15*pre)))
		res, err := ScoreText(Config{GradingRule: RuleWeightedSeqMatch}, Task{ExpectedAnswer: c.expected}, c.answer)
		if err != nil {
			t.Fatal(err)
		}
		if res.Reward != wantReward {
			t.Errorf("weighted %q vs %q = %v, want %v", c.answer, c.expected, res.Reward, wantReward)
		}
	}
	// A perfect answer scores exactly 1, not 0.85+0.15 rounded above it.
	res, _ := ScoreText(Config{GradingRule: RuleWeightedSeqMatch}, Task{ExpectedAnswer: "same"}, "SAME")
	if res.Reward != 1 {
		t.Errorf("identical weighted = %v, want 1", res.Reward)
	}
}

func TestScoreInvalidConfig(t *testing.T) {
	_, err := Score(Config{GradingRule: "fuzzy"}, Task{ExpectedAnswer: "x"}, []string{"x"})
	if err == nil {
		t.Fatal("Score with an unknown rule did not fail")
	}
}

func TestConfig(t *testing.T) {
	if d := Defaults(); d.GradingRule != RuleExact {
		t.Errorf("Defaults().GradingRule = %q, want %q", d.GradingRule, RuleExact)
	}
	for _, rule := range append(Rules(), "") {
		if err := (Config{GradingRule: rule}).Validate(); err != nil {
			t.Errorf("Validate(%q) = %v", rule, err)
		}
	}
	// The zero value scores as the default.
	res, err := Score(Config{}, Task{ExpectedAnswer: "a"}, []string{"A"})
	if err != nil || res.Reward != 1 || res.Rule != RuleExact {
		t.Errorf("zero Config: %+v, %v", res, err)
	}
	for _, bad := range []string{"EXACT", "Exact", " exact", "seq-match", "levenshtein"} {
		err := (Config{GradingRule: bad}).Validate()
		if err == nil {
			t.Errorf("Validate(%q) accepted it", bad)
			continue
		}
		for _, valid := range Rules() {
			if !strings.Contains(err.Error(), valid) {
				t.Errorf("Validate(%q) error %q does not list %q", bad, err, valid)
			}
		}
	}
	if got := Rules(); len(got) != 3 || got[0] != RuleExact {
		t.Errorf("Rules() = %q", got)
	}
}

func TestConfigJSONKey(t *testing.T) {
	var c Config
	if err := json.Unmarshal([]byte(`{"grading_rule":"weighted_seq_match"}`), &c); err != nil {
		t.Fatal(err)
	}
	if c.GradingRule != RuleWeightedSeqMatch {
		t.Errorf("decoded %+v", c)
	}
}

func TestResultFields(t *testing.T) {
	f := Result{Reward: 0.25, Rule: RuleSeqMatch}.Fields()
	if len(f) != 1 || f["equivalence_score"] != 0.25 {
		t.Errorf("Fields() = %v, want only equivalence_score 0.25", f)
	}
}

func TestDecodeTask(t *testing.T) {
	good, err := DecodeTask([]byte(`{"expected_answer": "Ab\u00e9 ", "question": "q", "hashid": "h"}`))
	if err != nil || good.ExpectedAnswer != "Abé " {
		t.Errorf("DecodeTask = %+v, %v", good, err)
	}
	empty, err := DecodeTask([]byte(`{"expected_answer": ""}`))
	if err != nil || empty.ExpectedAnswer != "" {
		t.Errorf("empty string: %+v, %v", empty, err)
	}
	for _, row := range []string{
		`{}`, `{"expected_answer": null}`, `{"expected_answer": 6}`,
		`{"expected_answer": true}`, `{"expected_answer": ["6"]}`, `{"expected_answer": {"a": 1}}`,
	} {
		if _, err := DecodeTask([]byte(row)); !errors.Is(err, ErrExpectedAnswer) {
			t.Errorf("DecodeTask(%s) error = %v, want ErrExpectedAnswer", row, err)
		}
	}
	for _, row := range []string{``, `null`, `[]`, `"x"`, `{"expected_answer": "x"`} {
		if _, err := DecodeTask([]byte(row)); err == nil {
			t.Errorf("DecodeTask(%q) accepted it", row)
		}
	}
}

func TestJoinTexts(t *testing.T) {
	if got := JoinTexts([]string{"a", "", "b c", "\n"}); got != "ab c\n" {
		t.Errorf("JoinTexts = %q", got)
	}
	if got := JoinTexts(nil); got != "" {
		t.Errorf("JoinTexts(nil) = %q", got)
	}
}

// normalizeCases: want is re.sub(r"\s+", " ", s.strip().lower()) as
// computed by CPython 3.11.7 (identical with 3.13.0).
var normalizeCases = []struct{ in, want string }{
	{"", ""},
	{"  ", ""},
	{"ABC", "abc"},
	{"  Hello   World \n", "hello world"},
	{"a\tb\nc\rd\ve\ff", "a b c d e f"},
	{"\u001cx\u001dy\u001ez\u001f", "x y z"},
	{"a\u00a0b\u2003c\u3000d\u2028e\u0085f", "a b c d e f"},
	{"a\u200bb", "a\u200bb"},
	{"\ufeffA", "\ufeffa"},
	{"ΟΔΟΣ", "οδος"},
	{"Σ", "σ"},
	{"ΑΣ.", "ας."},
	{"ΑΣ\u0301Β", "ασ\u0301β"},
	{"ΑΣ'", "ας'"},
	{"1Σ", "1σ"},
	{"İ", "i\u0307"},
	{"ǅ", "ǆ"},
	{"ÀÉÎ", "àéî"},
	{"ＡＢＣ", "ａｂｃ"},
	{"Straße", "straße"},
	{"ẞ", "ß"},
}

func TestNormalizeMatchesPython(t *testing.T) {
	for _, c := range normalizeCases {
		if got := Normalize(c.in); got != c.want {
			t.Errorf("Normalize(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestNormalizeFinalSigma(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"ΟΔΟΣ ΣΟΦΙΑΣ", "οδος σοφιας"}, // final before a space and at the end, not at a start
		{"ΣΑΣ", "σας"},
		{"ΑΣΑ", "ασα"},             // inside a word
		{"Α\u0301Σ", "α\u0301ς"},   // a mark before it is skipped
		{"ΑΣ\u00adΒ", "ασ\u00adβ"}, // a soft hyphen (format) after it is skipped
		{"ΑΣ:Β", "ασ:β"},           // mid-word colon is case-ignorable
		{"ΑΣ-Β", "ας-β"},           // a hyphen is not
		{"ʰΣ", "ʰσ"},               // ʰ is case-ignorable, so nothing cased precedes
		{"1Σ", "1σ"},               // a digit is not cased
		{"Σ\u0301", "σ\u0301"},     // alone
		{"ǅΣ", "ǆς"},               // titlecase counts as cased
		{"ⅯΣ", "ⅿς"},               // Other_Uppercase counts as cased
		{"AΣ\u2003B", "aς b"},      // Unicode whitespace ends the word
		{"  ΑΣ  ", "ας"},
	} {
		if got := Normalize(c.in); got != c.want {
			t.Errorf("Normalize(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestNormalizeIdempotent(t *testing.T) {
	for _, c := range normalizeCases {
		if once := Normalize(c.in); Normalize(once) != once {
			t.Errorf("Normalize not idempotent on %q", c.in)
		}
	}
}

func TestScoreConcurrent(t *testing.T) {
	// Scoring shares no state: run the tables from many goroutines.
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, c := range scoreCases {
				res, err := Score(Config{GradingRule: RuleWeightedSeqMatch}, Task{ExpectedAnswer: c.expected}, c.texts)
				if err != nil || res.Reward != c.weighted {
					t.Errorf("%s: %v, %v", c.name, res.Reward, err)
				}
			}
		}()
	}
	wg.Wait()
}
