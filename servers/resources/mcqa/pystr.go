package mcqa

import (
	"github.com/gymlens/gymlens/servers/resources/internal/pystr"

	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// This file holds the few pieces of Python's str semantics that the
// grading rules depend on. Go's strings and unicode packages are close to
// them but not identical: str.strip() and str.split() know four more
// whitespace characters (U+001C..U+001F), str.upper() applies the
// multi-character mappings of Unicode's SpecialCasing (ß -> SS), and
// str.lower() maps İ to two characters and a capital sigma at the end of
// a word to the final form ς.

// pySplit is Python's s.split() with no argument: runs of whitespace
// separate fields and no field is empty.
func pySplit(s string) []string { return strings.FieldsFunc(s, pystr.IsSpace) }

// pyLen is Python's len() of a str: the number of code points.
func pyLen(s string) int { return utf8.RuneCountInString(s) }

// pyIsAlpha is Python's str.isalpha() for a one-character string: the
// character's general category is a letter one (Lu, Ll, Lt, Lm, Lo).
func pyIsAlpha(r rune) bool { return unicode.IsLetter(r) }

// isASCII reports whether s has only 7-bit characters, for which Python's
// and Go's case mappings agree.
func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// pyUpper is Python's s.upper().
func pyUpper(s string) string {
	if isASCII(s) {
		return strings.ToUpper(s)
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		if m, ok := specialUpper[r]; ok {
			b.WriteString(m)
			continue
		}
		b.WriteRune(unicode.ToUpper(r))
	}
	return b.String()
}

// specialUpper holds the characters whose uppercase form is more than
// one character (Unicode SpecialCasing, unconditional part), as Python
// applies them. Every other character maps through unicode.ToUpper.
var specialUpper = parseCodeTable(
	"00DF:0053 0053;0149:02BC 004E;01F0:004A 030C;0390:0399 0308 0301;" +
		"03B0:03A5 0308 0301;0587:0535 0552;1E96:0048 0331;1E97:0054 0308;" +
		"1E98:0057 030A;1E99:0059 030A;1E9A:0041 02BE;1F50:03A5 0313;" +
		"1F52:03A5 0313 0300;1F54:03A5 0313 0301;1F56:03A5 0313 0342;" +
		"1F80:1F08 0399;1F81:1F09 0399;1F82:1F0A 0399;1F83:1F0B 0399;" +
		"1F84:1F0C 0399;1F85:1F0D 0399;1F86:1F0E 0399;1F87:1F0F 0399;" +
		"1F88:1F08 0399;1F89:1F09 0399;1F8A:1F0A 0399;1F8B:1F0B 0399;" +
		"1F8C:1F0C 0399;1F8D:1F0D 0399;1F8E:1F0E 0399;1F8F:1F0F 0399;" +
		"1F90:1F28 0399;1F91:1F29 0399;1F92:1F2A 0399;1F93:1F2B 0399;" +
		"1F94:1F2C 0399;1F95:1F2D 0399;1F96:1F2E 0399;1F97:1F2F 0399;" +
		"1F98:1F28 0399;1F99:1F29 0399;1F9A:1F2A 0399;1F9B:1F2B 0399;" +
		"1F9C:1F2C 0399;1F9D:1F2D 0399;1F9E:1F2E 0399;1F9F:1F2F 0399;" +
		"1FA0:1F68 0399;1FA1:1F69 0399;1FA2:1F6A 0399;1FA3:1F6B 0399;" +
		"1FA4:1F6C 0399;1FA5:1F6D 0399;1FA6:1F6E 0399;1FA7:1F6F 0399;" +
		"1FA8:1F68 0399;1FA9:1F69 0399;1FAA:1F6A 0399;1FAB:1F6B 0399;" +
		"1FAC:1F6C 0399;1FAD:1F6D 0399;1FAE:1F6E 0399;1FAF:1F6F 0399;" +
		"1FB2:1FBA 0399;1FB3:0391 0399;1FB4:0386 0399;1FB6:0391 0342;" +
		"1FB7:0391 0342 0399;1FBC:0391 0399;1FC2:1FCA 0399;1FC3:0397 0399;" +
		"1FC4:0389 0399;1FC6:0397 0342;1FC7:0397 0342 0399;1FCC:0397 0399;" +
		"1FD2:0399 0308 0300;1FD3:0399 0308 0301;1FD6:0399 0342;" +
		"1FD7:0399 0308 0342;1FE2:03A5 0308 0300;1FE3:03A5 0308 0301;" +
		"1FE4:03A1 0313;1FE6:03A5 0342;1FE7:03A5 0308 0342;1FF2:1FFA 0399;" +
		"1FF3:03A9 0399;1FF4:038F 0399;1FF6:03A9 0342;1FF7:03A9 0342 0399;" +
		"1FFC:03A9 0399;FB00:0046 0046;FB01:0046 0049;FB02:0046 004C;" +
		"FB03:0046 0046 0049;FB04:0046 0046 004C;FB05:0053 0054;" +
		"FB06:0053 0054;FB13:0544 0546;FB14:0544 0535;FB15:0544 053B;" +
		"FB16:054E 0546;FB17:0544 053D")

// parseCodeTable reads "KKKK:VVVV VVVV;..." (hexadecimal code points)
// into a map from the key to the string of its values.
func parseCodeTable(s string) map[rune]string {
	m := make(map[rune]string)
	for _, entry := range strings.Split(s, ";") {
		k, v, ok := strings.Cut(entry, ":")
		if !ok {
			panic("mcqa: bad code table entry " + strconv.Quote(entry))
		}
		var b strings.Builder
		for _, h := range strings.Fields(v) {
			b.WriteRune(mustHex(h))
		}
		m[mustHex(k)] = b.String()
	}
	return m
}

func mustHex(h string) rune {
	n, err := strconv.ParseUint(h, 16, 32)
	if err != nil {
		panic("mcqa: bad code point " + strconv.Quote(h))
	}
	return rune(n)
}

// pyStripChars is Python's s.strip(chars).
func pyStripChars(s, chars string) string {
	return strings.Trim(s, chars)
}
