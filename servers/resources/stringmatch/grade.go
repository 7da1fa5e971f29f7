package stringmatch

import (
	"github.com/gymlens/gymlens/servers/resources/internal/pystr"

	"math"
	"regexp"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Rule names the check of the case-insensitive grader that accepted an
// answer. It is diagnostic only: upstream reports just the reward.
type Rule string

// The grader's checks, in the order they are tried.
const (
	// RuleNone: no check accepted the answer (reward 0), or nothing was
	// graded.
	RuleNone Rule = ""
	// RuleCaseSensitive: the trimmed strings are identical (only with
	// case_sensitive set).
	RuleCaseSensitive Rule = "case_sensitive"
	// RuleExact: identical after normalisation.
	RuleExact Rule = "exact"
	// RuleFloat: the same floating-point value ("$", "\$" and "\%"
	// removed first).
	RuleFloat Rule = "float"
	// RuleCommaNumber: identical once commas between digits are removed
	// and "\%" is read as "%".
	RuleCommaNumber Rule = "comma_number"
	// RuleLaTeX: identical once LaTeX formatting commands, math
	// delimiters and "$" are removed and whitespace is collapsed.
	RuleLaTeX Rule = "latex"
	// RuleList: identical once ',' and ';' read as spaces and every "and"
	// and "or", even inside a word, is removed (unless that shortens the
	// value by 10% or more).
	RuleList Rule = "list"
	// RuleUSState: identical once US state names become postal codes.
	RuleUSState Rule = "us_state"
	// RuleSoftNumeric: numbers within about 1% of each other, reward 0.98.
	RuleSoftNumeric Rule = "soft_numeric"
	// RuleUnits: identical once LaTeX and common units are removed.
	RuleUnits Rule = "units"
	// RuleSoftNumericUnits: RuleSoftNumeric applied to the values that
	// RuleUnits compares, reward 0.98.
	RuleSoftNumericUnits Rule = "soft_numeric_units"
)

// SoftReward is the reward of an answer that is only numerically close.
const SoftReward = 0.98

// Grade is the case-insensitive grader: the reward for predicted against
// expected (1, SoftReward or 0) and the check that decided it. Both are
// NFKC-normalised, lose one pair of matching outer quotes, are lowercased
// and lose trailing '.', '!' and '?' (unless that leaves nothing), then
// the checks listed with the Rule constants are tried in order.
//
// The soft check runs before the unit-stripping one and answers 0.98
// whenever its score exceeds 0.98, so numerically equal values that only
// the soft check can read ("5 cm" against "5", "50%" against "50", "1,000"
// against "1000.0") score 0.98, not 1.
func Grade(expected, predicted string) (float64, Rule) {
	pred := norm.NFKC.String(predicted)
	gt := norm.NFKC.String(expected)
	pred = stripTrailingPunctuation(pystr.Lower(stripOuterQuotes(pred)))
	gt = stripTrailingPunctuation(pystr.Lower(stripOuterQuotes(gt)))

	switch {
	case pred == gt:
		return 1, RuleExact
	case normalizeFloat(pred) == normalizeFloat(gt):
		return 1, RuleFloat
	case normalizeNumbers(pred) == normalizeNumbers(gt):
		return 1, RuleCommaNumber
	case normalizeLaTeX(pred) == normalizeLaTeX(gt):
		return 1, RuleLaTeX
	case normalizeList(pred) == normalizeList(gt):
		return 1, RuleList
	case normalizeStates(pred) == normalizeStates(gt):
		return 1, RuleUSState
	case softNumeric(gt, pred) > SoftReward:
		return SoftReward, RuleSoftNumeric
	}
	predBare := stripUnits(pred)
	gtBare := stripUnits(gt)
	switch {
	case predBare == gtBare:
		return 1, RuleUnits
	case softNumeric(gtBare, predBare) > SoftReward:
		return SoftReward, RuleSoftNumericUnits
	}
	return 0, RuleNone
}

// stripUnits removes LaTeX formatting, spells out Unicode math signs and
// drops units, then trims.
func stripUnits(s string) string {
	return pystr.Strip(unitsRE.ReplaceAllString(unicodeMath(normalizeLaTeX(s)), ""))
}

// stripOuterQuotes drops one pair of matching ' or " around s.
func stripOuterQuotes(s string) string {
	if len(s) >= 2 && s[0] == s[len(s)-1] && (s[0] == '"' || s[0] == '\'') {
		return s[1 : len(s)-1]
	}
	return s
}

// stripTrailingPunctuation drops trailing '.', '!' and '?', unless s is
// made of nothing else.
func stripTrailingPunctuation(s string) string {
	if t := strings.TrimRight(s, ".!?"); t != "" {
		return t
	}
	return s
}

// replaceInTurn removes each of olds from s, everywhere, one after the
// other. Unlike a single strings.Replacer pass, a removal can join text
// into a later pattern, which is then removed too, as in upstream's
// chained str.replace calls.
func replaceInTurn(s string, olds ...string) string {
	for _, old := range olds {
		s = strings.ReplaceAll(s, old, "")
	}
	return s
}

// normalizeFloat is Python's repr of the float s denotes once "\%", "\$"
// and "$" are removed, or s itself when that is not a number.
func normalizeFloat(s string) string {
	if f, ok := pyFloat(pystr.Strip(replaceInTurn(s, `\%`, `\$`, "$"))); ok {
		return pyFloatRepr(f)
	}
	return s
}

// digitCommaRE is a comma between two runs of decimal digits (Python's \d
// is any Unicode decimal digit).
var digitCommaRE = regexp.MustCompile(`(\p{Nd}+),(\p{Nd}+)`)

// normalizeNumbers removes commas between digits, scanning left to right
// without overlap ("1,2,3" becomes "12,3", as upstream), and turns "\%"
// into "%".
func normalizeNumbers(s string) string {
	s = digitCommaRE.ReplaceAllString(s, "${1}${2}")
	return strings.ReplaceAll(s, `\%`, "%")
}

// normalizeList reads ',' and ';' as spaces and deletes every "and" and
// "or", even inside words, then collapses whitespace; but when that
// shortens s by 10% or more (in code points) s is returned unchanged.
func normalizeList(s string) string {
	origLen := utf8.RuneCountInString(s)
	t := strings.ReplaceAll(s, ",", " ")
	t = strings.ReplaceAll(t, ";", " ")
	t = strings.ReplaceAll(t, "and", " ")
	t = strings.ReplaceAll(t, "or", " ")
	if float64(utf8.RuneCountInString(t)) < 0.9*float64(origLen) {
		return s
	}
	return pyCollapseSpace(t)
}

// latexCommands are the commands whose braces normalizeLaTeX removes, in
// upstream's order.
var latexCommands = []string{
	`\boxed`, `\text`, `\textbf`, `\textit`, `\texttt`, `\mathrm`, `\mathbf`, `\mathit`,
	`\mathsf`, `\mathbb`, `\mathcal`, `\emph`, `\url`,
}

// normalizeLaTeX unwraps the formatting commands, removes math delimiters
// and "$", and collapses whitespace.
func normalizeLaTeX(s string) string {
	for _, cmd := range latexCommands {
		s = removeLaTeXCommand(cmd, s)
	}
	return pyCollapseSpace(replaceInTurn(s, `\(`, `\)`, `\[`, `\]`, "$"))
}

// removeLaTeXCommand replaces each cmd{body} with body, first occurrence
// first, until none is left. The body ends at the brace that balances
// the opening one; when there is none, only "cmd{" is removed.
func removeLaTeXCommand(cmd, s string) string {
	open := cmd + "{"
	for {
		at := strings.Index(s, open)
		if at < 0 {
			return s
		}
		prefix, suffix := s[:at], s[at+len(open):]
		end := -1
		depth := 1
		for i := 0; i < len(suffix); i++ {
			switch suffix[i] {
			case '{':
				depth++
			case '}':
				depth--
			}
			if depth == 0 {
				end = i
				break
			}
		}
		if end < 0 {
			s = prefix + suffix
		} else {
			s = prefix + suffix[:end] + suffix[end+1:]
		}
	}
}

// usStates maps state names (and the District of Columbia) to postal
// codes. Replacements are applied in this order, so names that contain
// another name ("west virginia", "arkansas") come before it.
var usStates = [][2]string{
	{"district of columbia", "DC"}, {"new hampshire", "NH"}, {"new jersey", "NJ"},
	{"new mexico", "NM"}, {"new york", "NY"}, {"north carolina", "NC"},
	{"north dakota", "ND"}, {"rhode island", "RI"}, {"south carolina", "SC"},
	{"south dakota", "SD"}, {"west virginia", "WV"}, {"alabama", "AL"},
	{"alaska", "AK"}, {"arizona", "AZ"}, {"arkansas", "AR"}, {"california", "CA"},
	{"colorado", "CO"}, {"connecticut", "CT"}, {"delaware", "DE"}, {"florida", "FL"},
	{"georgia", "GA"}, {"hawaii", "HI"}, {"idaho", "ID"}, {"illinois", "IL"},
	{"indiana", "IN"}, {"iowa", "IA"}, {"kansas", "KS"}, {"kentucky", "KY"},
	{"louisiana", "LA"}, {"maine", "ME"}, {"maryland", "MD"}, {"massachusetts", "MA"},
	{"michigan", "MI"}, {"minnesota", "MN"}, {"mississippi", "MS"}, {"missouri", "MO"},
	{"montana", "MT"}, {"nebraska", "NE"}, {"nevada", "NV"}, {"ohio", "OH"},
	{"oklahoma", "OK"}, {"oregon", "OR"}, {"pennsylvania", "PA"}, {"tennessee", "TN"},
	{"texas", "TX"}, {"utah", "UT"}, {"vermont", "VT"}, {"virginia", "VA"},
	{"washington", "WA"}, {"wisconsin", "WI"}, {"wyoming", "WY"},
}

// normalizeStates replaces state names by postal codes (each name in
// turn, everywhere), applies normalizeList and lowercases the result.
// The codes are upper case while they pass through normalizeList, so
// "OR" (Oregon) is not taken for the word "or".
func normalizeStates(s string) string {
	for _, st := range usStates {
		s = strings.ReplaceAll(s, st[0], st[1])
	}
	return pystr.Lower(normalizeList(s))
}

// unicodeMath spells Unicode math signs the LaTeX way (or as their ASCII
// counterparts). No replacement produces a character another one reads,
// so replacing them all at once equals upstream's one-by-one order.
var unicodeMath = strings.NewReplacer(
	"°", `^\circ`, "²", "^2", "³", "^3", "⁴", "^4", "⁵", "^5", "⁶", "^6", "⁷", "^7",
	"⁸", "^8", "⁹", "^9", "√", `\sqrt`, "﹣", "-", "﹢", "+", "﹦", "=", "﹤", "<",
	"﹥", ">", "：", ":", "π", `\pi`,
).Replace

// unitsRE matches degree signs and the metric units the grader ignores.
// It is upstream's pattern; like it, the bare "m" alternative deletes
// every letter m.
var unitsRE = regexp.MustCompile(`\^\{?\\circ\}?|\\circ|°|cm[²³]?|mm|km|m[²³]?|kg`)

// numericCleaner removes the currency, percent and comma characters that
// the soft check ignores. They are single characters, so removing them
// all at once equals removing them one kind after another.
var numericCleaner = strings.NewReplacer("$", "", "£", "", "€", "", "%", "", ",", "")

// stripNumeric prepares s for the soft check: currency, percent and
// commas removed, Unicode math signs spelled out, units removed, "\%" and
// "\$" removed, trimmed.
func stripNumeric(s string) string {
	s = unitsRE.ReplaceAllString(unicodeMath(numericCleaner.Replace(s)), "")
	return pystr.Strip(replaceInTurn(s, `\%`, `\$`))
}

// softNumeric scores how close two numbers are: (1 - relative error)²,
// floored at 0, the error taken relative to |gt| (at least 1e-9). It is
// 0 when either side is not a number; NaNs and infinities score 0 as in
// Python.
func softNumeric(gt, pred string) float64 {
	p, ok := pyFloat(stripNumeric(pred))
	if !ok {
		return 0
	}
	g, ok := pyFloat(stripNumeric(gt))
	if !ok {
		return 0
	}
	rel := math.Abs(p-g) / pyMax(math.Abs(g), 1e-9)
	x := pyMax(0, 1-rel)
	return x * x
}
