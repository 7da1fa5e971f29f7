package pyre

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/dlclark/regexp2"
)

// findall is Python's re.findall on a compiled pattern, with the groups
// of a several-group match joined by "|".
func findall(t *testing.T, re *Regexp, text string) []string {
	t.Helper()
	out := []string{}
	err := re.FindAll([]rune(text), func(m *regexp2.Match) bool {
		switch re.groups {
		case 0:
			out = append(out, m.String())
		case 1:
			out = append(out, m.GroupByNumber(1).String())
		default:
			var parts []string
			for i := 1; i <= re.groups; i++ {
				parts = append(parts, m.GroupByNumber(i).String())
			}
			out = append(out, strings.Join(parts, "|"))
		}
		return true
	})
	if err != nil {
		t.Fatalf("findAll: %v", err)
	}
	return out
}

func TestPythonRegexMatching(t *testing.T) {
	cases := []struct {
		pattern string
		flags   Flag
		text    string
		want    []string
	}{
		// Empty matches: after one, the next match may start at the same
		// place if it is not empty.
		{`a*|b`, 0, "b", []string{"", "b", ""}},
		{`x*`, 0, "ab", []string{"", "", ""}},
		{``, 0, "ab", []string{"", "", ""}},
		// Group numbering and unmatched groups.
		{`(a)|b`, 0, "ab", []string{"a", ""}},
		{`(?P<x>a)|(b)`, 0, "ab", []string{"a|", "|b"}},
		{`(\w)(\w)?`, 0, "abc", []string{"a|b", "c|"}},
		{`(?P<x>[ab])(?P=x)`, 0, "aabbab", []string{"a", "b"}},
		{`(a)(?(1)b|c)`, 0, "ab ac", []string{"a"}},
		{`(a)?(?(1)b|c)`, 0, "ab c", []string{"a", ""}},
		// Lookaround, including Python's fixed-width lookbehind.
		{`(?<=Answer: )[A-D]`, 0, "Answer: C, not Answer: x", []string{"C"}},
		{`(?<!not )\b([A-D])\b`, 0, "not A but B", []string{"B"}},
		{`(?<=ab|cd)e`, 0, "abe cde xe", []string{"e", "e"}},
		{`Answer\s*:\s*(?!Answer)([A-Za-z])`, IgnoreCase, "answer: Answer: b", []string{"b"}},
		// Anchors.
		{`a$`, 0, "a\n", []string{"a"}},
		{`a\Z`, 0, "a\n", []string{}},
		{`^a`, 0, "a\na", []string{"a"}},
		{`(?m)^a$`, 0, "a\na\n", []string{"a", "a"}},
		{`.`, 0, "a\n", []string{"a"}},
		{`(?s).`, 0, "a\n", []string{"a", "\n"}},
		{`\B`, 0, "", []string{}},
		// Python's character classes.
		{`\s+`, 0, "a\x1cb\u3000c\u200bd", []string{"\x1c", "\u3000"}},
		{`\w+`, 0, "ab_ c-d é ² ٣ \u0301x", []string{"ab_", "c", "d", "é", "²", "٣", "x"}},
		{`[^\W\d]+`, 0, "a1b_²", []string{"a", "b_²"}},
		{`[a\W]+`, 0, "xa-b", []string{"a-"}},
		{`(?a)\w+`, 0, "héllo", []string{"h", "llo"}},
		{`\d`, 0, "1٣x", []string{"1", "٣"}},
		// IGNORECASE, with Python's extra equivalences.
		{`s`, IgnoreCase, "sSſ", []string{"s", "S", "ſ"}},
		{`σ`, IgnoreCase, "σςΣ", []string{"σ", "ς", "Σ"}},
		{`[a-z]+`, IgnoreCase, "Kİı", []string{"Kİı"}},
		{`(?-i:a)b`, IgnoreCase, "aB AB", []string{"aB"}},
		{`(?i:a)b`, 0, "Ab AB", []string{"Ab"}},
		{`(?a)k`, IgnoreCase, "kK\u212a", []string{"k", "K"}},
		// Verbose mode, quantifier braces, escapes.
		{"(?x) a b # comment\n c", 0, "abc", []string{"abc"}},
		{`a{,2}`, 0, "aaa", []string{"aa", "a", ""}},
		{`a{2`, 0, "a{2", []string{"a{2"}},
		{`a{}`, 0, "a{}", []string{"a{}"}},
		{`\x41\101\u0041\U00000041`, 0, "AAAA", []string{"AAAA"}},
		{`a++a`, 0, "aaa", []string{}},
		{`(?>a+)b`, 0, "aab", []string{"aab"}},
	}
	for _, c := range cases {
		re, err := Compile(c.pattern, c.flags)
		if err != nil {
			t.Errorf("Compile(%q): %v", c.pattern, err)
			continue
		}
		if got := findall(t, re, c.text); !reflect.DeepEqual(got, c.want) {
			t.Errorf("findall(%q, %q) = %q, want %q (.NET: %s)", c.pattern, c.text, got, c.want, re.dotnet)
		}
	}
}

