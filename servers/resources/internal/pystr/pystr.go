// Package pystr holds the pieces of Python's str semantics that the
// ported verifiers share, where Go's strings and unicode packages differ:
// which characters str.isspace() (and re's \s) counts, and the Unicode
// properties behind str.lower()'s final-sigma rule.
package pystr

import (
	"strings"
	"unicode"
)

// IsSpace reports whether Python's str.isspace() holds for r. Unlike
// unicode.IsSpace it includes the information separators U+001C..U+001F.
func IsSpace(r rune) bool {
	switch {
	case r <= 0x20:
		return r == ' ' || (r >= '\t' && r <= '\r') || (r >= 0x1c && r <= 0x1f)
	case r < 0x85:
		return false
	}
	switch r {
	case 0x85, 0xa0, 0x1680, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000:
		return true
	}
	return r >= 0x2000 && r <= 0x200a
}

// Strip is Python's s.strip() with no argument.
func Strip(s string) string { return strings.TrimFunc(s, IsSpace) }

// IsCased is Unicode's Cased property.
func IsCased(r rune) bool {
	return unicode.In(r, unicode.Lu, unicode.Ll, unicode.Lt, unicode.Other_Lowercase, unicode.Other_Uppercase)
}

// IsCaseIgnorable is Unicode's Case_Ignorable property: marks, format
// characters, modifier letters and symbols, and the word-internal
// punctuation of the Word_Break classes MidLetter, MidNumLet and
// Single_Quote.
func IsCaseIgnorable(r rune) bool {
	switch r {
	case '\'', '.', ':', 0xb7, 0x387, 0x55f, 0x5f4, 0x2018, 0x2019, 0x2024, 0x2027,
		0xfe13, 0xfe52, 0xfe55, 0xff07, 0xff0e, 0xff1a:
		return true
	}
	return unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf, unicode.Lm, unicode.Sk)
}

// FinalSigma is CPython's rule for lowering the capital sigma at rs[i]:
// skipping case-ignorable characters, a cased character must precede it
// and none may follow it.
func FinalSigma(rs []rune, i int) bool {
	j := i - 1
	for j >= 0 && IsCaseIgnorable(rs[j]) {
		j--
	}
	if j < 0 || !IsCased(rs[j]) {
		return false
	}
	j = i + 1
	for j < len(rs) && IsCaseIgnorable(rs[j]) {
		j++
	}
	return j == len(rs) || !IsCased(rs[j])
}
