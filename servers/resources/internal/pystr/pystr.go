// Package pystr holds the pieces of Python's str semantics that the
// ported verifiers share, where Go's strings and unicode packages differ:
// which characters str.isspace() (and re's \s) counts, and str.lower()
// with its special cases (U+0130 and the final sigma).
package pystr

import (
	"strings"
	"unicode"
	"unicode/utf8"
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

// Lower is Python's str.lower(): the Unicode default lowercasing, which
// maps U+0130 to "i\u0307" and a capital sigma that ends a word to the
// final form U+03C2. Bytes that are not valid UTF-8 are kept as they are.
func Lower(s string) string {
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		return strings.ToLower(s)
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteByte(s[i])
		} else {
			first, second := lowerRune(r, func() bool { return finalSigmaIn(s, i, i+size) })
			b.WriteRune(first)
			if second != 0 {
				b.WriteRune(second)
			}
		}
		i += size
	}
	return b.String()
}

// AppendLower appends rs[i] lowered as Lower lowers it (the rune's
// neighbours decide a sigma), for a caller that lowers rune by rune.
func AppendLower(out, rs []rune, i int) []rune {
	first, second := lowerRune(rs[i], func() bool { return FinalSigma(rs, i) })
	out = append(out, first)
	if second != 0 {
		out = append(out, second)
	}
	return out
}

// lowerRune is r lowered as str.lower() lowers it: one rune, or two
// (second is 0 otherwise). final reports whether a capital sigma ends a
// word; it is asked only for one.
func lowerRune(r rune, final func() bool) (first, second rune) {
	switch r {
	case 0x130: // İ: i followed by a combining dot above
		return 'i', 0x307
	case 0x3a3: // Σ: the final form at the end of a cased word
		if final() {
			return 0x3c2, 0
		}
		return 0x3c3, 0
	}
	return unicode.ToLower(r), 0
}

// finalSigmaIn is FinalSigma for the capital sigma at s[start:end].
func finalSigmaIn(s string, start, end int) bool {
	before := false
	for j := start; j > 0; {
		r, size := utf8.DecodeLastRuneInString(s[:j])
		j -= size
		if !IsCaseIgnorable(r) {
			before = IsCased(r)
			break
		}
	}
	if !before {
		return false
	}
	for j := end; j < len(s); {
		r, size := utf8.DecodeRuneInString(s[j:])
		j += size
		if !IsCaseIgnorable(r) {
			return !IsCased(r)
		}
	}
	return true
}
