package equivalence

import (
	"strings"
	"unicode"
)

// Normalize prepares a string for comparison the way the upstream server
// does in Python: s.strip(), then .lower(), then every run of whitespace
// replaced by a single space. See the package documentation for the
// character classes involved. Invalid UTF-8 bytes become U+FFFD.
func Normalize(s string) string {
	return string(normalizeRunes([]rune(s)))
}

// normalizeRunes is Normalize on code points. It does not modify r; the
// result is a new slice.
func normalizeRunes(r []rune) []rune {
	lo, hi := 0, len(r)
	for lo < hi && isSpace(r[lo]) {
		lo++
	}
	for hi > lo && isSpace(r[hi-1]) {
		hi--
	}
	r = r[lo:hi]

	// Lowercasing and whitespace collapsing are done in one pass. That is
	// equivalent to doing them one after the other because lowercasing
	// maps no whitespace to anything else and nothing else to whitespace.
	out := make([]rune, 0, len(r)+1)
	inSpace := false
	for i, c := range r {
		if isSpace(c) {
			if !inSpace {
				out = append(out, ' ')
				inSpace = true
			}
			continue
		}
		inSpace = false
		switch c {
		case '\u0130':
			// Full lowercase mapping: dotted capital I keeps its dot as
			// a combining character.
			out = append(out, 'i', '\u0307')
		case '\u03a3':
			if endsWord(r, i) {
				out = append(out, '\u03c2')
			} else {
				out = append(out, '\u03c3')
			}
		default:
			out = append(out, unicode.ToLower(c))
		}
	}
	return out
}

// isSpace reports whether Python's str.isspace holds for c, which is
// also what the pattern \s matches in a str regular expression.
func isSpace(c rune) bool {
	switch c {
	case '\t', '\n', '\v', '\f', '\r', ' ',
		'\x1c', '\x1d', '\x1e', '\x1f',
		'\u0085', '\u00a0', '\u1680',
		'\u2028', '\u2029', '\u202f', '\u205f', '\u3000':
		return true
	}
	return c >= '\u2000' && c <= '\u200a'
}

// endsWord reports whether the capital sigma at r[i] takes the final form
// when lowercased: looking past case-ignorable code points, a cased code
// point comes before it and none comes after it.
func endsWord(r []rune, i int) bool {
	before := false
	for j := i - 1; j >= 0; j-- {
		if !caseIgnorable(r[j]) {
			before = cased(r[j])
			break
		}
	}
	if !before {
		return false
	}
	for j := i + 1; j < len(r); j++ {
		if !caseIgnorable(r[j]) {
			return !cased(r[j])
		}
	}
	return true
}

// cased is the Unicode Cased property: uppercase, lowercase or titlecase.
func cased(c rune) bool {
	return unicode.IsUpper(c) || unicode.IsLower(c) || unicode.IsTitle(c) ||
		unicode.Is(unicode.Other_Lowercase, c) || unicode.Is(unicode.Other_Uppercase, c)
}

// caseIgnorable is the Unicode Case_Ignorable property: nonspacing and
// enclosing marks, format characters, modifier letters and symbols, and
// the apostrophe-like and mid-word punctuation of word segmentation
// (Word_Break MidLetter, MidNumLet and Single_Quote).
func caseIgnorable(c rune) bool {
	switch c {
	case '\'', '.', ':', '\u00b7', '\u0387', '\u055f', '\u05f4',
		'\u2018', '\u2019', '\u2024', '\u2027',
		'\ufe13', '\ufe52', '\ufe55', '\uff07', '\uff0e', '\uff1a':
		return true
	}
	return unicode.In(c, unicode.Mn, unicode.Me, unicode.Cf, unicode.Lm, unicode.Sk)
}

// JoinTexts builds the answer from the output_text part texts of a
// response, in order: they are concatenated with no separator.
func JoinTexts(texts []string) string {
	return strings.Join(texts, "")
}