func TestPythonRegexErrors(t *testing.T) {
	var pattern *PatternError
	var raised *RaisedError
	isPattern := func(err error) bool { return errors.As(err, &pattern) }
	isRaised := func(err error) bool { return errors.As(err, &raised) }
	isUnsupported := func(err error) bool { return errors.Is(err, ErrUnsupported) }
	cases := []struct {
		pattern string
		is      func(error) bool
	}{
		// re.error in Python although .NET would accept them.
		{`(?<=a+)b`, isPattern},
		{`(?<=a|bc)d`, isPattern},
		{`(?<name>a)`, isPattern},
		{`(?'name'a)`, isPattern},
		{`\k<x>`, isPattern},
		{`\p{L}`, isPattern},
		{`\q`, isPattern},
		{`[\8]`, isPattern},
		{`a(?i)b`, isPattern},
		{`(?-i)a`, isPattern},
		{`\1(a)`, isPattern},
		{`(a\1)`, isPattern},
		{`(?<=(a)\1)b`, isPattern},
		{`(?P<x>a)(?P<x>b)`, isPattern},
		{`(?P<1>a)`, isPattern},
		{`(?(1)a|b|c)`, isPattern},
		{`(?(3)a|b)(c)`, isPattern},
		{`(?L)x`, isPattern},
		// re.error in both.
		{`(`, isPattern},
		{`a)`, isPattern},
		{`[`, isPattern},
		{`[z-a]`, isPattern},
		{`a**`, isPattern},
		{`*a`, isPattern},
		{`\b*`, isPattern},
		{`a{2,1}`, isPattern},
		{`\`, isPattern},
		{`\x4`, isPattern},
		{`\U00110000`, isPattern},
		// Other exceptions in Python.
		{`a{4294967295}`, isRaised},
		{`(?a)(?u)x`, isRaised},
		// Beyond this port.
		{`\N{NO SUCH CHARACTER}`, isPattern},
		{`\N{KEYCAP NUMBER SIGN}`, isPattern}, // a named sequence
		{`\N{hangul syllable ga}`, isPattern},
		{`\N{DIGIT ONE`, isPattern},
		{`a{3000000000}`, isUnsupported},
	}
	for _, c := range cases {
		_, err := Compile(c.pattern, IgnoreCase)
		if err == nil || !c.is(err) {
			t.Errorf("Compile(%q) error = %v", c.pattern, err)
		}
	}

	// Accepted by Python.
	for _, p := range []string{`(?<=ab|cd)e`, `(?<=(a))\1`, `(a)(?<=\1)`, `(?(1)a|b)(c)`, `(?:^)*`, `(?=a)*`,
		`(?x)(?i)a`, `(?ix)a b`, `\N{DIGIT ONE}`, `[\N{digit one}-\N{DIGIT NINE}]`,
		`\N{HANGUL SYLLABLE GAG}`, `\N{line feed}`, `\N{CJK UNIFIED IDEOGRAPH-4E00}`, `(?#c)a`, `a(?#c)*`, `[]]`, `[^]]`, `[a-]`, `\-`, `(?!)`, `(?s:a.)b`} {
		if _, err := Compile(p, 0); err != nil {
			t.Errorf("Compile(%q): %v", p, err)
		}
	}
}

func TestPythonRegexCache(t *testing.T) {
	a, err := CompileCached(`Answer:\s*(\w)`, IgnoreCase)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := CompileCached(`Answer:\s*(\w)`, IgnoreCase)
	if a != b {
		t.Error("the cache compiled the same pattern twice")
	}
	if _, err := CompileCached(`(`, IgnoreCase); err == nil {
		t.Error("an invalid pattern compiled")
	}
}
